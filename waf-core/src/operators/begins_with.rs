//! `@beginsWith`: the value starts with the argument.
//!
//! **What.** Case-sensitive prefix test. An empty argument matches every value (ModSecurity).
//!
//! **Argument.** A string, macros allowed.
//!
//! ```text
//! SecRule REQUEST_LINE "!@beginsWith GET /" "id:1,phase:1,pass"
//! ```

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@beginsWith`.
#[derive(Debug)]
pub(crate) struct BeginsWith {
    pub(super) argument: StringArgument,
}

impl BeginsWith {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<BeginsWith, String> {
        Ok(BeginsWith {
            argument: StringArgument::new(argument)?,
        })
    }

    /// Tests `input`.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        input.starts_with(&self.argument.value(expander))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::{FixedExpander, NO_MACROS};

    fn t(argument: &str, input: &str) -> bool {
        BeginsWith::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn prefix() {
        assert!(t("", ""));
        assert!(t("", "abc"));
        assert!(!t("abc", ""));
        assert!(t("abc", "abcdef"));
        assert!(!t("abc", "ab"));
        assert!(!t("ABC", "abc"));
        let op = BeginsWith::new("%{request_headers.host}/").unwrap();
        assert!(op.evaluate(b"example.com/x", &FixedExpander(b"example.com")));
        assert!(BeginsWith::new("%{tx.a").is_err());
    }
}
