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

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::Incoming;
use serde::Serialize;
use waf_core::host;
use waf_core::{
    ConnectionInfo, DisruptiveAction, Intervention, Report, RequestHead, ResponseHead, Transaction,
    Verdict,
};

use crate::client::{client_for, BoxError, ProxyBody};
use crate::edge::{Entry, Ledger, Reason};
use crate::headers;
use crate::log::rfc3339;
use crate::server::Shared;
use crate::state::{Host, State};

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
}

/// The response body type: the upstream's (or a generated) body, followed by logging.
pub struct ResBody {
    inner: ProxyBody,
    fin: Option<Box<Finish>>,
}

/// Everything `logging` needs, carried by the response body until it ends.
struct Finish {
    shared: Arc<Shared>,
    state: Arc<State>,
    host: Option<usize>,
    tx: Option<Transaction>,
    rec: Record,
    inspect_response: bool,
    response_ended: bool,
    /// The request's `Accept`, for the block page's format.
    accept: Option<Vec<u8>>,
    /// `logging` has run (or this is a husk left by `take`).
    done: bool,
    /// The connection is TLS (for HSTS on generated responses).
    https: bool,
}

/// The access log line.
#[derive(Serialize)]
struct Record {
    time: String,
    request_id: String,
    client_ip: IpAddr,
    host: String,
    method: String,
    path: String,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    duration_ms: f64,
    upstream_ms: Option<f64>,
    waf_us: u64,
    action: &'static str,
    rule_ids: Vec<u64>,
    anomaly_score: i64,
    upstream: Option<String>,
    /// Why the edge refused the request (`action` is then `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip)]
    started: Instant,
    #[serde(skip)]
    waf_time: Duration,
    #[serde(skip)]
    upstream_time: Option<Duration>,
}

impl Record {
    fn blank(started: Instant) -> Record {
        Record {
            time: String::new(),
            request_id: String::new(),
            client_ip: IpAddr::from([0, 0, 0, 0]),
            host: String::new(),
            method: String::new(),
            path: String::new(),
            status: 0,
            bytes_in: 0,
            bytes_out: 0,
            duration_ms: 0.0,
            upstream_ms: None,
            waf_us: 0,
            action: "pass",
            rule_ids: Vec::new(),
            anomaly_score: 0,
            upstream: None,
            reason: None,
            started,
            waf_time: Duration::ZERO,
            upstream_time: None,
        }
    }
}

/// Serves one request. Never fails: every error becomes a response.
pub async fn handle(
    req: Request<Incoming>,
    conn: Arc<ConnCtx>,
) -> Result<Response<ResBody>, Infallible> {
    let started = Instant::now();
    let state = conn.shared.state.load_full();
    // The edge's decision on this head (HTTP/1 only; one entry per request, in order).
    let edge = match &conn.ledger {
        Some(l) if req.version() != http::Version::HTTP_2 => l.pop(),
        _ => None,
    };
    let raw_target = match edge {
        Some(Entry::Refuse(reason)) => return Ok(refused(reason, &conn, state, started)),
        Some(Entry::Pass { raw_target }) => raw_target,
        None => None,
    };
    let host_name = request_host(&req).or_else(|| conn.sni.clone());
    let trusted = &state.config.trusted_proxies;
    let trusted_peer = trusted.contains(conn.peer.ip());
    let client_ip = host::client_addr(conn.peer.ip(), req.headers(), trusted);
    let mut rec = Record {
        time: rfc3339(SystemTime::now()),
        request_id: String::new(),
        client_ip,
        host: host_name.clone().unwrap_or_default(),
        method: req.method().as_str().to_string(),
        path: match &raw_target {
            Some(raw) => String::from_utf8_lossy(raw_path(raw)).into_owned(),
            None => req.uri().path().to_string(),
        },
        status: 0,
        bytes_in: 0,
        bytes_out: 0,
        duration_ms: 0.0,
        upstream_ms: None,
        waf_us: 0,
        action: "pass",
        rule_ids: Vec::new(),
        anomaly_score: 0,
        upstream: None,
        reason: None,
        started,
        waf_time: Duration::ZERO,
        upstream_time: None,
    };
    let Some(hi) = state.find_host(host_name.as_deref()) else {
        rec.request_id = fallback_id();
        rec.action = "no_host";
        let mut fin = Finish::new(&conn, state.clone(), None, None, rec);
        let resp = fin.error_response(StatusCode::MISDIRECTED_REQUEST, "no such host");
        return Ok(resp);
    };
    // Over TLS, the Host header must name the same virtual host as SNI: a request must not
    // borrow another host's certificate (domain fronting).
    if let Some(sni) = conn.sni.as_deref() {
        let sni_host = state.find_host(Some(sni));
        if sni_host != Some(hi) {
            rec.request_id = fallback_id();
            rec.action = "no_host";
            let mut fin = Finish::new(&conn, state.clone(), sni_host, None, rec);
            let resp = fin.error_response(
                StatusCode::MISDIRECTED_REQUEST,
                "host does not match TLS name",
            );
            return Ok(resp);
        }
    }
    let host = &state.hosts[hi];

    // request_filter: WAF phase 1.
    let conn_info = ConnectionInfo::new(SocketAddr::new(client_ip, conn.peer.port()), conn.local);
    let now = SystemTime::now();
    let trusted_id = host::request_id(req.headers(), trusted_peer, "x-request-id");
    let mut tx = match trusted_id.as_deref() {
        Some(id) => host.waf.transaction_with_id(&conn_info, now, id),
        None => host.waf.transaction(&conn_info, now),
    };
    rec.request_id = tx.unique_id().to_string();
    let (parts, body) = req.into_parts();
    let verdict = {
        let mut hdrs: Vec<(&[u8], &[u8])> = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        let authority = parts.uri.authority().map(|a| a.as_str());
        if !parts.headers.contains_key(header::HOST) {
            if let Some(a) = authority {
                hdrs.push((b"host", a.as_bytes()));
            }
        }
        // The target as the client sent it, when the edge had to rewrite it for hyper.
        let uri = match &raw_target {
            Some(raw) => origin_form(raw),
            None => parts
                .uri
                .path_and_query()
                .map_or(&b"/"[..], |p| p.as_str().as_bytes()),
        };
        let version = host::http_version(parts.version);
        let t = Instant::now();
        let v = tx.request_headers(&RequestHead::new(
            parts.method.as_str().as_bytes(),
            uri,
            version,
            &hdrs,
        ));
        rec.waf_time += t.elapsed();
        v
    };
    let mut fin = Finish::new(&conn, state.clone(), Some(hi), Some(tx), rec);
    fin.accept = parts
        .headers
        .get(header::ACCEPT)
        .map(|v| v.as_bytes().to_vec());
    if let Verdict::Intervene(i) = verdict {
        return Ok(fin.block(&i));
    }

    // The body limit, on the declared length first.
    let limit = host.config.max_request_body;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        fin.rec.action = "limit";
        return Ok(fin.error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"));
    }

    // request_body_filter.
    let tx = fin
        .tx
        .as_mut()
        .expect("invariant: set above for a known host");
    let (mut up_body, replay): (Option<ProxyBody>, Option<Bytes>) = if body.is_end_stream() {
        let t = Instant::now();
        let v = tx.request_end();
        fin.rec.waf_time += t.elapsed();
        if let Verdict::Intervene(i) = v {
            return Ok(fin.block(&i));
        }
        (None, Some(Bytes::new()))
    } else if tx.wants_request_body() {
        let timeout = state.config.body_read_timeout;
        match read_body(body, limit, timeout, &mut fin).await {
            Ok(bytes) => (None, Some(bytes)),
            Err(resp) => return Ok(*resp),
        }
    } else {
        let t = Instant::now();
        let v = tx.request_end();
        fin.rec.waf_time += t.elapsed();
        if let Verdict::Intervene(i) = v {
            return Ok(fin.block(&i));
        }
        // Streamed: the declared length is what the log can tell.
        fin.rec.bytes_in = declared.unwrap_or(0);
        let limited = Limited::new(body, limit as usize).map_err(BoxError::from);
        (Some(limited.boxed()), None)
    };

    // upstream_peer / upstream_request_filter.
    let upstream = state.upstreams[host.config.upstream].clone();
    let client = client_for(&upstream.config);
    let original_host = host_name.unwrap_or_default();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut base_headers = parts.headers.clone();
    headers::strip_hop_by_hop(&mut base_headers);
    // Framing to the upstream comes from the body we send (hyper sets Content-Length from
    // an exact size, else chunked), never from the client's header: a request that had
    // both Transfer-Encoding and Content-Length (RFC 9112 §6.3: chunked wins) must not
    // reach the upstream with the stale length.
    base_headers.remove(header::CONTENT_LENGTH);
    if !base_headers.contains_key(header::HOST) {
        if let Some(a) = parts.uri.authority() {
            if let Ok(v) = HeaderValue::from_str(a.as_str()) {
                base_headers.insert(header::HOST, v);
            }
        }
    }
    headers::set_forwarding(
        &mut base_headers,
        &host.config,
        conn.peer.ip(),
        trusted_peer,
        conn.https,
        &original_host,
    );
    if let Ok(v) = HeaderValue::from_str(&fin.rec.request_id) {
        base_headers.insert("x-request-id", v);
    }
    let order: Vec<usize> = upstream.pick_order().collect();
    let mut last_failure = (StatusCode::BAD_GATEWAY, "upstream unavailable");
    let up_started = Instant::now();
    for (attempt, &si) in order.iter().enumerate() {
        let server = &upstream.servers[si];
        let body = match (up_body.take(), &replay) {
            (Some(b), _) => b,
            (None, Some(bytes)) if bytes.is_empty() => Empty::new().map_err(|e| match e {}).boxed(),
            (None, Some(bytes)) => Full::new(bytes.clone()).map_err(|e| match e {}).boxed(),
            (None, None) => break, // a streamed body cannot be sent twice
        };
        let uri = match http::Uri::builder()
            .scheme("http")
            .authority(server.authority.clone())
            .path_and_query(path.as_str())
            .build()
        {
            Ok(u) => u,
            Err(_) => break,
        };
        let mut up_req = Request::new(body);
        *up_req.method_mut() = parts.method.clone();
        *up_req.uri_mut() = uri;
        // The last attempt takes the headers; earlier ones (a retry may follow) copy them.
        *up_req.headers_mut() = if attempt + 1 == order.len() {
            std::mem::take(&mut base_headers)
        } else {
            base_headers.clone()
        };
        fin.rec.upstream = Some(server.authority.to_string());
        let result =
            tokio::time::timeout(upstream.config.read_timeout, client.request(up_req)).await;
        match result {
            Ok(Ok(resp)) => {
                let d = up_started.elapsed();
                fin.rec.upstream_time = Some(d);
                let timeout = upstream.config.read_timeout;
                return Ok(response_filter(resp, fin, host, &conn, timeout).await);
            }
            Ok(Err(e)) if e.is_connect() => {
                tracing::warn!(server = %server.authority, error = %e, "upstream connect failed; server marked down");
                fin.shared
                    .metrics
                    .upstream_error(server.authority.as_str(), "connect");
                upstream.mark_down(si);
                last_failure = (StatusCode::BAD_GATEWAY, "upstream unavailable");
                let _ = attempt;
                continue;
            }
            Ok(Err(e)) => {
                if is_length_limit(&e) {
                    fin.rec.action = "limit";
                    return Ok(
                        fin.error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")
                    );
                }
                tracing::warn!(server = %server.authority, error = %e, "upstream request failed");
                fin.shared
                    .metrics
                    .upstream_error(server.authority.as_str(), "error");
                last_failure = (StatusCode::BAD_GATEWAY, "upstream error");
                break;
            }
            Err(_) => {
                tracing::warn!(server = %server.authority, "upstream response timeout");
                fin.shared
                    .metrics
                    .upstream_error(server.authority.as_str(), "timeout");
                last_failure = (StatusCode::GATEWAY_TIMEOUT, "upstream timeout");
                break;
            }
        }
    }
    fin.rec.upstream_time = Some(up_started.elapsed());
    fin.rec.action = "error";
    Ok(fin.error_response(last_failure.0, last_failure.1))
}

/// The answer to a request the edge refused: its status, `Connection: close`, a log line
/// with the reason, and the `waf_proxy_refused_total` metric.
fn refused(
    reason: Reason,
    conn: &ConnCtx,
    state: Arc<State>,
    started: Instant,
) -> Response<ResBody> {
    conn.shared.metrics.refused(reason.as_str());
    let mut rec = Record::blank(started);
    rec.time = rfc3339(SystemTime::now());
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
fn raw_path(raw: &[u8]) -> &[u8] {
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

/// Buffers the request body for the WAF, up to `limit` bytes.
async fn read_body(
    mut body: Incoming,
    limit: u64,
    timeout: Duration,
    fin: &mut Finish,
) -> Result<Bytes, Box<Response<ResBody>>> {
    let mut buf = BytesMut::new();
    loop {
        let Ok(frame) = tokio::time::timeout(timeout, body.frame()).await else {
            fin.rec.action = "client_timeout";
            return Err(Box::new(fin.error_response(
                StatusCode::REQUEST_TIMEOUT,
                "request body too slow",
            )));
        };
        match frame {
            None => break,
            Some(Err(_)) => {
                fin.rec.action = "client_error";
                return Err(Box::new(
                    fin.error_response(StatusCode::BAD_REQUEST, "bad request body"),
                ));
            }
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if (buf.len() + data.len()) as u64 > limit {
                    fin.rec.action = "limit";
                    return Err(Box::new(fin.error_response(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "request body too large",
                    )));
                }
                let tx = fin
                    .tx
                    .as_mut()
                    .expect("invariant: read_body runs with a transaction");
                let t = Instant::now();
                let v = tx.request_body(&data);
                fin.rec.waf_time += t.elapsed();
                if let Verdict::Intervene(i) = v {
                    return Err(Box::new(fin.block(&i)));
                }
                buf.extend_from_slice(&data);
            }
        }
    }
    fin.rec.bytes_in = buf.len() as u64;
    let tx = fin
        .tx
        .as_mut()
        .expect("invariant: read_body runs with a transaction");
    let t = Instant::now();
    let v = tx.request_end();
    fin.rec.waf_time += t.elapsed();
    if let Verdict::Intervene(i) = v {
        return Err(Box::new(fin.block(&i)));
    }
    Ok(buf.freeze())
}

/// WAF phase 3, the response headers, and (when phase 4 can block) holding the body.
async fn response_filter(
    resp: Response<Incoming>,
    mut fin: Finish,
    host: &Host,
    conn: &ConnCtx,
    read_timeout: Duration,
) -> Response<ResBody> {
    let (mut parts, body) = resp.into_parts();
    let tx = fin
        .tx
        .as_mut()
        .expect("invariant: response_filter runs with a transaction");
    let verdict = {
        let hdrs: Vec<(&[u8], &[u8])> = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        let t = Instant::now();
        let v = tx.response_headers(&ResponseHead::new(
            parts.status.as_u16(),
            b"HTTP/1.1",
            &hdrs,
        ));
        fin.rec.waf_time += t.elapsed();
        v
    };
    if let Verdict::Intervene(i) = verdict {
        return fin.block(&i);
    }
    fin.inspect_response = tx.wants_response_body();
    headers::strip_hop_by_hop(&mut parts.headers);
    add_host_headers(&mut parts.headers, host, conn.https);
    headers::harden_cookies(&mut parts.headers, &host.config, conn.https);
    if let Ok(v) = HeaderValue::from_str(&fin.rec.request_id) {
        parts.headers.insert("x-request-id", v);
    }
    fin.rec.status = parts.status.as_u16();
    let mut body = body.map_err(BoxError::from).boxed();
    if fin.inspect_response && host.hold_responses {
        let limit = host.config.max_response_buffer;
        match hold(body, limit, read_timeout).await {
            Held::Whole(bytes) => {
                let tx = fin
                    .tx
                    .as_mut()
                    .expect("invariant: response_filter runs with a transaction");
                let t = Instant::now();
                let mut v = tx.response_body(&bytes);
                if matches!(v, Verdict::Continue) {
                    v = tx.response_end();
                }
                fin.rec.waf_time += t.elapsed();
                if let Verdict::Intervene(i) = v {
                    return fin.block(&i);
                }
                fin.response_ended = true;
                fin.inspect_response = false;
                return Response::from_parts(
                    parts,
                    ResBody {
                        inner: Full::new(bytes).map_err(|e| match e {}).boxed(),
                        fin: Some(Box::new(fin)),
                    },
                );
            }
            Held::Partial(prefix, rest) => {
                // Over the limit: what was held goes first, the rest streams; phase 4
                // inspects it all as it goes, and can only log.
                body = Prefixed {
                    prefix: Some(prefix),
                    rest,
                }
                .boxed();
            }
            Held::Failed(status, what) => {
                fin.rec.action = "error";
                return fin.error_response(status, what);
            }
        }
    }
    Response::from_parts(
        parts,
        ResBody {
            inner: body,
            fin: Some(Box::new(fin)),
        },
    )
}

/// A response body read for phase 4.
enum Held {
    /// All of it, within the limit.
    Whole(Bytes),
    /// The first bytes (over the limit with the next frame), and the rest of the body.
    Partial(Bytes, ProxyBody),
    /// The upstream failed or stalled mid-body.
    Failed(StatusCode, &'static str),
}

/// Reads `body` until its end or past `limit` bytes, each frame within `timeout`. Trailers
/// of a body read whole are dropped.
async fn hold(mut body: ProxyBody, limit: u64, timeout: Duration) -> Held {
    let mut buf = BytesMut::new();
    loop {
        if body.is_end_stream() {
            return Held::Whole(buf.freeze());
        }
        let Ok(frame) = tokio::time::timeout(timeout, body.frame()).await else {
            return Held::Failed(StatusCode::GATEWAY_TIMEOUT, "upstream response too slow");
        };
        match frame {
            None => return Held::Whole(buf.freeze()),
            Some(Err(_)) => return Held::Failed(StatusCode::BAD_GATEWAY, "upstream error"),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                buf.extend_from_slice(&data);
                if buf.len() as u64 > limit {
                    return Held::Partial(buf.freeze(), body);
                }
            }
        }
    }
}

/// A body that starts with bytes already read.
struct Prefixed {
    prefix: Option<Bytes>,
    rest: ProxyBody,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(p) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.rest.size_hint();
        let n = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let mut h = SizeHint::new();
        if let Some(u) = rest.upper() {
            h.set_upper(u.saturating_add(n));
        }
        h.set_lower(rest.lower().saturating_add(n));
        h
    }
}

fn add_host_headers(h: &mut http::HeaderMap, host: &Host, https: bool) {
    for (n, v) in &host.security_headers {
        if !h.contains_key(n) {
            h.insert(n.clone(), v.clone());
        }
    }
    if https {
        if let Some(v) = &host.hsts {
            h.insert(header::STRICT_TRANSPORT_SECURITY, v.clone());
        }
    }
}

impl Finish {
    fn new(
        conn: &ConnCtx,
        state: Arc<State>,
        host: Option<usize>,
        tx: Option<Transaction>,
        rec: Record,
    ) -> Finish {
        Finish {
            shared: conn.shared.clone(),
            state,
            host,
            tx,
            rec,
            inspect_response: false,
            response_ended: false,
            accept: None,
            done: false,
            https: conn.https,
        }
    }

    /// A response the proxy makes itself (block page, limit, upstream failure).
    fn generated(
        mut self,
        status: StatusCode,
        mut headers: http::HeaderMap,
        body: String,
    ) -> Response<ResBody> {
        self.rec.status = status.as_u16();
        self.response_ended = true;
        if let Some(hi) = self.host {
            let state = self.state.clone();
            add_host_headers(&mut headers, &state.hosts[hi], self.https);
        }
        // The page's own type wins: a JSON block page is sent as JSON. Only pages made
        // here without one (error pages, which are HTML) get the HTML type.
        headers
            .entry(header::CONTENT_TYPE)
            .or_insert(HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Ok(v) = HeaderValue::from_str(&self.rec.request_id) {
            headers.insert("x-request-id", v);
        }
        let mut resp = Response::new(ResBody {
            inner: Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed(),
            fin: Some(Box::new(self)),
        });
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        resp
    }

    fn error_response(&mut self, status: StatusCode, what: &str) -> Response<ResBody> {
        let body = page(status, what, &self.rec.request_id);
        let fin = self.take();
        fin.generated(status, http::HeaderMap::new(), body)
    }

    /// The answer to an intervention: `waf_core::host`'s block page (HTML or JSON by
    /// `Accept`, naming the request id and nothing an attacker could use).
    fn block(&mut self, i: &Intervention) -> Response<ResBody> {
        self.rec.action = "block";
        let page = host::block_response(i, &self.rec.request_id, self.accept.as_deref());
        let mut headers = http::HeaderMap::new();
        if let Some(v) = page
            .location
            .as_deref()
            .and_then(|l| HeaderValue::from_str(l).ok())
        {
            headers.insert(header::LOCATION, v);
        }
        if matches!(i.action, DisruptiveAction::Drop) {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(page.content_type),
        );
        let fin = self.take();
        fin.generated(page.status, headers, page.body)
    }

    fn take(&mut self) -> Finish {
        let started = self.rec.started;
        self.done = true;
        Finish {
            shared: self.shared.clone(),
            state: self.state.clone(),
            host: self.host,
            tx: self.tx.take(),
            rec: std::mem::replace(&mut self.rec, Record::blank(started)),
            inspect_response: false,
            response_ended: self.response_ended,
            accept: self.accept.take(),
            done: false,
            https: self.https,
        }
    }

    /// `logging`: runs once per request, from `Drop`, so also when the client goes away
    /// before the response (status 499, as nginx logs it).
    fn complete(&mut self) {
        self.done = true;
        let mut report: Option<Report> = None;
        if let Some(mut tx) = self.tx.take() {
            if !self.response_ended {
                let t = Instant::now();
                // The response has gone out: an intervention now can only be logged
                // (action `detect`).
                if let Verdict::Intervene(_) = tx.response_end() {
                    if self.rec.action == "pass" {
                        self.rec.action = "detect";
                    }
                }
                self.rec.waf_time += t.elapsed();
            }
            let t = Instant::now();
            report = Some(tx.finish());
            self.rec.waf_time += t.elapsed();
        }
        let rec = &mut self.rec;
        if rec.status == 0 {
            rec.status = 499;
            if rec.action == "pass" {
                rec.action = "client_abort";
            }
        }
        let elapsed = rec.started.elapsed();
        rec.duration_ms = elapsed.as_secs_f64() * 1e3;
        rec.upstream_ms = rec.upstream_time.map(|d| d.as_secs_f64() * 1e3);
        rec.waf_us = rec.waf_time.as_micros() as u64;
        if let Some(r) = &report {
            rec.rule_ids = r.matched_rules.iter().map(|m| m.id).collect();
            rec.anomaly_score = r.inbound_anomaly_score;
            if rec.action == "pass" && r.would_intervene.is_some() {
                rec.action = "detect";
            }
        }
        let m = &self.shared.metrics;
        // Metrics are labelled by the configured host (bounded), logs by the requested name.
        let label = self
            .host
            .map_or("-", |i| self.state.hosts[i].label.as_str());
        m.request(label, rec.status, rec.action);
        m.latency.observe(elapsed);
        m.waf_time.observe(rec.waf_time);
        if let Some(d) = rec.upstream_time {
            m.upstream_time.observe(d);
        }
        if let Some(r) = &report {
            if !r.matched_rules.is_empty() {
                m.rule_hits(r.matched_rules.iter().map(|x| x.id));
            }
        }
        if self.shared.access_log.enabled() {
            if let Ok(line) = serde_json::to_vec(&*rec) {
                self.shared.access_log.send(line);
            }
        }
        if let Some(r) = &report {
            if self.shared.audit_log.enabled() && !r.matched_rules.is_empty() {
                if let Ok(line) = serde_json::to_vec(&audit_record(rec, r)) {
                    self.shared.audit_log.send(line);
                }
            }
        }
    }
}

fn audit_record<'a>(rec: &'a Record, r: &'a Report) -> serde_json::Value {
    let rules: Vec<serde_json::Value> = r
        .matched_rules
        .iter()
        .map(|m| {
            serde_json::json!({
                "id": m.id,
                "phase": m.phase,
                "message": m.message,
                "data": m.data,
                "severity": m.severity.map(|s| s.name()),
                "tags": m.tags,
                "matched_var": m.matched_var_name,
                "matched_data": m.matched_data,
                "disruptive": m.disruptive,
                "file": m.file,
                "line": m.line,
            })
        })
        .collect();
    serde_json::json!({
        "time": rec.time,
        "request_id": rec.request_id,
        "client_ip": rec.client_ip,
        "host": rec.host,
        "method": rec.method,
        "path": rec.path,
        "status": rec.status,
        "action": rec.action,
        "inbound_anomaly_score": r.inbound_anomaly_score,
        "outbound_anomaly_score": r.outbound_anomaly_score,
        "intervention": r.intervention.as_ref().map(|i| serde_json::json!({"status": i.status, "rule_id": i.rule_id, "message": i.message})),
        "would_intervene": r.would_intervene.as_ref().map(|i| serde_json::json!({"status": i.status, "rule_id": i.rule_id, "message": i.message})),
        "rules": rules,
    })
}

impl Body for ResBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(fin), Some(d)) = (this.fin.as_mut(), frame.data_ref()) {
                    fin.rec.bytes_out += d.len() as u64;
                    if fin.inspect_response {
                        if let Some(tx) = fin.tx.as_mut() {
                            let t = Instant::now();
                            let _ = tx.response_body(d);
                            fin.rec.waf_time += t.elapsed();
                        }
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.fin = None; // logging, from Finish's Drop
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.fin = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.done {
            self.complete();
        }
    }
}

impl std::fmt::Debug for ResBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResBody")
    }
}

/// The request's host name: the URI authority (HTTP/2, absolute form), else `Host`;
/// lower-cased, port removed.
fn request_host(req: &Request<Incoming>) -> Option<String> {
    let raw = match req.uri().authority() {
        Some(a) => a.host().to_string(),
        None => {
            let h = req.headers().get(header::HOST)?.to_str().ok()?;
            strip_port(h).to_string()
        }
    };
    Some(raw.trim_end_matches('.').to_ascii_lowercase())
}

fn strip_port(h: &str) -> &str {
    if h.starts_with('[') {
        // `[v6]:port`; a bracket never closed is left as it is (and matches no host).
        return h.find(']').map_or(h, |i| &h[..=i]);
    }
    h.rsplit_once(':').map_or(h, |(host, _)| host)
}

fn fallback_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    format!("{t:x}-{:x}", N.fetch_add(1, Ordering::Relaxed))
}

fn is_length_limit(e: &hyper_util::client::legacy::Error) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        src = s.source();
    }
    false
}

/// The HTML page of a generated response.
fn page(status: StatusCode, what: &str, request_id: &str) -> String {
    let code = status.as_u16();
    let reason = status.canonical_reason().unwrap_or("");
    format!(
        "<!doctype html>\n<html><head><title>{code} {reason}</title></head>\
         <body><h1>{code} {reason}</h1><p>{what}.</p>\
         <p>Request id: <code>{request_id}</code></p></body></html>\n"
    )
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
