//! HTTP/1 edge cases, sent as raw bytes over TCP to the real binary: what nginx serves is
//! served (and inspected), framing in doubt is refused and the connection closed, and every
//! refusal leaves a JSON log line with its reason and a metric.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::util::*;

/// The rules: block `<script>` in the raw request target (the upstream only ever sees it
/// percent-encoded) and in ARGS.
const EDGE_RULES: &str = r#"SecRuleEngine On
SecRule REQUEST_URI "@contains <script>" "id:2001,phase:1,deny,status:403,msg:'raw target'"
SecRule ARGS "@contains <script>" "id:2002,phase:1,deny,status:403,msg:'args'"
"#;

fn start() -> (Upstream, Proxy, std::path::PathBuf) {
    let up = upstream();
    let dir = temp_dir("edge");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, EDGE_RULES).unwrap();
    let cfg = config(
        &[up.addr.to_string()],
        &rules,
        "max_request_head = 4096\nmax_request_line = 1024\nmax_headers = 20",
        "",
    )
    .replace("access = \"off\"", "access = \"access.log\"")
    .replace("[log]", "[admin]\nlisten = \"127.0.0.1:0\"\n[log]");
    let proxy = Proxy::start(&dir, &cfg);
    (up, proxy, dir)
}

/// Sends `raw` on a new connection and reads until the proxy closes it (or 5 s pass).
/// Returns everything read, and whether the connection was closed.
async fn exchange(proxy: &Proxy, raw: &[u8]) -> (String, bool) {
    let mut s = TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    let closed = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&out).into_owned(), closed)
}

fn statuses(resp: &str) -> Vec<u16> {
    resp.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| resp.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

#[tokio::test]
async fn request_target_bytes_nginx_accepts_are_served_and_inspected() {
    let (_up, proxy, _dir) = start();
    let mut bytes: Vec<u8> = b"\"<>`{}|\\^".to_vec();
    bytes.extend([0x80, 0xe9, 0xff]);
    for b in bytes {
        for target in [
            [&b"/p"[..], &[b], b"?q=1"].concat(),
            [&b"/p?q="[..], &[b], b"&r=2"].concat(),
        ] {
            let mut req = b"GET ".to_vec();
            req.extend_from_slice(&target);
            req.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
            let (resp, _) = exchange(&proxy, &req).await;
            assert_eq!(
                statuses(&resp),
                vec![200],
                "{:?}: {resp}",
                String::from_utf8_lossy(&target)
            );
            assert!(resp.contains("ok GET /p"), "{resp}");
        }
    }
    // A Latin-1 query (not UTF-8) reaches the upstream percent-encoded, the same URI.
    let (resp, _) = exchange(
        &proxy,
        b"GET /caf\xe9/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(resp.contains("ok GET /caf%E9/x 0"), "{resp}");

    // The WAF sees the target as sent: raw `<script>` in the path and in the query.
    for raw in [
        &b"GET /<script>alert(1)</script> HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"[..],
        b"GET /?q=<script>alert(1)</script> HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        b"GET /?q=%3Cscript%3E HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    ] {
        let (resp, _) = exchange(&proxy, raw).await;
        assert_eq!(
            statuses(&resp)[0],
            403,
            "{}: {resp}",
            String::from_utf8_lossy(raw)
        );
    }
}

#[tokio::test]
async fn framing_in_doubt_is_refused_and_the_connection_closed() {
    let (_up, proxy, dir) = start();
    let big_header = format!("X-Big: {}\r\n", "b".repeat(5000));
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(2000));
    let many: String = (0..25).map(|i| format!("X-{i}: 1\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "transfer_encoding_and_content_length",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n".to_vec(),
            400,
        ),
        (
            "duplicate_content_length",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc".to_vec(),
            400,
        ),
        (
            "bad_content_length",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3x\r\n\r\nabc".to_vec(),
            400,
        ),
        (
            "unsupported_transfer_encoding",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
            501,
        ),
        (
            "transfer_encoding_in_http10",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            400,
        ),
        (
            "obs_fold",
            b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bad_header_name",
            b"GET / HTTP/1.1\r\nHost: a\r\nX(A): 1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bad_header_value",
            b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\x002\r\n\r\n".to_vec(),
            400,
        ),
        ("missing_host", b"GET / HTTP/1.1\r\n\r\n".to_vec(), 400),
        (
            "duplicate_host",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec(),
            400,
        ),
        (
            "unsupported_version",
            b"GET / HTTP/1.2\r\nHost: a\r\n\r\n".to_vec(),
            505,
        ),
        (
            "bad_request_target",
            b"GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n".to_vec(),
            400,
        ),
        (
            "head_too_large",
            format!("GET / HTTP/1.1\r\nHost: a\r\n{big_header}\r\n").into_bytes(),
            431,
        ),
        (
            "too_many_headers",
            format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n").into_bytes(),
            431,
        ),
        ("request_line_too_long", long_line.into_bytes(), 414),
    ];
    for (reason, raw, status) in &cases {
        let (resp, closed) = exchange(&proxy, raw).await;
        assert_eq!(statuses(&resp), vec![*status], "{reason}: {resp}");
        assert!(closed, "{reason}: connection left open");
        assert!(
            resp.to_ascii_lowercase().contains("connection: close"),
            "{reason}: {resp}"
        );
        assert!(resp.contains("x-request-id: "), "{reason}: {resp}");
    }
    // The smuggled request never reached anyone.
    let (resp, _) = exchange(&proxy, &cases[0].1).await;
    assert!(!resp.contains("smuggled"), "{resp}");

    // A JSON access-log line per refusal, with its reason; a metric per reason.
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines: Vec<serde_json::Value> = loop {
        let text = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() > cases.len() {
            break lines;
        }
        assert!(Instant::now() < deadline, "access log: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let c = client();
    let metrics = get(&c, &format!("http://{}/metrics", proxy.admin.unwrap()))
        .await
        .body;
    for (reason, _, status) in &cases {
        let line = lines
            .iter()
            .find(|l| l["reason"] == *reason)
            .unwrap_or_else(|| panic!("no log line for {reason}: {lines:?}"));
        assert_eq!(line["action"], "refused");
        assert_eq!(line["status"], *status);
        assert_eq!(line["client_ip"], "127.0.0.1");
        let n = if *reason == "transfer_encoding_and_content_length" {
            2
        } else {
            1
        };
        assert!(
            metrics.contains(&format!(
                "waf_proxy_refused_total{{reason=\"{reason}\"}} {n}\n"
            )),
            "{reason}: {metrics}"
        );
    }
}

#[tokio::test]
async fn pipelined_and_chunked_requests_on_one_connection_are_each_served() {
    let (_up, proxy, _dir) = start();
    let raw = b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello\
GET /b?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n\
POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;e=1\r\nde\r\n0\r\n\r\n\
GET /d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    let (resp, closed) = exchange(&proxy, raw).await;
    assert_eq!(statuses(&resp), vec![200, 200, 200, 200], "{resp}");
    for body in ["ok POST /a 5", "ok GET /b 0", "ok POST /c 5", "ok GET /d 0"] {
        assert!(resp.contains(body), "{body}: {resp}");
    }
    assert!(closed);
    // Bare LF line ends, as nginx accepts them.
    let (resp, _) = exchange(&proxy, b"GET /lf HTTP/1.1\nHost: a\nConnection: close\n\n").await;
    assert!(resp.contains("ok GET /lf 0"), "{resp}");
}
