//! `application/x-www-form-urlencoded` parsing: never panics, stops at `max_args`, and
//! decoding never makes a pair longer than its source.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (separator, input) = match data.split_first() {
        Some((&b';', rest)) => (b';', rest),
        _ => (b'&', data),
    };
    let (pairs, _invalid) = waf_core::internal::parse_urlencoded(input, separator, 100);
    assert!(pairs.len() <= 100);
    let produced: usize = pairs.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(
        produced <= input.len(),
        "decoded pairs longer than the input"
    );
});
