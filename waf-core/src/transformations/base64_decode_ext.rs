//! `t:base64DecodeExt`: forgiving Base64 decoding that skips every byte outside the
//! alphabet (whitespace, `.`, ...) instead of stopping, and stops only at `=`.
//!
//! ```text
//! SecRule ARGS:data "@contains <script" "id:1,t:base64DecodeExt,deny"
//! ```
//!
//! This is ModSecurity's `decode_forgiven`; Coraza only skips whitespace and `.`. Both
//! agree on the test vectors (`P.HNjcmlwdD5...` decodes to `<script>...`).

use std::borrow::Cow;

use super::base64_decode::{decode, Leniency};

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(decode(input, Leniency::Forgiving))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_invalid_bytes() {
        assert_eq!(
            apply(b"P.HNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==").as_ref(),
            b"<script>alert(1)</script>"
        );
        assert_eq!(apply(b"VG Vz\xffdE\tNh").as_ref(), b"TestCa");
        assert_eq!(apply(b"VGVz=dENh").as_ref(), b"Tes");
        assert_eq!(apply(b"").as_ref(), b"");
    }
}
