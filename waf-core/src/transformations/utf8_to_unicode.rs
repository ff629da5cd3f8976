//! `t:utf8toUnicode`: replaces every multi-byte UTF-8 character with `%uXXXX`, its code
//! point in lower-case hex, padded to at least four digits (`é` -> `%u00e9`,
//! `😀` -> `%u1f600`), so that a later `t:urlDecodeUni` can fold it to ASCII.
//!
//! ```text
//! SecRule ARGS "@rx <script" "id:1,t:utf8toUnicode,t:urlDecodeUni,deny"
//! ```
//!
//! ASCII bytes are copied. A byte that does not start a valid UTF-8 sequence (a stray
//! continuation byte, a truncated sequence, an overlong form, a surrogate, a code point above
//! U+10FFFF) is copied unchanged and decoding resumes at the next byte, as ModSecurity does
//! for invalid sequences. (Coraza writes `%ufffd` instead; ModSecurity additionally emits a
//! stray byte after overlong forms and drops NUL bytes, which we do not copy.)

use std::borrow::Cow;

use super::hex::LOWER;

/// The code point and length of the valid UTF-8 sequence at the start of `s`, if any
/// multi-byte one starts there.
fn multi_byte_char(s: &[u8]) -> Option<(u32, usize)> {
    let lead = *s.first()?;
    let len = match lead {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    // `from_utf8` rejects overlong forms, surrogates and code points above U+10FFFF.
    let c = std::str::from_utf8(s.get(..len)?).ok()?.chars().next()?;
    Some((u32::from(c), len))
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = (0..input.len()).find(|&i| multi_byte_char(&input[i..]).is_some()) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len() * 2);
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        match multi_byte_char(&input[i..]) {
            Some((cp, len)) => {
                out.extend_from_slice(b"%u");
                let digits = if cp > 0xfffff {
                    6
                } else if cp > 0xffff {
                    5
                } else {
                    4
                };
                for k in (0..digits).rev() {
                    out.push(LOWER[((cp >> (4 * k)) & 0xf) as usize]);
                }
                i += len;
            }
            None => {
                out.push(input[i]);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_code_points() {
        assert_eq!(
            apply("aé ᄀ😀".as_bytes()).as_ref(),
            b"a%u00e9 %u1100%u1f600"
        );
        assert_eq!(apply("\u{10ffff}".as_bytes()).as_ref(), b"%u10ffff");
        assert_eq!(apply("Ā\u{80}".as_bytes()).as_ref(), b"%u0100%u0080");
    }

    #[test]
    fn copies_invalid_sequences() {
        assert_eq!(apply(b"\xc3").as_ref(), b"\xc3");
        assert_eq!(
            apply(b"\x80\xc3\xa9\xc0\xaf\xed\xa0\x80").as_ref(),
            b"\x80%u00e9\xc0\xaf\xed\xa0\x80"
        );
        assert_eq!(apply(b"\xe2\x82").as_ref(), b"\xe2\x82");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"plain ascii\x00"), Cow::Borrowed(_)));
        assert!(matches!(apply(b"\xff\xfe\x80"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
