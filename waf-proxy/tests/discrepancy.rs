//! Parser discrepancies (issue 13 item 3): the payload unchanged, the request's framing
//! changed. Every case is a raw HTTP/1.1 request run through both profiles (the default
//! profile and CRS PL1): an evasion must be blocked like its plain control, a valid shape
//! that frameworks accept must pass, an ambiguous shape is refused with 400, and every limit
//! of the core either refuses with a defined status or inspects the whole request.

use std::path::Path;
use std::sync::OnceLock;

use waf_core::{EngineMode, Waf};
use waf_proxy::profile;
use waf_proxy::replay::{inspect, parse_raw_http};

const XSS: &str = "<script>alert(1)</script>";
/// The XSS payload as XML text (escaped, so the document stays well-formed).
const XSS_XML: &str = "&lt;script&gt;alert(1)&lt;/script&gt;";

fn default_waf() -> &'static Waf {
    static W: OnceLock<Waf> = OnceLock::new();
    W.get_or_init(|| profile::default_waf(EngineMode::On).unwrap())
}

fn crs_waf() -> &'static Waf {
    static W: OnceLock<Waf> = OnceLock::new();
    W.get_or_init(|| {
        let crs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/crs");
        profile::crs_waf(&crs, 1, EngineMode::On).expect("CRS in ../shared/crs")
    })
}

/// A raw request: `head` is the request line and header lines (CRLF-separated, no final
/// blank line); Content-Length is added for the body.
fn raw(head: &str, body: &[u8]) -> Vec<u8> {
    let mut r = head.replace('\n', "\r\n").into_bytes();
    if !body.is_empty() {
        r.extend_from_slice(format!("\r\nContent-Length: {}", body.len()).as_bytes());
    }
    r.extend_from_slice(b"\r\n\r\n");
    r.extend_from_slice(body);
    r
}

/// The status each profile answers (`None`: passed), default profile first.
fn statuses(request: &[u8]) -> (Option<u16>, Option<u16>) {
    let req = parse_raw_http(request).unwrap();
    (
        inspect(default_waf(), &req).blocked,
        inspect(crs_waf(), &req).blocked,
    )
}

fn assert_blocked(what: &str, request: &[u8]) {
    let (d, c) = statuses(request);
    assert!(
        d.is_some() && c.is_some(),
        "{what}: default {d:?}, CRS {c:?}\n{}",
        String::from_utf8_lossy(request)
    );
}

/// CRS rules that refuse a shape by policy (allowed content types and charsets,
/// restricted headers, deprecated multipart transfer encodings), not as an attack: CRS runs
/// unmodified, so a benign twin may be refused by these in CRS mode.
const CRS_POLICY: &[u64] = &[
    920420, 920450, 920470, 920480, 922110, 922120, 949110, 980170,
];

fn assert_passed(what: &str, request: &[u8]) {
    let req = parse_raw_http(request).unwrap();
    let d = inspect(default_waf(), &req);
    let c = inspect(crs_waf(), &req);
    let crs_ok = c.blocked.is_none() || c.rule_ids.iter().all(|r| CRS_POLICY.contains(r));
    assert!(
        d.blocked.is_none() && crs_ok,
        "{what}: default {d:?}, CRS {c:?}\n{}",
        String::from_utf8_lossy(request)
    );
}

fn assert_status(what: &str, request: &[u8], status: u16) {
    let (d, c) = statuses(request);
    assert!(
        d == Some(status) && c == Some(status),
        "{what}: default {d:?}, CRS {c:?} (want {status})\n{}",
        String::from_utf8_lossy(request)
    );
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn json_xss() -> Vec<u8> {
    format!(r#"{{"q":"{XSS}"}}"#).into_bytes()
}

fn form_xss() -> Vec<u8> {
    b"q=%3Cscript%3Ealert(1)%3C%2Fscript%3E".to_vec()
}

const POST: &str = "POST /submit HTTP/1.1\nHost: example.com\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\nAccept: */*";

#[test]
fn plain_controls_are_blocked() {
    assert_blocked(
        "JSON",
        &raw(
            &format!("{POST}\nContent-Type: application/json"),
            &json_xss(),
        ),
    );
    assert_blocked(
        "form",
        &raw(
            &format!("{POST}\nContent-Type: application/x-www-form-urlencoded"),
            &form_xss(),
        ),
    );
}

#[test]
fn json_is_inspected_as_json_whatever_its_label() {
    for ct in [
        "",
        "\nContent-Type: text/plain",
        "\nContent-Type: text/plain;charset=UTF-8",
        "\nContent-Type: application/octet-stream",
        "\nContent-Type: application/x-www-form-urlencoded",
    ] {
        assert_blocked(ct, &raw(&format!("{POST}{ct}"), &json_xss()));
    }
    // The benign twin passes.
    assert_passed(
        "benign JSON as text/plain",
        &raw(
            &format!("{POST}\nContent-Type: text/plain"),
            br#"{"event":"page","url":"/home"}"#,
        ),
    );
}

#[test]
fn xml_is_inspected_as_xml_whatever_its_label() {
    let body = format!(r#"<?xml version="1.0"?><r><q>{XSS_XML}</q></r>"#);
    for ct in ["", "\nContent-Type: text/plain"] {
        assert_blocked(ct, &raw(&format!("{POST}{ct}"), body.as_bytes()));
    }
}

#[test]
fn form_is_inspected_as_form_whatever_its_label() {
    for ct in [
        "",
        "\nContent-Type: text/plain",
        "\nContent-Type: application/octet-stream",
    ] {
        assert_blocked(ct, &raw(&format!("{POST}{ct}"), &form_xss()));
    }
}

#[test]
fn declared_charsets_are_decoded() {
    // The same form in four EBCDIC code pages, and in UTF-16LE.
    for cs in ["ibm037", "IBM500", "cp875", "ibm1026", "cp037"] {
        let body = hex("987e4ca283998997a36e81938599a34df15d4c61a283998997a36e");
        assert_blocked(
            cs,
            &raw(
                &format!("{POST}\nContent-Type: application/x-www-form-urlencoded; charset={cs}"),
                &body,
            ),
        );
    }
    let utf16 = hex("71003d003c007300630072006900700074003e0061006c006500720074002800310029003c002f007300630072006900700074003e00");
    assert_blocked(
        "utf-16le form",
        &raw(
            &format!("{POST}\nContent-Type: application/x-www-form-urlencoded; charset=utf-16le"),
            &utf16,
        ),
    );
    // JSON in UTF-16 and UTF-32 (with BOMs), and UTF-16BE declared without one.
    let j16 = hex("fffe7b002200710022003a0022003c007300630072006900700074003e0061006c006500720074002800310029003c002f007300630072006900700074003e0022007d00");
    assert_blocked(
        "utf-16 JSON",
        &raw(&format!("{POST}\nContent-Type: application/json"), &j16),
    );
    let j32 = hex("fffe00007b0000002200000071000000220000003a000000220000003c0000007300000063000000720000006900000070000000740000003e000000610000006c0000006500000072000000740000002800000031000000290000003c0000002f0000007300000063000000720000006900000070000000740000003e000000220000007d000000");
    assert_blocked(
        "utf-32 JSON",
        &raw(
            &format!("{POST}\nContent-Type: application/json; charset=utf-32"),
            &j32,
        ),
    );
    let j16be = hex("007b002200710022003a0022003c007300630072006900700074003e0061006c006500720074002800310029003c002f007300630072006900700074003e0022007d");
    assert_blocked(
        "utf-16be JSON",
        &raw(
            &format!("{POST}\nContent-Type: application/json; charset=UTF-16BE"),
            &j16be,
        ),
    );
    // A charset nobody can decode is refused, not passed uninspected.
    assert_status(
        "unknown charset",
        &raw(
            &format!("{POST}\nContent-Type: application/x-www-form-urlencoded; charset=x-klingon"),
            b"q=hello",
        ),
        400,
    );
    assert_status(
        "unknown multipart charset",
        &raw(
            &format!("{POST}\nContent-Type: multipart/form-data; boundary=XyZ; charset=x-klingon"),
            &multipart(&[("Content-Disposition: form-data; name=\"a\"", b"1")]),
        ),
        400,
    );
    // Benign twins: a Shift_JIS form (percent-encoded bytes) and a UTF-16 JSON.
    assert_passed(
        "shift_jis form",
        &raw(
            &format!("{POST}\nContent-Type: application/x-www-form-urlencoded; charset=shift_jis"),
            b"name=%93%8C%8B%9E&comment=%82%B1%82%F1%82%C9%82%BF%82%CD",
        ),
    );
    let mut benign16 = vec![0xff, 0xfe];
    for u in r#"{"name":"Zoë"}"#.encode_utf16() {
        benign16.extend_from_slice(&u.to_le_bytes());
    }
    assert_passed(
        "utf-16 benign JSON",
        &raw(
            &format!("{POST}\nContent-Type: application/json"),
            &benign16,
        ),
    );
}

fn multipart(parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    for (headers, content) in parts {
        b.extend_from_slice(b"--XyZ\r\n");
        b.extend_from_slice(headers.replace('\n', "\r\n").as_bytes());
        b.extend_from_slice(b"\r\n\r\n");
        b.extend_from_slice(content);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"--XyZ--\r\n");
    b
}

const MP: &str = "\nContent-Type: multipart/form-data; boundary=XyZ";

#[test]
fn multipart_parts_are_decoded() {
    let cd = "Content-Disposition: form-data; name=\"q\"";
    assert_blocked(
        "plain part",
        &raw(&format!("{POST}{MP}"), &multipart(&[(cd, XSS.as_bytes())])),
    );
    let b64 = "PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==";
    assert_blocked(
        "base64 part",
        &raw(
            &format!("{POST}{MP}"),
            &multipart(&[(
                &format!("{cd}\nContent-Transfer-Encoding: base64"),
                b64.as_bytes(),
            )]),
        ),
    );
    let qp = "=3Cscript=3Ealert(1)=3C/scr=\r\nipt=3E";
    assert_blocked(
        "quoted-printable part",
        &raw(
            &format!("{POST}{MP}"),
            &multipart(&[(
                &format!("{cd}\nContent-Transfer-Encoding: quoted-printable"),
                qp.as_bytes(),
            )]),
        ),
    );
    let mut u16 = Vec::new();
    for u in XSS.encode_utf16() {
        u16.extend_from_slice(&u.to_le_bytes());
    }
    assert_blocked(
        "utf-16 part",
        &raw(
            &format!("{POST}{MP}"),
            &multipart(&[(
                &format!("{cd}\nContent-Type: text/plain; charset=utf-16le"),
                &u16,
            )]),
        ),
    );
    // Benign twin: a base64 part with harmless text.
    assert_passed(
        "benign base64 part",
        &raw(
            &format!("{POST}{MP}"),
            &multipart(&[(
                &format!("{cd}\nContent-Transfer-Encoding: base64"),
                b"aGVsbG8gd29ybGQ=",
            )]),
        ),
    );
}

#[test]
fn fullwidth_forms_are_normalised() {
    // ＜ｓｃｒｉｐｔ＞ａｌｅｒｔ(1)＜/ｓｃｒｉｐｔ＞ in UTF-8, percent-encoded.
    let fw: String = XSS
        .chars()
        .map(|c| match c {
            '!'..='~' if c != '(' && c != ')' && c != '/' && !c.is_ascii_digit() => {
                char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap()
            }
            _ => c,
        })
        .collect();
    let mut q = String::from("/search?q=");
    for b in fw.as_bytes() {
        q.push_str(&format!("%{b:02X}"));
    }
    assert_blocked(
        "fullwidth XSS in the query",
        &raw(&format!("GET {q} HTTP/1.1\nHost: example.com"), b""),
    );
    assert_passed(
        "fullwidth benign text",
        &raw(
            "GET /search?q=%EF%BC%A6%EF%BD%95%EF%BD%8C%EF%BD%8C%EF%BD%97%EF%BD%89%EF%BD%84%EF%BD%94%EF%BD%88 HTTP/1.1\nHost: example.com",
            b"",
        ),
    );
}

#[test]
fn xml_internal_entities_are_expanded_for_inspection() {
    // CRS mode: the payload sits in the entity's definition. (The default profile refuses any
    // DTD in a request, 196100.)
    let body = format!(
        r#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x "{}">]><r><q>&x;</q></r>"#,
        XSS.replace('<', "&#60;")
    );
    assert_blocked(
        "entity carrying XSS",
        &raw(
            &format!("{POST}\nContent-Type: application/xml"),
            body.as_bytes(),
        ),
    );
    // A billion laughs is refused, not expanded.
    let mut lol = String::from(r#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a0 "lol">"#);
    for i in 1..10 {
        lol.push_str(&format!(
            r#"<!ENTITY a{i} "&a{p};&a{p};&a{p};&a{p};&a{p};&a{p};&a{p};&a{p};&a{p};&a{p};">"#,
            p = i - 1
        ));
    }
    lol.push_str("]><r>&a9;</r>");
    assert_status(
        "billion laughs",
        &raw(
            &format!("{POST}\nContent-Type: application/xml"),
            lol.as_bytes(),
        ),
        400,
    );
}

#[test]
fn compressed_bodies_are_decoded_or_refused() {
    let form = format!("{POST}\nContent-Type: application/x-www-form-urlencoded");
    let gz =
        hex("1f8b08000000000002032bb4b5294e2eca2c28b14bcc492d2ad130d4b4d1870a0000dd09069e1b000000");
    assert_blocked(
        "gzip",
        &raw(&format!("{form}\nContent-Encoding: gzip"), &gz),
    );
    let zl = hex("789c2bb4b5294e2eca2c28b14bcc492d2ad130d4b4d1870a000088120996");
    assert_blocked(
        "deflate",
        &raw(&format!("{form}\nContent-Encoding: deflate"), &zl),
    );
    // br of "q=<script>alert(1)</script>" (quality 5, written by the brotli crate).
    let br = brotli_of(b"q=<script>alert(1)</script>");
    assert_blocked("br", &raw(&format!("{form}\nContent-Encoding: br"), &br));
    // An encoding we cannot decode, a corrupt stream and a bomb are refused.
    assert_status(
        "zstd",
        &raw(&format!("{form}\nContent-Encoding: zstd"), b"(\xb5/\xfd"),
        400,
    );
    assert_status(
        "corrupt gzip",
        &raw(
            &format!("{form}\nContent-Encoding: gzip"),
            b"\x1f\x8b\x08\x00garbage",
        ),
        400,
    );
    let bomb = gzip_of(&vec![b'a'; 20 << 20]);
    assert_status(
        "gzip bomb",
        &raw(&format!("{form}\nContent-Encoding: gzip"), &bomb),
        400,
    );
    // Benign twin.
    assert_passed(
        "benign gzip",
        &raw(
            &format!("{form}\nContent-Encoding: gzip"),
            &gzip_of(b"name=Ann&city=Berlin"),
        ),
    );
}

fn gzip_of(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn brotli_of(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 5,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &data[..], &mut out, &params).unwrap();
    out
}

#[test]
fn cookies_are_read_as_frameworks_read_them() {
    let get = "GET / HTTP/1.1\nHost: example.com";
    assert_blocked(
        "quoted cookie",
        &raw(&format!("{get}\nCookie: a=\"{XSS}\""), b""),
    );
    // Python's http.cookies and Go unquote backslash escapes inside quoted values.
    assert_blocked(
        "escaped quoted cookie",
        &raw(
            &format!("{get}\nCookie: a=\"\\074script\\076alert(1)\\074/script\\076\""),
            b"",
        ),
    );
    assert_passed(
        "benign quoted cookie",
        &raw(
            &format!("{get}\nCookie: prefs=\"lang=de; theme=dark\""),
            b"",
        ),
    );
}

#[test]
fn valid_shapes_are_accepted() {
    let cd = "Content-Disposition: form-data; name=\"comment\"";
    let body = multipart(&[(cd, b"hello world")]);
    assert_passed(
        "mixed-case media type",
        &raw(
            &format!("{POST}\nContent-Type: Multipart/Form-Data; Boundary=XyZ"),
            &body,
        ),
    );
    let padded = String::from_utf8(body.clone())
        .unwrap()
        .replace("--XyZ\r\n", "--XyZ  \t\r\n");
    assert_passed(
        "transport padding after the boundary",
        &raw(&format!("{POST}{MP}"), padded.as_bytes()),
    );
    assert_passed(
        "RFC 2231 boundary*",
        &raw(
            &format!("{POST}\nContent-Type: multipart/form-data; boundary*=utf-8''XyZ"),
            &body,
        ),
    );
    let file = multipart(&[(
        "Content-Disposition: form-data; name=\"f\"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf\nContent-Type: application/pdf",
        b"%PDF-1.7",
    )]);
    assert_passed("RFC 2231 filename*", &raw(&format!("{POST}{MP}"), &file));
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(br#"{"name":"Ann"}"#);
    assert_passed(
        "BOM before JSON",
        &raw(&format!("{POST}\nContent-Type: application/json"), &bom),
    );
    assert_passed(
        "JSON media type in upper case",
        &raw(
            &format!("{POST}\nContent-Type: APPLICATION/JSON; Charset=UTF-8"),
            br#"{"name":"Ann"}"#,
        ),
    );
}

#[test]
fn ambiguous_shapes_are_refused() {
    let body = multipart(&[("Content-Disposition: form-data; name=\"a\"", b"1")]);
    assert_status(
        "two boundaries",
        &raw(
            &format!("{POST}\nContent-Type: multipart/form-data; boundary=XyZ; boundary=other"),
            &body,
        ),
        400,
    );
    let two_cd = multipart(&[(
        "Content-Disposition: form-data; name=\"a\"\nContent-Disposition: form-data; name=\"b\"",
        b"1",
    )]);
    assert_status(
        "two Content-Disposition",
        &raw(&format!("{POST}{MP}"), &two_cd),
        400,
    );
    assert_status(
        "two different Content-Types",
        &raw(
            &format!("{POST}\nContent-Type: application/x-www-form-urlencoded\nContent-Type: application/json"),
            br#"{"q":"x"}"#,
        ),
        400,
    );
    assert_status(
        "two different Content-Encodings",
        &raw(
            &format!("{POST}\nContent-Type: application/x-www-form-urlencoded\nContent-Encoding: gzip\nContent-Encoding: br"),
            b"q=1",
        ),
        400,
    );
}

#[test]
fn limits_refuse_or_inspect_everything() {
    let form = format!("{POST}\nContent-Type: application/x-www-form-urlencoded");
    // Arguments: 1000 (the limit) are inspected, the attack in the last one is seen; one
    // more is refused.
    let mut body: Vec<String> = (0..999).map(|i| format!("a{i}=1")).collect();
    body.push("q=%3Cscript%3Ealert(1)%3C%2Fscript%3E".into());
    assert_status(
        "1000 args, XSS last",
        &raw(&form, body.join("&").as_bytes()),
        403,
    );
    let ok: Vec<String> = (0..1000).map(|i| format!("a{i}=1")).collect();
    assert_passed("1000 benign args", &raw(&form, ok.join("&").as_bytes()));
    let mut over = ok.clone();
    over.push("q=1".into());
    assert_status("1001 args", &raw(&form, over.join("&").as_bytes()), 400);
    // In the query string too.
    let q: Vec<String> = (0..1001).map(|i| format!("a{i}=1")).collect();
    assert_status(
        "1001 query args",
        &raw(
            &format!("GET /?{} HTTP/1.1\nHost: example.com", q.join("&")),
            b"",
        ),
        400,
    );
    // JSON: nesting is inspected (the payload at depth 100 is seen); past the depth limit
    // (512 in both profiles), or past the budget for argument names that deep nesting
    // multiplies, the body is refused with 400.
    let json = format!("{POST}\nContent-Type: application/json");
    let deep = |n: usize| format!("{}\"{XSS}\"{}", "[".repeat(n), "]".repeat(n));
    assert_status(
        "JSON depth 100 with XSS",
        &raw(&json, deep(100).as_bytes()),
        403,
    );
    assert_status(
        "JSON depth 400 (name budget)",
        &raw(&json, deep(400).as_bytes()),
        400,
    );
    assert_status("JSON depth 513", &raw(&json, deep(513).as_bytes()), 400);
    // Multipart: 1000 parts inspected, 1001 refused.
    let parts: Vec<(String, Vec<u8>)> = (0..1001)
        .map(|i| {
            (
                format!("Content-Disposition: form-data; name=\"p{i}\""),
                b"1".to_vec(),
            )
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = parts
        .iter()
        .map(|(h, c)| (h.as_str(), c.as_slice()))
        .collect();
    assert_passed(
        "1000 parts",
        &raw(&format!("{POST}{MP}"), &multipart(&refs[..1000])),
    );
    assert_status(
        "1001 parts",
        &raw(&format!("{POST}{MP}"), &multipart(&refs)),
        400,
    );
    // JSON that arrives as text/plain gets the same limits, and is refused past them.
    let big_array = format!("[{}\"{XSS}\"]", "1,".repeat(1000));
    assert_status(
        "text/plain JSON over the argument limit",
        &raw(
            &format!("{POST}\nContent-Type: text/plain"),
            big_array.as_bytes(),
        ),
        400,
    );
    // XML: depth 1024 (DEFAULT_XML_DEPTH_LIMIT) inspected, deeper refused.
    let xml = format!("{POST}\nContent-Type: application/xml");
    let nest = |n: usize| format!("{}{XSS_XML}{}", "<a>".repeat(n), "</a>".repeat(n));
    assert_status(
        "XML depth 100 with XSS",
        &raw(&xml, nest(100).as_bytes()),
        403,
    );
    assert_status("XML depth 1025", &raw(&xml, nest(1025).as_bytes()), 400);
    // Multipart part headers: 32 per part accepted, 33 refused.
    let many = |n: usize| {
        let mut h = String::from("Content-Disposition: form-data; name=\"a\"");
        for i in 1..n {
            h.push_str(&format!("\nX-H{i}: v"));
        }
        multipart(&[(&h, b"1")])
    };
    assert_passed("32 part headers", &raw(&format!("{POST}{MP}"), &many(32)));
    assert_status(
        "33 part headers",
        &raw(&format!("{POST}{MP}"), &many(33)),
        400,
    );
    // Body size: over SecRequestBodyLimit refused before any processing, with the 403
    // libmodsecurity 3 answers (issue 18).
    let mut big = b"q=".to_vec();
    big.resize(13_107_201, b'a');
    assert_status("body over the limit", &raw(&form, &big), 403);
}
