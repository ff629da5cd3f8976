//! The checked-in `include/waf.h` must equal what cbindgen generates from the sources now,
//! and every exported function must go through the `ffi_guard!` panic guard.
//!
//! After changing the ABI: `WAF_FFI_BLESS=1 cargo test -p waf-ffi --test header`.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/waf.h"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/waf.h");
    if std::env::var_os("WAF_FFI_BLESS").is_some() {
        std::fs::write(&path, generated).expect("write include/waf.h");
    }
    let checked_in = std::fs::read_to_string(&path).expect("read include/waf.h");
    assert!(
        checked_in == generated,
        "include/waf.h is stale; run WAF_FFI_BLESS=1 cargo test -p waf-ffi --test header"
    );
}

/// STYLE rule 24: each `extern "C" fn` body starts with `ffi_guard!("<its name>", ...)`.
#[test]
fn every_export_is_guarded() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut exports = 0;
    for entry in std::fs::read_dir(&src).expect("read src") {
        let path = entry.expect("dir entry").path();
        let text = std::fs::read_to_string(&path).expect("read source");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("extern \"C\" fn ") {
            rest = &rest[at + "extern \"C\" fn ".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // The body starts at the first "{" after the signature.
            let body = &rest[rest.find('{').expect("a body")..];
            let first = body[1..].trim_start();
            let want = format!("ffi_guard!(\"{name}\",");
            assert!(
                first.starts_with(&want),
                "{}: `{name}` does not start with {want}",
                path.display()
            );
            exports += 1;
        }
    }
    assert!(exports >= 25, "found only {exports} exported functions");
}
