//! What `WafLayer` costs on top of the engine: the same CRS PL1 requests driven through the
//! engine alone, through a bare tower service, and through the service behind `WafLayer`.
//! `cargo bench -p waf-tower`. Reports go to a no-op sink so logging is not measured.
//!
//! Measured on the shared 2-core development machine (other builds running, so only the
//! ratios mean much), `--warm-up-time 1 --measurement-time 3`:
//!
//! | request   | bare service | engine alone | behind `WafLayer` |
//! |-----------|-------------:|-------------:|------------------:|
//! | GET       |       2.6 µs |       719 µs |            806 µs |
//! | JSON POST |       3.3 µs |      1.45 ms |           1.42 ms |
//!
//! The layer's own work (header copies, one boxed future, body buffering, the block-page
//! path not taken) is lost in the engine's cost and the machine's noise.

use std::convert::Infallible;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::SystemTime;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use http::{Request, Response};
use http_body_util::Full;
use tower::{Layer, ServiceExt};
use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Waf};
use waf_tower::{PeerAddr, WafBody, WafLayer};

const JSON: &[u8] =
    br#"{"user":"alice","items":[{"id":1,"qty":2},{"id":7,"qty":1}],"note":"deliver after 5pm"}"#;

fn request(post: bool) -> Request<Full<Bytes>> {
    let builder = Request::builder()
        .header("host", "shop.example")
        .header(
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
        )
        .header("accept", "text/html,application/json");
    let mut req = if post {
        builder
            .method("POST")
            .uri("/api/orders")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(JSON)))
    } else {
        builder
            .method("GET")
            .uri("/products?category=books&page=2&sort=price")
            .body(Full::new(Bytes::new()))
    }
    .expect("valid request");
    req.extensions_mut()
        .insert(PeerAddr("192.0.2.10:50000".parse().expect("valid address")));
    req
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let conf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/crs.conf");
    let waf = Waf::builder()
        .seclang_file(conf)
        .build()
        .expect("CRS loads");

    let bare = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    let inner = tower::service_fn(|_req: Request<WafBody<Full<Bytes>>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    let guarded = WafLayer::builder(waf.clone())
        .on_report(|r| {
            black_box(r);
        })
        .build()
        .layer(inner);

    let mut group = c.benchmark_group("tower");
    for (name, post) in [("get", false), ("json_post", true)] {
        group.bench_function(format!("bare_{name}"), |b| {
            b.iter(|| rt.block_on(bare.oneshot(request(post))))
        });
        group.bench_function(format!("engine_only_{name}"), |b| {
            b.iter(|| engine_only(&waf, post))
        });
        group.bench_function(format!("waf_layer_{name}"), |b| {
            b.iter(|| rt.block_on(guarded.clone().oneshot(request(post))))
        });
    }
    group.finish();
}

/// The same transaction driven by hand, with no adapter: the floor for `waf_layer_*`.
fn engine_only(waf: &Waf, post: bool) {
    let conn = ConnectionInfo::new(
        "192.0.2.10:50000".parse().expect("valid address"),
        "0.0.0.0:0".parse().expect("valid address"),
    );
    let mut tx = waf.transaction(&conn, SystemTime::now());
    let mut headers: Vec<(&[u8], &[u8])> = vec![
        (b"host", b"shop.example"),
        (
            b"user-agent",
            b"Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
        ),
        (b"accept", b"text/html,application/json"),
    ];
    let (method, uri): (&[u8], &[u8]) = if post {
        headers.push((b"content-type", b"application/json"));
        (b"POST", b"/api/orders")
    } else {
        (b"GET", b"/products?category=books&page=2&sort=price")
    };
    let _ = tx.request_headers(&RequestHead::new(method, uri, b"HTTP/1.1", &headers));
    if post {
        let _ = tx.request_body(JSON);
    }
    let _ = tx.request_end();
    let response_headers: &[(&[u8], &[u8])] = &[(b"content-type", b"text/plain")];
    let _ = tx.response_headers(&ResponseHead::new(200, b"HTTP/1.1", response_headers));
    let _ = tx.response_end();
    black_box(tx.finish());
}

criterion_group!(benches, bench);
criterion_main!(benches);
