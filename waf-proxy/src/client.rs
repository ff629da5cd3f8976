//! Upstream connection pools: one hyper-util pooled client per worker runtime and upstream
//! timeout profile, so a pooled connection is only ever used by the runtime that owns its
//! task (no cross-thread hand-off; `notes/proxy-limit.md`). Pools are keyed by server
//! authority inside the client and survive reloads that keep the same timeouts.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::combinators::BoxBody;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;

use crate::config::UpstreamConfig;
use crate::metrics::UPSTREAM_CONNECTIONS;

/// Boxed error of bodies on the proxy path.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body type sent upstream and returned downstream.
pub type ProxyBody = BoxBody<Bytes, BoxError>;
/// A pooled upstream client.
pub type UpstreamClient = Client<CountingConnector, ProxyBody>;

/// An `HttpConnector` that counts the connections it opens (pool misses).
#[derive(Clone, Debug)]
pub struct CountingConnector(HttpConnector);

impl tower_service::Service<Uri> for CountingConnector {
    type Response = TokioIo<TcpStream>;
    type Error = <HttpConnector as tower_service::Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let fut = self.0.call(uri);
        Box::pin(async move {
            let io = fut.await?;
            UPSTREAM_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
            Ok(io)
        })
    }
}

type Key = (Duration, Duration, usize);

thread_local! {
    static CLIENTS: RefCell<HashMap<Key, UpstreamClient>> = RefCell::new(HashMap::new());
}

/// The calling worker's client for `u`'s timeout profile.
pub fn client_for(u: &UpstreamConfig) -> UpstreamClient {
    let key = (u.connect_timeout, u.idle_timeout, u.max_idle_per_server);
    CLIENTS.with(|c| {
        if let Some(client) = c.borrow().get(&key) {
            return client.clone();
        }
        c.borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                let mut http = HttpConnector::new();
                http.set_nodelay(true);
                http.set_connect_timeout(Some(u.connect_timeout));
                http.enforce_http(true);
                Client::builder(TokioExecutor::new())
                    .pool_timer(TokioTimer::new())
                    .timer(TokioTimer::new())
                    .pool_idle_timeout(u.idle_timeout)
                    .pool_max_idle_per_host(u.max_idle_per_server)
                    .build(CountingConnector(http))
            })
            .clone()
    })
}
