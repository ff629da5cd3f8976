//! A sans-IO web application firewall engine that runs the OWASP Core Rule Set v4.
//!
//! # Overview
//!
//! `waf-core` inspects HTTP transactions. It does **not** open sockets, spawn tasks, read
//! clocks or keep global state: the host (an axum layer, an nginx module, a proxy) feeds it
//! the request and response one phase at a time, and it answers each phase with a
//! [`Verdict`]. Rules are written in SecLang, ModSecurity's rule language, so the OWASP Core
//! Rule Set runs unmodified.
//!
//! ```text
//!            request / response bytes, headers, time
//!  host  ───────────────────────────────────────────▶  waf-core
//!  (owns sockets, bodies,     ◀──────────────────  Verdict: Continue | Intervene(status, ..)
//!   clocks, tasks)                                  + Report with the matched rules
//! ```
//!
//! # Example
//!
//! ```
//! use std::time::SystemTime;
//! use waf_core::{ConnectionInfo, RequestHead, Waf};
//!
//! let waf = Waf::builder()
//!     .seclang(
//!         "inline",
//!         r#"SecRuleEngine On
//!            SecRule ARGS "@rx (?i)union\s+select" "id:1,phase:1,deny,status:403,msg:'SQLi'""#,
//!     )
//!     .build()?;
//!
//! let conn = ConnectionInfo::new("192.0.2.1:50000".parse()?, "127.0.0.1:80".parse()?);
//! let mut tx = waf.transaction(&conn, SystemTime::UNIX_EPOCH);
//! let headers: &[(&[u8], &[u8])] = &[(b"Host", b"example.com")];
//! let head = RequestHead::new(b"GET", b"/?q=1%20UNION%20SELECT%20password", b"HTTP/1.1", headers);
//! let verdict = tx.request_headers(&head);
//! match verdict.intervention() {
//!     Some(i) => assert_eq!(i.status, 403), // answer with i.status, skip the handler
//!     None => panic!("expected a block"),
//! }
//! let report = tx.finish();
//! assert_eq!(report.matched_rules[0].id, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Untrusted input
//!
//! Request and response data never produce an error and never panic: malformed bodies set
//! `REQBODY_ERROR` and friends and still get a verdict. Every buffer is bounded by a limit in
//! [`limits`]. Errors come only from configuration (rule files) and carry file, line and
//! column.
//!
//! # Performance
//!
//! Rules are compiled once into an immutable program; nothing is compiled per request.
//! Transformed values are cached per transaction, and transformations that leave their input
//! unchanged do not allocate. A finished transaction's buffers (request and response data,
//! `TX`, the transformation cache, match and expansion scratch) are emptied and handed to the
//! next transaction of the same [`Waf`] on that thread, so in steady state a benign request
//! makes no heap allocation (`benches/benches/alloc.rs` counts them); nothing of one request
//! stays visible to the next.
//!
//! Most rules do not match most requests, and the program is built to learn that without
//! running them: a multi-pattern prefilter tells which rules' literals occur in a value
//! (one scan per value and transformation chain, or one scan of the raw value for every
//! chain that cannot change it); an operator with a byte-class gate (every match of
//! `@rx [\n\r;|&]\s*id` needs one of those bytes) is skipped on values without one; and
//! the plan skips whole rules whose prefilter bit or byte classes occur in no value of
//! their variables, and paranoia-level tests read `TX` by index. The rules a rule set starts
//! phase 1 with that read and set only `TX` (CRS's setup and 901 defaults) are evaluated once
//! when the [`Waf`] is built, and a transaction takes their result in one copy. Results never
//! depend on any of it: a test runs every CRS regression request and a development corpus
//! through both the plan and a straightforward evaluation and requires the same report.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod host;
pub mod limits;
pub mod ml;
pub mod policy;

mod actions;
mod body;
mod compile;
mod detect;
mod error;
mod eval;
mod exclusion;
mod macros;
mod operators;
mod report;
mod seclang;
mod transaction;
mod transformations;
mod variables;
mod verdict;
mod waf;

pub use compile::{LimitAction, ScanBackend};
pub use error::{Error, ErrorKind, Location, Warning};
pub use exclusion::{ExcludedRules, Exclusion};
pub use report::{MatchedRule, MlScore, Report, Severity, UniqueId};
pub use transaction::{ConnectionInfo, RequestHead, ResponseHead, Transaction};
pub use verdict::{DisruptiveAction, Intervention, Verdict};
pub use waf::{EngineMode, EngineSettings, Waf, WafBuilder};

/// Entry points for fuzzing; not a stable API.
#[doc(hidden)]
pub mod internal {
    pub use crate::seclang::parse_str;

    /// Name/value pairs, as the body processors produce them.
    pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    /// `application/x-www-form-urlencoded` parsing (`ARGS_GET`/`ARGS_POST`): the pairs and
    /// whether an invalid `%` encoding was seen.
    pub fn parse_urlencoded(input: &[u8], separator: u8, max_args: usize) -> (Pairs, bool) {
        let mut out = Vec::new();
        let outcome = crate::body::urlencoded::parse(input, separator, max_args, &mut out);
        (out, outcome.invalid_encoding)
    }

    /// Multipart parsing with the default limits: the `ARGS_POST` pairs, the number of file
    /// parts, and the processor's error message if any.
    pub fn parse_multipart(content_type: &[u8], body: &[u8]) -> (Pairs, usize, Option<String>) {
        let m = crate::body::multipart::parse(content_type, body, &Default::default());
        (m.args, m.files.len(), m.error)
    }

    /// JSON body parsing: the flattened pairs, and the `REQBODY_ERROR_MSG` on error.
    pub fn parse_json(input: &[u8], max_depth: usize, max_args: usize) -> (Pairs, Option<String>) {
        let mut out = Vec::new();
        let err = crate::body::json::parse(input, max_depth, max_args, &mut out)
            .err()
            .map(|e| e.message);
        (out, err)
    }

    /// XML body parsing: the number of text nodes and attribute values, or the error.
    pub fn parse_xml(input: &[u8], max_depth: usize) -> Result<(usize, usize), String> {
        crate::body::xml::parse(input, max_depth)
            .map(|x| (x.text_nodes.len(), x.attr_values.len()))
            .map_err(|e| e.message)
    }

    /// Compiles an XPath expression (the prefix `p` bound to `urn:p`) and evaluates it
    /// on `document`: the number of values, or the compile error.
    pub fn xpath(expression: &str, document: &[u8]) -> Result<usize, String> {
        let ns = [("p".to_string(), "urn:p".to_string())];
        let xpath = crate::body::xpath::XPath::compile(expression, &ns)?;
        let mut n = 0;
        xpath.evaluate(document, &mut |_| n += 1);
        Ok(n)
    }

    /// `Cookie` header parsing (`REQUEST_COOKIES`).
    pub fn parse_cookie(header_value: &[u8]) -> Pairs {
        let mut out = Vec::new();
        crate::body::cookie::parse(header_value, &mut out);
        out
    }

    /// The number of transformations [`transform_chain`] picks from.
    pub const TRANSFORMATION_COUNT: usize = crate::transformations::ALL.len();

    /// Applies a chain of transformations to `input`; each byte of `chain` picks one
    /// (modulo [`TRANSFORMATION_COUNT`]), in order, as a `t:a,t:b,...` list would. Checks
    /// the `Cow` contract on the way: `Owned` must differ from its input.
    pub fn transform_chain(chain: &[u8], input: &[u8]) -> Vec<u8> {
        let mut value = input.to_vec();
        for &pick in chain {
            let t = &crate::transformations::ALL[usize::from(pick) % TRANSFORMATION_COUNT];
            if let std::borrow::Cow::Owned(changed) = t.apply(&value) {
                assert_ne!(changed, value, "{} returned Owned but unchanged", t.name());
                value = changed;
            }
        }
        value
    }
}
