//! Time per call of the detectors, side by side: ours (`waf_injection`), C libinjection
//! 3.9.2 (Debian's libmodsecurity.so.3, the oracle, through libloading) and the port the
//! core used before (`barbacane-libinjection` 0.1.1).
//!
//! Every group iterates over the same input list once per iteration and declares it as
//! its throughput, so criterion's `thrpt` is calls per second; a summary line per
//! detector with ns/call closes the run.
//!
//! `cargo bench -p waf-injection --bench detect` (criterion filters work:
//! `-- sqli/`); `WAF_BENCH_PROFILE=sqli` runs only our detector, for a profiler. Groups are
//! named `<detector kind>/<implementation>`: `sqli/ours`, `sqli/c`, `sqli/barbacane`,
//! `xss/ours`, `xss/c`, `xss/barbacane`.

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

/// One detector under test: its name and a call returning the verdict.
type Detector<'a> = (&'static str, Box<dyn Fn(&[u8]) -> bool + 'a>);

/// The three implementations of one detector kind (`sqli` or `xss`): ours, C, barbacane.
fn detectors<'a>(kind: &str, oracle: &'a Oracle) -> [Detector<'a>; 3] {
    match kind {
        "sqli" => [
            (
                "ours",
                Box::new(|i| waf_injection::detect_sqli(i).is_some()),
            ),
            ("c", Box::new(|i| oracle.sqli(i).is_some())),
            (
                "barbacane",
                Box::new(|i| libinjectionrs::detect_sqli(i).is_injection()),
            ),
        ],
        _ => [
            ("ours", Box::new(waf_injection::detect_xss)),
            ("c", Box::new(|i| oracle.xss(i))),
            (
                "barbacane",
                Box::new(|i| libinjectionrs::detect_xss(i).is_injection()),
            ),
        ],
    }
}

/// Criterion groups `<kind>/ours`, `<kind>/c`, `<kind>/barbacane`.
fn bench_kind(c: &mut Criterion, kind: &str, inputs: &[Vec<u8>], oracle: &Oracle) {
    let mut group = c.benchmark_group(kind);
    group.throughput(Throughput::Elements(inputs.len() as u64));
    for (name, f) in detectors(kind, oracle) {
        group.bench_function(name, |b| {
            b.iter(|| inputs.iter().filter(|i| f(black_box(i))).count())
        });
    }
    group.finish();
}

/// One pass over `inputs`, in ns per call.
fn pass_ns(inputs: &[Vec<u8>], f: &dyn Fn(&[u8]) -> bool) -> f64 {
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
fn summary(kind: &str, inputs: &[Vec<u8>], oracle: &Oracle) {
    let [(_, ours_fn), (_, c_fn), (_, barbacane_fn)] = detectors(kind, oracle);
    let rounds = 15;
    let (mut ours, mut c, mut barbacane) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        ours.push(pass_ns(inputs, &*ours_fn));
        c.push(pass_ns(inputs, &*c_fn));
        if round % 3 == 0 {
            barbacane.push(pass_ns(inputs, &*barbacane_fn));
        }
    }
    let (ours_min, ours_med) = min_median(&mut ours);
    let (c_min, c_med) = min_median(&mut c);
    let (b_min, b_med) = min_median(&mut barbacane);
    println!(
        "summary {kind} ({} inputs, {rounds} interleaved passes, ns/call min / median): \
         ours {ours_min:.0} / {ours_med:.0}, c {c_min:.0} / {c_med:.0}, \
         barbacane {b_min:.0} / {b_med:.0}; c / ours = {:.2} (min), {:.2} (median)",
        inputs.len(),
        c_min / ours_min,
        c_med / ours_med
    );
}

fn main() {
    let inputs = sample();
    // `WAF_BENCH_PROFILE=sqli` (or `xss`, `sqli-c`, `xss-c`) runs only that detector three
    // times over the inputs, for a profiler
    // (`valgrind --tool=callgrind --toggle-collect='*detect_sqli*' <bench binary>`);
    // `WAF_BENCH_PROFILE=summary` prints only the ns/call summaries.
    if let Ok(which) = std::env::var("WAF_BENCH_PROFILE") {
        let oracle = Oracle::load();
        if which == "summary" {
            summary("sqli", &inputs, &oracle);
            summary("xss", &inputs, &oracle);
            return;
        }
        let (kind, implementation) = match which.split_once('-') {
            Some((k, "c")) => (k, 1),
            _ => (which.as_str(), 0),
        };
        let f = &detectors(kind, &oracle)[implementation].1;
        let hits: usize = (0..3)
            .map(|_| inputs.iter().filter(|i| f(black_box(i))).count())
            .sum();
        println!("profile {which}: {hits} hits");
        return;
    }
    let oracle = Oracle::load();
    println!("benchmark inputs: {}", inputs.len());
    let mut c = config();
    bench_kind(&mut c, "sqli", &inputs, &oracle);
    bench_kind(&mut c, "xss", &inputs, &oracle);
    summary("sqli", &inputs, &oracle);
    summary("xss", &inputs, &oracle);
    c.final_summary();
}
