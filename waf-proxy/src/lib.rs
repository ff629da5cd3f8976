//! `waf-proxy`: a standalone WAF reverse proxy built on `waf-core`.
//!
//! # Overview
//!
//! The binary (`src/main.rs`) is a thin CLI over this library, so that integration tests and
//! benchmarks reach the same code:
//!
//! - `waf-proxy run --config FILE`: serve the config (TOML, see [`config`]); reload on
//!   SIGHUP and when the file changes.
//! - `waf-proxy check FILE`: validate a config, including compiling its rules; print each
//!   error with its location.
//! - `waf-proxy demo [--listen ADDR] [--crs DIR]`: the proxy in front of a built-in demo
//!   upstream.
//! - `waf-proxy replay [--config FILE | --crs DIR] FILE...`: run recorded requests through
//!   a WAF ([`replay`]).
//!
//! The request path is in [`proxy`], following pingora's `ProxyHttp` phases.
//!
//! # Untrusted input
//!
//! Nothing a client or upstream sends makes the proxy panic: a malformed HTTP/1 request
//! head is answered by [`edge`] with a defined status (each case on purpose, logged with
//! its reason), anything else by the proxy. Every buffer is bounded: the request head by
//! `max_request_head` and `header_read_timeout_ms`, request bodies by the host's
//! `max_request_body` (413), the logs by their queue length.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod config;
pub mod deadline;
pub mod demo;
pub mod edge;
pub mod fleet;
pub mod headers;
pub mod health;
pub mod log;
pub mod mail;
pub mod metrics;
pub mod policy;
pub mod profile;
pub mod proxy;
pub mod replay;
pub mod server;
pub mod state;
pub mod tls;
