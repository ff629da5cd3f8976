//! `waf-proxy`: placeholder for the standalone reverse proxy.
#![forbid(unsafe_code)]

fn main() {
    eprintln!("waf-proxy: not implemented yet");
    std::process::exit(2);
}
