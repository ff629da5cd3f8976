//! What a visitor who already passed a gate pays per request (`waf_core::policy::gate`):
//! one whole transaction (phases 1-5) carrying a valid pass cookie (a `challenge` rule on
//! every path), admission cookie (a waiting room on every path) or session cookie (sign-in
//! on every path), against the same request on a `Waf` with no policy at all. The issue's
//! target: at most 1.5 µs more than the unprotected host.
//!
//! `cargo bench -p waf-bench --bench gates`.
//!
//! Instruction counts (steady state, `N` transactions each, after a warm-up):
//! `GATES_CALLGRIND=N GATES_CALLGRIND_WAF=pass valgrind --tool=callgrind
//! --toggle-collect='*measured*' BENCH_BINARY` (also `admission`, `session`, `none`);
//! divide `I refs` by `N`.
//!
//! With CRS PL1 in front (callgrind only, `GATES_CALLGRIND_WAF=`): `crs` (CRS, no policy,
//! the visitor's other cookie only), `crs-cookie` (CRS, no policy, carrying a session
//! cookie nobody verifies: what inspecting it costs), `session-crs` (CRS and sign-in on
//! every path, the valid session: verified, so CRS does not inspect it).

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{criterion_group, Criterion};
use waf_core::policy::PolicyConfig;
use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Verdict, Waf};

const KEYS: &str = "[gates]\nkeys = [\"bench key, thirty-two bytes or more\"]\n";
const UA: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const ACCEPT: &[u8] = b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

fn waf(extra: &str) -> Waf {
    let config: PolicyConfig = toml::from_str(&format!("{KEYS}{extra}")).expect("bench policy");
    Waf::builder()
        .policy(config)
        .build()
        .expect("bench policy loads")
}

fn conn() -> ConnectionInfo {
    ConnectionInfo::new(
        "6.1.2.3:50000".parse::<SocketAddr>().unwrap(),
        "127.0.0.1:443".parse().unwrap(),
    )
    .with_tls(true)
}

/// One transaction for `uri` with `cookie`; the verdict of phase 1 and the policy's
/// `Set-Cookie`s, or the gate's answer.
fn step(
    waf: &Waf,
    method: &str,
    uri: &str,
    cookie: &str,
    body: &str,
    now: SystemTime,
) -> (bool, Vec<String>, String) {
    let headers: Vec<(&[u8], &[u8])> = vec![
        (b"Host", b"shop.example"),
        (b"User-Agent", UA),
        (b"Accept", ACCEPT),
        (b"Cookie", cookie.as_bytes()),
    ];
    let head = RequestHead::new(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1", &headers);
    if waf.is_gate_path(uri.split('?').next().unwrap().as_bytes()) {
        let r = waf
            .gate_request(&conn(), &head, body.as_bytes(), now, "bench")
            .unwrap();
        let set = r
            .headers
            .iter()
            .filter(|(k, _)| *k == "set-cookie")
            .map(|(_, v)| v.clone())
            .collect();
        let mail = r.mail.map(|m| m.body).unwrap_or_default();
        return (true, set, format!("{mail}{}", r.body));
    }
    let mut tx = waf.transaction(&conn(), now);
    let v = tx.request_headers(&head);
    let e = tx.policy_effects().clone();
    match (v, e.gate_response("bench")) {
        (Verdict::Continue, _) => (false, e.set_cookies, String::new()),
        (_, Some(r)) => (
            true,
            r.headers
                .iter()
                .filter(|(k, _)| *k == "set-cookie")
                .map(|(_, v)| v.clone())
                .collect(),
            r.body,
        ),
        _ => (true, Vec::new(), String::new()),
    }
}

/// `name=value` of the first `Set-Cookie` named `name`.
fn cookie_of(set: &[String], name: &str) -> String {
    set.iter()
        .map(|c| c.split(';').next().unwrap().to_string())
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {set:?}"))
}

fn input(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let at = html.find(&key).unwrap() + key.len();
    html[at..at + html[at..].find('"').unwrap()].to_string()
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The four hosts, each with the cookie its visitors carry.
fn setup(start: SystemTime) -> Vec<(&'static str, Waf, String)> {
    let none = Waf::builder().build().unwrap();

    let pass = waf(
        "[[rules]]\nname = \"all\"\nexpression = 'http.request.uri.path starts_with \"/\"'\naction = \"challenge\"\nchallenge = \"cookie\"\n",
    );
    let (_, set, _) = step(&pass, "GET", "/", "", "", start);
    let pass_cookie = cookie_of(&set, "__waf_pass");

    let room = waf("[[gates.waiting_room]]\nname = \"all\"\ncapacity = 1000\nidle_secs = 600\nadmission_ttl_secs = 3600\n");
    let (_, set, _) = step(&room, "GET", "/", "", "", start);
    let admit_cookie = cookie_of(&set, "__waf_admit");

    let signin_policy = "[gates.sign_in]\nallowed = [\"@example.com\"]\n";
    let signin = waf(signin_policy);
    let session_cookie = hosts_session(start, signin_policy);

    vec![
        ("none", none, "theme=dark".to_string()),
        ("pass", pass, format!("theme=dark; {pass_cookie}")),
        ("admission", room, format!("theme=dark; {admit_cookie}")),
        ("session", signin, format!("theme=dark; {session_cookie}")),
    ]
}

/// CRS PL1 alone and with sign-in (see the crate docs), each with its visitors' cookie.
fn crs_hosts(start: SystemTime) -> Vec<(&'static str, Waf, String)> {
    let signin_policy = "[gates.sign_in]\nallowed = [\"@example.com\"]\n";
    let session = hosts_session(start, signin_policy);
    let crs = || {
        Waf::builder()
            .seclang("crs-pl1", waf_bench::config(1))
            .scan_backend(waf_bench::scan_backend())
    };
    let config: PolicyConfig =
        toml::from_str(&format!("{KEYS}{signin_policy}")).expect("bench policy");
    let with_signin = crs().policy(config).build().expect("CRS and sign-in load");
    vec![
        (
            "crs",
            crs().build().expect("CRS loads"),
            "theme=dark".to_string(),
        ),
        (
            "crs-cookie",
            crs().build().expect("CRS loads"),
            format!("theme=dark; {session}"),
        ),
        ("session-crs", with_signin, format!("theme=dark; {session}")),
    ]
}

/// A session cookie (`__waf_session=...`) signed in through the real flow on a host with
/// `policy` (the same keys as every host here, so it verifies on any of them).
fn hosts_session(start: SystemTime, policy: &str) -> String {
    let signin = waf(policy);
    let (_, set, page) = step(&signin, "GET", "/.waf/sign-in", "", "", start);
    let form = cookie_of(&set, "__waf_form");
    let body = format!(
        "email=a%40example.com&return_to=%2F&form_token={}",
        input(&page, "form_token")
    );
    let (_, _, out) = step(&signin, "POST", "/.waf/sign-in", &form, &body, start);
    let at = out.find("code is ").unwrap() + 8;
    let code = &out[at..at + 6];
    let body = format!(
        "code={code}&return_to=%2F&pending={}&form_token={}",
        enc(&input(&out, "pending")),
        input(&out, "form_token")
    );
    let (_, set, _) = step(&signin, "POST", "/.waf/sign-in/code", &form, &body, start);
    cookie_of(&set, "__waf_session")
}

/// One benign transaction, phases 1-5; whether it was stopped.
fn run(waf: &Waf, conn: &ConnectionInfo, cookie: &[u8], now: SystemTime) -> bool {
    let headers: [(&[u8], &[u8]); 6] = [
        (b"Host", b"shop.example"),
        (b"User-Agent", UA),
        (b"Accept", ACCEPT),
        (b"Accept-Language", b"en-US,en;q=0.5"),
        (b"Cookie", cookie),
        (b"Connection", b"keep-alive"),
    ];
    let mut tx = waf.transaction(conn, now);
    let head = RequestHead::new(b"GET", b"/products/42?color=blue", b"HTTP/1.1", &headers);
    let stopped = tx.request_headers(&head).intervention().is_some()
        || tx.request_end().intervention().is_some()
        || tx
            .response_headers(&ResponseHead::new(200, b"HTTP/1.1", &[]))
            .intervention()
            .is_some();
    let _ = tx.response_end();
    black_box(tx.finish());
    stopped
}

#[inline(never)]
fn measured_transactions(waf: &Waf, cookie: &[u8], start: SystemTime, n: u64) {
    let conn = conn();
    for i in 0..n {
        assert!(!run(
            waf,
            &conn,
            cookie,
            start + Duration::from_micros(20 * i)
        ));
    }
}

fn gates(c: &mut Criterion) {
    let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let hosts = setup(start);
    let conn = conn();
    let mut group = c.benchmark_group("gates");
    for (name, waf, cookie) in &hosts {
        assert!(
            !run(waf, &conn, cookie.as_bytes(), start),
            "{name}: the visitor's cookie must let it through"
        );
        let mut i = 0u64;
        group.bench_function(*name, |b| {
            b.iter(|| {
                i += 1;
                let now = start + Duration::from_micros(20 * i);
                assert!(!run(black_box(waf), &conn, cookie.as_bytes(), now));
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = gates
}

fn main() {
    if let Ok(n) = std::env::var("GATES_CALLGRIND") {
        let n: u64 = n.parse().expect("GATES_CALLGRIND=N");
        let which = std::env::var("GATES_CALLGRIND_WAF").unwrap_or_else(|_| "pass".into());
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let hosts = if which.starts_with("crs") || which.ends_with("crs") {
            crs_hosts(start)
        } else {
            setup(start)
        };
        let (_, waf, cookie) = hosts.iter().find(|(name, _, _)| *name == which).expect(
            "GATES_CALLGRIND_WAF: none, pass, admission, session, crs, crs-cookie or session-crs",
        );
        let c = conn();
        for i in 0..1000 {
            assert!(!run(
                waf,
                &c,
                cookie.as_bytes(),
                start + Duration::from_micros(20 * i)
            ));
        }
        measured_transactions(waf, cookie.as_bytes(), start + Duration::from_secs(1), n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
