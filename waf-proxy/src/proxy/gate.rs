//! The gate endpoints (`/.waf/` by default: the challenge answer, the cookie check,
//! sign-in and sign-out): the core answers them ([`waf_core::Waf::gate_request`]); the
//! proxy reads the small form body, sends the sign-in mail when the answer carries one
//! ([`crate::mail`]), and sends the answer. Nothing is forwarded upstream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::BytesMut;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use waf_core::host;
use waf_core::limits::DEFAULT_GATE_FORM_LEN;
use waf_core::ConnectionInfo;

use super::logging::ResBody;
use super::request::Admitted;
use super::ConnCtx;
use crate::state::State;

/// Answers a gate endpoint request.
pub(super) async fn serve(a: Admitted, conn: &ConnCtx, state: &Arc<State>) -> Response<ResBody> {
    let Admitted {
        parts,
        mut body,
        mut fin,
        host,
        ..
    } = a;
    fin.rec.action = "gate";
    // The form body: small, read with the body timeout.
    let mut buf = BytesMut::new();
    loop {
        let frame = tokio::time::timeout(state.config.body_read_timeout, body.frame()).await;
        match frame {
            Err(_) => {
                return fin.error_response(StatusCode::REQUEST_TIMEOUT, "request body too slow")
            }
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                return fin.error_response(StatusCode::BAD_REQUEST, "bad request body")
            }
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    if buf.len() + d.len() > DEFAULT_GATE_FORM_LEN {
                        return fin.error_response(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "request body too large",
                        );
                    }
                    buf.extend_from_slice(&d);
                }
            }
        }
    }
    fin.rec.bytes_in = buf.len() as u64;
    let host = &state.hosts[host];
    let conn_info = ConnectionInfo::new(
        SocketAddr::new(fin.rec.client_ip, conn.peer.port()),
        conn.local,
    )
    .with_tls(conn.https);
    let hdrs = host::request_headers(&parts);
    let head = host::request_head(&parts, &hdrs);
    let t = Instant::now();
    let answer = host.waf.gate_request(
        &conn_info,
        &head,
        &buf,
        SystemTime::now(),
        &fin.rec.request_id,
    );
    fin.rec.waf_time += t.elapsed();
    let Some(mut r) = answer else {
        return fin.error_response(StatusCode::NOT_FOUND, "not found");
    };
    if let Some(mail) = r.mail.take() {
        let sent = match &state.config.smtp {
            Some(smtp) => crate::mail::send(smtp, &mail).await,
            None => Err("no [smtp] section".to_string()),
        };
        if let Err(e) = sent {
            // The error names the relay's answer, never the address or the code.
            tracing::error!(host = %host.label, error = %e, "sign-in mail not sent");
            if let Some(failed) = r.send_failed.take() {
                r = *failed;
            }
        }
    }
    let mut headers = http::HeaderMap::new();
    r.write_headers(&mut headers);
    let fin = fin.take();
    fin.generated(r.status, headers, r.body)
}
