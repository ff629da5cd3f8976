//! `t:htmlEntityDecode`: decodes HTML character references.
//!
//! ```text
//! SecRule ARGS "@rx <script" "id:1,t:htmlEntityDecode,deny"
//! ```
//!
//! As ModSecurity's `html_entity_decode.cc` (which the CRS regexes were written against,
//! e.g. 944150 matches `&lbrace;` literally):
//! - `&#DDD` and `&#xHHH` / `&#XHHH` (any number of digits) become one byte, the low byte of
//!   the value (`&#x3c;` -> `<`, `&#233;` -> 0xE9, `&#x13c;` -> `<`; a value that overflows
//!   a C `long` becomes 0xFF);
//! - the named references `&quot;`, `&amp;`, `&lt;`, `&gt;` and `&nbsp;` (any case) become
//!   `"`, `&`, `<`, `>` and the byte 0xA0; other names are kept as they are;
//! - the `;` is optional (`&lt` and `&#60` decode too) and consumed when present;
//! - `&`, `&#` and `&#x` not followed by a name or digits are kept.
//!
//! Coraza uses Go's `html.UnescapeString` instead (all HTML5 names, UTF-8 output); no test
//! vector tells them apart.

use std::borrow::Cow;

use super::hex;

/// Decodes the reference starting at `input[i]` (an `&`): the byte and the input bytes
/// used, or `Err(n)`: copy `n` bytes verbatim.
fn reference(input: &[u8], i: usize) -> Result<(u8, usize), usize> {
    let mut j = i + 1;
    if j >= input.len() {
        return Err(1);
    }
    let value = if input[j] == b'#' {
        j += 1;
        if j >= input.len() {
            return Err(2);
        }
        let (radix, copy) = if matches!(input[j], b'x' | b'X') {
            j += 1;
            if j >= input.len() {
                return Err(3);
            }
            (16, 3)
        } else {
            (10, 2)
        };
        let start = j;
        let mut acc: u64 = 0;
        while let Some(d) = input.get(j).and_then(|&b| match radix {
            16 => hex::digit(b),
            _ => b.is_ascii_digit().then(|| b - b'0'),
        }) {
            acc = acc.saturating_mul(radix).saturating_add(u64::from(d));
            j += 1;
        }
        if j == start {
            return Err(copy);
        }
        // strtol saturates at LONG_MAX, whose low byte is 0xFF.
        if acc > i64::MAX as u64 {
            0xff
        } else {
            acc as u8
        }
    } else {
        let start = j;
        while input.get(j).is_some_and(u8::is_ascii_alphanumeric) {
            j += 1;
        }
        if j == start {
            return Err(1);
        }
        let name = &input[start..j];
        let named = [
            (&b"quot"[..], b'"'),
            (b"amp", b'&'),
            (b"lt", b'<'),
            (b"gt", b'>'),
            (b"nbsp", 0xa0),
        ];
        match named.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some(&(_, b)) => b,
            None => return Err(j - i),
        }
    };
    if input.get(j) == Some(&b';') {
        j += 1;
    }
    Ok((value, j - i))
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let first = memchr::memchr_iter(b'&', input).find(|&i| reference(input, i).is_ok());
    let Some(first) = first else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        // Copy the run up to the next `&` in one go.
        let Some(run) = memchr::memchr(b'&', &input[i..]) else {
            out.extend_from_slice(&input[i..]);
            break;
        };
        out.extend_from_slice(&input[i..i + run]);
        i += run;
        match reference(input, i) {
            Ok((b, used)) => {
                out.push(b);
                i += used;
            }
            Err(copy) => {
                out.extend_from_slice(&input[i..i + copy]);
                i += copy;
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_numeric() {
        assert_eq!(apply(b"&#x3c;&#X3E&#60;&#62x").as_ref(), b"<><>x");
        assert_eq!(apply(b"&#233;&#x13c;&#0;").as_ref(), b"\xe9<\x00");
        assert_eq!(apply(b"&#99999999999999999999999;").as_ref(), b"\xff");
    }

    #[test]
    fn decodes_named() {
        assert_eq!(apply(b"&quot;&AMP;&lt&gt;&nbsp;").as_ref(), b"\"&<>\xa0");
        assert_eq!(
            apply(b"&lbrace;&apos;&ampx;").as_ref(),
            b"&lbrace;&apos;&ampx;"
        );
        assert_eq!(apply(b"&lt;&lbrace;").as_ref(), b"<&lbrace;");
    }

    #[test]
    fn keeps_incomplete() {
        assert_eq!(apply(b"a&").as_ref(), b"a&");
        assert_eq!(apply(b"&#").as_ref(), b"&#");
        assert_eq!(apply(b"&#x").as_ref(), b"&#x");
        assert_eq!(apply(b"&#xg;&#;& ;&lt").as_ref(), b"&#xg;&#;& ;<");
    }

    #[test]
    fn borrowed_when_unchanged() {
        for s in [&b""[..], b"TestCase\x00", b"&", b"&#x", b"&foo;", b"a & b"] {
            assert!(matches!(apply(s), Cow::Borrowed(_)), "{s:?}");
        }
    }
}
