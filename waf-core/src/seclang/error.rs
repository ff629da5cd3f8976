//! Parse errors: what was wrong, and where, with the offending line underlined.

use std::fmt;

use super::ast::Span;

/// A rule file could not be read or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Where the problem is. Line and column are 0 when the error is about a whole file
    /// (the top-level file passed to [`super::parse_file`] could not be read).
    pub span: Span,
    /// What is wrong, lower-case, no period.
    pub message: String,
    /// The text of the offending line, for the `^^^` display.
    pub line_text: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.span.line == 0 {
            // No place in the file (the file itself could not be read).
            return write!(f, "{}: {}", self.span.file, self.message);
        }
        write!(
            f,
            "{}:{}:{}: {}",
            self.span.file, self.span.line, self.span.column, self.message
        )?;
        if !self.line_text.is_empty() {
            // Keep tabs so that the carets line up under the column (a byte offset).
            let col = (self.span.column as usize).saturating_sub(1);
            let pad: String = self
                .line_text
                .bytes()
                .chain(std::iter::repeat(b' '))
                .take(col)
                .map(|b| if b == b'\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "\n  | {}\n  | {pad}^^^", self.line_text)?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}
