//! `t:removeCommentsChar`: removes the comment markers `/*`, `*/`, `<!--`, `-->`, `--` and
//! `#`, keeping the text between them.
//!
//! ```text
//! SecRule ARGS "@rx union select" "id:1,t:removeCommentsChar,deny"
//! ```
//!
//! As ModSecurity's `remove_comments_char.cc`, markers are matched left to right in that
//! order of preference, and the text after a removed marker is matched afresh (`/**/`
//! disappears entirely).

use std::borrow::Cow;

/// The length of the comment marker at the start of `s`, or 0.
fn marker_len(s: &[u8]) -> usize {
    if s.starts_with(b"/*") || s.starts_with(b"*/") {
        2
    } else if s.starts_with(b"<!--") {
        4
    } else if s.starts_with(b"-->") {
        3
    } else if s.starts_with(b"--") {
        2
    } else if s.first() == Some(&b'#') {
        1
    } else {
        0
    }
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = (0..input.len()).find(|&i| marker_len(&input[i..]) > 0) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        match marker_len(&input[i..]) {
            0 => {
                out.push(input[i]);
                i += 1;
            }
            n => i += n,
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_markers() {
        assert_eq!(
            apply(b"Before/* TestCase */After").as_ref(),
            b"Before TestCase After"
        );
        assert_eq!(apply(b"<!--a-->b--c#d").as_ref(), b"abcd");
        assert_eq!(apply(b"/**/x/*/").as_ref(), b"x/");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test - * / <! ->"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
