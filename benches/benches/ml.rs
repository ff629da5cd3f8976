//! The ML detector's cost (`waf-core` `ml` feature), issue 17: one whole transaction of
//! [`waf_bench::requests`]' `get_simple` and `post_json_10k` through an engine that only
//! parses (engine on, body access, no rules) with and without the model, so the difference
//! is the detector: value collection, features, the tract run, the score cache.
//!
//! - `ml/off/*`: no model.
//! - `ml/warm/*`: the default model with its score cache, every value seen before (a
//!   returning client: same headers, same path).
//! - `ml/cold/*`: the default model without the cache: every non-trivial value runs through
//!   features and tract on every request (the worst case: all values never seen). What
//!   stays warm are the model's pools (tract run states, scoring buffers): they hold no
//!   value or score, only allocations, as they would after a server's first requests.
//! - `ml/features/*`: feature extraction of one value alone.
//!
//! `cargo bench -p waf-bench --bench ml`; results in `waf-core/models/REPORT-SPEED.md`.
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use waf_core::ml::{features, Model};
use waf_core::Waf;

const ENGINE: &str = "SecRuleEngine On\nSecRequestBodyAccess On\n\
    SecRule REQUEST_HEADERS:Content-Type \"@contains json\" \
    \"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n";

fn build(model: Option<Model>) -> Waf {
    let b = Waf::builder().seclang("bench", ENGINE);
    match model {
        Some(m) => b.ml_model(m),
        None => b,
    }
    .build()
    .expect("bench engine builds")
}

fn transactions(c: &mut Criterion) {
    let conn = waf_bench::connection();
    let model = Model::default_model().expect("the default model loads");
    let variants = [
        ("off", build(None)),
        ("warm", build(Some(model.clone()))),
        ("cold", build(Some(model.without_cache()))),
    ];
    let requests: Vec<_> = waf_bench::requests()
        .into_iter()
        .filter(|r| matches!(r.name, "get_simple" | "post_json_10k"))
        .collect();
    let mut group = c.benchmark_group("ml");
    for (name, waf) in &variants {
        for req in &requests {
            // The detector scores in detect mode: nothing is blocked.
            assert_eq!(waf_bench::run_ours(waf, &conn, req), None, "{}", req.name);
            group.bench_function(format!("{name}/{}", req.name), |b| {
                b.iter(|| waf_bench::run_ours(black_box(waf), &conn, black_box(req)))
            });
        }
    }
    let mut scratch = features::Scratch::default();
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    for (name, value) in [
        (
            "user_agent",
            &b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"[..],
        ),
        ("window_1k", &[b'a'; 1024][..]),
    ] {
        group.bench_function(format!("features/{name}"), |b| {
            b.iter(|| {
                features::extract(black_box(value), &mut scratch, &mut idx, &mut val);
                idx.len()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = transactions
}
criterion_main!(benches);
