//! `t:replaceComments`: replaces each C-style comment `/* ... */` with one space; an
//! unterminated comment is replaced by one space too. A lone `*/` is kept.
//!
//! ```text
//! SecRule ARGS "@rx union\s+select" "id:1,t:urlDecodeUni,t:replaceComments,deny"
//! ```
//!
//! As ModSecurity's `replace_comments.cc`: only `/* */` counts (not `--`, `#` or `<!--`).

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = memchr::memmem::find(input, b"/*") else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut rest = &input[first..];
    loop {
        // `rest` starts with `/*` here.
        match memchr::memmem::find(&rest[2..], b"*/") {
            Some(end) => {
                out.push(b' ');
                rest = &rest[2 + end + 2..];
            }
            None => {
                out.push(b' ');
                break;
            }
        }
        match memchr::memmem::find(rest, b"/*") {
            Some(start) => {
                out.extend_from_slice(&rest[..start]);
                rest = &rest[start..];
            }
            None => {
                out.extend_from_slice(rest);
                break;
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_comments() {
        assert_eq!(
            apply(b"Before /* TestCase */ After").as_ref(),
            b"Before   After"
        );
        assert_eq!(apply(b"/**/").as_ref(), b" ");
        assert_eq!(apply(b"/*/").as_ref(), b" ");
        assert_eq!(apply(b"a/*x*/b/*y").as_ref(), b"a b ");
        assert_eq!(apply(b"UNION/**/SELECT").as_ref(), b"UNION SELECT");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test */ Case -- #"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
