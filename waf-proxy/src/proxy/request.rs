//! Stage 1, `request_filter`: the edge's decision, the virtual host (and SNI agreement),
//! the client address and request id, WAF phase 1, and the body limit on the declared
//! length.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use waf_core::host;
use waf_core::{ConnectionInfo, EngineMode, Verdict};

use super::logging::{fallback_id, Finish, LogPath, Record, ResBody};
use super::ConnCtx;
use crate::edge::{Entry, Reason};
use crate::state::State;

/// A request that passed phase 1, with what the later stages need.
pub(super) struct Admitted {
    pub(super) parts: http::request::Parts,
    pub(super) body: Incoming,
    pub(super) fin: Box<Finish>,
    /// Index of the host in `State::hosts` (the requested name is `fin.rec.host`).
    pub(super) host: usize,
    /// The declared `Content-Length`.
    pub(super) declared: Option<u64>,
    /// A gate endpoint (challenge answer, sign-in): answered by [`super::gate`], not
    /// forwarded.
    pub(super) gate: bool,
}

/// Admits `req`, or answers it (refused by the edge, unknown host, blocked in phase 1,
/// declared body over the limit).
pub(super) fn filter(
    req: Request<Incoming>,
    conn: &ConnCtx,
    state: &Arc<State>,
    started: Instant,
) -> Result<Admitted, Box<Response<ResBody>>> {
    // The edge's decision on this head (HTTP/1 only; one entry per request, in order).
    let edge = match &conn.ledger {
        Some(l) if req.version() != http::Version::HTTP_2 => l.pop(),
        _ => None,
    };
    let raw_target = match edge {
        Some(Entry::Refuse(reason)) => {
            return Err(Box::new(refused(reason, conn, state.clone(), started)))
        }
        Some(Entry::Pass { raw_target }) => raw_target,
        None => None,
    };
    let host_name = request_host(&req).or_else(|| conn.sni.clone());
    let trusted = &state.config.trusted_proxies;
    let trusted_peer = trusted.contains(conn.peer.ip());
    let client_ip = host::client_addr(conn.peer.ip(), req.headers(), trusted);
    let mut rec = Record::blank(started);
    rec.time = SystemTime::now();
    rec.client_ip = client_ip;
    rec.method = req.method().clone();
    rec.path = match &raw_target {
        Some(raw) => LogPath::Raw(raw.clone()),
        None => LogPath::Uri(req.uri().clone()),
    };
    let found = state.find_host(host_name.as_deref());
    // The name moves into the record; the forwarding headers read it from there.
    rec.host = host_name.unwrap_or_default();
    let Some(hi) = found else {
        rec.request_id = fallback_id();
        rec.action = "no_host";
        let mut fin = Finish::new(conn, state.clone(), None, None, rec);
        let resp = fin.error_response(StatusCode::MISDIRECTED_REQUEST, "no such host");
        return Err(Box::new(resp));
    };
    // Over TLS, the Host header must name the same virtual host as SNI: a request must not
    // borrow another host's certificate (domain fronting).
    if let Some(sni) = conn.sni.as_deref() {
        let sni_host = state.find_host(Some(sni));
        if sni_host != Some(hi) {
            rec.request_id = fallback_id();
            rec.action = "no_host";
            let mut fin = Finish::new(conn, state.clone(), sni_host, None, rec);
            let resp = fin.error_response(
                StatusCode::MISDIRECTED_REQUEST,
                "host does not match TLS name",
            );
            return Err(Box::new(resp));
        }
    }
    let host = &state.hosts[hi];

    // WAF phase 1; with the engine off and no native policy there is no transaction at all
    // (its setup and report cost more than the rest of the request path: benches/PROFILE.md).
    // The policy runs in every engine mode, so a host with one always gets a transaction.
    let id_header = &host.options.request_id_header;
    let trusted_id = host::request_id(req.headers(), trusted_peer, id_header);
    let (parts, body) = req.into_parts();
    if host.waf.engine_mode() == EngineMode::Off && !host.waf.has_policy() {
        // No transaction, so no block page: the request's `Accept` is not needed.
        rec.request_id = trusted_id.unwrap_or_else(fallback_id);
        let fin = Finish::new(conn, state.clone(), Some(hi), None, rec);
        return admit(parts, body, fin, hi, host);
    }
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .map(|v| v.as_bytes().to_vec());
    let conn_info = ConnectionInfo::new(SocketAddr::new(client_ip, conn.peer.port()), conn.local)
        .with_tls(conn.https);
    let now = SystemTime::now();
    let mut tx = match trusted_id.as_deref() {
        Some(id) => host.waf.transaction_with_id(&conn_info, now, id),
        None => host.waf.transaction(&conn_info, now),
    };
    rec.request_id = tx.unique_id().to_string();
    let verdict = {
        let hdrs = host::request_headers(&parts);
        let mut head = host::request_head(&parts, &hdrs);
        // The target as the client sent it, when the edge had to rewrite it for hyper.
        if let Some(raw) = &raw_target {
            head.uri = origin_form(raw);
        }
        let t = Instant::now();
        let v = tx.request_headers(&head);
        rec.waf_time += t.elapsed();
        v
    };
    let mut fin = Finish::new(conn, state.clone(), Some(hi), Some(tx), rec);
    fin.accept = accept;
    if let Verdict::Intervene(i) = verdict {
        return Err(Box::new(fin.block(&i)));
    }
    let gate = host.waf.is_gate_path(parts.uri.path().as_bytes());
    let mut a = admit(parts, body, fin, hi, host)?;
    a.gate = gate;
    Ok(a)
}

/// The body limit on the declared length, then the request is admitted.
fn admit(
    parts: http::request::Parts,
    body: Incoming,
    mut fin: Box<Finish>,
    hi: usize,
    host: &crate::state::Host,
) -> Result<Admitted, Box<Response<ResBody>>> {
    // The body limit, on the declared length first.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > host.options.request_body_limit as u64) {
        fin.rec.action = "limit";
        return Err(Box::new(fin.error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large",
        )));
    }
    Ok(Admitted {
        parts,
        body,
        fin,
        host: hi,
        declared,
        gate: false,
    })
}

/// The answer to a request the edge refused: its status, `Connection: close`, a log line
/// with the reason, and the `waf_proxy_refused_total` metric.
pub(super) fn refused(
    reason: Reason,
    conn: &ConnCtx,
    state: Arc<State>,
    started: Instant,
) -> Response<ResBody> {
    conn.shared.metrics.refused(reason.as_str());
    let mut rec = Record::blank(started);
    rec.time = SystemTime::now();
    rec.request_id = fallback_id();
    rec.client_ip = conn.peer.ip();
    rec.action = "refused";
    rec.reason = Some(reason.as_str());
    tracing::debug!(peer = %conn.peer, reason = reason.as_str(), "request refused at the edge");
    let status = StatusCode::from_u16(reason.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut fin = Finish::new(conn, state, None, None, rec);
    let mut resp = fin.error_response(status, "the request is malformed");
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The path of a raw request target (origin or absolute form), without the query.
pub(super) fn raw_path(raw: &[u8]) -> &[u8] {
    let t = origin_form(raw);
    let end = t
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(t.len());
    &t[..end]
}

/// The path and query of a raw request target: absolute form loses its scheme and
/// authority, as `http::Uri::path_and_query` does.
fn origin_form(raw: &[u8]) -> &[u8] {
    if raw.first() == Some(&b'/') {
        return raw;
    }
    let Some(i) = raw.windows(3).position(|w| w == b"://") else {
        return raw;
    };
    match raw[i + 3..].iter().position(|&b| b == b'/' || b == b'?') {
        Some(p) => &raw[i + 3 + p..],
        None => b"/",
    }
}

/// The request's host name: the URI authority (HTTP/2, absolute form), else `Host`;
/// lower-cased, port removed.
fn request_host(req: &Request<Incoming>) -> Option<String> {
    let raw = match req.uri().authority() {
        Some(a) => a.host(),
        None => strip_port(req.headers().get(header::HOST)?.to_str().ok()?),
    };
    // One allocation: the lower-cased copy.
    Some(raw.trim_end_matches('.').to_ascii_lowercase())
}

fn strip_port(h: &str) -> &str {
    if h.starts_with('[') {
        // `[v6]:port`; a bracket never closed is left as it is (and matches no host).
        return h.find(']').map_or(h, |i| &h[..=i]);
    }
    h.rsplit_once(':').map_or(h, |(host, _)| host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_stripped_from_host() {
        assert_eq!(strip_port("example.com:8080"), "example.com");
        assert_eq!(strip_port("example.com"), "example.com");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        // Client input: never a panic.
        for junk in ["[", "[::1", "]", ":", "[]:", "a:b:c", ""] {
            let _ = strip_port(junk);
        }
        assert_eq!(strip_port("["), "[");
    }
}
