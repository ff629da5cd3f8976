//! The request path, in the phases of pingora's `ProxyHttp` (STYLE 26):
//!
//! 1. `request_filter`: find the host, the client address and the request id; WAF phase 1;
//!    the body-size limit on `Content-Length`.
//! 2. `request_body_filter`: when the WAF wants the body, buffer it up to the host's limit
//!    (413 past it) and run WAF phase 2 *before* anything goes upstream; otherwise stream
//!    it through, still bounded by the limit.
//! 3. `upstream_peer` / `upstream_request_filter`: round robin over healthy servers,
//!    forwarding headers, hop-by-hop headers stripped. A server that refuses connections is
//!    skipped for `fail_timeout` and, when the body can be replayed, the next one is tried.
//!    No response head within `read_timeout` gives 504, any other failure 502; both carry
//!    the request id.
//! 4. `response_filter`: WAF phase 3 (may replace the response), security headers, cookie
//!    rule, hop-by-hop headers stripped.
//! 5. `response_body_filter`: when the host's rules can block in phase 4
//!    ([`waf_core::Waf::response_body_can_intervene`]) and the WAF inspects this response's
//!    type (`SecResponseBodyMimeType`), the body is held up to the host's
//!    `max_response_buffer` (1 MiB by default), phase 4 runs, and an intervention replaces
//!    the whole response. A longer body is sent as it comes (what was held first) and phase
//!    4, run at its end, can only log. Every other response streams through unbuffered;
//!    when the WAF wants it, each chunk is shown to it as it passes.
//! 6. `logging`: always runs, when the response body ends or is dropped: the access line,
//!    the audit record, metrics.
//!
//! One module per stage: [`request`] (1), [`body`] (2), [`upstream`] (3), [`response`] (4
//! and 5), [`logging`] (6, and the responses the proxy makes itself).

mod body;
mod gate;
pub mod h1;
mod logging;
mod request;
mod response;
mod upstream;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::edge::Ledger;
use crate::headers::PeerText;
use crate::server::Shared;

pub use logging::ResBody;

/// What the proxy knows about one downstream connection.
#[derive(Debug)]
pub struct ConnCtx {
    /// Process-wide state.
    pub shared: Arc<Shared>,
    /// The peer's address.
    pub peer: SocketAddr,
    /// Our address.
    pub local: SocketAddr,
    /// Whether the connection is TLS.
    pub https: bool,
    /// The TLS SNI name, lower-cased.
    pub sni: Option<String>,
    /// The edge's decisions on this connection's HTTP/1 request heads (`None` for HTTP/2).
    pub ledger: Option<Arc<Ledger>>,
    /// The peer's address as the forwarding headers write it (formatted once).
    pub peer_text: PeerText,
}

/// Serves one request. Never fails: every error becomes a response.
pub async fn handle(
    req: Request<Incoming>,
    conn: Arc<ConnCtx>,
) -> Result<Response<ResBody>, Infallible> {
    // An HTTP/1 `Upgrade` request answered with anything but 101 ends its connection: the
    // edge stopped checking this connection's bytes after its head.
    let upgrade = req.version() != http::Version::HTTP_2
        && crate::headers::upgrade_of(req.headers()).is_some();
    let mut resp = serve(req, conn).await;
    if upgrade && resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    Ok(resp)
}

async fn serve(req: Request<Incoming>, conn: Arc<ConnCtx>) -> Response<ResBody> {
    let started = Instant::now();
    let state = conn.shared.state.load_full();
    let admitted = match request::filter(req, &conn, &state, started) {
        Ok(a) => a,
        Err(resp) => return *resp,
    };
    if admitted.gate {
        return gate::serve(admitted, &conn, &state).await;
    }
    let request::Admitted {
        parts,
        body,
        mut fin,
        host,
        declared,
        ..
    } = admitted;
    let host = &state.hosts[host];
    let sent = match body::filter(body, host, &state, declared, &mut fin).await {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    upstream::forward(parts, sent, fin, host, &state, &conn).await
}
