//! Runs `N` transactions of one benchmark request through the ML bench's engine (see
//! `benches/benches/ml.rs`), for instruction counts with callgrind:
//!
//! ```text
//! cargo build --release -p waf-bench --bin ml-profile
//! valgrind --tool=callgrind target/release/ml-profile cold get_simple 10     # minus the same with 110
//! ```
//!
//! `VARIANT` is `off` (no model), `warm` (the default model, score cache warm) or `cold`
//! (no cache); `REQUEST` a name of `waf_bench::requests()`.
use std::process::ExitCode;

use waf_core::ml::Model;
use waf_core::Waf;

const ENGINE: &str = "SecRuleEngine On\nSecRequestBodyAccess On\n\
    SecRule REQUEST_HEADERS:Content-Type \"@contains json\" \
    \"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(variant), Some(name), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: ml-profile off|warm|cold REQUEST N");
        return ExitCode::from(2);
    };
    let Ok(n) = n.parse::<usize>() else {
        eprintln!("N must be a number");
        return ExitCode::from(2);
    };
    let model = match Model::default_model() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let builder = Waf::builder().seclang("bench", ENGINE);
    let builder = match variant.as_str() {
        "off" => builder,
        "warm" => builder.ml_model(model),
        "cold" => builder.ml_model(model.without_cache()),
        other => {
            eprintln!("unknown variant {other:?}");
            return ExitCode::from(2);
        }
    };
    let waf = match builder.build() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(req) = waf_bench::requests().into_iter().find(|r| r.name == name) else {
        eprintln!("unknown request {name:?}");
        return ExitCode::from(2);
    };
    let conn = waf_bench::connection();
    // One warm-up transaction (fills the cache for `warm`, the pools for all).
    let _ = waf_bench::run_ours(&waf, &conn, &req);
    for _ in 0..n {
        std::hint::black_box(waf_bench::run_ours(&waf, &conn, &req));
    }
    ExitCode::SUCCESS
}
