//! [`WafService`]: runs the five phases around the inner service.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{ACCEPT, CONTENT_LENGTH};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Body;
use http_body_util::BodyExt;
use tower_service::Service;
use waf_core::host::{
    after_mail, client_addr, gate_http_response, intervention_response, request_id,
};
use waf_core::limits::DEFAULT_GATE_FORM_LEN;
use waf_core::{ConnectionInfo, DisruptiveAction, Intervention, Transaction, Verdict};

use crate::body::WafBody;
use crate::config::{Config, OverLimit};
use crate::future::ResponseFuture;
use waf_core::host::Finisher;

/// The peer address of a connection, as a request extension. Insert it when serving with
/// hyper directly; with axum, `into_make_service_with_connect_info::<SocketAddr>()` is read
/// as well. Without either, the peer is taken to be `0.0.0.0:0` (never a trusted proxy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The local address a connection was accepted on (`SERVER_ADDR`), as a request extension.
/// Optional: `0.0.0.0:0` without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// The request id the WAF used for a request, as a request extension the handler can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(pub String);

/// Tower middleware that inspects requests and responses with a [`waf_core::Waf`]; made by
/// [`WafLayer`](crate::WafLayer).
///
/// A blocked request never reaches the inner service. Bodies the rules do not inspect are
/// streamed through untouched; inspected bodies are buffered up to the configured limit and
/// passed on byte for byte.
#[derive(Clone, Debug)]
pub struct WafService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> WafService<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        WafService { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for WafService<S>
where
    S: Service<Request<WafBody<ReqBody>>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Body + Unpin + Send + 'static,
    ReqBody::Data: Send,
    ResBody: Body + Unpin + Send + 'static,
    ResBody::Data: Send,
{
    type Response = Response<WafBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // The service that was polled ready goes into the future; a fresh clone stays
        // behind for the next request (tower-service docs, "Be careful when cloning inner
        // services").
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();

        let (mut parts, body) = req.into_parts();
        let peer = parts
            .extensions
            .get::<PeerAddr>()
            .map(|p| p.0)
            .or_else(|| axum_peer(&parts.extensions))
            .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let local = parts
            .extensions
            .get::<LocalAddr>()
            .map_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0), |l| {
                l.0
            });
        let trusted = config.options.trusted_proxies.contains(peer.ip());
        let client = client_addr(peer.ip(), &parts.headers, &config.options.trusted_proxies);
        let conn = ConnectionInfo::new(SocketAddr::new(client, peer.port()), local)
            .with_tls(parts.uri.scheme_str() == Some("https"));
        let now = SystemTime::now();
        let mut tx = match request_id(&parts.headers, trusted, &config.options.request_id_header) {
            Some(id) => config.waf.transaction_with_id(&conn, now, &id),
            None => config.waf.transaction(&conn, now),
        };
        let id = tx.unique_id().to_owned();
        let accept = parts.headers.get(ACCEPT).cloned();

        let verdict = phase1(&mut tx, &parts);
        parts.extensions.insert(RequestId(id.clone()));
        let mut finisher = Finisher::new(tx, Arc::clone(&config.sink));
        if let Verdict::Intervene(i) = verdict {
            return ResponseFuture::blocked(block(&config, finisher, &i, &id, accept.as_ref()));
        }
        // A gate endpoint (`/.waf/`): the core answers it, the application never sees it.
        if config.waf.is_gate_path(parts.uri.path().as_bytes()) {
            return ResponseFuture::inner(Box::pin(async move {
                Ok(gate(&config, finisher, &parts, body, &conn, &id).await)
            }));
        }
        // Native policy: request headers it sets or removes.
        finisher
            .tx()
            .policy_effects()
            .edit_request_headers(&mut parts.headers);

        if !finisher.tx().wants_request_body() {
            if let Verdict::Intervene(i) = finisher.tx().request_end() {
                return ResponseFuture::blocked(block(&config, finisher, &i, &id, accept.as_ref()));
            }
            let req = Request::from_parts(parts, WafBody::stream(body, None));
            return ResponseFuture::inner(Box::pin(respond(
                inner, req, finisher, config, id, accept,
            )));
        }

        // A declared length over the limit is rejected before any of the body is read.
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > config.options.request_body_limit as u64)
            && config.options.request_body_over_limit == OverLimit::Reject
        {
            if let Some(i) = over_limit(&config, &mut finisher, OverLimit::Reject, 413, "request") {
                return ResponseFuture::blocked(block(&config, finisher, &i, &id, accept.as_ref()));
            }
        }

        ResponseFuture::inner(Box::pin(async move {
            let body = match read_request_body(&config, &mut finisher, body).await {
                Ok(body) => body,
                Err(i) => return Ok(block(&config, finisher, &i, &id, accept.as_ref())),
            };
            if let Verdict::Intervene(i) = finisher.tx().request_end() {
                return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
            }
            let req = Request::from_parts(parts, body);
            respond(inner, req, finisher, config, id, accept).await
        }))
    }
}

/// Phase 1: request line and headers.
fn phase1(tx: &mut Transaction, parts: &http::request::Parts) -> Verdict {
    let headers = waf_core::host::request_headers(parts);
    tx.request_headers(&waf_core::host::request_head(parts, &headers))
}

/// Feeds the request body to the engine up to the limit. Returns the body for the handler
/// (the buffered bytes, then the unread rest), or the intervention to answer with.
async fn read_request_body<B>(
    config: &Config,
    finisher: &mut Finisher,
    mut body: B,
) -> Result<WafBody<B>, Intervention>
where
    B: Body + Unpin,
{
    let limit = config.options.request_body_limit;
    let mut buf = BytesMut::new();
    let mut trailers = None;
    loop {
        let frame = match body.frame().await {
            None => {
                return Ok(WafBody::buffered(buf.freeze(), trailers, None, None));
            }
            Some(Err(_)) => return Err(bad_request()),
            Some(Ok(frame)) => frame,
        };
        let mut data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
                continue;
            }
        };
        let data = data.copy_to_bytes(data.remaining());
        let room = limit.saturating_sub(buf.len());
        let inspected = &data[..room.min(data.len())];
        if let Verdict::Intervene(i) = finisher.tx().request_body(inspected) {
            return Err(i);
        }
        buf.extend_from_slice(&data);
        if data.len() > room {
            let action = config.options.request_body_over_limit;
            if let Some(i) = over_limit(config, finisher, action, 413, "request") {
                return Err(i);
            }
            return Ok(WafBody::buffered(buf.freeze(), None, Some(body), None));
        }
    }
}

/// Calls the inner service, then runs phases 3 and 4 on its response.
async fn respond<S, ReqBody, ResBody>(
    mut inner: S,
    req: Request<WafBody<ReqBody>>,
    mut finisher: Finisher,
    config: Arc<Config>,
    id: String,
    accept: Option<HeaderValue>,
) -> Result<Response<WafBody<ResBody>>, S::Error>
where
    S: Service<Request<WafBody<ReqBody>>, Response = Response<ResBody>>,
    ResBody: Body + Unpin,
{
    let response = inner.call(req).await?;
    let (mut parts, mut body) = response.into_parts();
    let headers = waf_core::host::response_headers(&parts.headers);
    let head = waf_core::host::response_head(parts.status, parts.version, &headers);
    if let Verdict::Intervene(i) = finisher.tx().response_headers(&head) {
        return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
    }
    set_request_id(&config, &mut parts.headers, &id);
    // Native policy: the gates' renewed and new cookies.
    finisher
        .tx()
        .policy_effects()
        .edit_response_headers(&mut parts.headers);

    if !finisher.tx().wants_response_body() {
        if let Verdict::Intervene(i) = finisher.tx().response_end() {
            return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
        }
        return Ok(Response::from_parts(
            parts,
            WafBody::stream(body, Some(finisher)),
        ));
    }

    // Buffer so that phase 4 can still replace the response.
    let limit = config.options.response_body_limit;
    let mut buf = BytesMut::new();
    let mut trailers = None;
    let mut rest = None;
    loop {
        let frame = match body.frame().await {
            None => break,
            Some(Err(_)) => {
                // The handler's body failed: nothing sensible can be sent but an error.
                let i = Intervention {
                    status: 502,
                    action: DisruptiveAction::Deny,
                    rule_id: 0,
                    message: Some("response body failed".into()),
                };
                return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
            }
            Some(Ok(frame)) => frame,
        };
        let mut data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
                continue;
            }
        };
        let data = data.copy_to_bytes(data.remaining());
        let room = limit.saturating_sub(buf.len());
        let inspected = &data[..room.min(data.len())];
        if let Verdict::Intervene(i) = finisher.tx().response_body(inspected) {
            return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
        }
        buf.extend_from_slice(&data);
        if data.len() > room {
            let action = config.options.response_body_over_limit;
            if let Some(i) = over_limit(&config, &mut finisher, action, 500, "response") {
                return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
            }
            rest = Some(body);
            break;
        }
    }
    if let Verdict::Intervene(i) = finisher.tx().response_end() {
        return Ok(block(&config, finisher, &i, &id, accept.as_ref()));
    }
    let body = WafBody::buffered(buf.freeze(), trailers, rest, Some(finisher));
    Ok(Response::from_parts(parts, body))
}

/// A body over its limit: the intervention to answer with under `Reject` in blocking mode,
/// else `None` (after noting a would-be intervention in detection-only mode).
fn over_limit(
    config: &Config,
    finisher: &mut Finisher,
    action: OverLimit,
    status: u16,
    what: &str,
) -> Option<Intervention> {
    waf_core::host::over_limit(config.waf.engine_mode(), action, status, what, finisher)
}

fn bad_request() -> Intervention {
    Intervention {
        status: 400,
        action: DisruptiveAction::Deny,
        rule_id: 0,
        message: Some("request body could not be read".into()),
    }
}

/// The answer to an intervention: the gate's page, or a block page (or redirect), with the
/// request id ([`waf_core::host::intervention_response`]). Runs phase 5 and sends the
/// report before returning.
fn block<B>(
    config: &Config,
    mut finisher: Finisher,
    i: &Intervention,
    id: &str,
    accept: Option<&HeaderValue>,
) -> Response<WafBody<B>> {
    finisher.set_intervention(i.clone());
    let effects = finisher.tx().policy_effects().clone();
    drop(finisher);
    let answer = intervention_response(
        &config.waf,
        &effects,
        i,
        id,
        accept.map(HeaderValue::as_bytes),
    );
    let (parts, body) = answer.into_parts();
    let mut response = Response::from_parts(parts, WafBody::full(Bytes::from(body)));
    set_request_id(config, response.headers_mut(), id);
    response
}

/// A gate endpoint: reads the form body (at most [`DEFAULT_GATE_FORM_LEN`] bytes), lets the
/// core answer, sends the sign-in mail first when there is one.
async fn gate<B, ResBody>(
    config: &Config,
    finisher: Finisher,
    parts: &http::request::Parts,
    mut body: B,
    conn: &ConnectionInfo,
    id: &str,
) -> Response<WafBody<ResBody>>
where
    B: Body + Unpin,
{
    let mut buf = BytesMut::new();
    loop {
        match body.frame().await {
            None => break,
            Some(Err(_)) => return block(config, finisher, &bad_request(), id, None),
            Some(Ok(frame)) => {
                if let Ok(mut d) = frame.into_data() {
                    if buf.len() + d.remaining() > DEFAULT_GATE_FORM_LEN {
                        let i = Intervention {
                            status: 413,
                            action: DisruptiveAction::Deny,
                            rule_id: 0,
                            message: Some("gate form too large".into()),
                        };
                        return block(config, finisher, &i, id, None);
                    }
                    let n = d.remaining();
                    buf.extend_from_slice(&d.copy_to_bytes(n));
                }
            }
        }
    }
    let headers = waf_core::host::request_headers(parts);
    let head = waf_core::host::request_head(parts, &headers);
    let Some(mut r) = config
        .waf
        .gate_request(conn, &head, &buf, SystemTime::now(), id)
    else {
        let i = Intervention {
            status: 404,
            action: DisruptiveAction::Deny,
            rule_id: 0,
            message: Some("no such gate endpoint".into()),
        };
        return block(config, finisher, &i, id, None);
    };
    drop(finisher);
    if let Some(mail) = r.mail.clone() {
        let sent = match &config.mailer {
            Some(m) => m.send(mail).await,
            None => Err("no mailer (WafLayerBuilder::mailer)".to_string()),
        };
        if let Err(e) = &sent {
            // The error names the relay's answer, never the address or the code.
            tracing::error!(error = %e, "sign-in mail not sent");
        }
        r = after_mail(r, &sent);
    }
    let (parts, body) = gate_http_response(&r).into_parts();
    let mut response = Response::from_parts(parts, WafBody::full(Bytes::from(body)));
    set_request_id(config, response.headers_mut(), id);
    response
}

fn set_request_id(config: &Config, headers: &mut HeaderMap, id: &str) {
    if let Ok(v) = HeaderValue::from_str(id) {
        headers.insert(config.options.request_id_header.clone(), v);
    }
}

#[cfg(feature = "axum")]
fn axum_peer(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
}

#[cfg(not(feature = "axum"))]
fn axum_peer(_: &http::Extensions) -> Option<SocketAddr> {
    None
}
