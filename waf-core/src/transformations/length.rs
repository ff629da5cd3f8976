//! `t:length`: replaces the value with its length in bytes, in decimal.
//!
//! ```text
//! SecRule ARGS "@gt 100" "id:1,t:length,deny"
//! ```

use std::borrow::Cow;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(input.len().to_string().into_bytes())
}

/// Writes the length in decimal into `out` (empty).
pub(super) fn apply_into(input: &[u8], out: &mut Vec<u8>) -> bool {
    use std::io::Write;
    // Writing into a `Vec` cannot fail.
    let _ = write!(out, "{}", input.len());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes() {
        assert_eq!(apply(b"").as_ref(), b"0");
        assert_eq!(apply("é\x00".as_bytes()).as_ref(), b"3");
        assert_eq!(apply(&[0xff; 1234]).as_ref(), b"1234");
    }
}
