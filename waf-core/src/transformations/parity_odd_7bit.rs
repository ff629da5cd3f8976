//! `t:parityOdd7bit`: sets or clears bit 7 of every byte so that each byte has an odd
//! number of one bits (odd parity over the 7 data bits).
//!
//! ```text
//! SecRule ARGS:modem "@streq ..." "id:1,t:parityOdd7bit,pass"
//! ```
//!
//! As for `parityEven7bit`, parity is computed over the 7 data bits (ModSecurity uses all 8;
//! the two agree on 7-bit input).

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    super::parity_zero_7bit::map_bytes(input, |b| {
        let data = b & 0x7f;
        if data.count_ones() % 2 == 0 {
            data | 0x80
        } else {
            data
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_odd_parity() {
        assert_eq!(apply(b"abc\x00").as_ref(), b"ab\xe3\x80");
        assert!(matches!(apply(b"abd"), Cow::Borrowed(_)));
    }
}
