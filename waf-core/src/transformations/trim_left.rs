//! `t:trimLeft`: removes leading whitespace (C `isspace`: space, `\t`, `\n`, `\v`, `\f`,
//! `\r`).
//!
//! ```text
//! SecRule ARGS:cmd "@beginsWith rm" "id:1,t:trimLeft,deny"
//! ```

use std::borrow::Cow;

use super::is_c_space;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    match input.iter().position(|&b| !is_c_space(b)) {
        Some(0) => Cow::Borrowed(input),
        Some(start) => Cow::Owned(input[start..].to_vec()),
        None if input.is_empty() => Cow::Borrowed(input),
        None => Cow::Owned(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_left_only() {
        assert_eq!(apply(b" \t Test \x00 \r\n").as_ref(), b"Test \x00 \r\n");
        assert_eq!(apply(b"  ").as_ref(), b"");
        assert!(matches!(apply(b"x "), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
