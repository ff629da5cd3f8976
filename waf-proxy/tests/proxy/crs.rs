//! OWASP CRS from `../shared/crs` (never copied) behind the proxy.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;

use crate::util::*;

fn crs_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs")
}

fn browser_get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url)
        .header(
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
        )
        .header("accept", "text/html,application/xhtml+xml")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

#[tokio::test]
async fn crs_blocks_sqli_and_xss_passes_benign_and_honours_exclusions() {
    let dir_crs = crs_dir();
    assert!(
        dir_crs.join("rules").is_dir(),
        "CRS missing at {}",
        dir_crs.display()
    );
    let up = upstream();
    let dir = temp_dir("crs");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
         [[host]]\nnames = [\"*\"]\nupstream = \"app\"\n\
         waf = {{ mode = \"block\", crs = {:?}, paranoia = 1, exclusions = [{{ rule_ids = [\"942000-942999\"], path_prefix = \"/search\" }}] }}\n",
        up.addr,
        dir_crs.to_str().unwrap()
    );
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    let ok = send(&c, browser_get(&proxy.url("/products?page=2&sort=name"))).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let sqli = send(&c, browser_get(&proxy.url("/?id=1%27%20OR%20%271%27=%271"))).await;
    assert_eq!(sqli.status, 403);
    let xss = send(
        &c,
        browser_get(&proxy.url("/?q=%3Cscript%3Ealert(1)%3C/script%3E")),
    )
    .await;
    assert_eq!(xss.status, 403);
    // SQLi rules are switched off under /search only.
    let excluded = send(
        &c,
        browser_get(&proxy.url("/search?id=1%27%20OR%20%271%27=%271")),
    )
    .await;
    assert_eq!(excluded.status, 200, "{}", excluded.body);
}

/// Phase 4 blocks in the proxy: CRS's SQL error leakage rules replace the upstream's error
/// page (as the nginx module's test does); a page over `max_response_buffer` streams and is
/// logged; a response CRS does not inspect streams unbuffered.
#[tokio::test]
async fn crs_blocks_a_leaked_sql_error_page_and_uninspected_responses_stream() {
    let dir_crs = crs_dir();
    assert!(
        dir_crs.join("rules").is_dir(),
        "CRS missing at {}",
        dir_crs.display()
    );
    let up = upstream();
    let dir = temp_dir("crs-leak");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"access.log\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\nread_timeout_ms = 5000\n\
         [[host]]\nnames = [\"*\"]\nupstream = \"app\"\n\
         limits = {{ max_response_buffer = 65536 }}\n\
         waf = {{ mode = \"block\", crs = {:?}, paranoia = 1 }}\n",
        up.addr,
        dir_crs.to_str().unwrap()
    );
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();

    let leak = send(&c, browser_get(&proxy.url("/leak"))).await;
    assert_eq!(leak.status, 403, "{}", leak.body);
    assert!(
        !leak.body.contains("SQL syntax"),
        "the page leaked: {}",
        leak.body
    );
    assert_eq!(leak.headers["content-type"], "text/html; charset=utf-8");

    // Over the hold limit: sent as it came (phase 4 can only log it).
    let big = send(&c, browser_get(&proxy.url("/leak-big"))).await;
    assert_eq!(big.status, 200);
    assert!(big.body.contains("SQL syntax") && big.body.len() > 65536);

    // An ordinary page is held, inspected and sent whole.
    let ok = send(&c, browser_get(&proxy.url("/products?page=2"))).await;
    assert_eq!((ok.status, ok.body.as_str()), (200, "ok GET /products 0"));

    // A type CRS does not inspect streams: the first chunk arrives long before the second.
    // An inspected type is held until the end.
    for (path, streamed) in [("/drip", true), ("/drip-html", false)] {
        let t = std::time::Instant::now();
        let resp = c.request(browser_get(&proxy.url(path))).await.unwrap();
        let mut body = resp.into_body();
        use http_body_util::BodyExt;
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let first_at = t.elapsed();
        if streamed {
            assert_eq!(&first[..], b"first ");
            assert!(
                first_at < std::time::Duration::from_millis(1000),
                "{path}: {first_at:?}"
            );
        } else {
            assert_eq!(&first[..], b"first second");
            assert!(
                first_at >= std::time::Duration::from_millis(1400),
                "{path}: {first_at:?}"
            );
        }
    }

    // The block and the detection are in the access log.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let by_path = |p: &str| lines.iter().find(|l| l["path"] == p).cloned();
        if let (Some(leak), Some(big)) = (by_path("/leak"), by_path("/leak-big")) {
            assert_eq!(leak["action"], "block", "{leak}");
            assert!(
                leak["rule_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r.as_u64().is_some_and(|id| (951000..952000).contains(&id))),
                "{leak}"
            );
            assert_eq!(big["action"], "detect", "{big}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "access log: {log}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
