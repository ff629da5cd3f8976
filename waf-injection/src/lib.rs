//! SQL injection and XSS detection with the verdicts of libinjection, in pure Rust.
//!
//! CRS calls `@detectSQLi` and `@detectXSS` on every argument, argument name, cookie and
//! several headers, so these two functions run hundreds of times per request. They allocate
//! nothing, never panic, and give the same answers as C libinjection 3.9.2 (the version
//! Debian's libmodsecurity bundles; `tests/` compares against it on more than 200,000
//! inputs).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod sqli;
pub mod xss;

pub use sqli::{detect_sqli, Fingerprint};
pub use xss::detect_xss;
