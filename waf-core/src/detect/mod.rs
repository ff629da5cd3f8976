//! Semantic detectors behind `@detectSQLi` / `@detectXSS`.
//!
//! Placeholder: being written.
