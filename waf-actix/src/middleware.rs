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
use waf_core::host::{block_response, client_addr, request_id};
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
    /// The answer to an intervention: a block page (or redirect) with the request id. Runs
    /// phase 5 and sends the report before returning.
    fn block(&self, mut finisher: Finisher, i: &Intervention) -> HttpResponse<WafBody> {
        finisher.set_intervention(i.clone());
        let effects = finisher.tx().policy_effects().clone();
        drop(finisher);
        let mut page = block_response(i, self.id, self.accept);
        let status = StatusCode::from_u16(page.status.as_u16()).unwrap_or(StatusCode::FORBIDDEN);
        let mut res = HttpResponse::build(status);
        res.insert_header((header::CONTENT_TYPE, page.content_type))
            .insert_header((header::CACHE_CONTROL, "no-store"));
        // Native policy: Retry-After, and a rule's own page.
        for (k, v) in &effects.response_headers {
            res.insert_header((k.as_str(), v.as_str()));
        }
        if let Some(own) = &effects.page {
            res.insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"));
            page.body = String::from_utf8_lossy(own).into_owned();
        }
        if let Some(location) = page.location {
            res.insert_header((header::LOCATION, location));
        }
        if i.action == DisruptiveAction::Drop {
            res.force_close();
        }
        let mut res = res.body(page.body);
        self.set_request_id(res.headers_mut());
        res.map_body(|_, b: BoxBody| WafBody::new(None, Some(b), None))
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
