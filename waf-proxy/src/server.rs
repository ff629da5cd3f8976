//! Listeners, worker runtimes, the admin listener and hot reload.
//!
//! One `current_thread` tokio runtime per worker thread (`notes/proxy-limit.md`: 99 % of
//! nginx's req/s against 81 % for a one-worker multi-thread runtime); every worker accepts
//! on every listener (the same sockets, so port 0 works in tests), and each keeps its own
//! upstream pools. A control thread runs the admin listener and the reloader.
//!
//! Reload (SIGHUP, or the config file's modification time or size changing; rule files
//! it names are not watched, so send SIGHUP after editing them): the new config is
//! parsed and compiled on a blocking thread, then swapped in with one atomic store;
//! requests in flight finish with the state they started with, so no request fails. A
//! broken config is reported on stderr and in `/metrics`, and the old one keeps serving.
//! Listener addresses, worker count and log targets are read at start only; a reload that
//! changes them logs a warning that a restart is needed.
//!
//! SIGTERM or Ctrl-C: every worker stops accepting, asks its connections to close after
//! their current request (HTTP/1 `Connection: close`, HTTP/2 GOAWAY) and waits for them up
//! to `shutdown_timeout_ms`; then the process exits.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::config::Config;
use crate::edge::stream::Guarded;
use crate::edge::Ledger;
use crate::log::LogSink;
use crate::metrics::Metrics;
use crate::proxy::{self, ConnCtx};
use crate::state::State;

/// hyper's own header cap when none is set (`hyper::proto::h1::role::DEFAULT_MAX_HEADERS`).
const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

/// The period of each worker's keep-soonest timer (see [`worker`]).
const WORKER_TICK: Duration = Duration::from_millis(250);

/// Process-wide state shared by all workers.
#[derive(Debug)]
pub struct Shared {
    /// The current compiled config.
    pub state: Arc<ArcSwap<State>>,
    /// Metrics.
    pub metrics: Metrics,
    /// Access log.
    pub access_log: LogSink,
    /// Audit log.
    pub audit_log: LogSink,
}

/// Where the proxy listens, once bound (printed on stderr at start for scripts and tests).
#[derive(Debug, Clone)]
pub struct Bound {
    /// Plain HTTP.
    pub http: Vec<SocketAddr>,
    /// HTTPS.
    pub https: Vec<SocketAddr>,
    /// Admin.
    pub admin: Option<SocketAddr>,
}

/// Compiles `config`, binds its listeners and serves until the process is stopped.
/// `watch` is the file to reload from (on SIGHUP and when it changes).
pub fn run(config: Config, watch: Option<PathBuf>) -> io::Result<()> {
    let reload_poll = config.reload_poll;
    let drain = config.shutdown_timeout;
    let workers = config.workers.max(1);
    // Before the state: each host's policy takes its store from the fleet.
    crate::fleet::start(config.state.as_ref()).map_err(io::Error::other)?;
    let state = State::build(config).map_err(|e| io::Error::other(e.join("\n")))?;
    let cfg = &state.config;
    let access_log = LogSink::start("access", &cfg.access_log, cfg.log_queue)?;
    let audit_log = LogSink::start("audit", &cfg.audit_log, cfg.log_queue)?;
    let bind = |a: &SocketAddr| -> io::Result<StdListener> {
        let l =
            StdListener::bind(a).map_err(|e| io::Error::new(e.kind(), format!("bind {a}: {e}")))?;
        l.set_nonblocking(true)?;
        Ok(l)
    };
    let http: Vec<StdListener> = cfg.listen.iter().map(bind).collect::<io::Result<_>>()?;
    let https: Vec<StdListener> = cfg.listen_tls.iter().map(bind).collect::<io::Result<_>>()?;
    let admin = cfg.admin.as_ref().map(bind).transpose()?;
    let bound = Bound {
        http: http
            .iter()
            .map(|l| l.local_addr())
            .collect::<io::Result<_>>()?,
        https: https
            .iter()
            .map(|l| l.local_addr())
            .collect::<io::Result<_>>()?,
        admin: admin.as_ref().map(|l| l.local_addr()).transpose()?,
    };
    let state = Arc::new(ArcSwap::from_pointee(state));
    let tls = if https.is_empty() {
        None
    } else {
        let cfg = crate::tls::server_config(state.clone()).map_err(io::Error::other)?;
        Some(TlsAcceptor::from(cfg))
    };
    let shared = Arc::new(Shared {
        state,
        metrics: Metrics::default(),
        access_log,
        audit_log,
    });
    // Policy list files and geo databases: re-read on the config poll interval.
    crate::policy::spawn_file_reloader(
        shared.state.clone(),
        reload_poll.unwrap_or(Duration::from_millis(crate::policy::DEFAULT_LIST_RELOAD_MS)),
    )?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut threads = Vec::new();
    for w in 0..workers {
        let shared = shared.clone();
        let stop = stop_rx.clone();
        let http: Vec<StdListener> = http
            .iter()
            .map(|l| l.try_clone())
            .collect::<io::Result<_>>()?;
        let https: Vec<StdListener> = https
            .iter()
            .map(|l| l.try_clone())
            .collect::<io::Result<_>>()?;
        let tls = tls.clone();
        let t = std::thread::Builder::new()
            .name(format!("worker-{w}"))
            .spawn(move || worker(shared, http, https, tls, stop, drain))?;
        threads.push(t);
    }
    for a in &bound.http {
        eprintln!("waf-proxy: listening on http://{a}");
    }
    for a in &bound.https {
        eprintln!("waf-proxy: listening on https://{a}");
    }
    if let Some(a) = &bound.admin {
        eprintln!("waf-proxy: admin on http://{a}");
    }
    eprintln!("waf-proxy: started ({workers} workers)");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(control(shared, admin, watch, reload_poll))?;
    // Shutdown: stop the workers and wait for them to drain.
    let _ = stop_tx.send(true);
    for t in threads {
        let _ = t.join();
    }
    // Give the log writers a moment to write their last batch.
    std::thread::sleep(Duration::from_millis(100));
    eprintln!("waf-proxy: stopped");
    Ok(())
}

fn worker(
    shared: Arc<Shared>,
    http: Vec<StdListener>,
    https: Vec<StdListener>,
    tls: Option<TlsAcceptor>,
    stop: tokio::sync::watch::Receiver<bool>,
    drain: Duration,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start a worker runtime");
            return;
        }
    };
    rt.block_on(async move {
        // A timer that always fires soonest. tokio's time driver wakes its own thread (an
        // eventfd write, then an extra `epoll_wait`) whenever a new timer is due before the
        // driver's next planned wake-up, and with no timer pending that is every new timer:
        // hyper's header-read timeout and the upstream read timeout made one such write per
        // request (strace). With this tick pending, per-request timers (seconds away) are
        // never the soonest, and the driver sleeps at most one tick.
        // The same tick sweeps the worker's coarse deadlines (`deadline`: the upstream
        // read timeout, without a timer per request).
        crate::deadline::enable_sweep();
        tokio::spawn(async {
            let mut tick = tokio::time::interval(WORKER_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                crate::deadline::sweep(std::time::Instant::now());
            }
        });
        let graceful = Arc::new(GracefulShutdown::new());
        let mut tasks = Vec::new();
        for l in http {
            let args = (shared.clone(), graceful.clone(), stop.clone());
            tasks.push(tokio::spawn(accept_loop(args, l, None)));
        }
        for l in https {
            let args = (shared.clone(), graceful.clone(), stop.clone());
            tasks.push(tokio::spawn(accept_loop(args, l, tls.clone())));
        }
        for t in tasks {
            let _ = t.await;
        }
        // The accept loops have ended and dropped their handles.
        if let Ok(graceful) = Arc::try_unwrap(graceful) {
            if tokio::time::timeout(drain, graceful.shutdown())
                .await
                .is_err()
            {
                tracing::warn!("shutdown: connections still open after the drain time");
            }
        }
    });
}

type LoopArgs = (
    Arc<Shared>,
    Arc<GracefulShutdown>,
    tokio::sync::watch::Receiver<bool>,
);

async fn accept_loop(args: LoopArgs, l: StdListener, tls: Option<TlsAcceptor>) {
    let (shared, graceful, mut stop) = args;
    let listener = match TcpListener::from_std(l) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot register listener");
            return;
        }
    };
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let local = stream
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let watcher = graceful.watcher();
        tokio::spawn(serve_conn(
            shared.clone(),
            stream,
            (peer, local),
            tls.clone(),
            watcher,
            stop.clone(),
        ));
    }
}

async fn serve_conn(
    shared: Arc<Shared>,
    stream: TcpStream,
    (peer, local): (SocketAddr, SocketAddr),
    tls: Option<TlsAcceptor>,
    watcher: Watcher,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let (header_timeout, limits) = {
        let state = shared.state.load();
        (state.config.header_read_timeout, state.config.head_limits)
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    // The edge refuses a head over `max_headers` before hyper parses it; hyper's own cap only
    // matters above its default. Setting it at all makes hyper allocate and fill two header
    // arrays of that size per parse (callgrind: 1.7 k instructions per GET), so it is set only
    // when the edge's limit is above hyper's default of 100.
    if limits.max_headers > HYPER_DEFAULT_MAX_HEADERS {
        builder.http1().max_headers(limits.max_headers);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)));
    match tls {
        None => {
            let ledger = Arc::new(Ledger::default());
            let ctx = Arc::new(ConnCtx {
                shared,
                peer,
                local,
                https: false,
                sni: None,
                ledger: Some(ledger.clone()),
                peer_text: crate::headers::PeerText::new(peer.ip()),
            });
            // Our own HTTP/1 handling while the requests are plain; the rest of the
            // connection, from the first request that is not, goes to hyper.
            let mut stream = stream;
            let handed = proxy::h1::serve(&ctx, &mut stream, limits, header_timeout, &mut stop);
            let (read, first) = match handed.await {
                proxy::h1::Outcome::Closed => return,
                proxy::h1::Outcome::HandOver { read, first } => (read, first),
            };
            let svc = service_fn(move |req| proxy::handle(req, ctx.clone()));
            let mut guarded = Guarded::with_read(stream, limits, ledger, &read, first);
            if !matches!(
                tokio::time::timeout(header_timeout, guarded.first_head()).await,
                Ok(Ok(()))
            ) {
                tracing::debug!(%peer, "no complete request head in time");
                return;
            }
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(guarded), svc);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        Some(acceptor) => {
            // The handshake shares the header timeout: a client that stalls in TLS is a
            // slow client too.
            let tls_stream =
                match tokio::time::timeout(header_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let (_, session) = tls_stream.get_ref();
            let sni = session.server_name().map(|s| s.to_ascii_lowercase());
            let h2 = session.alpn_protocol() == Some(b"h2");
            let ledger = (!h2).then(|| Arc::new(Ledger::default()));
            let ctx = Arc::new(ConnCtx {
                shared,
                peer,
                local,
                https: true,
                sni,
                ledger: ledger.clone(),
                peer_text: crate::headers::PeerText::new(peer.ip()),
            });
            let svc = service_fn(move |req| proxy::handle(req, ctx.clone()));
            let result = match ledger {
                Some(ledger) => {
                    let mut guarded = Guarded::new(tls_stream, limits, ledger);
                    if !matches!(
                        tokio::time::timeout(header_timeout, guarded.first_head()).await,
                        Ok(Ok(()))
                    ) {
                        tracing::debug!(%peer, "no complete request head in time");
                        return;
                    }
                    let io = TokioIo::new(guarded);
                    watcher
                        .watch(builder.serve_connection_with_upgrades(io, svc))
                        .await
                }
                None => {
                    builder = builder.http2_only();
                    let io = TokioIo::new(tls_stream);
                    watcher.watch(builder.serve_connection(io, svc)).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
    }
}

async fn control(
    shared: Arc<Shared>,
    admin: Option<StdListener>,
    watch: Option<PathBuf>,
    poll: Option<Duration>,
) -> io::Result<()> {
    if let Some(l) = admin {
        tokio::spawn(admin_loop(shared.clone(), TcpListener::from_std(l)?));
    }
    tokio::spawn(crate::health::run(shared.clone()));
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut last_seen = watch.as_deref().and_then(file_stamp);
    let mut tick = tokio::time::interval(poll.unwrap_or(Duration::from_secs(3600)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = hup.recv() => {
                if let Some(path) = &watch {
                    tracing::info!("SIGHUP: reloading");
                    last_seen = file_stamp(path);
                    reload(&shared, path).await;
                }
            }
            _ = tick.tick(), if poll.is_some() && watch.is_some() => {
                if let Some(path) = &watch {
                    let now = file_stamp(path);
                    if now.is_some() && now != last_seen {
                        last_seen = now;
                        tracing::info!("config file changed: reloading");
                        reload(&shared, path).await;
                    }
                }
            }
            _ = term.recv() => {
                eprintln!("waf-proxy: SIGTERM, draining");
                return Ok(());
            }
            _ = tokio::signal::ctrl_c() => {
                eprintln!("waf-proxy: interrupted, draining");
                return Ok(());
            }
        }
    }
}

fn file_stamp(p: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Loads and compiles `path` off the request path, then swaps it in.
pub async fn reload(shared: &Shared, path: &Path) {
    let p = path.to_path_buf();
    let built = tokio::task::spawn_blocking(move || {
        let config = Config::load(&p).map_err(|e| e.to_string())?;
        State::build(config).map_err(|e| e.join("\n"))
    })
    .await;
    match built {
        Ok(Ok(new)) => {
            let old = shared.state.load();
            let (o, n) = (&old.config, &new.config);
            if o.listen != n.listen
                || o.listen_tls != n.listen_tls
                || o.admin != n.admin
                || o.workers != n.workers
                || o.access_log != n.access_log
                || o.audit_log != n.audit_log
                || o.state != n.state
            {
                tracing::warn!(
                    "listeners, workers, log targets and [state] change only on restart"
                );
            }
            shared.state.store(Arc::new(new));
            shared.metrics.reloads_ok.fetch_add(1, Ordering::Relaxed);
            tracing::info!(path = %path.display(), "reloaded");
            eprintln!("waf-proxy: reloaded {}", path.display());
        }
        Ok(Err(e)) => {
            shared
                .metrics
                .reloads_failed
                .fetch_add(1, Ordering::Relaxed);
            tracing::error!("reload failed, keeping the running config:\n{e}");
            eprintln!("waf-proxy: reload failed, keeping the running config:\n{e}");
        }
        Err(e) => {
            shared
                .metrics
                .reloads_failed
                .fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "reload task failed, keeping the running config");
        }
    }
}

async fn admin_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(admin(&shared, &req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn admin(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match req.uri().path() {
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        p if p == "/bans" || p.starts_with("/bans/") => {
            crate::policy::admin(&shared.state.load(), req.method(), p)
        }
        "/metrics" => {
            let state = shared.state.load();
            let mut extra = String::new();
            extra.push_str("# HELP waf_proxy_log_dropped_total Log lines dropped because the queue was full.\n# TYPE waf_proxy_log_dropped_total counter\n");
            extra.push_str(&format!(
                "waf_proxy_log_dropped_total{{log=\"access\"}} {}\nwaf_proxy_log_dropped_total{{log=\"audit\"}} {}\n",
                shared.access_log.dropped(),
                shared.audit_log.dropped()
            ));
            extra.push_str("# HELP waf_proxy_upstream_server_up Passive and active health: 1 when the server is in rotation.\n# TYPE waf_proxy_upstream_server_up gauge\n");
            for u in &state.upstreams {
                for (i, s) in u.servers.iter().enumerate() {
                    extra.push_str(&format!(
                        "waf_proxy_upstream_server_up{{upstream=\"{}\",server=\"{}\"}} {}\n",
                        u.config.name,
                        s.authority,
                        u8::from(!u.is_down(i))
                    ));
                }
            }
            crate::policy::metrics(&state, &mut extra);
            (
                StatusCode::OK,
                "text/plain; version=0.0.4",
                shared.metrics.render(&extra),
            )
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_string(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}
