//! Multipart parsing. Input: the `Content-Type` value up to the first `\n`, then the body.
//! Never panics; what it produces is bounded by the body (three bytes per body byte at
//! most, once a declared charset is decoded).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (content_type, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"multipart/form-data; boundary=x"[..], data),
    };
    let (args, files, _error) = waf_core::internal::parse_multipart(content_type, body);
    assert!(files <= body.len() + 1);
    let produced: usize = args.iter().map(|(n, v)| n.len() + v.len()).sum();
    // A part's declared charset is decoded to UTF-8: at most three bytes per byte
    // (`waf_core` body/charset.rs `decode`).
    assert!(
        produced <= 3 * body.len() + content_type.len(),
        "args longer than the body allows"
    );
});
