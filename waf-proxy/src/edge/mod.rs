//! The HTTP/1 edge: what the proxy refuses before the WAF, and why, decided here on the
//! raw bytes rather than left to whatever the HTTP library happens to do.
//!
//! hyper (through `httparse` and the `http` crate) would answer some requests nginx serves
//! with an empty 400 and no log line: a request target with `"`, `<`, `>` or a backtick,
//! or bytes 0x80-0xFF that are not UTF-8 (Latin-1 or GBK queries from older clients). And
//! it serves some that smuggling needs: `Transfer-Encoding` beside `Content-Length`. So
//! [`stream::Guarded`] reads each request head first and [`head::check`] decides:
//!
//! - request-target bytes nginx accepts are accepted: the WAF inspects the target as sent,
//!   and the upstream gets it with those bytes percent-encoded (the same URI, RFC 3986
//!   §2.1);
//! - framing in doubt (TE with CL, duplicate or invalid CL, TE in HTTP/1.0) is 400, an
//!   unknown transfer coding 501, obs-fold and invalid header bytes 400, a head over the
//!   limits 431 (414 for the request line); the connection is then closed.
//!
//! Every refusal is answered by the request handler (so it gets the request id, a JSON
//! access-log line with its `reason`, and `waf_proxy_refused_total{reason}`), through the
//! connection's [`Ledger`]. The README's "HTTP edge cases" table lists each case.
//!
//! HTTP/2 (ALPN `h2`, or the prior-knowledge preface) is not checked here: its framing has
//! no such ambiguity, and hyper's h2 answers malformed requests itself.

pub mod head;
pub mod stream;

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;

pub use head::{HeadLimits, Reason};

/// Default longest request head, in bytes (nginx: 4 large header buffers of 8 KiB).
pub const DEFAULT_MAX_REQUEST_HEAD: usize = 32 * 1024;
/// Default longest request line, in bytes (nginx: one large header buffer).
pub const DEFAULT_MAX_REQUEST_LINE: usize = 8 * 1024;
/// Default most header fields in a request (hyper's own limit is 100 too).
pub const DEFAULT_MAX_HEADERS: usize = 100;

/// What the edge decided on one request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Served; `raw_target` is the request target as sent when hyper got a rewritten one.
    Pass {
        /// The target as the client sent it, when it differs from what hyper parsed.
        raw_target: Option<Bytes>,
    },
    /// Refused; hyper gets a placeholder request in its place.
    Refuse(Reason),
}

/// The decisions on one connection's request heads, in order: pushed by the connection
/// wrapper, taken by the request handler.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Mutex<VecDeque<Entry>>,
}

impl Ledger {
    /// Adds the decision on the next head.
    pub fn push(&self, e: Entry) {
        if let Ok(mut q) = self.entries.lock() {
            q.push_back(e);
        }
    }

    /// The decision on the oldest head not yet served.
    pub fn pop(&self) -> Option<Entry> {
        self.entries.lock().ok()?.pop_front()
    }
}
