//! ModSecurity reference-manual semantics, end to end through [`waf_core::Waf`].
//!
//! Each file in `cases/` holds the cases of one class of behaviour (chains, regex engines,
//! update directives, ...), written from the ModSecurity reference manual (v2 and v3
//! behaviour as documented), not copied from any test suite. A case is a rule set, one
//! request (and optionally a response), and what ModSecurity does with it: the final status
//! (or none: the request passes), the rule ids that matched, or the load error / warning.
//!
//! ```toml
//! [[case]]
//! name = "deny with status"
//! rules = '''
//! SecRule ARGS:q "@streq x" "id:1,phase:1,deny,status:418"
//! '''
//! uri = "/?q=x"
//! status = 418
//! ids = [1]
//! ```
//!
//! Rules get `SecRuleEngine On` prepended unless the case sets `engine = false`; `@DATA@`
//! is replaced by the path of `tests/modsec_manual/data` (our own data and map files). `body`
//! strings are TOML strings, so `\r\n` and `\u0000` escapes work.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use waf_core::{ConnectionInfo, DisruptiveAction, RequestHead, ResponseHead, Verdict, Waf};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    case: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    rules: String,
    /// Prepend `SecRuleEngine On` (default true).
    #[serde(default = "yes")]
    engine: bool,
    #[serde(default = "get")]
    method: String,
    #[serde(default = "root")]
    uri: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
    /// Response status, content type and body; phases 3 and 4 run only when given.
    #[serde(default)]
    response: Option<Response>,
    /// Expected status of the intervention; absent: the transaction passes.
    #[serde(default)]
    status: Option<u16>,
    /// Expected redirect target.
    #[serde(default)]
    redirect: Option<String>,
    /// Expected matched rule ids, in order (checked when given).
    #[serde(default)]
    ids: Option<Vec<u64>>,
    /// The rules must fail to load with a message containing this text.
    #[serde(default)]
    load_error: Option<String>,
    /// Some load warning must contain this text.
    #[serde(default)]
    warning: Option<String>,
    /// Expected matched rule messages (`msg`, expanded), in order of `ids`.
    #[serde(default)]
    messages: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    #[serde(default = "ok")]
    status: u16,
    #[serde(default = "plain")]
    content_type: String,
    #[serde(default)]
    body: String,
}

fn yes() -> bool {
    true
}
fn get() -> String {
    "GET".into()
}
fn root() -> String {
    "/".into()
}
fn ok() -> u16 {
    200
}
fn plain() -> String {
    "text/plain".into()
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modsec_manual/cases")
}

/// Runs every case of one file; fails listing every case that did not behave.
fn run_file(name: &str) {
    let path = cases_dir().join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let file: File = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!file.case.is_empty(), "{name}: no cases");
    let mut failures = Vec::new();
    for case in &file.case {
        if let Err(why) = run_case(case) {
            failures.push(format!("  {}: {why}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {} cases failed:\n{}",
        failures.len(),
        file.case.len(),
        failures.join("\n")
    );
}

fn run_case(case: &Case) -> Result<(), String> {
    let rules = if case.engine {
        format!("SecRuleEngine On\n{}", case.rules)
    } else {
        case.rules.clone()
    };
    // Rule files named relative to the cases directory (data files, unicode maps).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modsec_manual/data");
    let rules = rules.replace("@DATA@", &data.display().to_string());
    let built = Waf::builder().seclang("case.conf", rules).build();
    let waf = match (built, &case.load_error) {
        (Err(e), Some(want)) => {
            let text = e.to_string();
            return if text.contains(want.as_str()) {
                if e.location().is_none() {
                    Err(format!("load error has no location: {text}"))
                } else {
                    Ok(())
                }
            } else {
                Err(format!("load error {text:?} does not contain {want:?}"))
            };
        }
        (Err(e), None) => return Err(format!("rules failed to load: {e}")),
        (Ok(_), Some(want)) => return Err(format!("rules loaded; expected error {want:?}")),
        (Ok(w), None) => w,
    };
    if let Some(want) = &case.warning {
        if !waf
            .warnings()
            .iter()
            .any(|w| w.message.contains(want.as_str()))
        {
            let got: Vec<&str> = waf.warnings().iter().map(|w| w.message.as_str()).collect();
            return Err(format!("no warning contains {want:?}; warnings: {got:?}"));
        }
    }
    let (verdict, report) = transact(&waf, case);
    let got_status = verdict.as_ref().map(|i| i.status);
    if got_status != case.status {
        return Err(format!(
            "status {got_status:?}, expected {:?} (matched {:?})",
            case.status,
            report
                .matched_rules
                .iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        ));
    }
    if let Some(want) = &case.redirect {
        match verdict.as_ref().map(|i| &i.action) {
            Some(DisruptiveAction::Redirect(url)) if url == want => {}
            other => return Err(format!("redirect {other:?}, expected {want:?}")),
        }
    }
    if let Some(want) = &case.ids {
        let got: Vec<u64> = report.matched_rules.iter().map(|r| r.id).collect();
        if &got != want {
            return Err(format!("matched ids {got:?}, expected {want:?}"));
        }
    }
    if let Some(want) = &case.messages {
        let got: Vec<String> = report
            .matched_rules
            .iter()
            .map(|r| r.message.clone().unwrap_or_default())
            .collect();
        if &got != want {
            return Err(format!("messages {got:?}, expected {want:?}"));
        }
    }
    Ok(())
}

/// One transaction, stopping at the first intervention.
fn transact(waf: &Waf, case: &Case) -> (Option<waf_core::Intervention>, waf_core::Report) {
    let conn = ConnectionInfo::new(
        "192.0.2.7:50000".parse().expect("literal address"),
        "127.0.0.1:80".parse().expect("literal address"),
    );
    let mut headers: Vec<(&[u8], &[u8])> = case
        .headers
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    if !case
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("host"))
    {
        headers.push((b"Host", b"example.com"));
    }
    let length = case.body.len().to_string();
    if !case.body.is_empty()
        && !case
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        headers.push((b"Content-Length", length.as_bytes()));
    }
    let mut tx = waf.transaction(
        &conn,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_035_260),
    );
    let stop = |v: Verdict| v.intervention().cloned();
    let mut out = stop(tx.request_headers(&RequestHead::new(
        case.method.as_bytes(),
        case.uri.as_bytes(),
        b"HTTP/1.1",
        &headers,
    )));
    if out.is_none() && tx.wants_request_body() && !case.body.is_empty() {
        out = stop(tx.request_body(case.body.as_bytes()));
    }
    if out.is_none() {
        out = stop(tx.request_end());
    }
    if let (None, Some(r)) = (&out, &case.response) {
        let rh: [(&[u8], &[u8]); 1] = [(b"Content-Type", r.content_type.as_bytes())];
        out = stop(tx.response_headers(&ResponseHead::new(r.status, b"HTTP/1.1", &rh)));
        if out.is_none() && tx.wants_response_body() && !r.body.is_empty() {
            out = stop(tx.response_body(r.body.as_bytes()));
        }
        if out.is_none() {
            out = stop(tx.response_end());
        }
    }
    (out, tx.finish())
}

macro_rules! class {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_file(stringify!($name));
            }
        )*
    };
}

class!(
    body,
    chain,
    default_action,
    macros,
    refused,
    regex,
    unicode,
    update,
    xml
);

/// CRS v4 is written for RE2: every one of its patterns, operator and key regex alike, must
/// stay on the linear-time engine (the backtracking one is only for users' own rules).
#[test]
fn crs_keeps_the_linear_engine() {
    let crs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs");
    let crs = std::env::var_os("CRS_DIR").map_or(crs, PathBuf::from);
    assert!(
        crs.join("rules").is_dir(),
        "CRS rules not found at {} (set CRS_DIR)",
        crs.display()
    );
    let waf = Waf::builder()
        .seclang_file(crs.join("crs-setup.conf.example"))
        .seclang_glob(crs.join("rules/*.conf").display().to_string())
        .build()
        .unwrap_or_else(|e| panic!("CRS failed to load: {e}"));
    assert!(
        waf.rule_count() > 500,
        "only {} CRS rules",
        waf.rule_count()
    );
    let backtracking: Vec<String> = waf
        .warnings()
        .iter()
        .filter(|w| w.message.contains("backtracking engine"))
        .map(|w| format!("{:?}: {}", w.location, w.message))
        .collect();
    assert!(
        backtracking.is_empty(),
        "CRS patterns on the backtracking engine:\n{}",
        backtracking.join("\n")
    );
}

/// `docs/COMPATIBILITY.md` cannot drift: every row's example is loaded, a refused row must
/// fail as unsupported and every other row must load, and the counts line must match.
#[test]
fn compatibility_table_matches_the_engine() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/COMPATIBILITY.md");
    let doc = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/modsec_manual/data");
    let mut section = "";
    let (mut supported, mut differs, mut refused) = (0, 0, 0);
    // Per kind: (supported, differs, refused).
    let mut per_kind: std::collections::BTreeMap<&str, (u32, u32, u32)> = Default::default();
    let mut problems = Vec::new();
    for line in doc.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = match h {
                "Directives" => "directive",
                "Variables" => "variable",
                "Operators" => "operator",
                "Transformations" => "transformation",
                "Actions" => "action",
                other => panic!("unexpected section {other:?}"),
            };
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split(" | ")
            .map(str::trim)
            .collect();
        let [name, status, example, _note] = cells[..] else {
            panic!("malformed row: {line}");
        };
        let example = example
            .trim_matches('`')
            .replace("@DATA@", &data.display().to_string());
        let rule = match section {
            "directive" => example.clone(),
            "variable" => format!("SecRule {example} \"@rx x\" \"id:1,phase:2,pass\""),
            "operator" => format!("SecRule ARGS \"{example}\" \"id:1,phase:2,pass\""),
            "transformation" => format!("SecRule ARGS \"@rx x\" \"id:1,phase:2,pass,t:{example}\""),
            "action" => format!("SecRule ARGS \"@rx x\" \"id:1,phase:2,pass,{example}\""),
            _ => panic!("row before any section: {line}"),
        };
        let built = Waf::builder()
            .seclang("compat.conf", format!("SecRuleEngine On\n{rule}\n"))
            .build();
        let tally = per_kind.entry(section).or_default();
        match status {
            "supported" => tally.0 += 1,
            "differs" => tally.1 += 1,
            _ => tally.2 += 1,
        }
        match (status, built) {
            ("refused", Err(e)) if e.kind() == waf_core::ErrorKind::Unsupported => refused += 1,
            ("refused", Err(e)) => {
                problems.push(format!("{section} {name}: refused as {:?}: {e}", e.kind()))
            }
            ("refused", Ok(_)) => problems.push(format!("{section} {name}: listed refused, loads")),
            ("supported" | "differs", Err(e)) => {
                problems.push(format!("{section} {name}: listed {status}, refused: {e}"))
            }
            ("supported", Ok(_)) => supported += 1,
            ("differs", Ok(_)) => differs += 1,
            (other, _) => problems.push(format!("{section} {name}: unknown status {other:?}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let counts = format!(
        "Counts: {} entries: {supported} supported, {differs} differs, {refused} refused.",
        supported + differs + refused
    );
    assert!(
        doc.contains(&counts),
        "the counts line should read {counts:?}"
    );
    for (kind, (s, d, r)) in per_kind {
        let row = format!("| {kind}s | {s} | {d} | {r} |");
        assert!(doc.contains(&row), "the counts table should have {row:?}");
    }
}
