//! Tower/axum middleware for waf-core.
//!
//! This crate is a placeholder until its own issue lands; it re-exports the core so that
//! the workspace layout is final.
#![forbid(unsafe_code)]

pub use waf_core;
