//! `waf-proxy`: a standalone WAF reverse proxy built on `waf-core`.
//!
//! The binary (`src/main.rs`) is a thin CLI over this library, so that integration tests and
//! benchmarks can reach the same code.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod profile;
pub mod replay;
