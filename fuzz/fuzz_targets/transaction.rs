//! A whole transaction driven by an `Arbitrary` sequence of operations (quinn-proto's
//! `fuzz_targets/streams.rs` style), against CRS at paranoia level 4 in `DetectionOnly`
//! mode so every phase and every rule runs.
//!
//! The operations are data, not call order: the driver keeps the documented order
//! (`request_headers`, request body chunks, `request_end`, `response_headers`, response
//! body chunks, `response_end`, `finish`) and each operation feeds the current phase or
//! moves to the next one, so any sequence is a legal use of the API and any panic is a bug.
//!
//! CRS is read from `FUZZ_CRS_DIR`, else `../../shared/crs` beside the workspace; without
//! it a small inline rule set is used (printed once on stderr).
#![no_main]
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Verdict, Waf};

/// Engine settings in front of CRS: the benchmark's (`benches/src/lib.rs`), in
/// `DetectionOnly`, with small body limits so large inputs hit the limit paths.
const SETTINGS: &str = r#"
SecRuleEngine DetectionOnly
SecRequestBodyAccess On
SecRequestBodyLimit 65536
SecRequestBodyNoFilesLimit 32768
SecRequestBodyLimitAction ProcessPartial
SecRequestBodyJsonDepthLimit 64
SecArgumentsLimit 200
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecResponseBodyLimit 65536
SecResponseBodyLimitAction ProcessPartial
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" \
    "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" \
    "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" \
    "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',logdata:'%{reqbody_error_msg}',severity:2"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:200003,phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation.'"
SecAction "id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level=4"
"#;

/// Used when CRS is not available: a few rules over every kind of variable.
const FALLBACK_RULES: &str = r#"
SecRule ARGS|ARGS_NAMES|REQUEST_COOKIES|REQUEST_HEADERS|XML:/* "@rx (?i)union\s+select" "id:1,phase:2,deny,t:urlDecodeUni,t:lowercase"
SecRule REQUEST_BODY|RESPONSE_BODY "@pm select script" "id:2,phase:4,pass,log,t:htmlEntityDecode"
SecRule ARGS "@detectSQLi" "id:3,phase:2,pass,log,setvar:tx.score=+5"
SecRule ARGS "@detectXSS" "id:4,phase:2,pass,log,setvar:tx.score=+5"
SecRule TX:score "@ge 5" "id:5,phase:2,deny,status:403"
"#;

fn waf() -> &'static Waf {
    static WAF: OnceLock<Waf> = OnceLock::new();
    WAF.get_or_init(|| {
        let crs = std::env::var_os("FUZZ_CRS_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs")
            });
        let builder = Waf::builder().seclang("settings", SETTINGS);
        let builder = if crs.join("rules").is_dir() {
            builder
                .seclang_file(crs.join("crs-setup.conf.example"))
                .seclang_glob(crs.join("rules/*.conf").display().to_string())
        } else {
            eprintln!(
                "transaction: no CRS at {}; using inline rules",
                crs.display()
            );
            builder.seclang("fallback", FALLBACK_RULES)
        };
        builder.build().expect("fuzz rules load")
    })
}

/// One step of the driver.
#[derive(Arbitrary, Debug)]
enum Op {
    /// A request header (before phase 1) or a response header (before phase 3).
    Header(Vec<u8>, Vec<u8>),
    /// A chunk of the current body (request or response); before phase 1 it is ignored.
    Chunk(Vec<u8>),
    /// Run the next phase.
    Advance,
}

#[derive(Arbitrary, Debug)]
struct Input {
    method: Vec<u8>,
    uri: Vec<u8>,
    version: Vec<u8>,
    status: u16,
    client_port: u16,
    /// Seconds since the epoch for `now`.
    now: u32,
    ops: Vec<Op>,
}

fuzz_target!(
    // Compile CRS before fuzzing starts: under ASan and coverage instrumentation it takes
    // tens of seconds, which libFuzzer would otherwise charge to the first input (and
    // report as a timeout).
    init: {
        waf();
    },
    |input: Input| {
    let conn = ConnectionInfo::new(
        std::net::SocketAddr::from(([192, 0, 2, 1], input.client_port)),
        "127.0.0.1:80".parse().expect("literal"),
    );
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(input.now));
    let mut tx = waf().transaction(&conn, now);
    let mut request_headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut response_headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    // 0: collecting request headers; 1: request body; 2: collecting response headers;
    // 3: response body; 4: done.
    let mut stage = 0u8;
    let mut last = Verdict::Continue;
    let ops = input
        .ops
        .into_iter()
        .chain(std::iter::repeat_with(|| Op::Advance).take(4));
    for op in ops {
        match (stage, op) {
            (0, Op::Header(k, v)) => request_headers.push((k, v)),
            (2, Op::Header(k, v)) => response_headers.push((k, v)),
            (1, Op::Chunk(c)) if tx.wants_request_body() => last = tx.request_body(&c),
            (3, Op::Chunk(c)) if tx.wants_response_body() => last = tx.response_body(&c),
            (0, Op::Advance) => {
                let h: Vec<(&[u8], &[u8])> = request_headers
                    .iter()
                    .map(|(k, v)| (&k[..], &v[..]))
                    .collect();
                let head = RequestHead::new(&input.method, &input.uri, &input.version, &h);
                last = tx.request_headers(&head);
                stage = 1;
            }
            (1, Op::Advance) => {
                last = tx.request_end();
                stage = 2;
            }
            (2, Op::Advance) => {
                let h: Vec<(&[u8], &[u8])> = response_headers
                    .iter()
                    .map(|(k, v)| (&k[..], &v[..]))
                    .collect();
                last = tx.response_headers(&ResponseHead::new(input.status, b"HTTP/1.1", &h));
                stage = 3;
            }
            (3, Op::Advance) => {
                last = tx.response_end();
                stage = 4;
            }
            _ => {}
        }
        if stage == 4 {
            break;
        }
    }
    // DetectionOnly never intervenes.
    assert!(
        last.intervention().is_none(),
        "DetectionOnly intervened: {last:?}"
    );
    let _report = tx.finish();
});
