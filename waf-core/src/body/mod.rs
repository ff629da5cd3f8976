//! Request body processors (URLENCODED, MULTIPART, JSON, XML) and the cookie parser.
//!
//! Each processor is a pure function from the whole buffered body (or header value) to the
//! values the rule variables expose: no I/O, no temp files, no streaming. The engine buffers
//! the body up to `SecRequestBodyLimit` anyway, and a one-shot parser over a slice is simpler
//! to bound and to fuzz than a resumable state machine.
//!
//! Semantics copy ModSecurity v3 (libmodsecurity `transaction.cc`,
//! `request_body_processor/*.cc`), which CRS is tested against, and Coraza
//! (`internal/bodyprocessors`) where CRS tests depend on its choices; each module says which.
//!
//! Untrusted input: no processor panics or returns a Rust error for bad bytes. Problems are
//! reported as flags (`MULTIPART_*`, `URLENCODED_ERROR`) or as the text that becomes
//! `REQBODY_ERROR_MSG`, and whatever was parsed before the problem is kept. Allocation is
//! bounded by the input size times a small constant plus the explicit limits passed in
//! (`max_args`, `max_depth`, part limits).

// The evaluator (another branch) is the caller; until it lands these are test-only.
#[allow(dead_code)] // used by the evaluator
pub(crate) mod cookie;
#[allow(dead_code)] // used by the evaluator
pub(crate) mod json;
#[allow(dead_code)] // used by the evaluator
pub(crate) mod multipart;
#[allow(dead_code)] // used by the evaluator
pub(crate) mod urlencoded;
#[allow(dead_code)] // used by the evaluator
pub(crate) mod xml;
