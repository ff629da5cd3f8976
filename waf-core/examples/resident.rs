//! A process that holds one `Waf` and nothing else, for measuring what the engine costs in
//! resident memory: loads a SecLang configuration, inspects one GET, prints its maximum
//! resident set (`VmHWM`) before and after loading (Linux).
//!
//! ```sh
//! target/release/waf-profile --print-config 1 > /tmp/crs-pl1.conf   # CRS PL1, as the benches load it
//! cargo build --release -p waf-core --example resident
//! /usr/bin/time -f "%M KB %U s" target/release/examples/resident /tmp/crs-pl1.conf
//! ```
//!
//! `waf-profile` measures more than the engine: it links the ML detector (tract-onnx) and
//! the libmodsecurity bindings of the comparison benchmarks, a 21 MB text section whose
//! pages count in its resident set. This example is built with `waf-core`'s default
//! features only, as a host embedding the engine would be.
use std::time::SystemTime;

use waf_core::{ConnectionInfo, RequestHead, Waf};

/// `VmHWM` (maximum resident set) of this process, as `/proc/self/status` gives it.
fn max_resident() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown (no /proc/self/status)".into())
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: resident CONFIG.conf");
        std::process::exit(2);
    };
    let config = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2);
    });
    println!("before loading: maximum resident {}", max_resident());
    let waf = Waf::builder()
        .seclang(&path, config)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1);
        });
    let conn = ConnectionInfo::new(
        "192.0.2.10:50000".parse().expect("literal address"),
        "127.0.0.1:80".parse().expect("literal address"),
    );
    let headers: [(&[u8], &[u8]); 3] = [
        (b"Host", b"example.com"),
        (b"User-Agent", b"Mozilla/5.0 (X11; Linux x86_64)"),
        (b"Accept", b"text/html"),
    ];
    let mut tx = waf.transaction(&conn, SystemTime::now());
    let verdict = tx.request_headers(&RequestHead::new(
        b"GET",
        b"/index.html?q=hello",
        b"HTTP/1.1",
        &headers,
    ));
    let report = tx.finish();
    println!(
        "after loading and one GET ({verdict:?}, inbound score {}): maximum resident {}",
        report.inbound_anomaly_score,
        max_resident()
    );
}
