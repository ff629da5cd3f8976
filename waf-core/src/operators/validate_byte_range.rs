//! `@validateByteRange`: the value holds a byte outside the allowed ranges.
//!
//! **What.** Matches when some byte of the value is not allowed. An empty value never
//! matches; an empty argument allows nothing, so any non-empty value matches (ModSecurity).
//!
//! **Argument.** Comma-separated byte values and inclusive ranges, 0 to 255, spaces allowed
//! around items: `1-255`, `9,10,13,32-126,128-255`. Anything else (a value over 255, a
//! reversed range, a non-number) is a load error.
//!
//! ```text
//! SecRule ARGS "@validateByteRange 1-255" "id:920270,phase:2,block"
//! ```
//!
//! A 256-entry table makes the check one lookup per byte.

/// A compiled `@validateByteRange`.
#[derive(Debug)]
pub(crate) struct ValidateByteRange {
    allowed: [bool; 256],
    allows_all: bool,
}

impl ValidateByteRange {
    /// Parses the ranges.
    pub(crate) fn new(argument: &str) -> Result<ValidateByteRange, String> {
        let mut allowed = [false; 256];
        if !argument.trim().is_empty() {
            for item in argument.split(',') {
                let item = item.trim();
                let (low, high) = match item.split_once('-') {
                    Some((low, high)) => (parse_byte(low, argument)?, parse_byte(high, argument)?),
                    None => {
                        let b = parse_byte(item, argument)?;
                        (b, b)
                    }
                };
                if low > high {
                    return Err(format!("reversed byte range {item:?} in {argument:?}"));
                }
                for b in low..=high {
                    allowed[usize::from(b)] = true;
                }
            }
        }
        let allows_all = allowed.iter().all(|&a| a);
        Ok(ValidateByteRange {
            allowed,
            allows_all,
        })
    }

    /// True when `input` holds a byte that is not allowed.
    pub(crate) fn evaluate(&self, input: &[u8]) -> bool {
        !self.allows_all && input.iter().any(|&b| !self.allowed[usize::from(b)])
    }
}

/// Parses one byte value (`0`..=`255`).
fn parse_byte(text: &str, argument: &str) -> Result<u8, String> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid byte value {text:?} in {argument:?}"));
    }
    text.parse::<u8>()
        .map_err(|_| format!("byte value {text:?} out of range 0-255 in {argument:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(argument: &str, input: &[u8]) -> bool {
        ValidateByteRange::new(argument).unwrap().evaluate(input)
    }

    #[test]
    fn rejects_bad_arguments() {
        for bad in ["256", "1-256", "10-5", "a", "1,,2", "-5", "1-", "1 2"] {
            assert!(ValidateByteRange::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges() {
        assert!(!t("0-255", b""));
        assert!(!t("0-255", b"\x00\xff"));
        assert!(t("", b"a"));
        assert!(!t("", b""));
        assert!(!t("97-105", b"abcdefghi"));
        assert!(t("97-105", b"abcdefghij"));
        let crs = "9,10,13,32-126,128-255";
        assert!(!t(crs, b"a b\r\n\t\x80"));
        assert!(t(crs, b"a\x00"));
        assert!(t(crs, b"\x7f"));
        assert!(t(" 1 - 255 ", b"\x00"));
    }
}
