//! A rough timing of `detect_xss` against C libinjection 3.9.2 (the oracle) and
//! barbacane-libinjection, over the differential corpus. Not an assertion, not a benchmark
//! (the criterion groups live in `benches/`); run it on a quiet machine with
//!
//! ```text
//! cargo test -p waf-injection --release --test xss_timing -- --ignored --nocapture
//! ```

mod common;

use std::hint::black_box;
use std::time::Instant;

/// This thread's time on a CPU (`/proc/thread-self/schedstat`), so that time spent
/// descheduled on a busy machine does not count; wall-clock time where that file is missing.
enum Clock {
    OnCpu(u64),
    Wall(Instant),
}

impl Clock {
    fn on_cpu_ns() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    }

    fn now() -> Clock {
        match Clock::on_cpu_ns() {
            Some(ns) => Clock::OnCpu(ns),
            None => Clock::Wall(Instant::now()),
        }
    }

    fn elapsed_ns(&self) -> f64 {
        match self {
            Clock::OnCpu(start) => {
                Clock::on_cpu_ns().unwrap_or(*start).saturating_sub(*start) as f64
            }
            Clock::Wall(start) => start.elapsed().as_nanos() as f64,
        }
    }
}

/// A detector under test.
type Detector<'a> = dyn FnMut(&[u8]) -> bool + 'a;

/// Nanoseconds per call of each detector over `inputs`: the best of `rounds` passes, the
/// detectors taking turns within each round so that machine noise hits them alike.
fn ns_per_call(inputs: &[&[u8]], rounds: usize, detectors: &mut [&mut Detector]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; detectors.len()];
    // At least 500,000 calls per pass: the on-CPU clock ticks in milliseconds.
    let repeat = 500_000usize.div_ceil(inputs.len().max(1));
    for _ in 0..rounds {
        for (f, best) in detectors.iter_mut().zip(best.iter_mut()) {
            let start = Clock::now();
            let mut hits = 0usize;
            for _ in 0..repeat {
                for input in inputs {
                    hits += usize::from(f(black_box(input)));
                }
            }
            black_box(hits);
            let ns = start.elapsed_ns() / (repeat * inputs.len()) as f64;
            *best = best.min(ns);
        }
    }
    best
}

#[test]
#[ignore = "rough timing; run with --release --ignored --nocapture"]
fn xss_timing() {
    let oracle = common::oracle::Oracle::load();
    let corpus = common::corpus::all();
    // One contiguous buffer, as request data is: the timing then measures the detectors
    // rather than cache misses on 287,186 scattered allocations.
    let packed: Vec<u8> = corpus.concat();
    let mut all: Vec<&[u8]> = Vec::with_capacity(corpus.len());
    let mut rest = &packed[..];
    for input in &corpus {
        let (head, tail) = rest.split_at(input.len());
        all.push(head);
        rest = tail;
    }
    // The sample of `benches/detect.rs`: edge cases, CRS and dataset payloads, 20,000
    // random strings.
    let bench: std::collections::HashSet<Vec<u8>> = [
        common::corpus::edge_cases(),
        common::corpus::crs_payloads(),
        common::corpus::dataset_payloads(),
        common::corpus::random_strings(0x5eed_1ec7_10b5_u64, 20_000),
    ]
    .into_iter()
    .flatten()
    .collect();
    let bench: Vec<&[u8]> = all.iter().copied().filter(|i| bench.contains(*i)).collect();
    let with_lt: Vec<&[u8]> = all.iter().copied().filter(|i| i.contains(&b'<')).collect();
    let without_lt: Vec<&[u8]> = all.iter().copied().filter(|i| !i.contains(&b'<')).collect();
    let xss: Vec<&[u8]> = all.iter().copied().filter(|i| oracle.xss(i)).collect();
    let long: Vec<&[u8]> = all.iter().copied().filter(|i| i.len() >= 64).collect();
    let sets: [(&str, &[&[u8]]); 6] = [
        ("whole corpus", &all),
        ("bench sample", &bench),
        ("inputs with '<'", &with_lt),
        ("inputs without '<'", &without_lt),
        ("XSS per the oracle", &xss),
        ("inputs of 64+ bytes", &long),
    ];
    eprintln!("rough timing, ns of on-CPU time per call (best of {ROUNDS} interleaved passes)");
    eprintln!(
        "{:<22} {:>8} {:>9} {:>8} {:>10} {:>10}",
        "set", "inputs", "ours", "C 3.9.2", "barbacane", "C / ours"
    );
    for (name, inputs) in sets {
        let t = ns_per_call(
            inputs,
            ROUNDS,
            &mut [
                &mut waf_injection::detect_xss,
                &mut |i| oracle.xss(i),
                &mut |i| libinjectionrs::detect_xss(i).is_injection(),
            ],
        );
        let (ours, c, barbacane) = (t[0], t[1], t[2]);
        eprintln!(
            "{name:<22} {:>8} {ours:>9.1} {c:>8.1} {barbacane:>10.1} {:>9.2}x",
            inputs.len(),
            c / ours
        );
    }
}

/// Passes per detector and input set.
const ROUNDS: usize = 5;
