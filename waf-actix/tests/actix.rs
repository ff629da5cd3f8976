//! waf-actix against a real actix-web server on 127.0.0.1, a real HTTP client (reqwest), and
//! OWASP CRS v4 from `../shared/crs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use waf_actix::{OverLimit, WafBuilder};
use waf_core::host::TrustedProxies;
use waf_core::{Report, Waf};

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

async fn echo(seen: web::Data<Seen>, body: Bytes) -> HttpResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    seen.bodies.lock().unwrap().push(body);
    HttpResponse::Ok().body("ok")
}

async fn leak(seen: web::Data<Seen>) -> HttpResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(
            "<html><body>You have an error in your SQL syntax; check the manual that corresponds \
         to your MySQL server version for the right syntax to use near ''' at line 1</body></html>",
        )
}

async fn big_html(seen: web::Data<Seen>) -> HttpResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    let mut page = "<p>fine</p>".repeat(10_000);
    page.push_str("You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version");
    HttpResponse::Ok().content_type("text/html").body(page)
}

async fn internal_header(seen: web::Data<Seen>) -> HttpResponse {
    seen.calls.fetch_add(1, Ordering::SeqCst);
    HttpResponse::Ok()
        .insert_header(("x-internal", "leak"))
        .body("secret")
}

async fn whoami(req: HttpRequest) -> HttpResponse {
    use actix_web::HttpMessage;
    let id = req
        .extensions()
        .get::<waf_actix::RequestId>()
        .map(|r| r.0.clone());
    HttpResponse::Ok().body(id.unwrap_or_default())
}

/// Starts an app behind the middleware on 127.0.0.1; returns its base URL and what it saw.
async fn serve(builder: WafBuilder) -> (String, Seen) {
    let seen = Seen::default();
    let reports = seen.reports.clone();
    let mw = builder
        .on_report(move |r| reports.lock().unwrap().push(r.clone()))
        .build();
    let data = seen.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = HttpServer::new(move || {
        App::new()
            .wrap(mw.clone())
            .app_data(web::Data::new(data.clone()))
            .route("/echo", web::route().to(echo))
            .route("/leak", web::get().to(leak))
            .route("/big-html", web::get().to(big_html))
            .route("/whoami", web::get().to(whoami))
            .route("/internal-header", web::get().to(internal_header))
    })
    .workers(2)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    actix_web::rt::spawn(server);
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

fn multipart_body(field: &str, file: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"--XyZzy0123\r\nContent-Disposition: form-data; name=\"comment\"\r\n\r\n");
    b.extend_from_slice(field.as_bytes());
    b.extend_from_slice(b"\r\n--XyZzy0123\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n");
    b.extend_from_slice(file);
    b.extend_from_slice(b"\r\n--XyZzy0123--\r\n");
    b
}

#[actix_web::test]
async fn benign_requests_pass_and_bodies_arrive_byte_for_byte() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf())).await;
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

#[actix_web::test]
async fn attacks_are_blocked_before_the_handler() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf())).await;
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
    assert!(reports
        .iter()
        .all(|r| r.intervention.as_ref().map(|i| i.status) == Some(403)));
}

#[actix_web::test]
async fn block_page_is_json_when_asked() {
    let (url, _seen) = serve(waf_actix::Waf::builder(waf())).await;
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
}

#[actix_web::test]
async fn response_phase_rules_replace_the_response() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf())).await;
    let r = client().get(format!("{url}/leak")).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(!r.text().await.unwrap().contains("SQL syntax"));
    assert_eq!(seen.calls(), 1);
    let report = seen.reports_at_least(1).await.pop().unwrap();
    assert!(
        report.matched_rules.iter().any(|m| m.phase == 4),
        "{report:?}"
    );

    let (url, _seen) = serve(waf_actix::Waf::builder(waf()).response_body_limit(1024)).await;
    let r = client()
        .get(format!("{url}/big-html"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the leak is past the inspected prefix");
    assert_eq!(r.text().await.unwrap().len(), 110_000 + 100);
}

#[actix_web::test]
async fn oversized_request_body_is_rejected_or_inspected_by_prefix() {
    let limit = 64 * 1024;
    let (url, seen) = serve(waf_actix::Waf::builder(waf()).request_body_limit(limit)).await;
    let r = client()
        .post(format!("{url}/echo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("filler=".to_owned() + &"x".repeat(100 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(seen.calls(), 0);

    let builder = waf_actix::Waf::builder(waf())
        .request_body_limit(limit)
        .request_body_over_limit(OverLimit::ProcessPartial);
    let (url, seen) = serve(builder).await;
    let filler = "x".repeat(200 * 1024);
    let body = format!("filler={filler}&comment={}", enc(SQLI));
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
        .body(format!("comment={}&filler={filler}", enc(SQLI)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "the attack is in the inspected prefix");
    assert_eq!(seen.calls(), 1);
}

#[actix_web::test]
async fn detection_only_passes_and_reports_what_it_would_block() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf_detection_only())).await;
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
}

#[actix_web::test]
async fn redirect_action_redirects() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf())).await;
    let r = client()
        .get(format!("{url}/echo?goto=away"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(r.headers()["location"], "https://example.com/away");
    assert_eq!(seen.calls(), 0);
}

#[actix_web::test]
async fn client_address_and_request_id_come_from_trusted_proxies_only() {
    let (url, _seen) = serve(waf_actix::Waf::builder(waf())).await;
    let r = client()
        .get(format!("{url}/whoami"))
        .header("x-forwarded-for", "203.0.113.7")
        .header("x-request-id", "proxy-id-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_ne!(r.headers()["x-request-id"], "proxy-id-1");

    let builder =
        waf_actix::Waf::builder(waf()).trusted_proxies(TrustedProxies::parse("127.0.0.1").unwrap());
    let (url, _seen) = serve(builder).await;
    let r = client()
        .get(format!("{url}/whoami"))
        .header("x-forwarded-for", "203.0.113.7")
        .header("x-request-id", "proxy-id-2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 451);
    assert_eq!(r.headers()["x-request-id"], "proxy-id-2");
    let r = client()
        .get(format!("{url}/whoami"))
        .header("x-request-id", "proxy-id-3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "proxy-id-3");
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

#[actix_web::test]
async fn concurrent_requests_give_the_same_verdicts_as_sequential_ones() {
    const N: usize = 96;
    let (url, seen) = serve(waf_actix::Waf::builder(waf())).await;
    let c = client();

    let mut sequential = Vec::new();
    for n in 0..N {
        let r = mixed_request(&c, &url, n).send().await.unwrap();
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
        let req = mixed_request(&c, &url, n);
        tasks.push(actix_web::rt::spawn(async move {
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

#[actix_web::test]
async fn chunked_bodies_are_inspected_across_chunks() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf()).request_body_limit(64 * 1024)).await;
    let head = "POST /echo HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded";
    let status = send_chunked(&url, head, &[b"name=alice&comm", b"ent=hello", b" world"]).await;
    assert_eq!(status, 200);
    assert_eq!(seen.last_body(), &b"name=alice&comment=hello world"[..]);
    let attack = format!("comment={}", enc(SQLI));
    let (a, b) = attack.as_bytes().split_at(15);
    assert_eq!(send_chunked(&url, head, &[a, b]).await, 403);
    let big = vec![b'x'; 40 * 1024];
    assert_eq!(send_chunked(&url, head, &[b"f=", &big, &big]).await, 413);
    assert_eq!(seen.calls(), 1);
}

#[actix_web::test]
async fn bodies_the_rules_do_not_inspect_stream_through() {
    let waf = Waf::builder()
        .seclang(
            "no-body",
            "SecRuleEngine On\nSecRequestBodyAccess Off\n\
             SecRule ARGS \"@contains evil\" \"id:1,phase:2,deny,status:403\"",
        )
        .build()
        .unwrap();
    let (url, seen) = serve(waf_actix::Waf::builder(waf).request_body_limit(16)).await;
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

#[actix_web::test]
async fn response_header_rules_replace_the_response_and_the_id_header_is_configurable() {
    let builder = waf_actix::Waf::builder(waf())
        .request_id_header(http::HeaderName::from_static("x-correlation-id"));
    let (url, seen) = serve(builder).await;
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

#[actix_web::test]
async fn drop_answers_with_the_block_page_and_closes_the_connection() {
    let (url, seen) = serve(waf_actix::Waf::builder(waf())).await;
    let r = client()
        .get(format!("{url}/echo?bye=now"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.headers()["connection"], "close");
    assert_eq!(seen.calls(), 0);
}
