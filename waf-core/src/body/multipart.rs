//! `multipart/form-data` bodies → `ARGS_POST`, `FILES*`, `MULTIPART_*`.
//!
//! # Model
//!
//! A line-oriented parser over the whole buffered body, modelled on ModSecurity v3
//! `request_body_processor/multipart.cc` (CRS's strict-multipart expectations come from
//! it): the `Content-Type` boundary is validated as ModSecurity's `Multipart::init` does,
//! then each line is either a boundary, a part header line or part data. Every anomaly
//! ModSecurity flags is a field of [`MultipartFlags`], and the error texts are
//! ModSecurity's (the engine prefixes `Multipart parsing error: ` via [`Multipart::error`],
//! which already carries it; CRS test 922130 matches
//! `Multipart parsing error: Multipart: Invalid part header \(contains invalid character\)`).
//!
//! # Where we differ from ModSecurity v3, and why
//!
//! - **Errors do not hide data.** libmodsecurity ignores most part-header errors (it checks
//!   `< 0` on a function returning `false`) and keeps parsing, and its last error message
//!   overwrites the first. We keep parsing too, so later parts are still inspected, but the
//!   *first* error is the one reported (the most specific cause; a later
//!   "Final boundary missing" would otherwise mask it). Boundary and `Content-Type` errors
//!   stop parsing, as in ModSecurity.
//! - **Multi-line form values keep their line breaks.** ModSecurity v3 drops the CRLF between
//!   lines of a form field (a `std::string::assign` bug); Coraza keeps them, and so do we, so
//!   rules see what the application sees. Only the line ending before the next boundary is
//!   removed.
//! - **A duplicate part header is an error** (ModSecurity v2 behaviour; v3 silently keeps
//!   the first). Duplicate `Content-Disposition` headers are a known evasion.
//! - **A truncated last part is still reported** (with "Final boundary missing") when its
//!   headers were complete, so partially processed bodies are inspected.
//! - Header names are compared case-insensitively, as libmodsecurity's header map does.
//!
//! `MULTIPART_PART_HEADERS` values are `Name: value` lines as sent (name case kept, value
//! after the colon's spaces, folded lines joined with one space), keyed by the part's
//! `name`, in order of appearance; they are recorded even for parts whose
//! `Content-Disposition` is invalid. A field called `_charset_` gets no special treatment:
//! it is an ordinary argument and its headers are keyed `_charset_` (CRS 922100 reads
//! `&MULTIPART_PART_HEADERS:_charset_` and `ARGS:_charset_`).
//!
//! # Limits
//!
//! Part header lines are limited to [`DEFAULT_MULTIPART_HEADER_LINE`] bytes (ModSecurity's buffer size),
//! header lines per part to [`DEFAULT_MULTIPART_PART_HEADERS`], parts to [`MultipartLimits::max_parts`],
//! file parts to [`MultipartLimits::max_files`]. Output is at most a constant times the
//! body size: every value and header is a copy of a distinct body range, and the part name
//! repeated beside each of its headers is bounded by [`DEFAULT_MULTIPART_PART_HEADERS`].

use std::ops::Range;

use memchr::memmem;

use crate::limits::{DEFAULT_MULTIPART_HEADER_LINE, DEFAULT_MULTIPART_PART_HEADERS};

/// Limits for one multipart body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MultipartLimits {
    /// Most parts accepted; past it parsing stops with `file_limit_exceeded` and an error.
    pub(crate) max_parts: usize,
    /// Most file parts (`SecUploadFileLimit`); 0 means no limit. Past it,
    /// `file_limit_exceeded` is set and later files are still listed.
    pub(crate) max_files: usize,
}

impl Default for MultipartLimits {
    fn default() -> Self {
        MultipartLimits {
            max_parts: crate::limits::DEFAULT_MULTIPART_PART_LIMIT,
            max_files: 0,
        }
    }
}

/// One file part (`FILES`, `FILES_NAMES`, `FILES_SIZES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePart {
    /// The part's `name` parameter (`FILES_NAMES`, key of `FILES_SIZES`).
    pub(crate) field_name: Vec<u8>,
    /// The `filename` parameter (`FILES`).
    pub(crate) filename: Vec<u8>,
    /// Content length in bytes (`FILES_SIZES`).
    pub(crate) size: usize,
    /// Where the content sits in the body passed to [`parse`].
    pub(crate) content: Range<usize>,
}

/// ModSecurity's multipart anomaly flags, one per `MULTIPART_*` variable.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MultipartFlags {
    /// `MULTIPART_BOUNDARY_QUOTED`: `boundary="..."`.
    pub(crate) boundary_quoted: bool,
    /// `MULTIPART_BOUNDARY_WHITESPACE`: spaces around `=` in the boundary parameter.
    pub(crate) boundary_whitespace: bool,
    /// `MULTIPART_DATA_BEFORE`: bytes before the first boundary.
    pub(crate) data_before: bool,
    /// `MULTIPART_DATA_AFTER`: bytes after the final boundary line.
    pub(crate) data_after: bool,
    /// `MULTIPART_HEADER_FOLDING`: a folded part header.
    pub(crate) header_folding: bool,
    /// `MULTIPART_LF_LINE`: a header or boundary line ended by a bare LF.
    pub(crate) lf_line: bool,
    /// A header or boundary line ended by CRLF (half of `MULTIPART_CRLF_LF_LINES`).
    pub(crate) crlf_line: bool,
    /// `MULTIPART_MISSING_SEMICOLON`: no `;` before `boundary` in the `Content-Type`.
    pub(crate) missing_semicolon: bool,
    /// `MULTIPART_INVALID_QUOTING`: single quotes or stray quotes in `Content-Disposition`.
    pub(crate) invalid_quoting: bool,
    /// `MULTIPART_INVALID_PART`: a part without a name was dropped.
    pub(crate) invalid_part: bool,
    /// `MULTIPART_INVALID_HEADER_FOLDING`: folding with whitespace other than SP/HT.
    pub(crate) invalid_header_folding: bool,
    /// `MULTIPART_FILE_LIMIT_EXCEEDED`: more files or parts than the limits allow.
    pub(crate) file_limit_exceeded: bool,
    /// `MULTIPART_UNMATCHED_BOUNDARY`: 0; 1 when something resembling our boundary was
    /// not a valid boundary line; 2 when a boundary line matched after the first (a quirk of
    /// libmodsecurity kept for `@eq 1` rules).
    pub(crate) unmatched_boundary: u8,
    /// Parsing failed (the part of `MULTIPART_STRICT_ERROR` that is not a named flag).
    pub(crate) error: bool,
}

impl MultipartFlags {
    /// `MULTIPART_CRLF_LF_LINES`: both line ending styles were used.
    pub(crate) fn crlf_lf_lines(&self) -> bool {
        self.crlf_line && self.lf_line
    }
}

/// Everything a multipart body yields.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Multipart {
    /// Non-file parts as `(name, value)` (`ARGS_POST`), in order.
    pub(crate) args: Vec<(Vec<u8>, Vec<u8>)>,
    /// File parts, in order.
    pub(crate) files: Vec<FilePart>,
    /// `MULTIPART_PART_HEADERS`: `(part name, "Name: value")`.
    pub(crate) part_headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// `MULTIPART_NAME`: every `name` parameter seen.
    pub(crate) names: Vec<Vec<u8>>,
    /// `MULTIPART_FILENAME`: every `filename` parameter seen.
    pub(crate) filenames: Vec<Vec<u8>>,
    /// Anomaly flags.
    pub(crate) flags: MultipartFlags,
    /// `REQBODY_ERROR_MSG` when parsing failed: `Multipart parsing error: Multipart: ...`.
    pub(crate) error: Option<String>,
    /// What kind of error [`Multipart::error`] is (the first one's).
    pub(crate) error_kind: super::BodyErrorKind,
    /// Bytes of part headers and non-file part data, what ModSecurity compares with
    /// `SecRequestBodyNoFilesLimit` for multipart bodies.
    pub(crate) no_files_length: usize,
}

impl Multipart {
    /// `MULTIPART_STRICT_ERROR`: a parse error or any anomaly flag except
    /// `unmatched_boundary` (ModSecurity's definition; `crlf_lf_lines` implies `lf_line`).
    pub(crate) fn strict_error(&self) -> bool {
        let f = &self.flags;
        self.error.is_some()
            || f.error
            || f.boundary_quoted
            || f.boundary_whitespace
            || f.data_before
            || f.data_after
            || f.header_folding
            || f.lf_line
            || f.missing_semicolon
            || f.invalid_quoting
            || f.invalid_part
            || f.invalid_header_folding
            || f.file_limit_exceeded
    }

    /// Fails on a limit: parsing stops and the engine refuses the body.
    fn fail_limit(&mut self, msg: impl Into<String>) {
        let first = self.error.is_none();
        self.fail(msg);
        if first {
            self.error_kind = super::BodyErrorKind::Limit;
        }
    }

    /// `FILES_COMBINED_SIZE`.
    #[cfg(test)]
    pub(crate) fn files_combined_size(&self) -> usize {
        self.files.iter().map(|f| f.size).sum()
    }

    fn fail(&mut self, msg: impl Into<String>) {
        self.flags.error = true;
        if self.error.is_none() {
            self.error_kind = super::BodyErrorKind::Malformed;
            let mut s = String::from("Multipart parsing error: ");
            s.push_str(&msg.into());
            self.error = Some(s);
        }
    }
}

/// Parses a multipart body. `content_type` is the request's `Content-Type` value.
pub(crate) fn parse(content_type: &[u8], body: &[u8], limits: &MultipartLimits) -> Multipart {
    let mut mp = Multipart::default();
    let Some(boundary) = parse_boundary(content_type, &mut mp) else {
        return mp;
    };
    if body.is_empty() {
        return mp;
    }
    Parser {
        body,
        boundary: &boundary,
        limits,
        mp,
        part: None,
        parts: 0,
        file_parts: 0,
        boundary_count: 0,
        complete: false,
    }
    .run()
}

/// `Multipart::init`: validates the `Content-Type` and extracts the boundary.
fn parse_boundary(ct: &[u8], mp: &mut Multipart) -> Option<Vec<u8>> {
    if ct.is_empty() {
        mp.fail("Multipart: Content-Type header not available.");
        return None;
    }
    if ct.len() > 1024 {
        mp.fail("Multipart: Invalid boundary in C-T (length).");
        return None;
    }
    const MIME: &[u8] = b"multipart/form-data";
    if ct.len() < MIME.len() || !ct[..MIME.len()].eq_ignore_ascii_case(MIME) {
        mp.fail("Multipart: Invalid MIME type.");
        return None;
    }
    if count_boundary_params(ct) > 1 {
        mp.fail("Multipart: Multiple boundary parameters in C-T.");
        return None;
    }
    // Parameter names are case-insensitive (RFC 2045 §5.1): `Boundary=` is the same
    // parameter. ModSecurity rejects it ("case sensitivity"), every framework accepts it.
    let lower_ct = ct.to_ascii_lowercase();
    let Some(bpos) = memmem::find(&lower_ct, b"boundary") else {
        if count_boundary_params(ct) > 0 {
            mp.fail("Multipart: Invalid boundary in C-T (case sensitivity).");
        } else {
            mp.fail("Multipart: Boundary not found in C-T.");
        }
        return None;
    };
    let mut seen_semicolon = false;
    for &c in ct.get(MIME.len()..bpos).unwrap_or_default() {
        if is_c_space(c) {
            continue;
        }
        if c == b';' && !seen_semicolon {
            seen_semicolon = true;
        } else {
            mp.fail("Multipart: Invalid boundary in C-T (malformed).");
            return None;
        }
    }
    if !seen_semicolon {
        mp.flags.missing_semicolon = true;
    }
    let mut after_name = bpos + b"boundary".len();
    // RFC 2231 `boundary*=charset'lang'value`: the value is percent-encoded.
    let extended = ct.get(after_name) == Some(&b'*');
    if extended {
        after_name += 1;
    }
    let Some(eq) = memchr::memchr(b'=', &ct[after_name..]).map(|i| after_name + i) else {
        mp.fail("Multipart: Invalid boundary in C-T (malformed).");
        return None;
    };
    for &c in &ct[after_name..eq] {
        if is_c_space(c) {
            mp.flags.boundary_whitespace = true;
        } else {
            mp.fail("Multipart: Invalid boundary in C-T (parameter name).");
            return None;
        }
    }
    let mut value = &ct[eq + 1..];
    // `boundary=x; charset=utf-8`: a charset parameter after the boundary is tolerated, as
    // libmodsecurity 3 does (browsers never send it; some HTTP clients do).
    if let Some(semi) = memchr::memchr(b';', value) {
        let rest = value[semi + 1..].trim_ascii_start().to_ascii_lowercase();
        let param = rest.strip_prefix(b"charset").map(<[u8]>::trim_ascii_start);
        if param.is_some_and(|p| p.starts_with(b"=")) {
            value = value[..semi].trim_ascii_end();
        }
    }
    if value.first().is_some_and(|&c| is_c_space(c)) {
        mp.flags.boundary_whitespace = true;
        // ModSecurity keeps the space in the boundary; no client sends one there, so
        // trimming only avoids a spurious "no boundaries found".
        while let Some((&c, rest)) = value.split_first() {
            if !is_c_space(c) {
                break;
            }
            value = rest;
        }
    }
    let boundary = if value.len() >= 2 && value[0] == b'"' && value[value.len() - 1] == b'"' {
        mp.flags.boundary_quoted = true;
        &value[1..value.len() - 1]
    } else {
        if value.first() == Some(&b'"') || (value.len() >= 2 && value.last() == Some(&b'"')) {
            mp.fail("Multipart: Invalid boundary in C-T (quote).");
            return None;
        }
        value
    };
    let decoded;
    let boundary = if extended {
        decoded = ext_value(boundary);
        decoded.as_slice()
    } else {
        boundary
    };
    if boundary.is_empty() {
        mp.fail("Multipart: Invalid boundary in C-T (empty).");
        return None;
    }
    if count_boundary_params(boundary) != 0 {
        mp.fail("Multipart: Invalid boundary in C-T (content).");
        return None;
    }
    if !boundary_characters_valid(boundary) {
        mp.fail("Multipart: Invalid boundary in C-T (characters).");
        return None;
    }
    Some(boundary.to_vec())
}

/// A form part's value as the application reads it: `Content-Transfer-Encoding` base64 or
/// quoted-printable undone (RFC 2045 §6; RFC 7578 deprecates them but Java, .NET and
/// Python's `email` parsers still apply them), then the part's `charset` decoded to UTF-8.
/// An unknown transfer encoding or charset is an error, so the part is refused rather than
/// passed uninspected.
fn decode_part(headers: &[(Vec<u8>, Vec<u8>)], raw: &[u8]) -> Result<Vec<u8>, String> {
    let header = |name: &[u8]| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    };
    let mut value =
        match header(b"Content-Transfer-Encoding").map(|v| v.trim_ascii().to_ascii_lowercase()) {
            None => raw.to_vec(),
            Some(cte) => match cte.as_slice() {
                b"7bit" | b"8bit" | b"binary" => raw.to_vec(),
                b"base64" => {
                    use base64::engine::{general_purpose, DecodePaddingMode, GeneralPurpose};
                    use base64::Engine as _;
                    const LENIENT: GeneralPurpose = GeneralPurpose::new(
                        &base64::alphabet::STANDARD,
                        general_purpose::GeneralPurposeConfig::new()
                            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
                            .with_decode_allow_trailing_bits(true),
                    );
                    let clean: Vec<u8> = raw
                        .iter()
                        .copied()
                        .filter(|c| !c.is_ascii_whitespace())
                        .collect();
                    LENIENT
                        .decode(&clean)
                        .map_err(|_| "Multipart: Invalid base64 part.".to_string())?
                }
                b"quoted-printable" => quoted_printable(raw),
                other => {
                    return Err(format!(
                        "Multipart: Unsupported Content-Transfer-Encoding: {}.",
                        String::from_utf8_lossy(other)
                    ))
                }
            },
        };
    if let Some(ct) = header(b"Content-Type") {
        let label = super::charset::param(ct);
        match super::charset::decode(label.as_deref(), &value) {
            Ok(std::borrow::Cow::Owned(v)) => value = v,
            Ok(std::borrow::Cow::Borrowed(_)) => {}
            Err(super::charset::Unsupported(l)) => {
                return Err(format!(
                    "Multipart: Unsupported part charset: {}.",
                    String::from_utf8_lossy(&l)
                ))
            }
        }
    }
    Ok(value)
}

/// RFC 2045 §6.7 quoted-printable: `=XX` escapes and `=` soft line breaks; anything else,
/// including a malformed `=`, is kept as is.
fn quoted_printable(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'=' {
            let rest = &raw[i + 1..];
            if rest.starts_with(b"\r\n") {
                i += 3;
                continue;
            }
            if rest.starts_with(b"\n") {
                i += 2;
                continue;
            }
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (
                rest.first().and_then(|&c| hex(c)),
                rest.get(1).and_then(|&c| hex(c)),
            ) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

/// An RFC 2231 / RFC 5987 extended value (`charset'lang'pct-encoded`): the percent-decoded
/// bytes after the second `'` (as UTF-8, the only charset RFC 5987 requires; ISO-8859-1
/// values stay bytes). A value without two `'` is taken as is.
fn ext_value(v: &[u8]) -> Vec<u8> {
    let mut quotes = v
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == b'\'')
        .map(|(i, _)| i);
    let start = match (quotes.next(), quotes.next()) {
        (Some(_), Some(second)) => second + 1,
        _ => 0,
    };
    let raw = &v[start..];
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if raw[i] == b'%' && i + 2 < raw.len() {
            if let (Some(h), Some(l)) = (hex(raw[i + 1]), hex(raw[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

/// How many times `boundary` (any case) occurs with a `=` somewhere after it.
fn count_boundary_params(s: &[u8]) -> usize {
    let lower = s.to_ascii_lowercase();
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = memmem::find(&lower[from..], b"boundary") {
        from += i + b"boundary".len();
        if memchr::memchr(b'=', &lower[from..]).is_some() {
            count += 1;
        }
    }
    count
}

/// RFC 2046 §5.1.1 `bchars`; a space may not be last.
fn boundary_characters_valid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, &c)| {
        c.is_ascii_alphanumeric() || (c == b' ' && i + 1 != b.len()) || b"'()+_,-./:=?".contains(&c)
    })
}

/// C `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The part being built.
#[derive(Default)]
struct Part {
    /// `(name, value)` headers, value unfolded.
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Index in `headers` of the header a folded line continues.
    last_header: Option<usize>,
    headers_done: bool,
    headers_recorded: bool,
    name: Vec<u8>,
    filename: Vec<u8>,
    is_file: bool,
    /// Where the data starts (after the empty line).
    data_start: usize,
}

struct Parser<'a> {
    body: &'a [u8],
    boundary: &'a [u8],
    limits: &'a MultipartLimits,
    mp: Multipart,
    part: Option<Part>,
    parts: usize,
    file_parts: usize,
    boundary_count: usize,
    complete: bool,
}

impl Parser<'_> {
    fn run(mut self) -> Multipart {
        let body = self.body;
        let mut needle = Vec::with_capacity(self.boundary.len() + 2);
        needle.extend_from_slice(b"--");
        needle.extend_from_slice(self.boundary);
        let finder = memmem::Finder::new(&needle);
        let mut pos = 0;
        while pos < body.len() {
            let end = memchr::memchr(b'\n', &body[pos..]).map_or(body.len(), |i| pos + i + 1);
            let line = &body[pos..end];
            let terminated = line.last() == Some(&b'\n');
            let stop = if terminated {
                self.line(pos, line, &finder)
            } else {
                self.last_unterminated_line(pos, line)
            };
            pos = end;
            if stop {
                break;
            }
            if self.complete {
                if pos < body.len() {
                    self.mp.flags.data_after = true;
                }
                break;
            }
        }
        self.finish()
    }

    /// Handles one LF-terminated line starting at `start`. Returns true to stop parsing.
    fn line(&mut self, start: usize, line: &[u8], finder: &memmem::Finder<'_>) -> bool {
        let b = self.boundary;
        if line.len() > 3 && line.starts_with(b"--") {
            if line[2..].starts_with(b) {
                if self.boundary_count > 0 {
                    self.mp.flags.unmatched_boundary = 2;
                }
                let mut rest = &line[2 + b.len()..];
                let is_final = rest.starts_with(b"--");
                if is_final {
                    rest = &rest[2..];
                }
                // RFC 2046 §5.1.1 allows transport padding (spaces, tabs) after the
                // boundary; every framework ignores it.
                let pad = rest
                    .iter()
                    .take_while(|&&c| c == b' ' || c == b'\t')
                    .count();
                rest = &rest[pad..];
                match rest {
                    b"\r\n" => self.mp.flags.crlf_line = true,
                    b"\n" => self.mp.flags.lf_line = true,
                    _ => {
                        let shown = String::from_utf8_lossy(line).into_owned();
                        self.mp
                            .fail(format!("Multipart: Invalid boundary: {shown}"));
                        return true;
                    }
                }
                self.boundary_count += 1;
                return self.boundary(start, is_final);
            }
            if self.mp.flags.boundary_quoted
                && line.get(2) == Some(&b'"')
                && line[3..].starts_with(b)
            {
                self.mp.fail("Multipart: Invalid boundary (quotes).");
                return true;
            }
            let ws = line[2..].iter().take_while(|&&c| is_c_space(c)).count();
            if ws > 0 && line[2 + ws..].starts_with(b) {
                self.mp.fail("Multipart: Invalid boundary (whitespace).");
                return true;
            }
            self.mp.flags.unmatched_boundary = 1;
        } else if finder.find(line).is_some() {
            self.mp.flags.unmatched_boundary = 1;
        }
        self.not_boundary(start, line)
    }

    /// A final line without LF: only the final boundary is recognised there (as
    /// `multipart_complete` does); anything else is data or header text.
    fn last_unterminated_line(&mut self, start: usize, line: &[u8]) -> bool {
        let b = self.boundary;
        if line.len() == b.len() + 4
            && line.starts_with(b"--")
            && line[2..].starts_with(b)
            && line.ends_with(b"--")
            && self.boundary_count > 0
        {
            self.boundary_count += 1;
            return self.boundary(start, true);
        }
        // Data counts (the open part's extent runs to the body end); header text without a
        // line end is no complete header and is ignored, as ModSecurity leaves it unprocessed.
        if self.part.is_none() {
            self.mp.flags.data_before = true;
        }
        false
    }

    fn not_boundary(&mut self, start: usize, line: &[u8]) -> bool {
        let Some(part) = self.part.as_ref() else {
            self.mp.flags.data_before = true;
            return false;
        };
        if part.headers_done {
            return false; // data: its extent is computed when the part ends
        }
        if line.len() >= DEFAULT_MULTIPART_HEADER_LINE {
            self.mp.fail_limit(format!(
                "Multipart: Part header line over {DEFAULT_MULTIPART_HEADER_LINE} bytes long"
            ));
            return true;
        }
        self.header_line(start, line);
        false
    }

    /// `process_part_header`.
    fn header_line(&mut self, start: usize, line: &[u8]) {
        let Some(mut part) = self.part.take() else {
            return;
        };
        self.mp.no_files_length += line.len();
        self.header_line_inner(&mut part, start, line);
        self.part = Some(part);
    }

    fn header_line_inner(&mut self, part: &mut Part, start: usize, line: &[u8]) {
        if memchr::memchr(0, line).is_some() {
            self.mp.fail("Multipart: Nul byte in part headers.");
            return;
        }
        if line.len() > 1 && line[line.len() - 2] == b'\r' {
            self.mp.flags.crlf_line = true;
        } else {
            self.mp.flags.lf_line = true;
        }
        let text = chomp(line);
        if text.is_empty() {
            self.end_of_headers(part, start + line.len());
            return;
        }
        if is_c_space(text[0]) {
            self.mp.flags.header_folding = true;
            let ws = text.iter().take_while(|&&c| is_c_space(c)).count();
            if text[..ws].iter().any(|&c| c != b' ' && c != b'\t') {
                self.mp.flags.invalid_header_folding = true;
            }
            let Some(i) = part.last_header else {
                self.mp
                    .fail("Multipart: Invalid part header (folding error).");
                return;
            };
            if let Some((_, value)) = part.headers.get_mut(i) {
                if value.len() + 1 + text.len() - ws > DEFAULT_MULTIPART_HEADER_LINE {
                    self.mp.fail_limit("Multipart: Part header too long.");
                    return;
                }
                value.push(b' ');
                value.extend_from_slice(&text[ws..]);
            }
            return;
        }
        let Some(colon) = memchr::memchr(b':', text) else {
            let shown = String::from_utf8_lossy(text).into_owned();
            self.mp.fail(format!(
                "Multipart: Invalid part header (colon missing): {shown}"
            ));
            return;
        };
        let name = &text[..colon];
        if name.is_empty() {
            self.mp
                .fail("Multipart: Invalid part header (header name missing).");
            return;
        }
        if name.iter().any(|&c| !(0x21..=0x7e).contains(&c)) {
            self.mp
                .fail("Multipart: Invalid part header (contains invalid character).");
            return;
        }
        let value = &text[colon + 1..];
        let ws = value
            .iter()
            .take_while(|&&c| c == b' ' || c == b'\t')
            .count();
        let value = &value[ws..];
        if part.headers.len() >= DEFAULT_MULTIPART_PART_HEADERS {
            self.mp.fail_limit(format!(
                "Multipart: Too many part headers (limit {DEFAULT_MULTIPART_PART_HEADERS})."
            ));
            part.last_header = None;
            return;
        }
        if part
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            let shown = String::from_utf8_lossy(name).into_owned();
            self.mp
                .fail(format!("Multipart: Duplicate part header: {shown}."));
            part.last_header = None;
            return;
        }
        part.headers.push((name.to_vec(), value.to_vec()));
        part.last_header = Some(part.headers.len() - 1);
    }

    /// The empty line after the part headers: parse `Content-Disposition`.
    fn end_of_headers(&mut self, part: &mut Part, data_start: usize) {
        let cd = part
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"Content-Disposition"))
            .map(|(_, v)| v.clone());
        let Some(cd) = cd else {
            self.record_headers(part);
            self.mp
                .fail("Multipart: Part missing Content-Disposition header.");
            return;
        };
        if let Err(rc) = self.content_disposition(part, &cd) {
            self.record_headers(part);
            let shown = String::from_utf8_lossy(&cd).into_owned();
            self.mp.fail(format!(
                "Multipart: Invalid Content-Disposition header ({rc}): {shown}"
            ));
            return;
        }
        self.record_headers(part);
        if part.name.is_empty() {
            self.mp
                .fail("Multipart: Content-Disposition header missing name field.");
            return;
        }
        if !part.filename.is_empty() {
            if memmem::find(&cd, b"filename=").is_none()
                && memmem::find(&cd, b"filename*=").is_none()
            {
                self.mp
                    .fail("Multipart: Invalid Content-Disposition header (filename).");
                return;
            }
            part.is_file = true;
        }
        part.headers_done = true;
        part.last_header = None;
        part.data_start = data_start;
    }

    /// Copies the part's headers to `MULTIPART_PART_HEADERS` (once).
    fn record_headers(&mut self, part: &mut Part) {
        if part.headers_recorded {
            return;
        }
        part.headers_recorded = true;
        for (name, value) in &part.headers {
            let mut line = Vec::with_capacity(name.len() + 2 + value.len());
            line.extend_from_slice(name);
            line.extend_from_slice(b": ");
            line.extend_from_slice(value);
            self.mp.part_headers.push((part.name.clone(), line));
        }
    }

    /// `parse_content_disposition`; `Err` carries ModSecurity's negative code.
    fn content_disposition(&mut self, part: &mut Part, v: &[u8]) -> Result<(), i32> {
        let Some(mut p) = v.strip_prefix(b"form-data") else {
            return Err(-1);
        };
        p = skip_sp_ht(p);
        if p.is_empty() {
            return Ok(());
        }
        if p[0] != b';' {
            return Err(-2);
        }
        p = &p[1..];
        while !p.is_empty() {
            p = skip_sp_ht(p);
            if p.is_empty() {
                return Err(-3);
            }
            let n = p
                .iter()
                .take_while(|&&c| c != b'=' && c != b'\t' && c != b' ')
                .count();
            if n == p.len() {
                return Err(-4);
            }
            let pname = &p[..n];
            p = skip_sp_ht(&p[n..]);
            if p.is_empty() {
                return Err(-5);
            }
            if p[0] != b'=' {
                return Err(-13);
            }
            p = skip_sp_ht(&p[1..]);
            if p.is_empty() {
                return Err(-6);
            }
            let mut value = Vec::new();
            if p[0] == b'"' || p[0] == b'\'' {
                let quote = p[0];
                if quote == b'\'' {
                    self.mp.flags.invalid_quoting = true;
                }
                p = &p[1..];
                if p.is_empty() {
                    return Err(-7);
                }
                let mut i = 0;
                let mut closed = false;
                while i < p.len() {
                    let c = p[i];
                    if c == b'\\' {
                        match p.get(i + 1) {
                            None => return Err(-8),
                            Some(&n) if n == quote || n == b'\\' => {
                                value.push(n);
                                i += 2;
                                continue;
                            }
                            Some(_) => {}
                        }
                    } else if c == quote {
                        closed = true;
                        break;
                    }
                    value.push(c);
                    i += 1;
                }
                if !closed {
                    // ModSecurity reads past the end here; treat it as bad quoting.
                    self.mp.flags.invalid_quoting = true;
                }
                p = p.get(i + 1..).unwrap_or_default();
            } else {
                let n = p.iter().take_while(|&&c| is_token_char(c)).count();
                value.extend_from_slice(&p[..n]);
                p = &p[n..];
            }
            if pname == b"name" {
                if value.contains(&b'\'') {
                    self.mp.flags.invalid_quoting = true;
                }
                self.mp.names.push(value.clone());
                if !part.name.is_empty() {
                    return Err(-14);
                }
                part.name = value;
            } else if pname == b"filename*" || pname == b"name*" {
                // RFC 5987/6266: the extended form wins over the plain one.
                let value = ext_value(&value);
                if pname == b"name*" {
                    self.mp.names.push(value.clone());
                    part.name = value;
                } else {
                    self.mp.filenames.push(value.clone());
                    part.filename = value;
                }
            } else if pname == b"filename" {
                if value.contains(&b'\'') {
                    self.mp.flags.invalid_quoting = true;
                }
                self.mp.filenames.push(value.clone());
                if !part.filename.is_empty() {
                    return Err(-15);
                }
                part.filename = value;
            } else {
                return Err(-11);
            }
            if !p.is_empty() {
                let consumed = v.len() - p.len();
                p = skip_sp_ht(p);
                if p.is_empty() {
                    return Ok(());
                }
                if p[0] != b';' {
                    if consumed > 0 && matches!(v.get(consumed - 1), Some(b'\'' | b'"')) {
                        self.mp.flags.invalid_quoting = true;
                    }
                    return Err(-12);
                }
                p = &p[1..];
            }
        }
        Ok(())
    }

    /// A boundary line starting at `start`: close the current part, open the next.
    fn boundary(&mut self, start: usize, is_final: bool) -> bool {
        self.close_part(start, true);
        if is_final {
            self.complete = true;
            return false;
        }
        if self.parts >= self.limits.max_parts {
            self.mp.flags.file_limit_exceeded = true;
            self.mp.fail_limit(format!(
                "Multipart: Part limit exceeded {}.",
                self.limits.max_parts
            ));
            return true;
        }
        self.parts += 1;
        self.part = Some(Part::default());
        false
    }

    /// Ends the current part at `end` (the start of the boundary line, or the body end).
    fn close_part(&mut self, end: usize, at_boundary: bool) {
        let Some(mut part) = self.part.take() else {
            return;
        };
        self.record_headers(&mut part);
        if !part.headers_done || part.name.is_empty() {
            self.mp.flags.invalid_part = true;
            return;
        }
        let mut data_end = end.max(part.data_start);
        if at_boundary && data_end > part.data_start {
            // Drop the line ending that belongs to the boundary.
            let data = &self.body[part.data_start..data_end];
            if data.ends_with(b"\r\n") {
                data_end -= 2;
            } else if data.ends_with(b"\n") {
                data_end -= 1;
            }
        }
        let range = part.data_start..data_end;
        if part.is_file {
            self.file_parts += 1;
            if self.limits.max_files != 0 && self.file_parts > self.limits.max_files {
                if !self.mp.flags.file_limit_exceeded {
                    self.mp.fail(format!(
                        "Multipart: Upload file limit exceeded {}. Use SecUploadFileLimit to change the limit.",
                        self.limits.max_files
                    ));
                }
                self.mp.flags.file_limit_exceeded = true;
            }
            self.mp.files.push(FilePart {
                field_name: part.name,
                filename: part.filename,
                size: range.len(),
                content: range,
            });
        } else {
            let raw = self.body.get(range).unwrap_or_default();
            let value = match decode_part(&part.headers, raw) {
                Ok(v) => v,
                Err(msg) => {
                    self.mp.fail(msg);
                    raw.to_vec()
                }
            };
            self.mp.no_files_length += value.len();
            self.mp.args.push((part.name, value));
        }
    }

    /// `multipart_complete`.
    fn finish(mut self) -> Multipart {
        if !self.complete {
            if self.boundary_count > 0 {
                self.close_part(self.body.len(), false);
                self.mp.fail("Multipart: Final boundary missing.");
            } else {
                self.mp.fail("Multipart: No boundaries found in payload.");
            }
        }
        self.mp
    }
}

/// RFC 2045 token characters, as ModSecurity's `is_token_char`.
fn is_token_char(c: u8) -> bool {
    c > 32 && c < 127 && !b"()<>@,;:\\\"/[]?=".contains(&c)
}

fn skip_sp_ht(mut p: &[u8]) -> &[u8] {
    while let Some((&c, rest)) = p.split_first() {
        if c != b' ' && c != b'\t' {
            break;
        }
        p = rest;
    }
    p
}

/// Drops a trailing `\n` and then a trailing `\r`.
fn chomp(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a body the way go-ftw does: `\n` → `\r\n`.
    fn crlf(s: &str) -> Vec<u8> {
        s.replace('\n', "\r\n").into_bytes()
    }

    fn run(ct: &str, body: &[u8]) -> Multipart {
        parse(ct.as_bytes(), body, &MultipartLimits::default())
    }

    fn args(mp: &Multipart) -> Vec<(String, String)> {
        mp.args
            .iter()
            .map(|(a, b)| {
                (
                    String::from_utf8_lossy(a).into_owned(),
                    String::from_utf8_lossy(b).into_owned(),
                )
            })
            .collect()
    }

    fn headers(mp: &Multipart) -> Vec<(String, String)> {
        mp.part_headers
            .iter()
            .map(|(a, b)| {
                (
                    String::from_utf8_lossy(a).into_owned(),
                    String::from_utf8_lossy(b).into_owned(),
                )
            })
            .collect()
    }

    const CT: &str = "multipart/form-data; boundary=boundary";

    #[test]
    fn crs_922100_charset_field() {
        let body = crlf("--boundary\nContent-disposition: form-data; name=\"_charset_\"\n\nutf-7\n--boundary\nContent-disposition: form-data; name=\"positive\"\nContent-Type: text/plain\n\nLet me see if I can use utf-7.\n--boundary--\n");
        let mp = run(CT, &body);
        assert_eq!(mp.error, None);
        assert!(!mp.strict_error(), "{:?}", mp.flags);
        assert_eq!(
            args(&mp),
            vec![
                ("_charset_".into(), "utf-7".into()),
                ("positive".into(), "Let me see if I can use utf-7.".into())
            ]
        );
        assert_eq!(
            headers(&mp),
            vec![
                (
                    "_charset_".into(),
                    "Content-disposition: form-data; name=\"_charset_\"".into()
                ),
                (
                    "positive".into(),
                    "Content-disposition: form-data; name=\"positive\"".into()
                ),
                ("positive".into(), "Content-Type: text/plain".into()),
            ]
        );
        assert_eq!(mp.names, vec![b"_charset_".to_vec(), b"positive".to_vec()]);
        // Header lines with CRLF (48 + 2, 2, 47 + 2, 24 + 2, 2) plus values (5 + 30).
        assert_eq!(mp.no_files_length, 50 + 2 + 49 + 26 + 2 + 35);
        assert_eq!(mp.flags.unmatched_boundary, 2);
    }

    #[test]
    fn files_and_sizes() {
        let body = crlf("-----------------------------thisissparta\nContent-Disposition: form-data; name=\"fileRap\"; filename=\"fileRap.php\"\nContent-Type: text/plain\n\n<?php phpinfo(); ?>\nline2\n-----------------------------thisissparta\nContent-Disposition: form-data; name=\"empty\"; filename=\"\"\n\n\n-----------------------------thisissparta--\n");
        let mp = run(
            "multipart/form-data; boundary=---------------------------thisissparta",
            &body,
        );
        assert_eq!(mp.error, None);
        assert_eq!(mp.files.len(), 1);
        let f = &mp.files[0];
        assert_eq!(f.field_name, b"fileRap");
        assert_eq!(f.filename, b"fileRap.php");
        assert_eq!(&body[f.content.clone()], b"<?php phpinfo(); ?>\r\nline2");
        assert_eq!(f.size, 26);
        assert_eq!(mp.files_combined_size(), 26);
        // An empty filename is a form field, as in ModSecurity.
        assert_eq!(args(&mp), vec![("empty".into(), "".into())]);
        assert_eq!(mp.filenames, vec![b"fileRap.php".to_vec(), b"".to_vec()]);
    }

    #[test]
    fn crs_922130_invalid_header_character() {
        // 922130-1: 0x0E before the header name; the next header still names the part.
        let body = b"--boundary\r\n\x0eContent-Disposition: form-data; name=\"file\"; filename=\"1.php\"\r\nContent-Disposition: form-data; name=\"post\"\r\n\r\n<?php var_dump(file_get_contents(\"/etc/passwd\"));\r\n--boundary--";
        let mp = run(CT, body);
        assert_eq!(
            mp.error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid part header (contains invalid character).")
        );
        assert!(mp.strict_error());
        assert_eq!(mp.args.len(), 1);
        assert_eq!(mp.args[0].0, b"post");
        for bad in [
            &b"Content-Disposition\x0e"[..],
            b"Content- Disposition",
            b"Content\x7f-Disposition",
        ] {
            let mut body = b"--boundary\r\n".to_vec();
            body.extend_from_slice(bad);
            body.extend_from_slice(b": form-data; name=\"file\"\r\n\r\nx\r\n--boundary--\r\n");
            let mp = run(CT, &body);
            assert!(mp
                .error
                .as_deref()
                .unwrap()
                .contains("(contains invalid character)"));
        }
        // 922130-5/6: '!' and '~' are valid name characters.
        for good in ["Content-!Disposition", "Content~Disposition"] {
            let body = crlf(&format!("--boundary\n{good}: form-data; name=\"file\"\nContent-Disposition: form-data; name=\"post\"\n\nx\n--boundary--\n"));
            let mp = run(CT, &body);
            assert_eq!(mp.error, None, "{good}");
            assert!(headers(&mp).iter().any(|(_, h)| h.starts_with(good)));
        }
    }

    #[test]
    fn charset_after_boundary_is_tolerated() {
        let body = crlf("--b\nContent-Disposition: form-data; name=\"a\"\n\nv\n--b--\n");
        for ct in [
            "multipart/form-data; boundary=b; charset=utf-8",
            "multipart/form-data; boundary=\"b\"; Charset = UTF-8",
        ] {
            let mp = run(ct, &body);
            assert_eq!(mp.error, None, "{ct}");
        }
    }

    #[test]
    fn crs_922130_8_no_headers() {
        let body = crlf("--boundary123\ntest\n--boundary123\nyet another test\n--boundary123--\n");
        let mp = run("multipart/form-data; boundary=boundary123", &body);
        assert!(mp.error.as_deref().unwrap().contains("colon missing"));
        assert!(mp.flags.invalid_part);
        assert!(mp.part_headers.is_empty());
    }

    #[test]
    fn crs_922110_header_value_format() {
        let body = crlf("------WebKitFormBoundary\nContent-Disposition: form-data; name=\"attack\"\nCoNtEnT-TyPe: text/plain;  charset  =  utf-7\n\n+ADw-script+AD4-\n------WebKitFormBoundary--\n");
        let mp = run(
            "multipart/form-data; boundary=----WebKitFormBoundary",
            &body,
        );
        assert_eq!(mp.error, None);
        assert_eq!(
            headers(&mp)[1],
            (
                "attack".into(),
                "CoNtEnT-TyPe: text/plain;  charset  =  utf-7".into()
            )
        );
    }

    #[test]
    fn content_type_errors_and_flags() {
        let cases: &[(&str, &str)] = &[
            ("", "Content-Type header not available"),
            ("multipart/related", "Invalid MIME type"),
            ("multipart/form-data", "Boundary not found"),
            (
                "multipart/form-data; boundary=a; boundary=b",
                "Multiple boundary",
            ),
            ("multipart/form-data; x; boundary=a", "malformed"),
            ("multipart/form-data; boundaryx=a", "parameter name"),
            ("multipart/form-data; boundary=\"a", "quote"),
            ("multipart/form-data; boundary=a;b", "characters"),
            ("multipart/form-data; boundary=a; name=x", "characters"),
            ("multipart/form-data; boundary=\"\"", "empty"),
        ];
        for (ct, msg) in cases {
            let mp = run(ct, b"--a\r\n");
            let e = mp.error.clone().unwrap_or_default();
            assert!(e.contains(msg), "{ct:?}: {e:?}");
            assert!(mp.strict_error());
        }
        let body = crlf("--a b\nContent-Disposition: form-data; name=x\n\n1\n--a b--\n");
        let mp = run("multipart/form-data boundary = \"a b\"", &body);
        assert_eq!(mp.error, None);
        assert!(
            mp.flags.missing_semicolon && mp.flags.boundary_whitespace && mp.flags.boundary_quoted
        );
        assert!(mp.strict_error());
        assert_eq!(args(&mp), vec![("x".into(), "1".into())]);
    }

    #[test]
    fn body_anomalies() {
        // Data before, LF lines, folding, single quotes, data after.
        let body =
            b"preamble\n--b\nContent-Disposition: form-data;\n\tname='x'\n\nv\n--b--\nepilogue";
        let mp = run("multipart/form-data; boundary=b", body);
        assert_eq!(mp.error, None);
        let f = mp.flags;
        assert!(f.data_before && f.data_after && f.lf_line && !f.crlf_line);
        assert!(f.header_folding && !f.invalid_header_folding && f.invalid_quoting);
        assert_eq!(args(&mp), vec![("x".into(), "v".into())]);
        // Mixed line endings.
        let mp = run(
            "multipart/form-data; boundary=b",
            b"--b\r\nContent-Disposition: form-data; name=x\n\r\nv\r\n--b--\r\n",
        );
        assert!(mp.flags.crlf_lf_lines());
    }

    #[test]
    fn boundary_problems() {
        let mp = run(
            CT,
            b"--boundary\r\nContent-Disposition: form-data; name=x\r\n\r\nv\r\n--boundary--\r\n",
        );
        assert_eq!(mp.error, None);
        let mp = run(CT, b"--boundaryX\r\n");
        assert!(mp.error.unwrap().contains("Invalid boundary: --boundaryX"));
        let mp = run(CT, b"-- boundary\r\n");
        assert!(mp.error.unwrap().contains("(whitespace)"));
        let mp = run(CT, b"hello\r\n");
        assert!(mp.error.unwrap().contains("No boundaries found"));
        let mp = run(CT, b"--boundary\r\nContent-Disposition: form-data; name=x\r\n\r\nv --boundary inside\r\n--other\r\n--boundary--");
        assert_eq!(mp.error, None);
        assert_eq!(mp.flags.unmatched_boundary, 1);
        assert_eq!(
            args(&mp),
            vec![("x".into(), "v --boundary inside\r\n--other".into())]
        );
        // Truncated: the open part is still reported.
        let mp = run(
            CT,
            b"--boundary\r\nContent-Disposition: form-data; name=x\r\n\r\n<script>",
        );
        assert!(mp
            .error
            .as_ref()
            .unwrap()
            .contains("Final boundary missing"));
        assert_eq!(args(&mp), vec![("x".into(), "<script>".into())]);
        assert_eq!(run(CT, b"").error, None);
    }

    #[test]
    fn content_disposition_errors() {
        for (cd, code) in [
            ("attachment; name=x", "(-1)"),
            ("form-data name=x", "(-2)"),
            ("form-data; name=x; other=y", "(-11)"),
            ("form-data; name=x; name=y", "(-14)"),
            ("form-data; name=\"x\"z", "(-12)"),
            ("form-data; name", "(-4)"),
        ] {
            let body = format!("--b\r\nContent-Disposition: {cd}\r\n\r\nv\r\n--b--\r\n");
            let mp = run("multipart/form-data; boundary=b", body.as_bytes());
            let e = mp.error.clone().unwrap();
            assert!(e.contains(code), "{cd}: {e}");
            assert!(mp.flags.invalid_part);
        }
        let mp = run("multipart/form-data; boundary=b", b"--b\r\nContent-Disposition: form-data; name=\"a\\\"b\"\r\nContent-Disposition: form-data\r\n\r\nv\r\n--b--\r\n");
        assert!(mp.error.as_ref().unwrap().contains("Duplicate part header"));
        assert_eq!(args(&mp), vec![("a\"b".into(), "v".into())]);
    }

    #[test]
    fn limits() {
        let mut body = Vec::new();
        for _ in 0..20 {
            body.extend_from_slice(
                b"--b\r\nContent-Disposition: form-data; name=f; filename=a\r\n\r\nx\r\n",
            );
        }
        body.extend_from_slice(b"--b--\r\n");
        let mp = parse(
            b"multipart/form-data; boundary=b",
            &body,
            &MultipartLimits {
                max_parts: 5,
                max_files: 0,
            },
        );
        assert!(mp.flags.file_limit_exceeded);
        assert_eq!(mp.files.len(), 5);
        let mp = parse(
            b"multipart/form-data; boundary=b",
            &body,
            &MultipartLimits {
                max_parts: 100,
                max_files: 3,
            },
        );
        assert!(mp.flags.file_limit_exceeded);
        assert!(mp.error.unwrap().contains("Upload file limit exceeded 3"));
        let many = format!(
            "--b\r\nContent-Disposition: form-data; name=x\r\n{}\r\nv\r\n--b--\r\n",
            (0..100).map(|i| format!("H{i}: v\r\n")).collect::<String>()
        );
        let mp = run("multipart/form-data; boundary=b", many.as_bytes());
        assert!(mp.error.as_ref().unwrap().contains("Too many part headers"));
        assert_eq!(mp.part_headers.len(), DEFAULT_MULTIPART_PART_HEADERS);
        assert_eq!(args(&mp), vec![("x".into(), "v".into())]);
        let long = format!("--b\r\nX: {}\r\n", "a".repeat(5000));
        let mp = run("multipart/form-data; boundary=b", long.as_bytes());
        assert!(mp.error.unwrap().contains("Part header line over 4096"));
    }

    #[test]
    fn adversarial_never_panics() {
        let body = crlf("--b\nContent-Disposition: form-data; name=\"a\"; filename=\"f\"\n folded\n\nxx\n--b\nContent-Disposition: form-data; name='q\\\n\n\n--b--\n");
        for i in 0..body.len() {
            let _ = run("multipart/form-data; boundary=b", &body[..i]);
        }
        let _ = run(
            "multipart/form-data; boundary=b",
            b"--b\r\n\0\xff\xfe:\r\n\r\n",
        );
        let _ = run("multipart/form-data; boundary=b", &b"--b\r\n".repeat(5000));
        let _ = run("multipart/form-data; boundary=b", &b"\n".repeat(5000));
        let _ = run(
            "multipart/form-data; boundary=b",
            b"--b\r\nContent-Disposition: form-data; name=\"",
        );
        let _ = run(
            "multipart/form-data; boundary=b",
            b"--b\r\nContent-Disposition: form-data; name=\"x\\",
        );
    }
}
