//! `@contains`: the argument occurs in the value.
//!
//! **What.** Case-sensitive substring test. An empty argument matches every value
//! (ModSecurity).
//!
//! **Argument.** A string, macros allowed.
//!
//! ```text
//! SecRule REQUEST_HEADERS:Content-Type "@contains multipart" "id:1,phase:1,pass"
//! ```
//!
//! A literal argument gets a precompiled substring searcher (`memchr::memmem`).

use memchr::memmem;

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@contains`.
#[derive(Debug)]
pub(crate) struct Contains {
    pub(super) argument: StringArgument,
    finder: Option<memmem::Finder<'static>>,
}

impl Contains {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<Contains, String> {
        let argument = StringArgument::new(argument)?;
        let finder = argument
            .literal()
            .map(|l| memmem::Finder::new(l).into_owned());
        Ok(Contains { argument, finder })
    }

    /// Tests `input`.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        match &self.finder {
            Some(finder) => finder.find(input).is_some(),
            None => memmem::find(input, &self.argument.value(expander)).is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::{FixedExpander, NO_MACROS};

    fn t(argument: &str, input: &str) -> bool {
        Contains::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn substring() {
        assert!(t("", ""));
        assert!(t("", "abc"));
        assert!(!t("abc", ""));
        assert!(t("def", "abcdefghi"));
        assert!(!t("DEF", "abcdefghi"));
        assert!(t("hiding", "hidinX hiding"));
        let op = Contains::new("<%{tx.tag}>").unwrap();
        assert!(op.evaluate(b"a<b>c", &FixedExpander(b"b")));
        assert!(!op.evaluate(b"a<c>c", &FixedExpander(b"b")));
    }
}
