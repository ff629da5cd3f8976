//! A small bench-like program for `valgrind --tool=callgrind`: loads CRS once, then runs one
//! request `N` times through `waf-core`.
//!
//! Only the loop in `measured` is meant to be counted (`--toggle-collect='*measured*'`).
//!
//! `waf-profile --print-config PL` prints the benchmark's CRS configuration and
//! `waf-profile --print-body REQUEST` a request body (used by `load/run.sh`).
//!
//! `waf-profile [REQUEST] [N] [PL] [ours|modsec]`, e.g. `waf-profile get_simple 200 1`;
//! REQUEST is a name from [`waf_bench::requests`]; `modsec` runs libmodsecurity instead,
//! for instruction counts that machine load does not skew. See `benches/PROFILE.md` for the command lines.
//!
//! `WAF_PROFILE_EVICT_KB=N` writes N KB of other memory before each transaction, so that it
//! starts with cold caches as in a server that did other work in between (a proxy serving
//! other connections); with `valgrind --tool=callgrind --cache-sim=yes
//! --toggle-collect='*run_ours*'` the last-level misses per transaction count the memory a
//! transaction touches, and the wall time it prints (transactions only) shows what that
//! costs on this machine.
//!
//! `WAF_PROFILE_EXTRA='SecRuleRemoveById 920450'` appends SecLang to the configuration
//! (`ours` only): the instructions a rule costs are the difference with it removed.
use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    // Helpers for `load/run.sh`, so the load benchmark uses the same configuration and
    // bodies as the in-process benchmarks.
    match args.peek().map(String::as_str) {
        Some("--print-config") => {
            let pl = args.nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
            print!("{}", waf_bench::config(pl));
            return;
        }
        Some("--print-body") => {
            let name = args.nth(1).unwrap_or_default();
            let req = waf_bench::requests()
                .into_iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("no request named {name}"));
            use std::io::Write;
            std::io::stdout()
                .write_all(&req.body)
                .expect("stdout is writable");
            return;
        }
        _ => {}
    }
    let name = args.next().unwrap_or_else(|| "get_simple".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let pl: u8 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let engine = args.next().unwrap_or_else(|| "ours".into());
    let req = waf_bench::requests()
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no request named {name}"));
    let conn = waf_bench::connection();
    let evict_kb: usize = std::env::var("WAF_PROFILE_EVICT_KB")
        .ok()
        .map(|s| s.parse().expect("WAF_PROFILE_EVICT_KB is a number of KB"))
        .unwrap_or(0);
    let mut other = vec![0u8; evict_kb * 1024];
    let blocked = match engine.as_str() {
        "ours" => {
            let waf = match std::env::var("WAF_PROFILE_EXTRA") {
                Ok(extra) => waf_core::Waf::builder()
                    .seclang(
                        format!("crs-pl{pl}+extra"),
                        format!("{}\n{extra}\n", waf_bench::config(pl)),
                    )
                    .scan_backend(waf_bench::scan_backend())
                    .build()
                    .unwrap_or_else(|e| panic!("WAF_PROFILE_EXTRA does not load: {e}")),
                Err(_) => waf_bench::build_waf(pl),
            };
            // One warm-up transaction outside `measured`: the regex caches and other
            // lazily built state are made there, so `--toggle-collect='*measured*'` counts
            // steady-state cost.
            waf_bench::run_ours(&waf, &conn, &req);
            let mut in_transactions = std::time::Duration::ZERO;
            let blocked = measured(n, || {
                for line in other.chunks_mut(64) {
                    line[0] = line[0].wrapping_add(1);
                }
                black_box(&other);
                let start = std::time::Instant::now();
                let blocked = waf_bench::run_ours(black_box(&waf), &conn, black_box(&req));
                in_transactions += start.elapsed();
                blocked
            });
            if evict_kb > 0 {
                println!(
                    "{:?} per transaction, {evict_kb} KB written before each",
                    in_transactions / n.max(1) as u32
                );
            }
            blocked
        }
        "modsec" => {
            let modsec = waf_bench::modsec::ModSecurity::new(&waf_bench::config(pl))
                .unwrap_or_else(|e| panic!("libmodsecurity: {e}"));
            let prepared = waf_bench::modsec::PreparedRequest::new(&req);
            modsec.run(&prepared);
            measured(n, || modsec.run(black_box(&prepared)))
        }
        other => panic!("engine is ours or modsec, not {other}"),
    };
    println!("{name} x{n} at PL{pl} ({engine}): {blocked:?}");
}

/// The measured loop; callgrind collects only inside it.
#[inline(never)]
fn measured(n: usize, mut run: impl FnMut() -> Option<u16>) -> Option<u16> {
    let mut blocked = None;
    for _ in 0..n {
        blocked = run();
    }
    blocked
}
