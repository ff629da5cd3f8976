//! XML body parsing: never panics, whatever the bytes; depth bounded by `max_depth`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = waf_core::internal::parse_xml(data, 64);
});
