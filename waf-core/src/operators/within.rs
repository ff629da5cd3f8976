//! `@within`: the value occurs inside the argument.
//!
//! **What.** Case-sensitive substring test, reversed: the *argument* is searched for the
//! *value*. An empty value is found in any argument; a non-empty value is not found in an
//! empty argument (ModSecurity). Note the argument is not split into words: `@within GET
//! HEAD POST` matches `D P`, as in ModSecurity and Coraza. Where partial matches would matter,
//! CRS delimits both the list entries and the value: `|text/xml|` in
//! `tx.allowed_request_content_type`, `.bak/` in `tx.restricted_extensions`.
//!
//! **Argument.** A string, macros allowed (CRS: `%{tx.allowed_methods}`).
//!
//! ```text
//! SecRule REQUEST_METHOD "!@within %{tx.allowed_methods}" "id:1,phase:1,deny"
//! ```

use memchr::memmem;

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@within`.
#[derive(Debug)]
pub(crate) struct Within {
    argument: StringArgument,
}

impl Within {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<Within, String> {
        Ok(Within {
            argument: StringArgument::new(argument)?,
        })
    }

    /// Tests `input`.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        memmem::find(&self.argument.value(expander), input).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::{FixedExpander, NO_MACROS};

    fn t(argument: &str, input: &str) -> bool {
        Within::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn reversed_substring() {
        assert!(t("", ""));
        assert!(t("abc", ""));
        assert!(!t("", "abc"));
        assert!(t("GET HEAD POST", "HEAD"));
        assert!(!t("GET HEAD POST", "PUT"));
        assert!(t("GET HEAD POST", "D P"));
        let op = Within::new("%{tx.allowed_methods}").unwrap();
        assert!(op.evaluate(b"GET", &FixedExpander(b"GET HEAD")));
        assert!(!op.evaluate(b"DELETE", &FixedExpander(b"GET HEAD")));
    }
}
