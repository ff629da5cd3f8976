//! Parse errors: what was wrong, and where, with the offending line underlined.

use std::fmt;

use super::ast::Span;

/// A rule file could not be read or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Where the problem is.
    pub span: Span,
    /// What is wrong, lower-case, no period.
    pub message: String,
    /// The text of the offending line, for the `^^^` display.
    pub line_text: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.span.file, self.span.line, self.span.column, self.message
        )?;
        if !self.line_text.is_empty() {
            let col = (self.span.column as usize).saturating_sub(1);
            write!(f, "\n  | {}\n  | {}^^^", self.line_text, " ".repeat(col))?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}
