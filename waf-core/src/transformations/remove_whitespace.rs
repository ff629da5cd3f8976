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

/// Bytes that can start whitespace: C's `isspace`, 0xA0, and 0xC2 (of `C2 A0`).
const MAY_START: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = is_c_space(b as u8) || b == 0xa0 || b == 0xc2;
        b += 1;
    }
    t
};

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

/// Writes the value without whitespace into `out` (empty) when it had some. The bytes
/// between two runs of whitespace are copied a run at a time (a response body's text was
/// copied a byte at a time, 16 instructions per byte).
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    let mut kept = 0; // Where the run of bytes not yet copied starts.
    let mut changed = false;
    let mut i = 0;
    while i < input.len() {
        if !MAY_START[usize::from(input[i])] {
            i += 1;
            continue;
        }
        let n = space_len(input, i);
        if n == 0 {
            i += 1; // 0xC2 not followed by 0xA0.
            continue;
        }
        if !changed {
            out.reserve(input.len());
            changed = true;
        }
        out.extend_from_slice(&input[kept..i]);
        i += n;
        kept = i;
    }
    if changed {
        out.extend_from_slice(&input[kept..]);
    }
    changed
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

    /// The run-at-a-time copy gives what removing byte by byte gives, on every short value
    /// over whitespace, NBSP in both forms, a lone 0xC2 and ordinary bytes.
    #[test]
    fn same_as_byte_by_byte() {
        let alphabet = b" \t\n\x0b\x0c\r\xa0\xc2a<";
        for value in crate::transformations::features::generated_values(alphabet, 6).take(20_000) {
            let mut want = Vec::new();
            let mut i = 0;
            while i < value.len() {
                match space_len(&value, i) {
                    0 => {
                        want.push(value[i]);
                        i += 1;
                    }
                    n => i += n,
                }
            }
            let mut got = Vec::new();
            let changed = apply_into(&value, &mut got);
            assert_eq!(changed, want != value, "{value:?}");
            if changed {
                assert_eq!(got, want, "{value:?}");
            }
        }
    }

    #[test]
    fn borrowed_when_unchanged() {
        assert!(matches!(apply(b"Test\x00Case"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
