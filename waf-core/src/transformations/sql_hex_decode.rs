//! `t:sqlHexDecode`: decodes SQL hex literals: `0x` followed by hex digit pairs becomes the
//! bytes they encode (`0x414243` -> `ABC`).
//!
//! ```text
//! SecRule ARGS "@contains union" "id:1,t:sqlHexDecode,deny"
//! ```
//!
//! As ModSecurity's `sql_hex_decode.cc`: `0x` or `0X` must be followed by at least one
//! complete pair, otherwise it is kept; an odd last digit is kept after the decoded bytes.
//! (ModSecurity also stops at a NUL byte and drops the final byte of some inputs; we do
//! not copy those bugs.)

use std::borrow::Cow;

use super::hex;

/// Whether a literal with at least one pair starts at `input[i]`.
fn starts_literal(input: &[u8], i: usize) -> bool {
    input[i] == b'0'
        && matches!(input.get(i + 1), Some(b'x' | b'X'))
        && hex::pair(input, i + 2).is_some()
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = (0..input.len()).find(|&i| starts_literal(input, i)) else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        if starts_literal(input, i) {
            i += 2;
            while let Some(b) = hex::pair(input, i) {
                out.push(b);
                i += 2;
            }
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_literals() {
        assert_eq!(apply(b"0x414243").as_ref(), b"ABC");
        assert_eq!(apply(b"select 0X61626 from").as_ref(), b"select ab6 from");
        assert_eq!(apply(b"0x0x41").as_ref(), b"0xA");
    }

    #[test]
    fn borrowed_when_unchanged() {
        for s in [&b""[..], b"0x", b"0x4", b"0xzz", b"x41", b"100"] {
            assert!(matches!(apply(s), Cow::Borrowed(_)), "{s:?}");
        }
    }
}
