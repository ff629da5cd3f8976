//! The differential corpus is as large as the issue asks (200,000 inputs or more).

mod common;

#[test]
fn corpus_has_at_least_200k_inputs() {
    let all = common::corpus::all();
    eprintln!("corpus: {} inputs", all.len());
    assert!(all.len() >= 200_000, "{}", all.len());
    let oracle = common::oracle::Oracle::load();
    assert_eq!(oracle.sqli(b"1' or '1'='1").as_deref(), Some(&b"s&sos"[..]));
    assert!(oracle.xss(b"<script>alert(1)</script>"));
    assert!(!oracle.xss(b"hello"));
}
