//! NFKC folding of decoded values, applied by `t:urlDecodeUni` after it decodes.
//!
//! Backends that normalise text (Python's `unicodedata.normalize('NFKC', ...)` in identifier
//! and path handling, .NET's best-fit mapping, IDNA for host names, MySQL's
//! `utf8mb4_unicode_ci` comparisons) turn `＜ｓｃｒｉｐｔ＞` into `<script>` after the WAF has
//! looked; rules written for ASCII then miss the fullwidth spelling. Folding compatibility
//! forms before matching closes that: fullwidth and halfwidth forms, ligatures, circled and
//! super/subscript digits become the characters they stand for.
//!
//! Only valid UTF-8 runs are normalised; invalid bytes are kept as they are. An all-ASCII
//! value (the common case) is returned untouched without allocating, and so is a value NFKC
//! leaves unchanged (`unicode_normalization::is_nfkc_quick` answers most without copying).

use std::borrow::Cow;

use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

/// `input` with every valid UTF-8 run in NFKC.
pub(super) fn fold(input: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    if input.is_ascii() || !has_foldable(&input) {
        return input;
    }
    let unchanged = input
        .utf8_chunks()
        .all(|c| is_nfkc_quick(c.valid().chars()) == IsNormalized::Yes);
    if unchanged {
        return input;
    }
    let mut out = Vec::with_capacity(input.len());
    for chunk in input.utf8_chunks() {
        let valid = chunk.valid();
        // Spacing accents (´ ¨ ¸ ˘ ...) fold to a space and a combining mark: that hides
        // nothing and would change what character-class rules count (CRS 942430 counts
        // U+00B4 as a quote substitute), so they are kept.
        let mut from = 0;
        for (i, c) in valid.char_indices() {
            if spacing_accent(c) {
                push_nfkc(&valid[from..i], &mut out);
                out.extend_from_slice(&valid.as_bytes()[i..i + c.len_utf8()]);
                from = i + c.len_utf8();
            }
        }
        push_nfkc(&valid[from..], &mut out);
        out.extend_from_slice(chunk.invalid());
    }
    if out[..] == input[..] {
        return input;
    }
    Cow::Owned(out)
}

/// Whether `input` holds a valid UTF-8 character at or above U+00A0: below it (ASCII and
/// the C1 controls) NFKC changes nothing, so a value without one is returned as it is with
/// no decoding. Base64-decoded values are mostly invalid bytes, which `utf8_chunks` would
/// cut into many small chunks.
fn has_foldable(input: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        let len = match b {
            // ASCII, continuation bytes and the leads of overlong forms.
            ..=0xc1 => 0,
            0xc2 => match input.get(i + 1) {
                Some(0xa0..=0xbf) => return true,
                _ => 0,
            },
            0xc3..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => 0,
        };
        if len > 0
            && input
                .get(i..i + len)
                .is_some_and(|c| std::str::from_utf8(c).is_ok())
        {
            return true;
        }
        i += 1;
    }
    false
}

fn push_nfkc(s: &str, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    for c in s.nfkc() {
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
}

/// A non-ASCII character whose compatibility decomposition starts with a space.
fn spacing_accent(c: char) -> bool {
    !c.is_ascii()
        && c != '\u{a0}'
        && c.to_string().nfkd().next() == Some(' ')
        && c.to_string().nfkd().count() > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &[u8]) -> Vec<u8> {
        fold(Cow::Borrowed(s)).into_owned()
    }

    #[test]
    fn folds_compatibility_forms() {
        assert_eq!(f("＜ｓｃｒｉｐｔ＞".as_bytes()), b"<script>");
        assert_eq!(f("ﬁle ①②".as_bytes()), b"file 12");
        assert_eq!(f("ｶﾀｶﾅ".as_bytes()), "カタカナ".as_bytes());
        // Spacing accents stay (CRS 942430 counts U+00B4).
        assert_eq!(f("1´ OR ´1".as_bytes()), "1´ OR ´1".as_bytes());
        assert_eq!(f("´＜".as_bytes()), "´<".as_bytes());
    }

    #[test]
    fn finds_what_may_fold_as_the_chunks_would() {
        // Every 1- and 2-byte input, and 3-byte inputs around the leads: no false "nothing
        // to fold" against the valid chunks' characters.
        let mut inputs: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                inputs.push(vec![a, b]);
                if a >= 0xe0 && b >= 0x80 {
                    inputs.push(vec![a, b, 0xbc]);
                    inputs.push(vec![0xff, a, b, 0x80, 0x9c]);
                }
            }
        }
        for input in inputs {
            let above = input
                .utf8_chunks()
                .any(|c| c.valid().chars().any(|c| c >= '\u{a0}'));
            assert_eq!(has_foldable(&input), above, "{input:x?}");
        }
    }

    #[test]
    fn keeps_invalid_bytes_and_borrows_when_unchanged() {
        assert_eq!(f(b"\xff\xef\xbc\x9c\xc0"), b"\xff<\xc0");
        assert!(matches!(fold(Cow::Borrowed(b"plain")), Cow::Borrowed(_)));
        assert!(matches!(
            fold(Cow::Borrowed("café 東京".as_bytes())),
            Cow::Borrowed(_)
        ));
    }
}
