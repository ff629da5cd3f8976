//! Syntax tree → [`Program`]: placeholder.

use crate::error::{Error, Warning};
use crate::seclang::Directive;
use crate::waf::EngineMode;

/// The compiled, immutable rule set.
#[derive(Debug, Default)]
pub(crate) struct Program {
    pub(crate) config: Config,
    pub(crate) warnings: Vec<Warning>,
}

/// Engine settings from directives.
#[derive(Debug, Default)]
pub(crate) struct Config {
    pub(crate) engine_mode: EngineMode,
}

impl Program {
    pub(crate) fn rule_count(&self) -> usize {
        0
    }
}

pub(crate) fn compile(_directives: &[Directive]) -> Result<Program, Error> {
    Ok(Program::default())
}
