//! JSON body parsing: never panics (deep nesting included: the parser is iterative and
//! bounded by `max_depth`), and stops at `max_args`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (pairs, _error) = waf_core::internal::parse_json(data, 64, 1000);
    assert!(pairs.len() <= 1000);
    let values: usize = pairs.iter().map(|(_, v)| v.len()).sum();
    // Values are unescaped copies of input ranges or array lengths (a few digits each).
    assert!(
        values <= data.len() * 4 + 64,
        "values larger than the input allows"
    );
});
