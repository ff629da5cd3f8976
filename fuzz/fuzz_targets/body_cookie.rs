//! `Cookie` header parsing: never panics, and never produces more bytes than it was given.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let pairs = waf_core::internal::parse_cookie(data);
    let produced: usize = pairs.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(
        produced <= data.len(),
        "cookie pairs longer than the header"
    );
});
