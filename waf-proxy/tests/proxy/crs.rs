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
