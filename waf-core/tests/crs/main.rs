//! The OWASP CRS regression suite, in-process: `cargo test -p waf-core --release --test crs`.
//!
//! Does what go-ftw and albedo do over the network (crs-tests.md §3), without sockets:
//! builds each stage's request as go-ftw would, hands it to a `Transaction` as a server
//! would, answers as albedo would, and checks the rules the report says were logged.
//!
//! Configuration (crs-tests.md §4): Coraza's `coraza.conf-recommended` (Coraza-only
//! directives dropped), our snippet ([`TEST_SETUP`]: response MIME types, default actions
//! for phases 3-5, rule 900005 from `tests/regression/README.md`), `crs-setup.conf.example`,
//! then `rules/*.conf`.
//!
//! Environment:
//! - `CRS_DIR`: the CRS checkout (default `../shared/crs` beside the workspace);
//! - `CRS_TEST=942100`: run only tests whose id (`942100-3`) starts with this;
//! - `CRS_VERBOSE=1`: for each failing test, the request, the response and expected vs
//!   logged ids;
//! - `CRS_DUMP=FILE`: also write every stage (the request as the WAF gets it, albedo's
//!   answer, the expectations) as JSON lines, to replay them against another engine
//!   (libmodsecurity as a differential oracle, crs-tests.md §6).
//!
//! How we know the harness is right: besides [`selftest`], the stages written by `CRS_DUMP`
//! were replayed through libmodsecurity 3.0.9 (Debian's `libmodsecurity3`, via ctypes,
//! same configuration): 4,897 passed, 48 failed, 21 skipped. Every failure is explained:
//! 35 are libmodsecurity-3 differences CRS lists in `nginx-overrides.yaml` (944100/110/120/210
//! XML `REQUEST_BODY`, 942131, 980170), 9 are 922110 false positives of 3.0.9, and 4 are
//! the entries of `known_differences.yaml`.
//!
//! The last line is `crs: N passed, M failed, K skipped` (M counts known failures too). The
//! exit code is non-zero iff a test failed that `known_differences.yaml` does not list. The
//! harness's own unit tests ([`selftest`]) run first and stop the run if one fails.

mod albedo;
mod goftw;
mod http1;
mod known;
mod logline;
mod run;
mod selftest;
mod suite;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use waf_core::Waf;

use crate::run::PreparedStage;

/// Our part of the configuration, loaded after the engine base config and before CRS.
const TEST_SETUP: &str = r#"
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecDefaultAction "phase:3,log,auditlog,pass"
SecDefaultAction "phase:4,log,auditlog,pass"
SecDefaultAction "phase:5,log,auditlog,pass"
SecAction "id:900005,\
  phase:1,\
  nolog,\
  pass,\
  ctl:ruleEngine=DetectionOnly,\
  ctl:ruleRemoveById=910000,\
  setvar:tx.blocking_paranoia_level=4,\
  setvar:tx.crs_validate_utf8_encoding=1,\
  setvar:tx.arg_name_length=100,\
  setvar:tx.arg_length=400,\
  setvar:tx.total_arg_length=64000,\
  setvar:tx.max_num_args=255,\
  setvar:tx.max_file_size=64100,\
  setvar:tx.combined_file_sizes=65535"
"#;

/// Directives of `coraza.conf-recommended` that only Coraza knows; ModSecurity has no
/// equivalent, so they are left out of the base configuration.
const CORAZA_ONLY: &[&str] = &["SecRxPreFilter"];

/// Most unexpected failures printed.
const MAX_FAILURE_LINES: usize = 200;

const DEFAULT_CRS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs");
const KNOWN_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/crs/known_differences.yaml"
);

fn main() -> ExitCode {
    let started = Instant::now();

    let failures = selftest::run();
    if !failures.is_empty() {
        for f in &failures {
            println!("crs: self-test failed: {f}");
        }
        println!(
            "crs: {} harness self-tests failed; suite not run",
            failures.len()
        );
        return ExitCode::FAILURE;
    }
    println!("crs: harness self-tests passed ({})", selftest::COUNT);

    match run_suite(started) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("crs: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One test (one `tests[]` entry): its stages, run in order.
struct Job {
    id: String,
    /// `desc` of the test and the file it is in, for `CRS_VERBOSE`.
    desc: String,
    file: String,
    stages: Vec<PreparedStage>,
}

enum TestResult {
    Passed,
    Skipped,
    Failed { why: String, verbose: String },
}

fn run_suite(started: Instant) -> Result<bool, String> {
    let crs_dir =
        PathBuf::from(std::env::var("CRS_DIR").unwrap_or_else(|_| DEFAULT_CRS_DIR.into()));
    let filter = std::env::var("CRS_TEST").ok().filter(|s| !s.is_empty());
    let verbose = std::env::var("CRS_VERBOSE").is_ok_and(|v| !v.is_empty() && v != "0");

    let known_text =
        std::fs::read_to_string(KNOWN_FILE).map_err(|e| format!("{KNOWN_FILE}: {e}"))?;
    let known = known::parse(&known_text)?;

    // Tests.
    let tests_dir = crs_dir.join("tests/regression/tests");
    let (files, comment_only) = suite::load_dir(&tests_dir)?;
    let mut unknown = BTreeMap::new();
    let mut jobs = Vec::new();
    let mut build_errors = Vec::new();
    let (mut n_tests, mut n_stages) = (0usize, 0usize);
    for lf in &files {
        suite::unknown_fields(&lf.file, &mut unknown);
        for t in &lf.file.tests {
            n_tests += 1;
            n_stages += t.stages.len();
            let id = format!("{}-{}", lf.file.rule_id, t.test_id);
            let mut stages = Vec::new();
            for (i, s) in t.stages.iter().enumerate() {
                match run::prepare(s) {
                    Ok(p) => stages.push(p),
                    Err(e) => build_errors.push(format!("{id} stage {}: {e}", i + 1)),
                }
            }
            jobs.push(Job {
                id,
                desc: t.desc.clone().unwrap_or_default(),
                file: lf.path.display().to_string(),
                stages,
            });
        }
    }
    let tests_dir = tests_dir.canonicalize().unwrap_or(tests_dir);
    println!(
        "crs: {} files ({} comment-only), {n_tests} tests, {n_stages} stages from {}",
        files.len() + comment_only.len(),
        comment_only.len(),
        tests_dir.display()
    );
    for (field, count) in &unknown {
        println!("crs: warning: unknown field {field} ignored ({count}x)");
    }
    if !build_errors.is_empty() {
        for e in &build_errors {
            println!("crs: cannot build request: {e}");
        }
        return Err(format!("{} stages could not be built", build_errors.len()));
    }
    let ids: std::collections::HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    if jobs.len() != ids.len() {
        return Err("duplicate test ids in the suite".into());
    }
    for id in known.keys() {
        if !ids.contains(id.as_str()) {
            return Err(format!(
                "known differences: {id} is not a test of this suite"
            ));
        }
    }

    if let Ok(path) = std::env::var("CRS_DUMP") {
        dump(&jobs, &path)?;
        println!("crs: wrote every stage to {path} (CRS_DUMP)");
    }

    if let Some(f) = &filter {
        jobs.retain(|j| j.id.starts_with(f.as_str()));
        println!("crs: CRS_TEST={f}: {} tests selected", jobs.len());
    }

    // Rules.
    let waf = match load_waf(&crs_dir) {
        Ok(w) => w,
        Err(e) => {
            println!("crs: cannot load rules: {e}");
            let skipped = jobs
                .iter()
                .filter(|j| j.stages.iter().all(|s| s.check.is_none()))
                .count();
            println!(
                "crs: 0 passed, {} failed, {skipped} skipped",
                jobs.len() - skipped
            );
            return Ok(false);
        }
    };

    // Run.
    let results = run_parallel(&waf, &jobs, verbose);

    // Report.
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    let mut unexpected = Vec::new();
    let mut stale = Vec::new();
    let mut verbose_out = String::new();
    for (job, result) in jobs.iter().zip(&results) {
        let is_known = known.get(&job.id);
        match result {
            TestResult::Passed => {
                passed += 1;
                if is_known.is_some() {
                    stale.push(job.id.as_str());
                }
            }
            TestResult::Skipped => skipped += 1,
            TestResult::Failed { why, verbose: v } => {
                failed += 1;
                if is_known.is_none() {
                    unexpected.push(format!("{}: {why}", job.id));
                }
                if verbose {
                    let tag = if is_known.is_some() { " (known)" } else { "" };
                    verbose_out.push_str(&format!(
                        "--- {}{tag}: {why}\n    {} ({})\n{v}",
                        job.id,
                        job.desc.lines().next().unwrap_or(""),
                        job.file
                    ));
                }
            }
        }
    }
    if verbose {
        print!("{verbose_out}");
    }
    for line in unexpected.iter().take(MAX_FAILURE_LINES) {
        println!("crs: FAIL {line}");
    }
    if unexpected.len() > MAX_FAILURE_LINES {
        println!(
            "crs: ... and {} more unexpected failures",
            unexpected.len() - MAX_FAILURE_LINES
        );
    }
    if !stale.is_empty() {
        println!(
            "crs: warning: {} known differences now pass (stale entries in known_differences.yaml): {}",
            stale.len(),
            stale.join(", ")
        );
    }
    println!(
        "crs: {} unexpected failures, {} known failures; suite took {:.2} s",
        unexpected.len(),
        failed - unexpected.len(),
        started.elapsed().as_secs_f64()
    );
    println!("crs: {passed} passed, {failed} failed, {skipped} skipped");
    Ok(unexpected.is_empty())
}

/// The scan back-end under test: Hyperscan in a build with waf-core's `hyperscan` feature
/// (`cargo test -p waf-core --release --features hyperscan --test crs`), else the default.
fn backend() -> waf_core::ScanBackend {
    if waf_core::ScanBackend::HYPERSCAN_AVAILABLE {
        waf_core::ScanBackend::Hyperscan
    } else {
        waf_core::ScanBackend::Literals
    }
}

fn load_waf(crs_dir: &std::path::Path) -> Result<Waf, String> {
    let started = Instant::now();
    let base_path = crs_dir.join("reference/coraza/coraza.conf-recommended");
    let base =
        std::fs::read_to_string(&base_path).map_err(|e| format!("{}: {e}", base_path.display()))?;
    let (base, dropped) = drop_directives(&base, CORAZA_ONLY);
    for d in dropped {
        println!("crs: base config: left out Coraza-only directive: {d}");
    }
    let waf = Waf::builder()
        .seclang(base_path.display().to_string(), base)
        .seclang("crs-test-setup", TEST_SETUP)
        .seclang_file(crs_dir.join("crs-setup.conf.example"))
        .seclang_glob(crs_dir.join("rules/*.conf").display().to_string())
        .scan_backend(backend())
        .build()
        .map_err(|e| e.to_string())?;
    println!(
        "crs: loaded {} rules in {} ms ({:?} scan back-end)",
        waf.rule_count(),
        started.elapsed().as_millis(),
        backend()
    );
    for w in waf.warnings() {
        println!("crs: load {w}");
    }
    Ok(waf)
}

/// Comments out lines whose directive is in `names` (these directives are one-liners).
/// Returns the new text, with line numbers kept, and the lines left out.
fn drop_directives(text: &str, names: &[&str]) -> (String, Vec<String>) {
    let mut dropped = Vec::new();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if names.iter().any(|n| n.eq_ignore_ascii_case(first)) {
            dropped.push(line.trim().to_string());
            out.push_str("# (left out by the CRS harness) ");
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, dropped)
}

/// Runs every job on `available_parallelism` threads; results in job order.
fn run_parallel(waf: &Waf, jobs: &[Job], verbose: bool) -> Vec<TestResult> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<TestResult>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let waf = waf.clone();
            let (next, results) = (&next, &results);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = run_job(&waf, job, verbose);
                // A poisoned lock means another worker panicked; the scope re-raises it.
                results.lock().expect("results lock")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("results lock")
        .into_iter()
        // Every index below jobs.len() was taken by exactly one worker.
        .map(|r| r.expect("every job ran"))
        .collect()
}

fn run_job(waf: &Waf, job: &Job, verbose: bool) -> TestResult {
    let mut ran = false;
    for (n, stage) in job.stages.iter().enumerate() {
        let Some(check) = &stage.check else { continue };
        ran = true;
        let attempts = if stage.retry_once { 2 } else { 1 };
        let mut last = None;
        for _ in 0..attempts {
            let out = run::drive(waf, &stage.request, stage.server);
            let why = check.check(&out.ids(), &out.lines());
            if why.is_empty() {
                last = None;
                break;
            }
            last = Some((why, out));
        }
        if let Some((why, out)) = last {
            let prefix = if job.stages.len() > 1 {
                format!("stage {}: ", n + 1)
            } else {
                String::new()
            };
            let mut v = String::new();
            if verbose {
                v.push_str(&run::summary(&stage.request, &out));
                v.push_str(&format!(
                    "    expected: {:?}  not expected: {:?}\n    logged:   {:?}\n",
                    check.expect_ids,
                    check.no_expect_ids,
                    out.ids()
                ));
                for l in out.lines() {
                    v.push_str(&format!("      {l}\n"));
                }
            }
            return TestResult::Failed {
                why: format!("{prefix}{}", why.join("; ")),
                verbose: v,
            };
        }
    }
    if ran {
        TestResult::Passed
    } else {
        TestResult::Skipped
    }
}

/// Writes every stage as one JSON line (`CRS_DUMP`); bytes are base64.
fn dump(jobs: &[Job], path: &str) -> Result<(), String> {
    use base64::Engine as _;
    use std::io::Write as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let pairs = |h: &[(Vec<u8>, Vec<u8>)]| -> Vec<[String; 2]> {
        h.iter().map(|(n, v)| [b64(n), b64(v)]).collect()
    };
    let file = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
    let mut w = std::io::BufWriter::new(file);
    for job in jobs {
        for (n, s) in job.stages.iter().enumerate() {
            let r = &s.request;
            let resp = albedo::respond(&r.method, &r.uri, &r.body);
            let check = s.check.as_ref();
            let line = serde_json::json!({
                "test": job.id,
                "stage": n + 1,
                "checked": check.is_some(),
                "method": b64(&r.method),
                "uri": b64(&r.uri),
                "version": b64(&r.version),
                "headers": pairs(&r.headers),
                "body": b64(&r.body),
                "server": s.server.to_string(),
                "response": {
                    "status": resp.status,
                    "headers": pairs(&resp.headers),
                    "body": b64(&resp.body),
                },
                "expect_ids": check.map(|c| c.expect_ids.clone()).unwrap_or_default(),
                "no_expect_ids": check.map(|c| c.no_expect_ids.clone()).unwrap_or_default(),
                "match_regex": check.and_then(|c| c.match_regex.as_ref().map(|r| r.as_str().to_string())),
                "no_match_regex": check.and_then(|c| c.no_match_regex.as_ref().map(|r| r.as_str().to_string())),
                "retry_once": s.retry_once,
            });
            writeln!(w, "{line}").map_err(|e| format!("{path}: {e}"))?;
        }
    }
    w.flush().map_err(|e| format!("{path}: {e}"))
}
