//! `t:trimRight`: removes trailing whitespace (C `isspace`: space, `\t`, `\n`, `\v`, `\f`,
//! `\r`).
//!
//! ```text
//! SecRule ARGS:cmd "@endsWith .php" "id:1,t:trimRight,deny"
//! ```

use std::borrow::Cow;

use super::is_c_space;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let end = input
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(0, |i| i + 1);
    if end == input.len() {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(input[..end].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_right_only() {
        assert_eq!(
            apply(b" \t Test12 \x00 Case \t \r\n ").as_ref(),
            b" \t Test12 \x00 Case"
        );
        assert_eq!(apply(b"  ").as_ref(), b"");
        assert!(matches!(apply(b" x"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
