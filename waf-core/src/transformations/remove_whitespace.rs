//! `t:removeWhitespace`: removes every whitespace byte.
//!
//! ```text
//! SecRule ARGS "@contains javascript:" "id:1,t:removeWhitespace,deny"
//! ```
//!
//! Whitespace is C's `isspace` (space, `\t`, `\n`, `\v`, `\f`, `\r`) plus the non-breaking
//! space, both as the Latin-1 byte 0xA0 and as its UTF-8 form `C2 A0`. ModSecurity removes
//! `isspace` bytes and 0xA0 only, which leaves a stray 0xC2 behind from a UTF-8 NBSP; Coraza
//! removes Unicode `White_Space` code points, U+00A0 included. We remove the whole `C2 A0`
//! (as Coraza) and a lone 0xA0 byte (as ModSecurity), and no other code point (U+2000...,
//! which none of the test vectors exercise).

use std::borrow::Cow;

use super::is_c_space;

/// How many bytes of whitespace start at `input[i]` (0 if none).
fn space_len(input: &[u8], i: usize) -> usize {
    match input[i] {
        b if is_c_space(b) || b == 0xa0 => 1,
        0xc2 if input.get(i + 1) == Some(&0xa0) => 2,
        _ => 0,
    }
}

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    super::owned_if(input, apply_into)
}

/// Writes the value without whitespace into `out` (empty) when it had some.
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(first) = (0..input.len()).find(|&i| space_len(input, i) > 0) else {
        return false;
    };
    out.reserve(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        match space_len(input, i) {
            0 => {
                out.push(input[i]);
                i += 1;
            }
            n => i += n,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_c_spaces_and_nbsp() {
        assert_eq!(
            apply(b"  Test \t\x0b\x0c\r\n Case\xa0!\xc2\xa0?").as_ref(),
            b"TestCase!?"
        );
        assert_eq!(apply(b"\xc2\xa9 \xc2").as_ref(), b"\xc2\xa9\xc2");
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test\x00Case"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
