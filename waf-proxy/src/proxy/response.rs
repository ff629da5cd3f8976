//! Stages 4 and 5, `response_filter` and `response_body_filter`: WAF phase 3 (may replace
//! the response), security headers, cookie rule, hop-by-hop headers stripped; then, when
//! phase 4 can block and the type is inspected, the body held for phase 4 (see the
//! [module docs](super)).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use waf_core::{host, Verdict};

use super::logging::{Finish, ResBody};
use super::ConnCtx;
use crate::client::{BoxError, ProxyBody};
use crate::headers;
use crate::state::Host;

/// WAF phase 3, the response headers, and (when phase 4 can block) holding the body.
pub(super) async fn filter(
    resp: Response<Incoming>,
    mut fin: Box<Finish>,
    host: &Host,
    conn: &ConnCtx,
    read_timeout: Duration,
) -> Response<ResBody> {
    let (mut parts, body) = resp.into_parts();
    if let Some(tx) = fin.tx.as_mut() {
        let verdict = {
            let hdrs = host::response_headers(&parts.headers);
            let t = Instant::now();
            let v = tx.response_headers(&host::response_head(parts.status, parts.version, &hdrs));
            fin.rec.waf_time += t.elapsed();
            v
        };
        if let Verdict::Intervene(i) = verdict {
            return fin.block(&i);
        }
        fin.inspect_response = tx.wants_response_body();
    }
    headers::strip_hop_by_hop(&mut parts.headers);
    add_host_headers(&mut parts.headers, host, conn.https);
    if let Some(tx) = fin.tx.as_ref() {
        // Gate cookies renewed or granted on the way (admission, session).
        tx.policy_effects()
            .edit_response_headers(&mut parts.headers);
    }
    headers::harden_cookies(&mut parts.headers, &host.config, conn.https);
    if let Ok(v) = HeaderValue::from_str(&fin.rec.request_id) {
        parts
            .headers
            .insert(host.options.request_id_header.clone(), v);
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
                        fin: Some(fin),
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
            fin: Some(fin),
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

pub(super) fn add_host_headers(h: &mut http::HeaderMap, host: &Host, https: bool) {
    for (n, v) in &host.security_headers {
        // One lookup: kept when the upstream set its own.
        h.entry(n).or_insert_with(|| v.clone());
    }
    if https {
        if let Some(v) = &host.hsts {
            h.insert(header::STRICT_TRANSPORT_SECURITY, v.clone());
        }
    }
}
