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

/// A detector under test.
type Detector<'a> = dyn FnMut(&[u8]) -> bool + 'a;

/// Nanoseconds per call of each detector over `inputs`: the best of `rounds` passes, the
/// detectors taking turns within each round so that machine noise hits them alike.
fn ns_per_call(inputs: &[&[u8]], rounds: usize, detectors: &mut [&mut Detector]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; detectors.len()];
    for _ in 0..rounds {
        for (f, best) in detectors.iter_mut().zip(best.iter_mut()) {
            let start = Instant::now();
            let mut hits = 0usize;
            for input in inputs {
                hits += usize::from(f(black_box(input)));
            }
            black_box(hits);
            let ns = start.elapsed().as_nanos() as f64 / inputs.len() as f64;
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
    let all: Vec<&[u8]> = corpus.iter().map(Vec::as_slice).collect();
    let with_lt: Vec<&[u8]> = all.iter().copied().filter(|i| i.contains(&b'<')).collect();
    let xss: Vec<&[u8]> = all.iter().copied().filter(|i| oracle.xss(i)).collect();
    let long: Vec<&[u8]> = all.iter().copied().filter(|i| i.len() >= 64).collect();
    let sets: [(&str, &[&[u8]]); 4] = [
        ("whole corpus", &all),
        ("inputs with '<'", &with_lt),
        ("XSS per the oracle", &xss),
        ("inputs of 64+ bytes", &long),
    ];
    eprintln!("rough timing, ns per call (best of {ROUNDS} interleaved passes)");
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
const ROUNDS: usize = 9;
