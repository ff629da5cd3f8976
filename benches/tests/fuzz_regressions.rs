//! Replays every input in `fuzz/regressions/<target>/` through the same `waf_core::internal`
//! entry point the fuzz target calls, under plain `cargo test` (no nightly, no libFuzzer).
//! Each file there is a crash the fuzzers once found; its name says what it was.
//!
//! The `transaction` target decodes its input with `Arbitrary`, which needs the fuzz crate;
//! its regressions run in `fuzz/run.sh` only.
use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
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
    out
}

#[test]
fn seclang() {
    for (_name, data) in inputs("seclang") {
        if let Ok(text) = std::str::from_utf8(&data) {
            if !text.to_ascii_lowercase().contains("include") {
                let _ = waf_core::internal::parse_str("fuzz", text);
            }
        }
    }
}

#[test]
fn body_urlencoded() {
    for (_name, data) in inputs("body_urlencoded") {
        let _ = waf_core::internal::parse_urlencoded(&data, b'&', 100);
    }
}

#[test]
fn body_multipart() {
    for (_name, data) in inputs("body_multipart") {
        let (ct, body) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (&b"multipart/form-data; boundary=x"[..], &data[..]),
        };
        let _ = waf_core::internal::parse_multipart(ct, body);
    }
}

#[test]
fn body_json() {
    for (_name, data) in inputs("body_json") {
        let _ = waf_core::internal::parse_json(&data, 64, 1000);
    }
}

#[test]
fn body_xml() {
    for (_name, data) in inputs("body_xml") {
        let _ = waf_core::internal::parse_xml(&data, 64);
    }
}

#[test]
fn body_cookie() {
    for (_name, data) in inputs("body_cookie") {
        let _ = waf_core::internal::parse_cookie(&data);
    }
}

#[test]
fn transformations() {
    for (_name, data) in inputs("transformations") {
        if let Some((&n, rest)) = data.split_first() {
            let n = usize::from(n) % 9;
            if rest.len() >= n {
                let (chain, value) = rest.split_at(n);
                let _ = waf_core::internal::transform_chain(chain, value);
            }
        }
    }
}
