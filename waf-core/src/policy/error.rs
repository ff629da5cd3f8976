//! [`PolicyError`]: a policy failed to load, with where and why.

use std::fmt;

/// What kind of problem a [`PolicyError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyErrorKind {
    /// A list, database or page file could not be read.
    Io,
    /// An expression or list entry is not well formed.
    Syntax,
    /// Well formed, but the types do not fit (`ip.src contains "x"`), a name is unknown
    /// (a field, a list, a rate limit), or a value is out of range.
    Invalid,
}

/// Where in a policy something went wrong: an expression (named after its rule) or a list
/// file, with a 1-based line and column inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyLocation {
    /// The rule (`rule "block-admin" expression`) or file the position is in.
    pub source: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for PolicyLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.source, self.line, self.column)
    }
}

/// A policy failed to load. Display prints the location and, for expressions and list
/// files, the offending line with `^^^` under the column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    kind: PolicyErrorKind,
    location: Option<PolicyLocation>,
    message: String,
    pub(crate) line_text: String,
}

impl PolicyError {
    pub(crate) fn new(kind: PolicyErrorKind, message: impl Into<String>) -> PolicyError {
        PolicyError {
            kind,
            location: None,
            message: message.into(),
            line_text: String::new(),
        }
    }

    /// An error at `line`:`column` of `text` (the whole expression or file), which is
    /// called `source` in messages.
    pub(crate) fn at(
        kind: PolicyErrorKind,
        source: &str,
        text: &str,
        line: u32,
        column: u32,
        message: impl Into<String>,
    ) -> PolicyError {
        let line_text = text
            .lines()
            .nth(line.saturating_sub(1) as usize)
            .unwrap_or_default()
            .to_string();
        PolicyError {
            kind,
            location: Some(PolicyLocation {
                source: source.to_string(),
                line,
                column,
            }),
            message: message.into(),
            line_text,
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> PolicyErrorKind {
        self.kind
    }

    /// Where, when the error is inside an expression or a file.
    pub fn location(&self) -> Option<&PolicyLocation> {
        self.location.as_ref()
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{loc}: {}", self.message)?,
            None => write!(f, "{}", self.message)?,
        }
        if let (Some(loc), false) = (&self.location, self.line_text.is_empty()) {
            let col = (loc.column as usize).saturating_sub(1);
            write!(f, "\n  | {}\n  | {}^^^", self.line_text, " ".repeat(col))?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyError {}
