//! Email-code sign-in on two nodes, each a `Waf` with its own `Fleet`, against a real
//! `redis-server`: a code asked for through one node signs in through the other, a
//! sign-out through one is refused by the other, wrong codes spread over both nodes hit
//! the lockout within the bound of `waf_redis::record`, and Redis holds neither a code nor
//! an address in clear.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use waf_core::policy::gate::GateResponse;
use waf_core::{ConnectionInfo, RequestHead, Verdict, Waf};
use waf_redis::{Fleet, FleetConfig, FleetStore};

use super::support::RedisServer;
use super::wait_connected;

/// The reconciliation interval of the test nodes.
const INTERVAL_MS: u64 = 20;
/// The window within which every node knows a change: two rounds and their round trips,
/// with room for a loaded machine.
const WINDOW: Duration = Duration::from_millis(4 * INTERVAL_MS + 100);

const MAX_ATTEMPTS: usize = 3;

fn policy() -> String {
    format!(
        r#"
[gates]
keys = ["fleet sign-in test key, thirty-two bytes!"]
[gates.sign_in]
match = 'http.request.uri.path starts_with "/private"'
allowed = ["alice@example.com"]
max_attempts = {MAX_ATTEMPTS}
lockout_secs = 600
session_ttl_secs = 1000
"#
    )
}

fn node(redis: &RedisServer) -> (Fleet, Waf) {
    let mut c = FleetConfig::new(vec![redis.url()]);
    c.interval = Duration::from_millis(INTERVAL_MS);
    let fleet = Fleet::start(c).unwrap();
    let store: Arc<FleetStore> = fleet.store("signin");
    let waf = Waf::builder()
        .policy(toml::from_str(&policy()).unwrap())
        .policy_store(store)
        .build()
        .unwrap();
    (fleet, waf)
}

/// One browser: the cookies it keeps.
#[derive(Clone, Default)]
struct Client {
    cookies: Vec<(String, String)>,
}

/// What a request got.
#[derive(Debug)]
enum Got {
    Pass,
    Gate(GateResponse),
}

impl Got {
    fn gate(self) -> GateResponse {
        match self {
            Got::Gate(r) => r,
            Got::Pass => panic!("expected a gate answer, the request passed"),
        }
    }
}

impl Client {
    fn keep(&mut self, r: &GateResponse) {
        for (k, v) in &r.headers {
            if *k != "set-cookie" {
                continue;
            }
            let (name, value) = v.split(';').next().unwrap().split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != name);
            if !value.is_empty() && !v.contains("Max-Age=0") {
                self.cookies.push((name.to_string(), value.to_string()));
            }
        }
    }

    fn request(&mut self, w: &Waf, method: &str, uri: &str, body: &str) -> Got {
        let conn = ConnectionInfo::new(
            SocketAddr::new("192.0.2.44".parse().unwrap(), 40000),
            "127.0.0.1:80".parse().unwrap(),
        );
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut headers: Vec<(&[u8], &[u8])> = vec![
            (b"Host", b"app.example"),
            (b"User-Agent", b"Mozilla/5.0 fleet-test"),
            (b"Accept", b"text/html"),
        ];
        if !cookie.is_empty() {
            headers.push((b"Cookie", cookie.as_bytes()));
        }
        let head = RequestHead::new(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1", &headers);
        let now = SystemTime::now();
        if w.is_gate_path(uri.split('?').next().unwrap().as_bytes()) {
            let r = w
                .gate_request(&conn, &head, body.as_bytes(), now, "rid")
                .unwrap();
            self.keep(&r);
            return Got::Gate(r);
        }
        let mut tx = w.transaction(&conn, now);
        match tx.request_headers(&head) {
            Verdict::Continue => Got::Pass,
            _ => {
                let r = tx
                    .policy_effects()
                    .gate_response("rid")
                    .expect("a gate page");
                self.keep(&r);
                Got::Gate(r)
            }
        }
    }
}

fn input(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + key.len();
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

/// Asks `w` for a code for alice: the code page and the code from the mail.
fn ask_code(w: &Waf, c: &mut Client) -> (GateResponse, String) {
    let form = c
        .request(w, "GET", "/.waf/sign-in?return_to=/private", "")
        .gate();
    let body = format!(
        "email=alice%40example.com&form_token={}&return_to=%2Fprivate",
        enc(&input(&form.body, "form_token"))
    );
    let page = c.request(w, "POST", "/.waf/sign-in", &body).gate();
    assert_eq!(page.status.as_u16(), 200, "{}", page.body);
    let mail = page.mail.as_ref().expect("a code mail");
    let at = mail.body.find(char::is_numeric).unwrap();
    let code = mail.body[at..at + 6].to_string();
    (page, code)
}

/// Posts `code` from the code page `page` to `w`: the status.
fn post_code(w: &Waf, c: &mut Client, page: &GateResponse, code: &str) -> u16 {
    // A fresh form token from `w`'s own answer is not needed: the token is signed with the
    // policy's keys, the same on every node.
    let body = format!(
        "pending={}&code={code}&form_token={}&return_to=%2Fprivate",
        enc(&input(&page.body, "pending")),
        enc(&input(&page.body, "form_token"))
    );
    c.request(w, "POST", "/.waf/sign-in/code", &body)
        .gate()
        .status
        .as_u16()
}

fn wrong(code: &str) -> &'static str {
    if code == "000000" {
        "111111"
    } else {
        "000000"
    }
}

#[test]
fn a_code_from_one_node_signs_in_on_the_other_and_a_sign_out_holds_on_both() {
    let redis = RedisServer::start();
    let (fa, a) = node(&redis);
    let (fb, b) = node(&redis);
    wait_connected(&[&fa, &fb]);
    let mut c = Client::default();
    let (page, code) = ask_code(&a, &mut c);
    std::thread::sleep(WINDOW);
    // Redis holds neither the address nor the code in clear.
    let dump = redis.cli(&["HGETALL", "waf:{signin/rec}:h"]);
    assert!(!dump.trim().is_empty(), "no sign-in record in Redis");
    assert!(!dump.contains("alice"), "{dump}");
    assert!(
        !dump.split_whitespace().any(|w| w == code),
        "the code is in Redis: {dump}"
    );
    // Posted to the other node.
    assert_eq!(post_code(&b, &mut c, &page, &code), 303);
    assert!(c.cookies.iter().any(|(k, _)| k == "__waf_session"));
    assert!(matches!(c.request(&a, "GET", "/private", ""), Got::Pass));
    assert!(matches!(c.request(&b, "GET", "/private", ""), Got::Pass));
    // The code is spent on every node.
    std::thread::sleep(WINDOW);
    assert_eq!(
        post_code(&a, &mut c, &page, &code),
        403,
        "a used code again"
    );
    // Sign-out through A: B refuses the same cookie within the window.
    let mut copy = c.clone();
    let out = c.request(&a, "GET", "/.waf/sign-out", "").gate();
    assert_eq!(out.status.as_u16(), 200);
    let t0 = Instant::now();
    while matches!(copy.request(&b, "GET", "/private", ""), Got::Pass) {
        assert!(t0.elapsed() < WINDOW * 3, "B still lets the session in");
        std::thread::sleep(Duration::from_millis(2));
    }
    eprintln!("sign-out through A refused by B after {:?}", t0.elapsed());
    assert!(matches!(
        copy.request(&a, "GET", "/private", ""),
        Got::Gate(_)
    ));
}

#[test]
fn wrong_codes_over_both_nodes_hit_the_lockout() {
    let redis = RedisServer::start();
    let (fa, a) = node(&redis);
    let (fb, b) = node(&redis);
    wait_connected(&[&fa, &fb]);
    let nodes = [&a, &b];

    // Slower than the window: exactly as on one node. Attempts 1 and 2 are wrong (403),
    // attempt 3 locks (429), whichever node gets them; then both refuse even the right code.
    let mut c = Client::default();
    let (page, code) = ask_code(&a, &mut c);
    std::thread::sleep(WINDOW);
    let mut statuses = Vec::new();
    for i in 0..MAX_ATTEMPTS + 1 {
        statuses.push(post_code(nodes[(i + 1) % 2], &mut c, &page, wrong(&code)));
        std::thread::sleep(WINDOW);
    }
    assert_eq!(
        statuses,
        [403, 403, 429, 429],
        "slow guesses over two nodes"
    );
    for n in nodes {
        assert_eq!(post_code(n, &mut c, &page, &code), 429, "locked out");
    }

    // Faster than the window (alice is locked out above: two new nodes on a namespace of
    // their own).
    let (fc, c1) = fresh_node(&redis, "signin-fast");
    let (fd, d1) = fresh_node(&redis, "signin-fast");
    wait_connected(&[&fc, &fd]);
    let nodes = [&c1, &d1];
    let mut c = Client::default();
    let (page, code) = ask_code(&c1, &mut c);
    std::thread::sleep(WINDOW);
    let mut statuses = Vec::new();
    for i in 0..4 * MAX_ATTEMPTS {
        statuses.push(post_code(nodes[i % 2], &mut c, &page, wrong(&code)));
    }
    // Each node checks at most MAX_ATTEMPTS guesses before its own count locks: at most
    // 2 × MAX_ATTEMPTS over the fleet, of which at most 2 × (MAX_ATTEMPTS − 1) answered
    // "wrong" (the last of each node answers "locked").
    let wrongs = statuses.iter().filter(|s| **s == 403).count();
    eprintln!("fast guesses over two nodes: {statuses:?}");
    assert!(
        (MAX_ATTEMPTS - 1..=2 * (MAX_ATTEMPTS - 1)).contains(&wrongs),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 403 || *s == 429),
        "{statuses:?}"
    );
    std::thread::sleep(WINDOW);
    for n in nodes {
        assert_eq!(post_code(n, &mut c, &page, &code), 429, "locked out");
    }
}

fn fresh_node(redis: &RedisServer, namespace: &str) -> (Fleet, Waf) {
    let mut c = FleetConfig::new(vec![redis.url()]);
    c.interval = Duration::from_millis(INTERVAL_MS);
    let fleet = Fleet::start(c).unwrap();
    let waf = Waf::builder()
        .policy(toml::from_str(&policy()).unwrap())
        .policy_store(fleet.store(namespace))
        .build()
        .unwrap();
    (fleet, waf)
}
