//! `t:normalizePathWin` (also `t:normalisePathWin`): turns every `\` into `/`, then
//! normalises like `t:normalizePath`.
//!
//! ```text
//! SecRule REQUEST_FILENAME "@contains /windows/system32" "id:1,t:normalizePathWin,deny"
//! ```
//!
//! ModSecurity converts the backslashes as its normaliser reaches them; converting them all
//! first gives the same result, since the normaliser never looks ahead more than one byte.

use std::borrow::Cow;

use super::normalize_path;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr(b'\\', input).is_none() {
        return normalize_path::apply(input);
    }
    let mut buf: Vec<u8> = input
        .iter()
        .map(|&b| if b == b'\\' { b'/' } else { b })
        .collect();
    normalize_path::normalize(&mut buf);
    Cow::Owned(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_and_normalises() {
        assert_eq!(apply(br"\foo\bar\baz").as_ref(), b"/foo/bar/baz");
        assert_eq!(
            apply(br"dir\\.\\..\\.\\..\\..\\foo\\bar\\").as_ref(),
            b"../../foo/bar/"
        );
        assert_eq!(apply(br"c:\windows\..\x/y").as_ref(), b"c:/x/y");
        assert_eq!(apply(br"..\").as_ref(), b"../");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"/a/b"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
