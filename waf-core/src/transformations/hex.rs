//! Hexadecimal digit helpers shared by the decoders (ModSecurity's `VALID_HEX`, `x2c`).

/// The value of an ASCII hex digit, or `None`.
pub(super) fn digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte written by the two hex digits at `s[at]` and `s[at + 1]`, if both exist and are
/// valid (ModSecurity's `VALID_HEX(a) && VALID_HEX(b)` followed by `x2c`).
pub(super) fn pair(s: &[u8], at: usize) -> Option<u8> {
    let hi = digit(*s.get(at)?)?;
    let lo = digit(*s.get(at + 1)?)?;
    Some(hi << 4 | lo)
}

/// Lower-case hex digits, indexed by nibble.
pub(super) const LOWER: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits() {
        assert_eq!(digit(b'0'), Some(0));
        assert_eq!(digit(b'F'), Some(15));
        assert_eq!(digit(b'f'), Some(15));
        assert_eq!(digit(b'g'), None);
        assert_eq!(pair(b"%4a", 1), Some(0x4a));
        assert_eq!(pair(b"%4", 1), None);
        assert_eq!(pair(b"%4g", 1), None);
    }
}
