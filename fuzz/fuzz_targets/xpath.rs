//! XPath for `XML:` targets: the first line is the expression, the rest the document.
//! Compiling and evaluating never panic, whatever the bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (expr, doc) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"<a b='c'><d>e</d></a>"[..]),
    };
    let _ = waf_core::internal::xpath(&String::from_utf8_lossy(expr), doc);
});
