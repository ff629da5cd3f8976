//! Stage 3, `upstream_peer` / `upstream_request_filter`: round robin over healthy servers,
//! forwarding headers, hop-by-hop headers stripped. A server that refuses connections is
//! skipped for `fail_timeout` and, when the body can be replayed, the next one is tried. No
//! response head within `read_timeout` gives 504, any other failure 502; both carry the
//! request id.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::body::Sent;
use super::logging::{Finish, ResBody};
use super::{response, ConnCtx};
use crate::client::{self, ProxyBody, UpstreamError};
use crate::headers;
use crate::state::{Host, State};

/// Sends the request upstream and hands the response to [`response::filter`], or answers
/// with 502/504/413.
pub(super) async fn forward(
    mut parts: http::request::Parts,
    sent: Sent,
    mut fin: Box<Finish>,
    host: &Host,
    state: &State,
    conn: &ConnCtx,
) -> Response<ResBody> {
    let (mut stream, replay): (Option<ProxyBody>, Option<Bytes>) = match sent {
        Sent::Stream(b) => (Some(b), None),
        Sent::Replayable(b) => (None, Some(b)),
    };
    // upstream_peer / upstream_request_filter.
    let upstream = state.upstreams[host.config.upstream].clone();
    let trusted_peer = state.config.trusted_proxies.contains(conn.peer.ip());
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    // The request's own headers become the upstream's (nothing later reads them).
    let mut base_headers = std::mem::take(&mut parts.headers);
    // Room for the forwarding headers and the request id at once (one growth, not several).
    base_headers.reserve(6);
    // `Upgrade` (WebSocket): the one hop-by-hop exchange passed on, then bytes relayed.
    let upgrade = headers::upgrade_of(&base_headers);
    let mut client_upgrade = upgrade
        .as_ref()
        .and_then(|_| parts.extensions.remove::<hyper::upgrade::OnUpgrade>());
    headers::strip_hop_by_hop(&mut base_headers);
    if let Some(u) = &upgrade {
        base_headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        base_headers.insert(header::UPGRADE, u.clone());
    }
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
        &conn.peer_text,
        trusted_peer,
        conn.https,
        &fin.rec.host,
    );
    if let Ok(v) = HeaderValue::from_str(&fin.rec.request_id) {
        base_headers.insert(host.options.request_id_header.clone(), v);
    }
    if let Some(tx) = &fin.tx {
        crate::policy::edit_request(&mut base_headers, tx.policy_effects());
    }
    let order: Vec<usize> = upstream.pick_order().collect();
    let mut last_failure = (StatusCode::BAD_GATEWAY, "upstream unavailable");
    let up_started = Instant::now();
    for (attempt, &si) in order.iter().enumerate() {
        let server = &upstream.servers[si];
        let body = match (stream.take(), &replay) {
            (Some(b), _) => b,
            (None, Some(bytes)) if bytes.is_empty() => Empty::new().map_err(|e| match e {}).boxed(),
            (None, Some(bytes)) => Full::new(bytes.clone()).map_err(|e| match e {}).boxed(),
            (None, None) => break, // a streamed body cannot be sent twice
        };
        let mut up_req = Request::new(body);
        *up_req.method_mut() = parts.method.clone();
        *up_req.uri_mut() = http::Uri::from(path.clone());
        // The last attempt takes the headers; earlier ones (a retry may follow) copy them.
        *up_req.headers_mut() = if attempt + 1 == order.len() {
            std::mem::take(&mut base_headers)
        } else {
            base_headers.clone()
        };
        fin.rec.upstream = Some(server.authority.clone());
        let sent = client::send(
            &upstream.client_key,
            &upstream.config,
            upstream.tls.as_ref(),
            &server.authority,
            server.tls,
            up_req,
        );
        // Coarse: fires up to one worker tick (250 ms) after the read timeout.
        let result = crate::deadline::within(upstream.config.read_timeout, sent).await;
        match result {
            Ok(Ok(mut resp)) => {
                let d = up_started.elapsed();
                fin.rec.upstream_time = Some(d);
                let timeout = upstream.config.read_timeout;
                let switched = resp.status() == StatusCode::SWITCHING_PROTOCOLS;
                let Some(on_client) = client_upgrade.take().filter(|_| switched) else {
                    return response::filter(resp, fin, host, conn, timeout).await;
                };
                // 101: once both sides have switched, relay bytes until either closes or
                // nothing moves for the idle timeout. Phase 3 still sees the 101; if it
                // blocks, the client never switches and the relay ends.
                let on_upstream = hyper::upgrade::on(&mut resp);
                let token = resp.headers().get(header::UPGRADE).cloned();
                tokio::spawn(relay(
                    on_client,
                    on_upstream,
                    state.config.websocket_idle_timeout,
                ));
                let mut out = response::filter(resp, fin, host, conn, timeout).await;
                if out.status() == StatusCode::SWITCHING_PROTOCOLS {
                    let h = out.headers_mut();
                    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                    if let Some(t) = token {
                        h.insert(header::UPGRADE, t);
                    }
                }
                return out;
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
                    return fin
                        .error_response(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
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
    fin.error_response(last_failure.0, last_failure.1)
}

fn is_length_limit(e: &UpstreamError) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        src = s.source();
    }
    false
}

/// Relays bytes both ways between an upgraded client connection and an upgraded upstream
/// one, until either side ends or neither sends anything for `idle`.
async fn relay(
    client: hyper::upgrade::OnUpgrade,
    upstream: hyper::upgrade::OnUpgrade,
    idle: Duration,
) {
    let (Ok(client), Ok(upstream)) = (client.await, upstream.await) else {
        return;
    };
    let (mut cr, mut cw) = tokio::io::split(TokioIo::new(client));
    let (mut ur, mut uw) = tokio::io::split(TokioIo::new(upstream));
    let mut cbuf = vec![0u8; 16 * 1024];
    let mut ubuf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            r = cr.read(&mut cbuf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => if uw.write_all(&cbuf[..n]).await.is_err() { break },
            },
            r = ur.read(&mut ubuf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => if cw.write_all(&ubuf[..n]).await.is_err() { break },
            },
            _ = tokio::time::sleep(idle) => {
                tracing::debug!("upgraded connection idle: closed");
                break;
            }
        }
    }
    let _ = cw.shutdown().await;
    let _ = uw.shutdown().await;
}
