//! `@endsWith`: the value ends with the argument.
//!
//! **What.** Case-sensitive suffix test. An empty argument matches every value (ModSecurity).
//!
//! **Argument.** A string, macros allowed.
//!
//! ```text
//! SecRule REQUEST_HEADERS:Referer "!@endsWith %{request_headers.host}" "id:1,phase:1,pass"
//! ```

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@endsWith`.
#[derive(Debug)]
pub(crate) struct EndsWith {
    pub(super) argument: StringArgument,
}

impl EndsWith {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<EndsWith, String> {
        Ok(EndsWith {
            argument: StringArgument::new(argument)?,
        })
    }

    /// Tests `input`.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        input.ends_with(&self.argument.value(expander))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::{FixedExpander, NO_MACROS};

    fn t(argument: &str, input: &str) -> bool {
        EndsWith::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn suffix() {
        assert!(t("", ""));
        assert!(t("", "abc"));
        assert!(!t("abc", ""));
        assert!(t("ghi", "abcdef\0ghi"));
        assert!(!t("def", "abcdefghi"));
        let op = EndsWith::new("%{request_headers.host}").unwrap();
        assert!(op.evaluate(b"www.example.com", &FixedExpander(b"example.com")));
        assert!(!op.evaluate(b"www.example.org", &FixedExpander(b"example.com")));
    }
}
