//! `@noMatch`: never matches.
//!
//! **What.** Always false, whatever the value; useful to disable a rule while keeping its
//! actions parsed.
//!
//! **Argument.** Ignored.
//!
//! ```text
//! SecRule ARGS "@noMatch" "id:1,phase:2,pass"
//! ```

/// `@noMatch`.
#[derive(Debug)]
pub(crate) struct NoMatch;

impl NoMatch {
    /// Always false.
    pub(crate) fn evaluate(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never() {
        assert!(!NoMatch.evaluate());
    }
}
