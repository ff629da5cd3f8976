//! `t:urlDecodeUni`: like `t:urlDecode`, and also decodes IIS's `%uXXXX` escapes.
//!
//! ```text
//! SecRule ARGS "@rx <script" "id:1,t:urlDecodeUni,deny"
//! ```
//!
//! - `%XX` (two hex digits) becomes that byte; `+` becomes a space.
//! - `%uXXXX` / `%UXXXX` (four hex digits) becomes one byte: the code point's best-fit ASCII
//!   character from ModSecurity's `unicode.mapping` codepage 20127 (`%u201c` -> `"`,
//!   `%u00e9` -> `e`, `%uff41` -> `a`; see `unicode_map.rs`) when it has one, else the low
//!   byte of the code point (`%u1100` -> 0x00), with fullwidth ASCII `%uff01`-`%uff5e`
//!   shifted into `!`-`~`. This is ModSecurity with `SecUnicodeMapFile unicode.mapping 20127`
//!   as in the CRS reference deployments, and what Coraza's vectors expect. Without a map
//!   file ModSecurity v3 writes `x` for unmapped code points; the vectors want the low byte.
//!   With `SecUnicodeMapFile FILE CODEPAGE` the compiler swaps in
//!   `Transformation::UrlDecodeUniMapped`, which maps through that section of the file
//!   instead of the built-in table (same low-byte rule for unmapped code points).
//! - Invalid escapes are kept literally: a `%` not followed by two hex digits stays `%`, and
//!   `%u` not followed by four hex digits stays `%u` (decoding resumes after the `u`).
//! - Then the result is folded to Unicode NFKC (`nfkc.rs`), so fullwidth and other
//!   compatibility spellings (`＜ｓｃｒｉｐｔ＞`) match the ASCII rules written for them. This
//!   goes beyond ModSecurity, whose best-fit map only covers `%uXXXX` escapes and not raw
//!   UTF-8 (issue 13).

use std::borrow::Cow;

use super::{hex, nfkc, unicode_map};

/// The byte a valid `%uXXXX` at `input[i]` decodes to, with the built-in table or `map`.
fn unicode_escape(input: &[u8], i: usize, map: Option<&unicode_map::UnicodeMap>) -> Option<u8> {
    if !matches!(input.get(i + 1), Some(b'u' | b'U')) {
        return None;
    }
    let high = hex::pair(input, i + 2)?;
    let low = hex::pair(input, i + 4)?;
    let code_point = u16::from(high) << 8 | u16::from(low);
    let mapped = match map {
        Some(m) => m.get(code_point),
        None => unicode_map::best_fit(code_point),
    };
    Some(match mapped {
        Some(b) => b,
        None if high == 0xff && low > 0x00 && low < 0x5f => low + 0x20,
        None => low,
    })
}

/// Whether `input[i]` starts something that decodes to a different value.
fn decodes_at(input: &[u8], i: usize, map: Option<&unicode_map::UnicodeMap>) -> bool {
    match input[i] {
        b'+' => true,
        b'%' => unicode_escape(input, i, map).is_some() || hex::pair(input, i + 1).is_some(),
        _ => false,
    }
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    nfkc::fold(decode(input, None))
}

/// With the table of `SecUnicodeMapFile` instead of the built-in one: a mapped code point
/// becomes its byte, an unmapped one its low byte (fullwidth ASCII shifted), as ModSecurity.
pub(super) fn apply_mapped<'a>(input: &'a [u8], map: &unicode_map::UnicodeMap) -> Cow<'a, [u8]> {
    nfkc::fold(decode(input, Some(map)))
}

fn decode<'a>(input: &'a [u8], map: Option<&unicode_map::UnicodeMap>) -> Cow<'a, [u8]> {
    let mut out = Vec::new();
    if decode_into(input, map, &mut out) {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(input)
    }
}

/// Writes [`apply`]'s result into `out` (empty) when it differs from `input`; the same
/// steps, into a caller's buffer.
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    let decoded = decode_into(input, None, out);
    let value: &[u8] = if decoded { out } else { input };
    // NFKC folding changes only non-ASCII text.
    if value.is_ascii() {
        return decoded;
    }
    match nfkc::fold(Cow::Borrowed(value)) {
        Cow::Borrowed(_) => decoded,
        Cow::Owned(folded) => {
            *out = folded;
            true
        }
    }
}

/// Appends the decoded `input` to `out` (empty) when some escape decodes; false (and
/// `out` untouched) when there is none.
fn decode_into(input: &[u8], map: Option<&unicode_map::UnicodeMap>, out: &mut Vec<u8>) -> bool {
    let Some(first) = memchr::memchr2_iter(b'%', b'+', input).find(|&i| decodes_at(input, i, map))
    else {
        return false;
    };
    out.reserve(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        // Copy the run up to the next `%` or `+` in one go.
        let Some(run) = memchr::memchr2(b'%', b'+', &input[i..]) else {
            out.extend_from_slice(&input[i..]);
            break;
        };
        out.extend_from_slice(&input[i..i + run]);
        i += run;
        match input[i] {
            b'%' if matches!(input.get(i + 1), Some(b'u' | b'U')) => {
                match unicode_escape(input, i, map) {
                    Some(b) => {
                        out.push(b);
                        i += 6;
                    }
                    None => {
                        // Invalid or truncated: keep `%u` and resume after the `u`.
                        out.extend_from_slice(&input[i..i + 2]);
                        i += 2;
                    }
                }
            }
            b'%' => match hex::pair(input, i + 1) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent_u() {
        assert_eq!(apply(b"%u0041%u00e9%u00e8").as_ref(), b"Aee");
        assert_eq!(apply(b"%u201cq%u201d%u2019%u2014").as_ref(), b"\"q\"'-");
        assert_eq!(
            apply(b"%uff01%uFF5e%uff1f%uff00%uff80").as_ref(),
            b"!~?\x00\x80"
        );
        assert_eq!(apply(b"%u1100%U1141").as_ref(), b"\x00A");
        assert_eq!(apply(b"+%41%2b").as_ref(), b" A+");
    }

    #[test]
    fn keeps_invalid_escapes() {
        assert_eq!(apply(b"%u%u0020").as_ref(), b"%u ");
        assert_eq!(apply(b"%u000g%u0020").as_ref(), b"%u000g ");
        assert_eq!(apply(b"%u00%20").as_ref(), b"%u00 ");
        assert_eq!(apply(b"%%u0020").as_ref(), b"% ");
        assert_eq!(apply(b"%u004").as_ref(), b"%u004");
    }

    #[test]
    fn borrowed_when_unchanged() {
        for s in [
            &b""[..],
            b"TestCase",
            b"%",
            b"%u",
            b"%u12",
            b"%uzzzz",
            b"%0g",
            b"\xff",
        ] {
            assert!(matches!(apply(s), Cow::Borrowed(_)), "{s:?}");
        }
    }
}
