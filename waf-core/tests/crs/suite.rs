//! The CRS regression test files (ftw-tests-schema v2) and how they are loaded.
//!
//! Unknown fields are tolerated, as go-ftw tolerates them, but counted and reported, so a
//! field that changes a request (`encoded_data`, `ordered_headers`, ...) cannot be ignored
//! silently. A file that does not parse fails the whole run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

/// One YAML file: the tests for one rule.
#[derive(Debug, Deserialize)]
pub struct TestFile {
    pub rule_id: u64,
    #[serde(default)]
    pub tests: Vec<Test>,
    #[serde(flatten)]
    pub other: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Debug, Deserialize)]
pub struct Test {
    pub test_id: u64,
    #[serde(default)]
    pub desc: Option<String>,
    pub stages: Vec<Stage>,
    #[serde(flatten)]
    pub other: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Debug, Deserialize)]
pub struct Stage {
    pub input: Input,
    pub output: Output,
    #[serde(flatten)]
    pub other: BTreeMap<String, yaml_serde::Value>,
}

/// `stages[].input`. Missing fields take go-ftw's defaults (see `go_ftw::request_line`).
#[derive(Debug, Default, Deserialize)]
pub struct Input {
    pub dest_addr: Option<String>,
    pub port: Option<u16>,
    pub method: Option<String>,
    pub uri: Option<String>,
    pub version: Option<String>,
    /// A YAML map in file order; go-ftw sorts it by name before sending.
    #[serde(default)]
    pub headers: Option<HeaderMap>,
    pub data: Option<String>,
    /// Base64 body, used when `data` is absent (go-ftw `GetData`).
    pub encoded_data: Option<String>,
    /// Base64 raw request, sent as is.
    pub encoded_request: Option<String>,
    /// Default true.
    pub autocomplete_headers: Option<bool>,
    #[serde(flatten)]
    pub other: BTreeMap<String, yaml_serde::Value>,
}

/// `stages[].output`.
#[derive(Debug, Default, Deserialize)]
pub struct Output {
    #[serde(default)]
    pub log: Option<LogOutput>,
    /// Read but not checked: the status is the web server's (see `checks_log`).
    #[allow(dead_code)]
    pub status: Option<u16>,
    /// Read but not checked: a transport error is the web server's.
    #[allow(dead_code)]
    pub expect_error: Option<bool>,
    pub retry_once: Option<bool>,
    #[serde(flatten)]
    pub other: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LogOutput {
    #[serde(default)]
    pub expect_ids: Vec<u64>,
    #[serde(default)]
    pub no_expect_ids: Vec<u64>,
    pub match_regex: Option<String>,
    pub no_match_regex: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, yaml_serde::Value>,
}

impl Output {
    /// Whether the stage checks anything an in-process run can see: the WAF log. Status
    /// codes and transport errors are the web server's business (crs-tests.md §2).
    pub fn checks_log(&self) -> bool {
        match &self.log {
            None => false,
            Some(l) => {
                !l.expect_ids.is_empty()
                    || !l.no_expect_ids.is_empty()
                    || l.match_regex.is_some()
                    || l.no_match_regex.is_some()
            }
        }
    }
}

/// Header fields as a YAML map, in file order. Values may be any scalar (`Content-Length: 7`
/// is a number in some tests); go-ftw decodes them into strings, keeping the text. A
/// repeated name is an error, as in go-ftw's YAML decoder.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct HeaderMap(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for HeaderMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HeaderMap, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HeaderMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of header names to scalar values")
            }
            fn visit_unit<E: de::Error>(self) -> Result<HeaderMap, E> {
                Ok(HeaderMap::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HeaderMap, A::Error> {
                let mut out: Vec<(String, String)> = Vec::new();
                // Asking for a string keeps a scalar's text as written (`0x1F`, `007`,
                // `1.50`), as Go's yaml.v3 does for a `map[string]string`; `~` or nothing is "".
                while let Some((name, value)) = map.next_entry::<String, Option<String>>()? {
                    let value = value.unwrap_or_default();
                    if out.iter().any(|(n, _)| *n == name) {
                        return Err(de::Error::custom(format!("header {name:?} given twice")));
                    }
                    out.push((name, value));
                }
                Ok(HeaderMap(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A loaded file with its path (relative to the tests folder, for messages).
pub struct LoadedFile {
    pub path: PathBuf,
    pub file: TestFile,
}

/// Reads every `*.yaml` under `dir`, sorted by path. Returns the parsed files and the
/// paths of comment-only files (no document, no tests).
pub fn load_dir(dir: &Path) -> Result<(Vec<LoadedFile>, Vec<PathBuf>), String> {
    let mut paths = Vec::new();
    collect_yaml(dir, &mut paths).map_err(|e| format!("{}: {e}", dir.display()))?;
    paths.sort();
    if paths.is_empty() {
        return Err(format!("no YAML test file under {}", dir.display()));
    }
    let mut out = Vec::with_capacity(paths.len());
    let mut empty = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
        if is_comment_only(&text) {
            empty.push(rel);
            continue;
        }
        let file: TestFile = yaml_serde::from_str(&text)
            .map_err(|e| format!("{}: cannot parse: {e}", path.display()))?;
        out.push(LoadedFile { path: rel, file });
    }
    Ok((out, empty))
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_yaml(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

/// True when a YAML text holds no document: only comments, blank lines and `---`.
pub fn is_comment_only(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    })
}

/// Names of unknown fields found anywhere in a file, with the place they occur.
pub fn unknown_fields(f: &TestFile, out: &mut BTreeMap<String, usize>) {
    let mut add = |place: &str, m: &BTreeMap<String, yaml_serde::Value>, ignore: &[&str]| {
        for k in m.keys() {
            if !ignore.contains(&k.as_str()) {
                *out.entry(format!("{place}.{k}")).or_default() += 1;
            }
        }
    };
    // `meta` (and a misplaced `author`/`description`) and test-level `tags` carry no
    // behaviour.
    add("file", &f.other, &["meta", "author", "description"]);
    for t in &f.tests {
        add("test", &t.other, &["tags"]);
        for s in &t.stages {
            add("stage", &s.other, &[]);
            // dest_addr and port only choose the server; `protocol: http` is the only one used.
            add("input", &s.input.other, &["protocol"]);
            add("output", &s.output.other, &[]);
            if let Some(l) = &s.output.log {
                add("output.log", &l.other, &[]);
            }
        }
    }
}
