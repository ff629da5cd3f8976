//! `t:escapeSeqDecode`: decodes ANSI C escape sequences.
//!
//! ```text
//! SecRule ARGS "@rx /bin/sh" "id:1,t:escapeSeqDecode,deny"
//! ```
//!
//! As ModSecurity's `escape_seq_decode.cc`:
//! - `\a \b \f \n \r \t \v \\ \? \' \"` become the characters they name;
//! - `\xHH` (exactly two hex digits, `x` or `X`) becomes that byte;
//! - `\O`, `\OO`, `\OOO` (octal) becomes the value's low byte (`\666` -> 0xB6);
//! - any other escaped byte stands for itself and the backslash is dropped (`\8` -> `8`,
//!   `\xag` -> `xag`); a `\` at the very end is kept.

use std::borrow::Cow;

use super::hex;

/// Decodes the escape at `input[i]` (a `\` with at least one byte after it): the byte and
/// the number of input bytes used.
fn escape(input: &[u8], i: usize) -> (u8, usize) {
    let next = input[i + 1];
    let named = match next {
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(0x0b),
        b'\\' | b'?' | b'\'' | b'"' => Some(next),
        _ => None,
    };
    if let Some(b) = named {
        return (b, 2);
    }
    if matches!(next, b'x' | b'X') {
        if let Some(b) = hex::pair(input, i + 2) {
            return (b, 4);
        }
    }
    if matches!(next, b'0'..=b'7') {
        let digits = input[i + 1..]
            .iter()
            .take(3)
            .take_while(|b| matches!(b, b'0'..=b'7'))
            .count();
        let value = input[i + 1..i + 1 + digits]
            .iter()
            .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
        return (value as u8, 1 + digits);
    }
    (next, 2)
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = memchr::memchr(b'\\', input).filter(|&i| i + 1 < input.len()) else {
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
        if i + 1 < input.len() {
            let (b, used) = escape(input, i);
            out.push(b);
            i += used;
        } else {
            // A backslash at the very end is kept.
            out.push(b'\\');
            i += 1;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes() {
        assert_eq!(
            apply(br#"\a\b\f\n\r\t\v\?\'\"\\\0\12\123\x41\X4a"#).as_ref(),
            b"\x07\x08\x0c\n\r\t\x0b?'\"\\\x00\nSAJ"
        );
        assert_eq!(apply(br"\01").as_ref(), b"\x01");
        assert_eq!(apply(br"\0123").as_ref(), b"\n3");
    }

    #[test]
    fn invalid_and_truncated() {
        assert_eq!(apply(br"\8\9\666\xag\xga").as_ref(), b"89\xb6xagxga");
        assert_eq!(apply(br"\x4").as_ref(), b"x4");
        assert_eq!(apply(b"\\\x00").as_ref(), b"\x00");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"TestCase\x00"), Cow::Borrowed(_)));
        assert!(matches!(apply(b"\\"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
