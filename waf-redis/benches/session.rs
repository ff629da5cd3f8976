//! What a signed-in visitor pays per request when the sign-in state is in a fleet store
//! (`FleetStore`, as with waf-proxy's `[state]` or nginx's `waf_fleet`) rather than the
//! in-memory store: one whole transaction (phases 1-5) carrying a valid session cookie on a
//! host with sign-in on every path. The session check is a MAC and one revocation lookup in
//! the local mirror either way; the fleet store adds its prefix lookup. Nothing here talks to
//! Redis (the fleet points at a closed port: a request never waits on Redis, connected or
//! not, so the request path is the same).
//!
//! `cargo bench -p waf-redis --bench session` prints ns per transaction for `memory` and
//! `fleet`. Instruction counts: `SESSION_CALLGRIND=N SESSION_STORE=memory|fleet valgrind
//! --tool=callgrind --toggle-collect='*measured*' BENCH_BINARY`, `I refs / N`.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use waf_core::policy::PolicyConfig;
use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Waf};
use waf_redis::{Fleet, FleetConfig};

const POLICY: &str = r#"
[gates]
keys = ["bench key, thirty-two bytes or more"]
[gates.sign_in]
allowed = ["alice@example.com"]
"#;
const UA: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

fn conn() -> ConnectionInfo {
    ConnectionInfo::new(
        "6.1.2.3:50000".parse::<SocketAddr>().unwrap(),
        "127.0.0.1:443".parse().unwrap(),
    )
}

fn gate(waf: &Waf, method: &str, uri: &str, cookie: &str, body: &str) -> (String, Vec<String>) {
    let mut headers: Vec<(&[u8], &[u8])> = vec![
        (b"Host", b"shop.example"),
        (b"User-Agent", UA),
        (b"Accept", b"text/html"),
    ];
    if !cookie.is_empty() {
        headers.push((b"Cookie", cookie.as_bytes()));
    }
    let head = RequestHead::new(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1", &headers);
    let r = waf
        .gate_request(&conn(), &head, body.as_bytes(), SystemTime::now(), "b")
        .expect("a gate path");
    let set = r
        .headers
        .iter()
        .filter(|(k, _)| *k == "set-cookie")
        .map(|(_, v)| v.split(';').next().unwrap_or("").to_string())
        .collect();
    let mut body = r.body;
    if let Some(m) = r.mail {
        // The mail after a marker the page does not hold.
        body.push_str("\0mail\0");
        body.push_str(&m.body);
    }
    (body, set)
}

fn input(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let at = html.find(&key).expect("input") + key.len();
    html[at..at + html[at..].find('"').unwrap()].to_string()
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Signs in through the real flow: the `__waf_session=...` cookie.
fn session(waf: &Waf) -> String {
    let (form, set) = gate(waf, "GET", "/.waf/sign-in?return_to=/", "", "");
    let form_cookie = set[0].clone();
    let body = format!(
        "email=alice%40example.com&form_token={}&return_to=%2F",
        enc(&input(&form, "form_token"))
    );
    let (page, _) = gate(waf, "POST", "/.waf/sign-in", &form_cookie, &body);
    let mail = &page[page.find("\0mail\0").expect("the mail")..];
    let at = mail.find(char::is_numeric).expect("the code");
    let code = mail[at..at + 6].to_string();
    let body = format!(
        "pending={}&code={code}&form_token={}&return_to=%2F",
        enc(&input(&page, "pending")),
        enc(&input(&page, "form_token"))
    );
    let (_, set) = gate(waf, "POST", "/.waf/sign-in/code", &form_cookie, &body);
    set.into_iter()
        .find(|c| c.starts_with("__waf_session="))
        .expect("signed in")
}

fn run(waf: &Waf, conn: &ConnectionInfo, cookie: &[u8], now: SystemTime) -> bool {
    let headers: [(&[u8], &[u8]); 4] = [
        (b"Host", b"shop.example"),
        (b"User-Agent", UA),
        (b"Accept", b"text/html"),
        (b"Cookie", cookie),
    ];
    let mut tx = waf.transaction(conn, now);
    let pass = tx
        .request_headers(&RequestHead::new(b"GET", b"/", b"HTTP/1.1", &headers))
        .intervention()
        .is_none();
    let _ = tx.request_end();
    let rh: [(&[u8], &[u8]); 1] = [(b"Content-Type", b"text/html")];
    let _ = tx.response_headers(&ResponseHead::new(200, b"HTTP/1.1", &rh));
    let _ = tx.response_end();
    black_box(tx.finish());
    pass
}

#[inline(never)]
fn measured_transactions(waf: &Waf, cookie: &[u8], n: u64) {
    let conn = conn();
    let now = SystemTime::now();
    for _ in 0..n {
        assert!(run(waf, &conn, cookie, now), "the session was refused");
    }
}

/// Outside callgrind's toggle: the first transactions (caches, lazily built state).
#[inline(never)]
fn warm_up(waf: &Waf, cookie: &[u8]) {
    let conn = conn();
    for _ in 0..1_000 {
        run(waf, &conn, cookie, SystemTime::now());
    }
}

fn main() {
    let mut config = FleetConfig::new(vec!["redis://127.0.0.1:1".into()]);
    config.interval = Duration::from_millis(100);
    let fleet = Fleet::start(config).expect("fleet");
    let policy = || -> PolicyConfig { toml::from_str(POLICY).expect("policy") };
    let memory = Waf::builder().policy(policy()).build().expect("memory");
    let shared = Waf::builder()
        .policy(policy())
        .policy_store(fleet.store("bench"))
        .build()
        .expect("fleet");
    let hosts = [("memory", memory), ("fleet", shared)];
    if let Ok(n) = std::env::var("SESSION_CALLGRIND") {
        let n: u64 = n.parse().expect("SESSION_CALLGRIND=N");
        let which = std::env::var("SESSION_STORE").unwrap_or_else(|_| "fleet".into());
        let (_, waf) = hosts
            .iter()
            .find(|(name, _)| *name == which)
            .expect("SESSION_STORE: memory or fleet");
        let cookie = session(waf);
        warm_up(waf, cookie.as_bytes());
        measured_transactions(waf, cookie.as_bytes(), n);
        return;
    }
    for (name, waf) in &hosts {
        let cookie = session(waf);
        warm_up(waf, cookie.as_bytes());
        let n = 200_000;
        let t = Instant::now();
        measured_transactions(waf, cookie.as_bytes(), n);
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        println!("{name}: {ns:.0} ns per transaction with a valid session cookie");
    }
}
