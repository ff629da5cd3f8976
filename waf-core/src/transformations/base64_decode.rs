//! `t:base64Decode`: decodes Base64, tolerating what real payloads contain.
//!
//! ```text
//! SecRule REQUEST_HEADERS:Authorization "@rx ^admin:" "id:1,t:base64Decode,deny"
//! ```
//!
//! Like Coraza (which passes the CRS suite with it), decoding is partial rather than
//! all-or-nothing: `\r` and `\n` are skipped, padding is optional, and decoding stops at the
//! first `=` or byte outside the alphabet, keeping what was decoded so far. A trailing
//! group of 2 or 3 digits yields 1 or 2 bytes; a lone trailing digit is dropped.
//! (ModSecurity returns an empty value on malformed input, which lets an attacker hide a
//! payload behind one bad byte.)

use std::borrow::Cow;

/// Which bytes are skipped instead of ending the decoding.
#[derive(Clone, Copy)]
pub(super) enum Leniency {
    /// `base64Decode`: only `\r` and `\n` are skipped.
    LineBreaks,
    /// `base64DecodeExt`: every byte outside the alphabet, `=` included, is skipped.
    Forgiving,
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(decode(input, Leniency::LineBreaks))
}

/// Writes the decoded value into `out` (empty); always "changed" (the caller compares).
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    decode_into(input, Leniency::LineBreaks, out);
    true
}

/// The sextet each byte stands for as a Base64 digit; `NOT_A_DIGIT` for the others.
static SEXTETS: [u8; 256] = {
    let mut t = [NOT_A_DIGIT; 256];
    let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < digits.len() {
        t[digits[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// [`SEXTETS`]' mark for a byte outside the alphabet.
const NOT_A_DIGIT: u8 = 0xff;

/// The sextet a Base64 digit stands for.
fn sextet(b: u8) -> Option<u32> {
    match SEXTETS[b as usize] {
        NOT_A_DIGIT => None,
        v => Some(u32::from(v)),
    }
}

/// Decodes `input`, shared with `base64DecodeExt`.
pub(super) fn decode(input: &[u8], leniency: Leniency) -> Vec<u8> {
    let mut out = Vec::new();
    decode_into(input, leniency, &mut out);
    out
}

/// [`decode`], appending to `out`.
fn decode_into(input: &[u8], leniency: Leniency, out: &mut Vec<u8>) {
    out.reserve(input.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut n = 0;
    for &b in input {
        let v = match sextet(b) {
            Some(v) => v,
            None => match (b, leniency) {
                (_, Leniency::Forgiving) | (b'\r' | b'\n', _) => continue,
                (_, Leniency::LineBreaks) => break,
            },
        };
        acc = acc << 6 | v;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    match n {
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_with_and_without_padding() {
        assert_eq!(apply(b"VGVzdENhc2U=").as_ref(), b"TestCase");
        assert_eq!(apply(b"VGVzdENhc2UxMg").as_ref(), b"TestCase12");
        assert_eq!(apply(b"VGVzdABDYXNl").as_ref(), b"Test\x00Case");
    }

    #[test]
    fn skips_line_breaks_and_stops_at_invalid() {
        assert_eq!(apply(b"VGVz\r\ndENh").as_ref(), b"TestCa");
        assert_eq!(apply(b"VGVz dENh").as_ref(), b"Tes");
        assert_eq!(apply(b"VGVz\xffdENh").as_ref(), b"Tes");
        assert_eq!(apply(b"V").as_ref(), b"");
    }

    #[test]
    fn empty() {
        assert!(matches!(apply(b""), Cow::Borrowed(_)) || apply(b"").is_empty());
    }
}
