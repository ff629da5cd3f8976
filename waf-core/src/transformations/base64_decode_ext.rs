//! `t:base64DecodeExt`: forgiving Base64 decoding that skips every byte outside the
//! alphabet (whitespace, `.`, `=`, ...) instead of stopping.
//!
//! ```text
//! SecRule ARGS:data "@contains <script" "id:1,t:base64DecodeExt,deny"
//! ```
//!
//! This is libmodsecurity's `decode_forgiven_engine` (`src/utils/base64.cc`), minus its
//! quirk of returning an empty value when a `=` follows a lone dangling digit. Coraza skips
//! only whitespace and `.` and stops at anything else; both agree on the test vectors
//! (`P.HNjcmlwdD5...` decodes to `<script>...`).

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
        assert_eq!(apply(b"VGVz=dENh").as_ref(), b"TestCa");
        assert_eq!(apply(b"").as_ref(), b"");
    }
}
