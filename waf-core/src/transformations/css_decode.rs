//! `t:cssDecode`: decodes CSS 2 escapes (`\HHHHHH` and `\c`).
//!
//! ```text
//! SecRule ARGS "@rx expression\(" "id:1,t:cssDecode,deny"
//! ```
//!
//! - `\` followed by one to six hex digits is one code point; one whitespace byte after it
//!   is part of the escape. The code point is written as UTF-8; fullwidth ASCII
//!   (U+FF01-U+FF5E) becomes its ASCII counterpart; zero, surrogates and values above
//!   U+10FFFF become U+FFFD.
//! - `\` followed by `\n`, `\f`, `\r` or `\r\n` is a line continuation and disappears.
//! - `\` followed by any other byte stands for that byte; a `\` at the end disappears.
//!
//! This follows Coraza's vectors (`cssDecode.json`: `\123` -> `ģ`, `\12345` -> `𒍅`,
//! `\123456` -> U+FFFD), which follow the CSS Syntax spec. ModSecurity instead keeps only
//! the last two hex digits as one byte (`\123` -> `#`) and treats only `\n` as a
//! continuation.

use std::borrow::Cow;

use super::{hex, is_c_space};

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = memchr::memchr(b'\\', input) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        // Copy the run up to the next backslash in one go.
        let Some(run) = memchr::memchr(b'\\', &input[i..]) else {
            out.extend_from_slice(&input[i..]);
            break;
        };
        out.extend_from_slice(&input[i..i + run]);
        i += run;
        i += 1; // the backslash itself is never copied
        let Some(&next) = input.get(i) else {
            break;
        };
        let digits = input[i..]
            .iter()
            .take(6)
            .take_while(|&&b| hex::digit(b).is_some())
            .count();
        if digits > 0 {
            let cp = input[i..i + digits]
                .iter()
                .filter_map(|&b| hex::digit(b))
                .fold(0u32, |acc, d| acc << 4 | u32::from(d));
            let cp = match cp {
                0xff01..=0xff5e => cp - 0xfee0,
                _ => cp,
            };
            let c = match char::from_u32(cp) {
                Some(c) if cp != 0 => c,
                _ => char::REPLACEMENT_CHARACTER,
            };
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            i += digits;
            if input.get(i).is_some_and(|&b| is_c_space(b)) {
                i += 1;
            }
        } else {
            match next {
                b'\n' | 0x0c => i += 1,
                b'\r' => {
                    i += if input.get(i + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    }
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_hex_escapes() {
        assert_eq!(apply(br"\1A\1 A\1x\1 x").as_ref(), b"\x1a\x01A\x01x\x01x");
        assert_eq!(apply(br"\123\ff01\FF5E\e9").as_ref(), "ģ!~é".as_bytes());
        assert_eq!(
            apply(br"\0 \d800\110000\1234567").as_ref(),
            "\u{fffd}\u{fffd}\u{fffd}\u{fffd}7".as_bytes()
        );
    }

    #[test]
    fn other_escapes_and_continuations() {
        assert_eq!(apply(b"a\\\nb\\\r\nc\\\rd\\\x0ce").as_ref(), b"abcde");
        assert_eq!(apply(br#"\n\'\"\?"#).as_ref(), br#"n'"?"#);
        assert_eq!(apply(b"\\\x00\\\xff").as_ref(), b"\x00\xff");
        assert_eq!(apply(b"test\\").as_ref(), b"test");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test\x00Case"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
