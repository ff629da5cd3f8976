//! The SQLi and XSS detectors of `waf-injection` on arbitrary bytes: never panic, and a
//! reported fingerprint is 1 to 5 token letters.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(fp) = waf_injection::detect_sqli(data) {
        let letters = fp.as_bytes();
        assert!(!letters.is_empty() && letters.len() <= 5, "{fp:?}");
    }
    let _ = waf_injection::detect_xss(data);
});
