//! Upstream connection pools: one hyper-util pooled client per worker runtime and upstream
//! timeout profile, so a pooled connection is only ever used by the runtime that owns its
//! task (no cross-thread hand-off; `notes/proxy-limit.md`). Pools are keyed by scheme and
//! server authority inside the client and survive reloads that keep the same timeouts and
//! TLS settings.
//!
//! Servers written `https://host:port` are reached over TLS (rustls, ring): the upstream's
//! CA bundle (the system's by default), the SNI and verification name (`server_name`, else
//! the server's host), TLS 1.2 and 1.3, an optional client certificate. Verification cannot
//! be switched off; a failed handshake counts as a connect failure (the server is marked
//! down and the next one tried, else 502).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::combinators::BoxBody;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::config::{UpstreamConfig, UpstreamTls};
use crate::metrics::UPSTREAM_CONNECTIONS;

/// Boxed error of bodies on the proxy path.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body type sent upstream and returned downstream.
pub type ProxyBody = BoxBody<Bytes, BoxError>;
/// A pooled upstream client.
pub type UpstreamClient = Client<CountingConnector, ProxyBody>;

/// Opens upstream connections: TCP through an `HttpConnector`, then TLS for `https` URIs
/// (rustls, certificates verified against the upstream's CA bundle); counts the
/// connections it opens (pool misses).
#[derive(Clone)]
pub struct CountingConnector {
    http: HttpConnector,
    tls: Option<(TlsConnector, Option<ServerName<'static>>)>,
}

impl std::fmt::Debug for CountingConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingConnector")
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// A connection to an upstream server, plain or TLS.
pub enum UpstreamStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl tower_service::Service<Uri> for CountingConnector {
    type Response = TokioIo<UpstreamStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.http.poll_ready(cx).map_err(BoxError::from)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let https = uri.scheme_str() == Some("https");
        let host = uri
            .host()
            .unwrap_or("")
            .trim_matches(['[', ']'])
            .to_string();
        let fut = self.http.call(uri);
        let tls = self.tls.clone();
        Box::pin(async move {
            let tcp = fut.await?.into_inner();
            let stream = if https {
                let Some((connector, name)) = tls else {
                    return Err(BoxError::from("https upstream without a TLS config"));
                };
                let name = match name {
                    Some(n) => n,
                    None => ServerName::try_from(host)
                        .map_err(|e| BoxError::from(format!("upstream name: {e}")))?,
                };
                UpstreamStream::Tls(Box::new(connector.connect(name, tcp).await?))
            } else {
                UpstreamStream::Plain(tcp)
            };
            UPSTREAM_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
            Ok(TokioIo::new(stream))
        })
    }
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            UpstreamStream::Plain(s) => s.is_write_vectored(),
            UpstreamStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The rustls client config of an upstream's TLS settings: its CA bundle, TLS 1.2 and 1.3,
/// ALPN `http/1.1`, the client certificate when set.
pub fn tls_connector(t: &UpstreamTls) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let certs =
        CertificateDer::pem_file_iter(&t.ca).map_err(|e| format!("{}: {e}", t.ca.display()))?;
    for c in certs {
        let c = c.map_err(|e| format!("{}: {e}", t.ca.display()))?;
        roots
            .add(c)
            .map_err(|e| format!("{}: {e}", t.ca.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{}: no CA certificate in the file", t.ca.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut cfg = match &t.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                .map_err(|e| format!("{}: {e}", cert.display()))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{}: {e}", cert.display()))?;
            let key =
                PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

type Key = (Duration, Duration, usize, UpstreamTls);

/// What selects a worker's pooled client: an upstream's timeouts, idle-pool size and TLS
/// settings, with their hash computed once when the config is built (hashing the TLS
/// settings' paths per request cost 1.3 k instructions per GET, callgrind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey {
    hash: u64,
    key: Key,
}

impl ClientKey {
    /// The key of `u`'s client.
    pub fn of(u: &UpstreamConfig) -> ClientKey {
        use std::hash::{Hash, Hasher};
        let key = (
            u.connect_timeout,
            u.idle_timeout,
            u.max_idle_per_server,
            u.tls.clone(),
        );
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        ClientKey {
            hash: h.finish(),
            key,
        }
    }
}

thread_local! {
    /// The worker's clients; a handful at most (one per distinct upstream profile), so a
    /// scan comparing hashes first beats a map.
    static CLIENTS: RefCell<Vec<(ClientKey, UpstreamClient)>> = const { RefCell::new(Vec::new()) };
}

/// The calling worker's client for `u`'s timeout profile and TLS settings (`key` is
/// [`ClientKey::of`] `u`). Its pool keeps plain and TLS connections apart (by scheme and
/// authority). Clients survive reloads that keep the same settings.
pub fn client_for(
    key: &ClientKey,
    u: &UpstreamConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> UpstreamClient {
    CLIENTS.with(|c| {
        if let Some((_, client)) = c
            .borrow()
            .iter()
            .find(|(k, _)| k.hash == key.hash && k == key)
        {
            return client.clone();
        }
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(u.connect_timeout));
        http.enforce_http(false);
        let name = u
            .tls
            .server_name
            .as_deref()
            .and_then(|n| ServerName::try_from(n.to_string()).ok());
        let connector = CountingConnector {
            http,
            tls: tls.map(|t| (TlsConnector::from(t.clone()), name)),
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(u.idle_timeout)
            .pool_max_idle_per_host(u.max_idle_per_server)
            .build(connector);
        c.borrow_mut().push((key.clone(), client.clone()));
        client
    })
}
