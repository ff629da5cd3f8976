//! `t:compressWhitespace`: turns every run of whitespace into a single space.
//!
//! ```text
//! SecRule ARGS "@contains union select" "id:1,t:compressWhitespace,deny"
//! ```
//!
//! Whitespace is ModSecurity's: C's `isspace` (space, `\t`, `\n`, `\v`, `\f`, `\r`) and the
//! byte 0xA0 (Latin-1 non-breaking space). Coraza also counts 0x85 (Latin-1 NEL); we do not,
//! since 0x85 is far more often a UTF-8 continuation byte. A lone space stays as it is, so
//! text with single spaces comes back borrowed.

use std::borrow::Cow;

use super::is_c_space;

fn is_space(b: u8) -> bool {
    is_c_space(b) || b == 0xa0
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    // The first byte that the output would not copy verbatim: a whitespace byte other than a
    // space, or any whitespace right after whitespace.
    let first = input
        .iter()
        .enumerate()
        .position(|(i, &b)| is_space(b) && (b != b' ' || (i > 0 && is_space(input[i - 1]))));
    let Some(first) = first else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut in_space = first > 0 && is_space(input[first - 1]);
    for &b in &input[first..] {
        if is_space(b) {
            if !in_space {
                out.push(b' ');
                in_space = true;
            }
        } else {
            out.push(b);
            in_space = false;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compresses_runs() {
        assert_eq!(apply(b"  Test  \t   Case  ").as_ref(), b" Test Case ");
        assert_eq!(apply(b"a\tb").as_ref(), b"a b");
        assert_eq!(apply(b"a \xa0\x0b\x0cb\r\n").as_ref(), b"a b ");
        assert_eq!(apply(b"NUL\x00 x").as_ref(), b"NUL\x00 x");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test Case"), Cow::Borrowed(_)));
        assert!(matches!(apply(b" a b "), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
