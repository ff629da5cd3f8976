//! `@streq`: the value equals the argument.
//!
//! **What.** Case-sensitive byte equality.
//!
//! **Argument.** A string, macros allowed.
//!
//! ```text
//! SecRule REQUEST_METHOD "@streq POST" "id:1,phase:1,pass"
//! SecRule TX:1 "!@streq %{TX.2}" "id:2,phase:1,pass"
//! ```

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@streq`.
#[derive(Debug)]
pub(crate) struct Streq {
    pub(super) argument: StringArgument,
}

impl Streq {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<Streq, String> {
        Ok(Streq {
            argument: StringArgument::new(argument)?,
        })
    }

    /// Tests `input`.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        input == &*self.argument.value(expander)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::{FixedExpander, NO_MACROS};

    fn t(argument: &str, input: &str) -> bool {
        Streq::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn equality() {
        assert!(t("", ""));
        assert!(!t("", "a"));
        assert!(!t("a", ""));
        assert!(t("POST", "POST"));
        assert!(!t("POST", "post"));
        let op = Streq::new("%{tx.2}").unwrap();
        assert!(op.evaluate(b"x", &FixedExpander(b"x")));
        assert!(!op.evaluate(b"y", &FixedExpander(b"x")));
    }
}
