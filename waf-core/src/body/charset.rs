//! Declared charsets: decode a body (or a multipart part) to UTF-8 before it is inspected.
//!
//! A backend that honours `Content-Type: ...; charset=ibm037` decodes the body before it
//! parses it, so a WAF that matches the raw bytes sees EBCDIC noise where the application
//! sees `<script>`. We decode first, as the application would (issue 13's WAFFLED-style
//! evasions), and every processor then works on UTF-8:
//!
//! - UTF-8, US-ASCII and no charset: unchanged (no copy).
//! - A byte-order mark (UTF-8, UTF-16LE/BE, UTF-32LE/BE) wins over the label, as in the
//!   WHATWG decode algorithm; the BOM itself is removed.
//! - UTF-32 (`utf-32`, `utf-32le`, `utf-32be`, `ucs-4`) and UTF-7 (RFC 2152, a classic
//!   filter evasion: `+ADw-script+AD4-`): decoded here; `encoding_rs` follows the WHATWG
//!   list, which has neither.
//! - EBCDIC code pages (`ibm037`, `ibm500`, `cp875`, `ibm1026`, `ibm273`, `ibm424`,
//!   `ibm1140` and their aliases): the tables in `ebcdic.rs`.
//! - Everything else `encoding_rs` knows by label (UTF-16, Shift_JIS, GBK, windows-125x,
//!   ISO-8859-x, KOI8, ...).
//! - A label nobody knows: [`Unsupported`], which the engine turns into a refusal
//!   (`REQBODY_ERROR`), never a pass.
//!
//! Malformed sequences become U+FFFD, as every decoder does; output is at most four times
//! the input (one UTF-8 sequence of up to 4 bytes per input byte, or 3 for U+FFFD).

use std::borrow::Cow;

use super::ebcdic;

/// A charset label that no decoder knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported(pub(crate) Vec<u8>);

/// The `charset` parameter of a `Content-Type` value, lower-cased, quotes removed.
pub(crate) fn param(content_type: &[u8]) -> Option<Vec<u8>> {
    media_param(content_type, b"charset")
}

/// A parameter of a media type (`name=value`, case-insensitive name, optional quotes).
pub(crate) fn media_param(content_type: &[u8], name: &[u8]) -> Option<Vec<u8>> {
    content_type.split(|&b| b == b';').skip(1).find_map(|p| {
        let p = p.trim_ascii();
        let eq = p.iter().position(|&b| b == b'=')?;
        if !p[..eq].trim_ascii().eq_ignore_ascii_case(name) {
            return None;
        }
        let v = p[eq + 1..].trim_ascii();
        let v = v
            .strip_prefix(b"\"")
            .and_then(|v| v.strip_suffix(b"\""))
            .unwrap_or(v);
        Some(v.to_ascii_lowercase())
    })
}

/// Whether `label` names UTF-8 or an ASCII subset, for which no decoding is needed.
fn is_utf8(label: &[u8]) -> bool {
    matches!(
        label,
        b"utf-8" | b"utf8" | b"unicode-1-1-utf-8" | b"us-ascii" | b"ascii" | b"x-unicode20utf8"
    )
}

/// The BOM at the start of `input`: its encoding label and length.
fn bom(input: &[u8]) -> Option<(&'static [u8], usize)> {
    // UTF-32LE's BOM starts with UTF-16LE's: test the longer first.
    if input.starts_with(&[0xff, 0xfe, 0, 0]) {
        Some((b"utf-32le", 4))
    } else if input.starts_with(&[0, 0, 0xfe, 0xff]) {
        Some((b"utf-32be", 4))
    } else if input.starts_with(&[0xef, 0xbb, 0xbf]) {
        Some((b"utf-8", 3))
    } else if input.starts_with(&[0xff, 0xfe]) {
        Some((b"utf-16le", 2))
    } else if input.starts_with(&[0xfe, 0xff]) {
        Some((b"utf-16be", 2))
    } else {
        None
    }
}

/// Decodes `input` in the charset `label` (lower-case; `None`: none declared) to UTF-8.
///
/// The output is at most three bytes per input byte: a single-byte or EBCDIC code page
/// maps a byte to one character (at most U+FFFF, three bytes in UTF-8), UTF-16 and UTF-32
/// map two or four bytes to one (a lone surrogate or a stray last byte becomes U+FFFD,
/// three bytes), and UTF-7 spends more than a byte per character. The fuzz target holds the
/// multipart parser to that bound.
pub(crate) fn decode<'a>(
    label: Option<&[u8]>,
    input: &'a [u8],
) -> Result<Cow<'a, [u8]>, Unsupported> {
    let (label, input) = match bom(input) {
        Some((l, n)) => (Some(l), &input[n..]),
        None => (label, input),
    };
    let Some(label) = label.filter(|l| !is_utf8(l)) else {
        return Ok(Cow::Borrowed(input));
    };
    if let Some(table) = ebcdic::table(label) {
        let mut out = String::with_capacity(input.len());
        for &b in input {
            out.push(char::from_u32(u32::from(table[usize::from(b)])).unwrap_or('\u{fffd}'));
        }
        return Ok(Cow::Owned(out.into_bytes()));
    }
    match label {
        b"utf-32" | b"utf-32be" | b"ucs-4" | b"iso-10646-ucs-4" => {
            return Ok(Cow::Owned(utf32(input, false)))
        }
        b"utf-32le" => return Ok(Cow::Owned(utf32(input, true))),
        b"utf-7" | b"unicode-1-1-utf-7" | b"csunicode11utf7" => return Ok(Cow::Owned(utf7(input))),
        _ => {}
    }
    let enc = encoding_rs::Encoding::for_label_no_replacement(label)
        .ok_or_else(|| Unsupported(label.to_vec()))?;
    if enc == encoding_rs::UTF_8 {
        return Ok(Cow::Borrowed(input));
    }
    let (text, _) = enc.decode_without_bom_handling(input);
    Ok(match text {
        Cow::Borrowed(s) => Cow::Owned(s.as_bytes().to_vec()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    })
}

/// RFC 2152 UTF-7 to UTF-8: `+` starts modified base64 of UTF-16BE, ended by `-` (which
/// is dropped) or any other non-base64 byte; `+-` is a plus sign. Unpaired surrogates
/// become U+FFFD.
fn utf7(input: &[u8]) -> Vec<u8> {
    fn b64(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let mut units: Vec<u16> = Vec::with_capacity(input.len());
    let mut out = Vec::with_capacity(input.len());
    let flush = |units: &mut Vec<u16>, out: &mut Vec<u8>| {
        out.extend(char::decode_utf16(units.drain(..)).flat_map(|r| {
            let mut buf = [0u8; 4];
            r.unwrap_or('\u{fffd}')
                .encode_utf8(&mut buf)
                .as_bytes()
                .to_vec()
        }));
    };
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'+' {
            out.push(input[i]);
            i += 1;
            continue;
        }
        i += 1;
        if input.get(i) == Some(&b'-') {
            out.push(b'+');
            i += 1;
            continue;
        }
        let (mut bits, mut nbits) = (0u32, 0u32);
        while let Some(v) = input.get(i).and_then(|&c| b64(c)) {
            bits = (bits << 6) | v;
            nbits += 6;
            if nbits >= 16 {
                nbits -= 16;
                units.push((bits >> nbits) as u16);
                bits &= (1 << nbits) - 1;
            }
            i += 1;
        }
        flush(&mut units, &mut out);
        if input.get(i) == Some(&b'-') {
            i += 1;
        }
    }
    out
}

/// UTF-32 code units to UTF-8; a trailing partial unit or an invalid scalar is U+FFFD.
fn utf32(input: &[u8], little: bool) -> Vec<u8> {
    let mut out = String::with_capacity(input.len());
    let mut chunks = input.chunks_exact(4);
    for c in &mut chunks {
        let a = [c[0], c[1], c[2], c[3]];
        let v = if little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        };
        out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
    }
    if !chunks.remainder().is_empty() {
        out.push('\u{fffd}');
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(label: &str, input: &[u8]) -> String {
        String::from_utf8(decode(Some(label.as_bytes()), input).unwrap().into_owned()).unwrap()
    }

    #[test]
    fn params() {
        assert_eq!(
            param(b"text/plain; Charset=\"UTF-16\""),
            Some(b"utf-16".to_vec())
        );
        assert_eq!(param(b"application/json"), None);
        assert_eq!(
            media_param(b"multipart/form-data; Boundary=ab", b"boundary"),
            Some(b"ab".to_vec())
        );
    }

    #[test]
    fn utf8_is_borrowed_and_bom_removed() {
        assert!(matches!(decode(None, b"abc"), Ok(Cow::Borrowed(b"abc"))));
        assert!(matches!(
            decode(Some(b"utf-8"), b"\xef\xbb\xbfabc"),
            Ok(Cow::Borrowed(b"abc"))
        ));
    }

    #[test]
    fn ebcdic_pages() {
        let payload = [0x4c, 0xa2, 0x83, 0x99, 0x89, 0x97, 0xa3, 0x6e]; // <script>
        for label in [
            "ibm037",
            "cp500",
            "cp875",
            "ibm1026",
            "ibm1140",
            "ebcdic-cp-us",
        ] {
            assert_eq!(d(label, &payload), "<script>", "{label}");
        }
    }

    #[test]
    fn utf16_utf32_and_boms() {
        assert_eq!(d("utf-16le", b"<\0a\0"), "<a");
        assert_eq!(d("utf-16be", b"\0<\0a"), "<a");
        assert_eq!(d("utf-32le", b"<\0\0\0a\0\0\0"), "<a");
        assert_eq!(d("utf-32", b"\0\0\0<"), "<");
        // A BOM wins over the label.
        assert_eq!(d("iso-8859-1", b"\xff\xfe<\0"), "<");
        assert_eq!(d("utf-8", b"\xff\xfe\0\0<\0\0\0"), "<");
        assert_eq!(d("utf-32le", b"<\0\0"), "\u{fffd}");
    }

    #[test]
    fn legacy_and_unknown() {
        assert_eq!(d("shift_jis", b"\x93\x8c\x8b\x9e"), "東京");
        assert_eq!(d("windows-1251", b"\xcf\xf0\xe8"), "При");
        assert_eq!(d("latin1", b"caf\xe9"), "café");
        assert_eq!(d("utf-7", b"+ADw-script+AD4-a+-b"), "<script>a+b");
        assert_eq!(d("utf-7", b"+AOk"), "é");
        assert_eq!(
            decode(Some(b"x-klingon"), b"a"),
            Err(Unsupported(b"x-klingon".to_vec()))
        );
        // WHATWG's "replacement" labels (iso-2022-kr, ...) decode to one U+FFFD: refuse them.
        assert!(decode(Some(b"iso-2022-kr"), b"a").is_err());
    }
}
