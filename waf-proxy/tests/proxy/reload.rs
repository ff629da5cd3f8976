//! Hot reload under load: a good config takes effect, a broken one is reported and the
//! old one keeps serving, and no request fails meanwhile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::*;

const NEW_RULE: &str =
    "SecRule REQUEST_URI \"@contains /newly-blocked\" \"id:1003,phase:1,deny,status:403\"\n";

#[tokio::test]
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
    proxy.wait_stderr("waf-proxy: reloaded", 1);
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 403);

    // 2. A broken config: reported, the old one keeps serving.
    std::fs::write(&proxy.config, format!("{cfg}\n[server.bogus]\n")).unwrap();
    proxy.wait_stderr("reload failed", 1);
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 403);
    assert_eq!(get(&c, &proxy.url("/fine")).await.status, 200);

    // 3. A broken rule file (the config parses, the rules do not): same.
    std::fs::write(&rules, "SecRule ARGS \"@nosuchop\" \"id:5\"\n").unwrap();
    std::fs::write(&proxy.config, &cfg).unwrap();
    proxy.wait_stderr("reload failed", 2);
    assert_eq!(get(&c, &proxy.url("/newly-blocked")).await.status, 403);

    // 4. Back to the original rules with SIGHUP.
    std::fs::write(&rules, RULES).unwrap();
    let pid = proxy.child.id().to_string();
    let st = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    proxy.wait_stderr("waf-proxy: reloaded", 2);
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
