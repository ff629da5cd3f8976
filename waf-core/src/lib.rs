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
//! use waf_core::{ConnectionInfo, RequestHead, Verdict, Waf};
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
//! match tx.request_headers(&head) {
//!     Verdict::Intervene(i) => assert_eq!(i.status, 403),
//!     Verdict::Continue => panic!("expected a block"),
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
//! unchanged do not allocate.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod host;
pub mod limits;

mod actions;
mod body;
mod compile;
mod detect;
mod error;
mod eval;
mod macros;
mod operators;
mod report;
mod seclang;
mod transaction;
mod transformations;
mod variables;
mod verdict;
mod waf;

pub use error::{Error, ErrorKind, Location, Warning};
pub use report::{MatchedRule, Report, Severity};
pub use transaction::{ConnectionInfo, RequestHead, ResponseHead, Transaction};
pub use verdict::{DisruptiveAction, Intervention, Verdict};
pub use waf::{EngineMode, Waf, WafBuilder};

/// Entry points for fuzzing; not a stable API.
#[doc(hidden)]
pub mod internal {
    pub use crate::seclang::parse_str;
}
