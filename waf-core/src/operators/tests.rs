//! The ModSecurity operator vectors (secrules-language-tests format, as shipped with Coraza:
//! `testdata/operators/*.json`), run against every operator we implement.
//!
//! Each case gives `name`, `param`, `input`, `ret` (1 = match) and sometimes `re_groups`
//! (the expected `TX.0..` captures). Each case runs twice, with and without a capture
//! buffer, and both runs must agree with `ret`.
//!
//! Input decoding follows the ModSecurity/Coraza harnesses: the JSON string becomes UTF-8
//! bytes, then the text escapes `\u0000` (NUL) and `\xNN` (a raw byte) are decoded, since
//! JSON cannot carry invalid UTF-8. Data files (`@pmFromFile`) are looked up in the `op/`
//! folder next to the vectors, as Coraza does.
//!
//! Nothing from the test data is copied into this repository: the vectors are read from the
//! shared checkout, and the test is skipped (with a message) when that checkout is absent.

use std::path::{Path, PathBuf};

use super::test_support::NO_MACROS;
use super::{Captures, Operator, OperatorError};

/// Where the vectors live, relative to the workspace.
const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/crs/reference/coraza/testdata/operators"
);

/// Operators in the vectors that we do not implement, with the reason.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "validateSchema",
        "JSON/XML schema validation is not implemented (not used by CRS)",
    ),
    (
        "validateNid",
        "a ModSecurity v2 operator (not in v3), not used by CRS",
    ),
];

/// Cases whose argument we reject at load time on purpose, while ModSecurity/Coraza accept
/// it and never match: `(operator, param, reason)`. Expecting a load error counts as a pass
/// only when the vector says "no match".
const EXPECTED_LOAD_ERRORS: &[(&str, &str, &str)] = &[(
    "ipMatch",
    "10.0.0.0/100",
    "an IPv4 prefix longer than 32 is a typo; Coraza skips the entry silently",
)];

/// Total number of vectors in the shared checkout; a change means the data moved.
const EXPECTED_TOTAL: usize = 3934;

/// One vector.
#[derive(Debug, serde::Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    param: String,
    input: String,
    ret: u8,
    #[serde(default)]
    re_groups: Option<Vec<String>>,
    #[serde(rename = "type")]
    _kind: String,
}

/// Decodes the text escapes `\u0000` and `\xNN` the harnesses decode; everything else is
/// kept as is.
fn decode_input(input: &str) -> Vec<u8> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i..].starts_with(b"\\u0000") {
                out.push(0);
                i += 6;
                continue;
            }
            if bytes.get(i + 1) == Some(&b'x') {
                if let Some(hex) = bytes.get(i + 2..i + 4) {
                    if let Ok(b) = u8::from_str_radix(std::str::from_utf8(hex).unwrap_or("zz"), 16)
                    {
                        out.push(b);
                        i += 4;
                        continue;
                    }
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// The files of `dir` whose name ends in `.extension`, sorted.
fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

fn load_cases(dir: &Path) -> Vec<(String, Case)> {
    let files = files_with_extension(dir, "json");
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("vector file is readable");
        let parsed: Vec<Case> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
        cases.extend(parsed.into_iter().map(|c| (file_name.clone(), c)));
    }
    cases
}

#[test]
fn modsecurity_operator_vectors() {
    let dir = Path::new(VECTORS);
    assert!(
        dir.is_dir(),
        "operator vectors missing at {} (the shared ModSecurity checkout beside the repo)",
        dir.display()
    );
    let data_dir = dir.join("op");
    let cases = load_cases(dir);
    assert_eq!(cases.len(), EXPECTED_TOTAL, "the vector set changed");

    let mut passed = 0;
    let mut passed_as_load_error = 0;
    let mut skipped: std::collections::BTreeMap<String, (usize, String)> = Default::default();
    let mut missing_data: std::collections::BTreeMap<String, (usize, String)> = Default::default();
    let mut failures = Vec::new();

    for (file, case) in &cases {
        if let Some((_, why)) = UNSUPPORTED
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&case.name))
        {
            // The operator must say it is unsupported, not crash or claim support.
            let err = Operator::compile(&case.name, &case.param, Some(&data_dir))
                .expect_err("operator listed as unsupported compiled");
            assert!(matches!(err, OperatorError::Unsupported(_)), "{err}");
            assert!(err.to_string().starts_with("unsupported operator"), "{err}");
            skipped
                .entry(case.name.clone())
                .or_insert((0, why.to_string()))
                .0 += 1;
            continue;
        }
        let label = format!(
            "{file}: @{} {:?} on {:?} (expected ret {})",
            case.name, case.param, case.input, case.ret
        );
        let op = match Operator::compile(&case.name, &case.param, Some(&data_dir)) {
            Ok(op) => op,
            Err(err) => {
                let err = err.to_string();
                let expected = EXPECTED_LOAD_ERRORS
                    .iter()
                    .any(|(name, param, _)| *name == case.name && *param == case.param);
                if expected && case.ret == 0 {
                    passed_as_load_error += 1;
                } else if err.contains("cannot read data file") {
                    // The shared checkout may lack the `op/` data files: not our failure.
                    let entry = missing_data
                        .entry(case.name.clone())
                        .or_insert((0, err.clone()));
                    entry.0 += 1;
                } else {
                    failures.push(format!("{label}: load error {err}"));
                }
                continue;
            }
        };
        let input = decode_input(&case.input);
        let expected = case.ret == 1;

        let plain = op.evaluate(&input, &NO_MACROS, None);
        let mut captures = Captures::with_groups(vec![b"stale".to_vec()]);
        let captured = op.evaluate(&input, &NO_MACROS, Some(&mut captures));
        if plain != expected || captured != expected {
            failures.push(format!(
                "{label}: got {plain} without capture, {captured} with capture"
            ));
            continue;
        }
        if let Some(groups) = &case.re_groups {
            let want: Vec<Vec<u8>> = groups.iter().map(|g| decode_input(g)).collect();
            if captures.groups != want {
                failures.push(format!(
                    "{label}: captures {:?}, expected {want:?}",
                    captures
                        .groups
                        .iter()
                        .map(|g| String::from_utf8_lossy(g).into_owned())
                        .collect::<Vec<_>>()
                ));
                continue;
            }
        }
        passed += 1;
    }

    let skipped_total: usize = skipped.values().map(|(n, _)| n).sum();
    let missing_total: usize = missing_data.values().map(|(n, _)| n).sum();
    eprintln!(
        "operator vectors: {} total, {passed} passed, {passed_as_load_error} passed as expected \
         load errors, {} failed, {skipped_total} skipped (unsupported), {missing_total} skipped \
         (data file missing)",
        cases.len(),
        failures.len()
    );
    for (name, (n, why)) in &skipped {
        eprintln!("  skipped {n:>3} @{name}: {why}");
    }
    for (name, (n, err)) in &missing_data {
        eprintln!("  skipped {n:>3} @{name}: {err}");
    }
    for (name, param, why) in EXPECTED_LOAD_ERRORS {
        eprintln!("  load error expected for @{name} {param:?}: {why}");
    }
    for f in &failures {
        eprintln!("  FAIL {f}");
    }
    assert!(failures.is_empty(), "{} vectors failed", failures.len());
    assert_eq!(
        passed + passed_as_load_error + skipped_total + missing_total,
        cases.len(),
        "every vector is counted once"
    );
    // Only the operators CRS does not use may be skipped.
    assert_eq!(skipped_total, 9, "skip list changed: {skipped:?}");
}

#[test]
fn decode_input_escapes() {
    assert_eq!(decode_input(r"\u0000\xe4"), b"\0\xe4");
    assert_eq!(decode_input(r"\xFF\u0000"), b"\xff\0");
    assert_eq!(decode_input(r"abc\0def"), br"abc\0def");
    assert_eq!(decode_input(r"\xz"), br"\xz");
}

#[test]
fn names_any_case_and_aliases() {
    for name in ["rx", "RX", "Rx", "rX"] {
        assert!(matches!(
            Operator::compile(name, "a", None),
            Ok(Operator::Rx(_))
        ));
    }
    assert!(matches!(
        Operator::compile("BEGINSWITH", "a", None),
        Ok(Operator::BeginsWith(_))
    ));
    assert!(matches!(
        Operator::compile("pmf", "missing.data", None),
        Err(OperatorError::Invalid(e)) if e.contains("cannot read data file")
    ));
    assert!(matches!(
        Operator::compile("ipMatchF", "missing.data", None),
        Err(OperatorError::Invalid(e)) if e.contains("cannot read data file")
    ));
}

#[test]
fn unsupported_and_unknown_operators() {
    for name in [
        "rbl",
        "geoLookup",
        "inspectFile",
        "fuzzyHash",
        "validateDTD",
        "validateSchema",
        "gsbLookup",
        "rsub",
        "validateHash",
        "validateNid",
    ] {
        let err = Operator::compile(name, "x", None).unwrap_err();
        assert!(matches!(err, OperatorError::Unsupported(_)), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("unsupported operator @{name}: ")),
            "{err}"
        );
    }
    assert_eq!(
        Operator::compile("nope", "", None).unwrap_err(),
        OperatorError::Invalid("unknown operator @nope".into())
    );
}

#[test]
fn operators_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Operator>();
}

/// The CRS rule files, read in place (never copied).
const CRS_RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs/rules");

/// Pulls `(operator name, argument)` out of every `SecRule` of a rule file. A deliberately
/// small reader (line continuations, the quoted operator, `\"` inside it): the real parser
/// lives in `seclang/`; this only feeds operators to the compile test below.
fn crs_operators(text: &str) -> Vec<(String, String)> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix("SecRule") else {
            continue;
        };
        // Skip the variables, then read the quoted operator.
        let rest = rest.trim_start();
        let Some(after_vars) = rest.find(|c: char| c.is_ascii_whitespace()) else {
            continue;
        };
        let rest = rest[after_vars..].trim_start();
        let Some(quoted) = rest.strip_prefix('"') else {
            continue;
        };
        let mut operator = String::new();
        let mut chars = quoted.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('"') => operator.push('"'),
                    Some(other) => {
                        operator.push('\\');
                        operator.push(other);
                    }
                    None => break,
                },
                '"' => break,
                c => operator.push(c),
            }
        }
        let operator = operator.strip_prefix('!').unwrap_or(&operator);
        let (name, argument) = match operator.strip_prefix('@') {
            Some(op) => match op.split_once(' ') {
                Some((name, argument)) => (name.to_owned(), argument.to_owned()),
                None => (op.to_owned(), String::new()),
            },
            None => ("rx".to_owned(), operator.to_owned()),
        };
        out.push((name, argument));
    }
    out
}

#[test]
fn every_crs_operator_compiles() {
    let dir = Path::new(CRS_RULES);
    assert!(
        dir.is_dir(),
        "CRS rules missing at {} (the shared CRS checkout beside the repo)",
        dir.display()
    );
    let files = files_with_extension(dir, "conf");
    let mut count = 0;
    let mut errors = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("rule file is readable");
        for (name, argument) in crs_operators(&text) {
            count += 1;
            if let Err(e) = Operator::compile(&name, &argument, Some(dir)) {
                errors.push(format!("{}: @{name} {argument:?}: {e}", file.display()));
            }
        }
    }
    eprintln!("CRS operators compiled: {count}, errors: {}", errors.len());
    for e in &errors {
        eprintln!("  {e}");
    }
    assert!(errors.is_empty());
    assert!(
        count >= 690,
        "expected about 695 SecRule operators, found {count}"
    );
}

/// The dev dataset, read in place (never copied).
const DEV_DATASET: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/datasets/dev.jsonl"
);

/// Every CRS `@rx` pattern answers as the `regex` crate does (`regex::bytes::Regex` with the
/// dialect's flags) on values of real requests: the same match or none, and with `capture`
/// the same `TX.0`..`TX.9`. `@rx` runs forward-only engines (`rx_linear.rs`), so this
/// checks that finding a match's start and groups without the reverse automata changes
/// nothing.
#[test]
fn every_crs_pattern_matches_as_the_regex_crate_does() {
    let dir = Path::new(CRS_RULES);
    assert!(dir.is_dir(), "CRS rules missing at {}", dir.display());
    let dataset = std::fs::read_to_string(DEV_DATASET)
        .unwrap_or_else(|e| panic!("dev dataset missing at {DEV_DATASET}: {e}"));
    // Every 8th request: its payload, path, query, body (cut to 2 KB) and header values,
    // raw and percent-decoded.
    let mut values: Vec<Vec<u8>> = Vec::new();
    for line in dataset.lines().step_by(8) {
        let request: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let mut add = |v: &str| {
            let v = &v.as_bytes()[..v.len().min(2048)];
            values.push(v.to_vec());
            let decoded = crate::transformations::Transformation::UrlDecodeUni.apply(v);
            if decoded.as_ref() != v {
                values.push(decoded.into_owned());
            }
        };
        for field in ["payload", "path", "query", "body"] {
            if let Some(v) = request[field].as_str().filter(|v| !v.is_empty()) {
                add(v);
            }
        }
        if let Some(headers) = request["headers"].as_object() {
            headers
                .values()
                .filter_map(|v| v.as_str())
                .for_each(&mut add);
        }
    }
    let files = files_with_extension(dir, "conf");
    let (mut patterns, mut matches, mut differences) = (0, 0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("rule file is readable");
        for (name, argument) in crs_operators(&text) {
            if name != "rx" {
                continue;
            }
            let ours = super::rx::Rx::with_fallback(&argument, 0).expect("CRS pattern compiles");
            if ours.is_backtracking() {
                continue;
            }
            let theirs = super::rx::compile_pattern(&argument).expect("CRS pattern compiles");
            patterns += 1;
            let mut slots = theirs.create_captures();
            let mut caps = Captures::default();
            for value in &values {
                theirs.captures(value.as_slice(), &mut slots);
                let expected: Option<Vec<Vec<u8>>> = slots.is_match().then(|| {
                    (0..slots.group_len().min(super::MAX_CAPTURES))
                        .map(|g| {
                            slots
                                .get_group(g)
                                .map_or(Vec::new(), |s| value[s.range()].to_vec())
                        })
                        .collect()
                });
                let matched = ours.evaluate(value, None, &NO_MACROS);
                let captured = ours
                    .evaluate(value, Some(&mut caps), &NO_MACROS)
                    .then(|| caps.groups.clone());
                matches += usize::from(matched);
                if matched != expected.is_some() || captured != expected {
                    differences.push(format!(
                        "{argument:?} on {:?}: ours {matched} {captured:?}, regex {expected:?}",
                        String::from_utf8_lossy(value)
                    ));
                }
            }
        }
    }
    eprintln!(
        "{patterns} CRS patterns x {} values: {matches} matches, {} differences",
        values.len(),
        differences.len()
    );
    assert!(patterns > 250 && matches > 1000, "too little was compared");
    assert!(
        differences.is_empty(),
        "{}",
        differences[..differences.len().min(20)].join("\n")
    );
}
