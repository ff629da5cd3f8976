//! Physical lines → logical lines → tokens, keeping where every byte came from.
//!
//! Line handling copies Coraza (`internal/seclang/parser.go`, `FromString`) and ModSecurity:
//! each physical line is trimmed; blank lines and lines starting with `#` are skipped, even in
//! the middle of a continued directive; a line ending in `\` is joined with the next one (the
//! `\` is dropped and nothing is inserted, so the continuation's leading whitespace is gone but
//! the whitespace before the `\` stays).
//!
//! A logical line keeps one [`Segment`] per physical line it was built from, so any byte offset
//! in the joined text maps back to a line and column of the file.

use std::sync::Arc;

use super::ast::Span;
use super::error::ParseError;

/// Where a run of the logical line came from.
#[derive(Clone, Copy, Debug)]
struct Segment {
    /// Offset in the logical line where this physical line's text starts.
    offset: usize,
    /// 1-based line number.
    line: u32,
    /// 1-based column of the first byte kept from the physical line.
    column: u32,
    /// Byte range of the physical line in the source text (without `\r\n`).
    phys_start: usize,
    phys_end: usize,
}

/// One directive's text with continuations joined.
#[derive(Debug, Default)]
pub(super) struct LogicalLine {
    pub(super) text: String,
    segments: Vec<Segment>,
}

/// Maps offsets of a [`LogicalLine`] back to the file.
#[derive(Clone, Copy)]
pub(super) struct Locator<'a> {
    file: &'a Arc<str>,
    source: &'a str,
    line: &'a LogicalLine,
}

impl<'a> Locator<'a> {
    pub(super) fn new(file: &'a Arc<str>, source: &'a str, line: &'a LogicalLine) -> Self {
        Locator { file, source, line }
    }

    fn segment(&self, offset: usize) -> Option<&'a Segment> {
        let segs = &self.line.segments;
        let idx = segs.partition_point(|s| s.offset <= offset);
        idx.checked_sub(1).and_then(|i| segs.get(i))
    }

    /// The span of byte `offset` of the logical line.
    pub(super) fn span(&self, offset: usize) -> Span {
        let (line, column) = match self.segment(offset) {
            Some(s) => {
                let delta = u32::try_from(offset - s.offset).unwrap_or(u32::MAX);
                (s.line, s.column.saturating_add(delta))
            }
            None => (0, 0),
        };
        Span {
            file: Arc::clone(self.file),
            line,
            column,
        }
    }

    /// An error at byte `offset` of the logical line.
    pub(super) fn error(&self, offset: usize, message: impl Into<String>) -> ParseError {
        let line_text = self
            .segment(offset)
            .and_then(|s| self.source.get(s.phys_start..s.phys_end))
            .unwrap_or("")
            .to_owned();
        ParseError {
            span: self.span(offset),
            message: message.into(),
            line_text,
        }
    }
}

/// Reads logical lines out of a source text.
pub(super) struct Lines<'a> {
    text: &'a str,
    pos: usize,
    line_no: u32,
    done: bool,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Lines {
            text,
            pos: 0,
            line_no: 0,
            done: false,
        }
    }

    /// Fills `out` with the next directive's text; `false` at the end of the input.
    pub(super) fn next_into(&mut self, out: &mut LogicalLine) -> bool {
        out.text.clear();
        out.segments.clear();
        while !self.done {
            let rest = self.text.get(self.pos..).unwrap_or("");
            let phys_start = self.pos;
            let raw = match memchr::memchr(b'\n', rest.as_bytes()) {
                Some(i) => {
                    self.pos += i + 1;
                    rest.get(..i).unwrap_or("")
                }
                None => {
                    self.done = true;
                    self.pos = self.text.len();
                    rest
                }
            };
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            // A byte order mark at the start of the file counts as leading whitespace.
            let raw_no_bom = match phys_start {
                0 => raw.strip_prefix('\u{feff}').unwrap_or(raw),
                _ => raw,
            };
            let bom = raw.len() - raw_no_bom.len();
            let phys_end = phys_start + raw.len();
            self.line_no = self.line_no.saturating_add(1);
            let trimmed_start = raw_no_bom.trim_start();
            let lead = bom + raw_no_bom.len() - trimmed_start.len();
            let trimmed = trimmed_start.trim_end();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let (piece, continued) = match trimmed.strip_suffix('\\') {
                Some(p) => (p, true),
                None => (trimmed, false),
            };
            out.segments.push(Segment {
                offset: out.text.len(),
                line: self.line_no,
                column: u32::try_from(lead + 1).unwrap_or(u32::MAX),
                phys_start,
                phys_end,
            });
            out.text.push_str(piece);
            if !continued {
                return true;
            }
        }
        !out.segments.is_empty()
    }
}

/// One argument of a directive.
#[derive(Debug)]
pub(super) struct Token {
    /// The text with quotes removed and `\"` unescaped (double-quoted tokens only).
    pub(super) text: String,
    /// Offset in the logical line of the token's first byte (the quote, if quoted).
    pub(super) start: usize,
    /// Offset in the logical line of the first byte of the content.
    content_start: usize,
    /// Offsets in `text` before which one backslash was dropped by unescaping.
    removed: Vec<usize>,
    /// Whether the token was double-quoted.
    pub(super) quoted: bool,
}

impl Token {
    /// Maps an offset in `text` to an offset in the logical line.
    pub(super) fn raw_offset(&self, offset: usize) -> usize {
        let dropped = self.removed.partition_point(|&r| r <= offset);
        self.content_start + offset + dropped
    }
}

/// How a bare (unquoted) word ends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Bare {
    /// At the first whitespace.
    Plain,
    /// At the first whitespace outside single quotes (variable lists, action lists).
    SingleQuoteAware,
}

/// Whether `b` separates arguments.
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r' | b'\n')
}

/// Splits the arguments of a directive starting at `pos`.
pub(super) struct Tokenizer<'a> {
    text: &'a str,
    pos: usize,
    /// Accept a double-quoted token that runs to the end of the line without its closing
    /// quote (set for a directive's last argument, the action list).
    pub(super) lenient_close: bool,
    /// Set when a token was accepted that way.
    pub(super) unclosed: bool,
}

impl<'a> Tokenizer<'a> {
    pub(super) fn new(text: &'a str, pos: usize) -> Self {
        Tokenizer {
            text,
            pos,
            lenient_close: false,
            unclosed: false,
        }
    }

    /// Offset of the next non-space byte (or the end of the line).
    pub(super) fn skip_space(&mut self) -> usize {
        let bytes = self.text.as_bytes();
        while bytes.get(self.pos).is_some_and(|&b| is_space(b)) {
            self.pos += 1;
        }
        self.pos
    }

    /// Whether nothing but whitespace is left.
    pub(super) fn at_end(&self) -> bool {
        self.text
            .as_bytes()
            .get(self.pos..)
            .is_none_or(|rest| rest.iter().all(|&b| is_space(b)))
    }

    /// Reads the next argument; `Ok(None)` at the end of the line.
    ///
    /// A double-quoted argument ends at the first `"` preceded by an even number of
    /// backslashes (Coraza's `cutQuotedString`); inside it only `\"` is unescaped. A
    /// single-quoted argument is accepted only when `single_quotes` is set (plain settings,
    /// as Apache's `ap_getword_conf` does).
    pub(super) fn next_token(
        &mut self,
        loc: &Locator<'_>,
        bare: Bare,
        single_quotes: bool,
    ) -> Result<Option<Token>, ParseError> {
        let start = self.skip_space();
        let bytes = self.text.as_bytes();
        let Some(&first) = bytes.get(start) else {
            return Ok(None);
        };
        if first == b'"' {
            return self.quoted(loc, start).map(Some);
        }
        if first == b'\'' && single_quotes {
            return self.single_quoted(loc, start).map(Some);
        }
        let mut i = start;
        // In a target or action list, `'` right after `:` or `=` opens a quoted key or value that
        // may hold spaces (`ARGS:'a b'`, `msg:'a b'`); inside it `\'` does not close it.
        let mut quote_at: Option<usize> = None;
        while let Some(&b) = bytes.get(i) {
            if bare == Bare::SingleQuoteAware {
                match (quote_at, b) {
                    (Some(_), b'\\') => {
                        i += 2;
                        continue;
                    }
                    (Some(_), b'\'') => quote_at = None,
                    (None, b'\'') if i > start && matches!(bytes.get(i - 1), Some(b':' | b'=')) => {
                        quote_at = Some(i);
                    }
                    _ => {}
                }
            }
            if quote_at.is_none() && is_space(b) {
                break;
            }
            i += 1;
        }
        if let Some(q) = quote_at {
            return Err(loc.error(q, "unclosed quote"));
        }
        let end = i.min(bytes.len());
        self.pos = end;
        Ok(Some(Token {
            text: self.text.get(start..end).unwrap_or("").to_owned(),
            start,
            content_start: start,
            removed: Vec::new(),
            quoted: false,
        }))
    }

    fn quoted(&mut self, loc: &Locator<'_>, start: usize) -> Result<Token, ParseError> {
        let bytes = self.text.as_bytes();
        let content_start = start + 1;
        let mut text = String::new();
        let mut removed = Vec::new();
        let mut run_start = content_start;
        let mut backslashes = 0usize;
        let mut i = content_start;
        loop {
            let Some(&b) = bytes.get(i) else {
                if self.lenient_close {
                    // libmodsecurity 3's scanner ends an action list at the end of the
                    // line even without its closing quote; the parser warns.
                    text.push_str(self.text.get(run_start..i).unwrap_or(""));
                    self.unclosed = true;
                    self.pos = i;
                    return Ok(Token {
                        text,
                        start,
                        content_start,
                        removed,
                        quoted: true,
                    });
                }
                return Err(loc.error(start, "unclosed quote"));
            };
            if b == b'"' {
                if backslashes % 2 == 1 {
                    // `\"`: drop the backslash just before the quote.
                    text.push_str(self.text.get(run_start..i - 1).unwrap_or(""));
                    removed.push(text.len());
                    run_start = i;
                    backslashes = 0;
                    i += 1;
                    continue;
                }
                text.push_str(self.text.get(run_start..i).unwrap_or(""));
                break;
            }
            if b == b'\\' {
                backslashes += 1;
            } else {
                backslashes = 0;
            }
            i += 1;
        }
        let end = i + 1;
        if let Some(&next) = bytes.get(end) {
            if !is_space(next) {
                return Err(loc.error(end, "unexpected character after closing quote"));
            }
        }
        self.pos = end;
        Ok(Token {
            text,
            start,
            content_start,
            removed,
            quoted: true,
        })
    }

    fn single_quoted(&mut self, loc: &Locator<'_>, start: usize) -> Result<Token, ParseError> {
        let bytes = self.text.as_bytes();
        let content_start = start + 1;
        let mut i = content_start;
        loop {
            match bytes.get(i) {
                None => return Err(loc.error(start, "unclosed quote")),
                Some(b'\'') => break,
                Some(_) => i += 1,
            }
        }
        let end = i + 1;
        if let Some(&next) = bytes.get(end) {
            if !is_space(next) {
                return Err(loc.error(end, "unexpected character after closing quote"));
            }
        }
        self.pos = end;
        Ok(Token {
            text: self.text.get(content_start..i).unwrap_or("").to_owned(),
            start,
            content_start,
            removed: Vec::new(),
            quoted: true,
        })
    }
}
