//! `@strmatch`: the argument occurs in the value.
//!
//! **What.** Case-sensitive substring test, like `@contains` (ModSecurity implements it with
//! Boyer-Moore-Horspool; we use a precompiled `memchr::memmem` searcher for literals).
//!
//! **Argument.** A string, macros allowed.
//!
//! ```text
//! SecRule ARGS "@strmatch WebZIP" "id:1,phase:2,deny"
//! ```

use memchr::memmem;

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@strmatch`.
#[derive(Debug)]
pub(crate) struct Strmatch {
    pub(super) argument: StringArgument,
    finder: Option<memmem::Finder<'static>>,
}

impl Strmatch {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<Strmatch, String> {
        let argument = StringArgument::new(argument)?;
        let finder = argument
            .literal()
            .map(|l| memmem::Finder::new(l).into_owned());
        Ok(Strmatch { argument, finder })
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
    use crate::operators::test_support::NO_MACROS;

    fn t(argument: &str, input: &str) -> bool {
        Strmatch::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn substring() {
        assert!(!t("TestCase", ""));
        assert!(t("abc", "abcdefghi"));
        assert!(t("ghi", "abcdefghi"));
        assert!(!t("ghij", "abcdefghi"));
    }
}
