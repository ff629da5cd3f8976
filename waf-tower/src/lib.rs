//! Tower middleware that runs a [`waf_core::Waf`] (OWASP CRS, SecLang rules) in front of any
//! tower or hyper service, axum routers included.
//!
//! # Overview
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use waf_tower::WafLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let waf = waf_core::Waf::builder().seclang_file("crs.conf").build()?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(WafLayer::new(waf));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // ConnectInfo gives the middleware the peer address.
//! axum::serve(
//!     listener,
//!     app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
//! )
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! Per request, [`WafService`]:
//!
//! 1. works out the client (the peer, or what trusted proxies say in `X-Forwarded-For` /
//!    `Forwarded`, see [`waf_core::host::client_addr`]) and the request id (reused from a
//!    trusted proxy's `x-request-id`, else made up by the engine), and runs phase 1 on the
//!    request line and headers;
//! 2. if the rules inspect the request body, buffers it up to
//!    [`WafLayerBuilder::request_body_limit`], runs phase 2, and hands the handler the very
//!    same bytes; otherwise runs phase 2 at once and streams the body through untouched;
//! 3. calls the inner service and runs phase 3 on the response head;
//! 4. buffers the response body only when the rules inspect its MIME type
//!    (`SecResponseBodyMimeType`), up to [`WafLayerBuilder::response_body_limit`], and runs
//!    phase 4, so that a leak found in the body still replaces the response;
//! 5. runs phase 5 and sends the [`waf_core::Report`] to the sink (a `tracing` event by
//!    default, see [`WafLayerBuilder::on_report`]) when the response body ends or is dropped.
//!
//! An intervention at any phase answers with the rule's status and a small HTML or JSON page
//! (by `Accept`) that states the request id and nothing else; the id is also in the
//! `x-request-id` response header, on every response. `redirect:URL` answers with a redirect.
//! A blocked request never reaches the inner service. Detection-only mode
//! (`SecRuleEngine DetectionOnly`) never blocks and reports `would_intervene`.
//!
//! # Gates
//!
//! With a policy that has `[gates]` (challenges, waiting rooms, email-code sign-in), the
//! middleware serves them as waf-proxy does, with the same pages: a gate's intervention is
//! answered with its page (or JSON for API clients, or a redirect), requests under the gate
//! prefix (`/.waf/` by default) are answered by the core and never reach the inner service
//! (their form body is read up to `waf_core::limits::DEFAULT_GATE_FORM_LEN`), and passed
//! responses get the gates' cookies (admission, renewals). Sign-in codes are sent by the
//! [`WafLayerBuilder::mailer`] (the application's own `waf_core::host::Mailer`, or
//! `SmtpMailer` with the `smtp` feature), awaited before the code page is answered.
//!
//! # Untrusted input
//!
//! Nothing a client sends makes the middleware panic or return an error: a body that cannot
//! be read gets 400, a body over the limit gets 413 or is inspected by its prefix
//! ([`OverLimit`]). Memory per request is bounded by the request body limit plus one chunk,
//! and, for inspected responses, the response body limit plus one chunk.
//!
//! Request and response bodies must be `Unpin` (axum's and hyper's are).
//!
//! # Crate features
//!
//! - `axum` (default): read the peer address from axum's `ConnectInfo<SocketAddr>`. Without
//!   it, insert a [`PeerAddr`] extension.
//! - `redis`: [`WafLayerBuilder::fleet_policy`], a policy whose rate limits and bans hold
//!   for a fleet of servers through Redis ([`waf_redis`], re-exported).
//! - `smtp`: `SmtpMailer`, a ready mailer for the sign-in codes (lettre on tokio).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "redis")]
pub use waf_redis;

mod body;
mod config;
mod future;
mod layer;
#[cfg(feature = "smtp")]
mod mail;
mod service;

pub use body::WafBody;
pub use config::{
    OverLimit, DEFAULT_REQUEST_BODY_LIMIT, DEFAULT_REQUEST_ID_HEADER, DEFAULT_RESPONSE_BODY_LIMIT,
};
pub use future::ResponseFuture;
pub use layer::{WafLayer, WafLayerBuilder};
#[cfg(feature = "smtp")]
pub use mail::{SmtpMailer, SmtpSecurity, DEFAULT_SMTP_TIMEOUT};
pub use service::{LocalAddr, PeerAddr, RequestId, WafService};
pub use waf_core;
