//! waf-tower against a real axum server on 127.0.0.1, a real HTTP client (reqwest), and
//! OWASP CRS v4 from `../shared/crs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use axum::Router;
use waf_core::host::TrustedProxies;
use waf_core::{Report, Waf};
use waf_tower::{OverLimit, WafLayer, WafLayerBuilder};

/// Test rules added after CRS: a client-address ban, to see which address the engine got,
/// and a redirect.
const TEST_RULES: &str = r#"
SecRule REMOTE_ADDR "@ipMatch 203.0.113.0/24" "id:1001,phase:1,deny,status:451,log,msg:'banned network'"
SecRule ARGS_GET:goto "@streq away" "id:1002,phase:1,redirect:https://example.com/away,log,msg:'redirect'"
SecRule ARGS_GET:bye "@streq now" "id:1004,phase:1,drop,log,msg:'drop'"
SecRule RESPONSE_HEADERS:X-Internal "@streq leak" "id:1003,phase:3,deny,status:502,log,msg:'internal header'"
"#;

fn crs_conf() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crs.conf")
}

/// CRS PL1, blocking: loaded once per test binary.
fn waf() -> Waf {
    static WAF: OnceLock<Waf> = OnceLock::new();
    WAF.get_or_init(|| {
        Waf::builder()
            .seclang_file(crs_conf())
            .seclang("test-rules", TEST_RULES)
            .build()
            .expect("CRS loads")
    })
    .clone()
}

/// The same, in detection-only mode.
fn waf_detection_only() -> Waf {
    static WAF: OnceLock<Waf> = OnceLock::new();
    WAF.get_or_init(|| {
        Waf::builder()
            .seclang_file(crs_conf())
            .seclang("detect", "SecRuleEngine DetectionOnly")
            .build()
            .expect("CRS loads")
    })
    .clone()
}

/// What the handlers saw.
#[derive(Clone, Default)]
struct Seen {
    calls: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<Bytes>>>,
    reports: Arc<Mutex<Vec<Report>>>,
}

impl Seen {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn last_body(&self) -> Bytes {
        self.bodies.lock().unwrap().last().cloned().expect("a body")
    }

    /// The reports so far, after waiting (bounded) for `n` of them: a report is sent when
    /// the server drops the response body, which may be just after the client got it.
    async fn reports_at_least(&self, n: usize) -> Vec<Report> {
        for _ in 0..200 {
            if self.reports.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        self.reports.lock().unwrap().clone()
    }
}

async fn echo(State(seen): State<Seen>, body: Bytes) -> impl IntoResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    seen.bodies.lock().unwrap().push(body.clone());
    "ok"
}

async fn leak(State(seen): State<Seen>) -> impl IntoResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<html><body>You have an error in your SQL syntax; check the manual that corresponds \
         to your MySQL server version for the right syntax to use near ''' at line 1</body></html>",
    )
}

async fn big_html(State(seen): State<Seen>) -> impl IntoResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    let mut page = "<p>fine</p>".repeat(10_000);
    page.push_str("You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version");
    ([(header::CONTENT_TYPE, "text/html")], page)
}

async fn internal_header(State(seen): State<Seen>) -> impl IntoResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    ([("x-internal", "leak")], "secret")
}

async fn whoami(headers: HeaderMap) -> impl IntoResponse {
    format!("{:?}", headers.get("x-request-id"))
}

/// Starts an app behind `layer` on 127.0.0.1; returns its base URL and what it saw.
async fn serve(layer: WafLayerBuilder) -> (String, Seen) {
    let seen = Seen::default();
    let reports = seen.reports.clone();
    let layer = layer
        .on_report(move |r| reports.lock().unwrap().push(r.clone()))
        .build();
    let app = Router::new()
        .route("/echo", any(echo))
        .route("/leak", get(leak))
        .route("/big-html", get(big_html))
        .route("/whoami", get(whoami))
        .route("/internal-header", get(internal_header))
        .with_state(seen.clone())
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    (format!("http://{addr}"), seen)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

const SQLI: &str = "1' UNION SELECT password FROM users--";
const XSS: &str = "<script>alert(document.cookie)</script>";

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benign_requests_pass_and_bodies_arrive_byte_for_byte() {
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let c = client();

    let r = c
        .get(format!("{url}/echo?q=hello+world"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-request-id"));
    assert_eq!(r.text().await.unwrap(), "ok");

    let form = "name=alice&city=Paris&note=caf%C3%A9+au+lait";
    let r = c
        .post(format!("{url}/echo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(seen.last_body(), form.as_bytes());

    let json = r#"{"name":"alice","tags":["a","b"],"n":{"x":1.5,"y":null}}"#;
    let r = c
        .post(format!("{url}/echo"))
        .header("content-type", "application/json")
        .body(json)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(seen.last_body(), json.as_bytes());

    let multipart = multipart_body("hello", b"\x00\x01binary\xff data\r\n");
    let r = c
        .post(format!("{url}/echo"))
        .header("content-type", "multipart/form-data; boundary=XyZzy0123")
        .body(multipart.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(seen.last_body(), multipart);
    assert_eq!(seen.calls(), 4);

    let reports = seen.reports_at_least(4).await;
    assert_eq!(reports.len(), 4, "one report per transaction");
    assert!(reports.iter().all(|r| r.intervention.is_none()));
}

fn multipart_body(field: &str, file: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"--XyZzy0123\r\nContent-Disposition: form-data; name=\"comment\"\r\n\r\n");
    b.extend_from_slice(field.as_bytes());
    b.extend_from_slice(b"\r\n--XyZzy0123\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n");
    b.extend_from_slice(file);
    b.extend_from_slice(b"\r\n--XyZzy0123--\r\n");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_are_blocked_before_the_handler() {
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let c = client();
    for payload in [SQLI, XSS] {
        let cases = vec![
            c.get(format!("{url}/echo?q={}", enc(payload))),
            c.post(format!("{url}/echo"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("name=alice&comment={}", enc(payload))),
            c.post(format!("{url}/echo"))
                .header("content-type", "application/json")
                .body(serde_json::json!({ "name": "alice", "comment": payload }).to_string()),
            c.post(format!("{url}/echo"))
                .header("content-type", "multipart/form-data; boundary=XyZzy0123")
                .body(multipart_body(payload, b"x")),
            c.get(format!("{url}/echo"))
                .header("cookie", format!("session={}", enc(payload))),
            c.get(format!("{url}/echo")).header("referer", payload),
        ];
        for (n, req) in cases.into_iter().enumerate() {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 403, "case {n} for {payload:?}");
            let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
            assert!(r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"));
            let page = r.text().await.unwrap();
            assert!(page.contains(&id), "{page}");
            let rest = page.replace(&id, "");
            for secret in ["942", "941", "Injection", "XSS", "anomaly", "score"] {
                assert!(
                    !rest.contains(secret),
                    "nothing an attacker can use: {page}"
                );
            }
        }
    }
    assert_eq!(seen.calls(), 0, "the handler never ran");
    let reports = seen.reports_at_least(12).await;
    assert_eq!(reports.len(), 12);
    for r in &reports {
        let i = r.intervention.as_ref().expect("blocked");
        assert_eq!(i.status, 403);
        assert!(!r.matched_rules.is_empty());
        assert!(!r.unique_id.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_page_is_json_when_asked_and_states_the_request_id() {
    let (url, _seen) = serve(WafLayer::builder(waf())).await;
    let r = client()
        .get(format!("{url}/echo?q={}", enc(SQLI)))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.headers()["content-type"], "application/json");
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["request_id"], id.as_str());
    assert_eq!(v["status"], 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_phase_rules_replace_the_response() {
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let r = client().get(format!("{url}/leak")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let body = r.text().await.unwrap();
    assert!(!body.contains("SQL syntax"), "{body}");
    assert_eq!(
        seen.calls(),
        1,
        "the handler ran; its response was replaced"
    );
    let report = seen.reports_at_least(1).await.pop().unwrap();
    assert!(
        report.matched_rules.iter().any(|m| m.phase == 4),
        "{report:?}"
    );
    assert_eq!(report.intervention.unwrap().status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_over_its_limit_is_inspected_by_prefix() {
    // The leak sits past the first 1 KiB: with ProcessPartial the prefix is clean and the
    // whole page is sent.
    let (url, _seen) = serve(WafLayer::builder(waf()).response_body_limit(1024)).await;
    let r = client()
        .get(format!("{url}/big-html"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    assert_eq!(body.len(), 110_000 + 100);
    // With the default limit the leak is seen.
    let (url, _seen) = serve(WafLayer::builder(waf())).await;
    let r = client()
        .get(format!("{url}/big-html"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // And with Reject, a response over the limit is replaced.
    let layer = WafLayer::builder(waf())
        .response_body_limit(1024)
        .response_body_over_limit(OverLimit::Reject);
    let (url, _seen) = serve(layer).await;
    let r = client()
        .get(format!("{url}/big-html"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_body_is_rejected_or_inspected_by_prefix() {
    let limit = 64 * 1024;
    let big = |attack_at_start: bool| {
        let filler = "x".repeat(200 * 1024);
        if attack_at_start {
            format!("comment={}&filler={filler}", enc(SQLI))
        } else {
            format!("filler={filler}&comment={}", enc(SQLI))
        }
    };

    // Reject: 413, and the handler never runs.
    let (url, seen) = serve(WafLayer::builder(waf()).request_body_limit(limit)).await;
    let r = client()
        .post(format!("{url}/echo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("filler=".to_owned() + &"x".repeat(100 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(seen.calls(), 0);
    assert_eq!(
        seen.reports_at_least(1)
            .await
            .pop()
            .unwrap()
            .intervention
            .unwrap()
            .status,
        413
    );

    // ProcessPartial: the prefix is inspected, the whole body passes.
    let layer = WafLayer::builder(waf())
        .request_body_limit(limit)
        .request_body_over_limit(OverLimit::ProcessPartial);
    let (url, seen) = serve(layer).await;
    let body = big(false);
    let r = client()
        .post(format!("{url}/echo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the attack is past the inspected prefix");
    assert_eq!(seen.last_body(), body.as_bytes(), "byte for byte");
    let r = client()
        .post(format!("{url}/echo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(big(true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "the attack is in the inspected prefix");
    assert_eq!(seen.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detection_only_passes_and_reports_what_it_would_block() {
    let (url, seen) = serve(WafLayer::builder(waf_detection_only())).await;
    let r = client()
        .get(format!("{url}/echo?q={}", enc(SQLI)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(seen.calls(), 1);
    let report = seen.reports_at_least(1).await.pop().unwrap();
    assert!(report.intervention.is_none());
    assert_eq!(
        report.would_intervene.as_ref().expect("would block").status,
        403
    );
    assert!(
        report.matched_rules.iter().any(|m| m.id == 942100),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_action_redirects() {
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let r = client()
        .get(format!("{url}/echo?goto=away"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(r.headers()["location"], "https://example.com/away");
    assert_eq!(seen.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_address_and_request_id_come_from_trusted_proxies_only() {
    // Untrusted peer: X-Forwarded-For and the incoming id are ignored.
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let r = client()
        .get(format!("{url}/whoami"))
        .header("x-forwarded-for", "203.0.113.7")
        .header("x-request-id", "proxy-id-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_ne!(r.headers()["x-request-id"], "proxy-id-1");
    assert_eq!(seen.reports_at_least(1).await.len(), 1);

    // 127.0.0.1 trusted: the banned client address is seen, and the id is reused.
    let layer =
        WafLayer::builder(waf()).trusted_proxies(TrustedProxies::parse("127.0.0.1/32").unwrap());
    let (url, seen) = serve(layer).await;
    let r = client()
        .get(format!("{url}/whoami"))
        .header("x-forwarded-for", "203.0.113.7")
        .header("x-request-id", "proxy-id-2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 451);
    assert_eq!(r.headers()["x-request-id"], "proxy-id-2");
    assert!(r.text().await.unwrap().contains("proxy-id-2"));
    assert_eq!(
        seen.reports_at_least(1).await.pop().unwrap().unique_id,
        "proxy-id-2"
    );
    let r = client()
        .get(format!("{url}/whoami"))
        .header("forwarded", "for=198.51.100.1")
        .header("x-request-id", "proxy-id-3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "Some(\"proxy-id-3\")");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_gives_the_same_verdicts() {
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let r = c.get(format!("{url}/echo?q=hello")).send().await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(r.status(), 200);
    let json = r#"{"name":"alice"}"#;
    let r = c
        .post(format!("{url}/echo"))
        .header("content-type", "application/json")
        .body(json)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(seen.last_body(), json.as_bytes());
    let r = c
        .get(format!("{url}/echo?q={}", enc(SQLI)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = c
        .post(format!("{url}/echo"))
        .header("content-type", "application/json")
        .body(serde_json::json!({ "comment": XSS }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(seen.calls(), 2);
    assert!(
        seen.reports_at_least(4)
            .await
            .iter()
            .all(|r| r.matched_rules.iter().all(|m| m.id != 920280)),
        "HTTP/2 requests have a Host header"
    );
}

/// Request `n` of the mixed workload: benign or an attack, in the query, a form, JSON or a
/// cookie.
fn mixed_request(c: &reqwest::Client, url: &str, n: usize) -> reqwest::RequestBuilder {
    let value = match n % 6 {
        0 => SQLI.to_owned(),
        3 => XSS.to_owned(),
        _ => format!("hello {n}"),
    };
    match n % 4 {
        0 => c.get(format!("{url}/echo?n={n}&q={}", enc(&value))),
        1 => c
            .post(format!("{url}/echo"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("n={n}&comment={}", enc(&value))),
        2 => c
            .post(format!("{url}/echo"))
            .header("content-type", "application/json")
            .body(serde_json::json!({ "n": n, "comment": value }).to_string()),
        _ => c
            .get(format!("{url}/echo?n={n}"))
            .header("cookie", format!("c={}", enc(&value))),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_give_the_same_verdicts_as_sequential_ones() {
    const N: usize = 96;
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let h1 = client();
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();

    let mut sequential = Vec::new();
    for n in 0..N {
        let r = mixed_request(&h1, &url, n).send().await.unwrap();
        sequential.push(r.status().as_u16());
    }
    let blocked = sequential.iter().filter(|&&s| s == 403).count();
    assert_eq!(
        blocked,
        N / 3,
        "every attack and nothing else is blocked: {sequential:?}"
    );

    let mut tasks = Vec::new();
    for n in 0..N {
        let c = if n % 2 == 0 { h1.clone() } else { h2.clone() };
        let req = mixed_request(&c, &url, n);
        tasks.push(tokio::spawn(async move {
            req.send().await.unwrap().status().as_u16()
        }));
    }
    let mut concurrent = Vec::new();
    for t in tasks {
        concurrent.push(t.await.unwrap());
    }
    assert_eq!(concurrent, sequential);
    assert_eq!(seen.calls(), 2 * (N - blocked));
    assert_eq!(seen.reports_at_least(2 * N).await.len(), 2 * N);
}

/// Sends `head` then each chunk of `chunks` with chunked transfer coding over a plain TCP
/// connection, and returns the status code.
async fn send_chunked(url: &str, head: &str, chunks: &[&[u8]]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{head}\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for c in chunks {
        req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        req.extend_from_slice(c);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&req).await.unwrap();
    let mut response = Vec::new();
    s.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_are_inspected_across_chunks() {
    let (url, seen) = serve(WafLayer::builder(waf()).request_body_limit(64 * 1024)).await;
    let head = "POST /echo HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded";
    let status = send_chunked(&url, head, &[b"name=alice&comm", b"ent=hello", b" world"]).await;
    assert_eq!(status, 200);
    assert_eq!(seen.last_body(), &b"name=alice&comment=hello world"[..]);
    // The attack is split across chunks.
    let attack = format!("comment={}", enc(SQLI));
    let (a, b) = attack.as_bytes().split_at(15);
    assert_eq!(send_chunked(&url, head, &[a, b]).await, 403);
    // No Content-Length to reject early: the limit is found while reading.
    let big = vec![b'x'; 40 * 1024];
    assert_eq!(send_chunked(&url, head, &[b"f=", &big, &big]).await, 413);
    assert_eq!(seen.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_the_rules_do_not_inspect_stream_through() {
    let waf = Waf::builder()
        .seclang(
            "no-body",
            "SecRuleEngine On\nSecRequestBodyAccess Off\n\
             SecRule ARGS \"@contains evil\" \"id:1,phase:2,deny,status:403\"",
        )
        .build()
        .unwrap();
    let (url, seen) = serve(WafLayer::builder(waf).request_body_limit(16)).await;
    let body = "comment=evil&".repeat(1000);
    let r = client()
        .post(format!("{url}/echo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        200,
        "not inspected, so neither blocked nor limited"
    );
    assert_eq!(seen.last_body(), body.as_bytes());
    let r = client()
        .get(format!("{url}/echo?comment=evil"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_on_a_plain_tower_service() {
    use std::convert::Infallible;

    use http_body_util::{BodyExt, Full};
    use tower::{ServiceBuilder, ServiceExt};
    use waf_tower::PeerAddr;

    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let svc = ServiceBuilder::new()
        .layer(
            WafLayer::builder(waf())
                .trusted_proxies(TrustedProxies::parse("10.0.0.0/8").unwrap())
                .build(),
        )
        .service_fn(
            move |req: axum::http::Request<waf_tower::WafBody<Full<Bytes>>>| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    Ok::<_, Infallible>(axum::http::Response::new(Full::new(body)))
                }
            },
        );
    let request = |uri: &str, peer: &str, xff: &str| {
        let mut req = axum::http::Request::builder()
            .method("POST")
            .uri(uri)
            .header("host", "example.com")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-forwarded-for", xff)
            .body(Full::new(Bytes::from_static(b"a=1&b=two")))
            .unwrap();
        req.extensions_mut().insert(PeerAddr(peer.parse().unwrap()));
        req
    };

    let r = svc
        .clone()
        .oneshot(request("/", "10.1.1.1:5000", "198.51.100.2"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.into_body().collect().await.unwrap().to_bytes(),
        "a=1&b=two"
    );
    // The trusted proxy says the client is in the banned network (test rule 1001).
    let r = svc
        .clone()
        .oneshot(request("/", "10.1.1.1:5000", "203.0.113.9"))
        .await
        .unwrap();
    assert_eq!(r.status(), 451);
    // The same header from an untrusted peer is ignored.
    let r = svc
        .clone()
        .oneshot(request("/", "192.0.2.1:5000", "203.0.113.9"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = svc
        .oneshot(request(&format!("/?q={}", enc(SQLI)), "192.0.2.1:5000", ""))
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_header_rules_replace_the_response_and_the_id_header_is_configurable() {
    let layer = WafLayer::builder(waf())
        .request_id_header(axum::http::HeaderName::from_static("x-correlation-id"));
    let (url, seen) = serve(layer).await;
    let r = client()
        .get(format!("{url}/internal-header"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    assert!(r.headers().get("x-internal").is_none());
    assert!(r.headers().get("x-request-id").is_none());
    let id = r.headers()["x-correlation-id"].to_str().unwrap().to_owned();
    assert!(r.text().await.unwrap().contains(&id));
    assert_eq!(seen.calls(), 1);
    let report = seen.reports_at_least(1).await.pop().unwrap();
    assert_eq!(report.unique_id, id);
    assert_eq!(report.intervention.unwrap().rule_id, 1003);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_answers_with_the_block_page_and_closes_the_connection() {
    let (url, seen) = serve(WafLayer::builder(waf())).await;
    let r = client()
        .get(format!("{url}/echo?bye=now"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.headers()["connection"], "close");
    assert_eq!(seen.calls(), 0);
}
