//! The plan against its oracle: `cargo test -p waf-core --test plan`.
//!
//! The engine's fast paths (prefilter scans, candidate lists, cached transformations,
//! skipped rules) must never change a result. This harness runs every request of the CRS
//! regression suite and of `../shared/datasets/dev.jsonl` through two engines built from the
//! same rules, the default one and one with [`WafBuilder::internal_reference_evaluation`]
//! (every value of every target through its transformations and operator): CRS at
//! paranoia levels 1 (blocking: evaluation stops at the first intervention) and 4
//! (detection only: every rule runs), and waf-proxy's built-in default profile
//! (`waf-proxy/profiles/default.conf`, blocking); it requires identical reports: the same matched rules (id, phase,
//! matched variable name, matched data, message, logdata), the same anomaly scores and the
//! same intervention or would-be intervention.
//!
//! In a build with the `hyperscan` feature every comparison runs once per scan back-end
//! ([`ScanBackend::Literals`] and [`ScanBackend::Hyperscan`]).
//!
//! It also checks the chunking property: any split of a request body into chunks gives the
//! same report as one chunk (split points from a fixed seed).
//!
//! Environment: `CRS_DIR` (default `../shared/crs`), `PLAN_DATASET` (default
//! `../shared/datasets/dev.jsonl`), `PLAN_LIMIT=N` (first N requests of each corpus, for a
//! quick run). The last line is `plan: N passed, M failed`; the exit code is non-zero iff
//! a request differed or a corpus is missing.

#[allow(dead_code)]
#[path = "../crs/albedo.rs"]
mod albedo;
#[allow(dead_code)]
#[path = "../crs/goftw.rs"]
mod goftw;
#[allow(dead_code)]
#[path = "../crs/http1.rs"]
mod http1;
#[allow(dead_code)]
#[path = "../crs/logline.rs"]
mod logline;
#[allow(dead_code)]
#[path = "../crs/run.rs"]
mod run;
#[allow(dead_code)]
#[path = "../crs/suite.rs"]
mod suite;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use waf_core::{ConnectionInfo, Report, RequestHead, ResponseHead, ScanBackend, Waf, WafBuilder};

use crate::http1::ParsedRequest;

const DEFAULT_CRS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs");
const DEFAULT_DATASET: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/datasets/dev.jsonl"
);

/// waf-proxy's built-in default profile, the other rule set the engine runs in production.
const DEFAULT_PROFILE: &str = include_str!("../../../waf-proxy/profiles/default.conf");

/// Differences printed at most.
const MAX_PRINTED: usize = 20;

/// One request of a corpus.
struct Case {
    name: String,
    request: ParsedRequest,
}

fn main() -> ExitCode {
    let started = Instant::now();
    let crs_dir =
        PathBuf::from(std::env::var("CRS_DIR").unwrap_or_else(|_| DEFAULT_CRS_DIR.into()));
    let dataset =
        PathBuf::from(std::env::var("PLAN_DATASET").unwrap_or_else(|_| DEFAULT_DATASET.into()));
    let limit = std::env::var("PLAN_LIMIT")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let mut cases = match crs_cases(&crs_dir) {
        Ok(c) => c,
        Err(e) => {
            println!("plan: cannot read the CRS regression tests: {e}");
            println!("plan: 0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    cases.truncate(limit);
    let n_crs = cases.len();
    match dataset_cases(&dataset) {
        Ok(mut d) => {
            d.truncate(limit);
            cases.extend(d);
        }
        Err(e) => {
            println!("plan: cannot read the dataset: {e}");
            println!("plan: 0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "plan: {} requests ({n_crs} from the CRS tests, {} from {})",
        cases.len(),
        cases.len() - n_crs,
        dataset.display()
    );

    let (mut passed, mut failed) = (0usize, 0usize);
    // PL 0 stands for waf-proxy's built-in default profile (blocking).
    // Every scan back-end this build has: results must not depend on it.
    let mut backends = vec![ScanBackend::Literals];
    if ScanBackend::HYPERSCAN_AVAILABLE {
        backends.push(ScanBackend::Hyperscan);
    }
    for (pl, blocking, backend) in [(1u8, true), (4u8, false), (0u8, true)]
        .into_iter()
        .flat_map(|(pl, b)| backends.iter().map(move |&k| (pl, b, k)))
    {
        let build = |reference: bool| {
            let mut b = match pl {
                0 => Waf::builder().seclang("default-profile", DEFAULT_PROFILE),
                _ => builder(&crs_dir, pl, blocking),
            };
            if reference {
                b = b.internal_reference_evaluation();
            }
            b.scan_backend(backend).build()
        };
        let (plan, oracle) = match (build(false), build(true)) {
            (Ok(p), Ok(o)) => (p, o),
            (Err(e), _) | (_, Err(e)) => {
                println!("plan: cannot load CRS: {e}");
                println!("plan: {passed} passed, {} failed", failed + 1);
                return ExitCode::FAILURE;
            }
        };
        let diffs = run_parallel(&cases, |case, i| {
            let want = drive(&oracle, &case.request, None);
            let got = drive(&plan, &case.request, None);
            if got != want {
                return Some(format!(
                    "PL{pl}: {}: plan and oracle differ\n{}",
                    case.name,
                    describe(&got, &want)
                ));
            }
            // Chunking: a body split at seeded points gives the same report.
            if case.request.body.len() > 1 {
                let chunked = drive(&plan, &case.request, Some(i as u64 + u64::from(pl)));
                if chunked != got {
                    return Some(format!(
                        "PL{pl}: {}: the body in chunks gives another report\n{}",
                        case.name,
                        describe(&chunked, &got)
                    ));
                }
            }
            None
        });
        let bad = diffs.iter().filter(|d| d.is_some()).count();
        for d in diffs.iter().flatten().take(MAX_PRINTED) {
            println!("plan: FAIL {d}");
        }
        println!(
            "plan: {} ({}, {backend:?} back-end): {} requests, {bad} differ",
            if pl == 0 {
                "default profile".to_string()
            } else {
                format!("CRS PL{pl}")
            },
            if blocking {
                "blocking"
            } else {
                "detection only"
            },
            cases.len()
        );
        failed += bad;
        passed += cases.len() - bad;
    }
    println!("plan: took {:.1} s", started.elapsed().as_secs_f64());
    println!("plan: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// CRS at `pl`, blocking or detection only, with response bodies inspected.
fn builder(crs_dir: &Path, pl: u8, blocking: bool) -> WafBuilder {
    let engine = if blocking { "On" } else { "DetectionOnly" };
    let setup = format!(
        r#"
SecRuleEngine {engine}
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 131072
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecDefaultAction "phase:1,log,auditlog,pass"
SecDefaultAction "phase:2,log,auditlog,pass"
SecAction "id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level={pl}"
"#
    );
    Waf::builder()
        .seclang("plan-setup", setup)
        .seclang_file(crs_dir.join("crs-setup.conf.example"))
        .seclang_glob(crs_dir.join("rules/*.conf").display().to_string())
}

/// Runs one request through `waf` and returns its report. With `split`, the body goes in
/// chunks whose sizes come from that seed; otherwise in one chunk.
fn drive(waf: &Waf, req: &ParsedRequest, split: Option<u64>) -> Report {
    let client = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 50000);
    let server = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 80);
    let conn = ConnectionInfo::new(client, server);
    let mut tx = waf.transaction_with_id(&conn, run::fixed_now(), "plan-test");
    'phases: {
        let headers: Vec<(&[u8], &[u8])> = req
            .headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        let head = RequestHead::new(&req.method, &req.uri, &req.version, &headers);
        if tx.request_headers(&head).intervention().is_some() {
            break 'phases;
        }
        if tx.wants_request_body() {
            let mut rest = &req.body[..];
            let mut seed = split.unwrap_or(0);
            while !rest.is_empty() {
                let n = match split {
                    None => rest.len(),
                    Some(_) => {
                        seed = seed
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        1 + (seed >> 33) as usize % rest.len().min(97)
                    }
                };
                let (chunk, tail) = rest.split_at(n);
                rest = tail;
                if tx.request_body(chunk).intervention().is_some() {
                    break 'phases;
                }
            }
        }
        if tx.request_end().intervention().is_some() {
            break 'phases;
        }
        let resp = albedo::respond(&req.method, &req.uri, &req.body);
        let rheaders: Vec<(&[u8], &[u8])> = resp
            .headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        let rhead = ResponseHead::new(resp.status, b"HTTP/1.1", &rheaders);
        if tx.response_headers(&rhead).intervention().is_some() {
            break 'phases;
        }
        if tx.wants_response_body()
            && !resp.body.is_empty()
            && tx.response_body(&resp.body).intervention().is_some()
        {
            break 'phases;
        }
        let _ = tx.response_end();
    }
    tx.finish()
}

/// What differs between two reports, for the failure message.
fn describe(got: &Report, want: &Report) -> String {
    let line = |r: &waf_core::MatchedRule| {
        format!(
            "{} p{} {} = {:?} msg={:?} data={:?}",
            r.id, r.phase, r.matched_var_name, r.matched_data, r.message, r.data
        )
    };
    let got_lines: Vec<String> = got.matched_rules.iter().map(line).collect();
    let want_lines: Vec<String> = want.matched_rules.iter().map(line).collect();
    let mut s = String::new();
    for l in got_lines.iter().filter(|l| !want_lines.contains(l)) {
        s.push_str(&format!("    only in plan:   {l}\n"));
    }
    for l in want_lines.iter().filter(|l| !got_lines.contains(l)) {
        s.push_str(&format!("    only in oracle: {l}\n"));
    }
    s.push_str(&format!(
        "    scores in/out: {}/{} vs {}/{}; intervention {:?} vs {:?}; would {:?} vs {:?}",
        got.inbound_anomaly_score,
        got.outbound_anomaly_score,
        want.inbound_anomaly_score,
        want.outbound_anomaly_score,
        got.intervention.as_ref().map(|i| (i.status, i.rule_id)),
        want.intervention.as_ref().map(|i| (i.status, i.rule_id)),
        got.would_intervene.as_ref().map(|i| (i.status, i.rule_id)),
        want.would_intervene.as_ref().map(|i| (i.status, i.rule_id)),
    ));
    s
}

/// Every stage of the CRS regression tests, as the server received it.
fn crs_cases(crs_dir: &Path) -> Result<Vec<Case>, String> {
    let (files, _) = suite::load_dir(&crs_dir.join("tests/regression/tests"))?;
    let mut cases = Vec::new();
    for lf in &files {
        for t in &lf.file.tests {
            for (i, s) in t.stages.iter().enumerate() {
                let p = run::prepare(s)?;
                cases.push(Case {
                    name: format!("crs {}-{} stage {}", lf.file.rule_id, t.test_id, i + 1),
                    request: p.request,
                });
            }
        }
    }
    if cases.is_empty() {
        return Err(format!("no tests under {}", crs_dir.display()));
    }
    Ok(cases)
}

/// Every record of the dataset, as a request (the format is in its README).
fn dataset_cases(path: &Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
        let s = |k: &str| v[k].as_str().unwrap_or_default();
        let mut uri = s("path").as_bytes().to_vec();
        if !s("query").is_empty() {
            uri.push(b'?');
            uri.extend_from_slice(s("query").as_bytes());
        }
        let body = s("body").as_bytes().to_vec();
        let mut headers: Vec<(Vec<u8>, Vec<u8>)> = v["headers"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| {
                        (
                            k.as_bytes().to_vec(),
                            v.as_str().unwrap_or_default().as_bytes().to_vec(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !body.is_empty()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(b"content-length"))
        {
            headers.push((
                b"Content-Length".to_vec(),
                body.len().to_string().into_bytes(),
            ));
        }
        cases.push(Case {
            name: format!("dataset {}", s("id")),
            request: ParsedRequest {
                method: s("method").as_bytes().to_vec(),
                uri,
                version: b"HTTP/1.1".to_vec(),
                headers,
                body,
                framing: http1::Framing::Length {
                    declared: 0,
                    dropped: 0,
                },
            },
        });
    }
    if cases.is_empty() {
        return Err(format!("{} holds no request", path.display()));
    }
    Ok(cases)
}

/// Runs `f` over every case on `available_parallelism` threads; results in case order.
fn run_parallel(
    cases: &[Case],
    f: impl Fn(&Case, usize) -> Option<String> + Sync,
) -> Vec<Option<String>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<String>>> = Mutex::new(vec![None; cases.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (next, results, f) = (&next, &results, &f);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                let r = f(case, i);
                // A poisoned lock means another worker panicked; the scope re-raises it.
                results.lock().expect("results lock")[i] = r;
            });
        }
    });
    results.into_inner().expect("results lock")
}
