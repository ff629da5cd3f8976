//! `t:md5`: replaces the value with its MD5 digest, as 16 raw bytes (not hex), like
//! ModSecurity. Chain `t:hexEncode` to compare against a hex string.
//!
//! ```text
//! SecRule ARGS:token "@streq 098f6bcd4621d373cade4e832627b4f6" "id:1,t:md5,t:hexEncode,pass"
//! ```

use std::borrow::Cow;

use ::md5::{Digest, Md5};

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(Md5::digest(input).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_digest() {
        let out = apply(b"test");
        assert_eq!(out.len(), 16);
        assert_eq!(
            out.as_ref(),
            b"\x09\x8f\x6b\xcd\x46\x21\xd3\x73\xca\xde\x4e\x83\x26\x27\xb4\xf6"
        );
    }
}
