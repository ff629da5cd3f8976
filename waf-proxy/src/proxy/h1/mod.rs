//! The plain HTTP/1 path: keep-alive requests served by our own HTTP/1 handling instead of
//! hyper's, from the bytes the edge has already checked.
//!
//! The edge's [`check_spans`] has parsed and judged each request head; the upstream request
//! is written straight from those bytes (hop-by-hop fields dropped, forwarding fields and
//! the request id added, the framing ours), its response head parsed once (`httparse`) and
//! written on with the host's response fields. hyper's server parse, its `HeaderMap`s on both
//! sides, its client connection task and its body channels are not on this path
//! (benches/PROFILE.md, "Seventh session" and "Eighth session").
//!
//! What it serves, per request: HTTP/1.1 in origin form to a host with no native policy
//! (the WAF on or off), from a peer that is not a trusted proxy, to plain (not TLS)
//! upstream servers; bodies framed by `Content-Length` (within the host's limit) or chunked
//! (counted against it), `Expect: 100-continue` (answered here, not passed on), pipelined
//! requests (served in order). Everything else is handed over, with the bytes read so far,
//! to the hyper path behind the edge's [`Guarded`](crate::edge::stream::Guarded), which
//! serves the rest of the connection exactly as before: a head the edge refuses (so its
//! answer, log line and metric are the hyper path's), HTTP/1.0, `Upgrade`, absolute-form or
//! rewritten targets, unknown hosts, hosts with a policy, trusted peers (their forwarding
//! fields and request ids are read by `waf_core::host` from a header map there), TLS
//! upstreams, other `Expect` values, a head over the limit, and, for a host with the WAF
//! off, a declared body over the limit. The first request of a connection may also be the
//! HTTP/2 prior-knowledge preface: handed over too.
//!
//! With the WAF on, the phases run in the hyper path's order ([`super`]'s docs): phase 1 on
//! the head as the client sent it, then the declared length against the limit (413); when
//! the WAF wants the body, it is read whole within the limit (chunked decoded) and phase 2
//! runs before anything goes upstream, else phase 2 runs at once and the body streams;
//! phase 3 on the upstream's head; phase 4 holds the body up to the host's
//! `max_response_buffer` when its rules can block there and the type is inspected (an
//! intervention replaces the whole response; a longer body goes on as it comes, phase 4
//! logging only), else each piece is shown to it as it passes. A block page is
//! `waf_core`'s, through the same [`Finish`] as the hyper path's (its content type, the
//! log line, the metrics); the connection stays open after it when the request's body was
//! read whole, and ends otherwise (its framing would be in doubt) or on a `drop` action.
//!
//! Decided on purpose, and differing from the hyper path only in form: field names go
//! upstream and downstream, and to the WAF, as they were written (hyper lower-cases them;
//! ModSecurity and the nginx module see them as sent too); chunk extensions and trailers
//! are dropped in both directions (the next hop is framed by us); a response without
//! framing is sent on chunked; a response head without `Date` gets one (RFC 9110 §6.6.1),
//! as hyper adds it.

mod wire;

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Buf, Bytes, BytesMut};
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use waf_core::{ConnectionInfo, EngineMode, Intervention, RequestHead, Verdict};

use super::logging::{fallback_id, Finish, LogPath, Record, ResBody};
use super::ConnCtx;
use crate::client;
use crate::edge::head::{check_spans, Checked, Framing, HeadLimits, Spans};
use crate::edge::stream::head_end;
use crate::state::{Host, State};
use wire::{Chunked, Name, ResponseHead};

/// Bytes read from a socket at once.
const READ_SIZE: usize = 16 * 1024;

/// Longest upstream response head read.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// What [`serve`] ended with.
#[derive(Debug)]
pub enum Outcome {
    /// The connection is done (closed by either side, timed out, or an answer that ends it).
    Closed,
    /// The request starting `read` is not for this path: serve the connection from there on
    /// with the hyper path. `first`: it is the connection's first request.
    HandOver {
        /// Bytes read from the client and not served, from the start of a request head.
        read: BytesMut,
        /// No request was served on this path before.
        first: bool,
    },
}

/// One connection's buffers, kept across its requests.
struct Conn {
    /// Read from the client, not yet served.
    buf: BytesMut,
    /// The edge's parse of the current head.
    spans: Spans,
    /// The message being written (upstream request head, then the response head).
    out: Vec<u8>,
    /// Read from the upstream.
    ubuf: BytesMut,
    /// The upstream's response head.
    resp: ResponseHead,
    /// A body held for the WAF, decoded (a chunked request body, a response body).
    held: Vec<u8>,
}

/// Serves the requests of a plain HTTP/1 connection while they are for this path (see the
/// module docs). `stop` turns true when the process drains: the connection then ends after
/// its current request, and at once when idle.
pub async fn serve(
    conn: &Arc<ConnCtx>,
    client: &mut TcpStream,
    limits: HeadLimits,
    header_timeout: Duration,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Outcome {
    let mut c = Conn {
        buf: BytesMut::with_capacity(READ_SIZE),
        spans: Spans::default(),
        out: Vec::with_capacity(1024),
        ubuf: BytesMut::with_capacity(READ_SIZE),
        resp: ResponseHead::default(),
        held: Vec::new(),
    };
    let mut first = true;
    loop {
        if *stop.borrow() {
            return Outcome::Closed;
        }
        let read =
            crate::deadline::within(header_timeout, read_head(client, &mut c.buf, &limits, stop));
        let end = match read.await {
            Ok(Head::Complete(end)) => end,
            Ok(Head::TooLarge) => return Outcome::HandOver { read: c.buf, first },
            Ok(Head::Closed) | Err(_) => return Outcome::Closed,
        };
        let started = Instant::now();
        let state = conn.shared.state.load_full();
        let Some(plan) = plan(&mut c, end, &limits, conn, &state, started) else {
            return Outcome::HandOver { read: c.buf, first };
        };
        first = false;
        if !exchange(&mut c, client, &state, plan, stop).await {
            linger(client).await;
            return Outcome::Closed;
        }
    }
}

/// How long a connection we end is read from (and what is read thrown away) after our side
/// is shut: a client still sending a body it was refused would otherwise get a reset, which
/// can cost it the answer (nginx's lingering close).
const LINGER: Duration = Duration::from_secs(2);

/// Most bytes thrown away while lingering.
const LINGER_BYTES: usize = 1 << 20;

/// Shuts our side of `client` and reads what it still sends, for [`LINGER`] at most.
async fn linger(client: &mut TcpStream) {
    if client.shutdown().await.is_err() {
        return;
    }
    let mut scratch = vec![0u8; 4096];
    let mut left = LINGER_BYTES;
    let drain = async {
        while left > 0 {
            match client.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = crate::deadline::within(LINGER, drain).await;
}

enum Head {
    /// A whole head is at the start of the buffer, this long.
    Complete(usize),
    /// Longer than the limit: the edge refuses it.
    TooLarge,
    /// The client closed (or the process drains while the connection is idle).
    Closed,
}

/// Reads until the buffer starts with a whole head.
async fn read_head(
    client: &mut TcpStream,
    buf: &mut BytesMut,
    limits: &HeadLimits,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Head {
    loop {
        if !buf.is_empty() {
            if let Some(end) = head_end(buf) {
                return Head::Complete(end);
            }
            if buf.len() > limits.max_head {
                return Head::TooLarge;
            }
        }
        buf.reserve(READ_SIZE);
        let n = if buf.is_empty() {
            // Idle between requests: the drain may end the connection.
            tokio::select! {
                biased;
                r = client.read_buf(buf) => r,
                _ = stop.changed() => return Head::Closed,
            }
        } else {
            client.read_buf(buf).await
        };
        match n {
            Ok(0) | Err(_) => return Head::Closed,
            Ok(_) => {}
        }
    }
}

/// What [`plan`] decided for a request this path serves.
struct Plan {
    /// The host's index.
    hi: usize,
    /// The request body's framing.
    framing: Framing,
    /// The client's head had a `Content-Length` (sent on as `0` when it framed nothing).
    has_length: bool,
    /// The client sent `Expect: 100-continue`.
    expect: bool,
    /// The client asked to close after this request.
    close: bool,
    /// A `HEAD` request (its response has no body whatever it says).
    head_method: bool,
    /// The log record, and for a host with the WAF on the transaction (phase 1 done).
    fin: Box<Finish>,
    /// What phase 1 decided, when it intervened.
    blocked: Option<Intervention>,
}

/// Whether this path serves the head at the start of `c.buf` (`end` bytes long), and if so
/// writes the upstream request head into `c.out` and takes the head off `c.buf`. `None`:
/// hand the connection over (nothing was consumed).
fn plan(
    c: &mut Conn,
    end: usize,
    limits: &HeadLimits,
    conn: &ConnCtx,
    state: &Arc<State>,
    started: Instant,
) -> Option<Plan> {
    let head = &c.buf[..end];
    let framing = match check_spans(head, limits, &mut c.spans) {
        Checked::Pass {
            framing,
            upgrade: false,
            rewritten: None,
        } => framing,
        _ => return None,
    };
    let sp = &c.spans;
    let target = &head[sp.target.clone()];
    if sp.http10 || target.first() != Some(&b'/') {
        return None;
    }
    if state.config.trusted_proxies.contains(conn.peer.ip()) {
        return None;
    }
    // One pass over the fields: the host, the connection tokens, `Expect`.
    let (mut host_value, mut close, mut expect, mut named) = (None, false, false, false);
    let mut has_length = false;
    for (n, v) in &sp.fields {
        let value = &head[v.clone()];
        match wire::name_of(&head[n.clone()]) {
            Name::Host => host_value = Some(value),
            Name::Connection => {
                for t in wire::tokens(value) {
                    if t.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if !t.eq_ignore_ascii_case(b"keep-alive") {
                        named = true;
                    }
                }
            }
            Name::Expect => {
                if !value.eq_ignore_ascii_case(b"100-continue") {
                    return None;
                }
                expect = true;
            }
            Name::ContentLength => has_length = true,
            _ => {}
        }
    }
    // `http`'s `to_str` takes visible ASCII, space and tab: other host bytes go the hyper
    // way (which then finds no host name).
    let host_value = host_value?;
    if !host_value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return None;
    }
    let host_name = host_name(host_value);
    let hi = state.find_host(Some(&host_name))?;
    let host = &state.hosts[hi];
    // A native policy edits requests, responses and pages through `http` types, and has
    // gate endpoints: the hyper path serves it.
    if host.waf.has_policy() {
        return None;
    }
    let waf_on = host.waf.engine_mode() != EngineMode::Off;
    // With the WAF on, a declared length over the limit is answered here after phase 1
    // (as the hyper path orders it); with it off, the hyper path answers it as before.
    if !waf_on
        && matches!(framing, Framing::Length(n) if n > host.options.request_body_limit as u64)
    {
        return None;
    }
    let upstream = &state.upstreams[host.config.upstream];
    if upstream.tls.is_some() || upstream.servers.iter().any(|s| s.tls) {
        return None;
    }
    let method = http::Method::from_bytes(&head[sp.method.clone()]).ok()?;

    let now = SystemTime::now();
    let mut rec = Record::blank(started);
    rec.time = now;
    // Not a trusted proxy (those go the hyper path): `waf_core::host::client_addr` is the
    // peer, and `waf_core::host::request_id` reuses no incoming id.
    rec.client_ip = conn.peer.ip();
    rec.method = method.clone();
    rec.path = LogPath::Raw(Bytes::copy_from_slice(target));
    if let Framing::Length(n) = framing {
        rec.bytes_in = n;
    }
    let mut blocked = None;
    let mut accept = None;
    let tx = if waf_on {
        // WAF phase 1, on the head as the client sent it (field names in their case, as
        // ModSecurity and the nginx module see them).
        let conn_info = ConnectionInfo::new(conn.peer, conn.local);
        let mut tx = host.waf.transaction(&conn_info, now);
        let pairs: Vec<(&[u8], &[u8])> = sp
            .fields
            .iter()
            .map(|(n, v)| (&head[n.clone()], &head[v.clone()]))
            .collect();
        accept = pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"accept"))
            .map(|(_, v)| v.to_vec());
        let req = RequestHead::new(&head[sp.method.clone()], target, b"HTTP/1.1", &pairs);
        let t = Instant::now();
        let verdict = tx.request_headers(&req);
        rec.waf_time += t.elapsed();
        if let Verdict::Intervene(i) = verdict {
            blocked = Some(i);
        }
        rec.request_id = tx.unique_id().to_string();
        Some(tx)
    } else {
        rec.request_id = fallback_id();
        None
    };

    // The upstream request head, from the client's bytes.
    let out = &mut c.out;
    out.clear();
    out.extend_from_slice(&head[sp.method.start..sp.target.end]);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let id_name = host.options.request_id_header.as_str().as_bytes();
    let cfg = &host.config;
    for (n, v) in &sp.fields {
        let name = &head[n.clone()];
        let keep = match wire::name_of(name) {
            Name::Connection | Name::HopByHop | Name::ContentLength | Name::Expect => false,
            // Replaced (on) or removed (off) for a peer that is not trusted.
            Name::XForwardedFor | Name::Forwarded => false,
            Name::XForwardedProto | Name::XForwardedHost => !cfg.x_forwarded,
            _ => {
                let replaced = named && is_named(head, &sp.fields, name);
                !(name.eq_ignore_ascii_case(id_name) || replaced)
            }
        };
        if keep {
            wire::push_field(out, name, &head[v.clone()]);
        }
    }
    let peer = &conn.peer_text;
    if cfg.x_forwarded {
        out.extend_from_slice(b"x-forwarded-for: ");
        out.extend_from_slice(peer.addr.as_bytes());
        out.extend_from_slice(b"\r\nx-forwarded-proto: http\r\nx-forwarded-host: ");
        out.extend_from_slice(host_name.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if cfg.forwarded {
        out.extend_from_slice(b"forwarded: for=");
        out.extend_from_slice(peer.node.as_bytes());
        out.extend_from_slice(b";proto=http");
        if !host_name.is_empty() && host_name.bytes().all(|b| b.is_ascii_graphic() && b != b'"') {
            out.extend_from_slice(b";host=\"");
            out.extend_from_slice(host_name.as_bytes());
            out.push(b'"');
        }
        out.extend_from_slice(b"\r\n");
    }
    wire::push_field(out, id_name, rec.request_id.as_bytes());
    rec.host = host_name;
    let mut fin = Finish::new(conn, state.clone(), Some(hi), tx, rec);
    fin.accept = accept;
    let plan = Plan {
        hi,
        framing,
        has_length,
        expect,
        close,
        head_method: method == http::Method::HEAD,
        fin,
        blocked,
    };
    c.buf.advance(end);
    Some(plan)
}

/// Ends the upstream request head in `out` with the framing of the body sent.
fn end_head(out: &mut Vec<u8>, framing: Framing, has_length: bool) {
    match framing {
        Framing::Length(n) => wire::push_content_length(out, n),
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::None if has_length => out.extend_from_slice(b"content-length: 0\r\n"),
        Framing::None => {}
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether `name` is one of the fields the request's `Connection` names.
fn is_named(head: &[u8], fields: &[(Range<usize>, Range<usize>)], name: &[u8]) -> bool {
    fields.iter().any(|(n, v)| {
        wire::name_of(&head[n.clone()]) == Name::Connection
            && wire::tokens(&head[v.clone()]).any(|t| t.eq_ignore_ascii_case(name))
    })
}

/// The requested host name: port removed, trailing dot removed, lower-cased.
fn host_name(v: &[u8]) -> String {
    let h = match v.first() {
        // `[v6]:port`; a bracket never closed is left as it is (and matches no host).
        Some(b'[') => v.iter().position(|&b| b == b']').map_or(v, |i| &v[..=i]),
        _ => v.iter().rposition(|&b| b == b':').map_or(v, |i| &v[..i]),
    };
    let mut h = h;
    while let [rest @ .., b'.'] = h {
        h = rest;
    }
    // Visible ASCII (checked by the caller): one allocation, the lower-cased copy.
    String::from_utf8_lossy(h).to_ascii_lowercase()
}

/// How the response body the client gets is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// No body.
    None,
    /// This many bytes.
    Length(u64),
    /// Chunked from the upstream, chunked on.
    Chunked,
    /// Until the upstream closes; chunked on.
    UntilClose,
}

/// Why the request could not be completed upstream.
enum Failed {
    /// Connecting, writing or reading the head failed (502), or it took too long (504).
    Upstream(StatusCode, &'static str),
    /// The client's body was broken (400), over the limit (413), or the client went away
    /// (no answer): the connection ends.
    Client(Option<StatusCode>),
}

/// Sends one request upstream and its response to the client. Returns whether the
/// connection stays open.
async fn exchange(
    c: &mut Conn,
    client: &mut TcpStream,
    state: &Arc<State>,
    plan: Plan,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> bool {
    let Plan {
        hi,
        mut framing,
        has_length,
        expect,
        close,
        head_method,
        mut fin,
        blocked,
    } = plan;
    let host = &state.hosts[hi];
    let mut expect_pending = expect;
    if fin.tx.is_some() {
        let close = close || *stop.borrow();
        let phases = RequestPhases {
            framing,
            blocked,
            close,
            expect_pending: &mut expect_pending,
        };
        match phases.run(c, client, state, host, &mut fin).await {
            Inspected::Forward(f) => framing = f,
            Inspected::Answered(open) => return open,
        }
    }
    end_head(&mut c.out, framing, has_length);
    let upstream = state.upstreams[host.config.upstream].clone();
    let pool = client::raw_pool(
        &upstream.client_key,
        &upstream.config,
        upstream.tls.as_ref(),
    );
    let read_timeout = upstream.config.read_timeout;
    let limit = host.options.request_body_limit as u64;
    let up_started = Instant::now();
    let mut failure = Failed::Upstream(StatusCode::BAD_GATEWAY, "upstream unavailable");
    let mut body_sent = false;
    let mut served: Option<(TcpStream, usize)> = None;
    for si in upstream.pick_order() {
        let server = &upstream.servers[si];
        fin.rec.upstream = Some(server.authority.clone());
        let (mut up, pooled) = match client::raw_checkout(pool, &server.authority) {
            Some((s, _idle)) => (s, true),
            None => match client::raw_connect(pool, &server.authority).await {
                Ok(s) => (s, false),
                Err(e) => {
                    tracing::warn!(server = %server.authority, error = %e, "upstream connect failed; server marked down");
                    fin.shared
                        .metrics
                        .upstream_error(server.authority.as_str(), "connect");
                    upstream.mark_down(si);
                    continue;
                }
            },
        };
        let mut attempt = Attempt {
            c: &mut *c,
            client: &mut *client,
            up: &mut up,
            framing,
            limit,
            expect_pending: &mut expect_pending,
            body_sent: &mut body_sent,
        };
        let sent = crate::deadline::within(read_timeout, attempt.run()).await;
        match sent {
            Ok(Ok(())) => {
                served = Some((up, si));
                break;
            }
            Ok(Err(AttemptError::Stale)) if pooled && !body_sent => {
                // The keep-alive race: the server closed the pooled connection as the
                // request went out, and nothing of the request body is lost: once more on
                // a new connection.
                match client::raw_connect(pool, &server.authority).await {
                    Ok(mut fresh) => {
                        let mut attempt = Attempt {
                            c: &mut *c,
                            client: &mut *client,
                            up: &mut fresh,
                            framing,
                            limit,
                            expect_pending: &mut expect_pending,
                            body_sent: &mut body_sent,
                        };
                        match crate::deadline::within(read_timeout, attempt.run()).await {
                            Ok(Ok(())) => {
                                served = Some((fresh, si));
                                break;
                            }
                            Ok(Err(e)) => failure = e.into_failed(&fin, server),
                            Err(_) => failure = timeout(&fin, server),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = %server.authority, error = %e, "upstream connect failed; server marked down");
                        fin.shared
                            .metrics
                            .upstream_error(server.authority.as_str(), "connect");
                        upstream.mark_down(si);
                        failure = Failed::Upstream(StatusCode::BAD_GATEWAY, "upstream unavailable");
                        continue;
                    }
                }
                break;
            }
            Ok(Err(e)) => {
                failure = e.into_failed(&fin, server);
                break;
            }
            Err(_) => {
                failure = timeout(&fin, server);
                break;
            }
        }
    }
    fin.rec.upstream_time = Some(up_started.elapsed());
    let Some((mut up, _)) = served else {
        // Nothing came back: the proxy answers. A body not read whole ends the connection.
        let body_done = matches!(framing, Framing::None) || body_sent;
        return match failure {
            Failed::Upstream(status, what) => {
                fin.rec.action = "error";
                let resp = fin.error_response(status, what);
                let close = close || !body_done || *stop.borrow();
                write_generated(client, &mut c.out, resp, close).await
            }
            Failed::Client(Some(status)) => {
                fin.rec.action = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    "limit"
                } else {
                    "client_error"
                };
                let what = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    "request body too large"
                } else {
                    "bad request body"
                };
                let resp = fin.error_response(status, what);
                write_generated(client, &mut c.out, resp, true).await
            }
            Failed::Client(None) => false,
        };
    };
    let close = close || *stop.borrow();
    let (out_framing, reusable) = response_framing(&c.ubuf, &c.resp, head_method);
    fin.rec.status = c.resp.status;
    let server = fin
        .rec
        .upstream
        .clone()
        .expect("invariant: set per attempt");
    let mut hold = false;
    if let Some(tx) = fin.tx.as_mut() {
        // WAF phase 3, on the upstream's head as it came.
        let verdict = {
            let pairs: Vec<(&[u8], &[u8])> = c
                .resp
                .fields
                .iter()
                .map(|(n, v)| (&c.ubuf[n.clone()], &c.ubuf[v.clone()]))
                .collect();
            let version: &[u8] = if c.resp.http10 {
                b"HTTP/1.0"
            } else {
                b"HTTP/1.1"
            };
            let head = waf_core::ResponseHead::new(c.resp.status, version, &pairs);
            let t = Instant::now();
            let v = tx.response_headers(&head);
            fin.rec.waf_time += t.elapsed();
            v
        };
        if let Verdict::Intervene(i) = verdict {
            // The upstream's body is not read: its connection is not reused.
            c.ubuf.clear();
            let resp = fin.block(&i);
            return write_generated(client, &mut c.out, resp, close).await;
        }
        fin.inspect_response = tx.wants_response_body();
        hold = fin.inspect_response && host.hold_responses;
    }
    response_fields(
        &mut c.out,
        &c.ubuf,
        &c.resp,
        host,
        out_framing,
        &fin.rec.request_id,
    );
    let head_len = c.resp.len;
    c.ubuf.advance(head_len);
    let mut relay_framing = out_framing;
    let mut dec = Chunked::default();
    if hold {
        // Phase 4 can block and inspects this response: the body is held (up to the
        // host's `max_response_buffer`) before any of it is sent, as on the hyper path.
        let mut left = match out_framing {
            Out::Length(n) => n,
            _ => 0,
        };
        dec.raw = true;
        let limit = host.config.max_response_buffer;
        match hold_body(
            c,
            &mut up,
            out_framing,
            &mut left,
            &mut dec,
            limit,
            read_timeout,
        )
        .await
        {
            Held::Whole => {
                let tx = fin.tx.as_mut().expect("invariant: held with a transaction");
                let t = Instant::now();
                let mut v = tx.response_body(&c.held);
                if matches!(v, Verdict::Continue) {
                    v = tx.response_end();
                }
                fin.rec.waf_time += t.elapsed();
                fin.response_ended = true;
                fin.inspect_response = false;
                let whole = reusable && c.ubuf.is_empty();
                if whole {
                    client::raw_checkin(pool, &server, up);
                }
                c.ubuf.clear();
                if let Verdict::Intervene(i) = v {
                    let resp = fin.block(&i);
                    shrink(&mut c.held);
                    return write_generated(client, &mut c.out, resp, close).await;
                }
                let sent = match out_framing {
                    Out::None => Out::None,
                    _ => Out::Length(c.held.len() as u64),
                };
                end_response_head(&mut c.out, sent, close);
                let ok = write2(client, &c.out, &c.held).await.is_ok();
                fin.rec.bytes_out += c.held.len() as u64;
                shrink(&mut c.held);
                return ok && !close;
            }
            Held::Partial => {
                // Over the limit: what was held goes first, the rest as it comes; phase 4
                // sees it all and can only log.
                end_response_head(&mut c.out, out_framing, close);
                inspect_body(&mut fin, &c.held);
                fin.rec.bytes_out += c.held.len() as u64;
                match out_framing {
                    Out::Length(_) => c.out.extend_from_slice(&c.held),
                    _ => wire::push_chunk(&mut c.out, &c.held),
                }
                shrink(&mut c.held);
                if let Out::Length(_) = out_framing {
                    relay_framing = Out::Length(left);
                }
            }
            Held::Failed(status, what) => {
                c.ubuf.clear();
                shrink(&mut c.held);
                fin.rec.action = "error";
                let resp = fin.error_response(status, what);
                return write_generated(client, &mut c.out, resp, true).await;
            }
        }
    } else {
        end_response_head(&mut c.out, out_framing, close);
    }
    let relayed = relay(c, client, &mut up, relay_framing, &mut fin, dec).await;
    match relayed {
        Ok(()) => {
            if reusable && c.ubuf.is_empty() {
                client::raw_checkin(pool, &server, up);
            }
            c.ubuf.clear();
            !close
        }
        Err(()) => {
            c.ubuf.clear();
            false
        }
    }
}

/// Drops a held buffer's room when it grew past what most bodies need (a connection keeps
/// its buffers between requests).
fn shrink(v: &mut Vec<u8>) {
    v.clear();
    if v.capacity() > 4 * READ_SIZE {
        *v = Vec::new();
    }
}

/// Shows a piece of the response body to the WAF's phase 4, when it inspects it (the
/// verdict can only be logged: the response is under way).
fn inspect_body(fin: &mut Finish, data: &[u8]) {
    if !fin.inspect_response || data.is_empty() {
        return;
    }
    if let Some(tx) = fin.tx.as_mut() {
        let t = Instant::now();
        let _ = tx.response_body(data);
        fin.rec.waf_time += t.elapsed();
    }
}

/// The request side of WAF phases 1 and 2 for a host with the WAF on (see
/// [`RequestPhases::run`]).
struct RequestPhases<'a> {
    /// The request body's framing as the client sent it.
    framing: Framing,
    /// Phase 1's intervention.
    blocked: Option<Intervention>,
    /// The connection ends after this request.
    close: bool,
    /// `100 Continue` is still owed to the client.
    expect_pending: &'a mut bool,
}

/// What the WAF's request phases left to do.
enum Inspected {
    /// Forward the request, its body framed so (a buffered body: its length, at the front
    /// of the client's bytes).
    Forward(Framing),
    /// Answered here; whether the connection stays open.
    Answered(bool),
}

/// Why a request body could not be held whole.
enum BodyError {
    /// The client went away.
    Gone,
    /// Its chunked framing is broken.
    Bad,
    /// Past the host's limit.
    TooLarge,
    /// Nothing came for `body_read_timeout`.
    Timeout,
}

impl RequestPhases<'_> {
    /// Phase 1's verdict, the limit on the declared length (413, after phase 1 as on the
    /// hyper path), then phase 2: when the WAF wants the body it is read whole (chunked
    /// decoded) within the limit and inspected before anything goes upstream; otherwise it
    /// streams, as for a host with the WAF off. A block page is sent with the connection
    /// kept when the request's body is read whole (none, or all here already), else it
    /// ends (its framing would be in doubt).
    async fn run(
        self,
        c: &mut Conn,
        client: &mut TcpStream,
        state: &State,
        host: &Host,
        fin: &mut Box<Finish>,
    ) -> Inspected {
        let RequestPhases {
            framing,
            blocked,
            close,
            expect_pending,
        } = self;
        if let Some(i) = blocked {
            let body_here = skip_body(&mut c.buf, framing);
            let resp = fin.block(&i);
            return Inspected::Answered(
                write_generated(client, &mut c.out, resp, close || !body_here).await,
            );
        }
        let limit = host.options.request_body_limit as u64;
        if matches!(framing, Framing::Length(n) if n > limit) {
            fin.rec.action = "limit";
            let resp = fin.error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
            return Inspected::Answered(write_generated(client, &mut c.out, resp, true).await);
        }
        let tx = fin
            .tx
            .as_mut()
            .expect("invariant: the request phases run with a transaction");
        if framing == Framing::None || !tx.wants_request_body() {
            let t = Instant::now();
            let v = tx.request_end();
            fin.rec.waf_time += t.elapsed();
            if let Verdict::Intervene(i) = v {
                let body_here = skip_body(&mut c.buf, framing);
                let resp = fin.block(&i);
                return Inspected::Answered(
                    write_generated(client, &mut c.out, resp, close || !body_here).await,
                );
            }
            return Inspected::Forward(framing);
        }
        let timeout = state.config.body_read_timeout;
        let n = match hold_request_body(c, client, framing, limit, timeout, expect_pending).await {
            Ok(n) => n,
            Err(e) => {
                let (status, action, what) = match e {
                    BodyError::Gone => return Inspected::Answered(false),
                    BodyError::Bad => (StatusCode::BAD_REQUEST, "client_error", "bad request body"),
                    BodyError::TooLarge => (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "limit",
                        "request body too large",
                    ),
                    BodyError::Timeout => (
                        StatusCode::REQUEST_TIMEOUT,
                        "client_timeout",
                        "request body too slow",
                    ),
                };
                fin.rec.action = action;
                let resp = fin.error_response(status, what);
                return Inspected::Answered(write_generated(client, &mut c.out, resp, true).await);
            }
        };
        fin.rec.bytes_in = n as u64;
        let tx = fin
            .tx
            .as_mut()
            .expect("invariant: the request phases run with a transaction");
        let t = Instant::now();
        let mut v = tx.request_body(&c.buf[..n]);
        if matches!(v, Verdict::Continue) {
            v = tx.request_end();
        }
        fin.rec.waf_time += t.elapsed();
        if let Verdict::Intervene(i) = v {
            c.buf.advance(n);
            let resp = fin.block(&i);
            return Inspected::Answered(write_generated(client, &mut c.out, resp, close).await);
        }
        Inspected::Forward(Framing::Length(n as u64))
    }
}

/// Takes a request body off `buf` when all of it is there (none counts); whether it was.
fn skip_body(buf: &mut BytesMut, framing: Framing) -> bool {
    match framing {
        Framing::None => true,
        Framing::Length(n) if buf.len() as u64 >= n => {
            buf.advance(n as usize);
            true
        }
        _ => false,
    }
}

/// Reads the whole request body to the front of `c.buf` (a chunked one decoded, and the
/// bytes after it kept behind it) within `limit`; returns its length.
async fn hold_request_body(
    c: &mut Conn,
    client: &mut TcpStream,
    framing: Framing,
    limit: u64,
    timeout: Duration,
    expect_pending: &mut bool,
) -> Result<usize, BodyError> {
    match framing {
        Framing::None => Ok(0),
        Framing::Length(n) => {
            // Within the limit (checked by the caller), so it fits in memory.
            let n = n as usize;
            while c.buf.len() < n {
                read_body_more(client, &mut c.buf, timeout, expect_pending).await?;
            }
            Ok(n)
        }
        Framing::Chunked => {
            let mut dec = Chunked::default();
            dec.raw = true;
            c.held.clear();
            loop {
                let (used, done) = dec.feed(&c.buf, &mut c.held).map_err(|_| BodyError::Bad)?;
                c.buf.advance(used);
                if dec.data > limit {
                    shrink(&mut c.held);
                    return Err(BodyError::TooLarge);
                }
                if done {
                    break;
                }
                read_body_more(client, &mut c.buf, timeout, expect_pending).await?;
            }
            // The decoded body in front of what the client sent after it (pipelined
            // requests): one copy of those, rarely more than nothing.
            let n = c.held.len();
            let mut buf = BytesMut::with_capacity((n + c.buf.len()).max(READ_SIZE));
            buf.extend_from_slice(&c.held);
            buf.extend_from_slice(&c.buf);
            c.buf = buf;
            shrink(&mut c.held);
            Ok(n)
        }
    }
}

/// Reads more of a request body (`100 Continue` first, once, when owed).
async fn read_body_more(
    client: &mut TcpStream,
    buf: &mut BytesMut,
    timeout: Duration,
    expect_pending: &mut bool,
) -> Result<(), BodyError> {
    if std::mem::take(expect_pending) {
        client
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|_| BodyError::Gone)?;
    }
    buf.reserve(READ_SIZE);
    match crate::deadline::within(timeout, client.read_buf(buf)).await {
        Err(_) => Err(BodyError::Timeout),
        Ok(Ok(0)) | Ok(Err(_)) => Err(BodyError::Gone),
        Ok(Ok(_)) => Ok(()),
    }
}

/// A response body read for phase 4 (into `Conn::held`, decoded).
enum Held {
    /// All of it, within the limit.
    Whole,
    /// Past the limit: the rest is still to come.
    Partial,
    /// The upstream failed or stalled mid-body.
    Failed(StatusCode, &'static str),
}

/// Reads the response body (framed `framing`; `left` bytes still to come of a length,
/// `dec` following a chunked one) into `c.held` until its end or past `limit` bytes, each
/// read within `timeout`.
async fn hold_body(
    c: &mut Conn,
    up: &mut TcpStream,
    framing: Out,
    left: &mut u64,
    dec: &mut Chunked,
    limit: u64,
    timeout: Duration,
) -> Held {
    c.held.clear();
    loop {
        let done = match framing {
            Out::None => true,
            Out::Length(_) => {
                let k = (c.ubuf.len() as u64).min(*left) as usize;
                c.held.extend_from_slice(&c.ubuf[..k]);
                c.ubuf.advance(k);
                *left -= k as u64;
                *left == 0
            }
            Out::Chunked => match dec.feed(&c.ubuf, &mut c.held) {
                Ok((used, done)) => {
                    c.ubuf.advance(used);
                    done
                }
                Err(_) => return Held::Failed(StatusCode::BAD_GATEWAY, "upstream error"),
            },
            Out::UntilClose => {
                c.held.extend_from_slice(&c.ubuf);
                c.ubuf.clear();
                false
            }
        };
        if c.held.len() as u64 > limit {
            return Held::Partial;
        }
        if done {
            return Held::Whole;
        }
        c.ubuf.reserve(READ_SIZE);
        match crate::deadline::within(timeout, up.read_buf(&mut c.ubuf)).await {
            Err(_) => {
                return Held::Failed(StatusCode::GATEWAY_TIMEOUT, "upstream response too slow")
            }
            Ok(Ok(0)) if framing == Out::UntilClose => return Held::Whole,
            Ok(Ok(0)) | Ok(Err(_)) => {
                return Held::Failed(StatusCode::BAD_GATEWAY, "upstream error")
            }
            Ok(Ok(_)) => {}
        }
    }
}

fn timeout(fin: &Finish, server: &crate::state::Server) -> Failed {
    tracing::warn!(server = %server.authority, "upstream response timeout");
    fin.shared
        .metrics
        .upstream_error(server.authority.as_str(), "timeout");
    Failed::Upstream(StatusCode::GATEWAY_TIMEOUT, "upstream timeout")
}

/// How an attempt failed.
enum AttemptError {
    /// The upstream connection ended before any byte of a response (a pooled one may have
    /// been closed by the server meanwhile).
    Stale,
    /// The upstream failed otherwise.
    Upstream(io::Error),
    /// Its response head is not HTTP/1 (or too long, or 101 unasked).
    BadResponse,
    /// The client's part failed (see [`Failed::Client`]).
    Client(Option<StatusCode>),
}

impl AttemptError {
    fn into_failed(self, fin: &Finish, server: &crate::state::Server) -> Failed {
        match self {
            AttemptError::Client(s) => Failed::Client(s),
            other => {
                let what = match &other {
                    AttemptError::Stale => "connection closed".to_string(),
                    AttemptError::Upstream(e) => e.to_string(),
                    _ => "malformed response head".to_string(),
                };
                tracing::warn!(server = %server.authority, error = %what, "upstream request failed");
                fin.shared
                    .metrics
                    .upstream_error(server.authority.as_str(), "error");
                Failed::Upstream(StatusCode::BAD_GATEWAY, "upstream error")
            }
        }
    }
}

/// One try of a request on one upstream connection: the head and body out, the response
/// head in (into `c.ubuf` and `c.resp`).
struct Attempt<'a> {
    c: &'a mut Conn,
    client: &'a mut TcpStream,
    up: &'a mut TcpStream,
    framing: Framing,
    limit: u64,
    expect_pending: &'a mut bool,
    /// Some of the body has been taken from the client (it cannot be sent again).
    body_sent: &'a mut bool,
}

impl Attempt<'_> {
    async fn run(&mut self) -> Result<(), AttemptError> {
        let c = &mut *self.c;
        c.ubuf.clear();
        match self.framing {
            Framing::None => {
                self.up
                    .write_all(&c.out)
                    .await
                    .map_err(|_| AttemptError::Stale)?;
            }
            Framing::Length(n) if c.buf.len() as u64 >= n => {
                // The whole body is here already: written with the head, and taken off the
                // client's bytes only once the response head is in (so it can be sent
                // again on a new connection).
                let n = n as usize;
                write2(self.up, &c.out, &c.buf[..n])
                    .await
                    .map_err(|_| AttemptError::Stale)?;
                self.read_response().await?;
                self.c.buf.advance(n);
                return Ok(());
            }
            Framing::Length(n) => {
                *self.body_sent = true;
                let have = c.buf.len();
                write2(self.up, &c.out, &c.buf[..have])
                    .await
                    .map_err(AttemptError::Upstream)?;
                c.buf.clear();
                let mut left = n - have as u64;
                while left > 0 {
                    self.continue_once().await?;
                    let c = &mut *self.c;
                    c.buf.reserve(READ_SIZE);
                    match self.client.read_buf(&mut c.buf).await {
                        Ok(0) | Err(_) => return Err(AttemptError::Client(None)),
                        Ok(_) => {}
                    }
                    let k = (c.buf.len() as u64).min(left) as usize;
                    self.up
                        .write_all(&c.buf[..k])
                        .await
                        .map_err(AttemptError::Upstream)?;
                    c.buf.advance(k);
                    left -= k as u64;
                }
            }
            Framing::Chunked => {
                *self.body_sent = true;
                let mut dec = Chunked::default();
                loop {
                    let c = &mut *self.c;
                    let (used, done) = dec
                        .feed(&c.buf, &mut c.out)
                        .map_err(|_| AttemptError::Client(Some(StatusCode::BAD_REQUEST)))?;
                    c.buf.advance(used);
                    if dec.data > self.limit {
                        return Err(AttemptError::Client(Some(StatusCode::PAYLOAD_TOO_LARGE)));
                    }
                    if !c.out.is_empty() {
                        self.up
                            .write_all(&c.out)
                            .await
                            .map_err(AttemptError::Upstream)?;
                        c.out.clear();
                    }
                    if done {
                        break;
                    }
                    self.continue_once().await?;
                    let c = &mut *self.c;
                    c.buf.reserve(READ_SIZE);
                    match self.client.read_buf(&mut c.buf).await {
                        Ok(0) | Err(_) => return Err(AttemptError::Client(None)),
                        Ok(_) => {}
                    }
                }
            }
        }
        self.read_response().await
    }

    /// `100 Continue` to the client, once, before its body is first waited for.
    async fn continue_once(&mut self) -> Result<(), AttemptError> {
        if std::mem::take(self.expect_pending) {
            self.client
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .map_err(|_| AttemptError::Client(None))?;
        }
        Ok(())
    }

    /// Reads the response head (informational ones other than 101 are skipped).
    async fn read_response(&mut self) -> Result<(), AttemptError> {
        let c = &mut *self.c;
        let mut got_any = false;
        loop {
            if !c.ubuf.is_empty() {
                match wire::parse_response(&c.ubuf, &mut c.resp) {
                    Ok(true) => {
                        let s = c.resp.status;
                        if (100..200).contains(&s) {
                            if s == 101 {
                                return Err(AttemptError::BadResponse);
                            }
                            let n = c.resp.len;
                            c.ubuf.advance(n);
                            continue;
                        }
                        return Ok(());
                    }
                    Ok(false) if c.ubuf.len() > MAX_RESPONSE_HEAD => {
                        return Err(AttemptError::BadResponse)
                    }
                    Ok(false) => {}
                    Err(_) => return Err(AttemptError::BadResponse),
                }
            }
            c.ubuf.reserve(READ_SIZE);
            match self.up.read_buf(&mut c.ubuf).await {
                Ok(0) if !got_any => return Err(AttemptError::Stale),
                Err(e) if !got_any && e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(AttemptError::Stale)
                }
                Ok(0) => return Err(AttemptError::Upstream(io::ErrorKind::UnexpectedEof.into())),
                Err(e) => return Err(AttemptError::Upstream(e)),
                Ok(_) => got_any = true,
            }
        }
    }
}

/// Writes `a` then `b` (one `writev` when the socket takes both).
async fn write2(s: &mut TcpStream, a: &[u8], b: &[u8]) -> io::Result<()> {
    if b.is_empty() {
        return s.write_all(a).await;
    }
    let mut done = 0usize;
    let total = a.len() + b.len();
    while done < total {
        let n = if done < a.len() {
            let bufs = [io::IoSlice::new(&a[done..]), io::IoSlice::new(b)];
            s.write_vectored(&bufs).await?
        } else {
            s.write(&b[done - a.len()..]).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

/// The framing of the response body the client gets, and whether the upstream connection
/// can serve another request after it.
fn response_framing(buf: &[u8], r: &ResponseHead, head_method: bool) -> (Out, bool) {
    let mut length: Option<u64> = None;
    let mut bad_length = false;
    let mut te: Option<bool> = None; // Some(chunked last)
    let mut reusable = true;
    for (n, v) in &r.fields {
        let name = &buf[n.clone()];
        let value = &buf[v.clone()];
        if name.eq_ignore_ascii_case(b"content-length") {
            let parsed = std::str::from_utf8(value.trim_ascii())
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok());
            match (parsed, length) {
                (Some(p), None) => length = Some(p),
                (Some(p), Some(l)) if p == l => {}
                _ => bad_length = true,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = wire::tokens(value).last().unwrap_or(b"");
            te = Some(last.eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection")
            && wire::tokens(value).any(|t| t.eq_ignore_ascii_case(b"close"))
        {
            reusable = false;
        }
    }
    if head_method || r.status == 204 || r.status == 304 {
        return (Out::None, reusable);
    }
    match (te, length) {
        (Some(true), _) => (Out::Chunked, reusable),
        (Some(false), _) => (Out::UntilClose, false),
        (None, Some(_)) if bad_length => (Out::UntilClose, false),
        (None, Some(n)) => (Out::Length(n), reusable),
        (None, None) => (Out::UntilClose, false),
    }
}

/// Writes the response head the client gets into `out`, but for its framing (see
/// [`end_response_head`]): the upstream's status and fields less hop-by-hop ones (and
/// those its `Connection` names), cookies hardened, the host's security fields where the
/// upstream set none, the request id. `framing`: the upstream body's (a body's
/// `Content-Length` is ours).
fn response_fields(
    out: &mut Vec<u8>,
    buf: &[u8],
    r: &ResponseHead,
    host: &Host,
    framing: Out,
    request_id: &str,
) {
    out.clear();
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    match status.canonical_reason() {
        Some(reason) => out.extend_from_slice(reason.as_bytes()),
        None => out.extend_from_slice(&buf[r.reason.clone()]),
    }
    out.extend_from_slice(b"\r\n");
    let id_name = host.options.request_id_header.as_str().as_bytes();
    let named = r.fields.iter().any(|(n, v)| {
        wire::name_of(&buf[n.clone()]) == Name::Connection
            && wire::tokens(&buf[v.clone()]).any(|t| {
                !t.eq_ignore_ascii_case(b"close") && !t.eq_ignore_ascii_case(b"keep-alive")
            })
    });
    let harden = crate::headers::hardens_cookies(&host.config, false);
    for (n, v) in &r.fields {
        let name = &buf[n.clone()];
        let value = &buf[v.clone()];
        match wire::name_of(name) {
            Name::Connection | Name::HopByHop => continue,
            // Framed by us, except where it only describes (no body follows).
            Name::ContentLength if framing != Out::None => continue,
            Name::SetCookie if harden => {
                let v = crate::headers::harden_cookie(value, &host.config, false);
                wire::push_field(out, name, v.as_deref().unwrap_or(value));
                continue;
            }
            _ => {}
        }
        if name.eq_ignore_ascii_case(id_name) || (named && is_named(buf, &r.fields, name)) {
            continue;
        }
        wire::push_field(out, name, value);
    }
    // RFC 9110 §6.6.1: a response forwarded without `Date` gets one.
    if !r
        .fields
        .iter()
        .any(|(f, _)| buf[f.clone()].eq_ignore_ascii_case(b"date"))
    {
        out.extend_from_slice(b"date: ");
        date_now(out);
        out.extend_from_slice(b"\r\n");
    }
    for (n, v) in &host.security_headers {
        let n = n.as_str().as_bytes();
        if !r
            .fields
            .iter()
            .any(|(f, _)| buf[f.clone()].eq_ignore_ascii_case(n))
        {
            wire::push_field(out, n, v.as_bytes());
        }
    }
    wire::push_field(out, id_name, request_id.as_bytes());
}

/// Ends the response head in `out` with our framing of the body sent, and
/// `Connection: close` when the connection ends after it.
fn end_response_head(out: &mut Vec<u8>, framing: Out, close: bool) {
    match framing {
        Out::Length(n) => wire::push_content_length(out, n),
        Out::Chunked | Out::UntilClose => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Out::None => {}
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends the current time as an HTTP date, formatted once a second per worker.
fn date_now(out: &mut Vec<u8>) {
    use std::cell::RefCell;
    thread_local! {
        static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            *d = (secs, wire::http_date(secs));
        }
        out.extend_from_slice(d.1.as_bytes());
    });
}

/// Sends the response head in `c.out` and the body after it, from `c.ubuf` and the
/// upstream. `Err`: either side failed mid-body; the connection ends.
async fn relay(
    c: &mut Conn,
    client: &mut TcpStream,
    up: &mut TcpStream,
    framing: Out,
    fin: &mut Finish,
    mut dec: Chunked,
) -> Result<(), ()> {
    // Phase 4 sees each piece as it passes (and can only log).
    let inspect = fin.inspect_response && fin.tx.is_some();
    match framing {
        Out::None => client.write_all(&c.out).await.map_err(|_| ()),
        Out::Length(n) => {
            let k = (c.ubuf.len() as u64).min(n) as usize;
            inspect_body(fin, &c.ubuf[..k]);
            write2(client, &c.out, &c.ubuf[..k]).await.map_err(|_| ())?;
            c.ubuf.advance(k);
            fin.rec.bytes_out += k as u64;
            let mut left = n - k as u64;
            while left > 0 {
                c.ubuf.reserve(READ_SIZE);
                match up.read_buf(&mut c.ubuf).await {
                    Ok(0) | Err(_) => return Err(()),
                    Ok(_) => {}
                }
                let k = (c.ubuf.len() as u64).min(left) as usize;
                inspect_body(fin, &c.ubuf[..k]);
                client.write_all(&c.ubuf[..k]).await.map_err(|_| ())?;
                c.ubuf.advance(k);
                fin.rec.bytes_out += k as u64;
                left -= k as u64;
            }
            Ok(())
        }
        Out::Chunked => {
            // Inspected: decoded into `held`, shown to the WAF, framed again here.
            dec.raw = inspect;
            loop {
                let before = dec.data;
                let done = if inspect {
                    c.held.clear();
                    let (used, done) = dec.feed(&c.ubuf, &mut c.held).map_err(|_| ())?;
                    c.ubuf.advance(used);
                    if !c.held.is_empty() {
                        inspect_body(fin, &c.held);
                        wire::push_chunk(&mut c.out, &c.held);
                    }
                    if done {
                        c.out.extend_from_slice(b"0\r\n\r\n");
                    }
                    done
                } else {
                    let (used, done) = dec.feed(&c.ubuf, &mut c.out).map_err(|_| ())?;
                    c.ubuf.advance(used);
                    done
                };
                fin.rec.bytes_out += dec.data - before;
                if !c.out.is_empty() {
                    client.write_all(&c.out).await.map_err(|_| ())?;
                    c.out.clear();
                }
                if done {
                    return Ok(());
                }
                c.ubuf.reserve(READ_SIZE);
                match up.read_buf(&mut c.ubuf).await {
                    Ok(0) | Err(_) => return Err(()),
                    Ok(_) => {}
                }
            }
        }
        Out::UntilClose => {
            loop {
                if !c.ubuf.is_empty() {
                    inspect_body(fin, &c.ubuf);
                    wire::push_chunk(&mut c.out, &c.ubuf);
                    fin.rec.bytes_out += c.ubuf.len() as u64;
                    c.ubuf.clear();
                }
                if !c.out.is_empty() {
                    client.write_all(&c.out).await.map_err(|_| ())?;
                    c.out.clear();
                }
                c.ubuf.reserve(READ_SIZE);
                match up.read_buf(&mut c.ubuf).await {
                    Ok(0) => break,
                    Err(_) => return Err(()),
                    Ok(_) => {}
                }
            }
            client.write_all(b"0\r\n\r\n").await.map_err(|_| ())
        }
    }
}

/// Writes a response the proxy made (a block page, an upstream failure, a body limit) with
/// its length, and `Connection: close` when `close` or the response says so (a `drop`
/// action); its logging runs as its body is read. Returns whether the connection stays
/// open (written, and not closing).
async fn write_generated(
    client: &mut TcpStream,
    out: &mut Vec<u8>,
    resp: http::Response<ResBody>,
    close: bool,
) -> bool {
    let (parts, body) = resp.into_parts();
    let close = close
        || parts
            .headers
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(parts.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    if !parts.headers.contains_key(http::header::DATE) {
        out.extend_from_slice(b"date: ");
        date_now(out);
        out.extend_from_slice(b"\r\n");
    }
    for (n, v) in &parts.headers {
        if *n == http::header::CONTENT_LENGTH || *n == http::header::CONNECTION {
            continue;
        }
        wire::push_field(out, n.as_str().as_bytes(), v.as_bytes());
    }
    wire::push_content_length(out, body.len() as u64);
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    client.write_all(out).await.is_ok() && !close
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names() {
        assert_eq!(host_name(b"Example.COM:8080"), "example.com");
        assert_eq!(host_name(b"a.test."), "a.test");
        assert_eq!(host_name(b"[::1]:80"), "[::1]");
        for junk in [&b"["[..], b"[::1", b"]", b":", b"[]:", b"a:b:c", b""] {
            let _ = host_name(junk);
        }
    }
}
