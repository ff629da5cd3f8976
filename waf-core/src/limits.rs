//! Every limit the engine enforces, with its default.
//!
//! Each limit names what it prevents and what happens when it is hit. Rule directives
//! (`SecRequestBodyLimit`, `SecArgumentsLimit`, ...) override the body and argument limits.

/// Largest request body buffered for inspection (`SecRequestBodyLimit`), 13 MiB as in
/// ModSecurity's recommended configuration. Over it: a 413 intervention
/// (`SecRequestBodyLimitAction Reject`) or inspection of the prefix (`ProcessPartial`).
pub const DEFAULT_REQUEST_BODY_LIMIT: usize = 13_107_200;

/// Largest request body without files (`SecRequestBodyNoFilesLimit`), 128 KiB.
pub const DEFAULT_REQUEST_BODY_NO_FILES_LIMIT: usize = 131_072;

/// Largest response body buffered for inspection (`SecResponseBodyLimit`), 512 KiB.
pub const DEFAULT_RESPONSE_BODY_LIMIT: usize = 524_288;

/// Most arguments a request body may produce (`SecArgumentsLimit`); past it the body
/// processor stops and sets `REQBODY_ERROR`. Bounds memory for `a=1&a=1&...` floods.
pub const DEFAULT_ARGUMENTS_LIMIT: usize = 1000;

/// Deepest JSON nesting accepted (`SecRequestBodyJsonDepthLimit`); deeper bodies set
/// `REQBODY_ERROR`. Prevents stack exhaustion from `[[[[...`.
pub const DEFAULT_JSON_DEPTH_LIMIT: usize = 1024;

/// Deepest XML nesting accepted; deeper bodies set `REQBODY_ERROR`.
pub const DEFAULT_XML_DEPTH_LIMIT: usize = 1024;

/// Most parts in a multipart body; more set `MULTIPART_FILE_LIMIT_EXCEEDED`/`REQBODY_ERROR`.
pub const DEFAULT_MULTIPART_PART_LIMIT: usize = 1000;

/// Most bytes of a matched value copied into a [`crate::MatchedRule`].
pub const DEFAULT_MATCHED_DATA_LEN: usize = 512;

/// Deepest `Include` nesting; deeper includes fail the load (catches include cycles).
pub const DEFAULT_INCLUDE_DEPTH: usize = 32;

/// Compiled size limit of one `@rx` regular expression (bytes of automaton), 50 MiB.
pub const DEFAULT_REGEX_SIZE_LIMIT: usize = 50 * 1024 * 1024;

/// Most records kept in persistent collections (`IP`, `GLOBAL`, ...) per `Waf`; when full,
/// expired records go first, then the least recently updated. About 1 KiB per record for
/// CRS's use, so about 100 MiB at the limit.
pub const DEFAULT_COLLECTION_RECORDS: usize = 100_000;
