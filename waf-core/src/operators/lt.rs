//! `@lt`: less than.
//!
//! **What.** Matches when the value, read as an integer, is less than the argument. Both sides
//! are read like C's `atoi` (whitespace, sign, digits; no digits reads as 0): see
//! [`super::numeric`].
//!
//! **Argument.** An integer, or a macro expanded per transaction.
//!
//! ```text
//! SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:1,phase:1,pass,skipAfter:END"
//! ```

use super::numeric::{parse_integer, NumberArgument};
use crate::macros::MacroExpander;

/// A compiled `@lt`.
#[derive(Debug)]
pub(crate) struct Lt {
    pub(super) argument: NumberArgument,
}

impl Lt {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<Lt, String> {
        Ok(Lt {
            argument: NumberArgument::new(argument)?,
        })
    }

    /// The argument, when it is a number written in the rule (no macro).
    pub(crate) fn literal(&self) -> Option<i64> {
        self.argument.literal()
    }

    /// Compares `input` with the argument.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        parse_integer(input) < self.argument.value(expander)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::{FixedExpander, NO_MACROS};

    fn t(argument: &str, input: &str) -> bool {
        Lt::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn compares() {
        assert!(!t("5", "5"));
        assert!(t("5", "0"));
        assert!(!t("-1", "xxx"));
        assert!(t("5", "xxx"));
    }

    #[test]
    fn macro_argument() {
        let op = Lt::new("%{tx.threshold}").unwrap();
        assert_eq!(op.evaluate(b"5", &FixedExpander(b"5")), 5 < 5);
        assert_eq!(op.evaluate(b"4", &FixedExpander(b"5")), 4 < 5);
        assert_eq!(op.evaluate(b"6", &FixedExpander(b"5")), 6 < 5);
        assert!(Lt::new("%{nope}").is_err());
    }
}
