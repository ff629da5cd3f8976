//! Time per call of the detectors, side by side: ours (`waf_injection`), C libinjection
//! 3.9.2 (Debian's libmodsecurity.so.3, the oracle, through libloading) and the port the
//! core used before (`barbacane-libinjection` 0.1.1).
//!
//! Every group iterates over the same input list once per iteration and declares it as
//! its throughput, so criterion's `thrpt` is calls per second; a summary line per
//! detector with ns/call closes the run.
//!
//! `cargo bench -p waf-injection --bench detect` (criterion filters work:
//! `-- sqli/`); `WAF_BENCH_PROFILE=sqli` runs only our detector, for a profiler. Groups are named `<detector kind>/<implementation>`; XSS groups go beside
//! the SQLi ones.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

use common::corpus;
use common::oracle::Oracle;

/// The benchmark inputs: every hand-written edge case, CRS regression payload and dataset
/// payload of the differential corpus, plus its first 20,000 random strings (the same
/// seed), deduplicated. The one- and two-byte strings are left out: they are a
/// completeness check, not traffic.
fn sample() -> Vec<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let parts = [
        corpus::edge_cases(),
        corpus::crs_payloads(),
        corpus::dataset_payloads(),
        corpus::random_strings(0x5eed_1ec7_10b5_u64, 20_000),
    ];
    for v in parts.into_iter().flatten() {
        if seen.insert(v.clone()) {
            out.push(v);
        }
    }
    out
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args()
}

fn bench_sqli(c: &mut Criterion, inputs: &[Vec<u8>], oracle: &Oracle) {
    let mut group = c.benchmark_group("sqli");
    group.throughput(Throughput::Elements(inputs.len() as u64));
    group.bench_function("ours", |b| {
        b.iter(|| {
            inputs
                .iter()
                .filter(|i| waf_injection::detect_sqli(black_box(i)).is_some())
                .count()
        })
    });
    group.bench_function("c", |b| {
        b.iter(|| {
            inputs
                .iter()
                .filter(|i| oracle.sqli(black_box(i)).is_some())
                .count()
        })
    });
    group.bench_function("barbacane", |b| {
        b.iter(|| {
            inputs
                .iter()
                .filter(|i| libinjectionrs::detect_sqli(black_box(i)).is_injection())
                .count()
        })
    });
    group.finish();
}

/// One pass over `inputs`, in ns per call.
fn pass_ns(inputs: &[Vec<u8>], f: &mut impl FnMut(&[u8]) -> bool) -> f64 {
    let start = Instant::now();
    let hits = inputs.iter().filter(|i| f(black_box(i))).count();
    black_box(hits);
    start.elapsed().as_nanos() as f64 / inputs.len() as f64
}

/// The minimum and the median of `v`.
fn min_median(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// ns/call of ours, C and barbacane, passes interleaved (ours, C, ours, C, …) so that
/// load from other processes on a shared machine hits both alike; minimum and median.
fn summary_sqli(inputs: &[Vec<u8>], oracle: &Oracle) {
    let mut ours_fn = |i: &[u8]| waf_injection::detect_sqli(i).is_some();
    let mut c_fn = |i: &[u8]| oracle.sqli(i).is_some();
    let mut barbacane_fn = |i: &[u8]| libinjectionrs::detect_sqli(i).is_injection();
    let rounds = 15;
    let (mut ours, mut c, mut barbacane) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        ours.push(pass_ns(inputs, &mut ours_fn));
        c.push(pass_ns(inputs, &mut c_fn));
        if round % 3 == 0 {
            barbacane.push(pass_ns(inputs, &mut barbacane_fn));
        }
    }
    let (ours_min, ours_med) = min_median(&mut ours);
    let (c_min, c_med) = min_median(&mut c);
    let (b_min, b_med) = min_median(&mut barbacane);
    println!(
        "summary sqli ({} inputs, {rounds} interleaved passes, ns/call min / median): \
         ours {ours_min:.0} / {ours_med:.0}, c {c_min:.0} / {c_med:.0}, \
         barbacane {b_min:.0} / {b_med:.0}; c / ours = {:.2} (min), {:.2} (median)",
        inputs.len(),
        c_min / ours_min,
        c_med / ours_med
    );
}

fn main() {
    let inputs = sample();
    // `WAF_BENCH_PROFILE=sqli` (or `sqli-c`) runs only our detector (or C's), for a profiler;
    // `WAF_BENCH_PROFILE=summary` prints only the ns/call summary.
    // (`valgrind --tool=callgrind --toggle-collect='*detect_sqli*' <bench binary>`).
    if let Ok(which) = std::env::var("WAF_BENCH_PROFILE") {
        if which == "sqli" {
            let hits = (0..3)
                .map(|_| {
                    inputs
                        .iter()
                        .filter(|i| waf_injection::detect_sqli(black_box(i)).is_some())
                        .count()
                })
                .sum::<usize>();
            println!("profile sqli: {hits} hits");
        } else if which == "sqli-c" {
            let oracle = Oracle::load();
            let hits = (0..3)
                .map(|_| {
                    inputs
                        .iter()
                        .filter(|i| oracle.sqli(black_box(i)).is_some())
                        .count()
                })
                .sum::<usize>();
            println!("profile sqli-c: {hits} hits");
        } else if which == "summary" {
            summary_sqli(&inputs, &Oracle::load());
        }
        return;
    }
    let oracle = Oracle::load();
    println!("benchmark inputs: {}", inputs.len());
    let mut c = config();
    bench_sqli(&mut c, &inputs, &oracle);
    summary_sqli(&inputs, &oracle);
    c.final_summary();
}
