//! The plain HTTP/1 path (`src/proxy/h1`), tested with raw bytes against the real binary:
//! keep-alive and pipelined requests, `Content-Length` and chunked bodies (trailers
//! included) in every split, `100-continue`, the upstream connection reused, the
//! upstream's framings (chunked, until close, informational heads, `HEAD`), an upstream
//! that closes early, a host with the WAF on in the middle of a plain connection (served on
//! this path too since the eighth session; `plain_waf.rs` has its own tests), and the
//! hand-over to the hyper path mid-connection (a head the edge refuses).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::util::*;

/// Blocks `union select` in ARGS (the body too) on the host the WAF inspects.
const RULES: &str = r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx (?i)union\s+select" "id:3001,phase:2,deny,status:403,msg:'SQLi'"
"#;

/// Two hosts in front of `servers`: `off.test` with the WAF off (the plain path), every
/// other name with the WAF blocking.
fn start_with(servers: &[String], host_extra: &str) -> (Proxy, std::path::PathBuf) {
    let dir = temp_dir("plain");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let servers: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\
         [log]\naccess = \"access.log\"\n\
         [[upstream]]\nname = \"app\"\nservers = [{}]\nconnect_timeout_ms = 500\nread_timeout_ms = 1000\nfail_timeout_ms = 5000\n\
         [[host]]\nnames = [\"off.test\"]\nupstream = \"app\"\nwaf = {{ mode = \"off\" }}\nlimits = {{ max_request_body = 100000 }}\n{host_extra}\n\
         [[host]]\nnames = [\"*\"]\nupstream = \"app\"\nwaf = {{ mode = \"block\", rules = [{:?}] }}\n",
        servers.join(", "),
        rules.to_str().unwrap()
    );
    let proxy = Proxy::start(&dir, &cfg);
    (proxy, dir)
}

/// A response read off a raw connection.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    /// Field names lower-cased.
    pub(crate) fields: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Resp {
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Parses every whole response in `raw` (`heads`: which requests were `HEAD`, by index).
pub(crate) fn parse_all(raw: &[u8], heads: &[usize]) -> Vec<Resp> {
    let mut out = Vec::new();
    let mut rest = raw;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(n)) = r.parse(rest) else {
            return out;
        };
        let status = r.code.unwrap();
        let fields: Vec<(String, String)> = r
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        rest = &rest[n..];
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let no_body = (100..200).contains(&status)
            || status == 204
            || status == 304
            || heads.contains(&out.len());
        let body = if no_body {
            Vec::new()
        } else if get("transfer-encoding").as_deref() == Some("chunked") {
            let mut body = Vec::new();
            loop {
                let Some(lf) = rest.iter().position(|&b| b == b'\n') else {
                    return out;
                };
                let size =
                    usize::from_str_radix(String::from_utf8_lossy(&rest[..lf]).trim_end(), 16)
                        .unwrap();
                rest = &rest[lf + 1..];
                if size == 0 {
                    assert!(rest.starts_with(b"\r\n"), "trailers are not sent on");
                    rest = &rest[2..];
                    break;
                }
                if rest.len() < size + 2 {
                    return out;
                }
                body.extend_from_slice(&rest[..size]);
                assert_eq!(&rest[size..size + 2], b"\r\n");
                rest = &rest[size + 2..];
            }
            body
        } else if let Some(n) = get("content-length") {
            let n: usize = n.parse().unwrap();
            if rest.len() < n {
                return out;
            }
            let b = rest[..n].to_vec();
            rest = &rest[n..];
            b
        } else {
            panic!("a response without framing: {fields:?}");
        };
        if (100..200).contains(&status) {
            // Informational heads are not counted as responses.
            assert_eq!(status, 100, "only 100 Continue is sent on");
            continue;
        }
        out.push(Resp {
            status,
            fields,
            body,
        });
    }
}

/// Writes `raw` in pieces of `step` bytes and reads until `want` responses are in, or the
/// proxy closes, or 5 s pass. Returns the responses and whether the connection closed.
pub(crate) async fn talk(
    addr: SocketAddr,
    raw: &[u8],
    step: usize,
    want: usize,
    heads: &[usize],
) -> (Vec<Resp>, bool) {
    let (got, closed) = talk_raw(addr, raw, step, want, heads).await;
    (parse_all(&got, heads), closed)
}

/// [`talk`], returning the bytes read as they came.
pub(crate) async fn talk_raw(
    addr: SocketAddr,
    raw: &[u8],
    step: usize,
    want: usize,
    heads: &[usize],
) -> (Vec<u8>, bool) {
    let s = TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let raw = raw.to_vec();
    let writer = tokio::spawn(async move {
        for piece in raw.chunks(step.max(1)) {
            if wr.write_all(piece).await.is_err() {
                break;
            }
            if step < 64 {
                tokio::task::yield_now().await;
            }
        }
        wr
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    let deadline = Instant::now() + Duration::from_secs(5);
    let closed = loop {
        if parse_all(&got, heads).len() >= want {
            break false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rd.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    let _ = writer.await;
    (got, closed)
}

const PIPELINE: &[u8] = b"GET /a?x=1 HTTP/1.1\r\nHost: off.test\r\n\r\n\
POST /b HTTP/1.1\r\nHost: off.test\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nHost: Off.Test:80\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n5\r\nde\r\nf\r\n0\r\nX-Trailer: 1\r\n\r\n\
GET /d HTTP/1.1\r\nHost: off.test\r\n\r\n";

fn pipeline_answers(r: &[Resp]) {
    let bodies: Vec<(u16, String)> = r.iter().map(|r| (r.status, r.text())).collect();
    assert_eq!(
        bodies,
        vec![
            (200, "ok GET /a 0".to_string()),
            (200, "ok POST /b 5".to_string()),
            (200, "ok POST /c 8".to_string()),
            (200, "ok GET /d 0".to_string()),
        ]
    );
    for r in r {
        assert!(r.field("x-request-id").is_some(), "{r:?}");
    }
}

#[tokio::test]
async fn pipelined_requests_in_every_split_are_answered_in_order_on_one_upstream_connection() {
    let up = upstream();
    let (proxy, _dir) = start_with(&[up.addr.to_string()], "");
    for step in 1..=PIPELINE.len() {
        let (r, closed) = talk(proxy.http, PIPELINE, step, 4, &[]).await;
        assert!(!closed, "step {step}: closed");
        assert_eq!(r.len(), 4, "step {step}: {r:?}");
        pipeline_answers(&r);
    }
    // Every request of every connection went over the same pooled upstream connection
    // (one worker; at most a second when a request raced a put-back).
    let n = up.connections.load(Ordering::SeqCst);
    assert!(
        n <= 2,
        "{n} upstream connections for {} requests",
        4 * PIPELINE.len()
    );
}

#[tokio::test]
async fn a_keep_alive_connection_reuses_the_upstream_and_closes_when_asked() {
    let up = upstream();
    let (proxy, dir) = start_with(&[up.addr.to_string()], "");
    let mut s = TcpStream::connect(proxy.http).await.unwrap();
    for i in 0..20 {
        let req = format!("GET /k{i} HTTP/1.1\r\nHost: off.test\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while parse_all(&got, &[]).is_empty() {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed after {i} requests");
            got.extend_from_slice(&buf[..n]);
        }
        let r = parse_all(&got, &[]);
        assert_eq!(r[0].text(), format!("ok GET /k{i} 0"));
        assert_eq!(r[0].field("connection"), None);
    }
    assert_eq!(up.connections.load(Ordering::SeqCst), 1);
    // `Connection: close`: answered with it, then closed.
    s.write_all(b"GET /last HTTP/1.1\r\nHost: off.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    let r = parse_all(&got, &[]);
    assert_eq!((r.len(), r[0].field("connection")), (1, Some("close")));
    // Each request has its access-log line, with the path as sent.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        if log.lines().count() >= 21 {
            let last: serde_json::Value =
                serde_json::from_str(log.lines().nth(20).unwrap()).unwrap();
            assert_eq!(last["path"], "/last");
            assert_eq!(last["host"], "off.test");
            assert_eq!(last["status"], 200);
            assert_eq!(last["action"], "pass");
            break;
        }
        assert!(Instant::now() < deadline, "access log: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn hop_by_hop_fields_are_dropped_and_forwarding_fields_are_ours() {
    let up = upstream();
    let (proxy, _dir) = start_with(&[up.addr.to_string()], "");
    let req = b"GET /echo HTTP/1.1\r\nHost: off.test\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nX-Request-Id: mine\r\nX-Kept: yes\r\n\r\n";
    let (r, _) = talk(proxy.http, req, 4096, 1, &[]).await;
    let echo = r[0].text();
    for gone in [
        "x-secret",
        "keep-alive",
        "te:",
        "6.6.6.6",
        "mine",
        "connection",
    ] {
        assert!(!echo.contains(gone), "{gone} went upstream: {echo}");
    }
    for kept in [
        "x-kept: yes\n",
        "x-forwarded-for: 127.0.0.1\n",
        "x-forwarded-proto: http\n",
        "x-forwarded-host: off.test\n",
        "host: off.test\n",
    ] {
        assert!(echo.contains(kept), "{kept} missing upstream: {echo}");
    }
    let id = r[0].field("x-request-id").unwrap();
    assert!(echo.contains(&format!("x-request-id: {id}\n")), "{echo}");
}

#[tokio::test]
async fn expect_100_continue_is_answered_before_the_body() {
    let up = upstream();
    let (proxy, _dir) = start_with(&[up.addr.to_string()], "");
    let mut s = TcpStream::connect(proxy.http).await.unwrap();
    for path in ["/e1", "/e2"] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: off.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("no 100 Continue")
            .unwrap();
        assert_eq!(&buf[..n], b"HTTP/1.1 100 Continue\r\n\r\n");
        s.write_all(b"hello").await.unwrap();
        let mut got = Vec::new();
        while parse_all(&got, &[]).is_empty() {
            let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(parse_all(&got, &[])[0].text(), format!("ok POST {path} 5"));
    }
}

#[tokio::test]
async fn the_waf_host_inspects_and_blocks_in_the_middle_of_a_plain_connection() {
    let up = upstream();
    let (proxy, _dir) = start_with(&[up.addr.to_string()], "");
    // Plain, then a request to the WAF's host whose body it blocks, then plain again (all
    // on the plain path since the WAF's hosts are served there too).
    let raw = b"GET /one HTTP/1.1\r\nHost: off.test\r\n\r\n\
POST /form HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 19\r\n\r\nq=1 union select 2&\
GET /two?q=union%20select HTTP/1.1\r\nHost: off.test\r\n\r\n\
POST /form HTTP/1.1\r\nHost: waf.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\n\r\nq=fine";
    for step in [1, 7, 64, 4096] {
        let (r, _) = talk(proxy.http, raw, step, 4, &[]).await;
        let got: Vec<(u16, String)> = r
            .iter()
            .map(|r| (r.status, r.text().chars().take(14).collect()))
            .collect();
        assert_eq!(got.len(), 4, "step {step}: {got:?}");
        assert_eq!(got[0], (200, "ok GET /one 0".to_string()), "step {step}");
        assert_eq!(got[1].0, 403, "step {step}: {got:?}");
        assert_eq!(got[2], (200, "ok GET /two 0".to_string()), "step {step}");
        assert_eq!(got[3], (200, "ok POST /form ".to_string()), "step {step}");
    }
}

#[tokio::test]
async fn heads_the_edge_refuses_keep_their_answers_after_plain_requests() {
    let up = upstream();
    let (proxy, _dir) = start_with(&[up.addr.to_string()], "");
    let ok: &[u8] = b"GET /a HTTP/1.1\r\nHost: off.test\r\n\r\n";
    let cases: &[(&[u8], u16)] = &[
        (b"POST / HTTP/1.1\r\nHost: off.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: off.test\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: off.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400),
        (b"GET / HTTP/1.1\r\nHost: off.test\r\nX: 1\r\n y\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: off.test\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
    ];
    for (bad, status) in cases {
        let raw = [ok, bad].concat();
        let (r, closed) = talk(proxy.http, &raw, 4096, 3, &[]).await;
        let got: Vec<u16> = r.iter().map(|r| r.status).collect();
        assert_eq!(got, vec![200, *status], "{}", String::from_utf8_lossy(bad));
        assert!(closed, "{}", String::from_utf8_lossy(bad));
    }
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_gets_413_and_the_connection_ends() {
    let up = upstream();
    let (proxy, _dir) = start_with(&[up.addr.to_string()], "");
    let mut raw =
        b"POST /big HTTP/1.1\r\nHost: off.test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..30 {
        raw.extend_from_slice(b"1000\r\n");
        raw.extend_from_slice(&[b'y'; 0x1000]);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    // (Two wanted: read until the proxy closes.)
    let (r, closed) = talk(proxy.http, &raw, 8192, 2, &[]).await;
    assert_eq!(r[0].status, 413);
    assert!(closed);
    // A broken chunk: 400.
    let raw = b"POST /bad HTTP/1.1\r\nHost: off.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY\r\n0\r\n\r\n";
    let (r, closed) = talk(proxy.http, raw, 4096, 2, &[]).await;
    assert_eq!(r[0].status, 400);
    assert!(closed);
}

/// A scripted upstream on raw TCP: reads each request head (and its `Content-Length`
/// body) and answers by path; counts its connections.
/// Reads the next request (its head and a `Content-Length` body) from `s`, with `buf`
/// holding what was read beyond the last one; the head lower-cased and the body's length,
/// or `None` once the client closes.
pub(crate) fn next_request(
    s: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, usize)> {
    let mut b = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&b[..k]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < end + len {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&b[..k]),
        }
    }
    buf.drain(..end + len);
    Some((head, len))
}

fn raw_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let n = conns.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            n.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                while let Some((head, _)) = next_request(&mut s, &mut buf) {
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let answer: &[u8] = match path.as_str() {
                        "/chunked" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: s=1\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
                        "/until-close" => b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
                        "/early" => b"",
                        "/half" => b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
                        "/hints" => b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                        "/head" => b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
                        "/close" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        "/no-content" => b"HTTP/1.1 204 No Content\r\n\r\n",
                        _ => b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Request-Id: upstream\r\n\r\nraw",
                    };
                    if s.write_all(answer).is_err() {
                        return;
                    }
                    if matches!(
                        path.as_str(),
                        "/until-close" | "/early" | "/half" | "/close"
                    ) {
                        return;
                    }
                }
            });
        }
    });
    (addr, conns)
}

#[tokio::test]
async fn upstream_framings_are_sent_on_correctly_and_early_closes_get_502() {
    let (addr, conns) = raw_upstream();
    let (proxy, _dir) = start_with(&[addr.to_string()], "");
    let one = |path: &str, method: &str| {
        format!("{method} {path} HTTP/1.1\r\nHost: off.test\r\n\r\n").into_bytes()
    };
    // Chunked: de-chunked and chunked again, trailers dropped, the cookie kept.
    let (r, _) = talk(proxy.http, &one("/chunked", "GET"), 4096, 1, &[]).await;
    assert_eq!((r[0].status, r[0].text().as_str()), (200, "hello world"));
    assert_eq!(r[0].field("set-cookie"), Some("s=1"));
    assert_eq!(r[0].field("x-t"), None);
    // Until close: chunked to the client, whose connection stays open for the next.
    let raw = [one("/until-close", "GET"), one("/x", "GET")].concat();
    let (r, closed) = talk(proxy.http, &raw, 4096, 2, &[]).await;
    assert!(!closed);
    assert_eq!(r[0].text(), "until close");
    assert_eq!(r[0].field("transfer-encoding"), Some("chunked"));
    assert_eq!(r[1].text(), "raw");
    // The upstream's request id is replaced by ours.
    assert_ne!(r[1].field("x-request-id"), Some("upstream"));
    // Informational heads are skipped; HEAD and 204 have no body; a pipelined request
    // after each is still answered.
    let raw = [
        one("/hints", "GET"),
        one("/head", "HEAD"),
        one("/no-content", "GET"),
        one("/close", "GET"),
        one("/x", "GET"),
    ]
    .concat();
    let (r, closed) = talk(proxy.http, &raw, 4096, 5, &[1]).await;
    assert!(!closed);
    let got: Vec<(u16, String)> = r.iter().map(|r| (r.status, r.text())).collect();
    assert_eq!(
        got,
        vec![
            (200, "ok".into()),
            (200, "".into()),
            (204, "".into()),
            (200, "ok".into()),
            (200, "raw".into())
        ]
    );
    assert_eq!(r[1].field("content-length"), Some("1234"));
    // An upstream that closes without answering: 502 (a new connection, so not sent
    // again); the client's connection stays open.
    let raw = [one("/early", "GET"), one("/x", "GET")].concat();
    let (r, _) = talk(proxy.http, &raw, 4096, 2, &[]).await;
    let got: Vec<u16> = r.iter().map(|r| r.status).collect();
    assert_eq!(got, vec![502, 200]);
    // One that closes mid-body: the client's connection ends (the head was sent).
    let (r, closed) = talk(
        proxy.http,
        &[one("/half", "GET"), one("/x", "GET")].concat(),
        4096,
        2,
        &[],
    )
    .await;
    assert!(closed);
    assert!(r.is_empty(), "{r:?}");
    assert!(conns.load(Ordering::SeqCst) >= 4);
}

#[tokio::test]
async fn a_pooled_connection_the_upstream_closed_is_not_used() {
    let (addr, conns) = raw_upstream();
    let (proxy, _dir) = start_with(&[addr.to_string()], "");
    // `/close` answers and closes: the pool must not hand that connection out again.
    for i in 0..5 {
        let path = if i % 2 == 0 { "/close" } else { "/x" };
        let raw = format!("GET {path} HTTP/1.1\r\nHost: off.test\r\n\r\n");
        let (r, _) = talk(proxy.http, raw.as_bytes(), 4096, 1, &[]).await;
        assert_eq!(r.len(), 1, "request {i}");
        assert_eq!(r[0].status, 200, "request {i}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(conns.load(Ordering::SeqCst) >= 3);
    // A std socket too, to show a plain blocking client sees the same.
    let mut s = std::net::TcpStream::connect(proxy.http).unwrap();
    s.write_all(b"GET /x HTTP/1.1\r\nHost: off.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(parse_all(&got, &[])[0].text(), "raw");
}
