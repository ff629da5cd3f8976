//! `t:parityZero7bit`: clears bit 7 of every byte.
//!
//! ```text
//! SecRule ARGS:modem "@streq ATZ" "id:1,t:parityZero7bit,pass"
//! ```

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    map_bytes(input, |b| b & 0x7f)
}

/// Maps every byte through `f`, borrowing when no byte changes. Shared by the parity
/// transformations.
pub(super) fn map_bytes(input: &[u8], f: impl Fn(u8) -> u8) -> Cow<'_, [u8]> {
    match input.iter().position(|&b| f(b) != b) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut out = input.to_vec();
            for b in &mut out[first..] {
                *b = f(*b);
            }
            Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clears_high_bit() {
        assert_eq!(apply(b"\xc2\x80\x00\xff").as_ref(), b"\x42\x00\x00\x7f");
        assert!(matches!(apply(b"abc\x00"), Cow::Borrowed(_)));
        assert!(matches!(apply(b""), Cow::Borrowed(_)));
    }
}
