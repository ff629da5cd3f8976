//! `t:removeComments`: removes `/* ... */` and `<!-- ... -->` comments, and everything from
//! `--` or `#` to the end of the value.
//!
//! ```text
//! SecRule ARGS "@rx union select" "id:1,t:removeComments,deny"
//! ```
//!
//! Byte for byte ModSecurity's `remove_comments.cc`, quirks included, because the test
//! vectors encode them:
//! - the byte right after a closing `*/` or `-->` is copied without being looked at (so a
//!   `/*` there does not open a comment), and when the comment closes at the very end of the
//!   value that byte is C's terminating NUL: `/* x */` becomes a single NUL byte;
//! - an unterminated comment becomes one space;
//! - `--` and `#` outside a comment cut the value there (SQL line comments).

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let starts_comment = |i: usize| {
        input[i..].starts_with(b"/*")
            || input[i..].starts_with(b"<!--")
            || input[i..].starts_with(b"--")
            || input[i] == b'#'
    };
    let Some(first) = (0..input.len()).find(|&i| starts_comment(i)) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    let mut in_comment = false;
    while i < input.len() {
        let rest = &input[i..];
        if !in_comment {
            if rest.starts_with(b"/*") {
                in_comment = true;
                i += 2;
            } else if rest.starts_with(b"<!--") {
                in_comment = true;
                i += 4;
            } else if rest.starts_with(b"--") || rest[0] == b'#' {
                break;
            } else {
                out.push(rest[0]);
                i += 1;
            }
        } else {
            let close = if rest.starts_with(b"*/") {
                2
            } else if rest.starts_with(b"-->") {
                3
            } else {
                0
            };
            if close == 0 {
                i += 1;
            } else {
                in_comment = false;
                i += close;
                // ModSecurity copies the next byte unexamined, or the NUL terminator.
                out.push(input.get(i).copied().unwrap_or(0));
                i += 1;
            }
        }
    }
    if in_comment {
        out.push(b' ');
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_block_comments() {
        assert_eq!(apply(b"Before/* TestCase */After").as_ref(), b"BeforeAfter");
        assert_eq!(apply(b"a<!-- x -->b").as_ref(), b"ab");
        assert_eq!(apply(b"/* TestCase */").as_ref(), b"\x00");
        assert_eq!(apply(b"Before /* Test\nCase ").as_ref(), b"Before  ");
        assert_eq!(
            apply(b"Before /* */ ops */ Test").as_ref(),
            b"Before  ops */ Test"
        );
        assert_eq!(apply(b"/**//*x*/").as_ref(), b"/*x*/");
    }

    #[test]
    fn cuts_line_comments() {
        assert_eq!(apply(b"1 union -- x").as_ref(), b"1 union ");
        assert_eq!(apply(b"1 union # x").as_ref(), b"1 union ");
        assert_eq!(apply(b"/* -- */x").as_ref(), b"x");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(
            apply(b"Test */ Case - / * <!- ->"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
