//! The same requests through `waf-core` and through libmodsecurity 3 (Debian's
//! `libmodsecurity3`, loaded at run time), with the same CRS and the same configuration
//! ([`waf_bench::config`]), in one run. Prints a table (request, ours, ModSecurity, ratio)
//! and ends with `min ratio: X`, the smallest ModSecurity/ours ratio over all requests.
//!
//! `cargo bench -p waf-bench --bench vs_modsecurity`. Set `VS_PL=4` to compare at PL4 as
//! well (slow: libmodsecurity takes seconds per large body there).
//!
//! Each figure is criterion's median time per transaction; both engines are measured in the
//! same process, alternating request by request, so machine load affects both alike.
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::Criterion;
use waf_bench::modsec::{ModSecurity, PreparedRequest};

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../target")
            .into()
    }))
    .join("criterion-vs-modsecurity");
    let mut criterion = Criterion::default()
        .output_directory(&out_dir)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .without_plots()
        .configure_from_args();
    let levels: Vec<u8> = match std::env::var("VS_PL").ok().as_deref() {
        Some("4") => vec![1, 4],
        _ => vec![1],
    };
    let conn = waf_bench::connection();
    let mut rows = Vec::new();
    for pl in levels {
        let config = waf_bench::config(pl);
        let waf = waf_bench::build_waf(pl);
        let modsec = match ModSecurity::new(&config) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("vs_modsecurity: cannot run libmodsecurity: {e}");
                std::process::exit(1);
            }
        };
        let group_name = format!("vs_modsecurity_pl{pl}");
        let mut group = criterion.benchmark_group(&group_name);
        for req in waf_bench::requests() {
            let prepared = PreparedRequest::new(&req);
            let ours = waf_bench::run_ours(&waf, &conn, &req);
            let theirs = modsec.run(&prepared);
            println!(
                "{}: PL{pl} verdicts: ours {ours:?}, ModSecurity {theirs:?}",
                req.name
            );
            group.bench_function(format!("ours_{}", req.name), |b| {
                b.iter(|| waf_bench::run_ours(black_box(&waf), &conn, black_box(&req)))
            });
            group.bench_function(format!("modsec_{}", req.name), |b| {
                b.iter(|| modsec.run(black_box(&prepared)))
            });
            rows.push((
                format!("{} (PL{pl})", req.name),
                median_ns(&out_dir, &group_name, &format!("ours_{}", req.name)),
                median_ns(&out_dir, &group_name, &format!("modsec_{}", req.name)),
            ));
        }
        group.finish();
    }
    println!();
    println!("| request | ours | ModSecurity | ratio |");
    println!("|---|---:|---:|---:|");
    let mut min_ratio = f64::INFINITY;
    for (name, ours, theirs) in &rows {
        let ratio = theirs / ours;
        min_ratio = min_ratio.min(ratio);
        println!(
            "| {name} | {} | {} | {ratio:.1}× |",
            human(*ours),
            human(*theirs)
        );
    }
    println!();
    println!("min ratio: {min_ratio:.1}");
}

/// Criterion's median estimate (ns per iteration) of one benchmark, from the
/// `estimates.json` it has just written.
fn median_ns(out_dir: &Path, group: &str, function: &str) -> f64 {
    let path = out_dir
        .join(group)
        .join(function)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).expect("criterion writes JSON");
    v["median"]["point_estimate"]
        .as_f64()
        .unwrap_or_else(|| panic!("{}: no median", path.display()))
}

/// Nanoseconds as µs or ms.
fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}
