//! Every limit the engine enforces, with its default.
//!
//! Each limit names what it prevents and what happens when it is hit. Rule directives
//! (`SecRequestBodyLimit`, `SecArgumentsLimit`, ...) override the body and argument limits.

/// Largest request body buffered for inspection (`SecRequestBodyLimit`), 13 MiB as in
/// ModSecurity's recommended configuration. Over it: a 403 intervention (as libmodsecurity 3)
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

/// Most backtracking steps of one search by the backtracking engine (`SecPcreMatchLimit`),
/// which runs only the `@rx` and key patterns the linear-time `regex` crate cannot compile
/// (look-around, backreferences). Prevents a catastrophic pattern or input from holding a
/// worker: past it the search stops, the rule does not match and
/// `TX:MSC_PCRE_LIMITS_EXCEEDED` is set to 1. One million steps is fancy-regex's default,
/// a few milliseconds at worst; ModSecurity's recommended configuration uses 1000 PCRE
/// calls, which counts differently. Memory: the engine's backtracking stack, a few bytes
/// per step.
pub const DEFAULT_PCRE_MATCH_LIMIT: usize = 1_000_000;

/// Most records kept in persistent collections (`IP`, `GLOBAL`, ...) per `Waf`; when full,
/// expired records go first, then the least recently updated. About 1 KiB per record for
/// CRS's use, so about 100 MiB at the limit.
pub const DEFAULT_COLLECTION_RECORDS: usize = 100_000;

/// Longest policy expression (`[[rules]] expression`), in bytes: bounds parse time and the
/// size of the compiled condition. Longer is a load error.
pub const DEFAULT_EXPRESSION_LEN: usize = 4096;

/// Deepest nesting of `not` and parentheses in a policy expression: bounds the parser's
/// and the evaluator's recursion (stack). Deeper is a load error.
pub const DEFAULT_EXPRESSION_DEPTH: usize = 32;

/// Size limit of a regex compiled from a policy expression (`matches`, `wildcard`), in
/// bytes of compiled program (1 MiB). Bigger is a load error.
pub const DEFAULT_EXPRESSION_REGEX_SIZE: usize = 1 << 20;

/// Most keys the in-memory policy state (rate-limit buckets, scores, bans) holds before it
/// evicts the least recently used (one million; about 100 MB at worst with 20-byte keys).
/// Eviction forgets a client's counters: an attacker who rotates more keys than this can
/// reset its own bucket, so size it above the number of clients you expect per window.
pub const DEFAULT_POLICY_STATE_KEYS: usize = 1_000_000;

/// Longest slice of one value the ML detector turns into one feature row, in bytes
/// (`ml` feature). A longer value is cut into consecutive windows of this size, each scored
/// on its own (the value scores its highest window's), so padding cannot dilute an attack
/// out of sight. A window has at most `3 * 1024 + 8` non-zero features.
pub const DEFAULT_ML_WINDOW: usize = 1024;

/// Most entries (rows × the longest row, padded) of one model run (`ml` feature): bounds
/// the two input tensors to 768 KiB (12 bytes an entry). A request with more is scored in
/// several runs; no value is left out.
pub const DEFAULT_ML_BATCH_ENTRIES: usize = 65_536;

/// Entries of the ML detector's score cache (`ml` feature; shared by the clones of one
/// `ml::Model`): scores of short values that repeat (`User-Agent`, `Accept`, paths), so
/// a request made of them runs no model. With [`DEFAULT_ML_CACHE_VALUE_LEN`] about 0.7 MiB
/// at worst; a full shard (1/16) is emptied.
pub const DEFAULT_ML_CACHE_ENTRIES: usize = 4096;

/// Longest value whose score the ML detector caches, in bytes (`ml` feature).
pub const DEFAULT_ML_CACHE_VALUE_LEN: usize = 128;

/// Longest signed cookie value or form token ([`crate::policy::gate`]) that is verified, in
/// bytes. A longer one is refused before any MAC is computed, so a forged token costs a
/// bounded amount of work.
pub const DEFAULT_MAX_TOKEN_LEN: usize = 1024;

/// Largest request body a gate endpoint (challenge answer, sign-in form) reads, in bytes;
/// the host answers 413 past it. The forms are a few hundred bytes.
pub const DEFAULT_GATE_FORM_LEN: usize = 8 * 1024;

/// Most proof-of-work difficulty (leading zero bits of SHA-256) a challenge may ask for.
/// Each bit doubles the client's expected work: 24 bits is about 16 million hashes, several
/// seconds on a phone.
pub const DEFAULT_MAX_POW_DIFFICULTY: u8 = 24;

/// Largest waiting-room capacity. Admitting a visitor looks for a free slot among the
/// room's `capacity` slots in the state store (on the waiting path only; an admitted
/// visitor's request touches one slot), so this bounds that walk.
pub const DEFAULT_MAX_QUEUE_CAPACITY: u32 = 100_000;

/// Most internal XML entity declarations honoured in one document; more is a body error
/// (the request is refused: see `body::xml`). Bounds the entity table.
pub const DEFAULT_XML_ENTITY_LIMIT: usize = 64;

/// Deepest chain of XML entities referring to entities that is expanded; deeper references
/// stay unexpanded. Bounds the expansion's recursion.
pub const DEFAULT_XML_ENTITY_DEPTH: usize = 4;

/// Most bytes XML entity expansion may produce in one document (64 KiB); past it the body is
/// refused (a "billion laughs" document is stopped here).
pub const DEFAULT_XML_EXPANSION_LIMIT: usize = 64 * 1024;

/// Most decoded bytes per compressed byte of a `Content-Encoding` body, beyond
/// [`DEFAULT_DECOMPRESSION_GRACE`]: real text compresses 3-20x, a bomb 1000x. Past it the
/// body is refused.
pub const DEFAULT_DECOMPRESSION_RATIO: usize = 100;

/// Decoded bytes of a compressed body allowed whatever the ratio (1 MiB), so small, very
/// compressible bodies pass.
pub const DEFAULT_DECOMPRESSION_GRACE: usize = 1 << 20;

/// Longest multipart part header line (and folded header), ModSecurity's
/// `MULTIPART_BUF_SIZE`. Longer: the body is refused.
pub const DEFAULT_MULTIPART_HEADER_LINE: usize = 4096;

/// Most header lines one multipart part may have. Each is copied to `MULTIPART_PART_HEADERS`
/// with the part name, so this caps that copy; real parts have two or three. More: the body
/// is refused.
pub const DEFAULT_MULTIPART_PART_HEADERS: usize = 32;

/// Free lists of the per-transaction table pool (a thread always uses the same one); a power
/// of two above the number of workers a host usually runs.
pub const TABLE_POOL_SHARDS: usize = 16;

/// Table sets a pool free list keeps at least; it keeps more when its thread has had more
/// transactions in flight at once (up to [`TABLE_POOL_MAX_PER_SHARD`]), since a set the list
/// has no room for is one the next transaction builds again from empty tables
/// (`eval::pool`).
pub const TABLE_POOL_PER_SHARD: usize = 8;

/// Table sets a pool free list keeps at most, however many transactions its thread has had
/// in flight. Bounds the pool's memory at shards x this x one transaction's tables (about
/// 40 KB for a GET, 250 KB for a 10 KB JSON body at CRS PL1, and at most what
/// `clear_for_reuse` lets a set keep); below it, the pool never keeps more sets than were
/// in use at once.
pub const TABLE_POOL_MAX_PER_SHARD: usize = 1024;

/// Shards of the persistent-collection store (`IP`, `GLOBAL`, ...), each with its own lock;
/// a power of two well above the number of workers a host runs.
pub const COLLECTION_STORE_SHARDS: usize = 32;

/// Records one eviction of the collection store looks at before it drops the one in front
/// regardless: bounds the cost of an insert into a full store.
pub const COLLECTION_EVICTION_LOOKS: usize = 8;
