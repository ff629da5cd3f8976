//! Plain HTTP: pass, block, limits, upstream failures, keep-alive, headers, logs, metrics.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::util::*;

fn rules_file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("rules.conf");
    std::fs::write(&p, RULES).unwrap();
    p
}

#[tokio::test]
async fn benign_passes_attacks_get_403_with_request_id() {
    let up = upstream();
    let dir = temp_dir("basic");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", ""));
    let c = client();

    let ok = get(&c, &proxy.url("/hello?q=world")).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, "ok GET /hello 0");
    assert!(ok.headers.contains_key("x-request-id"));
    assert_eq!(ok.headers["x-content-type-options"], "nosniff");
    assert!(
        !ok.headers.contains_key("strict-transport-security"),
        "HSTS only over HTTPS"
    );

    let sqli = get(&c, &proxy.url("/?id=1%20UNION%20SELECT%20password")).await;
    assert_eq!(sqli.status, 403);
    let id = sqli.headers["x-request-id"].to_str().unwrap().to_string();
    assert!(
        sqli.body.contains(&id),
        "block page names the request id: {}",
        sqli.body
    );

    let bot = send(
        &c,
        Request::get(proxy.url("/"))
            .header("user-agent", "evilbot/1.0")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(bot.status, 403);

    // The body is inspected before it goes upstream.
    let post = send(
        &c,
        Request::post(proxy.url("/form"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from_static(b"a=1&b=1+union+select+2")))
            .unwrap(),
    )
    .await;
    assert_eq!(post.status, 403, "{}", post.body);
    let fine = send(
        &c,
        Request::post(proxy.url("/form"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from_static(b"a=1&b=2")))
            .unwrap(),
    )
    .await;
    assert_eq!(fine.status, 200);
    assert_eq!(fine.body, "ok POST /form 7");
}

#[tokio::test]
async fn forwarding_headers_and_client_ip() {
    let up = upstream();
    let dir = temp_dir("fwd");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", ""));
    let c = client();
    // An untrusted peer's X-Forwarded-For and X-Request-Id are replaced, hop-by-hop
    // headers are dropped.
    let r = send(
        &c,
        Request::get(proxy.url("/echo"))
            .header("x-forwarded-for", "6.6.6.6")
            .header("x-request-id", "client-chosen")
            .header("connection", "x-secret")
            .header("x-secret", "1")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("x-forwarded-for: 127.0.0.1\n"),
        "{}",
        r.body
    );
    assert!(r.body.contains("x-forwarded-proto: http\n"), "{}", r.body);
    assert!(
        r.body.contains("forwarded: for=127.0.0.1;proto=http"),
        "{}",
        r.body
    );
    assert!(r.body.contains("x-request-id: "), "{}", r.body);
    assert!(!r.body.contains("x-secret"), "{}", r.body);
    assert!(!r.body.contains("6.6.6.6"), "{}", r.body);
    assert!(!r.body.contains("client-chosen"), "{}", r.body);

    // From a trusted proxy, the chain is kept and extended.
    let dir = temp_dir("fwd-trusted");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(
        &dir,
        &config(
            &[up.addr.to_string()],
            &rules,
            "trusted_proxies = [\"127.0.0.1\"]",
            "",
        ),
    );
    let r = send(
        &c,
        Request::get(proxy.url("/echo"))
            .header("x-forwarded-for", "203.0.113.5")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert!(
        r.body.contains("x-forwarded-for: 203.0.113.5, 127.0.0.1\n"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn cookies_get_attributes() {
    let up = upstream();
    let dir = temp_dir("cookies");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(
        &dir,
        &config(
            &[up.addr.to_string()],
            &rules,
            "",
            "cookies = { secure = true, http_only = true, same_site = \"Lax\" }\nheaders = { csp = \"default-src 'self'\" }",
        ),
    );
    let r = get(&client(), &proxy.url("/cookie")).await;
    let cookies: Vec<&str> = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    // Plain HTTP: no Secure (browsers would drop the cookie).
    assert_eq!(
        cookies,
        vec![
            "a=1; Path=/; HttpOnly; SameSite=Lax",
            "b=2; HttpOnly; SameSite=Lax"
        ]
    );
    assert_eq!(r.headers["content-security-policy"], "default-src 'self'");
}

#[tokio::test]
async fn upstream_connections_are_reused() {
    let up = upstream();
    let dir = temp_dir("keepalive");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", ""));
    let c = client();
    for i in 0..50 {
        let r = get(&c, &proxy.url(&format!("/n{i}"))).await;
        assert_eq!(r.status, 200);
    }
    // Fresh client connections too: the pool is per worker (2 workers).
    for _ in 0..20 {
        let r = get(&client(), &proxy.url("/fresh")).await;
        assert_eq!(r.status, 200);
    }
    let n = up.connections.load(Ordering::SeqCst);
    assert!(
        (1..=2).contains(&n),
        "70 requests opened {n} upstream connections"
    );
}

/// An upstream that closes keep-alive connections without saying so: one closes each
/// connection 5 ms after its first response; the other reads a second request on a
/// connection and closes it unanswered, as a server whose keep-alive timeout ends just as the
/// request arrives. Every request through the proxy must still succeed: a closed connection
/// is dropped from the pool, and a request a connection idle for a second or more lost is
/// sent again on a new one.
#[tokio::test]
async fn upstream_closing_pooled_connections_costs_no_request() {
    async fn serve(close_on_second: bool) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    for n in 0.. {
                        let mut got = Vec::new();
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(k) => got.extend_from_slice(&buf[..k]),
                            }
                        }
                        if n == 1 && close_on_second {
                            return; // closed with the request unanswered
                        }
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                            .await;
                        if !close_on_second {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            return;
                        }
                    }
                });
            }
        });
        addr
    }
    let c = client();
    let quick = serve(false).await;
    let dir = temp_dir("stale-pool");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[quick.to_string()], &rules, "", ""));
    for i in 0..20 {
        let r = get(&c, &proxy.url(&format!("/q{i}"))).await;
        assert_eq!(r.status, 200, "request {i}: {:?}", r.body);
        // Let the upstream's close arrive before the next request.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let late = serve(true).await;
    let dir = temp_dir("stale-pool-late");
    let proxy = Proxy::start(&dir, &config(&[late.to_string()], &rules, "", ""));
    for i in 0..3 {
        let r = get(&c, &proxy.url(&format!("/l{i}"))).await;
        assert_eq!(r.status, 200, "request {i}: {:?}", r.body);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
}

#[tokio::test]
async fn upstream_down_gives_502_quickly_and_round_robin_skips_it() {
    let up = upstream();
    // A port nobody listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let dir = temp_dir("down");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(std::slice::from_ref(&dead), &rules, "", ""));
    let c = client();
    let t = Instant::now();
    let r = get(&c, &proxy.url("/")).await;
    assert_eq!(r.status, 502);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
    let id = r.headers["x-request-id"].to_str().unwrap();
    assert!(r.body.contains(id));

    // Two servers, one dead: every request succeeds.
    let dir = temp_dir("rr");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[dead, up.addr.to_string()], &rules, "", ""));
    for _ in 0..10 {
        assert_eq!(get(&c, &proxy.url("/")).await.status, 200);
    }
}

#[tokio::test]
async fn slow_upstream_gives_504() {
    let up = upstream();
    let dir = temp_dir("slow-up");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", ""));
    let t = Instant::now();
    let r = get(&client(), &proxy.url("/slow")).await;
    assert_eq!(r.status, 504);
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "took {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn request_body_limit_gives_413() {
    let up = upstream();
    let dir = temp_dir("limit");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(
        &dir,
        &config(
            &[up.addr.to_string()],
            &rules,
            "",
            "limits = { max_request_body = 1000 }",
        ),
    );
    let c = client();
    let big = send(
        &c,
        Request::post(proxy.url("/up"))
            .body(Full::new(Bytes::from(vec![b'a'; 2000])))
            .unwrap(),
    )
    .await;
    assert_eq!(big.status, 413);
    let small = send(
        &c,
        Request::post(proxy.url("/up"))
            .body(Full::new(Bytes::from(vec![b'a'; 999])))
            .unwrap(),
    )
    .await;
    assert_eq!(small.status, 200);
    assert_eq!(small.body, "ok POST /up 999");

    // Chunked, no Content-Length: counted while reading.
    let mut s = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    let mut req = b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"258\r\n");
        req.extend_from_slice(&[b'b'; 600]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&req).await.unwrap();
    let mut buf = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

#[tokio::test]
async fn slow_client_gets_header_timeout() {
    let up = upstream();
    let dir = temp_dir("slowloris");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(
        &dir,
        &config(
            &[up.addr.to_string()],
            &rules,
            "header_read_timeout_ms = 500",
            "",
        ),
    );
    let mut s = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let t = Instant::now();
    let mut buf = vec![0; 1024];
    // The proxy closes the connection (or answers 408) once the timeout passes.
    let r = tokio::time::timeout(Duration::from_secs(5), async {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => String::new(),
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        }
    })
    .await
    .expect("connection still open 5 s later");
    assert!(r.is_empty() || r.starts_with("HTTP/1.1 408"), "{r}");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "closed too early: {:?}",
        t.elapsed()
    );
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "closed too late: {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn access_log_audit_log_and_metrics() {
    let up = upstream();
    let dir = temp_dir("logs");
    let rules = rules_file(&dir);
    let cfg = config(&[up.addr.to_string()], &rules, "", "")
        .replace(
            "access = \"off\"",
            "access = \"access.log\"\naudit = \"audit.log\"",
        )
        .replace("[log]", "[admin]\nlisten = \"127.0.0.1:0\"\n[log]");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    assert_eq!(get(&c, &proxy.url("/a?x=1")).await.status, 200);
    let blocked = get(&c, &proxy.url("/b?x=1%20union%20select%201")).await;
    assert_eq!(blocked.status, 403);
    let id = blocked.headers["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();

    let admin = proxy.admin.expect("admin listener");
    let health = get(&c, &format!("http://{admin}/healthz")).await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let (access, audit) = loop {
        let access = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let audit = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
        if access.lines().count() >= 2 && !audit.is_empty() {
            break (access, audit);
        }
        assert!(
            Instant::now() < deadline,
            "logs not written: {access:?} {audit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let lines: Vec<serde_json::Value> = access
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pass = lines.iter().find(|l| l["path"] == "/a").unwrap();
    assert_eq!(pass["status"], 200);
    assert_eq!(pass["action"], "pass");
    assert_eq!(pass["client_ip"], "127.0.0.1");
    assert_eq!(pass["method"], "GET");
    assert!(pass["bytes_out"].as_u64().unwrap() > 0);
    assert!(pass["upstream_ms"].is_number());
    for key in [
        "time",
        "request_id",
        "host",
        "bytes_in",
        "duration_ms",
        "waf_us",
        "anomaly_score",
    ] {
        assert!(pass.get(key).is_some(), "{key} missing: {pass}");
    }
    let block = lines.iter().find(|l| l["path"] == "/b").unwrap();
    assert_eq!(block["status"], 403);
    assert_eq!(block["action"], "block");
    assert_eq!(block["request_id"], id.as_str());
    assert_eq!(block["rule_ids"], serde_json::json!([1001]));
    let audit: serde_json::Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(audit["request_id"], id.as_str());
    assert_eq!(audit["rules"][0]["id"], 1001);

    let m = get(&c, &format!("http://{admin}/metrics")).await.body;
    assert!(
        m.contains("action=\"block\"") && m.contains("status=\"403\""),
        "{m}"
    );
    assert!(
        m.contains("waf_proxy_rule_hits_total{rule_id=\"1001\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("waf_proxy_request_duration_seconds_count"),
        "{m}"
    );
    assert!(m.contains("waf_proxy_upstream_connections_total 1"), "{m}");
}

#[tokio::test]
async fn unknown_host_gets_421_when_there_is_no_default() {
    let up = upstream();
    let dir = temp_dir("vhost");
    let rules = rules_file(&dir);
    let cfg = config(&[up.addr.to_string()], &rules, "", "")
        .replace("names = [\"*\"]", "names = [\"app.test\"]");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    let r = send(
        &c,
        Request::get(proxy.url("/"))
            .header("host", "app.test:80")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    let r = send(
        &c,
        Request::get(proxy.url("/"))
            .header("host", "other.test")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 421);
}

#[tokio::test]
async fn exclusions_switch_rules_off_globally_or_under_a_path() {
    let up = upstream();
    let dir = temp_dir("exclusions");
    let rules = rules_file(&dir);
    let cfg = config(&[up.addr.to_string()], &rules, "", "").replace(
        "rules = [",
        "exclusions = [{ rule_ids = [1001], path_prefix = \"/api/\" }, { rule_ids = [\"1002-1002\"] }], rules = [",
    );
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    assert_eq!(
        get(&c, &proxy.url("/api/x?q=union%20select%201"))
            .await
            .status,
        200
    );
    assert_eq!(
        get(&c, &proxy.url("/x?q=union%20select%201")).await.status,
        403
    );
    let bot = send(
        &c,
        Request::get(proxy.url("/"))
            .header("user-agent", "evilbot")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(bot.status, 200);
}

#[tokio::test]
async fn bodies_the_waf_does_not_want_stream_through_within_the_limit() {
    let up = upstream();
    let dir = temp_dir("stream");
    let rules = rules_file(&dir);
    let cfg = config(
        &[up.addr.to_string()],
        &rules,
        "",
        "limits = { max_request_body = 100000 }",
    )
    .replace("mode = \"block\"", "mode = \"off\"");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    // WAF off: nothing is blocked, the body streams through.
    let r = send(
        &c,
        Request::post(proxy.url("/s?q=union%20select%201"))
            .body(Full::new(Bytes::from(vec![b'x'; 99_999])))
            .unwrap(),
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok POST /s 99999"));
    // A chunked body over the limit is cut off while streaming: 413, not 502.
    let mut s = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(b"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    for _ in 0..30 {
        let mut chunk = b"1000\r\n".to_vec();
        chunk.extend_from_slice(&[b'y'; 0x1000]);
        chunk.extend_from_slice(b"\r\n");
        if s.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n").await;
    let mut buf = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

#[tokio::test]
async fn slow_body_gets_408() {
    let up = upstream();
    let dir = temp_dir("slowbody");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(
        &dir,
        &config(
            &[up.addr.to_string()],
            &rules,
            "body_read_timeout_ms = 500",
            "",
        ),
    );
    let mut s = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\na=1")
        .await
        .unwrap();
    let t = Instant::now();
    let mut buf = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("no answer 5 s later")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn sigterm_lets_requests_in_flight_finish_then_exits() {
    let up = upstream();
    let dir = temp_dir("shutdown");
    let rules = rules_file(&dir);
    let cfg = config(&[up.addr.to_string()], &rules, "", "")
        .replace("read_timeout_ms = 1000", "read_timeout_ms = 10000");
    let mut proxy = Proxy::start(&dir, &cfg);
    let url = proxy.url("/slow");
    let inflight = tokio::spawn(async move { get(&client(), &url).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = proxy.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let r = inflight.await.unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, "slow"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = proxy.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
    assert!(tokio::net::TcpStream::connect(proxy.http).await.is_err());
}

#[tokio::test]
async fn malformed_hosts_and_requests_get_answers_not_crashes() {
    let up = upstream();
    let dir = temp_dir("junk");
    let rules = rules_file(&dir);
    let cfg = config(&[up.addr.to_string()], &rules, "", "")
        .replace("names = [\"*\"]", "names = [\"app.test\"]");
    let proxy = Proxy::start(&dir, &cfg);
    for head in [
        &b"GET / HTTP/1.1\r\nHost: [\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: ]:\r\n\r\n",
        b"GET http://[/ HTTP/1.1\r\nHost: app.test\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"BREW /\xff HTTP/1.1\r\n\r\n",
    ] {
        let mut s = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
        s.write_all(head).await.unwrap();
        let mut buf = vec![0; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap_or(Ok(0))
            .unwrap_or(0);
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        let shown = String::from_utf8_lossy(head);
        assert!(
            n == 0 || text.starts_with("HTTP/1.1 4"),
            "{shown:?} -> {text}"
        );
    }
    // Transfer-Encoding with Content-Length: refused, as RFC 9112 §6.3 allows (smuggling
    // needs it); `edge.rs` has the whole table.
    let mut s = tokio::net::TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(
        b"POST /echo HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 50\r\n\r\n2\r\nab\r\n0\r\n\r\n",
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");

    // Still serving.
    let r = send(
        &client(),
        Request::get(proxy.url("/"))
            .header("host", "app.test")
            .body(Full::new(Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn block_pages_are_sent_with_the_type_they_were_made_with() {
    let up = upstream();
    let dir = temp_dir("pages");
    let rules = rules_file(&dir);
    let proxy = Proxy::start(&dir, &config(&[up.addr.to_string()], &rules, "", ""));
    let c = client();
    let attack = proxy.url("/?id=1%20UNION%20SELECT%20password");
    let with_accept = |accept: &'static str| {
        Request::get(attack.as_str())
            .header("accept", accept)
            .body(Full::new(Bytes::new()))
            .unwrap()
    };

    // A client that prefers JSON gets JSON, labelled as JSON.
    let json = send(&c, with_accept("application/json")).await;
    assert_eq!(json.status, 403);
    assert_eq!(json.headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&json.body).expect("JSON block page");
    assert_eq!(v["status"], 403);
    assert_eq!(
        v["request_id"].as_str(),
        json.headers["x-request-id"].to_str().ok()
    );
    assert_eq!(json.headers["cache-control"], "no-store");

    // A browser gets HTML, labelled as HTML.
    let html = send(&c, with_accept("text/html,application/xhtml+xml")).await;
    assert_eq!(html.status, 403);
    assert_eq!(html.headers["content-type"], "text/html; charset=utf-8");
    assert!(html.body.starts_with("<!DOCTYPE html>"), "{}", html.body);

    // So does a client that says nothing.
    let none = get(&c, &attack).await;
    assert_eq!(none.headers["content-type"], "text/html; charset=utf-8");
    assert!(serde_json::from_str::<serde_json::Value>(&none.body).is_err());
}

/// With the engine off there is no transaction: the request still gets a request id, the
/// forwarding headers and the access-log line; an attack passes.
#[tokio::test]
async fn waf_off_still_ids_forwards_and_logs() {
    let up = upstream();
    let dir = temp_dir("waf-off");
    let rules = rules_file(&dir);
    let cfg = config(&[up.addr.to_string()], &rules, "", "")
        .replace("mode = \"block\"", "mode = \"off\"")
        .replace("access = \"off\"", "access = \"access.log\"");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    let r = get(&c, &proxy.url("/echo?id=1%20UNION%20SELECT%20password")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.headers["x-request-id"].to_str().unwrap().to_string();
    assert!(
        r.body.contains(&format!("x-request-id: {id}\n")),
        "{}",
        r.body
    );
    assert!(
        r.body.contains("x-forwarded-for: 127.0.0.1\n"),
        "{}",
        r.body
    );
    let r2 = get(&c, &proxy.url("/echo")).await;
    assert_ne!(r2.headers["x-request-id"], r.headers["x-request-id"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        if let Some(line) = log.lines().next() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["request_id"], id.as_str());
            assert_eq!(v["method"], "GET");
            assert_eq!(v["action"], "pass");
            assert!(v["time"].as_str().unwrap().ends_with('Z'), "{v}");
            assert!(
                v["upstream"].as_str().unwrap().starts_with("127.0.0.1:"),
                "{v}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no access log line");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
