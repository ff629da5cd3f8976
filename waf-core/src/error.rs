//! Configuration errors and load warnings.
//!
//! Request data never produces an [`Error`]: only rule text and API misuse do. Every error
//! from a rule file carries its [`Location`] and prints the offending line with `^^^`.

use std::fmt;

use crate::seclang::{ParseError, Span};

/// A place in a rule file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// File name (or the name given to inline rules).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl Location {
    pub(crate) fn from_span(span: &Span) -> Location {
        Location {
            file: span.file.to_string(),
            line: span.line,
            column: span.column,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// What kind of problem an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A file could not be read.
    Io,
    /// The text is not valid SecLang.
    Syntax,
    /// Valid SecLang that this engine does not support (an unknown directive, variable,
    /// operator, transformation or action). Never skipped silently.
    Unsupported,
    /// A value is out of range or inconsistent (a bad regex, a missing rule id, ...).
    Invalid,
}

/// A rule set failed to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    location: Option<Location>,
    message: String,
    line_text: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, span: Option<&Span>, message: impl Into<String>) -> Error {
        Error {
            kind,
            location: span.map(Location::from_span),
            message: message.into(),
            line_text: String::new(),
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Where in the rules, if the error comes from a rule file.
    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref()
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Error {
        let kind = if e.message.starts_with("cannot read") || e.message.starts_with("no file") {
            ErrorKind::Io
        } else if e.message.starts_with("unsupported") || e.message.starts_with("unknown") {
            ErrorKind::Unsupported
        } else {
            ErrorKind::Syntax
        };
        Error {
            kind,
            location: Some(Location::from_span(&e.span)),
            message: e.message,
            line_text: e.line_text,
        }
    }
}

impl From<crate::policy::PolicyError> for Error {
    fn from(e: crate::policy::PolicyError) -> Error {
        use crate::policy::PolicyErrorKind as K;
        let kind = match e.kind() {
            K::Io => ErrorKind::Io,
            K::Syntax => ErrorKind::Syntax,
            _ => ErrorKind::Invalid,
        };
        Error {
            kind,
            location: e.location().map(|l| Location {
                file: l.source.clone(),
                line: l.line,
                column: l.column,
            }),
            message: e.message().to_string(),
            line_text: e.line_text.clone(),
        }
    }
}

impl fmt::Display for Error {
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

impl std::error::Error for Error {}

/// Something in the rules that loads but is probably a mistake, such as an exclusion that
/// names a rule id or tag that matches no rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Where.
    pub location: Option<Location>,
    /// What.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{loc}: warning: {}", self.message),
            None => write!(f, "warning: {}", self.message),
        }
    }
}
