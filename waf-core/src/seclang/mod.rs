//! SecLang text → syntax tree ([`ast`]).
//!
//! The first of the three stages (parse → compile → evaluate). This module reads rule text,
//! follows `Include`/`IncludeOptional` (with globs, relative to the including file), joins
//! continuation lines and splits each directive into its parts, keeping a [`Span`] on each.
//! It knows nothing of what names mean; [`crate::compile`] does.

pub mod ast;
mod error;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;

pub use ast::*;
pub use error::ParseError;

use std::path::Path;

/// Parses rule text given inline. `name` appears in error messages and spans; relative
/// `Include` paths resolve against the current directory.
pub fn parse_str(name: &str, text: &str) -> Result<Vec<Directive>, ParseError> {
    parser::parse_str(name, text)
}

/// Reads and parses a rule file, following its includes.
pub fn parse_file(path: &Path) -> Result<Vec<Directive>, ParseError> {
    parser::parse_file(path)
}
