//! `@verifySSN`: a plausible US social security number.
//!
//! **What.** Runs the argument regular expression over the value; matches when a match holds
//! exactly 9 digits forming a plausible SSN by ModSecurity's rules: area (first 3 digits),
//! group (next 2) and serial (last 4) all non-zero, area below 740 and not 666, and the
//! digits neither all equal nor a run of consecutive digits (`123456789`). Failed matches
//! do not end the search (see `@verifyCC`). With `capture`, `TX.0` gets the match.
//!
//! **Argument.** A regular expression, compiled like `@rx`. An empty argument never
//! matches (ModSecurity).
//!
//! ```text
//! SecRule ARGS "@verifySSN \d{3}-?\d{2}-?\d{4}" "id:1,phase:2,deny,capture"
//! ```

use super::rx_linear::LinearRegex as Regex;

use super::rx::{compile_pattern, find_verified};
use super::Captures;

/// A compiled `@verifySSN`.
#[derive(Debug)]
pub(crate) struct VerifySsn {
    regex: Option<Regex>,
}

impl VerifySsn {
    /// Compiles the regular expression.
    pub(crate) fn new(argument: &str) -> Result<VerifySsn, String> {
        let regex = if argument.is_empty() {
            None
        } else {
            Some(compile_pattern(argument)?)
        };
        Ok(VerifySsn { regex })
    }

    /// Looks for a plausible SSN in `input`.
    pub(crate) fn evaluate(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let Some(regex) = &self.regex else {
            return false;
        };
        match find_verified(regex, input, plausible_ssn) {
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

/// ModSecurity's SSN plausibility rules over the digits of `text`.
fn plausible_ssn(text: &[u8]) -> bool {
    let mut digits = [0u32; 9];
    let mut count = 0;
    for &b in text.iter().filter(|b| b.is_ascii_digit()) {
        if count == 9 {
            return false;
        }
        digits[count] = u32::from(b - b'0');
        count += 1;
    }
    if count != 9 {
        return false;
    }
    let pairs = || digits.windows(2);
    if pairs().all(|w| w[1] == w[0] + 1) || pairs().all(|w| w[1] == w[0]) {
        return false;
    }
    let number = |range: std::ops::Range<usize>| digits[range].iter().fold(0, |n, d| n * 10 + d);
    let (area, group, serial) = (number(0..3), number(3..5), number(5..9));
    area != 0 && group != 0 && serial != 0 && area < 740 && area != 666
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plausibility() {
        assert!(plausible_ssn(b"574-57-8065"));
        assert!(!plausible_ssn(b"800-57-8065"));
        assert!(!plausible_ssn(b"666-57-8065"));
        assert!(!plausible_ssn(b"123-45-6789"));
        assert!(!plausible_ssn(b"111-11-1111"));
        assert!(!plausible_ssn(b"574-00-8065"));
        assert!(!plausible_ssn(b"574-57-80651"));
    }

    #[test]
    fn searches() {
        let op = VerifySsn::new(r"\d{3}-?\d{2}-?\d{4}").unwrap();
        assert!(op.evaluate(b"asdf 574-57-8065 asdf", None));
        assert!(!op.evaluate(b"asdf 800-57-8065 asdf", None));
        assert!(!VerifySsn::new("").unwrap().evaluate(b"574-57-8065", None));
        assert!(VerifySsn::new("(").is_err());
    }
}
