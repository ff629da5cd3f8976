//! `t:base64Encode`: standard Base64 (RFC 4648 alphabet, `=` padding, no line breaks).
//!
//! ```text
//! SecRule ARGS:data "@streq PHNjcmlwdD4=" "id:1,t:base64Encode,deny"
//! ```

use std::borrow::Cow;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    if input.is_empty() {
        return Cow::Borrowed(input);
    }
    let mut out = Vec::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b0 = chunk[0];
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = u32::from(b0) << 16 | u32::from(b1) << 8 | u32::from(b2);
        let sextet = |shift: u32| ALPHABET[((n >> shift) & 0x3f) as usize];
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { b'=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { b'=' });
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_with_padding() {
        assert_eq!(apply(b"TestCase").as_ref(), b"VGVzdENhc2U=");
        assert_eq!(apply(b"TestCase1").as_ref(), b"VGVzdENhc2Ux");
        assert_eq!(apply(b"TestCase12").as_ref(), b"VGVzdENhc2UxMg==");
        assert_eq!(apply(b"\xff\xfe").as_ref(), b"//4=");
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
