//! Stage 2, `request_body_filter`: when the WAF wants the body, it is buffered up to the
//! host's limit (413 past it) and WAF phase 2 runs *before* anything goes upstream;
//! otherwise it streams through, still bounded by the limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use waf_core::Verdict;

use super::logging::{Finish, ResBody};
use crate::client::{BoxError, ProxyBody};
use crate::state::{Host, State};

/// The request body as it goes upstream.
pub(super) enum Sent {
    /// Streamed from the client: can be sent once.
    Stream(ProxyBody),
    /// Read whole (or empty): can be sent again to another server.
    Replayable(Bytes),
}

/// Runs phase 2 on `body` (buffered when the WAF wants it), or answers the request.
pub(super) async fn filter(
    body: Incoming,
    host: &Host,
    state: &Arc<State>,
    declared: Option<u64>,
    fin: &mut Finish,
) -> Result<Sent, Box<Response<ResBody>>> {
    let limit = host.options.request_body_limit as u64;
    let Some(tx) = fin.tx.as_mut() else {
        // The engine is off: the body streams, bounded by the limit.
        if body.is_end_stream() {
            return Ok(Sent::Replayable(Bytes::new()));
        }
        fin.rec.bytes_in = declared.unwrap_or(0);
        let limited = Limited::new(body, limit as usize).map_err(BoxError::from);
        return Ok(Sent::Stream(limited.boxed()));
    };
    if body.is_end_stream() {
        let t = Instant::now();
        let v = tx.request_end();
        fin.rec.waf_time += t.elapsed();
        if let Verdict::Intervene(i) = v {
            return Err(Box::new(fin.block(&i)));
        }
        Ok(Sent::Replayable(Bytes::new()))
    } else if tx.wants_request_body() {
        let timeout = state.config.body_read_timeout;
        read_body(body, limit, timeout, fin)
            .await
            .map(Sent::Replayable)
    } else {
        let t = Instant::now();
        let v = tx.request_end();
        fin.rec.waf_time += t.elapsed();
        if let Verdict::Intervene(i) = v {
            return Err(Box::new(fin.block(&i)));
        }
        // Streamed: the declared length is what the log can tell.
        fin.rec.bytes_in = declared.unwrap_or(0);
        let limited = Limited::new(body, limit as usize).map_err(BoxError::from);
        Ok(Sent::Stream(limited.boxed()))
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
