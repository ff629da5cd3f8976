//! [`Waf`] (the `Transform`) and [`WafMiddleware`] (the service it makes).

use std::future::{ready, Future, Ready};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{forward_ready, Payload, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{StatusCode, Version};
use actix_web::{Error, HttpMessage, HttpResponse};
use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use waf_core::host::{
    after_mail, client_addr, gate_http_response, intervention_response, request_id,
};
use waf_core::limits::DEFAULT_GATE_FORM_LEN;
use waf_core::{
    ConnectionInfo, DisruptiveAction, Intervention, RequestHead, ResponseHead, Verdict,
};

use crate::body::{PrefixedPayload, WafBody};
use crate::config::{Config, OverLimit, WafBuilder};
use waf_core::host::Finisher;

/// The request id the WAF used, as a request extension the handler can read
/// (`req.extensions().get::<RequestId>()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(pub String);

/// actix-web middleware that inspects requests and responses with a [`waf_core::Waf`]:
/// `App::new().wrap(waf_actix::Waf::new(waf))`. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub struct Waf {
    config: Arc<Config>,
}

impl Waf {
    /// The middleware with the default options (see [`WafBuilder`]).
    pub fn new(waf: waf_core::Waf) -> Waf {
        WafBuilder::new(waf).build()
    }

    /// Starts a builder for non-default options.
    pub fn builder(waf: waf_core::Waf) -> WafBuilder {
        WafBuilder::new(waf)
    }

    pub(crate) fn from_config(config: Arc<Config>) -> Waf {
        Waf { config }
    }
}

impl<S, B> Transform<S, ServiceRequest> for Waf
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<WafBody>;
    type Error = Error;
    type Transform = WafMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<WafMiddleware<S>, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(WafMiddleware {
            service: Rc::new(service),
            config: self.config.clone(),
        }))
    }
}

/// The service [`Waf`] wraps around the app. A blocked request never reaches the inner
/// service.
#[derive(Debug)]
pub struct WafMiddleware<S> {
    service: Rc<S>,
    config: Arc<Config>,
}

type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

impl<S, B> Service<ServiceRequest> for WafMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<WafBody>;
    type Error = Error;
    type Future = LocalBoxFuture<Result<ServiceResponse<WafBody>, Error>>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let service = self.service.clone();
        let config = self.config.clone();
        Box::pin(handle(service, config, req))
    }
}

async fn handle<S, B>(
    service: Rc<S>,
    config: Arc<Config>,
    mut req: ServiceRequest,
) -> Result<ServiceResponse<WafBody>, Error>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody + 'static,
{
    let unspecified = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
    let peer = req.peer_addr().unwrap_or(unspecified);
    let local = req.app_config().local_addr();
    // The host helpers take `http` 1 headers; actix-web 4 has its own, so copy the few
    // they read.
    let mut forwarding = http::HeaderMap::new();
    for name in [
        http::header::FORWARDED,
        http::HeaderName::from_static("x-forwarded-for"),
        config.options.request_id_header.clone(),
    ] {
        for v in req.headers().get_all(name.as_str()) {
            if let Ok(v) = http::HeaderValue::from_bytes(v.as_bytes()) {
                forwarding.append(name.clone(), v);
            }
        }
    }
    let trusted = config.options.trusted_proxies.contains(peer.ip());
    let client = client_addr(peer.ip(), &forwarding, &config.options.trusted_proxies);
    let conn = ConnectionInfo::new(SocketAddr::new(client, peer.port()), local)
        .with_tls(req.connection_info().scheme() == "https");
    let now = SystemTime::now();
    let tx = match request_id(&forwarding, trusted, &config.options.request_id_header) {
        Some(id) => config.waf.transaction_with_id(&conn, now, &id),
        None => config.waf.transaction(&conn, now),
    };
    let id = tx.unique_id().to_owned();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .map(|v| v.as_bytes().to_vec());
    let mut finisher = Finisher::new(tx, Arc::clone(&config.sink));
    req.extensions_mut().insert(RequestId(id.clone()));
    let ctx = Ctx {
        config: &config,
        id: &id,
        accept: accept.as_deref(),
    };

    // Phase 1.
    let verdict = {
        let mut headers: Vec<(&[u8], &[u8])> = req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes()))
            .collect();
        if !req.headers().contains_key(header::HOST) {
            if let Some(authority) = req.uri().authority() {
                headers.push((b"host", authority.as_str().as_bytes()));
            }
        }
        let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
        let head = RequestHead::new(
            req.method().as_str().as_bytes(),
            target.as_bytes(),
            version_bytes(req.version()),
            &headers,
        );
        finisher.tx().request_headers(&head)
    };
    if let Verdict::Intervene(i) = verdict {
        return Ok(req.into_response(ctx.block(finisher, &i)));
    }
    // A gate endpoint (`/.waf/`): the core answers it, the application never sees it.
    if config.waf.is_gate_path(req.path().as_bytes()) {
        let payload = req.take_payload();
        let res = ctx.gate(finisher, &req, &conn, payload).await;
        return Ok(req.into_response(res));
    }
    // Native policy: request headers it sets or removes.
    for edit in &finisher.tx().policy_effects().request_headers {
        use actix_web::http::header::{HeaderName, HeaderValue};
        match edit {
            waf_core::policy::HeaderEdit::Set(k, v) => {
                if let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::from_str(v))
                {
                    req.headers_mut().insert(k, v);
                }
            }
            waf_core::policy::HeaderEdit::Remove(k) => {
                if let Ok(k) = HeaderName::try_from(k.as_str()) {
                    req.headers_mut().remove(k);
                }
            }
            _ => {}
        }
    }

    // Phase 2.
    if finisher.tx().wants_request_body() {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > config.options.request_body_limit as u64)
            && config.options.request_body_over_limit == OverLimit::Reject
        {
            if let Some(i) = over_limit(&config, &mut finisher, OverLimit::Reject, 413, "request") {
                return Ok(req.into_response(ctx.block(finisher, &i)));
            }
        }
        let payload = req.take_payload();
        match read_request_body(&config, &mut finisher, payload).await {
            Ok(payload) => req.set_payload(payload),
            Err(i) => return Ok(req.into_response(ctx.block(finisher, &i))),
        }
    }
    if let Verdict::Intervene(i) = finisher.tx().request_end() {
        return Ok(req.into_response(ctx.block(finisher, &i)));
    }

    // The handler, then phase 3.
    let res = service.call(req).await?;
    let (req, res) = res.into_parts();
    let verdict = {
        let headers: Vec<(&[u8], &[u8])> = res
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes()))
            .collect();
        let head = ResponseHead::new(
            res.status().as_u16(),
            version_bytes(res.head().version),
            &headers,
        );
        finisher.tx().response_headers(&head)
    };
    if let Verdict::Intervene(i) = verdict {
        return Ok(ServiceResponse::new(req, ctx.block(finisher, &i)));
    }
    let (mut head, body) = res.into_parts();
    ctx.set_request_id(head.headers_mut());
    // Native policy: the gates' renewed and new cookies.
    for c in &finisher.tx().policy_effects().set_cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            head.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    let mut body = body.boxed();

    // Phase 4.
    if !finisher.tx().wants_response_body() {
        if let Verdict::Intervene(i) = finisher.tx().response_end() {
            return Ok(ServiceResponse::new(req, ctx.block(finisher, &i)));
        }
        let body = WafBody::new(None, Some(body), Some(finisher));
        return Ok(ServiceResponse::new(req, head.set_body(body)));
    }
    let limit = config.options.response_body_limit;
    let mut buf = BytesMut::new();
    let mut rest = None;
    loop {
        let chunk = std::future::poll_fn(|cx| Pin::new(&mut body).poll_next(cx)).await;
        let data = match chunk {
            None => break,
            Some(Ok(data)) => data,
            Some(Err(_)) => {
                let i = deny(502, "response body failed");
                return Ok(ServiceResponse::new(req, ctx.block(finisher, &i)));
            }
        };
        let room = limit.saturating_sub(buf.len());
        if let Verdict::Intervene(i) = finisher.tx().response_body(&data[..room.min(data.len())]) {
            return Ok(ServiceResponse::new(req, ctx.block(finisher, &i)));
        }
        buf.extend_from_slice(&data);
        if data.len() > room {
            let action = config.options.response_body_over_limit;
            if let Some(i) = over_limit(&config, &mut finisher, action, 500, "response") {
                return Ok(ServiceResponse::new(req, ctx.block(finisher, &i)));
            }
            rest = Some(body);
            break;
        }
    }
    if let Verdict::Intervene(i) = finisher.tx().response_end() {
        return Ok(ServiceResponse::new(req, ctx.block(finisher, &i)));
    }
    let body = WafBody::new(Some(buf.freeze()), rest, Some(finisher));
    Ok(ServiceResponse::new(req, head.set_body(body)))
}

/// Feeds the request payload to the engine up to the limit. Returns the payload for the
/// handler (the buffered bytes, then the unread rest), or the intervention to answer with.
async fn read_request_body(
    config: &Config,
    finisher: &mut Finisher,
    mut payload: Payload,
) -> Result<Payload, Intervention> {
    let limit = config.options.request_body_limit;
    let mut buf = BytesMut::new();
    loop {
        let chunk = std::future::poll_fn(|cx| Pin::new(&mut payload).poll_next(cx)).await;
        let data: Bytes = match chunk {
            None => return Ok(Payload::from(buf.freeze())),
            Some(Ok(data)) => data,
            Some(Err(_)) => return Err(deny(400, "request body could not be read")),
        };
        let room = limit.saturating_sub(buf.len());
        if let Verdict::Intervene(i) = finisher.tx().request_body(&data[..room.min(data.len())]) {
            return Err(i);
        }
        buf.extend_from_slice(&data);
        if data.len() > room {
            let action = config.options.request_body_over_limit;
            if let Some(i) = over_limit(config, finisher, action, 413, "request") {
                return Err(i);
            }
            let stream: Pin<Box<dyn Stream<Item = _>>> = Box::pin(PrefixedPayload {
                prefix: Some(buf.freeze()),
                rest: Some(payload),
            });
            return Ok(Payload::Stream { payload: stream });
        }
    }
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

fn deny(status: u16, message: &str) -> Intervention {
    Intervention {
        status,
        action: DisruptiveAction::Deny,
        rule_id: 0,
        message: Some(message.to_owned()),
    }
}

fn version_bytes(version: Version) -> &'static [u8] {
    match version {
        Version::HTTP_09 => b"HTTP/0.9",
        Version::HTTP_10 => b"HTTP/1.0",
        Version::HTTP_2 => b"HTTP/2.0",
        Version::HTTP_3 => b"HTTP/3.0",
        _ => b"HTTP/1.1",
    }
}

/// What every answer of one request needs.
struct Ctx<'a> {
    config: &'a Config,
    id: &'a str,
    accept: Option<&'a [u8]>,
}

impl Ctx<'_> {
    /// The answer to an intervention: the gate's page, or a block page (or redirect), with
    /// the request id ([`waf_core::host::intervention_response`]). Runs phase 5 and sends
    /// the report before returning.
    fn block(&self, mut finisher: Finisher, i: &Intervention) -> HttpResponse<WafBody> {
        finisher.set_intervention(i.clone());
        let effects = finisher.tx().policy_effects().clone();
        drop(finisher);
        let answer = intervention_response(&self.config.waf, &effects, i, self.id, self.accept);
        let mut res = self.respond(answer);
        if i.action == DisruptiveAction::Drop {
            res.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
        }
        res
    }

    /// An `http` answer from the core as an actix-web response, with the request id.
    fn respond(&self, answer: http::Response<Vec<u8>>) -> HttpResponse<WafBody> {
        let (parts, body) = answer.into_parts();
        let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::FORBIDDEN);
        let mut res = HttpResponse::with_body(status, BoxBody::new(body));
        for (k, v) in &parts.headers {
            if let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_str().as_bytes()),
                HeaderValue::from_bytes(v.as_bytes()),
            ) {
                res.headers_mut().append(k, v);
            }
        }
        self.set_request_id(res.headers_mut());
        res.map_body(|_, b: BoxBody| WafBody::new(None, Some(b), None))
    }

    /// A gate endpoint: reads the form body (at most [`DEFAULT_GATE_FORM_LEN`] bytes), lets
    /// the core answer, sends the sign-in mail first when there is one.
    async fn gate(
        &self,
        finisher: Finisher,
        req: &ServiceRequest,
        conn: &ConnectionInfo,
        mut payload: Payload,
    ) -> HttpResponse<WafBody> {
        let mut buf = BytesMut::new();
        loop {
            let chunk = std::future::poll_fn(|cx| Pin::new(&mut payload).poll_next(cx)).await;
            match chunk {
                None => break,
                Some(Ok(data)) => {
                    if buf.len() + data.len() > DEFAULT_GATE_FORM_LEN {
                        return self.block(finisher, &deny(413, "gate form too large"));
                    }
                    buf.extend_from_slice(&data);
                }
                Some(Err(_)) => {
                    return self.block(finisher, &deny(400, "request body could not be read"))
                }
            }
        }
        let answer = {
            let headers: Vec<(&[u8], &[u8])> = req
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes()))
                .collect();
            let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
            let head = RequestHead::new(
                req.method().as_str().as_bytes(),
                target.as_bytes(),
                version_bytes(req.version()),
                &headers,
            );
            self.config
                .waf
                .gate_request(conn, &head, &buf, SystemTime::now(), self.id)
        };
        let Some(mut r) = answer else {
            return self.block(finisher, &deny(404, "no such gate endpoint"));
        };
        drop(finisher);
        if let Some(mail) = r.mail.clone() {
            let sent = match &self.config.mailer {
                Some(m) => m.send(mail).await,
                None => Err("no mailer (WafBuilder::mailer)".to_string()),
            };
            if let Err(e) = &sent {
                // The error names the relay's answer, never the address or the code.
                tracing::error!(error = %e, "sign-in mail not sent");
            }
            r = after_mail(r, &sent);
        }
        self.respond(gate_http_response(&r))
    }

    fn set_request_id(&self, headers: &mut actix_web::http::header::HeaderMap) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(self.config.options.request_id_header.as_str().as_bytes()),
            HeaderValue::from_str(self.id),
        ) {
            headers.insert(name, value);
        }
    }
}
