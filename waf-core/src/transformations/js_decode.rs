//! `t:jsDecode`: decodes JavaScript escape sequences.
//!
//! ```text
//! SecRule ARGS "@rx alert\(" "id:1,t:jsDecode,deny"
//! ```
//!
//! As ModSecurity's `js_decode.cc`:
//! - `\uHHHH` becomes one byte: the low byte of the code point, except that fullwidth ASCII
//!   (`\uff01`-`\uff5e`) becomes its ASCII counterpart;
//! - `\xHH` becomes that byte;
//! - `\OOO`, one to three octal digits, becomes one byte (a third digit is only used when
//!   the value fits in a byte, so `\477` is `\47` then `7`);
//! - `\a \b \f \n \r \t \v` become the control characters; any other escaped byte stands
//!   for itself (`\'` -> `'`, `\\` -> `\`, `\u` with bad digits -> `u`);
//! - a `\` at the very end is kept.

use std::borrow::Cow;

use super::hex;

/// Decodes the escape at `input[i]` (a `\` with at least one byte after it): the byte and
/// the number of input bytes used.
fn escape(input: &[u8], i: usize) -> (u8, usize) {
    let next = input[i + 1];
    if next == b'u' {
        if let (Some(high), Some(low)) = (hex::pair(input, i + 2), hex::pair(input, i + 4)) {
            let b = if high == 0xff && low > 0x00 && low < 0x5f {
                low + 0x20
            } else {
                low
            };
            return (b, 6);
        }
    }
    if next == b'x' {
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
        // Three digits only when the first is 0-3, so the value fits in a byte.
        let digits = if digits == 3 && next > b'3' {
            2
        } else {
            digits
        };
        let value = input[i + 1..i + 1 + digits]
            .iter()
            .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
        return (value as u8, 1 + digits);
    }
    let b = match next {
        b'a' => 0x07,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'v' => 0x0b,
        other => other,
    };
    (b, 2)
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    // A backslash as the last byte is kept, so only one with a byte after it changes things.
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
            apply(br#"\\a\\b\\f\\n\\r\\t\\v\?\'\"\0\12\123\x00\xff"#).as_ref(),
            b"\\a\\b\\f\\n\\r\\t\\v?'\"\x00\x0a\x53\x00\xff"
        );
        assert_eq!(
            apply(br"\a\b\f\n\r\t\v").as_ref(),
            b"\x07\x08\x0c\n\r\t\x0b"
        );
        assert_eq!(
            apply(br"\u0041\uff01\uFF5E\u1234\uff7f").as_ref(),
            b"A!~\x34\x7f"
        );
        assert_eq!(apply(br"\477\400\1a").as_ref(), b"\x277\x200\x01a");
    }

    #[test]
    fn truncated_and_invalid() {
        assert_eq!(apply(br"\u").as_ref(), b"u");
        assert_eq!(apply(br"\u\u0\u01\u012").as_ref(), b"uu0u01u012");
        assert_eq!(apply(br"\x4").as_ref(), b"x4");
        assert_eq!(apply(br"\xg1").as_ref(), b"xg1");
        assert_eq!(apply(b"\\\xff").as_ref(), b"\xff");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"TestCase\x00"), Cow::Borrowed(_)));
        assert!(matches!(apply(b"ends with \\"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
