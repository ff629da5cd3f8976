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
    pub(super) argument: StringArgument,
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
        occurs_in(input, &self.argument.value(expander))
    }
}

/// Whether `needle` occurs in `haystack`. The needle changes with every call (it is the
/// value), so a `memmem` searcher built for it (about 480 instructions) cost more than
/// searching a CRS list of a hundred bytes: short haystacks are searched with `memchr` for
/// the needle's first byte that is not a list delimiter (CRS writes `/name/` and `|type|`,
/// so a first byte of `/` is found everywhere), then compared there.
fn occurs_in(needle: &[u8], haystack: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    if needle.len() > haystack.len() {
        return false;
    }
    if haystack.len() > 1024 {
        return memmem::find(haystack, needle).is_some();
    }
    let k = needle
        .iter()
        .position(|b| !matches!(b, b'/' | b'|' | b' ' | b',' | b'.' | b'-'))
        .unwrap_or(0);
    let (byte, n) = (needle[k], needle.len());
    // The last place `needle[k]` can be for the whole needle to fit.
    let last = haystack.len() - (n - k);
    let mut from = k;
    while from <= last {
        let Some(found) = memchr::memchr(byte, &haystack[from..=last]) else {
            return false;
        };
        let at = from + found - k;
        if &haystack[at..at + n] == needle {
            return true;
        }
        from += found + 1;
    }
    false
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

    /// The `memchr` search answers what `memmem` answers, on short values and lists made
    /// of delimiters and letters (a needle of delimiters only included).
    #[test]
    fn occurs_in_agrees_with_memmem() {
        let values: Vec<Vec<u8>> = crate::transformations::features::generated_values(b"/|ab. ", 3)
            .take(3_000)
            .collect();
        for needle in values.iter().take(300) {
            for haystack in &values {
                assert_eq!(
                    occurs_in(needle, haystack),
                    memmem::find(haystack, needle).is_some(),
                    "{needle:?} in {haystack:?}"
                );
            }
        }
        let long = b"/a/ ".repeat(400);
        assert!(occurs_in(b"/a/ /a/", &long));
        assert!(!occurs_in(b"/b/", &long));
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
