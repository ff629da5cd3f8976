//! Loads a rule set and runs one request through it:
//! `cargo run -p waf-examples --example check -- RULES.conf 'GET /?q=...'`.
use std::time::SystemTime;

use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Waf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rules = args.next().ok_or("usage: check RULES.conf 'METHOD URI'")?;
    let line = args.next().unwrap_or_else(|| "GET /".to_string());
    let (method, uri) = line.split_once(' ').unwrap_or(("GET", &line));
    let waf = Waf::builder().seclang_file(rules).build()?;
    let conn = ConnectionInfo::new("127.0.0.1:40000".parse()?, "127.0.0.1:80".parse()?);
    let mut tx = waf.transaction(&conn, SystemTime::now());
    let headers: &[(&[u8], &[u8])] = &[(b"Host", b"localhost"), (b"User-Agent", b"check")];
    let head = RequestHead::new(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1", headers);
    let mut verdict = tx.request_headers(&head);
    if verdict.intervention().is_none() {
        verdict = tx.request_end();
    }
    if verdict.intervention().is_none() {
        verdict = tx.response_headers(&ResponseHead::new(200, b"HTTP/1.1", &[]));
    }
    if verdict.intervention().is_none() {
        verdict = tx.response_end();
    }
    let report = tx.finish();
    println!("verdict: {verdict:?}");
    for rule in report.matched_rules.iter().filter(|r| r.log) {
        println!(
            "matched {} {}",
            rule.id,
            rule.message.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
