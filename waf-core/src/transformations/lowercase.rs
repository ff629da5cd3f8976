//! `t:lowercase`: ASCII letters `A`-`Z` become `a`-`z`; every other byte is kept.
//!
//! ```text
//! SecRule ARGS "@contains select" "id:1,t:lowercase,deny"
//! ```
//!
//! ModSecurity uses C's `tolower` in the "C" locale, so bytes above 0x7F are untouched.

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    super::owned_if(input, apply_into)
}

/// Writes the lower-cased value into `out` (empty) when it differs from `input`.
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    match input.iter().position(u8::is_ascii_uppercase) {
        None => false,
        Some(first) => {
            out.extend_from_slice(input);
            out[first..].make_ascii_lowercase();
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowers_ascii_only() {
        assert_eq!(apply(b"TeSt\xC3\x89\x00X").as_ref(), b"test\xC3\x89\x00x");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"test\xff"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
