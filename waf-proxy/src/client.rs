//! Upstream connection pools: one pool per worker runtime and upstream timeout profile, so a
//! pooled connection is only ever used by the runtime that owns its task (no cross-thread
//! hand-off, no lock; `notes/proxy-limit.md`). A pool holds hyper HTTP/1 client connections
//! (`hyper::client::conn::http1`) by scheme and server authority, most recently used first,
//! and survives reloads that keep the same timeouts and TLS settings. hyper-util's pooled
//! `Client` did the same behind a mutex, a hashed key, a checkout future racing a lazy
//! connect and a spawned task per request: 8.4 k instructions per GET (callgrind), most of
//! which this pool does not spend.
//!
//! Servers written `https://host:port` are reached over TLS (rustls, ring): the upstream's
//! CA bundle (the system's by default), the SNI and verification name (`server_name`, else
//! the server's host), TLS 1.2 and 1.3, an optional client certificate. Verification cannot
//! be switched off; a failed handshake counts as a connect failure (the server is marked
//! down and the next one tried, else 502).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use std::time::Instant;

use bytes::Bytes;
use http::uri::Authority;
use http::{Request, Response, Uri};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
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

/// One pooled upstream connection: hyper's HTTP/1 client handle (its connection runs in a
/// task of the same worker), the server it goes to, and when it was put back.
struct Idle {
    authority: Authority,
    https: bool,
    sender: SendRequest<ProxyBody>,
    since: Instant,
}

/// A worker's connections of one client profile.
struct Pool {
    key: ClientKey,
    connector: CountingConnector,
    idle_timeout: Duration,
    max_idle: usize,
    /// Oldest first: a connection put back longest ago is the likeliest to be ready again.
    idle: VecDeque<Idle>,
    /// The servers this pool has connected to (for the idle limit).
    servers: Vec<(Authority, bool)>,
    /// Check-ins so far (the idle limit is enforced every [`TRIM_EVERY`]).
    checkins: u32,
    /// Plain TCP connections of the plain HTTP/1 path ([`crate::proxy::h1`]), which writes
    /// and reads the upstream's bytes itself: oldest first, as `idle`.
    raw: VecDeque<RawIdle>,
}

/// One pooled plain connection of the plain HTTP/1 path.
struct RawIdle {
    authority: Authority,
    stream: TcpStream,
    since: Instant,
}

thread_local! {
    /// The worker's pools; a handful at most (one per distinct upstream profile), so a scan
    /// comparing hashes first beats a map. Entries are never removed, so an index stays valid.
    static POOLS: RefCell<Vec<Pool>> = const { RefCell::new(Vec::new()) };
}

/// Why an upstream request failed.
#[derive(Debug)]
pub enum UpstreamError {
    /// No connection could be opened (refused, connect timeout, TLS handshake).
    Connect(BoxError),
    /// The connection failed while sending the request or reading the response head.
    Request(hyper::Error),
}

impl UpstreamError {
    /// Whether no connection could be opened (the server is marked down and the next tried).
    pub fn is_connect(&self) -> bool {
        matches!(self, UpstreamError::Connect(_))
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::Connect(e) => write!(f, "connect: {e}"),
            UpstreamError::Request(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for UpstreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpstreamError::Connect(e) => Some(e.as_ref()),
            UpstreamError::Request(e) => Some(e),
        }
    }
}

/// The index of the calling worker's pool for `key` (created on first use).
fn pool_index(
    key: &ClientKey,
    u: &UpstreamConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> usize {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        if let Some(i) = pools
            .iter()
            .position(|pool| pool.key.hash == key.hash && pool.key == *key)
        {
            return i;
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
        pools.push(Pool {
            key: key.clone(),
            connector: CountingConnector {
                http,
                tls: tls.map(|t| (TlsConnector::from(t.clone()), name)),
            },
            idle_timeout: u.idle_timeout,
            max_idle: u.max_idle_per_server,
            idle: VecDeque::new(),
            servers: Vec::new(),
            checkins: 0,
            raw: VecDeque::new(),
        });
        pools.len() - 1
    })
}

/// A ready pooled connection to `authority` and how long it was idle, the one put back
/// longest ago first; closed and
/// expired ones are dropped on the way, busy ones (a response body still streaming) stay.
fn checkout(
    pool: usize,
    authority: &Authority,
    https: bool,
) -> Option<(SendRequest<ProxyBody>, Duration)> {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let pool = &mut pools[pool];
        let now = Instant::now();
        let idle_timeout = pool.idle_timeout;
        let mut i = 0;
        while i < pool.idle.len() {
            let c = &pool.idle[i];
            if c.sender.is_closed() || now.duration_since(c.since) > idle_timeout {
                pool.idle.remove(i);
                continue;
            }
            if c.https == https && c.authority == *authority && c.sender.is_ready() {
                return pool
                    .idle
                    .remove(i)
                    .map(|c| (c.sender, now.duration_since(c.since)));
            }
            i += 1;
        }
        None
    })
}

/// Puts a connection back after its response head arrived (it is ready again once the
/// body has been read).
fn checkin(pool: usize, authority: &Authority, https: bool, sender: SendRequest<ProxyBody>) {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let pool = &mut pools[pool];
        if pool.max_idle == 0 {
            return;
        }
        if !pool
            .servers
            .iter()
            .any(|(a, t)| *t == https && a == authority)
        {
            pool.servers.push((authority.clone(), https));
        }
        pool.idle.push_back(Idle {
            authority: authority.clone(),
            https,
            sender,
            since: Instant::now(),
        });
        pool.checkins = pool.checkins.wrapping_add(1);
        if pool.checkins % TRIM_EVERY == 0 {
            pool.trim();
        }
    })
}

/// The calling worker's pool for an upstream's client key (created on first use), for the
/// `raw_*` functions below.
pub(crate) fn raw_pool(
    key: &ClientKey,
    u: &UpstreamConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> usize {
    pool_index(key, u, tls)
}

/// A pooled plain connection to `authority` that is still open, and how long it was idle;
/// closed and expired ones are dropped on the way. Open means: no readiness since its last
/// response, or a read that would block (a closed one reads end of file; one with bytes
/// nobody asked for is not reused either).
pub(crate) fn raw_checkout(pool: usize, authority: &Authority) -> Option<(TcpStream, Duration)> {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let pool = &mut pools[pool];
        let now = Instant::now();
        // Newest first: the most recently used are the least likely to have been closed.
        let mut i = pool.raw.len();
        while i > 0 {
            i -= 1;
            let idle = now.duration_since(pool.raw[i].since);
            if idle > pool.idle_timeout {
                pool.raw.remove(i);
                continue;
            }
            if pool.raw[i].authority != *authority {
                continue;
            }
            let c = pool.raw.remove(i)?;
            if is_open(&c.stream) {
                return Some((c.stream, idle));
            }
        }
        None
    })
}

/// Whether an idle connection can take a request: nothing became readable since its last
/// response was read (no system call), or a read would block.
fn is_open(s: &TcpStream) -> bool {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match s.poll_read_ready(&mut cx) {
        Poll::Pending => true,
        Poll::Ready(Err(_)) => false,
        Poll::Ready(Ok(())) => {
            let mut b = [0u8; 1];
            matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        }
    }
}

/// Puts a plain connection back after its response was read whole.
pub(crate) fn raw_checkin(pool: usize, authority: &Authority, stream: TcpStream) {
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        let pool = &mut pools[pool];
        if pool.max_idle == 0 {
            return;
        }
        if !pool.servers.iter().any(|(a, t)| !*t && a == authority) {
            pool.servers.push((authority.clone(), false));
        }
        pool.raw.push_back(RawIdle {
            authority: authority.clone(),
            stream,
            since: Instant::now(),
        });
        let cap = pool.max_idle.saturating_mul(pool.servers.len().max(1));
        while pool.raw.len() > cap {
            pool.raw.pop_front();
        }
    })
}

/// Opens a plain connection to `authority` with the pool's connector (its connect timeout,
/// `TCP_NODELAY`, the connection counter).
pub(crate) async fn raw_connect(pool: usize, authority: &Authority) -> Result<TcpStream, BoxError> {
    let mut connector = POOLS.with(|p| p.borrow()[pool].connector.clone());
    let uri = Uri::builder()
        .scheme("http")
        .authority(authority.clone())
        .path_and_query("/")
        .build()?;
    let io = tower_service::Service::call(&mut connector, uri).await?;
    match io.into_inner() {
        UpstreamStream::Plain(s) => Ok(s),
        UpstreamStream::Tls(_) => Err(BoxError::from("a TLS stream for a plain server")),
    }
}

/// How long a pooled connection must have been idle before a request it loses is sent again
/// (see [`send`]).
const STALE_AFTER: Duration = Duration::from_secs(1);

/// How many check-ins apart a pool trims its idle connections (amortising the scan).
const TRIM_EVERY: u32 = 16;

impl Pool {
    /// Keeps about `max_idle` idle connections per server: closed ones go, then the oldest
    /// ready ones above the limit. Connections still busy with a response are not idle and
    /// do not count (they are in use, as a checked-out one is), so a burst of concurrency
    /// above the limit does not close connections it still needs.
    fn trim(&mut self) {
        let cap = self.max_idle.saturating_mul(self.servers.len().max(1));
        if self.idle.len() <= cap {
            return;
        }
        self.idle.retain(|c| !c.sender.is_closed());
        let mut ready = self.idle.iter().filter(|c| c.sender.is_ready()).count();
        let mut i = 0;
        while ready > cap && i < self.idle.len() {
            if self.idle[i].sender.is_ready() {
                self.idle.remove(i);
                ready -= 1;
            } else {
                i += 1;
            }
        }
    }
}

/// Opens a connection to `authority` and starts its task on the calling worker.
async fn connect(
    connector: CountingConnector,
    authority: &Authority,
    https: bool,
) -> Result<SendRequest<ProxyBody>, UpstreamError> {
    let uri = Uri::builder()
        .scheme(if https { "https" } else { "http" })
        .authority(authority.clone())
        .path_and_query("/")
        .build()
        .map_err(|e| UpstreamError::Connect(Box::new(e)))?;
    let mut connector = connector;
    let io = tower_service::Service::call(&mut connector, uri)
        .await
        .map_err(UpstreamError::Connect)?;
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(io)
        .await
        .map_err(UpstreamError::Request)?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}

/// Sends `req` (its URI in origin form) to `authority` on a pooled connection of the
/// calling worker, or a new one. A pooled connection can die under a request (the upstream
/// closed it as the request went out, the keep-alive race): a request it could not take is
/// sent once more on a new connection, and so is one it took and lost when it has no body, an
/// idempotent method and the connection had been idle for [`STALE_AFTER`] or more (as nginx
/// gives a cached connection's failure one more try). Servers close idle connections after
/// their keep-alive timeout, seconds at the least; a connection reused sooner (all of them
/// under load) is not copied for it, since the copy of the headers costs 3 k instructions.
pub async fn send(
    key: &ClientKey,
    u: &UpstreamConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
    authority: &Authority,
    https: bool,
    req: Request<ProxyBody>,
) -> Result<Response<Incoming>, UpstreamError> {
    let pool = pool_index(key, u, tls);
    let connector = || POOLS.with(|p| p.borrow()[pool].connector.clone());
    let (mut sender, pooled, idle) = match checkout(pool, authority, https) {
        Some((s, idle)) => (s, true, idle),
        None => (
            connect(connector(), authority, https).await?,
            false,
            Duration::ZERO,
        ),
    };
    let again = (idle >= STALE_AFTER
        && req.method().is_idempotent()
        && http_body::Body::is_end_stream(req.body()))
    .then(|| bodiless_copy(&req));
    let resp = match sender.try_send_request(req).await {
        Ok(r) => r,
        Err(mut e) => {
            let retry = match (e.take_message(), again) {
                (Some(req), _) if pooled => req,
                (None, Some(req)) => {
                    tracing::debug!(error = %e.error(), "pooled upstream connection lost a request; sent again");
                    req
                }
                _ => return Err(UpstreamError::Request(e.into_error())),
            };
            sender = connect(connector(), authority, https).await?;
            sender
                .send_request(retry)
                .await
                .map_err(UpstreamError::Request)?
        }
    };
    // A 101 hands the connection to the upgrade; anything else keeps it for the next one.
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        checkin(pool, authority, https, sender);
    }
    Ok(resp)
}

/// A copy of a request that has no body, to send again: method, target, version and headers
/// (extensions are not carried; the upstream request has none the proxy reads).
fn bodiless_copy(req: &Request<ProxyBody>) -> Request<ProxyBody> {
    use http_body_util::{BodyExt, Empty};
    let mut copy = Request::new(Empty::new().map_err(|e| match e {}).boxed());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    copy
}
