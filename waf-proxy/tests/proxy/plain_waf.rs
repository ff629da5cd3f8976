//! The plain HTTP/1 path (`src/proxy/h1`) for a host with the WAF on, tested with raw bytes
//! against the real binary: a benign request passes; an attack in the query, in a header
//! and in a body (`Content-Length` and chunked) gets the block page in the client's format
//! and its log line; pipelined requests with blocked ones in the middle are all answered on
//! the one connection; bodies over the limit get 413; phase 4 replaces a leaking response
//! (each upstream framing). That these were served by the plain path, not handed over to
//! hyper, shows in the answers: the plain path sends the upstream's field names in the
//! case they came in, hyper lower-cases them.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::plain::{next_request, parse_all, talk_raw, Resp};
use crate::util::*;

/// Request rules in phases 1 and 2, a response rule in phase 4.
const RULES: &str = r#"SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/html
SecRule ARGS "@rx (?i)union\s+select" "id:4001,phase:2,deny,status:403,msg:'SQLi'"
SecRule REQUEST_HEADERS:User-Agent "@contains evilbot" "id:4002,phase:1,deny,status:403,msg:'bad bot'"
SecRule RESPONSE_BODY "@contains SQL syntax" "id:4003,phase:4,deny,status:403,msg:'leak'"
"#;

/// One host with the WAF blocking, a request body limit of 1,000 bytes and a response
/// buffer of 64 KB, in front of `upstream` (access log on).
fn start(upstream: SocketAddr) -> (Proxy, std::path::PathBuf) {
    let dir = temp_dir("plain-waf");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\
         [log]\naccess = \"access.log\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{upstream}\"]\nconnect_timeout_ms = 500\nread_timeout_ms = 2000\nfail_timeout_ms = 5000\n\
         [[host]]\nnames = [\"waf.test\"]\nupstream = \"app\"\nwaf = {{ mode = \"block\", rules = [{:?}] }}\n\
         limits = {{ max_request_body = 1000, max_response_buffer = 65536 }}\n",
        rules.to_str().unwrap()
    );
    (Proxy::start(&dir, &cfg), dir)
}

/// A scripted upstream on raw TCP (keep-alive, bodies by `Content-Length`) whose answers
/// carry mixed-case field names: `/leak` (and `/leak-chunked`, `/leak-close`, the same page
/// chunked or until close) a SQL error page, `/big` a 100 KB page that leaks at its end,
/// anything else `ok PATH LEN`.
fn mixed_case_upstream() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                while let Some((head, len)) = next_request(&mut s, &mut buf) {
                    let target = head.split(' ').nth(1).unwrap_or("").to_string();
                    let path = target.split('?').next().unwrap_or("").to_string();
                    let answer = match path.as_str() {
                        "/leak" => format!(
                            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{LEAK_PAGE}",
                            LEAK_PAGE.len()
                        ),
                        "/leak-chunked" => {
                            let (a, b) = LEAK_PAGE.split_at(20);
                            format!(
                                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                                a.len(),
                                b.len()
                            )
                        }
                        "/leak-close" => format!(
                            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n\r\n{LEAK_PAGE}"
                        ),
                        "/big" => {
                            let page = format!("{}{LEAK_PAGE}", "<p>padding</p>".repeat(7000));
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{page}",
                                page.len()
                            )
                        }
                        p => {
                            let body = format!("ok {p} {len}");
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Mixed-Case: 1\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            )
                        }
                    };
                    if s.write_all(answer.as_bytes()).is_err() || path == "/leak-close" {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The access log's lines, once it has `n`.
async fn log_lines(dir: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(Instant::now() < deadline, "access log: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many times the raw answer has the upstream's own mixed-case field (sent on by the
/// plain path as it came; hyper would write `x-mixed-case`).
fn mixed_case(raw: &[u8]) -> usize {
    raw.windows(14).filter(|w| w == b"X-Mixed-Case: ").count()
}

fn statuses(r: &[Resp]) -> Vec<u16> {
    r.iter().map(|r| r.status).collect()
}

const ATTACKS: &[u8] = b"GET /a?q=fine HTTP/1.1\r\nHost: waf.test\r\n\r\n\
GET /b?q=1%20union%20select%202 HTTP/1.1\r\nHost: waf.test\r\n\r\n\
GET /c HTTP/1.1\r\nHost: waf.test\r\nUser-Agent: evilbot/1.0\r\nAccept: application/json\r\n\r\n\
POST /d HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 18\r\n\r\nq=1 union select 2\
POST /e HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nq=1 \r\ne\r\nunion select 2\r\n0\r\n\r\n\
POST /f HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nq=fine\r\n0\r\n\r\n\
GET /g HTTP/1.1\r\nHost: waf.test\r\n\r\n";

#[tokio::test]
async fn attacks_in_the_query_a_header_and_bodies_are_blocked_between_pipelined_requests() {
    let (proxy, dir) = start(mixed_case_upstream());
    let mut rounds = 0;
    for step in [1, 7, 64, 4096] {
        let (raw, closed) = talk_raw(proxy.http, ATTACKS, step, 7, &[]).await;
        let r = parse_all(&raw, &[]);
        assert!(!closed, "step {step}: closed");
        assert_eq!(
            statuses(&r),
            vec![200, 403, 403, 403, 403, 200, 200],
            "step {step}: {r:?}"
        );
        assert_eq!(r[0].text(), "ok /a 0");
        assert_eq!(r[5].text(), "ok /f 6", "the chunked body went on decoded");
        assert_eq!(r[6].text(), "ok /g 0");
        // Every answer came from the plain path: the three passed ones carry the
        // upstream's field as it wrote it.
        assert_eq!(mixed_case(&raw), 3, "step {step}");
        // The block pages: HTML, or JSON when the client asked for it; the request id
        // in the page and in the header.
        for (i, r) in r.iter().enumerate().filter(|(_, r)| r.status == 403) {
            let id = r.field("x-request-id").unwrap();
            assert!(r.text().contains(id), "step {step}, {i}: {}", r.text());
            let ctype = r.field("content-type").unwrap();
            if i == 2 {
                assert_eq!(ctype, "application/json", "step {step}");
                let page: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                assert_eq!(page["request_id"], id);
            } else {
                assert_eq!(ctype, "text/html; charset=utf-8", "step {step}, {i}");
            }
            assert_eq!(r.field("cache-control"), Some("no-store"));
        }
        rounds += 1;
    }
    // The log lines of the last round: the action, the rule and the path of each.
    let lines = log_lines(&dir, 7 * rounds).await;
    let last: Vec<(String, u64, String, Vec<u64>)> = lines[lines.len() - 7..]
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap().to_string(),
                l["status"].as_u64().unwrap(),
                l["action"].as_str().unwrap().to_string(),
                l["rule_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect(),
            )
        })
        .collect();
    let want =
        |p: &str, s: u64, a: &str, ids: &[u64]| (p.to_string(), s, a.to_string(), ids.to_vec());
    assert_eq!(
        last,
        vec![
            want("/a", 200, "pass", &[]),
            want("/b", 403, "block", &[4001]),
            want("/c", 403, "block", &[4002]),
            want("/d", 403, "block", &[4001]),
            want("/e", 403, "block", &[4001]),
            want("/f", 200, "pass", &[]),
            want("/g", 200, "pass", &[]),
        ]
    );
    for l in &lines[lines.len() - 7..] {
        assert_eq!(l["host"], "waf.test");
        assert_eq!(l["client_ip"], "127.0.0.1");
        assert_eq!(l["upstream"].is_null(), l["action"] == "block", "{l}");
    }
    assert_eq!(lines[lines.len() - 4]["bytes_in"], 18);
}

#[tokio::test]
async fn a_blocked_request_whose_body_is_not_all_here_ends_the_connection() {
    let (proxy, _dir) = start(mixed_case_upstream());
    // Phase 1 blocks before the body (still to come) is read: the answer, then the end
    // (where the next request would start is in doubt).
    let mut s = TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(b"POST /x HTTP/1.1\r\nHost: waf.test\r\nUser-Agent: evilbot\r\nContent-Length: 10\r\n\r\nhello")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got))
        .await
        .expect("the connection did not end")
        .unwrap();
    assert_eq!(statuses(&parse_all(&got, &[])), vec![403]);
    // Its body all here: the connection goes on.
    let raw = b"POST /x HTTP/1.1\r\nHost: waf.test\r\nUser-Agent: evilbot\r\nContent-Length: 5\r\n\r\nhello\
GET /y HTTP/1.1\r\nHost: waf.test\r\n\r\n";
    let (r, closed) = crate::plain::talk(proxy.http, raw, 4096, 2, &[]).await;
    assert!(!closed);
    assert_eq!(statuses(&r), vec![403, 200]);
    assert_eq!(r[1].text(), "ok /y 0");
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_and_end_the_connection() {
    let (proxy, dir) = start(mixed_case_upstream());
    // Declared over the limit: answered at once, before any of the body is read.
    let mut s = TcpStream::connect(proxy.http).await.unwrap();
    s.write_all(b"POST /big HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got))
        .await
        .expect("the connection did not end")
        .unwrap();
    let r = parse_all(&got, &[]);
    assert_eq!(statuses(&r), vec![413]);
    assert_eq!(r[0].field("connection"), Some("close"));
    // Chunked, found over the limit while it is read.
    let mut raw = b"POST /big HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        raw.extend_from_slice(b"190\r\n");
        raw.extend_from_slice(&[b'q'; 0x190]);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\nGET /after HTTP/1.1\r\nHost: waf.test\r\n\r\n");
    let (r, closed) = crate::plain::talk(proxy.http, &raw, 4096, 2, &[]).await;
    assert_eq!(statuses(&r), vec![413]);
    assert!(closed);
    // At the limit: passes.
    let body = "q=".to_string() + &"a".repeat(998);
    let raw = format!(
        "POST /at HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (r, _) = crate::plain::talk(proxy.http, raw.as_bytes(), 4096, 1, &[]).await;
    assert_eq!((r[0].status, r[0].text()), (200, "ok /at 1000".to_string()));
    let lines = log_lines(&dir, 3).await;
    let actions: Vec<&str> = lines
        .iter()
        .map(|l| l["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, vec!["limit", "limit", "pass"]);
}

#[tokio::test]
async fn phase_4_replaces_a_leaking_response_in_every_upstream_framing() {
    let (proxy, dir) = start(mixed_case_upstream());
    let raw = b"GET /leak HTTP/1.1\r\nHost: waf.test\r\n\r\n\
GET /ok1 HTTP/1.1\r\nHost: waf.test\r\n\r\n\
GET /leak-chunked HTTP/1.1\r\nHost: waf.test\r\nAccept: application/json\r\n\r\n\
GET /ok2 HTTP/1.1\r\nHost: waf.test\r\n\r\n\
GET /leak-close HTTP/1.1\r\nHost: waf.test\r\n\r\n\
GET /ok3 HTTP/1.1\r\nHost: waf.test\r\n\r\n";
    let (got, closed) = talk_raw(proxy.http, raw, 4096, 6, &[]).await;
    let r = parse_all(&got, &[]);
    assert!(!closed);
    assert_eq!(statuses(&r), vec![403, 200, 403, 200, 403, 200], "{r:?}");
    for i in [0, 2, 4] {
        assert!(
            !r[i].text().contains("SQL syntax"),
            "leaked: {}",
            r[i].text()
        );
    }
    assert_eq!(r[2].field("content-type"), Some("application/json"));
    assert_eq!(mixed_case(&got), 3);
    // Longer than the response buffer: sent as it comes, phase 4 logs it (detect).
    let (r, _) = crate::plain::talk(
        proxy.http,
        b"GET /big HTTP/1.1\r\nHost: waf.test\r\n\r\n",
        4096,
        1,
        &[],
    )
    .await;
    assert_eq!(r[0].status, 200);
    assert!(r[0].text().ends_with(LEAK_PAGE));
    let lines = log_lines(&dir, 7).await;
    let got: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["path"].as_str().unwrap(), l["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("/leak", "block"),
            ("/ok1", "pass"),
            ("/leak-chunked", "block"),
            ("/ok2", "pass"),
            ("/leak-close", "block"),
            ("/ok3", "pass"),
            ("/big", "detect"),
        ]
    );
    assert_eq!(lines[0]["rule_ids"], serde_json::json!([4003]));
}

#[tokio::test]
async fn expect_100_continue_comes_before_a_body_the_waf_reads() {
    let (proxy, _dir) = start(mixed_case_upstream());
    let mut s = TcpStream::connect(proxy.http).await.unwrap();
    for (body, status) in [("q=fine", 200), ("q=1 union select 2", 403)] {
        let head = format!(
            "POST /form HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("no 100 Continue")
            .unwrap();
        assert_eq!(&buf[..n], b"HTTP/1.1 100 Continue\r\n\r\n");
        s.write_all(body.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        while parse_all(&got, &[]).is_empty() {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(parse_all(&got, &[])[0].status, status, "{body}");
    }
    // A blocking client sees the same on a std socket.
    let mut s = std::net::TcpStream::connect(proxy.http).unwrap();
    s.write_all(b"GET /?q=union+select+1 HTTP/1.1\r\nHost: waf.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    let r = parse_all(&got, &[]);
    assert_eq!(
        (r[0].status, r[0].field("connection")),
        (403, Some("close"))
    );
}
