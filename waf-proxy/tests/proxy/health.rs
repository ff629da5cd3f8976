//! Active health checks: a server whose health path fails is taken out of rotation after
//! `fall` checks and brought back after `rise`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use crate::util::*;

struct Toggle {
    addr: SocketAddr,
    healthy: Arc<AtomicBool>,
    checks: Arc<AtomicUsize>,
}

/// An upstream that answers `server NAME`, and `/healthz` with 200 or 503 as told.
fn toggle_upstream(name: &'static str) -> Toggle {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let healthy = Arc::new(AtomicBool::new(true));
    let checks = Arc::new(AtomicUsize::new(0));
    let (h, c) = (healthy.clone(), checks.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (h, c) = (h.clone(), c.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (h, c) = (h.clone(), c.clone());
                        async move {
                            let mut r =
                                Response::new(Full::new(Bytes::from(format!("server {name}"))));
                            if req.uri().path() == "/healthz" {
                                // Counted only when it is the proxy's check.
                                if req
                                    .headers()
                                    .get("user-agent")
                                    .is_some_and(|v| v == "waf-proxy-health-check")
                                {
                                    c.fetch_add(1, Ordering::SeqCst);
                                }
                                if !h.load(Ordering::SeqCst) {
                                    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                                }
                            }
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
    });
    Toggle {
        addr,
        healthy,
        checks,
    }
}

async fn served_by(c: &HttpClient, proxy: &Proxy, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(c, &proxy.url("/")).await.body);
    }
    out
}

#[tokio::test]
async fn a_failing_server_leaves_rotation_and_comes_back() {
    let a = toggle_upstream("a");
    let b = toggle_upstream("b");
    let dir = temp_dir("health");
    let rules = dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let cfg = config(&[a.addr.to_string(), b.addr.to_string()], &rules, "", "")
        .replace(
            "fail_timeout_ms = 5000\n",
            "fail_timeout_ms = 5000\nhealth = { path = \"/healthz\", interval_ms = 100, timeout_ms = 500, rise = 2, fall = 2 }\n",
        )
        .replace("[log]", "[admin]\nlisten = \"127.0.0.1:0\"\n[log]");
    let proxy = Proxy::start(&dir, &cfg);
    let c = client();
    let both = served_by(&c, &proxy, 6).await;
    assert!(
        both.contains(&"server a".to_string()) && both.contains(&"server b".to_string()),
        "{both:?}"
    );

    // Down: after two failed checks only b serves.
    a.healthy.store(false, Ordering::SeqCst);
    proxy
        .wait_stderr(&format!("server {} is down (health check)", a.addr), 1)
        .await;
    let only_b = served_by(&c, &proxy, 6).await;
    assert!(only_b.iter().all(|s| s == "server b"), "{only_b:?}");
    let metrics = get(&c, &format!("http://{}/metrics", proxy.admin.unwrap()))
        .await
        .body;
    assert!(
        metrics.contains(&format!(
            "waf_proxy_upstream_server_up{{upstream=\"app\",server=\"{}\"}} 0",
            a.addr
        )),
        "{metrics}"
    );

    // Up again after two passing checks.
    a.healthy.store(true, Ordering::SeqCst);
    proxy
        .wait_stderr(&format!("server {} is up (health check)", a.addr), 1)
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let again = served_by(&c, &proxy, 6).await;
        if again.contains(&"server a".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "a never came back: {again:?}");
    }
    // Two failed checks took a out, two passing ones brought it back.
    assert!(
        a.checks.load(Ordering::SeqCst) >= 4,
        "a is checked, by the proxy"
    );
    assert!(b.checks.load(Ordering::SeqCst) >= 3, "b is checked too");
}
