//! The list of known differences (`known_differences.yaml` beside this file).
//!
//! Each entry names one test (`<rule id>-<test id>`) and says why it may fail. A known test
//! that fails does not fail the run; a known test that passes is reported as stale. The
//! file is YAML (read with the `yaml_serde` dev-dependency we already have) with unknown
//! fields rejected, like the corpora of regex's `testdata/`.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    known: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    test: String,
    reason: String,
}

/// Most entries the list may hold: it is for HTTP-server behaviour, not a place to park
/// engine bugs.
pub const MAX_ENTRIES: usize = 25;

/// Test id → reason.
pub type KnownList = BTreeMap<String, String>;

/// Parses and validates the list: ids of the form `N-N`, a reason for each, no duplicates,
/// at most [`MAX_ENTRIES`].
pub fn parse(text: &str) -> Result<KnownList, String> {
    let file: File = yaml_serde::from_str(text).map_err(|e| format!("known differences: {e}"))?;
    if file.known.len() > MAX_ENTRIES {
        return Err(format!(
            "known differences: {} entries, at most {MAX_ENTRIES} allowed",
            file.known.len()
        ));
    }
    let mut out = KnownList::new();
    for e in file.known {
        let valid_id = e
            .test
            .split_once('-')
            .is_some_and(|(r, t)| is_number(r) && is_number(t));
        if !valid_id {
            return Err(format!(
                "known differences: bad test id {:?} (want RULE-TEST)",
                e.test
            ));
        }
        if e.reason.trim().is_empty() {
            return Err(format!("known differences: {} has no reason", e.test));
        }
        if out.insert(e.test.clone(), e.reason).is_some() {
            return Err(format!("known differences: {} listed twice", e.test));
        }
    }
    Ok(out)
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}
