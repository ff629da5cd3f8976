//! SecLang text → syntax tree: must never panic, whatever the text. `Include` paths in the
//! input resolve against the current directory; the parser bounds include depth and
//! reports cycles.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = waf_core::internal::parse_str("fuzz", text);
    }
});
