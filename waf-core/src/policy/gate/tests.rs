//! The gates through `Waf` and `Transaction`, as a host drives them: challenge pages and
//! answers, pass cookies, the waiting room, the whole sign-in flow, and the attacks of the
//! issue (tampering, replay after expiry, moved cookies, code brute force, open redirect,
//! CSRF).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::policy::gate::GateResponse;
use crate::policy::PolicyConfig;
use crate::{ConnectionInfo, RequestHead, Verdict, Waf};

const KEYS: &str = r#"
[gates]
keys = ["test key one, thirty-two bytes long!", "older key, also thirty-two bytes!!"]
"#;

fn waf(extra: &str) -> Waf {
    let text = format!("{KEYS}{extra}");
    let config: PolicyConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Waf::builder()
        .policy(config)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
const UA: &str = "Mozilla/5.0 (X11; Linux x86_64) Chrome/140";

/// One client: its address, User-Agent, and the cookies it keeps.
#[derive(Clone)]
struct Client {
    ip: &'static str,
    ua: &'static str,
    accept: &'static str,
    cookies: Vec<(String, String)>,
}

/// What a request got: passed (with cookies set on the way) or a gate response.
#[derive(Debug)]
enum Got {
    Pass(Vec<String>),
    Gate(GateResponse),
    Block(#[allow(dead_code)] u16),
}

impl Client {
    fn browser(ip: &'static str) -> Client {
        Client {
            ip,
            ua: UA,
            accept: BROWSER,
            cookies: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&mut self, set_cookies: &[String]) {
        for c in set_cookies {
            let first = c.split(';').next().unwrap();
            let (k, v) = first.split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != k);
            if !v.is_empty() && !c.contains("Max-Age=0") {
                self.cookies.push((k.to_string(), v.to_string()));
            }
        }
    }

    fn conn(&self) -> ConnectionInfo {
        ConnectionInfo::new(
            SocketAddr::new(self.ip.parse().unwrap(), 40000),
            "127.0.0.1:80".parse().unwrap(),
        )
    }

    fn request(&mut self, w: &Waf, method: &str, uri: &str, body: &str, now: SystemTime) -> Got {
        let cookie = self.cookie_header();
        let mut headers: Vec<(&[u8], &[u8])> = vec![
            (b"Host", b"app.example"),
            (b"User-Agent", self.ua.as_bytes()),
        ];
        if !self.accept.is_empty() {
            headers.push((b"Accept", self.accept.as_bytes()));
        }
        if !cookie.is_empty() {
            headers.push((b"Cookie", cookie.as_bytes()));
        }
        let head = RequestHead::new(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1", &headers);
        let path = uri.split('?').next().unwrap();
        if w.is_gate_path(path.as_bytes()) {
            let r = w
                .gate_request(&self.conn(), &head, body.as_bytes(), now, "rid-1")
                .unwrap();
            let set: Vec<String> = r
                .headers
                .iter()
                .filter(|(k, _)| *k == "set-cookie")
                .map(|(_, v)| v.clone())
                .collect();
            self.keep(&set);
            return Got::Gate(r);
        }
        let mut tx = w.transaction(&self.conn(), now);
        let v = tx.request_headers(&head);
        let effects = tx.policy_effects().clone();
        match v {
            Verdict::Continue => {
                self.keep(&effects.set_cookies);
                Got::Pass(effects.set_cookies)
            }
            Verdict::Intervene(i) => match effects.gate_response("rid-1") {
                Some(r) => {
                    let set: Vec<String> = r
                        .headers
                        .iter()
                        .filter(|(k, _)| *k == "set-cookie")
                        .map(|(_, v)| v.clone())
                        .collect();
                    self.keep(&set);
                    Got::Gate(r)
                }
                None => Got::Block(i.status),
            },
        }
    }

    fn get(&mut self, w: &Waf, uri: &str, now: SystemTime) -> Got {
        self.request(w, "GET", uri, "", now)
    }

    fn cookie(&self, name: &str) -> Option<String> {
        self.cookies
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

fn gate(g: Got) -> GateResponse {
    match g {
        Got::Gate(r) => r,
        other => panic!("expected a gate answer, got {other:?}"),
    }
}

fn header<'a>(r: &'a GateResponse, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.as_str())
}

/// The value of hidden input `name` in a page.
fn input(html: &str, name: &str) -> String {
    let at = html
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no input {name} in {html}"));
    let rest = &html[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].to_string()
}

fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{k}={}", super::challenge::percent(v.as_bytes())))
        .collect::<Vec<_>>()
        .join("&")
}

const POW_RULE: &str = r#"
[gates.challenge]
difficulty = 8
pass_ttl_secs = 600
[[rules]]
name = "search"
expression = 'http.request.uri.path starts_with "/search"'
action = "challenge"
"#;

/// Solves the challenge page `r` and posts the answer; the answer's response.
fn solve_and_post(w: &Waf, c: &mut Client, r: &GateResponse, now: SystemTime) -> GateResponse {
    let token = input(&r.body, "challenge");
    let form_token = input(&r.body, "form_token");
    let answer = super::challenge::solve(token.as_bytes(), 8);
    let body = form(&[
        ("challenge", &token),
        ("form_token", &form_token),
        ("answer", &answer),
    ]);
    gate(c.request(w, "POST", "/.waf/challenge", &body, now))
}

#[test]
fn proof_of_work_page_answer_and_pass() {
    let w = waf(POW_RULE);
    let mut c = Client::browser("192.0.2.10");
    let page = gate(c.get(&w, "/search?q=shoes", at(0)));
    assert_eq!(page.status.as_u16(), 403);
    assert_eq!(
        header(&page, "content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page.body.contains("<noscript>"), "{}", page.body);
    assert!(page.body.contains("crypto.subtle"));
    assert!(page.body.contains("rid-1"));
    assert!(c.cookie("__waf_form").is_some(), "the form cookie is set");
    // A wrong answer: a new challenge, no pass.
    let token = input(&page.body, "challenge");
    let form_token = input(&page.body, "form_token");
    let wrong = (0u64..)
        .map(|n| n.to_string())
        .find(|n| !super::challenge::solves(token.as_bytes(), n.as_bytes(), 8))
        .unwrap();
    let body = form(&[
        ("challenge", &token),
        ("form_token", &form_token),
        ("answer", &wrong),
    ]);
    let r = gate(c.request(&w, "POST", "/.waf/challenge", &body, at(1)));
    assert_eq!(r.status.as_u16(), 403);
    assert!(c.cookie("__waf_pass").is_none());
    // The right one: a pass and back to where it was going.
    let r = solve_and_post(&w, &mut c, &page, at(2));
    assert_eq!(r.status.as_u16(), 303, "{r:?}");
    assert_eq!(header(&r, "location"), Some("/search?q=shoes"));
    assert!(c.cookie("__waf_pass").is_some());
    assert!(matches!(c.get(&w, "/search?q=boots", at(3)), Got::Pass(_)));
    // Replay after expiry: challenged again.
    assert!(matches!(c.get(&w, "/search", at(2 + 600)), Got::Gate(_)));
}

#[test]
fn a_pass_moved_to_another_client_or_tampered_is_refused() {
    let w = waf(POW_RULE);
    let mut c = Client::browser("192.0.2.10");
    let page = gate(c.get(&w, "/search", at(0)));
    solve_and_post(&w, &mut c, &page, at(1));
    let pass = c.cookie("__waf_pass").unwrap();
    // Same /24: fine. Another /24 or another browser: challenged.
    let mut same_net = c.clone();
    same_net.ip = "192.0.2.99";
    assert!(matches!(same_net.get(&w, "/search", at(2)), Got::Pass(_)));
    let mut moved = c.clone();
    moved.ip = "198.51.100.10";
    assert!(matches!(moved.get(&w, "/search", at(2)), Got::Gate(_)));
    let mut other_ua = c.clone();
    other_ua.ua = "curl/8.5";
    assert!(matches!(other_ua.get(&w, "/search", at(2)), Got::Gate(_)));
    // Every byte flipped: challenged.
    for i in 0..pass.len() {
        let mut bytes = pass.clone().into_bytes();
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let mut t = c.clone();
        t.cookies = vec![("__waf_pass".into(), String::from_utf8(bytes).unwrap())];
        assert!(
            matches!(t.get(&w, "/search", at(2)), Got::Gate(_)),
            "byte {i} changed still passes"
        );
    }
    // The older key still verifies; an unknown one does not.
    let rotated_text = format!(
        "[gates]\nkeys = [\"a brand new key, thirty-two bytes!!\", \"test key one, thirty-two bytes long!\"]\n{POW_RULE}"
    );
    let rotated = Waf::builder()
        .policy(toml::from_str(&rotated_text).unwrap())
        .build()
        .unwrap();
    assert!(matches!(
        c.clone().get(&rotated, "/search", at(2)),
        Got::Pass(_)
    ));
    let dropped_text = rotated_text.replace(", \"test key one, thirty-two bytes long!\"", "");
    let dropped = Waf::builder()
        .policy(toml::from_str(&dropped_text).unwrap())
        .build()
        .unwrap();
    assert!(matches!(
        c.clone().get(&dropped, "/search", at(2)),
        Got::Gate(_)
    ));
}

#[test]
fn challenge_form_is_csrf_protected() {
    let w = waf(POW_RULE);
    let mut victim = Client::browser("192.0.2.10");
    let page = gate(victim.get(&w, "/search", at(0)));
    // An attacker's page posts a solved challenge with its own form token: the victim's
    // form cookie does not match it.
    let mut attacker = Client::browser("192.0.2.10");
    let their = gate(attacker.get(&w, "/search", at(0)));
    let token = input(&page.body, "challenge");
    let answer = super::challenge::solve(token.as_bytes(), 8);
    let body = form(&[
        ("challenge", &token),
        ("form_token", &input(&their.body, "form_token")),
        ("answer", &answer),
    ]);
    let r = gate(victim.request(&w, "POST", "/.waf/challenge", &body, at(1)));
    assert_eq!(r.status.as_u16(), 403);
    // Without the form cookie at all.
    let mut bare = victim.clone();
    bare.cookies.clear();
    let body = form(&[
        ("challenge", &token),
        ("form_token", &input(&page.body, "form_token")),
        ("answer", &answer),
    ]);
    assert_eq!(
        gate(bare.request(&w, "POST", "/.waf/challenge", &body, at(1)))
            .status
            .as_u16(),
        403
    );
    assert!(bare.cookie("__waf_pass").is_none());
}

#[test]
fn api_clients_get_json() {
    let w = waf(POW_RULE);
    for accept in ["application/json", "", "*/*"] {
        let mut c = Client::browser("192.0.2.10");
        c.accept = accept;
        let r = gate(c.get(&w, "/search", at(0)));
        assert_eq!(
            header(&r, "content-type"),
            Some("application/json"),
            "{accept:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["error"], "challenge_required");
        assert_eq!(v["challenge"], "pow");
        assert_eq!(v["status"], 403);
        assert_eq!(v["request_id"], "rid-1");
    }
}

#[test]
fn cookie_challenge() {
    let w = waf(r#"
[[rules]]
name = "all"
expression = 'http.request.uri.path starts_with "/"'
action = "challenge"
challenge = "cookie"
"#);
    let mut c = Client::browser("192.0.2.10");
    let r = gate(c.get(&w, "/shop?a=1&b=2", at(0)));
    assert_eq!(r.status.as_u16(), 302);
    let loc = header(&r, "location").unwrap().to_string();
    assert_eq!(loc, "/.waf/cookie?return_to=/shop%3Fa%3D1%26b%3D2");
    let back = gate(c.get(&w, &loc, at(0)));
    assert_eq!(back.status.as_u16(), 303);
    assert_eq!(header(&back, "location"), Some("/shop?a=1&b=2"));
    assert!(matches!(c.get(&w, "/shop", at(1)), Got::Pass(_)));
    // A client that keeps no cookie: the "cookies required" page.
    let mut forgetful = Client::browser("192.0.2.11");
    let r = gate(forgetful.get(&w, "/shop", at(0)));
    forgetful.cookies.clear();
    let page = gate(forgetful.get(&w, header(&r, "location").unwrap(), at(0)));
    assert_eq!(page.status.as_u16(), 403);
    assert!(page.body.contains("Please allow cookies"));
    // The return path cannot leave the host.
    for evil in [
        "//evil.example/x",
        "/\\evil.example",
        "https://evil.example/",
        "/.waf/cookie",
    ] {
        let uri = format!(
            "/.waf/cookie?return_to={}",
            super::challenge::percent(evil.as_bytes())
        );
        let r = gate(c.get(&w, &uri, at(1)));
        assert_eq!(header(&r, "location"), Some("/"), "{evil}");
    }
}

#[test]
fn a_challenge_rule_needs_gates_and_options_are_checked() {
    let bad = |text: &str| {
        let config: PolicyConfig = toml::from_str(text).unwrap();
        Waf::builder()
            .policy(config)
            .build()
            .unwrap_err()
            .to_string()
    };
    let e =
        bad("[[rules]]\nname = \"c\"\nexpression = 'ip.src == 1.2.3.4'\naction = \"challenge\"\n");
    assert!(e.contains("needs a [gates] section"), "{e}");
    let e = bad(&format!(
        "{KEYS}[[rules]]\nname = \"c\"\nexpression = 'ip.src == 1.2.3.4'\naction = \"challenge\"\nchallenge = \"cookie\"\ndifficulty = 4\n"
    ));
    assert!(e.contains("no effect"), "{e}");
    let e = bad(&format!(
        "{KEYS}[[rules]]\nname = \"c\"\nexpression = 'ip.src == 1.2.3.4'\naction = \"challenge\"\ndifficulty = 40\n"
    ));
    assert!(e.contains("difficulty 40"), "{e}");
    let e = bad("[gates]\nkeys = [\"short\"]\n");
    assert!(e.contains("shorter than 32"), "{e}");
    let e = bad(&format!("{KEYS}path_prefix = \"waf\"\n"));
    assert!(e.contains("path_prefix"), "{e}");
}

const ROOM: &str = r#"
[[list]]
name = "office"
kind = "ip"
items = ["203.0.113.0/24"]
[[gates.waiting_room]]
name = "sale"
match = 'http.request.uri.path starts_with "/sale"'
capacity = 1
idle_secs = 30
refresh_secs = 2
skip = 'ip.src in $office'
"#;

#[test]
fn waiting_room_admits_in_order_within_capacity() {
    let w = waf(ROOM);
    let mut a = Client::browser("192.0.2.1");
    let mut b = Client::browser("192.0.2.2");
    let mut c = Client::browser("192.0.2.3");
    // a is first and the room is empty: in at once, with an admission cookie.
    assert!(matches!(a.get(&w, "/sale", at(0)), Got::Pass(ref s) if !s.is_empty()));
    assert!(a.cookie("__waf_admit").is_some());
    // b and c wait, in order.
    let rb = gate(b.get(&w, "/sale", at(1)));
    assert_eq!(rb.status.as_u16(), 503);
    assert_eq!(header(&rb, "retry-after"), Some("2"));
    assert!(rb.body.contains("id=\"position\">1<"), "{}", rb.body);
    let rc = gate(c.get(&w, "/sale", at(1)));
    assert!(rc.body.contains("id=\"position\">2<"));
    // Other paths are not in the room; allow-listed clients skip it.
    assert!(matches!(b.get(&w, "/home", at(1)), Got::Pass(_)));
    assert!(matches!(
        Client::browser("203.0.113.9").get(&w, "/sale", at(1)),
        Got::Pass(_)
    ));
    // a stays active: b and c keep waiting.
    for t in (5..=40).step_by(5) {
        assert!(matches!(a.get(&w, "/sale/item", at(t)), Got::Pass(_)));
        assert!(matches!(b.get(&w, "/sale", at(t)), Got::Gate(_)));
        assert!(matches!(c.get(&w, "/sale", at(t)), Got::Gate(_)));
    }
    // a leaves (idle 30 s): b is in, c is next.
    assert!(
        matches!(c.get(&w, "/sale", at(71)), Got::Gate(ref r) if r.body.contains("id=\"position\">1<"))
    );
    assert!(matches!(b.get(&w, "/sale", at(72)), Got::Pass(_)));
    assert!(matches!(c.get(&w, "/sale", at(73)), Got::Gate(_)));
    // a comes back: its place is gone, it queues behind c.
    let ra = gate(a.get(&w, "/sale", at(74)));
    assert!(ra.body.contains("id=\"position\">2<"), "{}", ra.body);
    // JSON for API clients.
    let mut api = Client::browser("192.0.2.50");
    api.accept = "application/json";
    let r = gate(api.get(&w, "/sale", at(75)));
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"], "queued");
    assert_eq!(v["position"], "3");
}

#[test]
fn admission_cookie_is_renewed_while_active() {
    let w = waf(&ROOM.replace("idle_secs = 30", "idle_secs = 30\nadmission_ttl_secs = 100"));
    let mut a = Client::browser("192.0.2.1");
    assert!(matches!(a.get(&w, "/sale", at(0)), Got::Pass(_)));
    let first = a.cookie("__waf_admit").unwrap();
    assert!(matches!(a.get(&w, "/sale", at(20)), Got::Pass(ref s) if s.is_empty()));
    assert!(matches!(a.get(&w, "/sale", at(45)), Got::Pass(ref s) if s.is_empty()));
    assert!(matches!(a.get(&w, "/sale", at(60)), Got::Pass(ref s) if s.len() == 1));
    assert_ne!(a.cookie("__waf_admit").unwrap(), first);
    assert!(matches!(a.get(&w, "/sale", at(85)), Got::Pass(_)));
    assert!(
        matches!(a.get(&w, "/sale", at(110)), Got::Pass(_)),
        "renewed cookie still good"
    );
    // The first cookie has expired by now.
    let mut old = a.clone();
    old.cookies = vec![("__waf_admit".into(), first)];
    assert!(matches!(old.get(&w, "/sale", at(111)), Got::Gate(_)));
}

const SIGN_IN: &str = r#"
[gates.sign_in]
match = 'not http.request.uri.path starts_with "/public"'
allowed = ["alice@example.com", "@example.org"]
max_attempts = 3
lockout_secs = 600
codes_per_address = 3
session_ttl_secs = 1000
"#;

/// Goes to `uri`, follows to sign-in, asks for a code for `email`; the code page and mail.
fn ask_code(
    w: &Waf,
    c: &mut Client,
    uri: &str,
    email: &str,
    now: SystemTime,
) -> (GateResponse, Option<String>) {
    let r = gate(c.get(w, uri, now));
    assert_eq!(r.status.as_u16(), 303);
    let loc = header(&r, "location").unwrap().to_string();
    let form_page = gate(c.get(w, &loc, now));
    assert_eq!(form_page.status.as_u16(), 200);
    let body = form(&[
        ("email", email),
        ("form_token", &input(&form_page.body, "form_token")),
        ("return_to", &input(&form_page.body, "return_to")),
    ]);
    let page = gate(c.request(w, "POST", "/.waf/sign-in", &body, now));
    let code = page.mail.as_ref().map(|m| {
        assert_eq!(m.to, email.to_ascii_lowercase());
        let at = m.body.find(char::is_numeric).unwrap();
        m.body[at..at + 6].to_string()
    });
    (page, code)
}

fn post_code(
    w: &Waf,
    c: &mut Client,
    page: &GateResponse,
    code: &str,
    now: SystemTime,
) -> GateResponse {
    let body = form(&[
        ("pending", &input(&page.body, "pending")),
        ("code", code),
        ("form_token", &input(&page.body, "form_token")),
        ("return_to", &input(&page.body, "return_to")),
    ]);
    gate(c.request(w, "POST", "/.waf/sign-in/code", &body, now))
}

#[test]
fn sign_in_flow_session_and_sign_out() {
    let w = waf(SIGN_IN);
    let mut c = Client::browser("192.0.2.10");
    assert!(matches!(c.get(&w, "/public/x", at(0)), Got::Pass(_)));
    let (page, code) = ask_code(&w, &mut c, "/reports?y=2026", "alice@example.com", at(0));
    let code = code.expect("a mail for an allowed address");
    assert_eq!(code.len(), 6);
    assert!(!format!("{page:?}").contains(&code), "Debug hides the mail");
    assert!(page.body.contains("alice@example.com"));
    let r = post_code(&w, &mut c, &page, &code, at(10));
    assert_eq!(r.status.as_u16(), 303, "{}", r.body);
    assert_eq!(header(&r, "location"), Some("/reports?y=2026"));
    assert!(matches!(c.get(&w, "/reports", at(11)), Got::Pass(_)));
    // The code is spent.
    let again = post_code(&w, &mut c, &page, &code, at(12));
    assert_eq!(again.status.as_u16(), 403);
    // Sliding renewal past half the life.
    assert!(matches!(c.get(&w, "/reports", at(600)), Got::Pass(ref s) if s.len() == 1));
    let unused = c.clone();
    assert!(
        matches!(c.get(&w, "/reports", at(1500)), Got::Pass(_)),
        "renewed at 600"
    );
    // Expired without use.
    assert!(matches!(
        unused.clone().get(&w, "/reports", at(600 + 1001)),
        Got::Gate(_)
    ));
    // Moved to another network: refused.
    let mut moved = c.clone();
    moved.ip = "198.51.100.1";
    assert!(matches!(moved.get(&w, "/reports", at(1500)), Got::Gate(_)));
    // Sign-out revokes this session even for a copy of the cookie.
    let copy = c.clone();
    let out = gate(c.get(&w, "/.waf/sign-out", at(1501)));
    assert!(out.body.contains("You are signed out"));
    assert!(c.cookie("__waf_session").is_none());
    assert!(matches!(
        copy.clone().get(&w, "/reports", at(1502)),
        Got::Gate(_)
    ));
    // API clients: 401 JSON.
    let mut api = Client::browser("192.0.2.10");
    api.accept = "application/json";
    let r = gate(api.get(&w, "/reports", at(0)));
    assert_eq!(r.status.as_u16(), 401);
    assert!(r.body.contains("\"error\":\"sign_in_required\""));
}

#[test]
fn sign_in_does_not_tell_who_is_allowed_and_domains_work() {
    let w = waf(SIGN_IN);
    let mut c = Client::browser("192.0.2.10");
    let (page, code) = ask_code(&w, &mut c, "/", "mallory@evil.example", at(0));
    assert!(code.is_none(), "no mail for an address not allowed");
    assert_eq!(page.status.as_u16(), 200);
    assert!(page
        .body
        .contains("If mallory@evil.example may sign in here"));
    let (_, code) = ask_code(&w, &mut c, "/", "Bob@Example.org", at(0));
    assert!(code.is_some(), "domain allowed, address lower-cased");
}

#[test]
fn code_brute_force_hits_the_lockout() {
    let w = waf(SIGN_IN);
    let mut c = Client::browser("192.0.2.10");
    let (page, code) = ask_code(&w, &mut c, "/", "alice@example.com", at(0));
    let code = code.unwrap();
    let wrong = if code == "000000" { "000001" } else { "000000" };
    assert_eq!(
        post_code(&w, &mut c, &page, wrong, at(1)).status.as_u16(),
        403
    );
    assert_eq!(
        post_code(&w, &mut c, &page, wrong, at(2)).status.as_u16(),
        403
    );
    let locked = post_code(&w, &mut c, &page, wrong, at(3));
    assert_eq!(locked.status.as_u16(), 429);
    assert!(locked.body.contains("Too many wrong codes"));
    // Now even the right code is refused, and a new code is not sent, until the lockout ends.
    assert_eq!(
        post_code(&w, &mut c, &page, &code, at(4)).status.as_u16(),
        429
    );
    let (_, none) = ask_code(&w, &mut c, "/", "alice@example.com", at(5));
    assert!(none.is_none());
    let (page, code) = ask_code(&w, &mut c, "/", "alice@example.com", at(700));
    assert_eq!(
        post_code(&w, &mut c, &page, &code.unwrap(), at(701))
            .status
            .as_u16(),
        303
    );
}

#[test]
fn code_requests_are_rate_limited_per_address() {
    let w = waf(SIGN_IN);
    let mut c = Client::browser("192.0.2.10");
    for i in 0..3 {
        let (_, code) = ask_code(&w, &mut c, "/", "alice@example.com", at(i));
        assert!(code.is_some());
    }
    let (page, code) = ask_code(&w, &mut c, "/", "alice@example.com", at(4));
    assert!(code.is_none());
    assert_eq!(page.status.as_u16(), 429);
}

#[test]
fn sign_in_return_url_is_same_host_only_and_forms_need_their_cookie() {
    let w = waf(SIGN_IN);
    let mut c = Client::browser("192.0.2.10");
    let (page, code) = ask_code(&w, &mut c, "/", "alice@example.com", at(0));
    // The code's success redirects to the return path only when it stays on this host.
    let body = form(&[
        ("pending", &input(&page.body, "pending")),
        ("code", code.as_deref().unwrap()),
        ("form_token", &input(&page.body, "form_token")),
        ("return_to", "//evil.example/"),
    ]);
    let r = gate(
        c.clone()
            .request(&w, "POST", "/.waf/sign-in/code", &body, at(1)),
    );
    assert_eq!(r.status.as_u16(), 303);
    assert_eq!(header(&r, "location"), Some("/"));
    for evil in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
    ] {
        assert_eq!(
            super::safe_return(gates(&w), evil.as_bytes()),
            "/",
            "{evil:?}"
        );
    }
    assert_eq!(super::safe_return(gates(&w), b"/a/b?c=d"), "/a/b?c=d");
    // CSRF: a post without the form cookie, or with another browser's form token.
    let mut other = Client::browser("192.0.2.10");
    let their = gate(other.get(&w, "/.waf/sign-in", at(0)));
    let body = form(&[
        ("email", "alice@example.com"),
        ("form_token", &input(&their.body, "form_token")),
        ("return_to", "/"),
    ]);
    let r = gate(c.request(&w, "POST", "/.waf/sign-in", &body, at(2)));
    assert_eq!(r.status.as_u16(), 403);
    assert!(r.mail.is_none());
    let mut bare = Client::browser("192.0.2.10");
    let r = gate(bare.request(&w, "POST", "/.waf/sign-in", &body, at(2)));
    assert_eq!(r.status.as_u16(), 403);
}

/// Rules that flag the gate cookies by name, and an attack in any cookie's value.
const COOKIE_RULES: &str = r#"
SecRuleEngine On
SecRule REQUEST_COOKIES_NAMES "@rx ^__waf_(?:pass|session)$" "id:1,phase:1,deny,status:418"
SecRule REQUEST_COOKIES "@contains union select" "id:2,phase:1,deny,status:403"
SecRule &REQUEST_COOKIES:__waf_session "@gt 0" "id:3,phase:1,deny,status:419"
SecRule REQUEST_HEADERS:Cookie "@rx __waf_(?:pass|session)=" "id:4,phase:1,deny,status:420"
"#;

#[test]
fn verified_gate_cookies_are_not_inspected_unverified_ones_are() {
    let text = format!(
        "{KEYS}{SIGN_IN}\n[[rules]]\nname = \"shop\"\nexpression = 'http.request.uri.path == \"/shop\"'\naction = \"challenge\"\nchallenge = \"cookie\"\n"
    );
    let config: PolicyConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let w = Waf::builder()
        .seclang("cookie-rules", COOKIE_RULES)
        .policy(config)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut c = Client::browser("192.0.2.10");
    let (page, code) = ask_code(&w, &mut c, "/reports", "alice@example.com", at(0));
    let r = post_code(&w, &mut c, &page, &code.unwrap(), at(1));
    assert_eq!(r.status.as_u16(), 303, "{}", r.body);
    let session = c.cookie("__waf_session").expect("a session");
    // Verified by sign-in on /reports: not seen by the rules.
    assert!(matches!(c.get(&w, "/reports", at(2)), Got::Pass(_)));
    // /public is outside sign-in: nothing verified the cookie, so the rules see it.
    assert!(matches!(c.get(&w, "/public/x", at(2)), Got::Block(418)));
    // A forged session is refused by the gate, and on /public inspected.
    let mut forged = Client::browser("192.0.2.10");
    forged.cookies = vec![("__waf_session".into(), "x' union select 1--".into())];
    assert!(matches!(forged.get(&w, "/reports", at(2)), Got::Gate(_)));
    forged.cookies = vec![("__waf_other".into(), "x' union select 1--".into())];
    assert!(matches!(
        forged.get(&w, "/public/x", at(2)),
        Got::Block(403)
    ));
    // A second cookie of the same name beside the verified one is inspected.
    let mut twice = c.clone();
    twice
        .cookies
        .push(("__waf_session".into(), "x' union select 1--".into()));
    assert!(matches!(twice.get(&w, "/reports", at(2)), Got::Block(418)));
    // The pass: verified where a challenge rule asks for it (/shop), not elsewhere.
    let r = gate(c.get(&w, "/shop", at(3)));
    assert_eq!(r.status.as_u16(), 302);
    let back = gate(c.get(&w, header(&r, "location").unwrap(), at(3)));
    assert_eq!(back.status.as_u16(), 303);
    assert!(c.cookie("__waf_pass").is_some());
    assert!(matches!(c.get(&w, "/shop", at(4)), Got::Pass(_)));
    assert!(matches!(c.get(&w, "/reports", at(4)), Got::Block(418)));
    // What the host sees.
    let mut tx = w.transaction(&c.conn(), at(5));
    let cookie = c.cookie_header();
    let headers: Vec<(&[u8], &[u8])> = vec![
        (b"User-Agent", UA.as_bytes()),
        (b"Accept", BROWSER.as_bytes()),
        (b"Cookie", cookie.as_bytes()),
    ];
    let head = RequestHead::new(b"GET", b"/shop", b"HTTP/1.1", &headers);
    assert_eq!(tx.request_headers(&head), Verdict::Continue);
    let verified: Vec<&str> = tx.policy_effects().verified_cookies().collect();
    assert_eq!(verified, ["__waf_pass", "__waf_session"]);
    assert!(!session.is_empty());
}

#[test]
fn a_verified_admission_cookie_is_not_inspected() {
    let config: PolicyConfig = toml::from_str(&format!("{KEYS}{ROOM}")).unwrap();
    let w = Waf::builder()
        .seclang(
            "admit-rule",
            "SecRuleEngine On\nSecRule REQUEST_COOKIES_NAMES \"@streq __waf_admit\" \"id:1,phase:1,deny,status:418\"\n",
        )
        .policy(config)
        .build()
        .unwrap();
    let mut a = Client::browser("192.0.2.1");
    assert!(matches!(a.get(&w, "/sale", at(0)), Got::Pass(_)));
    assert!(a.cookie("__waf_admit").is_some());
    // Admitted on /sale: verified, not inspected; on /home the room does not look at it.
    assert!(matches!(a.get(&w, "/sale/item", at(1)), Got::Pass(_)));
    assert!(matches!(a.get(&w, "/home", at(1)), Got::Block(418)));
}

fn gates(w: &Waf) -> &super::Gates {
    w.policy.gates.as_ref().unwrap()
}
