//! `@containsWord`: the argument occurs in the value as a whole word.
//!
//! **What.** Case-sensitive search for the argument with a non-letter (or the edge of the
//! value) on both sides. As in ModSecurity, only ASCII letters count as word characters, so
//! digits and `_` are boundaries (`def` is a word in `abc0def`). An empty argument matches
//! everything, an empty value matches nothing else.
//!
//! **Argument.** A string, macros allowed.
//!
//! ```text
//! SecRule ARGS "@containsWord select" "id:1,phase:2,deny"
//! ```

use memchr::memmem;

use super::StringArgument;
use crate::macros::MacroExpander;

/// A compiled `@containsWord`.
#[derive(Debug)]
pub(crate) struct ContainsWord {
    pub(super) argument: StringArgument,
}

impl ContainsWord {
    /// Parses the argument.
    pub(crate) fn new(argument: &str) -> Result<ContainsWord, String> {
        Ok(ContainsWord {
            argument: StringArgument::new(argument)?,
        })
    }

    /// Tests `input`.
    pub(crate) fn evaluate(&self, input: &[u8], expander: &dyn MacroExpander) -> bool {
        let word = self.argument.value(expander);
        if word.is_empty() {
            return true;
        }
        // A position is a boundary when it is inside the value and not an ASCII letter;
        // the edges of the value are handled by the callers below.
        let boundary = |i: usize| input.get(i).is_some_and(|b| !b.is_ascii_alphabetic());
        // Overlapping occurrences, as ModSecurity's `find(word, pos + 1)` loop.
        let finder = memmem::Finder::new(&word);
        let mut from = 0;
        while let Some(found) = input.get(from..).and_then(|rest| finder.find(rest)) {
            let start = from + found;
            let end = start + word.len();
            let before = start == 0 || boundary(start - 1);
            let after = end == input.len() || boundary(end);
            if before && after {
                return true;
            }
            from = start + 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::NO_MACROS;

    fn t(argument: &str, input: &str) -> bool {
        ContainsWord::new(argument)
            .unwrap()
            .evaluate(input.as_bytes(), &NO_MACROS)
    }

    #[test]
    fn words() {
        assert!(t("", ""));
        assert!(t("", "abc"));
        assert!(!t("abc", ""));
        assert!(t("x", "x"));
        assert!(t("x", " x "));
        assert!(!t("y", "xyz"));
        assert!(!t("abc", "abcdef"));
        assert!(t("abc", "abc def"));
        assert!(t("def", "abc def"));
        assert!(t("def", "abc\0def ghi"));
        assert!(t("def", "abc0def"));
        assert!(t("hiding", "hidingX later hiding"));
        assert!(t("hiding", "hidingX later hiding!"));
        assert!(!t("hiding", "hidingX later hidings"));
        // Only an overlapping occurrence is a word.
        assert!(t("--", "x---"));
    }
}
