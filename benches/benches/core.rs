//! `waf-core` with OWASP CRS at PL1 and PL4: one whole transaction (phases 1-5) per request
//! of [`waf_bench::requests`], and the time to load and compile CRS.
//!
//! `cargo bench -p waf-bench --bench core`; results and the table are in `benches/README.md`.
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

fn transactions(c: &mut Criterion) {
    let conn = waf_bench::connection();
    for pl in [1u8, 4] {
        let waf = waf_bench::build_waf(pl);
        let mut group = c.benchmark_group(format!("crs_pl{pl}"));
        // Ten samples: the 100 KB JSON body takes seconds per transaction on a loaded
        // machine; the small requests still get thousands of iterations per sample.
        group.sample_size(10);
        for req in waf_bench::requests() {
            let blocked = waf_bench::run_ours(&waf, &conn, &req);
            // PL1 must pass the benign requests and block the attack; at PL4 false
            // positives on benign requests are CRS's business, so only the attack is checked.
            if req.attack || pl == 1 {
                assert_eq!(
                    blocked.is_some(),
                    req.attack,
                    "{}: unexpected verdict at PL{pl}: {blocked:?}",
                    req.name
                );
            }
            group.bench_function(req.name, |b| {
                b.iter(|| waf_bench::run_ours(black_box(&waf), &conn, black_box(&req)))
            });
        }
        group.finish();
    }
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("crs_load");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for pl in [1u8, 4] {
        let config = waf_bench::config(pl);
        group.bench_function(format!("pl{pl}"), |b| {
            b.iter(|| {
                waf_core::Waf::builder()
                    .seclang("crs", config.as_str())
                    .build()
                    .expect("CRS loads")
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = transactions, load
}
criterion_main!(benches);
