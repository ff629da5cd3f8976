//! `@verifyCPF`: a valid Brazilian CPF number.
//!
//! **What.** Runs the argument regular expression over the value; matches when a match holds
//! a CPF whose two check digits are right (mod 11, weights 10..2 then 11..2). As in
//! ModSecurity, the first 11 digits of the match are used (other characters such as `.` and
//! `-` are skipped, fewer than 11 digits is no CPF), and the well-known fakes (all digits
//! equal, `01234567890`) are rejected. Failed matches do not end the search (see
//! `@verifyCC`). With `capture`, `TX.0` gets the match.
//!
//! **Argument.** A regular expression, compiled like `@rx`. An empty argument never matches
//! (ModSecurity).
//!
//! ```text
//! SecRule ARGS "@verifyCPF ([0-9]{3}\.){2}[0-9]{3}-[0-9]{2}" "id:1,phase:2,deny,capture"
//! ```

use super::rx_linear::LinearRegex as Regex;

use super::rx::{compile_pattern, find_verified};
use super::Captures;

/// A compiled `@verifyCPF`.
#[derive(Debug)]
pub(crate) struct VerifyCpf {
    regex: Option<Regex>,
}

impl VerifyCpf {
    /// Compiles the regular expression.
    pub(crate) fn new(argument: &str) -> Result<VerifyCpf, String> {
        let regex = if argument.is_empty() {
            None
        } else {
            Some(compile_pattern(argument)?)
        };
        Ok(VerifyCpf { regex })
    }

    /// Looks for a valid CPF in `input`.
    pub(crate) fn evaluate(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let Some(regex) = &self.regex else {
            return false;
        };
        match find_verified(regex, input, valid_cpf) {
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

/// The CPF check over the first 11 digits of `text`.
fn valid_cpf(text: &[u8]) -> bool {
    let mut digits = [0u32; 11];
    let mut count = 0;
    for &b in text.iter().filter(|b| b.is_ascii_digit()).take(11) {
        digits[count] = u32::from(b - b'0');
        count += 1;
    }
    if count != 11
        || digits.iter().all(|&d| d == digits[0])
        || digits == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
    {
        return false;
    }
    let check = |len: usize| {
        let sum: u32 = digits[..len]
            .iter()
            .zip((2..=len as u32 + 1).rev())
            .map(|(d, w)| d * w)
            .sum();
        match sum % 11 {
            0 | 1 => 0,
            r => 11 - r,
        }
    };
    check(9) == digits[9] && check(10) == digits[10]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digits() {
        assert!(valid_cpf(b"010.817.514-60"));
        assert!(!valid_cpf(b"010.817.514-61"));
        assert!(!valid_cpf(b"010.817.514-6"));
        assert!(!valid_cpf(b"111.111.111-11"));
        assert!(!valid_cpf(b"012.345.678-90"));
        // Digits past the 11th are ignored, as in ModSecurity.
        assert!(valid_cpf(b"010.817.514-60-9"));
    }

    #[test]
    fn searches() {
        let op = VerifyCpf::new(r"([0-9]{3}\.){2}[0-9]{3}-[0-9]{2}").unwrap();
        assert!(op.evaluate(b"asdf 010.817.514-60 asdf", None));
        assert!(!op.evaluate(b"asdf 010.817 asdf", None));
        assert!(!VerifyCpf::new("")
            .unwrap()
            .evaluate(b"010.817.514-60", None));
        assert!(VerifyCpf::new("(").is_err());
    }
}
