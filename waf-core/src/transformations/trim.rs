//! `t:trim`: removes whitespace from both ends of the value.
//!
//! ```text
//! SecRule ARGS:id "@rx ^\d+$" "id:1,t:trim,pass"
//! ```
//!
//! Whitespace is C's `isspace` in the "C" locale (space, `\t`, `\n`, `\v`, `\f`, `\r`), as in
//! ModSecurity; NUL and bytes above 0x7F are kept.

use std::borrow::Cow;

use super::is_c_space;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let start = input
        .iter()
        .position(|&b| !is_c_space(b))
        .unwrap_or(input.len());
    let end = input
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(start, |i| i + 1);
    if start == 0 && end == input.len() {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(input[start..end].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_both_ends() {
        assert_eq!(
            apply(b" \t Test \x00 Case \r\n\x0b\x0c").as_ref(),
            b"Test \x00 Case"
        );
        assert_eq!(apply(b" \t ").as_ref(), b"");
        assert_eq!(apply(b"\xa0x\xa0").as_ref(), b"\xa0x\xa0");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"a b"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
