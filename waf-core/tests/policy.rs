//! The native policy through `Transaction`: every field and operator, actions, shadow
//! mode, rate-limit accuracy, bans that expire and escalate, list reload under load,
//! IP intelligence from `.mmdb` files this test writes itself, and load errors with their
//! location.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use waf_core::policy::{HeaderEdit, PolicyConfig};
use waf_core::{ConnectionInfo, Report, RequestHead, ResponseHead, Waf};

fn config(toml_text: &str) -> PolicyConfig {
    toml::from_str(toml_text).unwrap_or_else(|e| panic!("bad test config: {e}\n{toml_text}"))
}

fn waf(toml_text: &str) -> Waf {
    Waf::builder()
        .policy(config(toml_text))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn at(secs: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_secs_f64(secs)
}

/// A request to drive through a transaction.
struct Req<'a> {
    ip: &'a str,
    tls: bool,
    method: &'a str,
    uri: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    status: u16,
    now: SystemTime,
}

impl<'a> Req<'a> {
    fn get(uri: &'a str) -> Req<'a> {
        Req {
            ip: "198.51.100.10",
            tls: false,
            method: "GET",
            uri,
            headers: vec![("Host", "shop.example")],
            status: 200,
            now: at(0.0),
        }
    }
    fn ip(mut self, ip: &'a str) -> Self {
        self.ip = ip;
        self
    }
    fn header(mut self, k: &'a str, v: &'a str) -> Self {
        self.headers.push((k, v));
        self
    }
    fn method(mut self, m: &'a str) -> Self {
        self.method = m;
        self
    }
    fn status(mut self, s: u16) -> Self {
        self.status = s;
        self
    }
    fn now(mut self, t: SystemTime) -> Self {
        self.now = t;
        self
    }
}

/// Outcome: the status of the intervention (None: passed), the effects, the report.
struct Outcome {
    status: Option<u16>,
    effects: waf_core::policy::PolicyEffects,
    report: Report,
}

fn run(waf: &Waf, r: Req<'_>) -> Outcome {
    let ip: IpAddr = r.ip.parse().unwrap();
    let conn =
        ConnectionInfo::new((ip, 40000).into(), "127.0.0.1:80".parse().unwrap()).with_tls(r.tls);
    let mut tx = waf.transaction(&conn, r.now);
    let headers: Vec<(&[u8], &[u8])> = r
        .headers
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    let head = RequestHead::new(r.method.as_bytes(), r.uri.as_bytes(), b"HTTP/1.1", &headers);
    let mut status = tx.request_headers(&head).intervention().map(|i| i.status);
    if status.is_none() {
        status = tx.request_end().intervention().map(|i| i.status);
    }
    if status.is_none() {
        let resp = ResponseHead::new(r.status, b"HTTP/1.1", &[]);
        status = tx.response_headers(&resp).intervention().map(|i| i.status);
    }
    let effects = tx.policy_effects().clone();
    let report = tx.finish();
    Outcome {
        status,
        effects,
        report,
    }
}

fn blocks(waf: &Waf, r: Req<'_>) -> bool {
    run(waf, r).status.is_some()
}

fn rule(expression: &str) -> String {
    format!(
        "[[list]]\nname = \"office\"\nkind = \"ip\"\nitems = [\"192.0.2.0/24\", \"2001:db8:10::/48\"]\n\
         [[list]]\nname = \"bots\"\nkind = \"string\"\nitems = [\"sqlmap\", \"nikto\"]\n\
         [[rate_limit]]\nname = \"api\"\nrequests = 100\nperiod_secs = 60\nmatch = 'http.request.uri.path starts_with \"/api\"'\n\
         [[rules]]\nname = \"t\"\nexpression = '''{expression}'''\naction = \"block\"\n"
    )
}

#[test]
fn every_field_and_operator() {
    // (expression, request, matches)
    let cases: Vec<(&str, Req<'_>, bool)> = vec![
        (
            r#"http.request.method == "POST""#,
            Req::get("/").method("POST"),
            true,
        ),
        (r#"http.request.method == "POST""#, Req::get("/"), false),
        (r#"http.request.method != "GET""#, Req::get("/"), false),
        (
            r#"http.request.method in {"PUT" "DELETE"}"#,
            Req::get("/").method("DELETE"),
            true,
        ),
        (r#"http.host == "shop.example""#, Req::get("/"), true),
        (
            r#"http.host == "shop.example""#,
            Req {
                headers: vec![("Host", "SHOP.Example:8080")],
                ..Req::get("/")
            },
            true,
        ),
        (r#"http.host ends_with ".example""#, Req::get("/"), true),
        (
            r#"http.host == "shop.example""#,
            Req {
                headers: vec![],
                ..Req::get("http://shop.example:81/x")
            },
            true,
        ),
        (
            r#"http.request.scheme == "https""#,
            Req {
                tls: true,
                ..Req::get("/")
            },
            true,
        ),
        (r#"http.request.scheme == "https""#, Req::get("/"), false),
        (
            r#"http.request.uri.path == "/admin""#,
            Req::get("/%61dmin?x=1"),
            true,
        ),
        (
            r#"http.request.uri.path starts_with "/admin""#,
            Req::get("/admin/users"),
            true,
        ),
        (
            r#"http.request.uri.path starts_with "/admin""#,
            Req::get("/public/admin"),
            false,
        ),
        (
            r#"http.request.uri.path ends_with ".php""#,
            Req::get("/x/index.php?a"),
            true,
        ),
        (
            r#"http.request.uri.path contains "/wp-""#,
            Req::get("/blog/wp-login"),
            true,
        ),
        (
            r#"http.request.uri.path wildcard "/API/*/keys""#,
            Req::get("/api/v1/keys"),
            true,
        ),
        (
            r#"http.request.uri.path wildcard "/api/*/keys""#,
            Req::get("/api/v1/keys/x"),
            false,
        ),
        (
            r#"http.request.uri.path matches "^/(etc|proc)/""#,
            Req::get("/etc/passwd"),
            true,
        ),
        (
            r#"http.request.uri.query contains "debug=1""#,
            Req::get("/?a=2&debug=1"),
            true,
        ),
        (r#"http.request.uri == "/a?b""#, Req::get("/a?b"), true),
        (
            r#"http.request.uri.args["user name"] == "o'brien""#,
            Req::get("/?user+name=o%27brien"),
            true,
        ),
        (
            r#"http.request.uri.args["id"] == """#,
            Req::get("/?x=1"),
            true,
        ),
        (
            r#"http.request.headers["X-Api-Key"] == "secret""#,
            Req::get("/").header("x-api-key", "secret"),
            true,
        ),
        (
            r#"http.request.headers["x-api-key"] == """#,
            Req::get("/"),
            true,
        ),
        (
            r#"http.request.cookies["session"] == "abc""#,
            Req::get("/").header("Cookie", "a=1; session=abc"),
            true,
        ),
        (
            r#"http.request.cookies["session"] == "abc""#,
            Req::get("/").header("Cookie", "sessionx=abc"),
            false,
        ),
        (
            r#"http.user_agent matches "(?i)curl""#,
            Req::get("/").header("User-Agent", "CURL/8.0"),
            true,
        ),
        (
            r#"http.user_agent in $bots"#,
            Req::get("/").header("User-Agent", "sqlmap"),
            true,
        ),
        (
            r#"http.user_agent in $bots"#,
            Req::get("/").header("User-Agent", "sqlmap/1.0"),
            false,
        ),
        (
            r#"http.referer starts_with "https://evil.""#,
            Req::get("/").header("Referer", "https://evil.example/"),
            true,
        ),
        (r#"ip.src == 198.51.100.10"#, Req::get("/"), true),
        (r#"ip.src != 198.51.100.10"#, Req::get("/"), false),
        (
            r#"ip.src in {10.0.0.0/8 198.51.100.0/24}"#,
            Req::get("/"),
            true,
        ),
        (r#"ip.src in $office"#, Req::get("/").ip("192.0.2.77"), true),
        (
            r#"ip.src in $office"#,
            Req::get("/").ip("2001:db8:10:ffff::1"),
            true,
        ),
        (
            r#"ip.src in $office"#,
            Req::get("/").ip("::ffff:192.0.2.1"),
            true,
        ),
        (r#"ip.src in $office"#, Req::get("/"), false),
        // The level before this request is counted (rising levels: `rates_rise_in_rules`).
        (r#"rate["api"] > 0"#, Req::get("/api/x"), false),
        (
            r#"rate["api"] >= 0 and rate["api"] < 1 and rate["api"] <= 0 and rate["api"] == 0 and rate["api"] != 3"#,
            Req::get("/api/x"),
            true,
        ),
        // and / or / not / parentheses, and their precedence: not > and > or.
        (
            r#"http.request.method == "GET" and http.request.uri.path == "/x""#,
            Req::get("/x"),
            true,
        ),
        (
            r#"http.request.method == "GET" && http.request.uri.path == "/y""#,
            Req::get("/x"),
            false,
        ),
        (
            r#"http.request.method == "PUT" or http.request.uri.path == "/x""#,
            Req::get("/x"),
            true,
        ),
        (
            r#"http.request.method == "PUT" || http.request.uri.path == "/y""#,
            Req::get("/x"),
            false,
        ),
        (r#"not http.request.method == "PUT""#, Req::get("/x"), true),
        (r#"! http.request.method == "GET""#, Req::get("/x"), false),
        (
            r#"http.request.method == "PUT" or http.request.method == "GET" and http.request.uri.path == "/y""#,
            Req::get("/x"),
            false,
        ),
        (
            r#"(http.request.method == "PUT" or http.request.method == "GET") and not http.request.uri.path == "/y""#,
            Req::get("/x"),
            true,
        ),
        (
            "http.request.method == \"GET\"\n  and # a comment\n  http.request.uri.path == \"/x\"",
            Req::get("/x"),
            true,
        ),
    ];
    for (i, (expr, req, want)) in cases.into_iter().enumerate() {
        let w = waf(&rule(expr));
        assert_eq!(blocks(&w, req), want, "case {i}: {expr}");
    }
}

#[test]
fn rates_rise_in_rules() {
    let w = waf(
        "[[rate_limit]]\nname = \"api\"\nrequests = 100\nperiod_secs = 60\n\
         [[rules]]\nname = \"fast\"\nexpression = 'rate[\"api\"] >= 3'\naction = \"block\"\nstatus = 420\n",
    );
    for _ in 0..3 {
        assert_eq!(run(&w, Req::get("/")).status, None);
    }
    assert_eq!(run(&w, Req::get("/")).status, Some(420));
    assert_eq!(run(&w, Req::get("/").ip("198.51.100.99")).status, None);
    // 100 per minute: after 30 s, 50 have drained.
    assert_eq!(run(&w, Req::get("/").now(at(30.0))).status, None);
}

#[test]
fn the_anomaly_score_is_read_after_the_crs_request_phases() {
    let w = Waf::builder()
        .seclang(
            "crs-like",
            r#"SecRuleEngine On
               SecRule ARGS "@contains attack" "id:10,phase:2,pass,nolog,setvar:tx.inbound_anomaly_score=+3""#,
        )
        .policy(config(
            "[[rules]]\nname = \"score\"\nexpression = 'waf.score >= 3 and http.request.uri.path == \"/a\"'\naction = \"block\"\nstatus = 406\n",
        ))
        .build()
        .unwrap();
    assert_eq!(run(&w, Req::get("/a?q=attack")).status, Some(406));
    assert_eq!(run(&w, Req::get("/b?q=attack")).status, None);
    assert_eq!(run(&w, Req::get("/a?q=fine")).status, None);
}

#[test]
fn actions_block_allow_log_challenge_headers_skip() {
    let w = Waf::builder()
        .seclang(
            "crs-like",
            r#"SecRuleEngine On
               SecRule ARGS "@contains evil" "id:942100,phase:1,deny,status:403,tag:'attack-sqli'"
               SecRule ARGS "@contains bad" "id:941100,phase:1,deny,status:403,tag:'attack-xss'""#,
        )
        .policy(config(
            r#"
[[rules]]
name = "log-all"
expression = 'http.request.uri.path starts_with "/"'
action = "log"
[[rules]]
name = "tag"
expression = 'http.request.uri.path starts_with "/"'
action = "set_header"
header = "X-Policy"
value = "seen"
[[rules]]
name = "strip"
expression = 'http.request.headers["x-internal"] != ""'
action = "remove_header"
header = "X-Internal"
[[rules]]
name = "search-is-noisy"
expression = 'http.request.uri.path == "/search"'
action = "skip"
rule_ids = [942100]
tags = ["attack-xss"]
[[rules]]
name = "health"
expression = 'http.request.uri.path == "/health"'
action = "allow"
skip = ["crs"]
[[rules]]
name = "suspicious"
expression = 'http.request.uri.path == "/challenge"'
action = "challenge"
[gates]
keys = ["a test key of at least thirty-two bytes"]
[[rules]]
name = "custom-page"
expression = 'http.request.uri.path == "/gone"'
action = "block"
status = 410
page = "<p>gone</p>"
"#,
        ))
        .build()
        .unwrap();
    let o = run(&w, Req::get("/x").header("X-Internal", "1"));
    assert_eq!(o.status, None);
    assert_eq!(
        o.effects.request_headers,
        vec![
            HeaderEdit::Set("X-Policy".into(), "seen".into()),
            HeaderEdit::Remove("X-Internal".into())
        ]
    );
    let names: Vec<&str> = o.report.policy.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["log-all", "tag", "strip"]);
    // skip by id and by tag, only where the rule matches.
    assert_eq!(run(&w, Req::get("/search?q=evil")).status, None);
    assert_eq!(run(&w, Req::get("/search?q=bad")).status, None);
    assert_eq!(run(&w, Req::get("/other?q=evil")).status, Some(403));
    assert_eq!(run(&w, Req::get("/other?q=bad")).status, Some(403));
    // allow that skips CRS.
    assert_eq!(run(&w, Req::get("/health?q=evil")).status, None);
    // challenge blocks until challenges exist.
    let o = run(&w, Req::get("/challenge"));
    assert_eq!(o.status, Some(403));
    assert!(o.effects.gate.is_some(), "a challenge page to answer with");
    let o = run(&w, Req::get("/gone"));
    assert_eq!(o.status, Some(410));
    assert_eq!(o.effects.page.as_deref(), Some(&b"<p>gone</p>"[..]));
    assert_eq!(o.report.intervention.unwrap().status, 410);
}

#[test]
fn shadow_rules_count_but_never_act() {
    let w = waf(
        "[[rules]]\nname = \"trial\"\nexpression = 'http.request.uri.path == \"/x\"'\naction = \"block\"\nshadow = true\n",
    );
    let o = run(&w, Req::get("/x"));
    assert_eq!(o.status, None);
    assert!(o.report.policy[0].shadow);
    run(&w, Req::get("/x"));
    run(&w, Req::get("/y"));
    let c = &w.policy_counters()[0];
    assert_eq!((c.name.as_str(), c.hits, c.shadow), ("trial", 2, true));
}

#[test]
fn detection_only_reports_policy_blocks_without_acting() {
    let w = Waf::builder()
        .seclang("m", "SecRuleEngine DetectionOnly")
        .policy(config("[[rules]]\nname = \"b\"\nexpression = 'http.request.uri.path == \"/x\"'\naction = \"block\"\n"))
        .build()
        .unwrap();
    let o = run(&w, Req::get("/x"));
    assert_eq!(o.status, None);
    assert_eq!(o.report.would_intervene.unwrap().status, 403);
}

#[test]
fn a_burst_of_n_gets_exactly_the_allowed_count_through() {
    for burst in [1u32, 7, 50] {
        let w = waf(&format!(
            "[[rate_limit]]\nname = \"l\"\nrequests = 10\nperiod_secs = 60\nburst = {burst}\n"
        ));
        let passed = (0..200)
            .filter(|_| !blocks(&w, Req::get("/").now(at(5.0))))
            .count();
        assert_eq!(passed, burst as usize);
        // Another client has its own bucket.
        assert!(!blocks(&w, Req::get("/").ip("198.51.100.11").now(at(5.0))));
        // One more every 6 s.
        assert!(!blocks(&w, Req::get("/").now(at(11.0))));
        assert!(blocks(&w, Req::get("/").now(at(11.0))));
    }
}

#[test]
fn rate_limited_answers_are_429_with_retry_after() {
    let w = waf("[[rate_limit]]\nname = \"l\"\nrequests = 1\nperiod_secs = 30\n");
    assert_eq!(run(&w, Req::get("/")).status, None);
    let o = run(&w, Req::get("/").now(at(10.5)));
    assert_eq!(o.status, Some(429));
    assert_eq!(
        o.effects.response_headers,
        vec![("Retry-After".to_string(), "20".to_string())]
    );
    assert_eq!(
        o.report.intervention.unwrap().message.as_deref(),
        Some("rate limit l")
    );
}

#[test]
fn rate_limit_keys_and_scopes() {
    let w = waf(r#"
[[rate_limit]]
name = "per-key-and-path"
key = ["header:x-api-key", "path"]
requests = 2
period_secs = 60
match = 'http.request.headers["x-api-key"] != ""'
[[rate_limit]]
name = "prefix"
key = ["prefix"]
requests = 2
period_secs = 60
match = 'http.request.uri.path == "/p"'
[[rate_limit]]
name = "rule-only"
key = ["ip", "arg:user"]
requests = 1
period_secs = 60
[[rules]]
name = "login"
expression = 'http.request.uri.path == "/login"'
action = "rate_limit"
rate_limit = "rule-only"
"#);
    let k = |key: &'static str, path: &'static str| {
        Req::get(path).header("X-Api-Key", key).ip("203.0.113.9")
    };
    assert!(!blocks(&w, k("a", "/1")));
    assert!(!blocks(&w, k("a", "/1")));
    assert!(blocks(&w, k("a", "/1")));
    assert!(!blocks(&w, k("a", "/2")), "another path: another bucket");
    assert!(!blocks(&w, k("b", "/1")), "another key: another bucket");
    // /24 prefix: two addresses of one /24 share a bucket.
    assert!(!blocks(&w, Req::get("/p").ip("192.0.2.1")));
    assert!(!blocks(&w, Req::get("/p").ip("192.0.2.2")));
    assert!(blocks(&w, Req::get("/p").ip("192.0.2.3")));
    assert!(!blocks(&w, Req::get("/p").ip("192.0.3.1")));
    // The rule-scoped limit applies only where the rule matches, per user argument.
    assert!(!blocks(&w, Req::get("/login?user=a").ip("203.0.113.50")));
    assert!(blocks(&w, Req::get("/login?user=a").ip("203.0.113.50")));
    assert!(!blocks(&w, Req::get("/login?user=b").ip("203.0.113.50")));
    assert!(!blocks(
        &w,
        Req::get("/elsewhere?user=a").ip("203.0.113.51")
    ));
    assert!(!blocks(
        &w,
        Req::get("/elsewhere?user=a").ip("203.0.113.51")
    ));
}

#[test]
fn a_login_limit_counts_only_failures() {
    let w = waf(
        "[[rate_limit]]\nname = \"login\"\nrequests = 3\nperiod_secs = 60\nmatch = 'http.request.uri.path == \"/login\"'\ncount_statuses = [401]\n",
    );
    for _ in 0..20 {
        assert!(
            !blocks(&w, Req::get("/login").status(200)),
            "successes never count"
        );
    }
    for _ in 0..3 {
        assert!(!blocks(&w, Req::get("/login").status(401)));
    }
    let o = run(&w, Req::get("/login").status(200));
    assert_eq!(o.status, Some(429), "three failures fill the bucket");
    assert!(
        !blocks(&w, Req::get("/login").status(200).now(at(20.0))),
        "one failure has drained"
    );
}

#[test]
fn bans_from_404_bursts_expire_and_escalate_and_allow_lists_beat_them() {
    let w = waf(r#"
[[list]]
name = "office"
kind = "ip"
items = ["192.0.2.0/24"]
[[rules]]
name = "office"
expression = "ip.src in $office"
action = "allow"
[bans]
ttl_secs = 60
escalation = 2
[scoring]
threshold = 9.5
weights = { "404" = 2 }
streak = 0
"#);
    let scan = |ip: &'static str, t: f64| {
        for i in 0..5 {
            run(
                &w,
                Req::get("/nope")
                    .ip(ip)
                    .status(404)
                    .now(at(t + f64::from(i) * 0.001)),
            );
        }
    };
    scan("203.0.113.7", 0.0);
    let o = run(&w, Req::get("/").ip("203.0.113.7").now(at(1.0)));
    assert_eq!(o.status, Some(403));
    assert_eq!(o.effects.response_headers[0].0, "Retry-After");
    let bans = w.bans(at(1.0));
    assert_eq!(bans.len(), 1);
    assert_eq!(bans[0].ip, "203.0.113.7".parse::<IpAddr>().unwrap());
    assert_eq!(bans[0].offences, 1);
    assert!(
        !blocks(&w, Req::get("/").ip("203.0.113.7").now(at(61.0))),
        "first ban: 60 s"
    );
    // Second offence: 120 s.
    scan("203.0.113.7", 100.0);
    assert!(blocks(&w, Req::get("/").ip("203.0.113.7").now(at(219.0))));
    assert!(!blocks(&w, Req::get("/").ip("203.0.113.7").now(at(221.0))));
    // The admin can lift a ban.
    scan("203.0.113.8", 300.0);
    assert!(blocks(&w, Req::get("/").ip("203.0.113.8").now(at(301.0))));
    assert!(w.unban("203.0.113.8".parse().unwrap()));
    assert!(!blocks(&w, Req::get("/").ip("203.0.113.8").now(at(301.0))));
    // The office is allow-listed: a manual ban does not lock it out.
    w.ban("192.0.2.5".parse().unwrap(), Some(3600), at(400.0))
        .unwrap();
    assert!(!blocks(&w, Req::get("/").ip("192.0.2.5").now(at(401.0))));
    assert_eq!(w.bans(at(401.0)).len(), 1);
}

#[test]
fn waf_blocks_count_towards_bans() {
    let w = waf(
        "[[rules]]\nname = \"b\"\nexpression = 'http.request.uri.path == \"/wp-login.php\"'\naction = \"block\"\n\
         [bans]\n[scoring]\nthreshold = 12\n",
    );
    // Each block: 4xx 1 + waf_block 5 (+ streak).
    run(&w, Req::get("/wp-login.php"));
    assert!(w.bans(at(0.0)).is_empty());
    run(&w, Req::get("/wp-login.php"));
    assert_eq!(w.bans(at(0.0)).len(), 1);
    assert_eq!(run(&w, Req::get("/")).status, Some(403));
}

#[test]
fn state_survives_a_reload_through_the_store() {
    let toml_text = "[[rate_limit]]\nname = \"l\"\nrequests = 1\nperiod_secs = 60\n";
    let first = waf(toml_text);
    assert!(!blocks(&first, Req::get("/")));
    let second = Waf::builder()
        .policy(config(toml_text))
        .policy_store(first.policy_store())
        .build()
        .unwrap();
    assert!(blocks(&second, Req::get("/")));
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("waf-policy-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    // Write then rename, as a deploy tool would, so a reader never sees half a file.
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn file_lists_reload_under_load_without_a_wrong_answer() {
    let dir = temp_dir("reload");
    let file = dir.join("deny.txt");
    // 192.0.2.1 is in every version of the file; 198.51.100.1 only in the second.
    write(&file, "# v1\n192.0.2.1\n10.0.0.0/8\n");
    let w = waf(&format!(
        "[[list]]\nname = \"deny\"\nkind = \"ip\"\nfile = {:?}\n[[rules]]\nname = \"d\"\nexpression = \"ip.src in $deny\"\naction = \"block\"\n",
        file.display().to_string()
    ));
    assert!(!blocks(&w, Req::get("/").ip("198.51.100.1")));
    let stop = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (w, stop, wrong, done) = (w.clone(), stop.clone(), wrong.clone(), done.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if !blocks(&w, Req::get("/").ip("192.0.2.1")) {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                    if blocks(&w, Req::get("/").ip("203.0.113.1")) {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(2, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for round in 0..40 {
        let extra = if round % 2 == 0 {
            "198.51.100.0/24"
        } else {
            "172.16.0.0/12"
        };
        // Force a different mtime even on coarse-grained file systems.
        write(&file, &format!("# v{round}\n192.0.2.1\n{extra}\n"));
        let t = SystemTime::now() + Duration::from_secs(round + 1);
        std::fs::File::options()
            .append(true)
            .open(&file)
            .unwrap()
            .set_modified(t)
            .unwrap();
        assert_eq!(w.reload_policy_files().unwrap(), 1, "round {round}");
        let in_new = round % 2 == 0;
        assert_eq!(
            blocks(&w, Req::get("/").ip("198.51.100.1")),
            in_new,
            "round {round}"
        );
    }
    assert_eq!(
        w.reload_policy_files().unwrap(),
        0,
        "unchanged file: no reload"
    );
    // A broken file keeps the old list and says where it is broken.
    write(&file, "192.0.2.1\nnot-an-ip\n");
    std::fs::File::options()
        .append(true)
        .open(&file)
        .unwrap()
        .set_modified(SystemTime::now() + Duration::from_secs(100))
        .unwrap();
    let e = w.reload_policy_files().unwrap_err();
    assert_eq!(
        e.location().map(|l| (l.line, l.column)),
        Some((2, 1)),
        "{e}"
    );
    assert!(blocks(&w, Req::get("/").ip("172.16.0.1")));
    stop.store(true, Ordering::Relaxed);
    for t in workers {
        t.join().unwrap();
    }
    assert!(done.load(Ordering::Relaxed) > 100);
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
    std::fs::remove_dir_all(dir).ok();
}

/// Writes a `.mmdb` with Debian's libmaxmind-db-writer-perl: each network gets a country
/// and an ASN.
fn write_mmdb(path: &Path, networks: &[(&str, &str, u32)]) {
    let mut inserts = String::new();
    for (net, cc, asn) in networks {
        inserts.push_str(&format!(
            "$t->insert_network('{net}', {{ country => {{ iso_code => '{cc}' }}, autonomous_system_number => {asn} }});\n"
        ));
    }
    let script = format!(
        r#"use strict; use MaxMind::DB::Writer::Tree;
my %types = (country => 'map', iso_code => 'utf8_string', autonomous_system_number => 'uint32');
my $t = MaxMind::DB::Writer::Tree->new(ip_version => 6, record_size => 24, remove_reserved_networks => 0, database_type => 'Test',
  languages => ['en'], description => {{ en => 'test' }}, map_key_type_callback => sub {{ $types{{ $_[0] }} }});
{inserts}
open my $fh, '>:raw', $ARGV[0] or die; $t->write_tree($fh); close $fh or die;
"#
    );
    let out = std::process::Command::new("perl")
        .arg("-e")
        .arg(&script)
        .arg(path)
        .output()
        .expect("perl is missing: install libmaxmind-db-writer-perl (Debian) to run this test");
    assert!(
        out.status.success(),
        "writing the test .mmdb failed (is libmaxmind-db-writer-perl installed?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn country_asn_and_reputation_with_reload() {
    let dir = temp_dir("geo");
    let db = dir.join("geo.mmdb");
    write_mmdb(
        &db,
        &[
            ("203.0.113.0/24", "XX", 64500),
            ("2001:db8:77::/48", "YY", 64501),
        ],
    );
    let tor = dir.join("tor.txt");
    write(&tor, "198.51.100.0/24\n");
    let w = waf(&format!(
        r#"
[geo]
country_db = {db:?}
asn_db = {db:?}
[[reputation]]
name = "tor"
category = "tor"
score = 80
file = {tor:?}
[[reputation]]
name = "hosting"
category = "hosting"
score = 30
items = ["198.51.100.0/25", "192.0.2.0/24"]
[[rules]]
name = "country"
expression = 'ip.src.country in {{"XX" "YY"}}'
action = "block"
status = 451
[[rules]]
name = "asn"
expression = 'ip.src.asnum == 64502'
action = "block"
status = 452
[[rules]]
name = "tor"
expression = 'ip.src.reputation >= 50 and ip.src.category == "tor"'
action = "block"
status = 453
[[rules]]
name = "hosting"
expression = 'ip.src.category == "hosting"'
action = "block"
status = 454
"#,
        db = db.display().to_string(),
        tor = tor.display().to_string()
    ));
    assert_eq!(run(&w, Req::get("/").ip("203.0.113.5")).status, Some(451));
    assert_eq!(
        run(&w, Req::get("/").ip("2001:db8:77::1")).status,
        Some(451)
    );
    assert_eq!(
        run(&w, Req::get("/").ip("198.51.100.5")).status,
        Some(453),
        "highest score wins"
    );
    assert_eq!(run(&w, Req::get("/").ip("192.0.2.5")).status, Some(454));
    assert_eq!(run(&w, Req::get("/").ip("100.64.0.1")).status, None);
    // New database: the network moves to ASN 64502 in another country.
    write_mmdb(&db, &[("203.0.113.0/24", "ZZ", 64502)]);
    std::fs::File::options()
        .append(true)
        .open(&db)
        .unwrap()
        .set_modified(SystemTime::now() + Duration::from_secs(10))
        .unwrap();
    assert!(w.reload_policy_files().unwrap() >= 1);
    assert_eq!(run(&w, Req::get("/").ip("203.0.113.5")).status, Some(452));
    std::fs::remove_dir_all(dir).ok();
}

fn load_error(toml_text: &str) -> waf_core::policy::PolicyError {
    match Waf::builder().policy(config(toml_text)).build() {
        Ok(_) => panic!("loaded: {toml_text}"),
        Err(_) => WafBuilderCheck::check(toml_text),
    }
}

struct WafBuilderCheck;
impl WafBuilderCheck {
    fn check(toml_text: &str) -> waf_core::policy::PolicyError {
        waf_core::WafBuilder::check_policy(&config(toml_text)).unwrap_err()
    }
}

#[test]
fn malformed_expressions_fail_with_line_and_column() {
    // (expression, line, column, part of the message)
    let cases = [
        (
            r#"http.request.uri.path == "/a" and"#,
            1,
            34,
            "expected a field",
        ),
        (
            r#"http.request.path == "/a""#,
            1,
            1,
            "unknown field `http.request.path`",
        ),
        (
            r#"ip.src contains "1.2""#,
            1,
            8,
            "does not apply to IP address",
        ),
        (r#"ip.src == 300.1.1.1"#, 1, 11, "not an IP address"),
        (r#"http.request.method == GET"#, 1, 24, "quoted string"),
        (r#"waf.score > "3""#, 1, 13, "integer"),
        (
            "http.request.method == \"GET\"\n  and http.user_agent matches \"(unclosed\"",
            2,
            31,
            "invalid regex",
        ),
        (r#"ip.src in $nowhere"#, 1, 11, "unknown list `$nowhere`"),
        (r#"http.user_agent in $office"#, 1, 20, "is a ip list"),
        (r#"rate["nope"] > 1"#, 1, 6, "unknown rate limit"),
        (r#"(http.request.method == "GET""#, 1, 30, "expected `)`"),
        (
            r#"http.request.method === "GET""#,
            1,
            23,
            "unexpected character '='",
        ),
        (
            r#"http.request.method like "GET""#,
            1,
            21,
            "unknown operator `like`",
        ),
        (
            r#"http.request.method == "GET" "x""#,
            1,
            30,
            "expected `and`",
        ),
        (
            r#"http.request.method == "unterminated"#,
            1,
            24,
            "not closed",
        ),
    ];
    for (expr, line, column, msg) in cases {
        let toml_text = format!(
            "[[list]]\nname = \"office\"\nkind = \"ip\"\nitems = [\"192.0.2.0/24\"]\n[[rules]]\nname = \"r\"\nexpression = '''{expr}'''\naction = \"block\"\n"
        );
        let e = load_error(&toml_text);
        let loc = e.location().unwrap_or_else(|| panic!("no location: {e}"));
        assert_eq!((loc.line, loc.column), (line, column), "{expr}: {e}");
        assert_eq!(loc.source, "rule \"r\" expression");
        assert!(e.message().contains(msg), "{expr}: {e}");
        assert!(e.to_string().contains("^^^"), "{e}");
        // Through the builder, the same location.
        let be = Waf::builder()
            .policy(config(&toml_text))
            .build()
            .unwrap_err();
        assert_eq!(
            be.location().map(|l| (l.line, l.column)),
            Some((line, column))
        );
    }
}

#[test]
fn options_without_effect_and_bad_values_fail_to_load() {
    let cases = [
        ("[[rules]]\nname = \"r\"\nexpression = 'ip.src == 1.1.1.1'\naction = \"log\"\nstatus = 403\n", "no effect"),
        ("[[rules]]\nname = \"r\"\nexpression = 'ip.src == 1.1.1.1'\naction = \"block\"\nstatus = 200\n", "not a 4xx"),
        ("[[rules]]\nname = \"r\"\nexpression = 'waf.score > 1'\naction = \"set_header\"\nheader = \"x\"\n", "waf.score"),
        ("[[rules]]\nname = \"r\"\nexpression = 'ip.src.country == \"XX\"'\naction = \"block\"\n", "needs [geo]"),
        ("[[rules]]\nname = \"r\"\nexpression = 'ip.src == 1.1.1.1'\naction = \"rate_limit\"\nrate_limit = \"x\"\n", "unknown rate limit"),
        ("[[rules]]\nname = \"r\"\nexpression = 'ip.src == 1.1.1.1'\naction = \"skip\"\n", "needs `rule_ids`"),
        ("[[rate_limit]]\nname = \"l\"\nrequests = 0\n", "at least 1"),
        ("[[rate_limit]]\nname = \"l\"\nrequests = 1\nkey = [\"ip\", \"teapot\"]\n", "unknown key"),
        ("[[rate_limit]]\nname = \"l\"\nrequests = 1\nipv4_prefix = 16\n", "no effect"),
        ("[[rate_limit]]\nname = \"l\"\nrequests = 1\nmatch = 'rate[\"l\"] > 1'\n", "no rate limit can be read here"),
        ("[scoring]\n", "add a [bans]"),
        ("[[list]]\nname = \"x\"\nkind = \"ip\"\n", "neither"),
        ("[[list]]\nname = \"x\"\nkind = \"ip\"\nitems = [\"1.1.1.1\"]\n[[list]]\nname = \"x\"\nkind = \"ip\"\nitems = [\"1.1.1.1\"]\n", "twice"),
    ];
    for (toml_text, msg) in cases {
        let e = load_error(toml_text);
        assert!(e.to_string().contains(msg), "{toml_text}: {e}");
    }
    // Unknown keys are errors too (serde).
    assert!(toml::from_str::<PolicyConfig>(
        "[[rules]]\nname = \"r\"\nexpresion = 'x'\naction = \"log\"\n"
    )
    .is_err());
    // A bad inline list entry names its place.
    let e = load_error(
        "[[list]]\nname = \"x\"\nkind = \"ip\"\nitems = [\"10.0.0.0/8\", \"10.0.0.0/33\"]\n",
    );
    assert_eq!(e.location().map(|l| l.line), Some(2), "{e}");
}

/// A deterministic stand-in for the `policy_expr` fuzz target in `cargo test`: byte-level
/// mutations of valid expressions either fail to load with a location or load and run.
#[test]
fn mutated_expressions_never_panic() {
    let seeds = [
        r#"http.request.uri.path starts_with "/admin" and not ip.src in $office"#,
        r#"(http.request.method in {"PUT" "DELETE"} or rate["api"] > 5) && ip.src.asnum == 0"#,
        r#"http.user_agent matches r"(?i)sqlmap\b" || http.request.headers["x-a"] wildcard "*b*""#,
        r#"ip.src in {10.0.0.0/8 2001:db8::/32} and http.request.uri.args["q"] contains "\x00""#,
    ];
    let alphabet = b" ()[]{}\"'$!=<>&|#\\rx.:/-_0123456789aeinot";
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let base = rule("PLACEHOLDER");
    let mut loaded = 0;
    for round in 0..3000 {
        let mut e = seeds[round % seeds.len()].as_bytes().to_vec();
        for _ in 0..(next() % 4 + 1) {
            let at = (next() as usize) % (e.len() + 1);
            match next() % 3 {
                0 if at < e.len() => {
                    e.remove(at);
                }
                1 => e.insert(at, alphabet[(next() as usize) % alphabet.len()]),
                _ if at < e.len() => e[at] = alphabet[(next() as usize) % alphabet.len()],
                _ => {}
            }
        }
        let Ok(text) = String::from_utf8(e) else {
            continue;
        };
        if text.contains("'''") {
            continue;
        }
        let toml_text = base.replace("PLACEHOLDER", &text);
        let Ok(cfg) = toml::from_str::<PolicyConfig>(&toml_text) else {
            continue;
        };
        match Waf::builder().policy(cfg).build() {
            Ok(w) => {
                loaded += 1;
                run(&w, Req::get("/admin?q=%00").header("X-A", "abc"));
            }
            Err(e) => assert!(e.location().is_some() || !e.message().is_empty(), "{e}"),
        }
    }
    assert!(
        loaded > 100,
        "only {loaded} mutations loaded: the test would not exercise evaluation"
    );
}

/// The `policy_expr` fuzz target's regression inputs (`fuzz/regressions/policy_expr/`),
/// replayed as the target does: load, and run when it loads.
#[test]
fn fuzz_regression_inputs_load_or_fail_with_a_location() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/policy_expr");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/regressions/policy_expr") {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let cfg = PolicyConfig {
            lists: vec![
                toml::from_str("name = \"ips\"\nkind = \"ip\"\nitems = [\"192.0.2.0/24\"]")
                    .unwrap(),
                toml::from_str("name = \"agents\"\nkind = \"string\"\nitems = [\"sqlmap\"]")
                    .unwrap(),
            ],
            rate_limits: vec![toml::from_str("name = \"r\"\nrequests = 10").unwrap()],
            rules: vec![toml::from_str(&format!(
                "name = \"fuzz\"\nexpression = {:?}\naction = \"block\"",
                text
            ))
            .unwrap()],
            ..PolicyConfig::default()
        };
        match Waf::builder().policy(cfg).build() {
            Ok(w) => {
                run(&w, Req::get("/p%41th?q=1"));
            }
            Err(e) => assert!(e.location().is_some(), "{}: {e}", path.display()),
        }
        n += 1;
    }
    assert!(n >= 3);
}

/// Hosts that do not serve the gates' pages refuse a policy with `[gates]` at load, naming
/// themselves, instead of answering a gate with a bare status.
#[test]
fn hosts_without_gate_pages_refuse_gates() {
    let with: PolicyConfig =
        toml::from_str("[gates]\nkeys = [\"a test key of at least thirty-two bytes\"]\n").unwrap();
    let err = waf_core::policy::check_gates_served(&with, "a C host").unwrap_err();
    assert!(err.to_string().contains("a C host"), "{err}");
    assert!(err.to_string().contains("[gates]"), "{err}");
    let without: PolicyConfig = toml::from_str("").unwrap();
    assert!(waf_core::policy::check_gates_served(&without, "a C host").is_ok());
}
