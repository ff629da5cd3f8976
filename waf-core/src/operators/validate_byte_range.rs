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

    /// The byte classes ([`crate::transformations::features`]) of the bytes outside the
    /// ranges, one of which every match holds; 0 when one of them has no class (`a`-`z`)
    /// or when every byte is allowed.
    pub(crate) fn required_classes(&self) -> crate::transformations::features::Features {
        use crate::transformations::features::class_of;
        if self.allows_all {
            return 0;
        }
        (0..=255u8)
            .filter(|&b| !self.allowed[usize::from(b)])
            .try_fold(0, |m, b| match class_of(b) {
                0 => None,
                c => Some(m | c),
            })
            .unwrap_or(0)
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

    /// A value whose classes miss the gate holds no byte outside the ranges.
    #[test]
    fn required_classes_cover_every_disallowed_byte() {
        use crate::transformations::features::{self, of};
        let gate = |a: &str| ValidateByteRange::new(a).unwrap().required_classes();
        assert_eq!(gate("1-255"), features::NUL);
        assert_eq!(gate("0-255"), 0, "nothing to find");
        assert_eq!(
            gate("32-126"),
            features::NUL | features::OTHER_SPACE | features::CONTROL | features::HIGH
        );
        assert_eq!(gate("0-96,123-255"), 0, "a-z have no class");
        for a in ["1-255", "9,10,13,32-126,128-255", "32-126"] {
            let (op, g) = (ValidateByteRange::new(a).unwrap(), gate(a));
            for b in 0..=255u8 {
                if of(&[b]) & g == 0 {
                    assert!(
                        !op.evaluate(&[b]),
                        "{a}: byte {b} refused but not in the gate"
                    );
                }
            }
        }
    }
}
