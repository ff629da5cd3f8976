//! Hot reload under load: a good config takes effect, a broken one is reported and the
//! old one keeps serving, and no request fails meanwhile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::*;

const NEW_RULE: &str =
    "SecRule REQUEST_URI \"@contains /newly-blocked\" \"id:1003,phase:1,deny,status:403\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_good_and_broken_configs_under_load_without_failures() {
    let up = upstream();
    let dir = temp_dir("reload");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let cfg = config(&[up.addr.to_string()], &rules, "reload_poll_ms = 100", "");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 200);

    // Load: 8 clients, half keep-alive, half a new connection per request.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        let url = proxy.url("/load?x=1");
        tasks.push(tokio::spawn(async move {
            let mut c = client();
            while !stop.load(Ordering::Relaxed) {
                if i % 2 == 1 {
                    c = client();
                }
                let r = c
                    .request(
                        http::Request::get(&url)
                            .body(http_body_util::Full::new(bytes::Bytes::new()))
                            .unwrap(),
                    )
                    .await;
                match r {
                    Ok(r) if r.status() == 200 => {
                        let _ = http_body_util::BodyExt::collect(r.into_body()).await;
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // 1. A good config, picked up from the file change.
    std::fs::write(&rules, format!("{RULES}{NEW_RULE}")).unwrap();
    // The rules file is not watched, the config is: touch it with a different size.
    std::fs::write(&proxy.config, format!("{cfg}\n# v2\n")).unwrap();
    proxy.wait_stderr("waf-proxy: reloaded", 1).await;
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 403);

    // 2. A broken config: reported, the old one keeps serving.
    std::fs::write(&proxy.config, format!("{cfg}\n[server.bogus]\n")).unwrap();
    proxy.wait_stderr("reload failed", 1).await;
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 403);
    assert_eq!(get(&c, &proxy.url("/fine")).await.status, 200);

    // 3. A broken rule file (the config parses, the rules do not): same.
    std::fs::write(&rules, "SecRule ARGS \"@nosuchop\" \"id:5\"\n").unwrap();
    std::fs::write(&proxy.config, &cfg).unwrap();
    proxy.wait_stderr("reload failed", 2).await;
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 403);

    // 4. Back to the original rules with SIGHUP.
    std::fs::write(&rules, RULES).unwrap();
    let pid = proxy.child.id().to_string();
    let st = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    proxy.wait_stderr("waf-proxy: reloaded", 2).await;
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 200);

    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("reload under load: {ok} requests ok, {failed} failed, 4 reloads (2 broken)");
    assert!(ok > 100, "only {ok} requests under load");
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed during reloads",
        ok + failed
    );
}

/// Compiling CRS takes seconds; it happens off the request path, so requests keep being
/// served while it runs, and CRS blocks once it is swapped in.
#[tokio::test]
async fn reload_to_crs_keeps_serving_while_it_compiles() {
    let crs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs");
    let up = upstream();
    let dir = temp_dir("reload-crs");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let cfg = config(&[up.addr.to_string()], &rules, "reload_poll_ms = 100", "");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    let xss = "/?q=%3Cscript%3Ealert(1)%3C/script%3E";
    assert_eq!(get(&c, &proxy.url(xss)).await.status, 200);

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let load = {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        let url = proxy.url("/load");
        // Its own thread and runtime: the test's runtime must not be what stalls it.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let c = client();
                while !stop.load(Ordering::Relaxed) {
                    let req = http::Request::get(&url)
                        .header("user-agent", "Mozilla/5.0")
                        .header("accept", "text/html")
                        .body(http_body_util::Full::new(bytes::Bytes::new()))
                        .unwrap();
                    match c.request(req).await {
                        Ok(r) if r.status() == 200 => {
                            let _ = http_body_util::BodyExt::collect(r.into_body()).await;
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = ok.load(Ordering::Relaxed);
    let crs_cfg = cfg.replace(
        &format!("rules = [{:?}]", rules.to_str().unwrap()),
        &format!(
            "crs = {:?}, exclusions = [{{ rule_ids = [942100], path_prefix = \"/api/\" }}]",
            crs.to_str().unwrap()
        ),
    );
    assert_ne!(crs_cfg, cfg);
    std::fs::write(&proxy.config, &crs_cfg).unwrap();
    proxy.wait_stderr("waf-proxy: reloaded", 1).await;
    let during = ok.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let r = send(
        &c,
        http::Request::get(proxy.url(xss))
            .header("user-agent", "Mozilla/5.0")
            .header("accept", "text/html")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 403, "CRS is in force after the reload");
    eprintln!(
        "reload to CRS: {during} requests served while it compiled ({before} before, {} failed)",
        failed.load(Ordering::Relaxed)
    );
    assert!(during > 10, "only {during} requests while CRS compiled");
    assert_eq!(failed.load(Ordering::Relaxed), 0);
}
