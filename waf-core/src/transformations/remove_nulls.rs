//! `t:removeNulls`: removes every NUL byte.
//!
//! ```text
//! SecRule ARGS "@rx <script" "id:1,t:urlDecodeUni,t:removeNulls,deny"
//! ```

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    match memchr::memchr(0, input) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut out = Vec::with_capacity(input.len() - 1);
            out.extend_from_slice(&input[..first]);
            out.extend(input[first..].iter().copied().filter(|&b| b != 0));
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_nuls() {
        assert_eq!(apply(b"\x00Test\x00\x00Case\x00").as_ref(), b"TestCase");
        assert_eq!(apply(b"\x00").as_ref(), b"");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test\x01Case"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
