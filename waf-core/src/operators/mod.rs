//! Operators (`@rx`, `@pm`, `@eq`, ...): one file each, registered in [`Operator`].
//!
//! Placeholder: being written.

use std::path::Path;

use crate::macros::MacroExpander;

/// Capture groups written by an operator when its rule has `capture`: index 0 is the whole
/// match (or the matched phrase, or the SQLi fingerprint), 1..=9 the groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Captures {
    /// `TX.0` .. `TX.9`.
    pub(crate) groups: Vec<Vec<u8>>,
}

/// A compiled operator.
#[derive(Debug)]
pub(crate) enum Operator {
    /// `@unconditionalMatch`.
    UnconditionalMatch,
}

impl Operator {
    /// Compiles `@name argument`. `rules_dir` is the directory of the rule file, for
    /// `@pmFromFile` and friends. The error is a message without location.
    pub(crate) fn compile(
        name: &str,
        _argument: &str,
        _rules_dir: Option<&Path>,
    ) -> Result<Operator, String> {
        match name.to_ascii_lowercase().as_str() {
            "unconditionalmatch" => Ok(Operator::UnconditionalMatch),
            _ => Err(format!("unsupported operator @{name}")),
        }
    }

    /// Runs the operator on one (transformed) value. Macros in the argument are expanded
    /// with `expander`; when `captures` is given and the operator matches, it is filled.
    pub(crate) fn evaluate(
        &self,
        _input: &[u8],
        _expander: &dyn MacroExpander,
        _captures: Option<&mut Captures>,
    ) -> bool {
        match self {
            Operator::UnconditionalMatch => true,
        }
    }
}
