//! `@unconditionalMatch`: always matches.
//!
//! **What.** Always true, whatever the value (CRS uses it to run actions on every request).
//!
//! **Argument.** Ignored.
//!
//! ```text
//! SecRule REQUEST_URI "@unconditionalMatch" "id:1,phase:1,pass,nolog,setvar:tx.x=1"
//! ```

/// `@unconditionalMatch`.
#[derive(Debug)]
pub(crate) struct UnconditionalMatch;

impl UnconditionalMatch {
    /// Always true.
    pub(crate) fn evaluate(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always() {
        assert!(UnconditionalMatch.evaluate());
    }
}
