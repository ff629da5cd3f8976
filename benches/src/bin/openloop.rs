//! An open-loop HTTP/1.1 load generator for `benches/load/`: requests are sent at a fixed
//! rate, whatever the server does, and each request's latency is measured from the time it
//! was *meant* to be sent (as wrk2 does, which Debian does not package). A closed-loop tool
//! (wrk) waits for an answer before it sends the next request, so a stalled server also
//! stalls the clock and the stall shows in one sample instead of in every request that
//! should have been sent meanwhile ("coordinated omission").
//!
//! ```text
//! openloop --url http://127.0.0.1:18080/ --rate 5000 --duration 5 --connections 64 \
//!     [--method POST --body FILE] [--header 'Cookie: a=b']... [--new-conn]
//! ```
//!
//! Request `i` is due at `start + i / rate`. `--connections` tasks take the next due request
//! in turn: a task that is idle sleeps until its request is due and then sends it; a task
//! that was busy when its request fell due sends it at once, and that request's latency
//! counts from its due time, so queueing behind a slow server is in the figures. The
//! runtime's timer wakes a sleeping task up to about a millisecond late; that lateness is
//! the generator's, not the server's, so a request sent after a sleep counts from when it
//! was actually sent. With `--new-conn` every request opens its own TCP connection (and,
//! for `https://`, does a full TLS handshake: no session resumption, no tickets), sends
//! `Connection: close` and counts the connect and handshake in its latency.
//!
//! Prints one line of `key=value` pairs: `sent`, `ok` (2xx), `non2xx`, `errors` (connect,
//! TLS, I/O), `rate` (achieved, per second over the run), `p50_us`, `p90_us`, `p99_us`,
//! `p999_us`, `max_us`. Every request's latency is kept (4 bytes each) and sorted at the end.
//!
//! TLS: rustls with the ring provider; the server certificate is not checked against a root
//! (the benchmark's certificates are self-signed, made at run time), but the handshake
//! signature is verified as usual, so a handshake costs what it costs a real client.
//! One current-thread runtime: the generator uses one core (pin it with `taskset`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;

/// What to send, and how.
struct Options {
    /// `http` or `https`.
    tls: bool,
    /// `host:port` to connect to.
    addr: String,
    /// The `Host` header.
    authority: String,
    /// Path and query.
    path: String,
    method: hyper::Method,
    headers: Vec<(String, String)>,
    body: Bytes,
    rate: f64,
    duration: Duration,
    connections: usize,
    new_conn: bool,
}

/// What the run saw.
#[derive(Default)]
struct Tally {
    sent: u64,
    ok: u64,
    non2xx: u64,
    errors: u64,
    /// Latency of every answered request, microseconds.
    latencies: Vec<u32>,
}

fn usage() -> ! {
    eprintln!(
        "usage: openloop --url URL --rate R --duration SECS [--connections N] [--method M] \
         [--body FILE] [--header 'K: V']... [--new-conn]"
    );
    std::process::exit(2)
}

fn parse_args() -> Options {
    let mut url = None;
    let mut rate = None;
    let mut duration = 5.0f64;
    let mut connections = 64usize;
    let mut method = hyper::Method::GET;
    let mut headers = Vec::new();
    let mut body = Bytes::new();
    let mut new_conn = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--url" => url = Some(value()),
            "--rate" => rate = value().parse::<f64>().ok(),
            "--duration" => duration = value().parse().unwrap_or_else(|_| usage()),
            "--connections" => connections = value().parse().unwrap_or_else(|_| usage()),
            "--method" => {
                method = hyper::Method::from_bytes(value().as_bytes()).unwrap_or_else(|_| usage())
            }
            "--header" => {
                let h = value();
                let (k, v) = h.split_once(':').unwrap_or_else(|| usage());
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            "--body" => {
                let path = value();
                body = std::fs::read(&path)
                    .unwrap_or_else(|e| {
                        eprintln!("openloop: {path}: {e}");
                        std::process::exit(2)
                    })
                    .into();
            }
            "--new-conn" => new_conn = true,
            _ => usage(),
        }
    }
    let url = url.unwrap_or_else(|| usage());
    let rate = rate.filter(|r| *r > 0.0).unwrap_or_else(|| usage());
    let uri: hyper::Uri = url.parse().unwrap_or_else(|_| usage());
    let tls = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => usage(),
    };
    let authority = uri.authority().unwrap_or_else(|| usage()).to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let addr = format!("{}:{port}", uri.host().unwrap_or_else(|| usage()));
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    Options {
        tls,
        addr,
        authority,
        path,
        method,
        headers,
        body,
        rate,
        duration: Duration::from_secs_f64(duration),
        connections: connections.max(1),
        new_conn,
    }
}

/// Accepts any certificate, verifies the handshake signatures.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_connector() -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    // A full handshake every time a connection is opened.
    config.resumption = rustls::client::Resumption::disabled();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

type Sender = http1::SendRequest<Full<Bytes>>;

/// Opens a connection (TCP, then TLS when asked) and starts its HTTP/1.1 client.
async fn connect(opts: &Options, tls: Option<&tokio_rustls::TlsConnector>) -> Option<Sender> {
    let tcp = TcpStream::connect(&opts.addr).await.ok()?;
    let _ = tcp.set_nodelay(true);
    match tls {
        Some(connector) => {
            let host = opts.addr.rsplit_once(':').map_or("localhost", |(h, _)| h);
            let name = ServerName::try_from(host.to_string()).ok()?;
            let stream = connector.connect(name, tcp).await.ok()?;
            let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.ok()?;
            tokio::spawn(conn);
            Some(sender)
        }
        None => {
            let (sender, conn) = http1::handshake(TokioIo::new(tcp)).await.ok()?;
            tokio::spawn(conn);
            Some(sender)
        }
    }
}

fn request(opts: &Options) -> hyper::Request<Full<Bytes>> {
    let mut b = hyper::Request::builder()
        .method(opts.method.clone())
        .uri(opts.path.as_str())
        .header(hyper::header::HOST, opts.authority.as_str());
    for (k, v) in &opts.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    if opts.new_conn {
        b = b.header(hyper::header::CONNECTION, "close");
    }
    b.body(Full::new(opts.body.clone()))
        .expect("method, path and headers were parsed already")
}

/// Sends one request on `sender` and reads the whole answer: `Some(status)`, or `None` on
/// an I/O error.
async fn exchange(sender: &mut Sender, opts: &Options) -> Option<u16> {
    sender.ready().await.ok()?;
    let resp = sender.send_request(request(opts)).await.ok()?;
    let status = resp.status().as_u16();
    resp.into_body().collect().await.ok()?;
    Some(status)
}

/// One of the `--connections` tasks.
async fn worker(
    opts: Rc<Options>,
    tls: Option<tokio_rustls::TlsConnector>,
    next: Rc<Cell<u64>>,
    total: u64,
    start: tokio::time::Instant,
    tally: Rc<RefCell<Tally>>,
) {
    let interval = 1.0 / opts.rate;
    let mut sender: Option<Sender> = None;
    loop {
        let i = next.get();
        if i >= total {
            return;
        }
        next.set(i + 1);
        let due = start + Duration::from_secs_f64(i as f64 * interval);
        // Idle until due: the timer's lateness is ours, count from the actual send. Due
        // already: the server kept this task busy, count from the due time.
        let sent_at = if due > tokio::time::Instant::now() {
            tokio::time::sleep_until(due).await;
            Instant::now()
        } else {
            due.into_std()
        };
        if sender.as_ref().is_none_or(|s| s.is_closed()) || opts.new_conn {
            sender = connect(&opts, tls.as_ref()).await;
        }
        let outcome = match sender.as_mut() {
            Some(s) => exchange(s, &opts).await,
            None => None,
        };
        let elapsed = sent_at.elapsed();
        let mut t = tally.borrow_mut();
        t.sent += 1;
        match outcome {
            Some(status) => {
                if (200..300).contains(&status) {
                    t.ok += 1;
                } else {
                    t.non2xx += 1;
                }
                t.latencies
                    .push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
            }
            None => {
                t.errors += 1;
                sender = None;
            }
        }
    }
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let opts = Rc::new(parse_args());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let tally = Rc::new(RefCell::new(Tally::default()));
    let total = (opts.rate * opts.duration.as_secs_f64()).round().max(1.0) as u64;
    let tls = opts.tls.then(tls_connector);
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let start = tokio::time::Instant::now();
        let next = Rc::new(Cell::new(0u64));
        let mut tasks = Vec::new();
        for _ in 0..opts.connections {
            tasks.push(tokio::task::spawn_local(worker(
                opts.clone(),
                tls.clone(),
                next.clone(),
                total,
                start,
                tally.clone(),
            )));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let mut t = tally.borrow_mut();
    t.latencies.sort_unstable();
    let l = &t.latencies;
    println!(
        "sent={} ok={} non2xx={} errors={} rate={:.1} p50_us={} p90_us={} p99_us={} p999_us={} max_us={}",
        t.sent,
        t.ok,
        t.non2xx,
        t.errors,
        t.sent as f64 / wall,
        percentile(l, 50.0),
        percentile(l, 90.0),
        percentile(l, 99.0),
        percentile(l, 99.9),
        l.last().copied().unwrap_or(0),
    );
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentile_is_the_nearest_rank() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 99.9), 100);
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
