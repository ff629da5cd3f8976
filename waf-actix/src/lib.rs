//! actix-web middleware that runs a [`waf_core::Waf`] (OWASP CRS, SecLang rules) on every
//! request of an `App`.
//!
//! # Overview
//!
//! ```no_run
//! use actix_web::{web, App, HttpServer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let waf = waf_core::Waf::builder().seclang_file("crs.conf").build()?;
//! HttpServer::new(move || {
//!     App::new()
//!         .wrap(waf_actix::Waf::new(waf.clone()))
//!         .route("/", web::get().to(|| async { "hello" }))
//! })
//! .bind(("127.0.0.1", 8080))?
//! .run()
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! Per request the middleware works out the client (the peer, or what trusted proxies say
//! in `X-Forwarded-For` / `Forwarded`, see [`waf_core::host::client_addr`]) and the request
//! id, runs phase 1, buffers the request body only when the rules inspect it (up to
//! [`WafBuilder::request_body_limit`]) and hands the handler the very same bytes, runs
//! phase 2, calls the handler, runs phase 3 on the response head, buffers the response body
//! only when the rules inspect its MIME type (up to [`WafBuilder::response_body_limit`]) and
//! runs phase 4, then runs phase 5 and sends the [`waf_core::Report`] to the sink (a
//! `tracing` event by default) when the response body is done.
//!
//! An intervention answers with the rule's status and a small HTML or JSON page (by
//! `Accept`) that states the request id and nothing else; the id is in the `x-request-id`
//! response header on every response. A blocked request never reaches the handler.
//! Detection-only mode never blocks and reports `would_intervene`.
//!
//! # Untrusted input
//!
//! Nothing a client sends makes the middleware panic or fail: an unreadable body gets 400,
//! a body over the limit gets 413 or is inspected by its prefix ([`OverLimit`]). Memory per
//! request is bounded by the body limits plus one chunk.
//!
//! # Crate features
//!
//! - `redis`: [`WafBuilder::fleet_policy`], a policy whose rate limits and bans hold for a
//!   fleet of servers through Redis ([`waf_redis`], re-exported).
//! - `smtp`: `SmtpMailer`, a ready mailer for the sign-in codes (waf-tower's, re-exported).
//!
//! # Gates
//!
//! With a policy that has `[gates]` (challenges, waiting rooms, email-code sign-in), the
//! middleware serves them as waf-proxy and waf-tower do, with the same pages: a gate's
//! intervention is answered with its page (or JSON, or a redirect), requests under the gate
//! prefix (`/.waf/` by default) are answered by the core and never reach the app, passed
//! responses get the gates' cookies, and sign-in codes go out through
//! [`WafBuilder::mailer`].
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod config;
mod middleware;

pub use body::WafBody;
pub use config::{
    OverLimit, WafBuilder, DEFAULT_REQUEST_BODY_LIMIT, DEFAULT_REQUEST_ID_HEADER,
    DEFAULT_RESPONSE_BODY_LIMIT,
};
pub use middleware::{RequestId, Waf, WafMiddleware};
pub use waf_core;
#[cfg(feature = "redis")]
pub use waf_redis;
#[cfg(feature = "smtp")]
pub use waf_tower::{SmtpMailer, SmtpSecurity, DEFAULT_SMTP_TIMEOUT};
