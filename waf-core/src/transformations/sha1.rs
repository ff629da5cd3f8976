//! `t:sha1`: replaces the value with its SHA-1 digest, as 20 raw bytes (not hex), like
//! ModSecurity. Chain `t:hexEncode` to compare against a hex string.
//!
//! ```text
//! SecRule ARGS:token "@streq a94a8fe5ccb19ba61c4c0873d391e987982fbbd3" "id:1,t:sha1,t:hexEncode,pass"
//! ```

use std::borrow::Cow;

use ::sha1::{Digest, Sha1};

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(Sha1::digest(input).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_digest() {
        let out = apply(b"test");
        assert_eq!(out.len(), 20);
        assert_eq!(out[..4], [0xa9, 0x4a, 0x8f, 0xe5]);
    }
}
