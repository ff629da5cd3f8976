//! Shared parts of the `waf-core` benchmarks: the requests, the CRS configuration, and the
//! drivers that push one request through `waf-core` or through libmodsecurity.
//!
//! The benchmarks themselves live in `benches/benches/`:
//! - `core`: criterion, `waf-core` with CRS at PL1 and PL4 on every [`requests`] entry, and
//!   the CRS load time;
//! - `vs_modsecurity`: criterion, the same requests through `waf-core` and libmodsecurity 3
//!   in one run, printed as a ratio table ending in `min ratio: X`;
//! - `alloc`: bytes and allocations per transaction, counted by a global allocator.
//!
//! Both engines get the same configuration text ([`config`]): the engine settings of
//! `examples/crs.conf` (minus what libmodsecurity 3.0.9 rejects), then CRS from
//! `CRS_DIR` (default `../shared/crs` beside the workspace). Nothing from CRS is vendored.

pub mod modsec;

use std::path::PathBuf;
use std::time::SystemTime;

use waf_core::{ConnectionInfo, RequestHead, ResponseHead, ScanBackend, Verdict, Waf};

/// Engine settings shared by both engines, in front of CRS. These are `examples/crs.conf`'s
/// (libmodsecurity 3.0.9 accepts all of them), except `SecArgumentsLimit`: 10,000 instead
/// of 1,000, because the 100 KB JSON body has about 6,000 scalars and would otherwise be
/// rejected with `REQBODY_ERROR` (400) by both engines instead of inspected.
const ENGINE_SETTINGS: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 1048576
SecRequestBodyLimitAction Reject
SecRequestBodyJsonDepthLimit 512
SecArgumentsLimit 10000
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml
SecResponseBodyLimit 524288
SecResponseBodyLimitAction ProcessPartial

SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" \
    "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" \
    "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "^application/[a-z0-9.-]+[+]json" \
    "id:200006,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" \
    "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',logdata:'%{reqbody_error_msg}',severity:2"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:200003,phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation.'"
"#;

/// The CRS checkout: `CRS_DIR`, or `../shared/crs` beside the workspace.
pub fn crs_dir() -> PathBuf {
    match std::env::var_os("CRS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs"),
    }
}

/// The whole configuration as one SecLang text: engine settings, `crs-setup.conf.example`,
/// the paranoia level (`tx.blocking_paranoia_level`, rule 900000), then `rules/*.conf`.
/// Include paths are absolute, so both engines read the same files.
pub fn config(paranoia_level: u8) -> String {
    let crs = crs_dir()
        .canonicalize()
        .unwrap_or_else(|e| panic!("CRS not found at {}: {e}", crs_dir().display()));
    format!(
        "{ENGINE_SETTINGS}\nInclude {crs}/crs-setup.conf.example\n\
         SecAction \"id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level={paranoia_level}\"\n\
         Include {crs}/rules/*.conf\n",
        crs = crs.display()
    )
}

/// The scan back-end the benchmarks use: [`ScanBackend::Hyperscan`] in a build with the
/// `hyperscan` feature (`BACKEND=hyperscan benches/callgrind.sh`), else the default.
pub fn scan_backend() -> ScanBackend {
    if ScanBackend::HYPERSCAN_AVAILABLE {
        ScanBackend::Hyperscan
    } else {
        ScanBackend::Auto
    }
}

/// Compiles [`config`] with `waf-core`.
pub fn build_waf(paranoia_level: u8) -> Waf {
    Waf::builder()
        .seclang(format!("crs-pl{paranoia_level}"), config(paranoia_level))
        .scan_backend(scan_backend())
        .build()
        .unwrap_or_else(|e| panic!("CRS PL{paranoia_level} does not load: {e}"))
}

/// One benchmark request and the response it gets.
#[derive(Clone, Debug)]
pub struct Request {
    /// Short name, used as the benchmark id.
    pub name: &'static str,
    /// Request method.
    pub method: &'static str,
    /// Request target, as sent.
    pub uri: String,
    /// Request headers, in order.
    pub headers: Vec<(String, String)>,
    /// Request body (empty for a GET).
    pub body: Vec<u8>,
    /// Whether CRS PL1 is expected to block it.
    pub attack: bool,
}

/// The response every request gets: a small HTML page.
pub const RESPONSE_BODY: &[u8] = b"<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\n\
<body><h1>Welcome</h1><p>This is a small page served by the benchmark backend. It has a few \
paragraphs of ordinary text, a list and a link, about as much as a small landing page.</p>\n\
<ul><li>First item</li><li>Second item</li><li>Third item</li></ul>\n\
<p><a href=\"/about.html\">About us</a></p></body></html>\n";

/// The response headers every request gets.
pub const RESPONSE_HEADERS: &[(&str, &str)] = &[
    ("Server", "nginx/1.22.1"),
    ("Date", "Mon, 30 Nov 2026 11:00:00 GMT"),
    ("Content-Type", "text/html"),
    ("Content-Length", "389"),
    ("Connection", "keep-alive"),
];

fn browser_headers() -> Vec<(String, String)> {
    [
        ("Host", "www.example.com"),
        (
            "User-Agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ),
        (
            "Accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        ),
        ("Accept-Language", "en-US,en;q=0.5"),
        ("Accept-Encoding", "gzip, deflate, br"),
        ("Connection", "keep-alive"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn post(name: &'static str, uri: &str, content_type: &str, body: Vec<u8>) -> Request {
    let mut headers = browser_headers();
    headers.push(("Content-Type".into(), content_type.into()));
    headers.push(("Content-Length".into(), body.len().to_string()));
    Request {
        name,
        method: "POST",
        uri: uri.into(),
        headers,
        body,
        attack: false,
    }
}

/// A JSON array of user records, at least `size` bytes long: the shape of a typical API
/// payload (strings, numbers, booleans, a nested array).
pub fn json_body(size: usize) -> Vec<u8> {
    let mut out = String::from("[");
    let mut i = 0;
    while out.len() < size {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"id\":{i},\"name\":\"User number {i}\",\"email\":\"user{i}@example.com\",\
             \"active\":{},\"score\":{}.5,\"tags\":[\"customer\",\"newsletter\"]}}",
            i % 2 == 0,
            i * 7
        ));
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}

/// An urlencoded form body of at least `size` bytes: `field{i}=Some+text+value+{i}&...`.
pub fn form_body(size: usize) -> Vec<u8> {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < size {
        if i > 0 {
            out.push('&');
        }
        out.push_str(&format!(
            "field{i}=Some+ordinary+text+value+number+{i}+for+the+form"
        ));
        i += 1;
    }
    out.into_bytes()
}

/// The benchmark requests, in table order.
pub fn requests() -> Vec<Request> {
    vec![
        Request {
            name: "get_simple",
            method: "GET",
            uri: "/index.html?page=2&sort=name".into(),
            headers: browser_headers(),
            body: Vec::new(),
            attack: false,
        },
        post(
            "post_form_small",
            "/login",
            "application/x-www-form-urlencoded",
            b"username=alice&password=correct+horse+battery&remember=on".to_vec(),
        ),
        post(
            "post_json_10k",
            "/api/users",
            "application/json",
            json_body(10 * 1024),
        ),
        post(
            "post_form_10k",
            "/profile",
            "application/x-www-form-urlencoded",
            form_body(10 * 1024),
        ),
        post(
            "post_json_100k",
            "/api/users",
            "application/json",
            json_body(100 * 1024),
        ),
        Request {
            name: "get_sqli",
            method: "GET",
            uri: "/index.html?id=1%27%20OR%20%271%27%3D%271".into(),
            headers: browser_headers(),
            body: Vec::new(),
            attack: true,
        },
    ]
}

/// The connection every request arrives on.
pub fn connection() -> ConnectionInfo {
    ConnectionInfo::new(
        "192.0.2.10:50000".parse().expect("literal address"),
        "127.0.0.1:80".parse().expect("literal address"),
    )
}

/// Copies string pairs (at most 32: the benchmark requests have about ten) into `buf` as
/// byte pairs; the filled part.
fn as_byte_pairs<'a, 'b, K: AsRef<str> + 'a, V: AsRef<str> + 'a>(
    pairs: impl ExactSizeIterator<Item = &'a (K, V)>,
    buf: &'b mut [(&'a [u8], &'a [u8]); 32],
) -> &'b [(&'a [u8], &'a [u8])] {
    assert!(
        pairs.len() <= buf.len(),
        "a benchmark request has at most 32 headers"
    );
    let mut n = 0;
    for ((k, v), slot) in pairs.zip(buf.iter_mut()) {
        *slot = (k.as_ref().as_bytes(), v.as_ref().as_bytes());
        n += 1;
    }
    &buf[..n]
}

/// Runs one whole transaction through `waf-core`, as a host would: phases 1-5, stopping at
/// the first intervention. Returns the intervention's status, if any.
pub fn run_ours(waf: &Waf, conn: &ConnectionInfo, req: &Request) -> Option<u16> {
    // The heads' header lists on the stack, as a server holding the parsed request would
    // pass them: the alloc bench counts only what the engine allocates.
    let mut buf: [(&[u8], &[u8]); 32] = [(&[], &[]); 32];
    let mut response_buf: [(&[u8], &[u8]); 32] = [(&[], &[]); 32];
    let headers = as_byte_pairs(req.headers.iter(), &mut buf);
    let response_headers = as_byte_pairs(RESPONSE_HEADERS.iter(), &mut response_buf);
    let mut tx = waf.transaction(conn, SystemTime::UNIX_EPOCH);
    let head = RequestHead::new(
        req.method.as_bytes(),
        req.uri.as_bytes(),
        b"HTTP/1.1",
        headers,
    );
    let verdict = (|| {
        let v = tx.request_headers(&head);
        if !matches!(v, Verdict::Continue) {
            return v;
        }
        if tx.wants_request_body() && !req.body.is_empty() {
            let v = tx.request_body(&req.body);
            if !matches!(v, Verdict::Continue) {
                return v;
            }
        }
        let v = tx.request_end();
        if !matches!(v, Verdict::Continue) {
            return v;
        }
        let v = tx.response_headers(&ResponseHead::new(200, b"HTTP/1.1", response_headers));
        if !matches!(v, Verdict::Continue) {
            return v;
        }
        if tx.wants_response_body() {
            let v = tx.response_body(RESPONSE_BODY);
            if !matches!(v, Verdict::Continue) {
                return v;
            }
        }
        tx.response_end()
    })();
    let report = tx.finish();
    std::hint::black_box(&report);
    verdict.intervention().map(|i| i.status)
}
