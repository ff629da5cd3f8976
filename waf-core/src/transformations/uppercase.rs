//! `t:uppercase`: ASCII letters `a`-`z` become `A`-`Z`; every other byte is kept.
//!
//! ```text
//! SecRule REQUEST_METHOD "@streq POST" "id:1,t:uppercase,pass"
//! ```

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    match input.iter().position(u8::is_ascii_lowercase) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut out = input.to_vec();
            out[first..].make_ascii_uppercase();
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uppers_ascii_only() {
        assert_eq!(apply(b"tEsT\xe9\x00").as_ref(), b"TEST\xe9\x00");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"TEST\xff1"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
