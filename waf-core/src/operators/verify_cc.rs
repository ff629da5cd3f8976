//! `@verifyCC`: a credit card number that passes the Luhn check.
//!
//! **What.** Runs the argument regular expression over the value; matches when a match
//! passes the Luhn (mod 10) checksum over its digits (other characters, such as `-` or the
//! context the pattern matched around the number, are skipped). A failed match does not end
//! the search: the next one starting after its first byte is tried, as ModSecurity does.
//! With `capture`, `TX.0` gets the whole regex match.
//!
//! **Argument.** A regular expression, compiled like `@rx` (bytes, dot-all, multi-line).
//!
//! ```text
//! SecRule ARGS "@verifyCC (?:^|[^\d])(\d{4}\-?\d{4}\-?\d{2}\-?\d{2}\-?\d{1,4})(?:[^\d]|$)" "id:1,phase:2,deny,capture"
//! ```

use super::rx_linear::LinearRegex as Regex;

use super::rx::{compile_pattern, find_verified};
use super::Captures;

/// A compiled `@verifyCC`.
#[derive(Debug)]
pub(crate) struct VerifyCc {
    regex: Regex,
}

impl VerifyCc {
    /// Compiles the regular expression.
    pub(crate) fn new(argument: &str) -> Result<VerifyCc, String> {
        if argument.is_empty() {
            return Err("@verifyCC needs a regular expression".to_owned());
        }
        Ok(VerifyCc {
            regex: compile_pattern(argument)?,
        })
    }

    /// Looks for a Luhn-valid match in `input`.
    pub(crate) fn evaluate(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        match find_verified(&self.regex, input, luhn) {
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

/// The Luhn checksum over the ASCII digits of `text`; false when there is no digit.
fn luhn(text: &[u8]) -> bool {
    let mut sum = 0u32;
    let mut digits = 0usize;
    for &b in text.iter().rev().filter(|b| b.is_ascii_digit()) {
        let d = u32::from(b - b'0');
        sum += if digits % 2 == 1 {
            let doubled = d * 2;
            if doubled > 9 {
                doubled - 9
            } else {
                doubled
            }
        } else {
            d
        };
        digits += 1;
    }
    digits > 0 && sum % 10 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATTERN: &str = r"(?:^|[^\d])(\d{4}\-?\d{4}\-?\d{2}\-?\d{2}\-?\d{1,4})(?:[^\d]|$)";

    #[test]
    fn luhn_checksum() {
        assert!(luhn(b"4417123456789113"));
        assert!(!luhn(b"4417123456789112"));
        assert!(luhn(b"5484-6050-8915-8216"));
        assert!(!luhn(b""));
        assert!(!luhn(b"abc"));
        assert!(luhn(b"0"));
    }

    #[test]
    fn finds_valid_numbers() {
        let op = VerifyCc::new(PATTERN).unwrap();
        assert!(op.evaluate(b"a5484605089158216b", None));
        assert!(!op.evaluate(b"5484605089158217", None));
        assert!(!op.evaluate(b"15484605089158216", None));
        assert!(!op.evaluate(b"", None));
        let mut c = Captures::default();
        assert!(op.evaluate(b"card: 5484-6050-8915-8216.", Some(&mut c)));
        assert_eq!(c.groups, vec![b" 5484-6050-8915-8216.".to_vec()]);
    }

    #[test]
    fn rejects_bad_arguments() {
        assert!(VerifyCc::new("").is_err());
        assert!(VerifyCc::new("(").is_err());
    }
}
