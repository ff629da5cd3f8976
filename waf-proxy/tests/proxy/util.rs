//! Test harness: a real upstream (hyper on loopback, counting its connections), the real
//! `waf-proxy` binary started on a config file, and a small HTTP client.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// Rules used by most tests: blocks SQLi in ARGS (query or body), a bad User-Agent, and a
/// path.
pub const RULES: &str = r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx (?i)union\s+select" "id:1001,phase:2,deny,status:403,msg:'SQLi'"
SecRule REQUEST_HEADERS:User-Agent "@contains evilbot" "id:1002,phase:1,deny,status:403,msg:'bad bot'"
"#;

/// A SQL error page that CRS's data-leakage rules (951xxx) recognise.
pub const LEAK_PAGE: &str = "<html><body>Warning: You have an error in your SQL syntax; check the \
     manual that corresponds to your MySQL server version for the right syntax</body></html>";

/// A real upstream server on loopback.
pub struct Upstream {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
}

/// Starts the upstream in its own thread. Routes: `/slow` waits 3 s; `/echo` answers with
/// the request headers; `/cookie` sets a cookie; `/leak` is a SQL error page (`/leak-big`
/// the same with 114 KB of padding); `/drip` (`application/octet-stream`) and `/drip-html`
/// send two chunks 1.5 s apart; anything else `ok METHOD PATH LEN`.
pub fn upstream() -> Upstream {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let conns = connections.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                conns.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let svc = service_fn(|req: Request<Incoming>| async move {
                        let (parts, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let mut resp = Response::new(Full::new(Bytes::new()));
                        let text = match parts.uri.path() {
                            "/slow" => {
                                tokio::time::sleep(Duration::from_secs(3)).await;
                                "slow".to_string()
                            }
                            "/echo" => {
                                let mut s = String::new();
                                for (k, v) in &parts.headers {
                                    s.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
                                }
                                s
                            }
                            "/leak" | "/leak-big" => {
                                resp.headers_mut()
                                    .insert("content-type", "text/html".parse().unwrap());
                                let mut page = LEAK_PAGE.to_string();
                                if parts.uri.path() == "/leak-big" {
                                    page.push_str(&"<p>padding</p>".repeat(8192));
                                }
                                page
                            }
                            "/drip" | "/drip-html" => {
                                // Two chunks 1.5 s apart: a streamed response shows the
                                // first at once.
                                let ctype = if parts.uri.path() == "/drip" {
                                    "application/octet-stream"
                                } else {
                                    "text/html"
                                };
                                let (mut tx, body) =
                                    http_body_util::channel::Channel::<Bytes, Infallible>::new(2);
                                tokio::spawn(async move {
                                    let _ = tx.send_data(Bytes::from_static(b"first ")).await;
                                    tokio::time::sleep(Duration::from_millis(1500)).await;
                                    let _ = tx.send_data(Bytes::from_static(b"second")).await;
                                });
                                let mut r = Response::new(body.boxed());
                                r.headers_mut()
                                    .insert("content-type", ctype.parse().unwrap());
                                return Ok::<_, Infallible>(r);
                            }
                            "/cookie" => {
                                resp.headers_mut()
                                    .append("set-cookie", "a=1; Path=/".parse().unwrap());
                                resp.headers_mut()
                                    .append("set-cookie", "b=2; HttpOnly".parse().unwrap());
                                "cookie".to_string()
                            }
                            p => format!("ok {} {p} {}", parts.method, body.len()),
                        };
                        *resp.body_mut() = Full::new(Bytes::from(text));
                        Ok::<_, Infallible>(resp.map(|b| b.boxed()))
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    Upstream { addr, connections }
}

/// A fresh temporary directory.
pub fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "waf-proxy-test-{}-{name}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The running binary; killed on drop.
pub struct Proxy {
    pub child: Child,
    pub http: SocketAddr,
    pub https: Option<SocketAddr>,
    pub admin: Option<SocketAddr>,
    pub stderr: Arc<Mutex<Vec<String>>>,
    pub config: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    /// Writes `config` into `dir/proxy.toml` and starts `waf-proxy run` on it.
    pub fn start(dir: &Path, config: &str) -> Proxy {
        let path = dir.join("proxy.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_waf-proxy"))
            .arg("run")
            .arg("--config")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        let mut p = Proxy {
            child,
            http: "0.0.0.0:0".parse().unwrap(),
            https: None,
            admin: None,
            stderr,
            config: path,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            {
                let lines = p.stderr.lock().unwrap();
                for l in lines.iter() {
                    if let Some(a) = l.strip_prefix("waf-proxy: listening on http://") {
                        p.http = a.parse().unwrap();
                    } else if let Some(a) = l.strip_prefix("waf-proxy: listening on https://") {
                        p.https = Some(a.parse().unwrap());
                    } else if let Some(a) = l.strip_prefix("waf-proxy: admin on http://") {
                        p.admin = Some(a.parse().unwrap());
                    }
                }
                if lines.iter().any(|l| l.contains("started")) {
                    break;
                }
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!(
                    "waf-proxy exited with {status}: {:#?}",
                    p.stderr.lock().unwrap()
                );
            }
            assert!(
                Instant::now() < deadline,
                "waf-proxy did not start: {:#?}",
                p.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    }

    /// `http://ADDR/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// Waits until stderr has a line containing `needle` (at least `count` of them),
    /// yielding to the test's runtime meanwhile (so load tasks keep running).
    pub async fn wait_stderr(&self, needle: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let n = self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(needle))
                .count();
            if n >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} on stderr: {:#?}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A config with one host in front of `servers`, with `extra` appended to the host table
/// and `server_extra` to `[server]`.
pub fn config(servers: &[String], rules: &Path, server_extra: &str, host_extra: &str) -> String {
    let servers: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n{server_extra}\n\
         [log]\naccess = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [{}]\nconnect_timeout_ms = 500\nread_timeout_ms = 1000\nfail_timeout_ms = 5000\n\
         [[host]]\nnames = [\"*\"]\nupstream = \"app\"\nwaf = {{ mode = \"block\", rules = [{:?}] }}\n{host_extra}\n",
        servers.join(", "),
        rules.to_str().unwrap()
    )
}

/// A pooled HTTP/1.1 client.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A new pooled HTTP/1.1 client.
pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A response read whole.
pub struct Got {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

/// Sends `req` and reads the whole response.
pub async fn send(c: &HttpClient, req: Request<Full<Bytes>>) -> Got {
    let resp = c.request(req).await.expect("request failed");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body failed").to_bytes();
    Got {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// GET `url`.
pub async fn get(c: &HttpClient, url: &str) -> Got {
    send(c, Request::get(url).body(Full::new(Bytes::new())).unwrap()).await
}
