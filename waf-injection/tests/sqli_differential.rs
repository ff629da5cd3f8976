//! `detect_sqli` against C libinjection 3.9.2 (the oracle, loaded at test time) on every
//! input of the differential corpus: same verdict, same fingerprint.

mod common;

use common::corpus;
use common::oracle::Oracle;

/// Inputs where we knowingly differ from the oracle, each with the reason. Empty: there
/// are none.
const KNOWN_DIFFERENCES: &[(&[u8], &str)] = &[];

#[test]
fn sqli_matches_libinjection() {
    let oracle = Oracle::load();
    let inputs = corpus::all();
    let mut compared = 0usize;
    let mut hits = 0usize;
    let mut differences = Vec::new();
    for input in &inputs {
        let ours = waf_injection::detect_sqli(input).map(|fp| fp.as_bytes().to_vec());
        let theirs = oracle.sqli(input);
        compared += 1;
        hits += usize::from(theirs.is_some());
        if ours != theirs && !KNOWN_DIFFERENCES.iter().any(|(k, _)| k == input) {
            differences.push((input, ours, theirs));
        }
    }
    eprintln!(
        "sqli differential: {compared} inputs compared, {hits} SQLi by the oracle, {} differences",
        differences.len()
    );
    for (input, ours, theirs) in differences.iter().take(20) {
        eprintln!(
            "  {:?}: ours {:?}, oracle {:?}",
            escape(input),
            ours.as_deref().map(escape),
            theirs.as_deref().map(escape)
        );
    }
    assert!(compared >= 200_000, "corpus too small: {compared}");
    assert!(differences.is_empty(), "{} differences", differences.len());
}

fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}
