//! `@validateUtf8Encoding`: the value is not valid UTF-8.
//!
//! **What.** Matches on a truncated sequence, a bad continuation byte, a lead byte of
//! `0x80`-`0xBF` or `0xF8`-`0xFF`, a lead byte of `0xF5`-`0xF7`, an overlong form, or an
//! encoded surrogate (`U+D800`-`U+DFFF`). This is ModSecurity's check, which is slightly more
//! lenient than Rust's: `F4 90 80 80` (above `U+10FFFF`) passes. An empty value never
//! matches.
//!
//! **Argument.** None.
//!
//! ```text
//! SecRule ARGS "@validateUtf8Encoding" "id:920250,phase:2,block"
//! ```
//!
//! Valid UTF-8 by Rust's rules is valid by ModSecurity's, so the common case is one
//! `std::str::from_utf8` (vectorised for ASCII); only invalid input runs the exact check.

/// `@validateUtf8Encoding`.
#[derive(Debug)]
pub(crate) struct ValidateUtf8Encoding;

impl ValidateUtf8Encoding {
    /// True when `input` is not valid UTF-8 by ModSecurity's rules.
    pub(crate) fn evaluate(&self, input: &[u8]) -> bool {
        if std::str::from_utf8(input).is_ok() {
            return false;
        }
        let mut i = 0;
        while i < input.len() {
            match character_len(&input[i..]) {
                Some(len) => i += len,
                None => return true,
            }
        }
        false
    }
}

/// The length of the valid character at the start of `bytes` (not empty), or `None`.
fn character_len(bytes: &[u8]) -> Option<usize> {
    let lead = bytes[0];
    let (len, lead_bits, min) = match lead {
        0x00..=0x7f => return Some(1),
        0xc0..=0xdf => (2, u32::from(lead & 0x1f), 0x80),
        0xe0..=0xef => (3, u32::from(lead & 0x0f), 0x800),
        0xf0..=0xf4 => (4, u32::from(lead & 0x07), 0x10000),
        _ => return None,
    };
    let continuation = bytes.get(1..len)?;
    let mut code = lead_bits;
    for &b in continuation {
        if b & 0xc0 != 0x80 {
            return None;
        }
        code = code << 6 | u32::from(b & 0x3f);
    }
    if (0xd800..=0xdfff).contains(&code) || code < min {
        return None;
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(input: &[u8]) -> bool {
        ValidateUtf8Encoding.evaluate(input)
    }

    #[test]
    fn valid() {
        assert!(!t(b""));
        assert!(!t("Puedo comer vidrio, no me hace daño. ∮ 𝄞".as_bytes()));
        // Above U+10FFFF with an F4 lead: ModSecurity lets it through.
        assert!(!t(b"\xf4\x90\x80\x80"));
    }

    #[test]
    fn invalid() {
        for bad in [
            &b"\xe4"[..],
            b"\0\xe4",
            b"\x03\xbf",
            b"\xc9\x3b",
            b"\xff\0",
            b"\xc0\xaf",
            b"\xe0\x80\xaf",
            b"\xed\xa0\x80",
            b"\xf5\x80\x80\x80",
            b"\xf0\x9f\x98",
        ] {
            assert!(t(bad), "{bad:?}");
        }
    }
}
