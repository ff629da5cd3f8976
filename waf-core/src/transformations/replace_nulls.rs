//! `t:replaceNulls`: replaces every NUL byte with a space.
//!
//! ```text
//! SecRule ARGS "@rx union select" "id:1,t:replaceNulls,deny"
//! ```

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    match memchr::memchr(0, input) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut out = input.to_vec();
            for b in &mut out[first..] {
                if *b == 0 {
                    *b = b' ';
                }
            }
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_nuls() {
        assert_eq!(apply(b"\x00Test\x00Case\x00").as_ref(), b" Test Case ");
        assert!(matches!(apply(b"TestCase"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
