//! A fleet: three real `waf-proxy` processes in front of one upstream, sharing their rate
//! limits and bans through a real `redis-server` (and a real three-node Redis Cluster),
//! all started and stopped here. The client is told apart by `X-Forwarded-For` (the
//! proxies trust loopback), so each phase has a client of its own.
//!
//! - a client spreading over the three nodes is held to the global limit within ±10 %;
//! - a ban triggered on node A blocks on B and C within 1 s, and its expiry frees all three;
//! - Redis killed: no request fails, and `cut_off = "share"` holds the fleet to the limit;
//!   Redis restarted: reconciliation resumes and the global limit holds;
//! - one proxy killed: the other two go on, still within the limit.

#[path = "proxy/util.rs"]
#[allow(dead_code)]
mod util;

#[path = "../../waf-redis/tests/support/redis.rs"]
mod redis_support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use redis_support::{RedisCluster, RedisServer};
use util::{HttpClient, Proxy};
use waf_core::host::TrustedProxies;

/// The load phases measure counts over time: one fleet at a time on this machine.
static SERIAL: Mutex<()> = Mutex::new(());

/// 50 requests a second, burst 5, per client IP; a request to `/trap` is blocked with 403,
/// which scores 10 and bans the client for 2 s. (The proxy's `[[host.*]]` sections.)
const POLICY: &str = r#"
[[rate_limit]]
name = "all"
requests = 50
period_secs = 1
burst = 5
[[rules]]
name = "trap"
expression = 'http.request.uri.path == "/trap"'
action = "block"
[bans]
ttl_secs = 2
[scoring]
threshold = 5
streak = 0.0
weights = { "403" = 10 }
"#;

fn config(upstream: &str, state: &str) -> String {
    let policy = POLICY
        .trim_start()
        .replace("[[rate_limit]]", "[[host.rate_limit]]")
        .replace("[[rules]]", "[[host.rules]]")
        .replace("[bans]", "[host.bans]")
        .replace("[scoring]", "[host.scoring]");
    format!(
        r#"[server]
listen = ["127.0.0.1:0"]
workers = 1
trusted_proxies = ["127.0.0.1"]
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[[upstream]]
name = "app"
servers = ["{upstream}"]
[[host]]
names = ["*"]
upstream = "app"
waf = {{ mode = "off" }}
{policy}[state]
{state}
"#
    )
}

fn start_fleet(tag: &str, upstream: &str, state: &str, n: usize) -> Vec<Proxy> {
    (0..n)
        .map(|i| {
            let dir = util::temp_dir(&format!("fleet-{tag}-{i}"));
            Proxy::start(&dir, &config(upstream, state))
        })
        .collect()
}

/// Status of `GET url` as `client`, or `None` when the request failed.
async fn status(c: &HttpClient, url: &str, client: &str) -> Option<u16> {
    let req = Request::get(url)
        .header("x-forwarded-for", client)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), c.request(req))
        .await
        .ok()?
        .ok()?;
    let status = resp.status().as_u16();
    resp.into_body().collect().await.ok()?;
    Some(status)
}

async fn metric(c: &HttpClient, p: &Proxy, name: &str) -> Option<f64> {
    let url = format!("http://{}/metrics", p.admin?);
    let resp = c
        .request(Request::get(url).body(Full::new(Bytes::new())).unwrap())
        .await
        .ok()?;
    let body = resp.into_body().collect().await.ok()?.to_bytes();
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
}

async fn wait_connected(c: &HttpClient, fleet: &[&Proxy]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for p in fleet {
        while metric(c, p, "waf_proxy_fleet_connected").await != Some(1.0) {
            assert!(
                Instant::now() < deadline,
                "not connected: {:#?}",
                p.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What a load phase saw.
#[derive(Debug, Default)]
struct Load {
    passed: u64,
    limited: u64,
    failed: u64,
    other: u64,
    /// The statuses counted in `other`.
    others: std::collections::BTreeMap<u16, u64>,
}

/// `rate` requests a second from `client`, round robin over `fleet`, for `secs`.
async fn spread(c: &HttpClient, fleet: &[&Proxy], client: &str, rate: u32, secs: f64) -> Load {
    let mut load = Load::default();
    let start = Instant::now();
    let step = Duration::from_secs(1) / rate;
    let mut i = 0u32;
    while start.elapsed().as_secs_f64() < secs {
        let p = fleet[i as usize % fleet.len()];
        match status(c, &p.url("/"), client).await {
            Some(200) => load.passed += 1,
            Some(429) => load.limited += 1,
            Some(s) => {
                load.other += 1;
                *load.others.entry(s).or_default() += 1;
            }
            None => load.failed += 1,
        }
        i += 1;
        if let Some(d) = (start + step * i).checked_duration_since(Instant::now()) {
            tokio::time::sleep(d).await;
        }
    }
    load
}

/// burst + rate × W, the most one node alone would let through.
fn expected(secs: f64) -> f64 {
    5.0 + 50.0 * secs
}

fn within(load: &Load, secs: f64, what: &str) {
    let e = expected(secs);
    let err = (load.passed as f64 - e) / e;
    eprintln!(
        "{what}: {load:?}, expected {e}, error {:+.1} %",
        err * 100.0
    );
    assert_eq!(load.failed, 0, "{what}: requests failed");
    assert_eq!(load.other, 0, "{what}: unexpected statuses");
    assert!(
        err.abs() <= 0.10,
        "{what}: {} passed, expected {e} ± 10 %",
        load.passed
    );
}

/// A ban made through `fleet[0]` blocks on the others within 1 s; its expiry frees all.
async fn ban_spreads_and_expires(c: &HttpClient, fleet: &[&Proxy], client: &str) {
    assert_eq!(status(c, &fleet[0].url("/"), client).await, Some(200));
    assert_eq!(status(c, &fleet[0].url("/trap"), client).await, Some(403));
    let t0 = Instant::now();
    assert_eq!(
        status(c, &fleet[0].url("/"), client).await,
        Some(403),
        "banned on A"
    );
    for p in &fleet[1..] {
        while status(c, &p.url("/"), client).await != Some(403) {
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "ban not enforced within 1 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let seen = t0.elapsed();
    eprintln!("ban enforced on every node after {seen:?}");
    // The ban lasts 2 s from the trap; then every node lets the client in again.
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(seen)).await;
    for p in fleet {
        assert_eq!(
            status(c, &p.url("/"), client).await,
            Some(403),
            "still banned"
        );
    }
    let deadline = t0 + Duration::from_millis(3000);
    for p in fleet {
        while status(c, &p.url("/"), client).await != Some(200) {
            assert!(
                Instant::now() < deadline,
                "ban did not expire on {}",
                p.http
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    eprintln!("ban expired on every node after {:?}", t0.elapsed());
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn one_redis_three_proxies() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = util::upstream();
    let mut redis = RedisServer::start();
    let state = format!(
        "redis = {:?}\ninterval_ms = 50\ncut_off = \"share\"\nnodes = 3\n",
        redis.url()
    );
    let mut fleet = start_fleet("one", &up.addr.to_string(), &state, 3);
    let rt = runtime();
    rt.block_on(async {
        let c = util::client();
        let all: Vec<&Proxy> = fleet.iter().collect();
        wait_connected(&c, &all).await;

        let before: u64 = redis.command_counts().iter().map(|(_, n)| n).sum();
        let load = spread(&c, &all, "198.51.100.1", 300, 4.0).await;
        let after: u64 = redis.command_counts().iter().map(|(_, n)| n).sum();
        within(&load, 4.0, "three nodes");
        eprintln!(
            "redis commands: {:.0}/s per node",
            (after - before) as f64 / 4.0 / 3.0
        );

        ban_spreads_and_expires(&c, &all, "203.0.113.9").await;

        // Redis killed mid-run: nothing fails, and with `share` each node allows a third.
        let (load, ()) = tokio::join!(spread(&c, &all, "198.51.100.2", 300, 3.0), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            redis.kill();
        });
        eprintln!("redis down: {load:?}");
        assert_eq!(
            load.failed + load.other,
            0,
            "requests failed while redis was down"
        );
        let e = expected(3.0);
        assert!(
            (load.passed as f64) <= e * 1.10 && (load.passed as f64) >= e * 0.75,
            "redis down: {} passed, expected about {e} (limit / 3 on each node)",
            load.passed
        );
        for p in &all {
            assert_eq!(metric(&c, p, "waf_proxy_fleet_connected").await, Some(0.0));
            assert!(metric(&c, p, "waf_proxy_fleet_outages_total").await >= Some(1.0));
        }

        // Back: reconciliation resumes, the global limit holds again.
        redis.restart();
        wait_connected(&c, &all).await;
        let load = spread(&c, &all, "198.51.100.3", 300, 4.0).await;
        within(&load, 4.0, "after redis restart");
        // Logged once per outage, not once per attempt.
        for p in &all {
            let lines = p.stderr.lock().unwrap();
            let down = lines
                .iter()
                .filter(|l| l.contains("redis unreachable"))
                .count();
            let back = lines
                .iter()
                .filter(|l| l.contains("redis reachable again"))
                .count();
            assert_eq!((down, back), (1, 1), "{lines:#?}");
        }
    });

    // One proxy gone: the other two are unaffected and still share the limit.
    let gone = fleet.pop().unwrap();
    drop(gone);
    rt.block_on(async {
        let c = util::client();
        let two: Vec<&Proxy> = fleet.iter().collect();
        let load = spread(&c, &two, "198.51.100.4", 300, 3.0).await;
        within(&load, 3.0, "two nodes left");
    });
}

#[test]
fn redis_cluster_three_proxies() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = util::upstream();
    let cluster = RedisCluster::start();
    let urls: Vec<String> = cluster.urls().iter().map(|u| format!("{u:?}")).collect();
    let state = format!(
        "redis = [{}]\ncluster = true\ninterval_ms = 50\n",
        urls.join(", ")
    );
    let fleet = start_fleet("cluster", &up.addr.to_string(), &state, 3);
    runtime().block_on(async {
        let c = util::client();
        let all: Vec<&Proxy> = fleet.iter().collect();
        wait_connected(&c, &all).await;
        let before = cluster.command_total();
        let load = spread(&c, &all, "198.51.100.5", 300, 4.0).await;
        let after = cluster.command_total();
        within(&load, 4.0, "cluster, three nodes");
        eprintln!(
            "cluster commands: {:.0}/s per proxy",
            (after - before) as f64 / 4.0 / 3.0
        );
        ban_spreads_and_expires(&c, &all, "203.0.113.10").await;
    });
}

#[test]
fn state_errors_point_at_the_key() {
    let dir = util::temp_dir("fleet-config");
    let path = dir.join("proxy.toml");
    let check = |state: &str| -> String {
        std::fs::write(&path, config("127.0.0.1:9", state)).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_waf-proxy"))
            .arg("check")
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{state} was accepted");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // [state] is at line 30 of the config.
    let out = check("redis = \"redis://127.0.0.1:1\"\nnodes = 3\n");
    assert!(
        out.contains("proxy.toml:33:9: [state]: nodes has no effect"),
        "{out}"
    );
    let out = check("redis = \"redis://127.0.0.1:1\"\ninterval_ms = 5\n");
    assert!(
        out.contains("proxy.toml:33:15: [state]: interval 5 ms"),
        "{out}"
    );
    let out = check("redis = \"redis://127.0.0.1:1\"\nintervall_ms = 50\n");
    assert!(
        out.contains("proxy.toml:33:1") && out.contains("unknown field"),
        "{out}"
    );
    let out = check("redis = [\"redis://127.0.0.1:1\", \"redis://127.0.0.1:2\"]\n");
    assert!(
        out.contains("proxy.toml:32:9") && out.contains("set cluster = true"),
        "{out}"
    );
    let out = check("redis = \"nope://x\"\n");
    assert!(out.contains("is not a redis URL"), "{out}");
    let out = check("redis = \"redis://127.0.0.1:1\"\ncut_off = \"share\"\n");
    assert!(out.contains("needs nodes"), "{out}");
}

/// A node of the fleet that is not a proxy: an axum app behind waf-tower or an actix-web app
/// behind waf-actix, with the same policy in the proxy's namespace (its host label, `*`).
struct App {
    http: std::net::SocketAddr,
    _fleet: waf_redis::Fleet,
}

impl App {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }
}

fn fleet_store(redis: &RedisServer) -> (waf_redis::Fleet, std::sync::Arc<waf_redis::FleetStore>) {
    let mut c = waf_redis::FleetConfig::new(vec![redis.url()]);
    c.interval = Duration::from_millis(50);
    let fleet = waf_redis::Fleet::start(c).unwrap();
    let store = fleet.store("*");
    (fleet, store)
}

fn trusted() -> TrustedProxies {
    TrustedProxies::from_entries(["127.0.0.1"]).unwrap()
}

fn start_axum(redis: &RedisServer) -> App {
    let (fleet, store) = fleet_store(redis);
    let layer = waf_tower::WafLayer::builder(waf_core::Waf::builder().build().unwrap())
        .trusted_proxies(trusted())
        .fleet_policy(&toml::from_str(POLICY).unwrap(), store)
        .unwrap()
        .build();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().fallback(|| async { "ok" }).layer(layer);
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            axum::serve(
                l,
                app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .await
            .unwrap();
        });
    });
    App {
        http: rx.recv().unwrap(),
        _fleet: fleet,
    }
}

fn start_actix(redis: &RedisServer) -> App {
    use actix_web::{web, App as ActixApp, HttpResponse, HttpServer};
    let (fleet, store) = fleet_store(redis);
    let mw = waf_actix::Waf::builder(waf_core::Waf::builder().build().unwrap())
        .trusted_proxies(trusted())
        .fleet_policy(&toml::from_str(POLICY).unwrap(), store)
        .unwrap()
        .build();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            HttpServer::new(move || {
                ActixApp::new()
                    .wrap(mw.clone())
                    .default_service(web::route().to(|| async { HttpResponse::Ok().body("ok") }))
            })
            .workers(1)
            .disable_signals()
            .listen(listener)
            .unwrap()
            .run()
            .await
            .unwrap();
        });
    });
    App {
        http,
        _fleet: fleet,
    }
}

#[test]
fn a_proxy_an_axum_app_and_an_actix_app_share_one_fleet() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = util::upstream();
    let redis = RedisServer::start();
    let state = format!("redis = {:?}\ninterval_ms = 50\n", redis.url());
    let proxy = start_fleet("mixed", &up.addr.to_string(), &state, 1)
        .pop()
        .unwrap();
    let axum = start_axum(&redis);
    let actix = start_actix(&redis);
    runtime().block_on(async {
        let c = util::client();
        wait_connected(&c, &[&proxy]).await;
        let urls = [proxy.url("/"), axum.url("/"), actix.url("/")];
        // The global limit over the three kinds of node.
        let mut load = Load::default();
        let start = Instant::now();
        let step = Duration::from_secs(1) / 300;
        let mut i = 0u32;
        while start.elapsed() < Duration::from_secs(4) {
            match status(&c, &urls[i as usize % 3], "198.51.100.6").await {
                Some(200) => load.passed += 1,
                Some(429) => load.limited += 1,
                Some(_) => load.other += 1,
                None => load.failed += 1,
            }
            i += 1;
            if let Some(d) = (start + step * i).checked_duration_since(Instant::now()) {
                tokio::time::sleep(d).await;
            }
        }
        within(&load, 4.0, "proxy + axum + actix");
        // A ban through the proxy holds in axum and actix within 1 s.
        let client = "203.0.113.11";
        assert_eq!(status(&c, &proxy.url("/trap"), client).await, Some(403));
        let t0 = Instant::now();
        for url in &urls[1..] {
            while status(&c, url, client).await != Some(403) {
                assert!(
                    t0.elapsed() < Duration::from_secs(1),
                    "ban not enforced on {url}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        eprintln!(
            "ban from the proxy enforced in axum and actix after {:?}",
            t0.elapsed()
        );
    });
}

/// A waiting room of capacity 2 for a fleet of two real proxies on one real Redis.
fn room_config(upstream: &str, redis: &str) -> String {
    format!(
        r#"[server]
listen = ["127.0.0.1:0"]
workers = 1
trusted_proxies = ["127.0.0.1"]
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[[upstream]]
name = "app"
servers = ["{upstream}"]
[[host]]
names = ["*"]
upstream = "app"
waf = {{ mode = "off" }}
[host.gates]
keys = ["a fleet-wide key of at least thirty-two bytes"]
[[host.gates.waiting_room]]
name = "shop"
capacity = 2
idle_secs = 1
refresh_secs = 1
[state]
redis = {redis:?}
interval_ms = 50
"#
    )
}

/// One visitor: its cookies (shared by both proxies, as a browser shares them by host).
#[derive(Default)]
struct Visitor {
    jar: std::collections::BTreeMap<String, String>,
}

impl Visitor {
    /// `GET /shop` through `p` as an API client: `Ok(())` when let in, `Err(position)`
    /// when waiting.
    async fn visit(&mut self, c: &HttpClient, p: &Proxy) -> Result<(), u64> {
        let cookies: Vec<String> = self.jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut req = Request::get(p.url("/shop"))
            .header("x-forwarded-for", "198.51.100.77")
            .header("user-agent", "fleet-test")
            .header("accept", "application/json");
        if !cookies.is_empty() {
            req = req.header("cookie", cookies.join("; "));
        }
        let got = util::send(c, req.body(Full::new(Bytes::new())).unwrap()).await;
        for v in got.headers.get_all("set-cookie") {
            let v = v.to_str().unwrap();
            let pair = v.split(';').next().unwrap();
            let (k, val) = pair.split_once('=').unwrap();
            if v.contains("Max-Age=0") {
                self.jar.remove(k);
            } else {
                self.jar.insert(k.to_string(), val.to_string());
            }
        }
        match got.status {
            200 => Ok(()),
            503 => {
                let pos = got
                    .body
                    .split("\"position\":\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no position in {}", got.body));
                Err(pos)
            }
            s => panic!("status {s}: {}", got.body),
        }
    }
}

/// Two proxies, one waiting room of capacity 2, one Redis. Five visitors arrive 300 ms
/// apart, alternating proxies, and every request of a visitor goes to the other proxy
/// than its last. They are let in in arrival order; nobody is let in while two places are
/// held (a place is freed `idle_secs` after its visitor's last request); and while Redis
/// is down nobody new is let in while those in stay in, until Redis is back.
#[test]
fn a_waiting_room_holds_for_two_proxies() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = util::upstream();
    let mut redis = RedisServer::start();
    let fleet: Vec<Proxy> = (0..2)
        .map(|i| {
            let dir = util::temp_dir(&format!("fleet-room-{i}"));
            Proxy::start(&dir, &room_config(&up.addr.to_string(), &redis.url()))
        })
        .collect();
    let rt = runtime();
    rt.block_on(async {
        let c = util::client();
        let all: Vec<&Proxy> = fleet.iter().collect();
        wait_connected(&c, &all).await;
        let mut visitors: Vec<Visitor> = (0..5).map(|_| Visitor::default()).collect();
        let mut admitted: Vec<(usize, Instant)> = Vec::new();
        let mut left: Vec<(usize, Instant)> = Vec::new();
        let mut positions = Vec::new();
        let start = Instant::now();
        let mut round = 0usize;
        while admitted.len() < 5 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "stuck: admitted {admitted:?}, left {left:?}"
            );
            round += 1;
            for (v, visitor) in visitors.iter_mut().enumerate() {
                let t = start.elapsed();
                if t < Duration::from_millis(300 * v as u64) || left.iter().any(|l| l.0 == v) {
                    continue;
                }
                // In: the k-th visitor in leaves 1.5 s after it got in (the first two
                // once everybody is in line).
                if let Some(k) = admitted.iter().position(|a| a.0 == v) {
                    let since = admitted[k].1.elapsed();
                    if left.len() == k
                        && t > Duration::from_millis(1600)
                        && since > Duration::from_millis(1500)
                    {
                        left.push((v, Instant::now()));
                        continue;
                    }
                }
                let p = all[(v + round) % 2];
                match visitor.visit(&c, p).await {
                    Ok(()) => {
                        if !admitted.iter().any(|a| a.0 == v) {
                            admitted.push((v, Instant::now()));
                        }
                    }
                    Err(pos) => {
                        assert!(
                            !admitted.iter().any(|a| a.0 == v),
                            "visitor {v} was sent back to the line"
                        );
                        positions.push((v, admitted.len(), pos));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let order: Vec<usize> = admitted.iter().map(|a| a.0).collect();
        eprintln!("admitted {order:?}");
        assert_eq!(order, [0, 1, 2, 3, 4], "not let in in arrival order");
        // Capacity 2: the third visitor in can only come after the first left and its
        // place idled out (1 s), and so on.
        for k in 2..5 {
            let freed = left[k - 2].1 + Duration::from_millis(900);
            assert!(
                admitted[k].1 >= freed,
                "visitor {} let in {:?} before a place was free",
                admitted[k].0,
                freed - admitted[k].1
            );
        }
        // The fleet's positions: with three waiting (nobody but 0 and 1 in), visitor 4
        // was told 3 on some request, and no waiting visitor was ever told a position
        // past the visitors ahead of it, plus one for a proxy's estimate of a visitor it
        // has not heard of from Redis yet (the line's length as of its last round).
        assert!(
            positions
                .iter()
                .any(|&(v, n, p)| v == 4 && n == 2 && p == 3),
            "{positions:?}"
        );
        for &(v, n, p) in &positions {
            assert!(p >= 1 && p as usize <= v + 2 - n.min(v), "{positions:?}");
        }

        // Redis down: 3 and 4 stay in on both proxies; a new visitor waits, even after 3
        // leaves and its place idles out.
        redis.kill();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let mut late = Visitor::default();
        let down = Instant::now();
        let mut i = 0;
        while down.elapsed() < Duration::from_millis(2500) {
            i += 1;
            assert!(
                late.visit(&c, all[i % 2]).await.is_err(),
                "let in while redis is down"
            );
            assert_eq!(visitors[4].visit(&c, all[(i + 1) % 2]).await, Ok(()));
            if down.elapsed() < Duration::from_millis(500) {
                assert_eq!(visitors[3].visit(&c, all[i % 2]).await, Ok(()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for p in &all {
            p.wait_stderr("waiting rooms let nobody in until redis is back", 1)
                .await;
        }
        // Back: the line moves again.
        redis.restart();
        wait_connected(&c, &all).await;
        let back = Instant::now();
        loop {
            i += 1;
            assert_eq!(visitors[4].visit(&c, all[(i + 1) % 2]).await, Ok(()));
            if late.visit(&c, all[i % 2]).await.is_ok() {
                break;
            }
            assert!(
                back.elapsed() < Duration::from_secs(10),
                "nobody let in after redis came back"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!("let in {:?} after redis came back", back.elapsed());
    });
}
