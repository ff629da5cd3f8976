//! SecLang text → syntax tree ([`ast`]).
//!
//! The first of the three stages (parse → compile → evaluate). This module reads rule text,
//! follows `Include`/`IncludeOptional` (with globs, relative to the including file), joins
//! continuation lines and splits each directive into its parts, keeping a [`Span`] on each.
//! It knows nothing of what names mean; [`crate::compile`] does.
//!
//! # Syntax accepted
//!
//! The reading of lines and quotes is Coraza's (`internal/seclang/parser.go`,
//! `rule_parser.go`), which is what CRS is tested against:
//!
//! - Each line is trimmed; blank lines and lines starting with `#` are skipped (also inside a
//!   continued directive). A line ending in `\` continues on the next line: the `\` is
//!   dropped, nothing is inserted, and the next line's leading whitespace is gone.
//! - Directive names are case-insensitive. Arguments are double-quoted or bare words. Inside
//!   double quotes only `\"` is unescaped (to `"`); every other backslash is kept, so a
//!   regular expression reaches the operator as written. A quoted argument ends at the first
//!   `"` preceded by an even number of backslashes.
//! - `SecRule VARIABLES OPERATOR [ACTIONS]`: variables split on `|` outside `/regex/` and
//!   single quotes; `!` excludes, `&` counts; a selector is a regex when it starts and ends
//!   with `/` (also inside single quotes, `ARGS:'/a|b/'`), so `XML:/*` and `XML://@*` are
//!   keys. An operator without `@` is an implicit `@rx`. Actions split on commas outside
//!   single quotes; a quote opens only right after `:` or `=` (so `msg:it's` keeps its
//!   apostrophe, as in ModSecurity, where Coraza would open a quote), and a backslash
//!   protects the next byte. A value in single quotes loses them and `\'` becomes `'`.
//! - Any directive the parser does not know the shape of becomes a
//!   [`DirectiveKind::Setting`] with its arguments unquoted (double or single quotes).
//!
//! Stricter than Coraza: an unclosed single quote in an action list, text glued to a closing
//! quote (`"@rx a"b`), an argument quoted with `'` or `` ` `` where a `SecRule`/`SecAction`
//! piece is expected, and multi-line backtick blocks are errors. Errors carry the file, line
//! and column of the offending piece and the line itself ([`ParseError`]).
//!
//! # Untrusted input
//!
//! Rule text is configuration, but the parser is fuzzed as if it were not: it never panics,
//! runs in time linear in the input (plus the size of included files), and bounds include
//! nesting by [`crate::limits::DEFAULT_INCLUDE_DEPTH`]; a file that includes itself, directly
//! or through others, is reported as an include cycle at once.
//!
//! # Performance
//!
//! The 27 CRS v4.28 rule files (14,190 lines, 788 directives) parse in 5–12 ms in release,
//! from memory or with `parse_file` (best of 5 runs on a shared, loaded 2-core machine;
//! `perf000_crs_parse_time` in `tests.rs`, run with `--release -- --nocapture`). Most of the
//! time is the `String`s of the tree; lines are joined into one reused buffer.

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
