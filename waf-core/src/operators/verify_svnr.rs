//! `@verifySVNR`: a valid Austrian social insurance number (SVNR).
//!
//! **What.** Runs the argument regular expression over the value; matches when a match holds
//! an SVNR whose check digit (the 4th digit) is right: the other nine digits weighted
//! 3, 7, 9, 5, 8, 4, 2, 1, 6, summed, mod 11 (10 counts as 0). As in ModSecurity, the first
//! 10 digits of the match are used (fewer is no SVNR), and the well-known fakes (all digits
//! equal, `0123456789`, `1234567890`) are rejected. Failed matches do not end the search
//! (see `@verifyCC`). With `capture`, `TX.0` gets the match.
//!
//! **Argument.** A regular expression, compiled like `@rx`. An empty argument never matches
//! (ModSecurity).
//!
//! ```text
//! SecRule ARGS "@verifySVNR ([0-9]{4} ?[0-9]{6})" "id:1,phase:2,deny,capture"
//! ```

use super::rx_linear::LinearRegex as Regex;

use super::rx::{compile_pattern, find_verified};
use super::Captures;

/// A compiled `@verifySVNR`.
#[derive(Debug)]
pub(crate) struct VerifySvnr {
    regex: Option<Regex>,
}

impl VerifySvnr {
    /// Compiles the regular expression.
    pub(crate) fn new(argument: &str) -> Result<VerifySvnr, String> {
        let regex = if argument.is_empty() {
            None
        } else {
            Some(compile_pattern(argument)?)
        };
        Ok(VerifySvnr { regex })
    }

    /// Looks for a valid SVNR in `input`.
    pub(crate) fn evaluate(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let Some(regex) = &self.regex else {
            return false;
        };
        match find_verified(regex, input, valid_svnr) {
            Some(found) => {
                if let Some(captures) = captures {
                    captures.fill([found]);
                }
                true
            }
            None => false,
        }
    }
}

/// The SVNR check over the first 10 digits of `text`.
fn valid_svnr(text: &[u8]) -> bool {
    const WEIGHTS: [u32; 10] = [3, 7, 9, 0, 5, 8, 4, 2, 1, 6];
    let mut digits = [0u32; 10];
    let mut count = 0;
    for &b in text.iter().filter(|b| b.is_ascii_digit()).take(10) {
        digits[count] = u32::from(b - b'0');
        count += 1;
    }
    if count != 10
        || digits.iter().all(|&d| d == digits[0])
        || digits == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        || digits == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
    {
        return false;
    }
    let sum: u32 = digits.iter().zip(WEIGHTS).map(|(d, w)| d * w).sum();
    (sum % 11) % 10 == digits[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digit() {
        assert!(valid_svnr(b"1237010180"));
        assert!(valid_svnr(b"1237 010180"));
        assert!(!valid_svnr(b"1238010180"));
        assert!(!valid_svnr(b"0100817"));
        assert!(!valid_svnr(b"0000000000"));
    }

    #[test]
    fn searches() {
        let op = VerifySvnr::new("([0-9]{4} ?[0-9]{6})").unwrap();
        assert!(op.evaluate(b"1237010180", None));
        assert!(op.evaluate(b"asdf 1237 010180 asdf", None));
        assert!(!op.evaluate(b"asdf 0100817 asdf", None));
        assert!(!VerifySvnr::new("").unwrap().evaluate(b"1237010180", None));
    }
}
