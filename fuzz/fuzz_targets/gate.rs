//! The gates (`waf_core::policy::gate`) on untrusted input: arbitrary cookies (pass,
//! admission, session, form), arbitrary form bodies and query strings posted to every gate
//! endpoint. Nothing may panic, and no forged cookie may let a request through a gate.
#![no_main]

use std::time::{Duration, SystemTime};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use waf_core::policy::gate::{ChallengeKind, GateConfig, SignInConfig, WaitingRoomConfig};
use waf_core::policy::{PolicyConfig, RuleAction, RuleConfig};
use waf_core::{ConnectionInfo, RequestHead, Verdict, Waf};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    endpoint: u8,
    query: &'a [u8],
    cookie: &'a [u8],
    body: &'a [u8],
}

fn waf() -> Waf {
    let mut gates = GateConfig {
        keys: vec!["fuzz key, at least thirty-two bytes!".into()],
        ..GateConfig::default()
    };
    gates.waiting_rooms.push(WaitingRoomConfig {
        name: "room".into(),
        when: Some(r#"http.request.uri.path starts_with "/room""#.into()),
        capacity: 1,
        per_minute: None,
        idle_secs: 60,
        admission_ttl_secs: 600,
        refresh_secs: 5,
        skip: None,
    });
    gates.sign_in = Some(SignInConfig {
        when: Some(r#"http.request.uri.path starts_with "/private""#.into()),
        allowed: vec!["@example.com".into()],
        code_ttl_secs: 600,
        max_attempts: 5,
        lockout_secs: 900,
        codes_per_address: 5,
        codes_per_ip: 20,
        attempts_per_ip: 20,
        rate_window_secs: 3600,
        session_ttl_secs: 3600,
    });
    let rule = RuleConfig {
        name: "c".into(),
        id: 1,
        expression: r#"http.request.uri.path starts_with "/challenge""#.into(),
        action: RuleAction::Challenge,
        status: None,
        page: None,
        page_file: None,
        skip: None,
        header: None,
        value: None,
        rule_ids: Vec::new(),
        tags: Vec::new(),
        rate_limit: None,
        challenge: Some(ChallengeKind::Pow),
        difficulty: Some(20),
        shadow: false,
    };
    let config = PolicyConfig {
        rules: vec![rule],
        gates: Some(gates),
        ..PolicyConfig::default()
    };
    Waf::builder().policy(config).build().expect("fuzz policy")
}

fuzz_target!(|input: Input<'_>| {
    thread_local!(static WAF: Waf = waf());
    WAF.with(|waf| {
        let conn = ConnectionInfo::new(
            "192.0.2.7:1234".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let headers: &[(&[u8], &[u8])] = &[
            (b"Host", b"a.example"),
            (b"User-Agent", b"fuzz"),
            (b"Accept", b"text/html"),
            (b"Cookie", input.cookie),
        ];
        let (method, path): (&[u8], &[u8]) = match input.endpoint % 8 {
            0 => (b"POST", b"/.waf/challenge"),
            1 => (b"GET", b"/.waf/cookie"),
            2 => (b"GET", b"/.waf/sign-in"),
            3 => (b"POST", b"/.waf/sign-in"),
            4 => (b"POST", b"/.waf/sign-in/code"),
            5 => (b"GET", b"/.waf/sign-out"),
            6 => (b"GET", b"/challenge"),
            _ => (b"GET", b"/private"),
        };
        let mut uri = path.to_vec();
        uri.push(b'?');
        uri.extend_from_slice(input.query);
        let head = RequestHead::new(method, &uri, b"HTTP/1.1", headers);
        if waf.is_gate_path(path) {
            let r = waf.gate_request(&conn, &head, input.body, now, "fuzz");
            let r = r.expect("a gate path gets an answer");
            // A redirect never leaves the host.
            for (k, v) in &r.headers {
                if *k == "location" {
                    assert!(v.starts_with('/') && !v.starts_with("//"), "{v:?}");
                }
            }
        } else {
            let mut tx = waf.transaction(&conn, now);
            // Random bytes cannot forge a pass or a session.
            assert!(!matches!(tx.request_headers(&head), Verdict::Continue));
        }
    });
});
