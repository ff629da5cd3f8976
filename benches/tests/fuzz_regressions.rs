//! Replays every input in `fuzz/regressions/<target>/` through the same `waf_core::internal`
//! (or `waf_injection`) entry point the fuzz target calls, under plain `cargo test` (no
//! nightly, no libFuzzer), with the same checks the target makes.
//!
//! A folder holds the crashes the fuzzers found (named after what they found) and, since
//! none was ever found, small hand-made inputs at the edges of each parser (named after
//! the edge). Each test fails when its folder is empty: a replay of nothing checks nothing.
//!
//! The `transaction` target decodes its input with `Arbitrary`, which needs the fuzz crate;
//! its regressions run in `fuzz/run.sh` only (this file checks that there are some).
use std::path::PathBuf;

fn regressions() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions")
}

/// The inputs of `target`, sorted by name; panics when there are none.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = regressions().join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: every fuzz target needs regression inputs",
            dir.display()
        )
    });
    let mut out: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let data = std::fs::read(e.path()).expect("regression input is readable");
            (e.file_name().to_string_lossy().into_owned(), data)
        })
        .filter(|(name, _)| !name.starts_with('.') && !name.ends_with(".md"))
        .collect();
    out.sort();
    assert!(
        out.len() >= 3,
        "{}: {} inputs; commit at least 3 (crashes found, or minimised edge cases)",
        dir.display(),
        out.len()
    );
    out
}

/// The input named `name` of `target`.
fn input(all: &[(String, Vec<u8>)], name: &str) -> Vec<u8> {
    all.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no regression input {name}"))
        .1
        .clone()
}

#[test]
fn every_fuzz_target_has_regression_inputs() {
    let manifest = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/Cargo.toml"),
    )
    .expect("fuzz/Cargo.toml");
    let targets: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|b| b.lines().find_map(|l| l.trim().strip_prefix("name = ")))
        .map(|n| n.trim_matches('"'))
        .collect();
    assert!(targets.len() >= 9, "fuzz targets: {targets:?}");
    for t in targets {
        let _ = inputs(t);
    }
}

#[test]
fn seclang() {
    let all = inputs("seclang");
    let mut parsed = 0;
    for (name, data) in &all {
        let text = std::str::from_utf8(data).expect("seclang inputs are UTF-8");
        assert!(!text.to_ascii_lowercase().contains("include"), "{name}");
        if waf_core::internal::parse_str("fuzz", text).is_ok() {
            parsed += 1;
        }
    }
    // Some are valid rules, some are not: both paths ran.
    assert!(
        parsed > 0 && parsed < all.len(),
        "{parsed} of {} parsed",
        all.len()
    );
}

#[test]
fn body_urlencoded() {
    let all = inputs("body_urlencoded");
    for (name, data) in &all {
        let (separator, input) = match data.split_first() {
            Some((&b';', rest)) => (b';', rest),
            _ => (b'&', &data[..]),
        };
        let (pairs, _invalid) = waf_core::internal::parse_urlencoded(input, separator, 100);
        assert!(pairs.len() <= 100, "{name}");
        let produced: usize = pairs.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(
            produced <= input.len(),
            "{name}: decoded pairs longer than the input"
        );
    }
    let many = input(&all, "many-pairs");
    let (pairs, _) = waf_core::internal::parse_urlencoded(&many, b'&', 100);
    assert_eq!(pairs.len(), 100, "the argument limit holds");
}

#[test]
fn body_multipart() {
    let all = inputs("body_multipart");
    let mut errors = 0;
    for (name, data) in &all {
        let (ct, body) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (&b"multipart/form-data; boundary=x"[..], &data[..]),
        };
        let (args, files, error) = waf_core::internal::parse_multipart(ct, body);
        assert!(files <= body.len() + 1, "{name}");
        let produced: usize = args.iter().map(|(n, v)| n.len() + v.len()).sum();
        // A part's declared charset is decoded to UTF-8: at most three bytes per byte.
        assert!(
            produced <= 3 * body.len() + ct.len(),
            "{name}: args longer than the body allows"
        );
        errors += usize::from(error.is_some());
    }
    assert!(errors > 0, "malformed inputs are reported");
}

#[test]
fn body_json() {
    let all = inputs("body_json");
    for (name, data) in &all {
        let (pairs, _error) = waf_core::internal::parse_json(data, 64, 1000);
        assert!(pairs.len() <= 1000, "{name}");
        let values: usize = pairs.iter().map(|(_, v)| v.len()).sum();
        assert!(
            values <= data.len() * 4 + 64,
            "{name}: values larger than the input allows"
        );
    }
    let (_, err) = waf_core::internal::parse_json(&input(&all, "deep-nesting"), 64, 1000);
    assert!(err.is_some(), "nesting past the depth limit is an error");
    let (pairs, err) =
        waf_core::internal::parse_json(&input(&all, "numbers-and-literals"), 64, 1000);
    assert!(err.is_none() && !pairs.is_empty(), "{err:?}");
}

#[test]
fn body_xml() {
    let all = inputs("body_xml");
    for (_name, data) in &all {
        let _ = waf_core::internal::parse_xml(data, 64);
    }
    assert!(waf_core::internal::parse_xml(&input(&all, "deep-nesting"), 64).is_err());
    assert!(waf_core::internal::parse_xml(&input(&all, "attributes-and-cdata"), 64).is_ok());
}

#[test]
fn body_cookie() {
    let all = inputs("body_cookie");
    for (name, data) in &all {
        let pairs = waf_core::internal::parse_cookie(data);
        let produced: usize = pairs.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(
            produced <= data.len(),
            "{name}: cookie pairs longer than the header"
        );
    }
    assert_eq!(
        waf_core::internal::parse_cookie(&input(&all, "duplicate-names")).len(),
        3,
        "every duplicate is kept"
    );
}

#[test]
fn transformations() {
    // `transform_chain` itself asserts that `Cow::Owned` differs from its input.
    let all = inputs("transformations");
    for (_name, data) in &all {
        let (&n, rest) = data.split_first().expect("a chain length byte");
        let n = usize::from(n) % 9;
        if rest.len() >= n && rest.len() - n <= 4096 {
            let (chain, value) = rest.split_at(n);
            let _ = waf_core::internal::transform_chain(chain, value);
        }
    }
}

#[test]
fn injection() {
    let all = inputs("injection");
    for (name, data) in &all {
        if let Some(fp) = waf_injection::detect_sqli(data) {
            let letters = fp.as_bytes();
            assert!(!letters.is_empty() && letters.len() <= 5, "{name}: {fp:?}");
        }
        let _ = waf_injection::detect_xss(data);
    }
    assert!(waf_injection::detect_sqli(&input(&all, "sqli-tautology")).is_some());
    assert!(waf_injection::detect_sqli(&input(&all, "benign")).is_none());
}

#[test]
fn xpath() {
    let all = inputs("xpath");
    let (mut matched, mut refused) = (0, 0);
    for (name, data) in &all {
        let (expr, doc) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (&data[..], &b"<a b='c'><d>e</d></a>"[..]),
        };
        match waf_core::internal::xpath(&String::from_utf8_lossy(expr), doc) {
            Ok(n) => matched += usize::from(n > 0),
            Err(e) => {
                assert!(!e.is_empty(), "{name}: an error says why");
                refused += 1;
            }
        }
    }
    // Valid expressions that select something and refused ones: both paths ran.
    assert!(
        matched > 0 && refused > 0,
        "{matched} matched, {refused} refused"
    );
    let attr = input(&all, "attribute.txt");
    let i = attr.iter().position(|&b| b == b'\n').unwrap();
    assert_eq!(
        waf_core::internal::xpath("//a/@b", &attr[i + 1..]),
        Ok(1),
        "one attribute selected"
    );
}

#[test]
fn ml_features() {
    use waf_core::ml::features::{self, Scratch, DIM};
    let all = inputs("ml_features");
    let mut long = false;
    for (name, data) in &all {
        let mut scratch = Scratch::default();
        let (mut idx, mut val) = (Vec::new(), Vec::new());
        let mut windows = 0;
        for w in features::windows(data, waf_core::limits::DEFAULT_ML_WINDOW) {
            windows += 1;
            features::extract(w, &mut scratch, &mut idx, &mut val);
            assert_eq!(idx.len(), val.len(), "{name}");
            for (&i, &v) in idx.iter().zip(&val) {
                assert!(
                    usize::try_from(i).is_ok_and(|i| i < DIM),
                    "{name}: index {i}"
                );
                assert!(v.is_finite() && v > 0.0 && v <= 1.0, "{name}: value {v}");
            }
        }
        assert!(windows >= 1, "{name}: even an empty value has one window");
        long |= windows > 1;
    }
    assert!(long, "one input is longer than the feature window");
}
