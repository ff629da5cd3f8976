//! Operators (`@rx`, `@pm`, `@eq`, ...): one file each, registered in [`Operator`].
//!
//! An operator is compiled once, when the rule is loaded ([`Operator::compile`]): regular
//! expressions and Aho-Corasick automata are built, data files are read, number and IP
//! arguments are parsed, and bad arguments are rejected there, never at request time.
//! [`Operator::evaluate`] then runs for every (transformed) request value a rule targets, so
//! it does not allocate on the no-match path; the only allocations are the expansion of an
//! argument that contains a macro (`@lt %{tx.blocking_paranoia_level}`) and the capture
//! groups of a match.
//!
//! Semantics follow ModSecurity v3 (libmodsecurity `src/operators/*.cc`), checked against the
//! ModSecurity operator vectors in `tests.rs`. Where ModSecurity and Coraza differ, the
//! operator's file says which one we copy and why.
//!
//! Negation (`!@rx`) is the caller's business: operators only answer "matched".

// The compiler (`compile/`) is being written in parallel and does not call `Operator` yet;
// until it does, everything here is used only by tests. Remove once wired.

mod begins_with;
mod contains;
mod contains_word;
mod detect_sql_fragment;
mod detect_sqli;
mod detect_xss;
mod ends_with;
mod eq;
mod ge;
mod gt;
mod ip_match;
mod ip_match_from_file;
mod le;
mod lt;
mod no_match;
pub(crate) mod numeric;
mod pm;
mod pm_from_file;
mod rx;
pub(crate) mod rx_backtrack;
pub(crate) mod rx_classes;
pub(crate) mod rx_linear;
mod rx_literals;
mod streq;
mod strmatch;
mod unconditional_match;
mod validate_byte_range;
mod validate_url_encoding;
mod validate_utf8_encoding;
mod verify_cc;
mod verify_cpf;
mod verify_ssn;
mod verify_svnr;
mod within;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use crate::macros::{MacroExpander, MacroString};

/// Capture groups written by an operator when its rule has `capture`: index 0 is the whole
/// match (or the matched phrase, or the SQLi fingerprint), 1..=9 the groups.
///
/// The transaction keeps one across rules and requests (the match scratch), so it also
/// keeps what capturing costs buffers for: group buffers beyond the current groups, and
/// the capture slots of each `@rx` that captured. A capturing match then allocates nothing
/// once the same regex has captured before.
#[derive(Clone, Debug, Default)]
pub(crate) struct Captures {
    /// `TX.0` .. `TX.9`.
    pub(crate) groups: Vec<Vec<u8>>,
    /// Emptied group buffers for later, longer fills.
    spare: Vec<Vec<u8>>,
    /// Capture slots by the address of the regex they were made for. A scratch serves the
    /// transactions of one `Waf`, whose regexes live as long as it does, so an address
    /// names one regex.
    locations: Vec<(usize, regex_automata::util::captures::Captures)>,
}

impl PartialEq for Captures {
    fn eq(&self, other: &Captures) -> bool {
        self.groups == other.groups
    }
}

impl Captures {
    /// Captures with these groups.
    #[cfg(test)]
    pub(crate) fn with_groups(groups: Vec<Vec<u8>>) -> Captures {
        Captures {
            groups,
            ..Captures::default()
        }
    }

    /// Replaces the groups with `parts`, reusing the buffers already allocated.
    fn fill<'a>(&mut self, parts: impl IntoIterator<Item = &'a [u8]>) {
        let mut n = 0;
        for part in parts {
            match self.groups.get_mut(n) {
                Some(group) => {
                    group.clear();
                    group.extend_from_slice(part);
                }
                None => {
                    let mut group = self.spare.pop().unwrap_or_default();
                    group.extend_from_slice(part);
                    self.groups.push(group);
                }
            }
            n += 1;
        }
        for mut group in self.groups.drain(n.min(self.groups.len())..) {
            group.clear();
            self.spare.push(group);
        }
    }

    /// The capture slots kept for the regex at `key`, if any (give them back with
    /// [`Captures::keep_locations`]).
    fn take_locations(&mut self, key: usize) -> Option<regex_automata::util::captures::Captures> {
        let i = self.locations.iter().position(|(k, _)| *k == key)?;
        Some(self.locations.swap_remove(i).1)
    }

    /// Keeps capture slots for the regex at `key` (at most 64 regexes' worth).
    fn keep_locations(&mut self, key: usize, locations: regex_automata::util::captures::Captures) {
        if self.locations.len() < 64 {
            self.locations.push((key, locations));
        }
    }
}

/// Most capture groups an operator writes: `TX.0` to `TX.9`, as in ModSecurity.
const MAX_CAPTURES: usize = 10;

/// A compiled operator.
#[derive(Debug)]
pub(crate) enum Operator {
    /// `@beginsWith`.
    BeginsWith(begins_with::BeginsWith),
    /// `@contains`.
    Contains(contains::Contains),
    /// `@containsWord`.
    ContainsWord(contains_word::ContainsWord),
    /// `@detectSqlFragment`.
    DetectSqlFragment(detect_sql_fragment::DetectSqlFragment),
    /// `@detectSQLi`.
    DetectSqli(detect_sqli::DetectSqli),
    /// `@detectXSS`.
    DetectXss(detect_xss::DetectXss),
    /// `@endsWith`.
    EndsWith(ends_with::EndsWith),
    /// `@eq`.
    Eq(eq::Eq),
    /// `@ge`.
    Ge(ge::Ge),
    /// `@gt`.
    Gt(gt::Gt),
    /// `@ipMatch`, and `@ipMatchFromFile` once its file is read.
    IpMatch(ip_match::IpMatch),
    /// `@le`.
    Le(le::Le),
    /// `@lt`.
    Lt(lt::Lt),
    /// `@noMatch`.
    NoMatch(no_match::NoMatch),
    /// `@pm`, and `@pmFromFile` once its files are read.
    Pm(pm::Pm),
    /// `@rx`.
    Rx(rx::Rx),
    /// `@streq`.
    Streq(streq::Streq),
    /// `@strmatch`.
    Strmatch(strmatch::Strmatch),
    /// `@unconditionalMatch`.
    UnconditionalMatch(unconditional_match::UnconditionalMatch),
    /// `@validateByteRange`.
    ValidateByteRange(validate_byte_range::ValidateByteRange),
    /// `@validateUrlEncoding`.
    ValidateUrlEncoding(validate_url_encoding::ValidateUrlEncoding),
    /// `@validateUtf8Encoding`.
    ValidateUtf8Encoding(validate_utf8_encoding::ValidateUtf8Encoding),
    /// `@verifyCC`.
    VerifyCc(verify_cc::VerifyCc),
    /// `@verifyCPF`.
    VerifyCpf(verify_cpf::VerifyCpf),
    /// `@verifySSN`.
    VerifySsn(verify_ssn::VerifySsn),
    /// `@verifySVNR`.
    VerifySvnr(verify_svnr::VerifySvnr),
    /// `@within`.
    Within(within::Within),
}

impl Operator {
    /// For `@eq`, `@ge`, `@gt`, `@le` and `@lt` with a number written in the rule: the
    /// comparison and the number, which is how the operator evaluates any value (both read
    /// as [`numeric::parse_integer`] reads them).
    pub(crate) fn literal_comparison(&self) -> Option<(numeric::Comparison, i64)> {
        use numeric::Comparison as C;
        match self {
            Operator::Eq(op) => op.literal().map(|n| (C::Eq, n)),
            Operator::Ge(op) => op.literal().map(|n| (C::Ge, n)),
            Operator::Gt(op) => op.literal().map(|n| (C::Gt, n)),
            Operator::Le(op) => op.literal().map(|n| (C::Le, n)),
            Operator::Lt(op) => op.literal().map(|n| (C::Lt, n)),
            _ => None,
        }
    }

    /// The argument's macro string, when the operator takes one with macros
    /// (`@within %{tx.allowed_methods}`, `@ge %{tx.inbound_anomaly_score_threshold}`): for
    /// the compiler to give its `TX` references their slots.
    pub(crate) fn argument_mut(&mut self) -> Option<&mut MacroString> {
        match self {
            Operator::BeginsWith(o) => o.argument.template_mut(),
            Operator::Contains(o) => o.argument.template_mut(),
            Operator::ContainsWord(o) => o.argument.template_mut(),
            Operator::EndsWith(o) => o.argument.template_mut(),
            Operator::Streq(o) => o.argument.template_mut(),
            Operator::Strmatch(o) => o.argument.template_mut(),
            Operator::Within(o) => o.argument.template_mut(),
            Operator::Eq(o) => o.argument.template_mut(),
            Operator::Ge(o) => o.argument.template_mut(),
            Operator::Gt(o) => o.argument.template_mut(),
            Operator::Le(o) => o.argument.template_mut(),
            Operator::Lt(o) => o.argument.template_mut(),
            _ => None,
        }
    }

    /// Compiles `@name argument`. `name` is given without `@`, in any case (`rx`,
    /// `pmFromFile`, `pmf`). `rules_dir` is the directory of the rule file, for
    /// `@pmFromFile` and `@ipMatchFromFile` relative paths. The error is a message without
    /// location (the compiler adds it).
    pub(crate) fn compile(
        name: &str,
        argument: &str,
        rules_dir: Option<&Path>,
    ) -> Result<Operator, OperatorError> {
        let lower = name.to_ascii_lowercase();
        let op = match lower.as_str() {
            "beginswith" => Operator::BeginsWith(begins_with::BeginsWith::new(argument)?),
            "contains" => Operator::Contains(contains::Contains::new(argument)?),
            "containsword" => Operator::ContainsWord(contains_word::ContainsWord::new(argument)?),
            "detectsqlfragment" => {
                Operator::DetectSqlFragment(detect_sql_fragment::DetectSqlFragment::new(argument)?)
            }
            "detectsqli" => Operator::DetectSqli(detect_sqli::DetectSqli::new(argument)?),
            "detectxss" => Operator::DetectXss(detect_xss::DetectXss::new(argument)?),
            "endswith" => Operator::EndsWith(ends_with::EndsWith::new(argument)?),
            "eq" => Operator::Eq(eq::Eq::new(argument)?),
            "ge" => Operator::Ge(ge::Ge::new(argument)?),
            "gt" => Operator::Gt(gt::Gt::new(argument)?),
            "ipmatch" => Operator::IpMatch(ip_match::IpMatch::new(argument)?),
            "ipmatchfromfile" | "ipmatchf" => {
                Operator::IpMatch(ip_match_from_file::compile(argument, rules_dir)?)
            }
            "le" => Operator::Le(le::Le::new(argument)?),
            "lt" => Operator::Lt(lt::Lt::new(argument)?),
            "nomatch" => Operator::NoMatch(no_match::NoMatch),
            "pm" => Operator::Pm(pm::Pm::new(argument)?),
            "pmfromfile" | "pmf" => Operator::Pm(pm_from_file::compile(argument, rules_dir)?),
            "rx" => return Operator::rx(argument, 0),
            "streq" => Operator::Streq(streq::Streq::new(argument)?),
            "strmatch" => Operator::Strmatch(strmatch::Strmatch::new(argument)?),
            "unconditionalmatch" => {
                Operator::UnconditionalMatch(unconditional_match::UnconditionalMatch)
            }
            "validatebyterange" => {
                Operator::ValidateByteRange(validate_byte_range::ValidateByteRange::new(argument)?)
            }
            "validateurlencoding" => {
                Operator::ValidateUrlEncoding(validate_url_encoding::ValidateUrlEncoding)
            }
            "validateutf8encoding" => {
                Operator::ValidateUtf8Encoding(validate_utf8_encoding::ValidateUtf8Encoding)
            }
            "verifycc" => Operator::VerifyCc(verify_cc::VerifyCc::new(argument)?),
            "verifycpf" => Operator::VerifyCpf(verify_cpf::VerifyCpf::new(argument)?),
            "verifyssn" => Operator::VerifySsn(verify_ssn::VerifySsn::new(argument)?),
            "verifysvnr" => Operator::VerifySvnr(verify_svnr::VerifySvnr::new(argument)?),
            "within" => Operator::Within(within::Within::new(argument)?),
            _ => return Err(unsupported(name, &lower)),
        };
        Ok(op)
    }

    /// Compiles `@rx argument`; a pattern the linear-time engine cannot compile goes to the
    /// backtracking engine, bounded by `match_limit` steps per search (0: the default; see
    /// `rx_backtrack.rs`).
    pub(crate) fn rx(argument: &str, match_limit: usize) -> Result<Operator, OperatorError> {
        Ok(Operator::Rx(rx::Rx::with_fallback(argument, match_limit)?))
    }

    /// Whether this is an `@rx` on the backtracking engine (named in a load warning).
    pub(crate) fn uses_backtracking(&self) -> bool {
        matches!(self, Operator::Rx(rx) if rx.is_backtracking())
    }

    /// For the engine's prefilter: lower-cased literals such that the operator can only
    /// match a value containing one of them (ignoring ASCII case). `None`: no such set.
    pub(crate) fn required_literals(&self) -> Option<&[Vec<u8>]> {
        match self {
            Operator::Rx(rx) => rx.required_literals(),
            Operator::Pm(pm) => pm.required_literals(),
            _ => None,
        }
    }

    /// Byte classes ([`crate::transformations::features`]) of which the operator can only
    /// match a value holding one (see [`rx_classes`]); 0 when there is no such set.
    pub(crate) fn required_classes(&self) -> crate::transformations::features::Features {
        use crate::transformations::features;
        match self {
            Operator::Rx(rx) => rx.required_classes(),
            Operator::ValidateByteRange(op) => op.required_classes(),
            // An invalid `%` escape needs a `%`.
            Operator::ValidateUrlEncoding(_) => features::PERCENT_PLUS,
            // ASCII is valid UTF-8: an invalid sequence needs a byte 0x80-0xFF.
            Operator::ValidateUtf8Encoding(_) => features::HIGH,
            _ => 0,
        }
    }

    /// For the Hyperscan back-end of the prefilter: the pattern to scan for, when the
    /// operator is an `@rx` whose regex runs on bytes (Unicode off) and cannot match the
    /// empty string. `None` for every other operator.
    pub(crate) fn scan_pattern(&self) -> Option<&str> {
        match self {
            Operator::Rx(rx) => rx.scan_pattern(),
            _ => None,
        }
    }

    /// Runs the operator on one (transformed) value. Macros in the argument are expanded
    /// with `expander`; when `captures` is given and the operator matches, it is filled.
    pub(crate) fn evaluate(
        &self,
        input: &[u8],
        expander: &dyn MacroExpander,
        captures: Option<&mut Captures>,
    ) -> bool {
        match self {
            Operator::BeginsWith(op) => op.evaluate(input, expander),
            Operator::Contains(op) => op.evaluate(input, expander),
            Operator::ContainsWord(op) => op.evaluate(input, expander),
            Operator::DetectSqlFragment(op) => op.evaluate(input),
            Operator::DetectSqli(op) => op.evaluate(input, captures),
            Operator::DetectXss(op) => op.evaluate(input),
            Operator::EndsWith(op) => op.evaluate(input, expander),
            Operator::Eq(op) => op.evaluate(input, expander),
            Operator::Ge(op) => op.evaluate(input, expander),
            Operator::Gt(op) => op.evaluate(input, expander),
            Operator::IpMatch(op) => op.evaluate(input),
            Operator::Le(op) => op.evaluate(input, expander),
            Operator::Lt(op) => op.evaluate(input, expander),
            Operator::NoMatch(op) => op.evaluate(),
            Operator::Pm(op) => op.evaluate(input, captures),
            Operator::Rx(op) => op.evaluate(input, captures, expander),
            Operator::Streq(op) => op.evaluate(input, expander),
            Operator::Strmatch(op) => op.evaluate(input, expander),
            Operator::UnconditionalMatch(op) => op.evaluate(),
            Operator::ValidateByteRange(op) => op.evaluate(input),
            Operator::ValidateUrlEncoding(op) => op.evaluate(input),
            Operator::ValidateUtf8Encoding(op) => op.evaluate(input),
            Operator::VerifyCc(op) => op.evaluate(input, captures),
            Operator::VerifyCpf(op) => op.evaluate(input, captures),
            Operator::VerifySsn(op) => op.evaluate(input, captures),
            Operator::VerifySvnr(op) => op.evaluate(input, captures),
            Operator::Within(op) => op.evaluate(input, expander),
        }
    }
}

/// The error for an operator we do not implement, saying why.
fn unsupported(name: &str, lower: &str) -> OperatorError {
    let why = match lower {
        "rbl" => "DNS lookups are I/O, which waf-core does not do",
        "geolookup" => "needs a GeoIP database",
        "inspectfile" => {
            "it runs an external program on each uploaded file; waf-core runs no programs and \
             stores no files"
        }
        "fuzzyhash" => "needs ssdeep",
        "validatedtd" | "validateschema" => "XML/JSON schema validation is not implemented",
        "gsblookup" => "Google Safe Browsing lookups are I/O",
        "rsub" => "deprecated in ModSecurity v3 and not used by CRS",
        "validatehash" => "not implemented by ModSecurity v3",
        "rxglobal" => "not implemented; @rx with capture covers the first match",
        "validatenid" => "a ModSecurity v2 operator, not in v3 and not used by CRS",
        _ => return OperatorError::Invalid(format!("unknown operator @{name}")),
    };
    OperatorError::Unsupported(format!("unsupported operator @{name}: {why}"))
}

/// Why an operator failed to compile; the compiler maps it to an [`crate::ErrorKind`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OperatorError {
    /// A ModSecurity operator this engine does not implement.
    Unsupported(String),
    /// An unknown operator, or a bad argument.
    Invalid(String),
}

impl From<String> for OperatorError {
    /// An operator's own argument check failed.
    fn from(message: String) -> OperatorError {
        OperatorError::Invalid(message)
    }
}

impl std::fmt::Display for OperatorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OperatorError::Unsupported(m) | OperatorError::Invalid(m) => f.write_str(m),
        }
    }
}

/// A string argument (`@streq`, `@within`, ...): the literal when it has no macro, so the
/// common case costs nothing per call.
#[derive(Debug)]
struct StringArgument {
    /// The argument with its macros.
    template: MacroString,
}

impl StringArgument {
    /// Parses `argument`, rejecting unknown or unclosed macros.
    fn new(argument: &str) -> Result<StringArgument, String> {
        Ok(StringArgument {
            template: MacroString::parse(argument)?,
        })
    }

    /// The literal, when the argument has no macro.
    fn literal(&self) -> Option<&[u8]> {
        self.template.as_literal()
    }

    /// The template, when it has macros.
    fn template_mut(&mut self) -> Option<&mut MacroString> {
        match self.template.as_literal() {
            Some(_) => None,
            None => Some(&mut self.template),
        }
    }

    /// The value for this call: borrowed when literal or one macro the expander lends
    /// (`%{tx.allowed_methods}`: no copy per value), expanded otherwise.
    fn value<'a>(&'a self, expander: &'a dyn MacroExpander) -> Cow<'a, [u8]> {
        self.template.expand_lent(expander)
    }
}

/// Resolves a data file name (`@pmFromFile`, `@ipMatchFromFile`) against the rule file's
/// directory. Remote files are refused: waf-core does no network I/O.
fn resolve_data_file(name: &str, rules_dir: Option<&Path>) -> Result<PathBuf, String> {
    if name.starts_with("http://") || name.starts_with("https://") {
        return Err(format!(
            "remote data file {name:?} is not supported: waf-core does no network I/O"
        ));
    }
    let path = Path::new(name);
    Ok(match rules_dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    })
}

/// Reads a data file: one entry per line, ASCII whitespace trimmed, blank lines and `#`
/// comments skipped.
fn read_data_file(name: &str, rules_dir: Option<&Path>) -> Result<Vec<Vec<u8>>, String> {
    let path = resolve_data_file(name, rules_dir)?;
    let data = std::fs::read(&path)
        .map_err(|e| format!("cannot read data file {}: {e}", path.display()))?;
    Ok(data
        .split(|&b| b == b'\n')
        .map(<[u8]>::trim_ascii)
        .filter(|line| !line.is_empty() && !line.starts_with(b"#"))
        .map(<[u8]>::to_vec)
        .collect())
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A [`MacroExpander`] for unit tests.

    use crate::macros::{MacroExpander, MacroVar};

    /// Expands every variable to a fixed value; `%{tx.missing}` to nothing.
    pub(crate) struct FixedExpander(pub(crate) &'static [u8]);

    impl MacroExpander for FixedExpander {
        fn append_variable(&self, var: &MacroVar, out: &mut Vec<u8>) {
            if var.key.as_deref() != Some("missing") {
                out.extend_from_slice(self.0);
            }
        }
    }

    /// An expander for operators without macros.
    pub(crate) const NO_MACROS: FixedExpander = FixedExpander(b"");
}
