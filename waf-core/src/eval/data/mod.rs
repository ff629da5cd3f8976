//! What a transaction knows: request and response data, `TX`, matched variables, and how
//! a target (`ARGS:foo`, `&REQUEST_HEADERS`, `TX:/^score/`) turns into values.
//!
//! Values are visited in place through a callback, never collected into a vector, so a
//! benign request allocates nothing here. Each request-derived value carries a stable
//! [`ValueKey`] (source and index) so the transformation cache can recognise it for the
//! rest of the transaction: collections only grow (the body adds `ARGS_POST`, the
//! response adds its headers), so a key never names two different values; single values
//! carry the phase in their key, since some change between phases.
//!
//! The variables are visited family by family, one module each: [`args`], [`headers`],
//! [`files`], [`body`], [`state`], [`server`].

mod args;
mod body;
mod files;
mod headers;
mod reuse;
mod server;
mod state;

pub(crate) use headers::drop_verified_cookies;
pub(crate) use reuse::refill;

use std::collections::HashMap;

use crate::actions::ctl::BodyProcessor;
use crate::actions::CollectionName;
use crate::eval::cache::FastState;
use crate::eval::store::Record;
use crate::macros::{MacroExpander, MacroVar};
use crate::variables::{Selector, Variable};

/// A name/value pair with the name as sent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pair {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

impl Pair {
    pub(crate) fn new(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Pair {
        Pair {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// An uploaded file part.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileInfo {
    pub(crate) field: Vec<u8>,
    pub(crate) filename: Vec<u8>,
    pub(crate) size: usize,
}

/// Identity of a request-derived value for the transformation cache: `(source << 32) | index`.
pub(crate) type ValueKey = u64;

/// Sources of cacheable values (the high half of a [`ValueKey`]).
#[derive(Clone, Copy)]
#[repr(u8)]
enum Source {
    ArgGetValue = 1,
    ArgGetName,
    ArgPostValue,
    ArgPostName,
    HeaderValue,
    HeaderName,
    CookieValue,
    CookieName,
    Single,
    FileName,
    FileField,
    PartHeader,
    XmlText,
    XmlAttr,
    RespHeaderValue,
    RespHeaderName,
}

/// Sources a [`ValueKey`] can name: the table of transformed values keeps a row index per
/// (source, index) (`eval::cache`).
pub(crate) const SOURCES: usize = Source::RespHeaderName as usize + 1;

/// Single values (`REQUEST_URI`, `REQUEST_BODY`, ...) a phase is expected to read, for
/// sizing the cache's tables ([`TxData::keyed_values`]): CRS reads about 20 a phase.
const SINGLE_ROWS: usize = 32;

/// The index of a single value's key: its variable, in a block per phase (see
/// [`Emit::single`]). Dense, so the cache's row index for single values stays about 500
/// entries long, not 1,300 as with `phase << 8 | variable` (the index is refilled every
/// transaction).
fn single_index(phase: u8, variable: Variable) -> usize {
    usize::from(phase.saturating_sub(1)) * Variable::ALL.len() + variable as usize
}

/// The one variable that reads the values `key` names, when only one does: request and
/// response headers and their names, cookies and their names, and single values (keyed
/// with their variable). `None` for values several variables read (an argument is in
/// `ARGS` and in `ARGS_GET`). The prefilter scans such a value with only the literals of
/// the rules that read that variable (`compile::prefilter::Prefilter::scan_for`).
pub(crate) fn reader_of(key: ValueKey) -> Option<Variable> {
    const HEADER_VALUE: u64 = Source::HeaderValue as u64;
    const HEADER_NAME: u64 = Source::HeaderName as u64;
    const COOKIE_VALUE: u64 = Source::CookieValue as u64;
    const COOKIE_NAME: u64 = Source::CookieName as u64;
    const RESP_HEADER_VALUE: u64 = Source::RespHeaderValue as u64;
    const RESP_HEADER_NAME: u64 = Source::RespHeaderName as u64;
    const SINGLE: u64 = Source::Single as u64;
    Some(match key >> 32 {
        HEADER_VALUE => Variable::RequestHeaders,
        HEADER_NAME => Variable::RequestHeadersNames,
        COOKIE_VALUE => Variable::RequestCookies,
        COOKIE_NAME => Variable::RequestCookiesNames,
        RESP_HEADER_VALUE => Variable::ResponseHeaders,
        RESP_HEADER_NAME => Variable::ResponseHeadersNames,
        SINGLE => {
            return Variable::ALL
                .get((key & 0xffff_ffff) as usize % Variable::ALL.len())
                .copied()
        }
        _ => return None,
    })
}

fn key_of(source: Source, index: usize) -> Option<ValueKey> {
    Some(((source as u64) << 32) | (index as u64 & 0xffff_ffff))
}

/// Multipart strict-validation flags, in `MULTIPART_*` order.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MultipartFlags {
    pub(crate) boundary_quoted: bool,
    pub(crate) boundary_whitespace: bool,
    pub(crate) crlf_lf_lines: bool,
    pub(crate) data_after: bool,
    pub(crate) data_before: bool,
    pub(crate) file_limit_exceeded: bool,
    pub(crate) header_folding: bool,
    pub(crate) invalid_header_folding: bool,
    pub(crate) invalid_part: bool,
    pub(crate) invalid_quoting: bool,
    pub(crate) lf_line: bool,
    pub(crate) missing_semicolon: bool,
    pub(crate) unmatched_boundary: u8,
    pub(crate) strict_error: bool,
}

/// Everything rules can read in a transaction.
#[derive(Debug, Default)]
pub(crate) struct TxData {
    pub(crate) remote_addr: Vec<u8>,
    pub(crate) remote_port: Vec<u8>,
    pub(crate) server_addr: Vec<u8>,
    pub(crate) server_port: Vec<u8>,
    pub(crate) unique_id: Vec<u8>,
    /// Request time, seconds since the epoch.
    pub(crate) epoch_secs: u64,

    pub(crate) method: Vec<u8>,
    pub(crate) protocol: Vec<u8>,
    pub(crate) uri_raw: Vec<u8>,
    pub(crate) uri: Vec<u8>,
    pub(crate) filename: Vec<u8>,
    pub(crate) basename: Vec<u8>,
    pub(crate) query_string: Vec<u8>,
    pub(crate) request_line: Vec<u8>,
    pub(crate) request_headers: Vec<Pair>,
    pub(crate) cookies: Vec<Pair>,
    pub(crate) args_get: Vec<Pair>,
    pub(crate) args_post: Vec<Pair>,
    pub(crate) urlencoded_error: bool,

    pub(crate) request_body: Vec<u8>,
    /// Whether REQUEST_BODY exposes the body (URLENCODED or forced).
    pub(crate) request_body_visible: bool,
    pub(crate) request_body_length: usize,
    pub(crate) body_processor: Option<BodyProcessor>,
    pub(crate) reqbody_error: bool,
    pub(crate) reqbody_error_msg: Vec<u8>,
    pub(crate) files: Vec<FileInfo>,
    pub(crate) part_headers: Vec<Pair>,
    pub(crate) multipart_names: Vec<Vec<u8>>,
    pub(crate) multipart_filenames: Vec<Vec<u8>>,
    pub(crate) multipart: MultipartFlags,
    pub(crate) xml_text: Vec<Vec<u8>>,
    pub(crate) xml_attrs: Vec<Vec<u8>>,

    pub(crate) response_status: Vec<u8>,
    pub(crate) response_protocol: Vec<u8>,
    pub(crate) response_headers: Vec<Pair>,
    pub(crate) response_body: Vec<u8>,
    pub(crate) response_content_type: Vec<u8>,
    pub(crate) response_content_length: Vec<u8>,
    pub(crate) outbound_data_error: bool,
    pub(crate) inbound_data_error: bool,
    /// Set by a backtracking `@rx` that hit its match limit during the current rule; the
    /// rule loop turns it into `TX:MSC_PCRE_LIMITS_EXCEEDED`. Atomic only so that a
    /// `Transaction` stays `Sync`; it is written and read by the one thread that runs it.
    pub(crate) match_limit_exceeded: std::sync::atomic::AtomicBool,

    /// `TX`, keys lower-cased.
    pub(crate) tx: super::vars::TxVars,
    /// Persistent collections loaded by `initcol`: (record key, record).
    pub(crate) collections: HashMap<CollectionName, (Vec<u8>, Record)>,
    /// `ENV`, keys lower-cased.
    pub(crate) env: HashMap<Vec<u8>, Vec<u8>, FastState>,

    /// `MATCHED_VARS` of the current rule: (name, value) ranges into `matched_buf`; the
    /// name is the variable name (`ARGS:foo`). Flat, so a match allocates nothing once the
    /// buffers have grown.
    pub(crate) matched_vars: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    pub(crate) matched_buf: Vec<u8>,
    /// `MATCHED_VAR_NAME` and `MATCHED_VAR`, the last match of any rule: ranges into
    /// `matched_buf` while the rule that made it runs, into `last_buf` after (see
    /// [`TxData::start_rule`]), so a match is written once, not copied twice more.
    pub(crate) last_match: LastMatch,
    /// The `matched_buf` of the last rule that matched, for [`TxData::last_match`].
    pub(crate) last_buf: Vec<u8>,
    pub(crate) highest_severity: u8,
    pub(crate) rule_id: u64,
    pub(crate) duration_micros: u64,
    /// The phase being evaluated (1..=5).
    pub(crate) phase: u8,
    pub(crate) web_app_id: Vec<u8>,
    /// Emptied pairs of an earlier transaction, for [`TxData::pair`] (see `reuse`).
    pub(crate) spare_pairs: Vec<Pair>,
}

/// How a visited value is named, for `MATCHED_VAR_NAME`.
#[derive(Clone, Copy)]
pub(crate) struct VarName<'a> {
    pub(crate) variable: Variable,
    pub(crate) key: Option<&'a [u8]>,
}

impl VarName<'_> {
    pub(crate) fn render(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.variable.name().as_bytes());
        if let Some(k) = self.key {
            out.push(b':');
            out.extend_from_slice(k);
        }
    }
}

/// Where `MATCHED_VAR_NAME` and `MATCHED_VAR` are (see [`TxData::last_match`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct LastMatch {
    /// In `matched_buf` (the current rule's), else in `last_buf`.
    pub(crate) current: bool,
    pub(crate) name: std::ops::Range<usize>,
    pub(crate) value: std::ops::Range<usize>,
}

/// Formats a number into a small stack buffer.
pub(crate) struct Num {
    buf: [u8; 24],
    len: usize,
}

impl Num {
    pub(crate) fn new(n: i128) -> Num {
        let mut buf = [0u8; 24];
        let mut tmp = [0u8; 24];
        let neg = n < 0;
        let mut v = n.unsigned_abs();
        let mut i = 0;
        loop {
            tmp[i] = b'0' + (v % 10) as u8;
            v /= 10;
            i += 1;
            if v == 0 || i >= 23 {
                break;
            }
        }
        let mut len = 0;
        if neg {
            buf[0] = b'-';
            len = 1;
        }
        while i > 0 {
            i -= 1;
            buf[len] = tmp[i];
            len += 1;
        }
        Num { buf, len }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Callback for visited values: cache key (None when not cacheable), name, value.
pub(crate) type Visit<'v> = dyn FnMut(Option<ValueKey>, VarName<'_>, &[u8]) + 'v;

/// Visits a collection of named values (`TX`, `ENV`): for a key selector the one value of
/// that name (`get`, names stored lower-cased), otherwise every matching one (`all`) in
/// name order, so the order does not depend on the table's history.
fn visit_named<'a>(
    variable: Variable,
    selector: &Selector,
    excluded: &dyn Fn(&[u8]) -> bool,
    get: impl Fn(&[u8]) -> Option<&'a [u8]>,
    all: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    f: &mut Visit<'_>,
) {
    let mut visit = |k: &[u8], v: &[u8]| {
        f(
            None,
            VarName {
                variable,
                key: Some(k),
            },
            v,
        )
    };
    match selector {
        Selector::Key(k) => {
            if let Some(v) = get(k) {
                if !excluded(k) {
                    visit(k, v);
                }
            }
        }
        _ => {
            // Visited in name order. Up to `SMALL` selected names are sorted on the stack
            // (a rule reading `TX:/^header_name_/` selects a few): no allocation.
            const SMALL: usize = 16;
            let mut small: [(&[u8], &[u8]); SMALL] = [(&[], &[]); SMALL];
            let mut n = 0;
            let mut many: Vec<(&[u8], &[u8])> = Vec::new();
            for kv in all.filter(|(k, _)| selector.matches(k) && !excluded(k)) {
                if n < SMALL {
                    small[n] = kv;
                    n += 1;
                } else {
                    if many.is_empty() {
                        many.extend_from_slice(&small);
                    }
                    many.push(kv);
                }
            }
            let vars = if many.is_empty() {
                &mut small[..n]
            } else {
                &mut many[..]
            };
            vars.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for &mut (k, v) in vars {
                visit(k, v);
            }
        }
    }
}

/// What a family's visit needs besides the callback: the target being visited. Its methods
/// are the shapes values come in (pairs, names, one value, a number, a flag, a list).
#[derive(Clone, Copy)]
struct Emit<'s> {
    variable: Variable,
    selector: &'s Selector,
    excluded: &'s dyn Fn(&[u8]) -> bool,
    /// The phase being evaluated, part of a single value's cache key.
    phase: u8,
}

impl Emit<'_> {
    /// The values of `list`, keyed by `source`.
    fn pairs(&self, list: &[Pair], source: Source, f: &mut Visit<'_>) {
        self.each_pair(list, source, |p| &p.value, f)
    }

    /// The names of `list`, keyed by `source`.
    fn names(&self, list: &[Pair], source: Source, f: &mut Visit<'_>) {
        self.each_pair(list, source, |p| &p.key, f)
    }

    /// `part` of every selected pair of `list`, named by its key and keyed by `source`.
    fn each_pair(
        &self,
        list: &[Pair],
        source: Source,
        part: impl Fn(&Pair) -> &[u8],
        f: &mut Visit<'_>,
    ) {
        for (i, p) in list.iter().enumerate() {
            if self.selector.matches(&p.key) && !(self.excluded)(&p.key) {
                f(
                    key_of(source, i),
                    VarName {
                        variable: self.variable,
                        key: Some(&p.key),
                    },
                    part(p),
                );
            }
        }
    }

    /// A single-valued variable, excluded as a whole
    /// (`ctl:ruleRemoveTargetById=1;REQUEST_FILENAME`).
    fn single(&self, value: &[u8], f: &mut Visit<'_>) {
        if !(self.excluded)(b"") {
            f(
                // Single values may change between phases (`REQBODY_PROCESSOR`,
                // `RESPONSE_STATUS`, ...), and cached results live for the whole
                // transaction: the phase is part of their key.
                key_of(Source::Single, single_index(self.phase, self.variable)),
                VarName {
                    variable: self.variable,
                    key: None,
                },
                value,
            )
        }
    }

    /// A number (not cached: it is formatted on the stack).
    fn number(&self, n: i128, f: &mut Visit<'_>) {
        f(
            None,
            VarName {
                variable: self.variable,
                key: None,
            },
            Num::new(n).as_bytes(),
        )
    }

    /// A flag, as 0 or 1.
    fn flag(&self, b: bool, f: &mut Visit<'_>) {
        self.number(i128::from(b), f)
    }

    /// A list of values that are their own names, keyed by `source`.
    fn list(&self, items: &[Vec<u8>], source: Source, f: &mut Visit<'_>) {
        for (i, v) in items.iter().enumerate() {
            if self.selector.matches(v) && !(self.excluded)(v) {
                f(
                    key_of(source, i),
                    VarName {
                        variable: self.variable,
                        key: Some(v),
                    },
                    v,
                );
            }
        }
    }
}

impl TxData {
    /// Calls `f` for every value of `variable` selected by `selector` and not rejected by
    /// `excluded(key)`. Each family of variables has its own module (`args`, `headers`,
    /// `files`, `body`, `state`, `server`).
    pub(crate) fn visit(
        &self,
        variable: Variable,
        selector: &Selector,
        excluded: &dyn Fn(&[u8]) -> bool,
        f: &mut Visit<'_>,
    ) {
        use Variable as V;
        let e = Emit {
            variable,
            selector,
            excluded,
            phase: self.phase,
        };
        match variable {
            V::Args
            | V::ArgsCombinedSize
            | V::ArgsGet
            | V::ArgsGetNames
            | V::ArgsNames
            | V::ArgsPost
            | V::ArgsPostNames => self.visit_args(e, f),
            V::RequestCookies
            | V::RequestCookiesNames
            | V::RequestHeaders
            | V::RequestHeadersNames
            | V::ResponseHeaders
            | V::ResponseHeadersNames => self.visit_headers(e, f),
            V::Files
            | V::FilesCombinedSize
            | V::FilesNames
            | V::FilesSizes
            | V::FilesTmpContent
            | V::FilesTmpNames
            | V::MultipartBoundaryQuoted
            | V::MultipartBoundaryWhitespace
            | V::MultipartCrlfLfLines
            | V::MultipartDataAfter
            | V::MultipartDataBefore
            | V::MultipartFileLimitExceeded
            | V::MultipartFilename
            | V::MultipartHeaderFolding
            | V::MultipartInvalidHeaderFolding
            | V::MultipartInvalidPart
            | V::MultipartInvalidQuoting
            | V::MultipartLfLine
            | V::MultipartMissingSemicolon
            | V::MultipartName
            | V::MultipartPartHeaders
            | V::MultipartStrictError
            | V::MultipartUnmatchedBoundary => self.visit_files(e, f),
            V::FullRequest
            | V::FullRequestLength
            | V::InboundDataError
            | V::OutboundDataError
            | V::ReqbodyError
            | V::ReqbodyErrorMsg
            | V::ReqbodyProcessor
            | V::ReqbodyProcessorError
            | V::ReqbodyProcessorErrorMsg
            | V::RequestBody
            | V::RequestBodyLength
            | V::ResponseBody
            | V::ResponseContentLength
            | V::ResponseContentType
            | V::ResponseProtocol
            | V::ResponseStatus
            | V::StatusLine
            | V::UrlencodedError
            | V::Xml => self.visit_body(e, f),
            V::Duration
            | V::Env
            | V::Global
            | V::HighestSeverity
            | V::Ip
            | V::MatchedVar
            | V::MatchedVarName
            | V::MatchedVars
            | V::MatchedVarsNames
            | V::Resource
            | V::Rule
            | V::Session
            | V::Tx
            | V::User => self.visit_state(e, f),
            V::AuthType
            | V::Geo
            | V::ModsecBuild
            | V::PathInfo
            | V::QueryString
            | V::RemoteAddr
            | V::RemoteHost
            | V::RemotePort
            | V::RemoteUser
            | V::RequestBasename
            | V::RequestFilename
            | V::RequestLine
            | V::RequestMethod
            | V::RequestProtocol
            | V::RequestUri
            | V::RequestUriRaw
            | V::ServerAddr
            | V::ServerName
            | V::ServerPort
            | V::SessionId
            | V::Time
            | V::TimeDay
            | V::TimeEpoch
            | V::TimeHour
            | V::TimeMin
            | V::TimeMon
            | V::TimeSec
            | V::TimeWday
            | V::TimeYear
            | V::UniqueId
            | V::UserId
            | V::WebAppId => self.visit_server(e, f),
        }
    }

    /// For list-backed collections: how many values a full-collection target visits.
    /// `None` for every other variable.
    pub(crate) fn indexed_len(&self, variable: Variable) -> Option<usize> {
        use Variable as V;
        Some(match variable {
            V::Args | V::ArgsNames => self.args_get.len() + self.args_post.len(),
            V::ArgsGet | V::ArgsGetNames => self.args_get.len(),
            V::ArgsPost | V::ArgsPostNames => self.args_post.len(),
            V::RequestHeaders | V::RequestHeadersNames => self.request_headers.len(),
            V::RequestCookies | V::RequestCookiesNames => self.cookies.len(),
            _ => return None,
        })
    }

    /// Calls `f` for every value any selector of `variable` can yield: what
    /// [`TxData::visit`] yields with no selector, and for `XML` also the attribute values
    /// (`XML://@*`), which no other selector reaches.
    pub(crate) fn visit_every(&self, variable: Variable, f: &mut Visit<'_>) {
        self.visit(variable, &Selector::All, &|_| false, f);
        if variable == Variable::Xml {
            for (i, v) in self.xml_attrs.iter().enumerate() {
                f(
                    key_of(Source::XmlAttr, i),
                    VarName {
                        variable,
                        key: Some(b"//@*"),
                    },
                    v,
                );
            }
        }
    }

    /// For a collection [`crate::compile::plan::collection`] names, how many values
    /// [`TxData::visit`] yields with no selector: 0 means it yields none with any selector.
    pub(crate) fn collection_len(&self, variable: Variable) -> usize {
        use Variable as V;
        match variable {
            V::Files | V::FilesNames | V::FilesSizes => self.files.len(),
            V::MultipartPartHeaders => self.part_headers.len(),
            V::MultipartFilename => self.multipart_filenames.len(),
            V::MultipartName => self.multipart_names.len(),
            V::Xml => self.xml_text.len() + self.xml_attrs.len(),
            V::ResponseHeaders | V::ResponseHeadersNames => self.response_headers.len(),
            // The planner marks only collections; anything else counts as non-empty.
            other => self.indexed_len(other).unwrap_or(usize::MAX),
        }
    }

    /// The [`crate::compile::plan::COLLECTIONS`] that hold at least one value.
    pub(crate) fn nonempty_collections(&self) -> crate::compile::plan::VarSet {
        let mut set = crate::compile::plan::VarSet::default();
        for v in crate::compile::plan::COLLECTIONS {
            if self.collection_len(v) != 0 {
                set.insert(v);
            }
        }
        set
    }

    /// The `pos`-th value [`TxData::visit`] yields for `variable` with no selector, with
    /// the same cache key, name and value. `pos` must be below [`TxData::indexed_len`].
    pub(crate) fn indexed(
        &self,
        variable: Variable,
        pos: usize,
    ) -> (Option<ValueKey>, VarName<'_>, &[u8]) {
        use Variable as V;
        let get = self.args_get.len();
        let (list, index, source, names): (&[Pair], usize, Source, bool) = match variable {
            V::Args if pos < get => (&self.args_get, pos, Source::ArgGetValue, false),
            V::Args => (&self.args_post, pos - get, Source::ArgPostValue, false),
            V::ArgsNames if pos < get => (&self.args_get, pos, Source::ArgGetName, true),
            V::ArgsNames => (&self.args_post, pos - get, Source::ArgPostName, true),
            V::ArgsGet => (&self.args_get, pos, Source::ArgGetValue, false),
            V::ArgsGetNames => (&self.args_get, pos, Source::ArgGetName, true),
            V::ArgsPost => (&self.args_post, pos, Source::ArgPostValue, false),
            V::ArgsPostNames => (&self.args_post, pos, Source::ArgPostName, true),
            V::RequestHeaders => (&self.request_headers, pos, Source::HeaderValue, false),
            V::RequestHeadersNames => (&self.request_headers, pos, Source::HeaderName, true),
            V::RequestCookies => (&self.cookies, pos, Source::CookieValue, false),
            _ => (&self.cookies, pos, Source::CookieName, true),
        };
        let p = &list[index];
        let name = VarName {
            variable,
            key: Some(&p.key),
        };
        (
            key_of(source, index),
            name,
            if names { &p.key } else { &p.value },
        )
    }

    /// An upper bound on the values of one phase that can have a row in the
    /// transformation cache (`eval::cache`): every name and value of the collections, and
    /// [`SINGLE_ROWS`] single values. The cache sizes its tables with it.
    pub(crate) fn keyed_values(&self) -> usize {
        let pairs = self.args_get.len()
            + self.args_post.len()
            + self.request_headers.len()
            + self.cookies.len()
            + self.response_headers.len();
        2 * pairs
            + self.part_headers.len()
            + self.multipart_names.len()
            + self.multipart_filenames.len()
            + 2 * self.files.len()
            + self.xml_text.len()
            + self.xml_attrs.len()
            + SINGLE_ROWS
    }

    /// Number of values a `&VAR` target counts.
    pub(crate) fn count(
        &self,
        variable: Variable,
        selector: &Selector,
        excluded: &dyn Fn(&[u8]) -> bool,
    ) -> usize {
        let mut n = 0;
        self.visit(variable, selector, excluded, &mut |_, _, _| n += 1);
        n
    }
}

impl MacroExpander for TxData {
    fn append_matching(&self, variable: Variable, keys: &Selector, out: &mut Vec<u8>) {
        let mut done = false;
        self.visit(variable, keys, &|_| false, &mut |_, _, v| {
            if !done {
                out.extend_from_slice(v);
                done = true;
            }
        });
    }

    fn note_match_limit_exceeded(&self) {
        self.match_limit_exceeded
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn borrow_variable(&self, var: &MacroVar) -> Option<&[u8]> {
        match (var.variable, &var.key) {
            // A missing TX variable expands to nothing, as `append_variable` says. By slot
            // when the compiler gave the name one (`MacroVar::tx_slot`).
            (Variable::Tx, Some(k)) => Some(
                self.tx
                    .get_at(var.tx_slot, k.as_bytes())
                    .unwrap_or_default(),
            ),
            _ => None,
        }
    }

    fn append_variable(&self, var: &MacroVar, out: &mut Vec<u8>) {
        // `TX:name` is read where `borrow_variable` reads it (by slot; missing is empty).
        if let Some(v) = self.borrow_variable(var) {
            out.extend_from_slice(v);
            return;
        }
        let (variable, key) = (var.variable, var.key.as_deref());
        let selector = match key {
            Some(k) => Selector::Key(k.as_bytes().to_vec()),
            None => Selector::All,
        };
        let mut done = false;
        self.visit(variable, &selector, &|_| false, &mut |_, _, v| {
            if !done {
                out.extend_from_slice(v);
                done = true;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::prefilter::narrowable;

    /// A value whose key names one reader (`reader_of`) is visited through that variable
    /// only, and the prefilter builds narrow automata for that variable: scanning it with
    /// only that variable's rules' literals leaves out no rule that reads it.
    #[test]
    fn a_value_with_one_reader_is_visited_by_that_variable_only() {
        let mut d = TxData::default();
        crate::eval::request::set_request_line(&mut d, b"POST", b"/a/b.php?x=1", b"HTTP/1.1");
        for (k, v) in [
            (&b"Host"[..], &b"example.com"[..]),
            (b"Cookie", b"s=1"),
            (b"Content-Type", b"application/x-www-form-urlencoded"),
        ] {
            let p = d.pair(k, v);
            d.request_headers.push(p);
        }
        let p = d.pair(b"s", b"1");
        d.cookies.push(p);
        let p = d.pair(b"z", b"3");
        d.args_post.push(p);
        let p = d.pair(b"Server", b"x");
        d.response_headers.push(p);
        d.request_body.extend_from_slice(b"z=3");
        d.request_body_visible = true;
        d.response_status.extend_from_slice(b"200");
        // A matched header, as `MATCHED_VARS` holds it.
        d.matched_buf
            .extend_from_slice(b"REQUEST_HEADERS:Hostexample.com");
        d.note_match(0, 20);
        d.tx.set(b"a", b"1");
        for phase in 1..=5 {
            d.phase = phase;
            let (mut narrowed, mut shared) = (0, 0);
            for &variable in Variable::ALL {
                d.visit_every(variable, &mut |key, _, _| match key.and_then(reader_of) {
                    Some(reader) => {
                        assert_eq!(reader, variable, "a {reader:?} value seen as {variable:?}");
                        assert!(narrowable(reader), "{reader:?}");
                        narrowed += 1;
                    }
                    None => shared += 1,
                });
            }
            assert!(narrowed > 20 && shared > 0, "{narrowed} {shared}");
        }
    }
}
