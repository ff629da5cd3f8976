//! [`Transaction`]: one request/response pair, driven phase by phase.

use std::net::SocketAddr;
use std::time::SystemTime;

use crate::eval::TxState;
use crate::report::Report;
use crate::verdict::Verdict;
use crate::waf::Waf;

/// The connection a request arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The client (`REMOTE_ADDR`, `REMOTE_PORT`): the peer, or the address a trusted proxy
    /// reported.
    pub client: SocketAddr,
    /// The local address (`SERVER_ADDR`, `SERVER_PORT`).
    pub server: SocketAddr,
    /// Whether the request arrived over TLS (`http.request.scheme` in policy rules).
    pub tls: bool,
}

impl ConnectionInfo {
    /// Client and server addresses (plain HTTP; see [`ConnectionInfo::with_tls`]).
    pub fn new(client: SocketAddr, server: SocketAddr) -> ConnectionInfo {
        ConnectionInfo {
            client,
            server,
            tls: false,
        }
    }

    /// The same connection, marked as TLS (or not).
    pub fn with_tls(mut self, tls: bool) -> ConnectionInfo {
        self.tls = tls;
        self
    }
}

/// The request line and headers, as bytes: attackers send invalid UTF-8 and malformed
/// methods, and the engine must see them as sent.
#[derive(Clone, Copy, Debug)]
pub struct RequestHead<'a> {
    /// `GET`, or whatever was sent.
    pub method: &'a [u8],
    /// The request target as sent (`/path?query`), not decoded.
    pub uri: &'a [u8],
    /// `HTTP/1.1`, `HTTP/2.0`, or whatever was sent.
    pub version: &'a [u8],
    /// Header fields in order, names as sent.
    pub headers: &'a [(&'a [u8], &'a [u8])],
}

impl<'a> RequestHead<'a> {
    /// A request head from its parts.
    pub fn new(
        method: &'a [u8],
        uri: &'a [u8],
        version: &'a [u8],
        headers: &'a [(&'a [u8], &'a [u8])],
    ) -> Self {
        RequestHead {
            method,
            uri,
            version,
            headers,
        }
    }
}

/// The status line and headers of a response.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    /// Status code.
    pub status: u16,
    /// `HTTP/1.1` and so on.
    pub version: &'a [u8],
    /// Header fields in order.
    pub headers: &'a [(&'a [u8], &'a [u8])],
}

impl<'a> ResponseHead<'a> {
    /// A response head from its parts.
    pub fn new(status: u16, version: &'a [u8], headers: &'a [(&'a [u8], &'a [u8])]) -> Self {
        ResponseHead {
            status,
            version,
            headers,
        }
    }
}

/// One HTTP transaction under inspection.
///
/// Call the phase methods in this order, skipping none that apply; each returns a
/// [`Verdict`]. After an intervention, the host answers as told and calls
/// [`Transaction::finish`]; later phase calls return the same intervention again.
///
/// 1. [`request_headers`](Self::request_headers): phase 1.
/// 2. If [`wants_request_body`](Self::wants_request_body): [`request_body`](Self::request_body)
///    for each chunk; then always [`request_end`](Self::request_end): phase 2.
/// 3. [`response_headers`](Self::response_headers): phase 3.
/// 4. If [`wants_response_body`](Self::wants_response_body): [`response_body`](Self::response_body)
///    for each chunk; then always [`response_end`](Self::response_end): phase 4.
/// 5. [`finish`](Self::finish): phase 5 (logging), and the [`Report`].
#[derive(Debug)]
pub struct Transaction {
    state: TxState,
}

impl Transaction {
    pub(crate) fn new(
        waf: Waf,
        conn: &ConnectionInfo,
        now: SystemTime,
        id: Option<&str>,
    ) -> Transaction {
        Transaction {
            state: TxState::new(waf, conn, now, id),
        }
    }

    /// The transaction's unique id (`UNIQUE_ID`), also in [`Report::unique_id`]: put it in
    /// block pages and logs.
    pub fn unique_id(&self) -> &str {
        self.state.unique_id()
    }

    /// Phase 1: the request line and headers. The native policy ([`crate::policy`]) runs
    /// first, then the SecLang phase 1 rules.
    pub fn request_headers(&mut self, head: &RequestHead<'_>) -> Verdict {
        self.state.request_headers(head)
    }

    /// What the native policy asks of the host besides the verdict: request headers to
    /// set or remove before forwarding, headers for the answer (`Retry-After`), a block
    /// page. Read it after [`request_headers`](Self::request_headers).
    pub fn policy_effects(&self) -> &crate::policy::PolicyEffects {
        self.state.policy_effects()
    }

    /// Whether the engine inspects the request body (`SecRequestBodyAccess On` and the
    /// engine not off). When false, stream the body through and call
    /// [`request_end`](Self::request_end) with no chunk.
    pub fn wants_request_body(&self) -> bool {
        self.state.wants_request_body()
    }

    /// A chunk of the request body. Buffered up to the body limit; past it the verdict is a
    /// 403 intervention (as libmodsecurity 3) (`SecRequestBodyLimitAction Reject`) or the rest is ignored
    /// (`ProcessPartial`).
    pub fn request_body(&mut self, chunk: &[u8]) -> Verdict {
        self.state.request_body(chunk)
    }

    /// Phase 2: the request body is complete (or absent).
    pub fn request_end(&mut self) -> Verdict {
        self.state.request_end()
    }

    /// Phase 3: the response status line and headers.
    pub fn response_headers(&mut self, head: &ResponseHead<'_>) -> Verdict {
        self.state.response_headers(head)
    }

    /// Whether the engine inspects the response body (`SecResponseBodyAccess On` and the
    /// response's MIME type in `SecResponseBodyMimeType`).
    pub fn wants_response_body(&self) -> bool {
        self.state.wants_response_body()
    }

    /// A chunk of the response body, buffered up to the response body limit.
    pub fn response_body(&mut self, chunk: &[u8]) -> Verdict {
        self.state.response_body(chunk)
    }

    /// Phase 4: the response body is complete (or absent).
    pub fn response_end(&mut self) -> Verdict {
        self.state.response_end()
    }

    /// Test and training-data hook (`ml` feature): every value the ML detector looks at,
    /// as `(name, bytes, score)`, trivially benign ones with score 0; call it after
    /// [`request_end`](Self::request_end). Slow; not a stable API.
    #[cfg(feature = "ml")]
    #[doc(hidden)]
    pub fn internal_ml_values(&self) -> Vec<(String, Vec<u8>, f32)> {
        self.state.ml_values()
    }

    /// Phase 5 (logging), then the report of the whole transaction.
    pub fn finish(self) -> Report {
        self.state.finish()
    }
}
