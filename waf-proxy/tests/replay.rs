//! `replay::run` end to end on small fixtures (`tests/fixtures/`): JSON Lines with labels,
//! raw HTTP/1.1 request files, malformed input, and the output format.

use std::path::{Path, PathBuf};

use waf_proxy::replay::{self, ClassCount, ReplayOptions, ReplaySummary};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn run(opts: &ReplayOptions) -> (ReplaySummary, Vec<String>) {
    let mut out = Vec::new();
    let summary = replay::run(opts, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    (summary, text.lines().map(str::to_owned).collect())
}

fn default_opts(files: &[&str]) -> ReplayOptions {
    ReplayOptions {
        files: files.iter().map(|f| fixture(f)).collect(),
        ..Default::default()
    }
}

/// The fields of the output line for `id`.
fn line<'a>(lines: &'a [String], id: &str) -> Vec<&'a str> {
    lines
        .iter()
        .find(|l| l.split('\t').next() == Some(id))
        .unwrap_or_else(|| panic!("no line for {id} in {lines:#?}"))
        .split('\t')
        .collect()
}

#[test]
fn json_lines_one_line_per_request_and_rates() {
    let (s, lines) = run(&default_opts(&["replay.jsonl"]));

    // Labelled records: id, verdict, rule ids, label/class.
    assert_eq!(line(&lines, "t-1"), ["t-1", "pass", "-", "benign/benign"]);
    assert_eq!(line(&lines, "t-4"), ["t-4", "pass", "-", "benign/benign"]);
    // The last rule is the one that blocked: 199001 in phase 1, 199002 in phase 2.
    for (id, class, rule, blocker) in [
        ("t-2", "attack/sqli", "190100", "199002"),
        ("t-3", "attack/xss", "195110", "199002"),
        ("t-5", "attack/scanner", "120100", "199001"),
    ] {
        let f = line(&lines, id);
        assert_eq!(f[1], "block 403", "{id}");
        let rules: Vec<&str> = f[2].split(',').collect();
        assert!(rules.contains(&rule), "{id}: {rules:?}");
        assert_eq!(rules.last(), Some(&blocker), "{id}");
        assert_eq!(f[3], class);
    }
    // A line that is not JSON gets an error line named by file and line number; a record
    // without an id is named the same way, and without a label it counts in no rate.
    let bad = format!("{}:7", fixture("replay.jsonl").display());
    let f = line(&lines, &bad);
    assert_eq!(&f[1..4], ["error", "-", "-"]);
    assert!(f[4].starts_with("bad JSON"), "{f:?}");
    let unlabelled = format!("{}:8", fixture("replay.jsonl").display());
    let f = line(&lines, &unlabelled);
    assert_eq!(f[1], "block 403");
    assert_eq!(f[3], "-");

    assert_eq!(s.requests, 7);
    assert_eq!(s.errors, 1);
    assert_eq!(s.blocked, 4);
    assert_eq!(
        s.attacks,
        ClassCount {
            total: 3,
            blocked: 3
        }
    );
    assert_eq!(
        s.benign,
        ClassCount {
            total: 2,
            blocked: 0
        }
    );
    assert_eq!(
        s.classes["sqli"],
        ClassCount {
            total: 1,
            blocked: 1
        }
    );
    assert_eq!(
        s.classes["benign"],
        ClassCount {
            total: 2,
            blocked: 0
        }
    );
    assert!(!s.classes.contains_key("-"));
    assert_eq!(s.detection_rate(), 1.0);
    assert_eq!(s.false_positive_rate(), 0.0);

    // The summary follows the request lines, each line starting with '#'.
    let tail: Vec<&String> = lines.iter().skip_while(|l| !l.starts_with('#')).collect();
    assert_eq!(tail[0], "# class\ttotal\tblocked\trate");
    assert!(
        tail.contains(&&"# sqli\t1\t1\t100.00%".to_string()),
        "{tail:?}"
    );
    assert!(
        tail.contains(&&"# benign\t2\t0\t0.00%".to_string()),
        "{tail:?}"
    );
    assert_eq!(
        tail[tail.len() - 2],
        "# detection rate: 3/3 attacks blocked (100.00%)"
    );
    assert_eq!(
        tail[tail.len() - 1],
        "# false-positive rate: 0/2 benign blocked (0.00%)"
    );
    assert_eq!(lines.len(), 7 + tail.len());
}

#[test]
fn raw_http_files_one_line_each_without_rates() {
    let files = ["benign.http", "sqli.http", "chunked.http", "broken.http"];
    let (s, lines) = run(&default_opts(&files));
    let id = |f: &str| fixture(f).display().to_string();

    assert_eq!(line(&lines, &id("benign.http"))[1..], ["pass", "-", "-"]);
    // Content-Length cuts the body; the SQL comment after the quote still blocks.
    let f = line(&lines, &id("sqli.http"));
    assert_eq!(f[1], "block 403");
    // Chunks are joined before inspection: "<scr" + "ipt>" is one tag.
    let f = line(&lines, &id("chunked.http"));
    assert_eq!(f[1], "block 403");
    assert!(f[2].split(',').any(|r| r == "195110"), "{f:?}");
    let f = line(&lines, &id("broken.http"));
    assert_eq!(f[1], "error");
    assert_eq!(f[4], "no request line");

    assert_eq!(s.requests, 4);
    assert_eq!(s.errors, 1);
    assert_eq!(s.blocked, 2);
    assert_eq!(s.attacks.total + s.benign.total, 0);
    assert!(!lines.iter().any(|l| l.starts_with('#')), "{lines:?}");
}

#[test]
fn crs_directory_replays_against_crs() {
    let opts = ReplayOptions {
        crs: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs")),
        ..default_opts(&["replay.jsonl"])
    };
    let (s, lines) = run(&opts);
    let f = line(&lines, "t-3");
    assert_eq!(f[1], "block 403");
    assert!(f[2].split(',').any(|r| r == "949110"), "{f:?}");
    assert_eq!(line(&lines, "t-1")[1], "pass");
    assert_eq!(s.requests, 7);
}

#[test]
fn config_option_is_not_supported_yet() {
    let opts = ReplayOptions {
        config: Some(fixture("proxy.toml")),
        ..default_opts(&["replay.jsonl"])
    };
    let err = replay::run(&opts, &mut Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert_eq!(err.to_string(), "replay --config is not supported yet");
}

#[test]
fn unreadable_file_is_an_error_naming_it() {
    let err = replay::run(&default_opts(&["missing.jsonl"]), &mut Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("missing.jsonl"), "{err}");
}

#[test]
fn bad_crs_directory_is_an_error() {
    let opts = ReplayOptions {
        crs: Some(fixture("no-such-crs")),
        ..default_opts(&["replay.jsonl"])
    };
    let err = replay::run(&opts, &mut Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
}
