//! Runs `N` transactions of one benchmark request through the ML bench's engine (see
//! `benches/benches/ml.rs`), for instruction counts with callgrind:
//!
//! ```text
//! cargo build --release -p waf-bench --bin ml-profile
//! valgrind --tool=callgrind target/release/ml-profile cold get_simple 10     # minus the same with 110
//! ```
//!
//! `VARIANT` is `off` (no model), `warm` (the default model, score cache warm) or `cold`
//! (no cache); `REQUEST` a name of `waf_bench::requests()`; an optional fourth argument is
//! an `.onnx` file to run instead of the default model (to compare graph layouts). The
//! detector's report of the last transaction (values, rows, skipped) goes to stderr.
use std::process::ExitCode;

use waf_core::ml::Model;
use waf_core::{Report, RequestHead, Waf};

const ENGINE: &str = "SecRuleEngine On\nSecRequestBodyAccess On\n\
    SecRule REQUEST_HEADERS:Content-Type \"@contains json\" \
    \"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(variant), Some(name), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: ml-profile off|warm|cold REQUEST N [MODEL.onnx]");
        return ExitCode::from(2);
    };
    let Ok(n) = n.parse::<usize>() else {
        eprintln!("N must be a number");
        return ExitCode::from(2);
    };
    let model = match args.get(4) {
        Some(path) => Model::from_file(path),
        None => Model::default_model(),
    };
    let model = match model {
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
    if let Some(ml) = report(&waf, &conn, &req).ml {
        eprintln!(
            "score {} ({}), values {}, skipped {}, cached {}, rows {}, error {:?}",
            ml.score, ml.var, ml.values, ml.skipped, ml.cached, ml.rows, ml.error
        );
    }
    ExitCode::SUCCESS
}

/// One more transaction of `req` (request phases only), for its report.
fn report(waf: &Waf, conn: &waf_core::ConnectionInfo, req: &waf_bench::Request) -> Report {
    let headers: Vec<(&[u8], &[u8])> = req
        .headers
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    let mut tx = waf.transaction(conn, std::time::SystemTime::UNIX_EPOCH);
    let head = RequestHead::new(
        req.method.as_bytes(),
        req.uri.as_bytes(),
        b"HTTP/1.1",
        &headers,
    );
    let _ = tx.request_headers(&head);
    if tx.wants_request_body() && !req.body.is_empty() {
        let _ = tx.request_body(&req.body);
    }
    let _ = tx.request_end();
    tx.finish()
}
