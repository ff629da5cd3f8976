//! SQL injection and XSS detection with the verdicts of libinjection, in pure Rust.
//!
//! CRS calls `@detectSQLi` and `@detectXSS` on every argument, argument name, cookie and
//! several headers, so these two functions run hundreds of times per request. They allocate
//! nothing, never panic, and give the same answers as C libinjection 3.9.2 (the version
//! Debian's libmodsecurity bundles; `tests/` compares against it on more than 280,000
//! inputs), SQLi fingerprints included, with one deliberate exception: an XSS attribute is
//! an event handler when it is `on` plus a known event name, as in libinjection 4.x, not
//! any `on*` name of five bytes or more (3.9.2 flagged `<a online=x>`); see [`xss`].
//!
//! The SQLi keyword and fingerprint tables are libinjection's data, read at build time
//! from the `barbacane-libinjection` crate (a build dependency only) and turned into hash
//! tables by `build.rs`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod sqli;
pub mod xss;

pub use sqli::{detect_sqli, Fingerprint};
pub use xss::detect_xss;
