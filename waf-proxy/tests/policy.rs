//! The native policy in the real proxy binary: `[[host.rules]]`, `[[list]]`, rate limits,
//! bans through the admin listener, `check` errors with their location, list files reloaded
//! under load, and the same decisions through the proxy, axum (waf-tower) and actix-web.

#[path = "proxy/util.rs"]
#[allow(dead_code)]
mod util;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use util::*;
use waf_core::policy::PolicyConfig;

/// The policy every host gets in these tests (lists are given inline).
const POLICY: &str = r#"
[[list]]
name = "office"
kind = "ip"
items = ["192.0.2.0/24"]

[[list]]
name = "bad-agents"
kind = "string"
items = ["sqlmap", "nikto"]

[[rules]]
name = "office"
expression = "ip.src in $office"
action = "allow"

[[rules]]
name = "tag"
expression = 'http.request.uri.path == "/echo"'
action = "set_header"
header = "X-Policy"
value = "seen"

[[rules]]
name = "scanners"
expression = "http.user_agent in $bad-agents"
action = "block"

[[rules]]
name = "admin"
expression = 'http.request.uri.path starts_with "/admin" and not ip.src in $office'
action = "block"

[[rules]]
name = "debug"
expression = 'http.request.uri.args["debug"] == "1"'
action = "block"
status = 406

[[rules]]
name = "gone"
expression = 'http.request.uri.path == "/gone"'
action = "block"
status = 410
page = "<h1>gone for good</h1>"

[[rules]]
name = "trial"
expression = 'http.request.uri.path == "/trial"'
action = "block"
shadow = true

[[rate_limit]]
name = "limited"
match = 'http.request.uri.path == "/limited"'
requests = 2
period_secs = 60
"#;

/// The same policy as `[[list]]` at the top and `[[host.*]]` in the host, for the proxy.
fn proxy_policy() -> (String, String) {
    let mut top = String::new();
    let mut host = String::new();
    for block in POLICY.split("\n\n") {
        let block = block.trim();
        if block.starts_with("[[list]]") {
            top.push_str(block);
            top.push_str("\n\n");
        } else if let Some(rest) = block.strip_prefix("[[") {
            host.push_str("[[host.");
            host.push_str(rest);
            host.push_str("\n\n");
        }
    }
    (top, host)
}

fn proxy_config(upstream: SocketAddr, rules: &std::path::Path, server_extra: &str) -> String {
    let (top, host) = proxy_policy();
    format!(
        "{top}{}{host}",
        config(&[upstream.to_string()], rules, server_extra, "")
    )
}

/// One observed answer: status, Retry-After, whether the app saw `X-Policy`, the body
/// when it is a policy page.
type Seen = (u16, Option<String>, bool, Option<String>);

async fn observe(base: &str) -> Vec<Seen> {
    let c = client();
    let mut out = Vec::new();
    let requests: Vec<(&str, Option<&str>)> = vec![
        ("/", None),
        ("/admin/users", None),
        ("/anything", Some("sqlmap")),
        ("/?debug=1", None),
        ("/gone", None),
        ("/trial", None),
        ("/echo", None),
        ("/limited", None),
        ("/limited", None),
        ("/limited", None),
    ];
    for (path, ua) in requests {
        let mut req = Request::get(format!("{base}{path}"));
        if let Some(ua) = ua {
            req = req.header("user-agent", ua);
        }
        let got = send(&c, req.body(Full::new(Bytes::new())).unwrap()).await;
        let retry = got
            .headers
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let saw_header = got.body.to_ascii_lowercase().contains("x-policy: seen");
        let page = (got.status == 410).then(|| got.body.clone());
        out.push((got.status, retry, saw_header, page));
    }
    out
}

fn expected() -> Vec<Seen> {
    vec![
        (200, None, false, None),
        (403, None, false, None),
        (403, None, false, None),
        (406, None, false, None),
        (410, None, false, Some("<h1>gone for good</h1>".to_string())),
        (200, None, false, None),
        (200, None, true, None),
        (200, None, false, None),
        (200, None, false, None),
        (429, Some("30".to_string()), false, None),
    ]
}

fn policy() -> PolicyConfig {
    toml::from_str(POLICY).unwrap()
}

/// An axum app behind waf-tower with the policy; `/echo` answers with the request headers.
fn start_axum() -> SocketAddr {
    use axum::routing::any;
    let layer = waf_tower::WafLayer::builder(waf_core::Waf::builder().build().unwrap())
        .policy(&policy())
        .unwrap()
        .build();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new()
                .route(
                    "/echo",
                    any(|h: http::HeaderMap| async move {
                        h.iter()
                            .map(|(k, v)| format!("{k}: {}\n", v.to_str().unwrap_or("?")))
                            .collect::<String>()
                    }),
                )
                .fallback(|| async { "ok" })
                .layer(layer);
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            axum::serve(l, app.into_make_service_with_connect_info::<SocketAddr>())
                .await
                .unwrap();
        });
    });
    rx.recv().unwrap()
}

/// An actix-web app behind waf-actix with the policy.
fn start_actix() -> SocketAddr {
    use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
    let mw = waf_actix::Waf::builder(waf_core::Waf::builder().build().unwrap())
        .policy(&policy())
        .unwrap()
        .build();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            HttpServer::new(move || {
                App::new()
                    .wrap(mw.clone())
                    .route(
                        "/echo",
                        web::route().to(|req: HttpRequest| async move {
                            let s: String = req
                                .headers()
                                .iter()
                                .map(|(k, v)| format!("{k}: {}\n", v.to_str().unwrap_or("?")))
                                .collect();
                            HttpResponse::Ok().body(s)
                        }),
                    )
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
    addr
}

#[tokio::test]
async fn the_same_policy_gives_the_same_decisions_in_the_proxy_axum_and_actix() {
    let up = upstream();
    let dir = temp_dir("policy-parity");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, "SecRuleEngine On\n").unwrap();
    let proxy = Proxy::start(&dir, &proxy_config(up.addr, &rules, ""));
    let axum = start_axum();
    let actix = start_actix();
    // Let the servers bind.
    for addr in [axum, actix] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "{addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let want = expected();
    assert_eq!(observe(&proxy.url("")).await, want, "proxy");
    assert_eq!(observe(&format!("http://{axum}")).await, want, "axum");
    assert_eq!(observe(&format!("http://{actix}")).await, want, "actix");
}

#[tokio::test]
async fn bans_are_listed_and_lifted_through_the_admin_listener() {
    let up = upstream();
    let dir = temp_dir("policy-bans");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, "SecRuleEngine On\n").unwrap();
    // A rule answers /missing with a 404 block; each scores 2.5 (the weights given replace
    // the defaults, so a block adds nothing more): the fifth crosses 10 and bans.
    let mut cfg = config(
        &[up.addr.to_string()],
        &rules,
        "",
        "[[host.rules]]\nname = \"nope\"\nexpression = 'http.request.uri.path == \"/missing\"'\naction = \"block\"\nstatus = 404\n\
         [host.bans]\nttl_secs = 600\n[host.scoring]\nthreshold = 10\nweights = { \"404\" = 2.5 }\nstreak = 0\n",
    );
    cfg.push_str("[admin]\nlisten = \"127.0.0.1:0\"\n");
    let proxy = Proxy::start(&dir, &cfg);
    let admin = proxy.admin.expect("admin listener");
    let c = client();
    for _ in 0..4 {
        assert_eq!(get(&c, &proxy.url("/missing")).await.status, 404);
    }
    assert_eq!(
        get(&c, &proxy.url("/")).await.status,
        200,
        "9.99 points: not yet"
    );
    assert_eq!(get(&c, &proxy.url("/missing")).await.status, 404);
    let banned = get(&c, &proxy.url("/")).await;
    assert_eq!(banned.status, 403);
    assert!(banned.headers.contains_key("retry-after"));
    let list = get(&c, &format!("http://{admin}/bans")).await;
    assert_eq!(list.status, 200);
    let v: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    assert_eq!(v[0]["ip"], "127.0.0.1", "{}", list.body);
    assert_eq!(v[0]["offences"], 1);
    let metrics = get(&c, &format!("http://{admin}/metrics")).await.body;
    assert!(metrics.contains("waf_proxy_policy_hits_total{host=\"*\",kind=\"rule\",name=\"nope\",shadow=\"false\"} 5"), "{metrics}");
    let del = send(
        &c,
        Request::delete(format!("http://{admin}/bans/127.0.0.1"))
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(del.status, 200, "{}", del.body);
    assert_eq!(get(&c, &proxy.url("/")).await.status, 200);
    let again = send(
        &c,
        Request::delete(format!("http://{admin}/bans/127.0.0.1"))
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(again.status, 404);
}

#[test]
fn check_reports_a_malformed_expression_or_list_with_its_location() {
    let dir = temp_dir("policy-check");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, "SecRuleEngine On\n").unwrap();
    let base = config(&["127.0.0.1:1".into()], &rules, "", "");
    let bad_expr = format!(
        "{base}[[host.rules]]\nname = \"admin\"\nexpression = '''\nhttp.request.uri.path starts_with \"/admin\"\n  and ip.src contains \"10.\"'''\naction = \"block\"\n"
    );
    let cfg = dir.join("expr.toml");
    std::fs::write(&cfg, bad_expr).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waf-proxy"))
        .arg("check")
        .arg(&cfg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("host[0].policy: rule \"admin\" expression:2:14: `contains` does not apply to IP address"),
        "{text}"
    );
    // ... and where that is in the file: the expression starts on line 26 (after the
    // `'''` and its newline), so its line 2 is the file's line 27.
    let file_line = std::fs::read_to_string(&cfg)
        .unwrap()
        .lines()
        .position(|l| l.contains("and ip.src contains"))
        .unwrap()
        + 1;
    assert!(
        text.contains(&format!("expr.toml:{file_line}:14)")),
        "{text}"
    );
    assert!(text.contains("^^^"), "{text}");

    let list = dir.join("office.txt");
    std::fs::write(&list, "192.0.2.0/24\n10.0.0.0/8\n10.1.2.3.4\n").unwrap();
    let bad_list = format!(
        "[[list]]\nname = \"office\"\nkind = \"ip\"\nfile = \"office.txt\"\n{base}[[host.rules]]\nname = \"o\"\nexpression = 'ip.src in $office'\naction = \"allow\"\n"
    );
    let cfg = dir.join("list.toml");
    std::fs::write(&cfg, bad_list).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waf-proxy"))
        .arg("check")
        .arg(&cfg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("office.txt:3:1: \"10.1.2.3.4\" is not an IP address or CIDR"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_files_reload_under_load_with_no_failed_request() {
    let up = upstream();
    let dir = temp_dir("policy-reload");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, "SecRuleEngine On\n").unwrap();
    let agents = dir.join("agents.txt");
    std::fs::write(&agents, "sqlmap\n").unwrap();
    let cfg = format!(
        "[[list]]\nname = \"agents\"\nkind = \"string\"\nfile = \"agents.txt\"\n{}[[host.rules]]\nname = \"agents\"\nexpression = 'http.user_agent in $agents'\naction = \"block\"\n",
        config(&[up.addr.to_string()], &rules, "reload_poll_ms = 50", "")
    );
    let proxy = Arc::new(Proxy::start(&dir, &cfg));
    let failed = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (proxy, failed, done, stop) =
            (proxy.clone(), failed.clone(), done.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let c = client();
            while !stop.load(Ordering::Relaxed) {
                let req = Request::get(proxy.url("/"))
                    .header("user-agent", "friendly")
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                match c.request(req).await {
                    Ok(r) if r.status() == 200 => {}
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let c = client();
    let ua = |agent: &'static str| {
        Request::get(proxy.url("/"))
            .header("user-agent", agent)
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    assert_eq!(send(&c, ua("sqlmap")).await.status, 403);
    for round in 0..5u32 {
        let name = format!("scanner{round}");
        let tmp = dir.join("agents.tmp");
        std::fs::write(&tmp, format!("sqlmap\n{name}\n")).unwrap();
        std::fs::rename(&tmp, &agents).unwrap();
        let leaked: &'static str = Box::leak(name.into_boxed_str());
        let deadline = Instant::now() + Duration::from_secs(20);
        while send(&c, ua(leaked)).await.status != 403 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the new list was not loaded"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(send(&c, ua("sqlmap")).await.status, 403);
    }
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    assert!(
        done.load(Ordering::Relaxed) > 50,
        "{}",
        done.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0);
}

/// Writes a country `.mmdb` with Debian's libmaxmind-db-writer-perl.
fn write_country_mmdb(path: &std::path::Path) {
    let script = r#"use strict; use MaxMind::DB::Writer::Tree;
my %types = (country => 'map', iso_code => 'utf8_string');
my $t = MaxMind::DB::Writer::Tree->new(ip_version => 6, record_size => 24, remove_reserved_networks => 0,
  database_type => 'Test-Country', languages => ['en'], description => { en => 'test' },
  map_key_type_callback => sub { $types{ $_[0] } });
$t->insert_network('127.0.0.0/8', { country => { iso_code => 'KP' } });
open my $fh, '>:raw', $ARGV[0] or die; $t->write_tree($fh); close $fh or die;
"#;
    let out = Command::new("perl")
        .arg("-e")
        .arg(script)
        .arg(path)
        .output()
        .expect("perl is missing: install libmaxmind-db-writer-perl");
    assert!(
        out.status.success(),
        "writing the .mmdb failed (is libmaxmind-db-writer-perl installed?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn readme_example_config_checks_and_runs() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme
        .find("<!-- policy-example -->\n```toml\n")
        .expect("the README example")
        + 31;
    let end = start + readme[start..].find("```").unwrap();
    let example = &readme[start..end];
    let dir = temp_dir("policy-readme");
    write_country_mmdb(&dir.join("GeoLite2-Country.mmdb"));
    std::fs::write(dir.join("office-extra.txt"), "# nothing yet\n").unwrap();
    let path = dir.join("proxy.toml");
    std::fs::write(&path, example).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waf-proxy"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // And it does what it says, in front of a real upstream (loopback is "KP" in our db).
    let up = upstream();
    let cfg = example
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("127.0.0.1:9901", "127.0.0.1:0")
        .replace("127.0.0.1:3000", &up.addr.to_string())
        .replace("names = [\"shop.example\"]", "names = [\"*\"]");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    assert_eq!(get(&c, &proxy.url("/")).await.status, 200);
    assert_eq!(get(&c, &proxy.url("/admin")).await.status, 403);
    let embargo = get(&c, &proxy.url("/checkout")).await;
    assert_eq!(embargo.status, 451);
    assert!(embargo.body.contains("Not available in your country"));
    let post = |user: &str| {
        Request::post(proxy.url(&format!("/login?user={user}")))
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    // The upstream answers 200: successful logins never fill the bucket.
    for _ in 0..10 {
        assert_eq!(send(&c, post("ann")).await.status, 200);
    }
}

#[tokio::test]
async fn shadow_hits_reach_the_audit_log() {
    let up = upstream();
    let dir = temp_dir("policy-audit");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, "SecRuleEngine On\n").unwrap();
    let cfg = proxy_config(up.addr, &rules, "").replace(
        "access = \"off\"",
        "access = \"off\"\naudit = \"audit.log\"",
    );
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    assert_eq!(get(&c, &proxy.url("/trial")).await.status, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = loop {
        let text = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
        if let Some(l) = text.lines().next() {
            break l.to_string();
        }
        assert!(Instant::now() < deadline, "no audit line");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["policy"],
        serde_json::json!([{"kind": "rule", "name": "trial", "action": "block", "shadow": true}]),
        "{line}"
    );
}

/// `mode = "off"` turns the SecLang rules off, not the policy: the proxy must still run a
/// transaction for a host with a policy (it skips the transaction only when there is
/// nothing to run). The load benchmark's `proxy-protected` variant is this configuration.
#[tokio::test]
async fn the_policy_runs_when_the_waf_mode_is_off() {
    let up = upstream();
    let dir = temp_dir("policy-mode-off");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, "SecRuleEngine On\n").unwrap();
    let cfg = config(
        &[up.addr.to_string()],
        &rules,
        "",
        "[[host.rules]]\nname = \"admin\"\nexpression = 'http.request.uri.path starts_with \"/admin\"'\naction = \"block\"\nstatus = 451\n",
    )
    .replace("mode = \"block\"", "mode = \"off\"");
    assert!(cfg.contains("mode = \"off\""), "{cfg}");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    assert_eq!(get(&c, &proxy.url("/admin/users")).await.status, 451);
    assert_eq!(get(&c, &proxy.url("/shop")).await.status, 200);
}
