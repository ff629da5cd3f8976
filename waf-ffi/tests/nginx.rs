//! The nginx module in real nginx: builds `nginx/` against Debian's nginx-dev 1.22 sources
//! (`/usr/share/nginx/src`) with the static library cargo built for this test, starts
//! `/usr/sbin/nginx` on a free loopback port with `load_module`, and proxies to an upstream
//! served by this test on 127.0.0.1. CRS comes from `../shared/crs` through
//! `examples/crs.conf`.
//!
//! Needs `nginx` and `nginx-dev` (`.ci/run` installs them). Set `WAF_NGINX_KEEP=1` to keep
//! the temporary prefix (config, error log) for inspection.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};
use waf_test_support::{code_in, Smtp};

#[path = "../../waf-redis/tests/support/redis.rs"]
mod redis_support;

const NGINX: &str = "/usr/sbin/nginx";
const NGINX_SRC: &str = "/usr/share/nginx/src";

/// A SQL error page that CRS's data-leakage rules (951xxx) recognise.
const LEAK_BODY: &str = "<html><body>Warning: You have an error in your SQL syntax; check the \
     manual that corresponds to your MySQL server version for the right syntax</body></html>";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// `target/<profile>/deps`, where cargo put `libwaf_ffi.a` (built with this test; cargo
/// copies it up to `target/<profile>` only in `cargo build`).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
}

/// Builds the module once per test run; returns the path of the `.so`.
fn module() -> &'static Path {
    static MODULE: OnceLock<PathBuf> = OnceLock::new();
    MODULE.get_or_init(|| {
        let lib = deps_dir().join("libwaf_ffi.a");
        assert!(lib.exists(), "{} is missing", lib.display());
        assert!(
            Path::new(NGINX_SRC).join("conf_flags").exists(),
            "{NGINX_SRC} is missing: apt-get install -y nginx nginx-dev (see .ci/run)"
        );
        let build = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ngx-module-build");
        let _ = std::fs::remove_dir_all(&build);
        let addon = Path::new(env!("CARGO_MANIFEST_DIR")).join("nginx");
        let script = format!(
            "set -e; cp -r {NGINX_SRC} {b}; cd {b}; . ./conf_flags; \
             ./configure \"${{NGX_CONF_FLAGS[@]}}\" --add-dynamic-module={addon} >configure.log 2>&1 \
               || {{ tail -30 configure.log; exit 1; }}; \
             make -f objs/Makefile modules >make.log 2>&1 || {{ cat make.log; exit 1; }}",
            b = build.display(),
            addon = addon.display(),
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .env("WAF_FFI_LIB", &lib)
            // compiles the X-Waf-Test-Fault hook (see nginx/config) for the fail-open test
            .env("WAF_NGINX_TEST_HOOKS", "1")
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "module build failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let so = build.join("objs/ngx_http_waf_module.so");
        assert!(so.exists());
        so
    })
}

/// What the upstream saw: every request body, so tests can check that a blocked request
/// never reached it.
#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    bodies: Mutex<Vec<Vec<u8>>>,
}

/// A tiny HTTP/1.1 upstream on 127.0.0.1: a path with `/leak` answers a SQL error page, with `/echo` the
/// request body, anything else "hello upstream". One thread per connection, `Connection:
/// close`.
fn start_upstream() -> (u16, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let s = s.clone();
            thread::spawn(move || serve(conn, &s));
        }
    });
    (port, seen)
}

fn serve(mut conn: TcpStream, seen: &Seen) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf[head_end..].to_vec();
    seen.requests.fetch_add(1, Ordering::SeqCst);
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let reply: Vec<u8> = if path.contains("/leak") {
        LEAK_BODY.into()
    } else if path.contains("/echo") {
        format!("got {} bytes", body.len()).into()
    } else {
        b"hello upstream".to_vec()
    };
    seen.bodies.lock().expect("lock").push(body);
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.len()
    );
    let _ = conn.write_all(resp.as_bytes());
    let _ = conn.write_all(&reply);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Sends one request and returns (status, body); status 0 when the connection was closed
/// without an answer.
fn request(port: u16, method: &str, target: &str, body: &[u8]) -> (u16, String) {
    let text = exchange(port, method, target, body);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Sends one request and returns the whole response as text.
fn exchange(port: u16, method: &str, target: &str, body: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect nginx");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: waf-ffi-test/1.0\r\n\
         Accept: text/html\r\nConnection: close\r\n"
    );
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write request");
    s.write_all(body).expect("write body");
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    String::from_utf8_lossy(&resp).to_string()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A running nginx (master in the foreground, a child of the test) with its own prefix.
struct Nginx {
    child: Child,
    prefix: PathBuf,
    port: u16,
    /// The second server's port (only with `custom`).
    port2: u16,
}

impl Nginx {
    /// Starts nginx with `waf on` at http level and CRS in the first server; `custom` adds
    /// [`CUSTOM_LOCATION`] to it and [`SECOND_SERVER`].
    fn start(name: &str, upstream: u16, workers: usize, custom: bool) -> Nginx {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nginx-{name}"));
        let _ = std::fs::remove_dir_all(&prefix);
        std::fs::create_dir_all(prefix.join("logs")).expect("mkdir prefix");
        let port = free_port();
        let crs_conf = workspace_root().join("examples/crs.conf");
        let port2 = free_port();
        let (custom, second) = if custom {
            (
                CUSTOM_LOCATION.replace("UPSTREAM", &upstream.to_string()),
                SECOND_SERVER
                    .replace("UPSTREAM", &upstream.to_string())
                    .replace("PORT", &port2.to_string()),
            )
        } else {
            (String::new(), String::new())
        };
        let conf = format!(
            r#"load_module {module};
worker_processes {workers};
pid {p}/nginx.pid;
error_log {p}/logs/error.log info;
events {{ worker_connections 128; }}
http {{
    access_log {p}/logs/access.log;
    client_body_temp_path {p}/client_body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    client_body_buffer_size 1k;
    client_max_body_size 1m;

    waf on;

    server {{
        listen 127.0.0.1:{port};
        waf_rules_file {crs};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
        }}
        location /off/ {{
            waf off;
            proxy_pass http://127.0.0.1:{upstream};
        }}
        {custom}
    }}
    {second}
}}
"#,
            module = module().display(),
            p = prefix.display(),
            crs = crs_conf.display(),
        );
        std::fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
        let child = Command::new(NGINX)
            .args(["-p"])
            .arg(&prefix)
            .arg("-c")
            .arg(prefix.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nginx (apt-get install -y nginx)");
        let mut n = Nginx {
            child,
            prefix,
            port,
            port2,
        };
        n.wait_ready();
        n
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("nginx exited with {status}: {err}\n{}", self.error_log());
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
        panic!("nginx did not listen within 300 s\n{}", self.error_log());
    }

    fn master(&self) -> u32 {
        self.child.id()
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    fn workers(&self) -> BTreeSet<u32> {
        children_of(self.master())
    }

    /// `nginx -s reload`, then waits until every worker is new and the old ones are gone.
    fn reload(&self, workers: usize) {
        let before = self.workers();
        let out = Command::new(NGINX)
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(self.prefix.join("nginx.conf"))
            .args(["-s", "reload"])
            .output()
            .expect("nginx -s reload");
        assert!(
            out.status.success(),
            "reload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let now = self.workers();
            if now.len() == workers && now.is_disjoint(&before) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "reload did not replace the workers: before {before:?}, now {now:?}\n{}",
                self.error_log()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGQUIT would wait for requests; SIGTERM is nginx's fast shutdown.
        let _ = Command::new("kill")
            .args(["-TERM", &self.master().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("WAF_NGINX_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.prefix);
        }
    }
}

/// Processes whose parent is `pid` (from /proc/<pid>/stat).
fn children_of(pid: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ..."; comm may contain spaces, so split after ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.insert(child);
        }
    }
    out
}

/// Resident set size in KiB (VmRSS).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// A location with its own rules on top of the inherited CRS: a phase-4 rule that blocks
/// the upstream's normal answer. Its `waf_rules` make the master build a second engine.
const CUSTOM_LOCATION: &str = r#"location /custom/ {
            waf_rules 'SecRule RESPONSE_HEADERS:Content-Type "@contains text/html" "id:9100,phase:3,pass,nolog"
                       SecRule RESPONSE_BODY "@contains hello upstream" "id:9101,phase:4,deny,status:409,msg:\'custom response rule\'"';
            proxy_pass http://127.0.0.1:UPSTREAM;
        }"#;

/// A server with its own small rule set and no CRS (rules do not cross servers): redirect,
/// drop, and a phase-3 rule (chained on an argument so that only one request trips it).
const SECOND_SERVER: &str = r#"server {
        listen 127.0.0.1:PORT;
        waf_rules 'SecRuleEngine On
                   SecRule ARGS:go "@streq away" "id:9201,phase:1,redirect:http://example.com/blocked"
                   SecRule ARGS:cut "@streq now" "id:9202,phase:1,drop"
                   SecRule ARGS:hdr "@streq 1" "id:9203,phase:3,deny,status:503,chain"
                   SecRule RESPONSE_HEADERS:Content-Type "@contains text/html"';
        location / {
            proxy_pass http://127.0.0.1:UPSTREAM;
        }
    }"#;

const SQLI_QUERY: &str = "/index.html?id=1%27%20OR%201%3D1--";

#[test]
fn requests_are_inspected_in_every_phase() {
    let (upstream, seen) = start_upstream();
    let nginx = Nginx::start("requests", upstream, 2, true);

    // Benign GET and POST reach the upstream.
    let (status, body) = request(nginx.port, "GET", "/index.html?name=john", b"");
    assert_eq!(status, 200, "{body}\n{}", nginx.error_log());
    assert_eq!(body, "hello upstream");
    let (status, body) = request(nginx.port, "POST", "/echo", b"name=john&city=paris");
    assert_eq!(status, 200, "{}", nginx.error_log());
    assert_eq!(body, "got 20 bytes");

    // SQLi in the query: 403 from the access phase, never forwarded.
    let before = seen.requests.load(Ordering::SeqCst);
    let (status, _) = request(nginx.port, "GET", SQLI_QUERY, b"");
    assert_eq!(status, 403);
    assert_eq!(seen.requests.load(Ordering::SeqCst), before);

    // SQLi in a POST body: 403 before the body goes upstream.
    let sqli_body: &[u8] = b"user=admin&id=1' OR 1=1-- ";
    let (status, _) = request(nginx.port, "POST", "/echo", sqli_body);
    assert_eq!(status, 403, "{}", nginx.error_log());
    // The same in a body larger than client_body_buffer_size (spooled to a temp file).
    let mut big = b"pad=".to_vec();
    big.extend(std::iter::repeat_n(b'a', 8000));
    big.extend_from_slice(b"&id=1' UNION SELECT password FROM users-- ");
    let (status, _) = request(nginx.port, "POST", "/echo", &big);
    assert_eq!(status, 403, "{}", nginx.error_log());
    assert_eq!(seen.requests.load(Ordering::SeqCst), before);
    assert!(!seen
        .bodies
        .lock()
        .expect("lock")
        .iter()
        .any(|b| find(b, b"1' OR 1=1").is_some() || find(b, b"UNION SELECT").is_some()));

    // Response phase: CRS's SQL error leakage rules block the upstream's error page.
    let (status, body) = request(nginx.port, "GET", "/leak", b"");
    assert_eq!(status, 403, "{body}");
    assert!(
        !body.contains("SQL syntax"),
        "the leaked page went out: {body}"
    );

    // A custom phase-4 rule from `waf_rules` in a location, on top of CRS from http{}.
    let (status, body) = request(nginx.port, "GET", "/custom/x", b"");
    assert_eq!(status, 409, "{body}");
    assert!(!body.contains("hello upstream"));
    // ... and the CRS it inherited still runs there.
    let (status, _) = request(nginx.port, "GET", "/custom/x?id=1%27%20OR%201%3D1--", b"");
    assert_eq!(status, 403);

    // `waf off` in a location: nothing is inspected.
    let (status, body) = request(nginx.port, "GET", "/off/?id=1%27%20OR%201%3D1--", b"");
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(nginx.port, "GET", "/off/leak", b"");
    assert_eq!(status, 200);
    assert!(body.contains("SQL syntax"));

    // The second server: its own engine, without CRS.
    let (status, _) = request(nginx.port2, "GET", SQLI_QUERY, b"");
    assert_eq!(status, 200, "CRS leaked into the second server");
    let resp = exchange(nginx.port2, "GET", "/?go=away", b"");
    assert!(resp.starts_with("HTTP/1.1 302"), "{resp}");
    assert!(
        resp.contains("\r\nLocation: http://example.com/blocked\r\n"),
        "{resp}"
    );
    let resp = exchange(nginx.port2, "GET", "/?cut=now", b"");
    assert_eq!(resp, "", "drop must close the connection without an answer");
    let (status, body) = request(nginx.port2, "GET", "/?hdr=1", b"");
    assert_eq!(status, 503, "{body}");
    assert!(!body.contains("hello upstream"));

    // Reports reach the error log at the log phase: the deciding rule and the rules that
    // logged (942100 is libinjection's SQLi detection, 951230 MySQL error leakage).
    let log = nginx.error_log();
    for want in [
        "status=403 rule=949110",
        "status=403 rule=959100",
        "status=409 rule=9101",
        "status=302 rule=9201",
        "status=503 rule=9203",
        "rules=942100,",
        "rules=951230,959100",
        "waf audit: {",
    ] {
        assert!(log.contains(want), "{want} not in the error log:\n{log}");
    }
}

#[test]
fn bad_rules_fail_the_configuration_test() {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nginx-bad-rules");
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::create_dir_all(prefix.join("logs")).expect("mkdir");
    let conf = format!(
        "load_module {};\nerror_log {p}/logs/error.log;\npid {p}/nginx.pid;\n\
         events {{}}\nhttp {{ waf on; waf_rules 'SecRule ARGS \"@rx (\" \"id:1,phase:1,deny\"';\n\
         server {{ listen 127.0.0.1:{}; }} }}\n",
        module().display(),
        free_port(),
        p = prefix.display()
    );
    std::fs::write(prefix.join("nginx.conf"), conf).expect("write conf");
    let out = Command::new(NGINX)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(prefix.join("nginx.conf"))
        .arg("-t")
        .output()
        .expect("nginx -t");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("waf: rules failed to load"), "{err}");
    assert!(err.contains("nginx.conf:5"), "{err}");
}

/// How much RSS may grow over the 50 reloads, per process, in KiB.
///
/// Without help, glibc keeps the pages of a freed engine in its arenas: before the module
/// called `malloc_trim` after freeing an engine, the master grew by about 95 KiB per reload
/// (67,476 -> 72,168 KiB over 50). With it (2 workers, CRS PL1 at http level, dev build):
/// master 55,132 -> 55,268 KiB, workers 50,400 -> 50,540 and 50,616 -> 50,768 KiB, about
/// 3 KiB per reload. One CRS engine is tens of MiB, so leaking one per reload, or even a
/// few hundred KiB per reload, would exceed this bound.
const RSS_TOLERANCE_KIB: u64 = 2 * 1024;

#[test]
fn fifty_reloads_keep_serving_and_do_not_grow() {
    const WORKERS: usize = 2;
    let (upstream, _seen) = start_upstream();
    let nginx = Nginx::start("reloads", upstream, WORKERS, false);
    let check = |round: usize| {
        let (status, body) = request(nginx.port, "GET", "/index.html?q=hello", b"");
        assert_eq!(status, 200, "round {round}: {body}\n{}", nginx.error_log());
        let (status, _) = request(nginx.port, "GET", SQLI_QUERY, b"");
        assert_eq!(status, 403, "round {round}");
    };
    let measure = || {
        let workers: Vec<u64> = nginx.workers().iter().map(|&w| rss_kib(w)).collect();
        (rss_kib(nginx.master()), workers)
    };

    // Warm-up: the first reloads grow the heap to its working size.
    for round in 0..3 {
        nginx.reload(WORKERS);
        check(round);
    }
    let (master_before, workers_before) = measure();

    for round in 0..50 {
        nginx.reload(WORKERS);
        check(round);
    }
    let (master_after, workers_after) = measure();

    println!(
        "RSS KiB: master {master_before} -> {master_after}; \
         workers {workers_before:?} -> {workers_after:?}"
    );
    assert!(
        master_after <= master_before + RSS_TOLERANCE_KIB,
        "master RSS grew from {master_before} KiB to {master_after} KiB over 50 reloads"
    );
    let wb = workers_before.iter().max().copied().unwrap_or(0);
    let wa = workers_after.iter().max().copied().unwrap_or(0);
    assert!(
        wa <= wb + RSS_TOLERANCE_KIB,
        "worker RSS grew from {wb} KiB to {wa} KiB over 50 reloads"
    );
}

/// `waf_policy_file`: the native policy from a TOML file, as the proxy and the middleware
/// take it; a block rule's status, and a rate limit's 429 with `Retry-After`. One worker:
/// the policy's state (rate-limit buckets, bans) is per worker process.
#[test]
fn policy_file_blocks_and_rate_limits_with_retry_after() {
    let (upstream, _seen) = start_upstream();
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nginx-policy");
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::create_dir_all(prefix.join("logs")).expect("mkdir");
    std::fs::write(prefix.join("agents.txt"), "evilbot/1.0\n").expect("write list");
    std::fs::write(
        prefix.join("policy.toml"),
        r#"
[[list]]
name = "agents"
kind = "string"
file = "agents.txt"

[[rules]]
name = "no-backups"
expression = 'http.request.uri.path ends_with ".bak" or http.user_agent in $agents'
action = "block"
status = 406

[[rate_limit]]
name = "limited"
match = 'http.request.uri.path starts_with "/limited"'
requests = 2
period_secs = 60
"#,
    )
    .expect("write policy");
    let port = free_port();
    let conf = format!(
        "load_module {};\nworker_processes 1;\nerror_log {p}/logs/error.log info;\npid {p}/nginx.pid;\n\
         events {{ worker_connections 64; }}\nhttp {{ access_log off; waf on;\n\
         client_body_temp_path {p}/client_body; proxy_temp_path {p}/proxy;\n\
         fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi; scgi_temp_path {p}/scgi;\n\
         server {{ listen 127.0.0.1:{port}; waf_policy_file policy.toml;\n\
         location / {{ proxy_pass http://127.0.0.1:{upstream}; }} }} }}\n",
        module().display(),
        p = prefix.display()
    );
    std::fs::write(prefix.join("nginx.conf"), conf).expect("write conf");
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(prefix.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nginx (apt-get install -y nginx)");
    let mut n = Nginx {
        child,
        prefix,
        port,
        port2: 0,
    };
    n.wait_ready();
    assert_eq!(request(port, "GET", "/index.html", b"").0, 200);
    assert_eq!(
        request(port, "GET", "/db.bak", b"").0,
        406,
        "{}",
        n.error_log()
    );
    assert_eq!(request(port, "GET", "/limited/a", b"").0, 200);
    assert_eq!(request(port, "GET", "/limited/b", b"").0, 200);
    let third = exchange(port, "GET", "/limited/c", b"");
    assert!(third.starts_with("HTTP/1.1 429"), "{third}");
    assert!(third.contains("Retry-After: 30"), "{third}");

    // A malformed expression fails `nginx -t` with the rule, line and column.
    std::fs::write(
        n.prefix.join("bad.toml"),
        "[[rules]]\nname = \"bad\"\nexpression = 'http.request.uri.path == 404'\naction = \"block\"\n",
    )
    .expect("write bad policy");
    let bad_conf = std::fs::read_to_string(n.prefix.join("nginx.conf"))
        .expect("read conf")
        .replace("policy.toml", "bad.toml");
    std::fs::write(n.prefix.join("bad.conf"), bad_conf).expect("write bad conf");
    let out = Command::new(NGINX)
        .arg("-p")
        .arg(&n.prefix)
        .arg("-c")
        .arg(n.prefix.join("bad.conf"))
        .arg("-t")
        .output()
        .expect("nginx -t");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rule \"bad\" expression:1:26"), "{err}");
}

/// Writes `nginx.conf` under a fresh prefix (`logs/`, `html/` made) with `http` as the
/// `http { }` block's body (temp paths and `listen` are the caller's), and returns it.
fn custom_prefix(name: &str) -> PathBuf {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nginx-{name}"));
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::create_dir_all(prefix.join("logs")).expect("mkdir logs");
    std::fs::create_dir_all(prefix.join("html")).expect("mkdir html");
    prefix
}

fn write_conf(prefix: &Path, file: &str, http: &str) {
    let conf = format!(
        "load_module {};\nworker_processes 1;\nerror_log {p}/logs/error.log info;\n\
         pid {p}/nginx.pid;\nevents {{ worker_connections 64; }}\n\
         http {{ client_body_temp_path {p}/client_body; proxy_temp_path {p}/proxy;\n\
         fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi; scgi_temp_path {p}/scgi;\n\
         {http}\n}}\n",
        module().display(),
        p = prefix.display()
    );
    std::fs::write(prefix.join(file), conf).expect("write conf");
}

/// Starts nginx (foreground master) on `prefix/nginx.conf`, listening on `port`.
fn spawn_nginx(prefix: PathBuf, port: u16) -> Nginx {
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(prefix.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nginx (apt-get install -y nginx)");
    let mut n = Nginx {
        child,
        prefix,
        port,
        port2: 0,
    };
    n.wait_ready();
    n
}

/// `nginx -t` on `prefix/file`: (success, stderr).
fn config_test(prefix: &Path, file: &str) -> (bool, String) {
    let out = Command::new(NGINX)
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(prefix.join(file))
        .arg("-t")
        .output()
        .expect("nginx -t");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The value of response header `name` in a raw response.
fn header<'a>(resp: &'a str, name: &str) -> Option<&'a str> {
    let head = resp.split_once("\r\n\r\n")?.0;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Rules of the directive tests: a phase-1 rule that logs and passes on `?a=b`, and a
/// phase-4 rule that blocks a response body containing `SECRET`.
const DIRECTIVE_RULES: &str = r#"waf_rules 'SecRuleEngine On
               SecResponseBodyAccess On
               SecResponseBodyMimeType text/html
               SecRule ARGS:a "@streq b" "id:9302,phase:1,pass,log,msg:\'arg a\'"
               SecRule RESPONSE_BODY "@contains SECRET" "id:9301,phase:4,deny,status:403,log,msg:\'secret\'"';"#;

/// `waf_response_buffer_size` (http -> server -> location), `waf_audit_log` (http, turned
/// off in one location) and `$request_id` as the transaction id.
#[test]
fn response_buffer_size_audit_log_and_request_id() {
    let prefix = custom_prefix("directives");
    // 5 KiB, in one buffer: inspected when the buffer size holds it, else streamed.
    let page = format!("SECRET{}", "x".repeat(5 * 1024));
    for dir in ["", "small/", "quiet/"] {
        std::fs::create_dir_all(prefix.join("html").join(dir)).expect("mkdir");
        std::fs::write(prefix.join("html").join(dir).join("page.html"), &page).expect("page");
        std::fs::write(prefix.join("html").join(dir).join("index.html"), "hello").expect("index");
    }
    let port = free_port();
    write_conf(
        &prefix,
        "nginx.conf",
        &format!(
            "access_log off; default_type text/html; waf on;\n\
             waf_audit_log logs/waf-audit.json;\n\
             waf_response_buffer_size 2m;\n\
             {DIRECTIVE_RULES}\n\
             server {{ listen 127.0.0.1:{port}; root html;\n\
               add_header X-Request-Id $request_id always;\n\
               waf_response_buffer_size 1k;\n\
               location / {{ waf_response_buffer_size 64k; }}\n\
               location /small/ {{ }}\n\
               location /quiet/ {{ waf_audit_log off; }}\n\
             }}"
        ),
    );
    let n = spawn_nginx(prefix.clone(), port);

    let get = |target: &str| {
        let resp = exchange(port, "GET", target, b"");
        let status: u16 = resp
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let id = header(&resp, "X-Request-Id")
            .unwrap_or_else(|| panic!("no X-Request-Id in {resp}"))
            .to_string();
        assert_eq!(id.len(), 32, "{id}");
        (status, resp, id)
    };

    // 64k in the location: the whole page is inspected and blocked.
    let (status, _, blocked_id) = get("/page.html");
    assert_eq!(status, 403, "{}", n.error_log());
    // 1k from the server: the page is larger, streams through uninspected.
    let (status, resp, streamed_id) = get("/small/page.html");
    assert_eq!(status, 200, "{}", n.error_log());
    assert!(resp.ends_with(&page), "whole body sent");
    // A rule that logs and passes.
    let (status, _, logged_id) = get("/index.html?a=b");
    assert_eq!(status, 200);
    // Nothing matched: no audit record.
    let (status, _, clean_id) = get("/index.html");
    assert_eq!(status, 200);
    // Audit file off here: the record goes to the error log at "info".
    let (status, _, quiet_id) = get("/quiet/index.html?a=b");
    assert_eq!(status, 200);

    let audit = std::fs::read_to_string(prefix.join("logs/waf-audit.json")).expect("audit");
    let lines: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "{audit}");
    assert_eq!(lines[0]["unique_id"], blocked_id.as_str(), "{audit}");
    assert_eq!(lines[1]["unique_id"], logged_id.as_str(), "{audit}");
    assert!(lines[0].to_string().contains("9301"), "{audit}");
    assert!(lines[1].to_string().contains("9302"), "{audit}");
    for id in [&streamed_id, &clean_id, &quiet_id] {
        assert!(!audit.contains(id.as_str()), "{id} in {audit}");
    }
    let log = n.error_log();
    assert!(
        log.contains(&format!("unique_id={blocked_id} status=403")),
        "{log}"
    );
    assert!(
        log.contains("waf audit: ") && log.contains(&format!("\"unique_id\":\"{quiet_id}\"")),
        "{log}"
    );
    assert!(
        !log.contains(&format!("waf audit: {{\"unique_id\":\"{logged_id}")),
        "{log}"
    );
}

/// `waf_fail_open` is accepted at every level; bad values of the new directives fail
/// `nginx -t` with a message naming the directive. (What fail-open does is tested in
/// `fail_open_passes_and_fail_closed_answers_500_when_the_engine_fails`.)
#[test]
fn new_directives_parse_and_bad_values_fail_the_configuration_test() {
    let prefix = custom_prefix("directive-values");
    let port = free_port();
    let good = format!(
        "waf on; waf_fail_open on; waf_response_buffer_size 512k; waf_audit_log off;\n\
         {DIRECTIVE_RULES}\n\
         server {{ listen 127.0.0.1:{port}; waf_fail_open off;\n\
           location / {{ waf_fail_open on; waf_audit_log logs/a.json; }} }}"
    );
    write_conf(&prefix, "good.conf", &good);
    let (ok, err) = config_test(&prefix, "good.conf");
    assert!(ok, "{err}");

    let cases = [
        (
            "waf_response_buffer_size lots;",
            "\"waf_response_buffer_size\" directive invalid value",
        ),
        (
            "waf_fail_open maybe;",
            "invalid value \"maybe\" in \"waf_fail_open\" directive, it must be \"on\" or \"off\"",
        ),
        (
            "waf_audit_log logs/a.json; waf_audit_log logs/b.json;",
            "\"waf_audit_log\" directive is duplicate",
        ),
        (
            "waf_audit_log /nonexistent-dir/audit.json;",
            "open() \"/nonexistent-dir/audit.json\" failed",
        ),
    ];
    for (i, (directive, message)) in cases.iter().enumerate() {
        let file = format!("bad{i}.conf");
        write_conf(
            &prefix,
            &file,
            &format!("waf on; {directive}\nserver {{ listen 127.0.0.1:{port}; }}"),
        );
        let (ok, err) = config_test(&prefix, &file);
        assert!(!ok, "{directive}: {err}");
        assert!(err.contains(message), "{directive}: {err}");
        // nginx opens log files after parsing, so that error names the path, not a line
        if !directive.contains("nonexistent") {
            assert!(err.contains(&format!("{file}:")), "{directive}: {err}");
        }
    }
}

/// `waf_fail_open`: when the engine fails, `off` (the default, inherited here from http)
/// answers 500 and the upstream never sees the request; `on` passes it and logs at "alert".
/// The failure is real (the engine refuses a NULL argument with WAF_STATUS_INVALID_ARGUMENT)
/// but provoked by a hook that only test builds of the module have (`X-Waf-Test-Fault`).
#[test]
fn fail_open_passes_and_fail_closed_answers_500_when_the_engine_fails() {
    let (upstream, seen) = start_upstream();
    let prefix = custom_prefix("fail-open");
    let port = free_port();
    write_conf(
        &prefix,
        "nginx.conf",
        &format!(
            "access_log off; waf on;\n{DIRECTIVE_RULES}\n\
             server {{ listen 127.0.0.1:{port};\n\
               location /closed/ {{ proxy_pass http://127.0.0.1:{upstream}; }}\n\
               location /open/ {{ waf_fail_open on; proxy_pass http://127.0.0.1:{upstream}; }}\n\
             }}"
        ),
    );
    let n = spawn_nginx(prefix, port);
    let fault = |target: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect nginx");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let req = format!(
            "GET {target} HTTP/1.1\r\nHost: localhost\r\nX-Waf-Test-Fault: 1\r\n\
             Connection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).expect("write");
        let mut resp = Vec::new();
        let _ = s.read_to_end(&mut resp);
        String::from_utf8_lossy(&resp).to_string()
    };

    // Without the fault both locations serve.
    assert_eq!(request(port, "GET", "/closed/a", b"").0, 200);
    assert_eq!(request(port, "GET", "/open/a", b"").0, 200);
    let before = seen.requests.load(Ordering::SeqCst);

    let closed = fault("/closed/b");
    assert!(closed.starts_with("HTTP/1.1 500"), "{closed}");
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        before,
        "reached upstream"
    );
    let log = n.error_log();
    assert!(
        log.contains("waf: request headers failed (status 2), answering 500 (waf_fail_open off)"),
        "{log}"
    );

    let open = fault("/open/b");
    assert!(open.starts_with("HTTP/1.1 200"), "{open}");
    assert!(open.ends_with("hello upstream"), "{open}");
    assert_eq!(seen.requests.load(Ordering::SeqCst), before + 1);
    let log = n.error_log();
    let line = log
        .lines()
        .find(|l| l.contains("passing the request (waf_fail_open on)"))
        .unwrap_or_else(|| panic!("no fail-open line in {log}"));
    assert!(
        line.contains("[alert]") && line.contains("waf: request headers failed (status 2)"),
        "{line}"
    );
}

/// One raw GET with `cookie` (may be empty); the whole response.
fn get_with_cookie(port: u16, target: &str, cookie: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect nginx");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut req = format!(
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: waf-ffi-test/1.0\r\n\
         Accept: text/html\r\nConnection: close\r\n"
    );
    if !cookie.is_empty() {
        req.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write request");
    let mut resp = Vec::new();
    // The connection must close after the answer (`Connection: close`): a request nginx
    // never finalizes would time out here.
    s.read_to_end(&mut resp)
        .unwrap_or_else(|e| panic!("GET {target}: connection not closed: {e}"));
    String::from_utf8_lossy(&resp).to_string()
}

/// The `name=value` of the `Set-Cookie` for `name` in a raw response.
fn set_cookie(resp: &str, name: &str) -> Option<String> {
    let head = resp.split_once("\r\n\r\n")?.0;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let v = v.trim();
        (k.eq_ignore_ascii_case("set-cookie") && v.starts_with(&format!("{name}=")))
            .then(|| v.split(';').next().unwrap_or("").to_string())
    })
}

/// The gates served by the module: a cookie challenge round trip (the `/.waf/cookie` check
/// answered by the library), the pass accepted, a waiting room of one admitting in order
/// with the same pages as every host; sign-in without `waf_smtp` fails `nginx -t`.
#[test]
fn gates_cookie_challenge_and_waiting_room() {
    let (upstream, _seen) = start_upstream();
    let prefix = custom_prefix("gates");
    std::fs::write(
        prefix.join("policy.toml"),
        r#"
[gates]
keys = ["an nginx test key of at least 32 bytes"]
[[gates.waiting_room]]
name = "shop"
match = 'http.request.uri.path == "/shop"'
capacity = 1
idle_secs = 1
refresh_secs = 1
[[rules]]
name = "p"
expression = 'http.request.uri.path == "/protected"'
action = "challenge"
challenge = "cookie"
"#,
    )
    .expect("write policy");
    let port = free_port();
    let http = format!(
        "access_log off; waf on;\nserver {{ listen 127.0.0.1:{port}; waf_policy_file policy.toml;\n\
         location / {{ proxy_pass http://127.0.0.1:{upstream}; }} }}"
    );
    write_conf(&prefix, "nginx.conf", &http);
    let n = spawn_nginx(prefix, port);

    // Cookie challenge.
    let r = get_with_cookie(port, "/protected", "");
    assert!(r.starts_with("HTTP/1.1 302"), "{r}\n{}", n.error_log());
    // nginx makes a relative Location absolute (`absolute_redirect on`, its default).
    let origin = format!("http://localhost:{port}");
    let check = header(&r, "location").expect("location");
    let check = check
        .strip_prefix(origin.as_str())
        .unwrap_or(check)
        .to_string();
    assert!(check.starts_with("/.waf/cookie?"), "{check}");
    let pass = set_cookie(&r, "__waf_pass").expect("the pass cookie");
    let r = get_with_cookie(port, &check, &pass);
    assert!(r.starts_with("HTTP/1.1 303"), "{r}\n{}", n.error_log());
    assert_eq!(
        header(&r, "location").map(|l| l.strip_prefix(origin.as_str()).unwrap_or(l)),
        Some("/protected")
    );
    let r = get_with_cookie(port, "/protected", &pass);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    // Without the cookie, the check shows the "cookies required" page.
    let r = get_with_cookie(port, &check, "");
    assert!(
        r.contains("<html") && r.to_lowercase().contains("cookie"),
        "{r}"
    );
    // An unknown gate endpoint: 404 from the library, not the upstream.
    assert!(get_with_cookie(port, "/.waf/nope", "").starts_with("HTTP/1.1 404"));

    // Waiting room of one.
    let r = get_with_cookie(port, "/shop", "");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let a = set_cookie(&r, "__waf_admit").expect("admission cookie");
    let r = get_with_cookie(port, "/shop", "");
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(
        r.contains("<html") && header(&r, "retry-after").is_some(),
        "{r}"
    );
    let b = set_cookie(&r, "__waf_ticket").expect("ticket");
    let r = get_with_cookie(port, "/shop", "");
    let c = set_cookie(&r, "__waf_ticket").expect("ticket");
    for _ in 0..3 {
        assert!(get_with_cookie(port, "/shop", &a).starts_with("HTTP/1.1 200"));
        assert!(get_with_cookie(port, "/shop", &b).starts_with("HTTP/1.1 503"));
        std::thread::sleep(Duration::from_millis(300));
    }
    // a leaves; after its idle second, b is in and c is next.
    std::thread::sleep(Duration::from_millis(1300));
    let r = get_with_cookie(port, "/shop", &c);
    assert!(r.starts_with("HTTP/1.1 503"), "c before b: {r}");
    let r = get_with_cookie(port, "/shop", &b);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(set_cookie(&r, "__waf_admit").is_some());

    // Sign-in sends mail: without waf_smtp it is refused at load, and says what to add.
    let prefix = custom_prefix("gates-signin");
    std::fs::write(
        prefix.join("policy.toml"),
        "[gates]\nkeys = [\"an nginx test key of at least 32 bytes\"]\n[gates.sign_in]\nallowed = [\"@example.com\"]\n",
    )
    .expect("write policy");
    write_conf(&prefix, "nginx.conf", &http);
    let (ok, err) = config_test(&prefix, "nginx.conf");
    assert!(
        !ok && err.contains("[gates.sign_in] sends its codes by mail: add \"waf_smtp"),
        "{err}"
    );
}

/// One raw request with `cookie` (may be empty) and a form `body` (a POST when not
/// empty); the whole response. The connection must close after the answer.
fn send(port: u16, target: &str, cookie: &str, body: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect nginx");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let method = if body.is_empty() { "GET" } else { "POST" };
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: waf-ffi-test/1.0\r\n\
         Accept: text/html\r\nConnection: close\r\n"
    );
    if !cookie.is_empty() {
        req.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("write request");
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)
        .unwrap_or_else(|e| panic!("{method} {target}: connection not closed: {e}"));
    String::from_utf8_lossy(&resp).to_string()
}

/// The value of hidden input `name` in a page.
fn input(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&key)
        .unwrap_or_else(|| panic!("no input {name} in {html}"))
        + key.len();
    html[at..at + html[at..].find('"').expect("end of value")].to_string()
}

/// Percent-encodes a form value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Asks for a code for `email` on /private (following to the sign-in form); the code
/// page and the cookies so far.
fn ask_code(port: u16, email: &str) -> (String, String) {
    let r = send(port, "/private", "", "");
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    let origin = format!("http://localhost:{port}");
    let loc = header(&r, "location").expect("location");
    let loc = loc.strip_prefix(origin.as_str()).unwrap_or(loc).to_string();
    assert!(loc.starts_with("/.waf/sign-in?"), "{loc}");
    let form_page = send(port, &loc, "", "");
    assert!(form_page.starts_with("HTTP/1.1 200"), "{form_page}");
    let form = set_cookie(&form_page, "__waf_form").expect("the form cookie");
    let body = format!(
        "email={}&form_token={}&return_to={}",
        enc(email),
        enc(&input(&form_page, "form_token")),
        enc(&input(&form_page, "return_to"))
    );
    let page = send(port, "/.waf/sign-in", &form, &body);
    (page, form)
}

/// Email-code sign-in served by the module with `waf_smtp`: the code mail goes through a
/// real SMTP server (aiosmtpd) by the library's mail thread, the code read from its Maildir
/// signs in (a wrong one does not), the session cookie lets the protected page through,
/// sign-out revokes it. With the relay down the visitor still gets the ordinary page and
/// the failure is logged, without the address.
#[test]
fn sign_in_with_mail_through_a_real_smtp_server() {
    let (upstream, seen) = start_upstream();
    let prefix = custom_prefix("signin-smtp");
    let smtp = Smtp::start(&prefix);
    std::fs::write(
        prefix.join("policy.toml"),
        r#"
[gates]
keys = ["an nginx test key of at least 32 bytes"]
[gates.sign_in]
match = 'http.request.uri.path == "/private"'
allowed = ["alice@example.com"]
"#,
    )
    .expect("write policy");
    let port = free_port();
    let http = format!(
        "access_log off; waf on;\n\
         waf_smtp 127.0.0.1:{} plain \"from=WAF <waf@example.com>\" timeout=5s;\n\
         server {{ listen 127.0.0.1:{port}; waf_policy_file policy.toml;\n\
         location / {{ proxy_pass http://127.0.0.1:{upstream}; }} }}",
        smtp.port
    );
    write_conf(&prefix, "nginx.conf", &http);
    let n = spawn_nginx(prefix.clone(), port);

    let before = seen.requests.load(Ordering::SeqCst);
    let (page, form) = ask_code(port, "alice@example.com");
    assert!(
        page.starts_with("HTTP/1.1 200"),
        "{page}\n{}",
        n.error_log()
    );
    assert!(page.contains("alice@example.com"), "{page}");
    let mail = smtp.mail(1);
    assert!(mail.contains("To: alice@example.com"), "{mail}");
    assert!(mail.contains("From: WAF <waf@example.com>"), "{mail}");
    let code = code_in(&mail);
    assert!(code.bytes().all(|b| b.is_ascii_digit()), "{code}");
    let post = |code: &str| {
        let body = format!(
            "pending={}&code={code}&form_token={}&return_to={}",
            enc(&input(&page, "pending")),
            enc(&input(&page, "form_token")),
            enc(&input(&page, "return_to"))
        );
        send(port, "/.waf/sign-in/code", &form, &body)
    };
    let wrong = post(if code == "000000" { "111111" } else { "000000" });
    assert!(
        !wrong.starts_with("HTTP/1.1 303"),
        "a wrong code signs in: {wrong}"
    );
    let r = post(&code);
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    let origin = format!("http://localhost:{port}");
    assert_eq!(
        header(&r, "location").map(|l| l.strip_prefix(origin.as_str()).unwrap_or(l)),
        Some("/private")
    );
    let session = set_cookie(&r, "__waf_session").expect("the session cookie");
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        before,
        "no gate request reached the upstream"
    );
    let r = send(port, "/private", &session, "");
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("hello upstream"),
        "{r}"
    );
    // Sign-out revokes the session: the same cookie is sent to sign-in again.
    let out = send(port, "/.waf/sign-out", &session, "");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("signed out"), "{out}");
    let r = send(port, "/private", &session, "");
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    let log = n.error_log();
    assert!(!log.contains(&code), "the code is in the error log:\n{log}");

    // The relay down: the visitor still gets the ordinary page, the failure is logged.
    drop(smtp);
    let (page, _) = ask_code(port, "alice@example.com");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("alice@example.com"), "{page}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let log = loop {
        let log = n.error_log();
        if log.contains("a sign-in mail was not sent") || Instant::now() > deadline {
            break log;
        }
        thread::sleep(Duration::from_millis(100));
    };
    let line = log
        .lines()
        .find(|l| l.contains("a sign-in mail was not sent"))
        .unwrap_or_else(|| panic!("no failure line in:\n{log}"));
    assert!(!line.contains("alice"), "{line}");
}

/// `waf_smtp` is checked at load: bad values fail `nginx -t` with what is wrong.
#[test]
fn waf_smtp_is_checked_at_load() {
    let prefix = custom_prefix("smtp-bad");
    for (args, want) in [
        ("127.0.0.1 plain from=a@example.com", "HOST:PORT"),
        ("127.0.0.1:0 plain from=a@example.com", "1-65535"),
        (
            "127.0.0.1:25 ssl from=a@example.com",
            "plain, starttls or tls",
        ),
        ("127.0.0.1:25 plain", "needs from=ADDRESS"),
        (
            "127.0.0.1:25 plain from=not-an-address",
            "is not an address",
        ),
        ("127.0.0.1:25 plain from=a@example.com user=u", "together"),
        (
            "127.0.0.1:25 plain from=a@example.com password_file=nope",
            "cannot open",
        ),
        ("127.0.0.1:25 plain from=a@example.com timeout=0", "timeout"),
        (
            "127.0.0.1:25 plain from=a@example.com colour=red",
            "unknown parameter",
        ),
    ] {
        write_conf(&prefix, "nginx.conf", &format!("waf_smtp {args};"));
        let (ok, err) = config_test(&prefix, "nginx.conf");
        assert!(!ok && err.contains(want), "waf_smtp {args}: {err}");
    }
    std::fs::write(prefix.join("pw"), "secret\n").expect("write password");
    write_conf(
        &prefix,
        "nginx.conf",
        "waf_smtp [::1]:587 starttls from=a@example.com user=u password_file=pw timeout=3s;",
    );
    let (ok, err) = config_test(&prefix, "nginx.conf");
    assert!(ok, "{err}");
}

/// Limit of the fleet test: requests to `/limited` per client per minute.
const FLEET_LIMIT: usize = 5;

/// One GET on a new connection that lands on worker `pid`: new connections (spread over
/// the workers by `reuseport`) are probed with `/probe` until one is served by `pid`, and
/// `target` is then asked on that same keep-alive connection. The status of `target`.
fn get_on_worker(port: u16, pid: &str, target: &str) -> u16 {
    for _ in 0..200 {
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (_, worker) = keep_alive_get(&mut c, "/probe");
        if worker == pid {
            return keep_alive_get(&mut c, target).0;
        }
    }
    panic!("no connection reached worker {pid} in 200 tries");
}

/// One GET on an open connection, reading exactly one response (Content-Length): its
/// status and `X-Worker` header.
fn keep_alive_get(c: &mut TcpStream, target: &str) -> (u16, String) {
    write!(c, "GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = c.read(&mut byte).expect("read head");
        assert_eq!(
            n,
            1,
            "connection closed in the head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let status = head[9..12].parse().expect("status");
    let len: usize = header(&head, "Content-Length")
        .unwrap_or_else(|| panic!("no Content-Length: {head}"))
        .parse()
        .expect("length");
    let mut body = vec![0; len];
    c.read_exact(&mut body).expect("body");
    let worker = header(&head, "X-Worker").unwrap_or_default().to_string();
    (status, worker)
}

/// nginx with two workers and a policy allowing [`FLEET_LIMIT`] requests a minute to
/// `/limited`; `fleet` is the `waf_fleet` line (or nothing).
fn start_two_workers(name: &str, fleet: &str) -> (Nginx, [String; 2]) {
    let policy = format!(
        "[[rate_limit]]\nname = \"limited\"\n\
         match = 'http.request.uri.path starts_with \"/limited\"'\n\
         requests = {FLEET_LIMIT}\nperiod_secs = 60\n"
    );
    start_two_workers_with(name, fleet, &policy)
}

/// nginx with two workers serving `html/` (`/probe`, `/limited`, `/private`) under the
/// native policy `policy`; `http` goes into the `http` block (`waf_fleet`, `waf_smtp`).
fn start_two_workers_with(name: &str, http: &str, policy: &str) -> (Nginx, [String; 2]) {
    let prefix = custom_prefix(name);
    let fleet = http;
    std::fs::write(prefix.join("html/probe"), "probe\n").unwrap();
    std::fs::write(prefix.join("html/limited"), "limited\n").unwrap();
    std::fs::write(prefix.join("html/private"), "private page\n").unwrap();
    std::fs::write(prefix.join("policy.toml"), policy).unwrap();
    let port = free_port();
    let conf = format!(
        "load_module {};\nworker_processes 2;\nerror_log {p}/logs/error.log info;\n\
         pid {p}/nginx.pid;\nevents {{ worker_connections 64; }}\n\
         http {{ client_body_temp_path {p}/client_body; proxy_temp_path {p}/proxy;\n\
         fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi; scgi_temp_path {p}/scgi;\n\
         access_log off; {fleet}\n\
         server {{ listen 127.0.0.1:{port} reuseport; root html; waf on;\n\
         waf_policy_file policy.toml; add_header X-Worker $pid always; }} }}\n",
        module().display(),
        p = prefix.display()
    );
    std::fs::write(prefix.join("nginx.conf"), conf).unwrap();
    let n = spawn_nginx(prefix, port);
    // The two workers' pids, as they answer.
    let mut pids = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.len() < 2 {
        assert!(Instant::now() < deadline, "only workers {pids:?} answered");
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (status, pid) = keep_alive_get(&mut c, "/probe");
        assert_eq!(status, 200, "{}", n.error_log());
        pids.insert(pid);
    }
    let mut it = pids.into_iter();
    let pids = [it.next().unwrap(), it.next().unwrap()];
    (n, pids)
}

/// `2 × FLEET_LIMIT` requests to `/limited`, each on a new connection, alternating between
/// the two workers, 150 ms apart (several reconciliation rounds of 20 ms): how many were
/// let through, and the statuses.
fn alternate(n: &Nginx, pids: &[String; 2]) -> (usize, Vec<u16>) {
    let mut statuses = Vec::new();
    for i in 0..2 * FLEET_LIMIT {
        statuses.push(get_on_worker(
            n.port,
            &pids[i % 2],
            &format!("/limited?{i}"),
        ));
        thread::sleep(Duration::from_millis(150));
    }
    for s in &statuses {
        assert!(*s == 200 || *s == 429, "{statuses:?}\n{}", n.error_log());
    }
    (statuses.iter().filter(|s| **s == 200).count(), statuses)
}

#[test]
fn waf_fleet_shares_a_rate_limit_between_workers_through_real_redis() {
    // Without the fleet, each worker keeps its own bucket: twice the limit gets through.
    let (n, pids) = start_two_workers("fleet-none", "");
    let (allowed, statuses) = alternate(&n, &pids);
    assert_eq!(allowed, 2 * FLEET_LIMIT, "{statuses:?}");
    drop(n);

    // With it, the bucket is the fleet's: the limit holds over both workers.
    let redis = redis_support::RedisServer::start();
    let fleet = format!(
        "waf_fleet redis://127.0.0.1:{} namespace=fleet-test interval=20ms;",
        redis.port
    );
    let (n, pids) = start_two_workers("fleet-redis", &fleet);
    let (allowed, statuses) = alternate(&n, &pids);
    assert_eq!(allowed, FLEET_LIMIT, "{statuses:?}\n{}", n.error_log());
    // The first FLEET_LIMIT were let through, every later one refused, on both workers.
    assert!(
        statuses[..FLEET_LIMIT].iter().all(|s| *s == 200),
        "{statuses:?}"
    );
    assert!(
        statuses[FLEET_LIMIT..].iter().all(|s| *s == 429),
        "{statuses:?}"
    );
    // And the state is in Redis, under the namespace.
    let keys = redis.cli(&["KEYS", "*fleet-test*"]);
    assert!(!keys.trim().is_empty(), "no key of the namespace in Redis");

    // Redis gone: requests never wait for it; both workers answer at once, from their
    // local state (still refusing the client that is over the limit).
    let mut redis = redis;
    redis.kill();
    for i in 0..6 {
        let t = Instant::now();
        assert_eq!(get_on_worker(n.port, &pids[i % 2], "/limited?down"), 429);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{:?} with Redis down",
            t.elapsed()
        );
    }
}

/// One request on a new connection that lands on worker `pid` (probed with `/probe` on the
/// same keep-alive connection, as [`get_on_worker`]), then `Connection: close`: the whole
/// response. A POST when `body` is not empty.
fn send_on_worker(port: u16, pid: &str, target: &str, cookie: &str, body: &str) -> String {
    for _ in 0..200 {
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if keep_alive_get(&mut c, "/probe").1 != pid {
            continue;
        }
        let method = if body.is_empty() { "GET" } else { "POST" };
        let mut req = format!(
            "{method} {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: waf-ffi-test/1.0\r\n\
             Accept: text/html\r\nConnection: close\r\n"
        );
        if !cookie.is_empty() {
            req.push_str(&format!("Cookie: {cookie}\r\n"));
        }
        if !body.is_empty() {
            req.push_str(&format!(
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body);
        c.write_all(req.as_bytes()).expect("write request");
        let mut resp = Vec::new();
        c.read_to_end(&mut resp)
            .unwrap_or_else(|e| panic!("{method} {target}: connection not closed: {e}"));
        let resp = String::from_utf8_lossy(&resp).to_string();
        if let Some(w) = header(&resp, "X-Worker") {
            assert_eq!(w, pid, "answered by another worker: {resp}");
        }
        return resp;
    }
    panic!("no connection reached worker {pid} in 200 tries");
}

fn status_of(resp: &str) -> u16 {
    resp.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

const SIGNIN_FLEET_POLICY: &str = r#"
[gates]
keys = ["an nginx fleet test key of at least 32 bytes"]
[gates.sign_in]
match = 'http.request.uri.path == "/private"'
allowed = ["alice@example.com"]
max_attempts = 3
"#;

/// Longer than the sign-in's window with `interval=20ms` (two rounds and their round trips,
/// `waf_redis::record`), with room for a loaded machine.
const SIGNIN_WINDOW: Duration = Duration::from_millis(300);

/// Asks worker `pid` for a code for alice: the code page, the form cookie, and the code
/// from the `n`th mail.
fn ask_code_on(port: u16, pid: &str, smtp: &Smtp, n: usize) -> (String, String, String) {
    let form_page = send_on_worker(port, pid, "/.waf/sign-in?return_to=/private", "", "");
    assert_eq!(status_of(&form_page), 200, "{form_page}");
    let form = set_cookie(&form_page, "__waf_form").expect("the form cookie");
    let body = format!(
        "email=alice%40example.com&form_token={}&return_to=%2Fprivate",
        enc(&input(&form_page, "form_token"))
    );
    let page = send_on_worker(port, pid, "/.waf/sign-in", &form, &body);
    assert_eq!(status_of(&page), 200, "{page}");
    let code = code_in(&smtp.mail(n));
    (page, form, code)
}

/// Posts `code` from the code page `page` to worker `pid`: the response.
fn post_code_on(port: u16, pid: &str, (page, form): (&str, &str), code: &str) -> String {
    let body = format!(
        "pending={}&code={code}&form_token={}&return_to=%2Fprivate",
        enc(&input(page, "pending")),
        enc(&input(page, "form_token"))
    );
    send_on_worker(port, pid, "/.waf/sign-in/code", form, &body)
}

/// Email-code sign-in over two nginx workers, with a real SMTP server and a real Redis:
/// without `waf_fleet` a code asked for through one worker is unknown to the other; with
/// it, the code signs in through the other worker, a sign-out through one worker makes the
/// session cookie refused by the other, and wrong codes alternating between the workers hit
/// the lockout after `max_attempts`, as on one worker.
#[test]
fn waf_fleet_shares_sign_in_between_workers_through_real_redis() {
    let smtp_dir = custom_prefix("signin-fleet-smtp");
    let smtp = Smtp::start(&smtp_dir);
    let smtp_line = format!(
        "waf_smtp 127.0.0.1:{} plain from=waf@example.com timeout=5s;",
        smtp.port
    );

    // Without the fleet: each worker knows only its own codes.
    let (n, pids) = start_two_workers_with("signin-nofleet", &smtp_line, SIGNIN_FLEET_POLICY);
    let (page, form, code) = ask_code_on(n.port, &pids[0], &smtp, 1);
    thread::sleep(SIGNIN_WINDOW);
    let r = post_code_on(n.port, &pids[1], (&page, &form), &code);
    assert_eq!(
        status_of(&r),
        403,
        "a code unknown to the other worker: {r}"
    );
    drop(n);

    let redis = redis_support::RedisServer::start();
    let http = format!(
        "{smtp_line} waf_fleet redis://127.0.0.1:{} namespace=signin-test interval=20ms;",
        redis.port
    );
    let (n, pids) = start_two_workers_with("signin-fleet", &http, SIGNIN_FLEET_POLICY);
    let port = n.port;
    // Asked through worker 0, posted to worker 1.
    let (page, form, code) = ask_code_on(port, &pids[0], &smtp, 2);
    thread::sleep(SIGNIN_WINDOW);
    let r = post_code_on(port, &pids[1], (&page, &form), &code);
    assert_eq!(status_of(&r), 303, "{r}\n{}", n.error_log());
    let session = set_cookie(&r, "__waf_session").expect("the session cookie");
    for pid in &pids {
        let r = send_on_worker(port, pid, "/private", &session, "");
        assert!(
            status_of(&r) == 200 && r.contains("private page"),
            "worker {pid}: {r}"
        );
    }
    // Signed out through worker 1: worker 0 refuses the cookie.
    let out = send_on_worker(port, &pids[1], "/.waf/sign-out", &session, "");
    assert_eq!(status_of(&out), 200, "{out}");
    thread::sleep(SIGNIN_WINDOW);
    let r = send_on_worker(port, &pids[0], "/private", &session, "");
    assert_eq!(status_of(&r), 303, "a signed-out session let in: {r}");

    // Wrong codes alternating between the workers: the third locks, whichever worker it
    // reaches; then both refuse even the right code.
    let (page, form, code) = ask_code_on(port, &pids[1], &smtp, 3);
    thread::sleep(SIGNIN_WINDOW);
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let mut statuses = Vec::new();
    for i in 0..4 {
        let r = post_code_on(port, &pids[i % 2], (&page, &form), wrong);
        statuses.push(status_of(&r));
        thread::sleep(SIGNIN_WINDOW);
    }
    assert_eq!(statuses, [403, 403, 429, 429], "{}", n.error_log());
    for pid in &pids {
        let r = post_code_on(port, pid, (&page, &form), &code);
        assert_eq!(status_of(&r), 429, "worker {pid} after the lockout: {r}");
    }
    // The state is in Redis, without the code or the address in clear.
    let dump = redis.cli(&["HGETALL", "waf:{signin-test/rec}:h"]);
    assert!(!dump.trim().is_empty(), "no sign-in record in Redis");
    assert!(!dump.contains("alice"), "{dump}");
    assert!(!dump.split_whitespace().any(|w| w == code), "{dump}");
    let log = n.error_log();
    assert!(!log.contains(&code), "the code is in the error log:\n{log}");
}

#[test]
fn waf_fleet_is_checked_at_load() {
    let prefix = custom_prefix("fleet-check");
    let policy = "[[rate_limit]]\nname = \"all\"\nrequests = 5\n";
    std::fs::write(prefix.join("policy.toml"), policy).unwrap();
    let bad = [
        ("waf_fleet namespace=x;", "needs a redis://HOST:PORT server"),
        (
            "waf_fleet redis://127.0.0.1:6379 colour=red;",
            "unknown parameter \"colour=red\"",
        ),
        (
            "waf_fleet redis://127.0.0.1:6379 redis://127.0.0.1:6380;",
            "2 redis servers given",
        ),
        (
            "waf_fleet redis://127.0.0.1:6379 interval=5ms;",
            "interval 5 ms is outside",
        ),
        (
            "waf_fleet redis://127.0.0.1:6379 interval=soon;",
            "is not a time",
        ),
        (
            "waf_fleet redis://127.0.0.1:6379 cut_off=share;",
            "must then be at least 2",
        ),
        (
            "waf_fleet redis://127.0.0.1:6379 namespace=;",
            "the namespace is empty",
        ),
        (
            "waf_fleet redis://127.0.0.1:6379 \"prefix={x}\";",
            "must be non-empty",
        ),
        ("waf_fleet redis://:notaport;", "is not a redis URL"),
    ];
    for (line, want) in bad {
        write_conf(
            &prefix,
            "bad.conf",
            &format!(
                "{line} server {{ listen 127.0.0.1:1; waf on; waf_policy_file policy.toml; }}"
            ),
        );
        let (ok, err) = config_test(&prefix, "bad.conf");
        assert!(!ok, "{line} passed");
        assert!(
            err.contains("waf_fleet") && err.contains(want),
            "{line}: {err}"
        );
    }
    // A fleet with nothing to share (a policy without limits, bans or rooms; no policy).
    std::fs::write(
        prefix.join("rules.toml"),
        "[[rules]]\nname = \"r\"\nexpression = 'http.request.uri.path == \"/x\"'\naction = \"block\"\n",
    )
    .unwrap();
    for server in [
        "server { listen 127.0.0.1:1; waf on; waf_policy_file rules.toml; }",
        "server { listen 127.0.0.1:1; waf on; waf_rules 'SecRuleEngine On'; }",
    ] {
        write_conf(
            &prefix,
            "idle.conf",
            &format!("waf_fleet redis://127.0.0.1:6379; {server}"),
        );
        let (ok, err) = config_test(&prefix, "idle.conf");
        assert!(!ok, "{server} passed");
        assert!(
            err.contains("has no effect") && err.contains("idle.conf:"),
            "{err}"
        );
    }
    write_conf(
        &prefix,
        "good.conf",
        "waf_fleet redis://127.0.0.1:6379 namespace=shop prefix=w interval=50ms timeout=1s \
         cut_off=share nodes=3; server { listen 127.0.0.1:1; waf on; \
         waf_policy_file policy.toml; }",
    );
    let (ok, err) = config_test(&prefix, "good.conf");
    assert!(ok, "{err}");
}
