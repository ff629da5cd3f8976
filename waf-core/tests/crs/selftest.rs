//! Unit tests of the harness itself. The test target has `harness = false`, so `main` runs
//! these first and stops if one fails. Vectors for Go's functions were worked out from Go's
//! `net/url` and go-ftw's sources.

use crate::albedo;
use crate::goftw::{self, WireRequest};
use crate::http1::{self, Framing};
use crate::known;
use crate::logline::{escape, LogCheck, LogEntry};
use crate::suite::{self, HeaderMap, Input, LogOutput};

macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        const TESTS: &[(&str, fn())] = &[$((stringify!($name), $name)),*];
    };
}

tests!(
    go_query_escape,
    go_query_unescape,
    form_encoding_heuristic,
    form_encoding_only_for_urlencoded,
    method_regex_binds_loosely,
    template_repeat,
    crlf_rewrite,
    build_sorts_and_autocompletes,
    build_without_autocomplete,
    build_multipart_rewrites_even_without_autocomplete,
    build_keeps_given_content_length,
    built_header_values_are_trimmed,
    raw_request_line_and_headers,
    raw_request_without_version,
    raw_folding_and_bare_lf,
    framing_content_length,
    framing_without_length,
    framing_chunked_wins,
    dechunk_cases,
    encoded_request_with_newlines,
    reflect_spec_decoding,
    reflect_encoded_body,
    reflect_errors,
    default_backend_response,
    sniffing,
    log_line_rendering,
    log_line_regexes_from_crs,
    log_check_logic,
    known_list_validation,
    yaml_header_map,
    yaml_comment_only,
    yaml_test_file,
    drive_and_aggregate_with_empty_rule_set,
);

/// Number of self-tests.
pub const COUNT: usize = TESTS.len();

/// Runs every self-test; returns `name: panic message` for each failure.
pub fn run() -> Vec<String> {
    let mut failures = Vec::new();
    for (name, f) in TESTS {
        if let Err(e) = std::panic::catch_unwind(f) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{name}: {msg}"));
        }
    }
    failures
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn hdrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn input(method: &str, headers: &[(&str, &str)], data: Option<&str>) -> Input {
    Input {
        method: Some(method.into()),
        uri: Some("/".into()),
        version: Some("HTTP/1.1".into()),
        headers: Some(HeaderMap(hdrs(headers))),
        data: data.map(Into::into),
        ..Input::default()
    }
}

fn names(req: &WireRequest) -> Vec<String> {
    req.headers
        .iter()
        .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
        .collect()
}

fn value<'a>(headers: &'a [(Vec<u8>, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v.as_slice())
}

// --- Go's net/url -------------------------------------------------------------------------

fn go_query_escape() {
    let t = |i: &[u8], o: &str| assert_eq!(goftw::query_escape(i), b(o), "escape {i:?}");
    t(b"", "");
    t(b"abcXYZ019-_.~", "abcXYZ019-_.~");
    t(b"a b", "a+b");
    t(b"&=+%/?#:;@$,", "%26%3D%2B%25%2F%3F%23%3A%3B%40%24%2C");
    t(b"<script>", "%3Cscript%3E");
    t("é".as_bytes(), "%C3%A9");
    t(b"\x00\xff\r\n", "%00%FF%0D%0A");
    t(b"'\"!*()", "%27%22%21%2A%28%29");
}

fn go_query_unescape() {
    let t = |i: &str, o: Option<&[u8]>| {
        assert_eq!(
            goftw::query_unescape(i.as_bytes()).as_deref(),
            o,
            "unescape {i:?}"
        )
    };
    t("", Some(b""));
    t("abc", Some(b"abc"));
    t("a+b", Some(b"a b"));
    t("%41%42%4a%4A", Some(b"ABJJ"));
    t("%ff%00", Some(b"\xff\x00"));
    t("%", None);
    t("%4", None);
    t("a%4", None);
    t("%zz", None);
    t("%4g", None);
    t("100%", None);
    t("%25", Some(b"%"));
}

fn form_encoding_heuristic() {
    let ct = hdrs(&[("Content-Type", "application/x-www-form-urlencoded")]);
    let t = |i: &str, o: &str| {
        assert_eq!(
            goftw::encode_data_parameters(&ct, b(i)),
            b(o),
            "encode {i:?}"
        )
    };
    t("a=b", "a=b");
    t("a=b c&d=<x>", "a=b+c&d=%3Cx%3E");
    t("a=b=c", "a=b%3Dc");
    t("key", "key");
    t("a=b&", "a=b");
    t("&", "");
    t("a&&b", "a&&b");
    t("a=b&&", "a=b&");
    t("=x", "=x");
    t("a='1 or 1=1'", "a=%271+or+1%3D1%27");
    t("a=é", "a=%C3%A9");
    // Already encoded (unescaping changes it): sent unchanged.
    t("a=b%20c&d=<x>", "a=b%20c&d=<x>");
    t("a=b+c <x>", "a=b+c <x>");
    // Unescaping fails: sent unchanged.
    t("a=100%&b=<x>", "a=100%&b=<x>");
    // Empty data.
    t("", "");
    // The content type compares case-insensitively, on any Content-Type header.
    let mixed = hdrs(&[("content-type", "Application/X-WWW-Form-Urlencoded")]);
    assert_eq!(goftw::encode_data_parameters(&mixed, b("a=<")), b("a=%3C"));
}

fn form_encoding_only_for_urlencoded() {
    for ct in [
        "application/json",
        "application/x-www-form-urlencoded; charset=utf-8",
        "text/plain",
    ] {
        let h = hdrs(&[("Content-Type", ct)]);
        assert_eq!(
            goftw::encode_data_parameters(&h, b("a=<x y>")),
            b("a=<x y>"),
            "{ct}"
        );
    }
    assert_eq!(
        goftw::encode_data_parameters(&[], b("a=<x y>")),
        b("a=<x y>")
    );
}

fn method_regex_binds_loosely() {
    for m in [
        "POST", "PUT", "PATCH", "DELETE", "POSTX", "XPUTX", "XDELETE", "XPATCH",
    ] {
        assert!(goftw::method_wants_body(m), "{m}");
    }
    for m in ["GET", "HEAD", "XPOST", "DELETEX", "post", "OPTIONS", ""] {
        assert!(!goftw::method_wants_body(m), "{m}");
    }
}

fn template_repeat() {
    assert_eq!(
        goftw::expand_template("plain {x} }} text").unwrap(),
        "plain {x} }} text"
    );
    assert_eq!(
        goftw::expand_template("a{{ \"1\" | repeat 3 }}b").unwrap(),
        "a111b"
    );
    assert_eq!(
        goftw::expand_template("{{\"ab\"|repeat 2}}").unwrap(),
        "abab"
    );
    assert_eq!(
        goftw::expand_template("{{ \"x\" | repeat 0 }}").unwrap(),
        ""
    );
    assert!(goftw::expand_template("{{ .Foo }}").is_err());
    assert!(goftw::expand_template("{{ \"x\" | repeat }}").is_err());
    assert!(goftw::expand_template("{{ \"x\" | repeat 2").is_err());
    assert!(goftw::expand_template("{{- \"x\" | repeat 2 }}").is_err());
}

fn crlf_rewrite() {
    assert_eq!(goftw::crlf_rewrite(b"a\nb\r\nc"), b("a\r\nb\r\r\nc"));
    assert_eq!(goftw::crlf_rewrite(b""), b(""));
    assert_eq!(goftw::crlf_rewrite(b"\n\n"), b("\r\n\r\n"));
}

// --- go-ftw request building ------------------------------------------------------------

fn build_sorts_and_autocompletes() {
    let i = input(
        "POST",
        &[
            ("User-Agent", "x"),
            ("Host", "localhost"),
            ("Accept", "*/*"),
        ],
        Some("a=<b>"),
    );
    let r = goftw::build_request(&i).unwrap();
    assert_eq!(
        names(&r),
        [
            "Accept",
            "Host",
            "User-Agent",
            "Content-Type",
            "Connection",
            "Content-Length"
        ]
    );
    assert_eq!(
        value(&r.headers, "Content-Type"),
        Some(&b"application/x-www-form-urlencoded"[..])
    );
    assert_eq!(value(&r.headers, "Connection"), Some(&b"close"[..]));
    assert_eq!(r.body, b("a=%3Cb%3E"));
    assert_eq!(value(&r.headers, "Content-Length"), Some(&b"9"[..]));

    // GET without data: no Content-Length; POST without data: Content-Length 0.
    let r = goftw::build_request(&input("GET", &[("Host", "h")], None)).unwrap();
    assert_eq!(names(&r), ["Host", "Connection"]);
    let r = goftw::build_request(&input("POST", &[("Host", "h")], None)).unwrap();
    assert_eq!(value(&r.headers, "Content-Length"), Some(&b"0"[..]));
    // An empty data string is no data.
    let r = goftw::build_request(&input("GET", &[], Some(""))).unwrap();
    assert_eq!(names(&r), ["Connection"]);
    // Defaults.
    let r = goftw::build_request(&Input::default()).unwrap();
    assert_eq!(
        (r.method, r.uri, r.version),
        (b("GET"), b("/"), b("HTTP/1.1"))
    );
    // A given Connection header (any case) is kept.
    let r = goftw::build_request(&input("GET", &[("connection", "keep-alive")], None)).unwrap();
    assert_eq!(names(&r), ["connection"]);
}

fn build_without_autocomplete() {
    let mut i = input("POST", &[("Host", "h")], Some("a=<b>"));
    i.autocomplete_headers = Some(false);
    let r = goftw::build_request(&i).unwrap();
    assert_eq!(names(&r), ["Host"]);
    assert_eq!(r.body, b("a=<b>"));
}

fn build_multipart_rewrites_even_without_autocomplete() {
    let data = "--b\nContent-Disposition: form-data; name=\"a\"\n\n1\n--b--\n";
    let want = b("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n");
    for auto in [true, false] {
        let mut i = input(
            "POST",
            &[("Content-Type", "Multipart/Form-Data; boundary=b")],
            Some(data),
        );
        i.autocomplete_headers = Some(auto);
        let r = goftw::build_request(&i).unwrap();
        assert_eq!(r.body, want, "autocomplete {auto}");
    }
    // Without the `;` there is no rewrite.
    let i = input(
        "POST",
        &[("Content-Type", "multipart/form-data")],
        Some("a\nb"),
    );
    assert_eq!(goftw::build_request(&i).unwrap().body, b("a\nb"));
}

fn build_keeps_given_content_length() {
    let i = input("POST", &[("Content-Length", "3")], Some("abcdef"));
    let r = goftw::build_request(&i).unwrap();
    assert_eq!(value(&r.headers, "Content-Length"), Some(&b"3"[..]));
    // The server reads 3 bytes.
    let p = http1::receive_built(&r);
    assert_eq!(p.body, b("abc"));
    assert_eq!(
        p.framing,
        Framing::Length {
            declared: 3,
            dropped: 3
        }
    );
}

fn built_header_values_are_trimmed() {
    let mut i = input(
        "GET",
        &[("X-Filename", " photo.php \t"), ("X-Bare-Cr", "a\rb")],
        None,
    );
    i.autocomplete_headers = Some(false);
    let p = http1::receive_built(&goftw::build_request(&i).unwrap());
    assert_eq!(value(&p.headers, "X-Filename"), Some(&b"photo.php"[..]));
    // A bare CR is not a line end: it stays in the value.
    assert_eq!(value(&p.headers, "X-Bare-Cr"), Some(&b"a\rb"[..]));
    // The request line is kept exactly as given.
    let mut i = input("\tGET", &[], None);
    i.version = Some("HTTP\\1.0".into());
    let p = http1::receive_built(&goftw::build_request(&i).unwrap());
    assert_eq!((p.method, p.version), (b("\tGET"), b("HTTP\\1.0")));
}

// --- HTTP/1.1 parsing -----------------------------------------------------------------------

fn raw_request_line_and_headers() {
    let raw = b"POST /a?b=c HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Type: application/xml\r\nContent-Length: 2\r\n\r\n{}";
    let p = http1::parse_raw(raw);
    assert_eq!(
        (p.method.as_slice(), p.uri.as_slice(), p.version.as_slice()),
        (&b"POST"[..], &b"/a?b=c"[..], &b"HTTP/1.1"[..])
    );
    assert_eq!(p.headers.len(), 4);
    assert_eq!(p.headers[1], (b("Content-Type"), b("application/json")));
    assert_eq!(p.headers[2], (b("Content-Type"), b("application/xml")));
    assert_eq!(p.body, b("{}"));
    // Empty value kept.
    let p = http1::parse_raw(b"GET / HTTP/1.0\r\nHost:\r\n\r\n");
    assert_eq!(p.headers, vec![(b("Host"), b(""))]);
    assert!(p.body.is_empty());
    // A space inside the target: split at the first and last space.
    let p = http1::parse_raw(b"GET /a b HTTP/1.1\r\n\r\n");
    assert_eq!((p.uri, p.version), (b("/a b"), b("HTTP/1.1")));
}

fn raw_request_without_version() {
    let p = http1::parse_raw(b"GET /\r\n\r\n");
    assert_eq!((p.method, p.uri, p.version), (b("GET"), b("/"), b("")));
    let p = http1::parse_raw(b"GET\r\n\r\n");
    assert_eq!((p.method, p.uri, p.version), (b("GET"), b(""), b("")));
}

fn raw_folding_and_bare_lf() {
    let p = http1::parse_raw(b"GET / HTTP/1.1\nA: 1\n  2\nB:3 \n\nrest");
    assert_eq!(p.headers, vec![(b("A"), b("1 2")), (b("B"), b("3"))]);
    assert_eq!(p.framing, Framing::None { dropped: 4 });
}

fn framing_content_length() {
    let h = |v: &str| vec![(b("Content-Length"), b(v))];
    assert_eq!(
        http1::frame_body(&h("3"), b"abcdef"),
        (
            b("abc"),
            Framing::Length {
                declared: 3,
                dropped: 3
            }
        )
    );
    assert_eq!(
        http1::frame_body(&h("10"), b"abc"),
        (
            b("abc"),
            Framing::Length {
                declared: 10,
                dropped: 0
            }
        )
    );
    assert_eq!(http1::frame_body(&h("0"), b"hi=test\r\n").0, b(""));
    assert_eq!(
        http1::frame_body(&h("3;"), b"abc"),
        (b("abc"), Framing::BadLength)
    );
    assert_eq!(
        http1::frame_body(&h("NotDigits"), b""),
        (b(""), Framing::BadLength)
    );
    assert_eq!(
        http1::frame_body(&h("-1"), b"ab"),
        (b("ab"), Framing::BadLength)
    );
    assert_eq!(http1::frame_body(&h("2, 2"), b"abc").0, b("ab"));
    assert_eq!(http1::frame_body(&h("2, 3"), b"abc").1, Framing::BadLength);
}

fn framing_without_length() {
    assert_eq!(
        http1::frame_body(&[], b"hi=test"),
        (b(""), Framing::None { dropped: 7 })
    );
    assert_eq!(
        http1::frame_body(&[], b""),
        (b(""), Framing::None { dropped: 0 })
    );
}

fn framing_chunked_wins() {
    let h = vec![
        (b("Content-Length"), b("7")),
        (b("transfer-encoding"), b("gzip, Chunked")),
    ];
    assert_eq!(
        http1::frame_body(&h, b"7\r\nfoo=bar\r\n0\r\n\r\n"),
        (b("foo=bar"), Framing::Chunked { complete: true })
    );
    let h = vec![(b("Transfer-Encoding"), b("gzip"))];
    assert_eq!(
        http1::frame_body(&h, b"xyz"),
        (b("xyz"), Framing::OtherEncoding)
    );
}

fn dechunk_cases() {
    assert_eq!(
        http1::dechunk(b"3\r\nHi \r\n3\r\nCRS\r\n0\r\n\r\n"),
        (b("Hi CRS"), true)
    );
    assert_eq!(
        http1::dechunk(b"a;ext=1\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n"),
        (b("0123456789"), true)
    );
    assert_eq!(
        http1::dechunk(b"A\n0123456789\n0\n\n"),
        (b("0123456789"), true)
    );
    assert_eq!(http1::dechunk(b"5\r\nab"), (b("ab"), false));
    assert_eq!(http1::dechunk(b"2\r\nabX"), (b("ab"), false));
    assert_eq!(http1::dechunk(b"zz\r\nab\r\n"), (b(""), false));
    assert_eq!(http1::dechunk(b"2\r\nab\r\n"), (b("ab"), false));
    assert_eq!(http1::dechunk(b""), (b(""), false));
}

fn encoded_request_with_newlines() {
    // CRS writes long base64 with `\n` inside; Go's decoder skips `\r` and `\n`.
    let raw = goftw::decode_encoded_request("R0VUIC8gSFRUUC8xLjANCkhv\nc3Q6DQoNCg==").unwrap();
    assert_eq!(raw, b("GET / HTTP/1.0\r\nHost:\r\n\r\n"));
    assert!(goftw::decode_encoded_request("!!!").is_err());
    let p = http1::parse_raw(&goftw::decode_encoded_request(
        "UE9TVCAvIEhUVFAvMS4xDQpBY2NlcHQ6ICovKg0KSG9zdDogbG9jYWxob3N0DQpUcmFuc2Zlci1F\nbmNvZGluZzogY2h1bmtlZA0KVXNlci1BZ2VudDogTW9kU2VjdXJpdHkgQ1JTIDMgVGVzdHMNCg0K\nMw0KSGkgDQozDQpDUlMNCjANCg0K",
    ).unwrap());
    assert_eq!(p.method, b("POST"));
    assert_eq!(p.body, b("Hi CRS"));
    assert_eq!(p.framing, Framing::Chunked { complete: true });
}

// --- albedo ---------------------------------------------------------------------------------

fn reflect_spec_decoding() {
    let s = albedo::decode_spec(
        br#"{"Body": "x", "STATUS": 201, "headers": {"x-a": "1"}, "extra": [1]}"#,
    )
    .unwrap();
    assert_eq!((s.body.as_str(), s.status), ("x", 201));
    assert_eq!(s.headers, vec![("x-a".to_string(), "1".to_string())]);
    // An exact name wins over a case-insensitive one.
    let s = albedo::decode_spec(br#"{"BODY": "a", "body": "b"}"#).unwrap();
    assert_eq!(s.body, "b");
    assert_eq!(albedo::decode_spec(b"null"), Some(albedo::Spec::default()));
    assert_eq!(albedo::decode_spec(br#"{"body": 1}"#), None);
    assert_eq!(albedo::decode_spec(br#"[]"#), None);
    assert_eq!(albedo::decode_spec(b"please review the function"), None);

    let r = albedo::respond(
        b"POST",
        b"/reflect?x=1",
        br#"{"body": "<html><body>x", "headers": {"x-test": "v"}}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b("<html><body>x"));
    assert_eq!(value(&r.headers, "X-Test"), Some(&b"v"[..]));
    assert_eq!(r.headers[0].0, b("X-Test"));
    assert_eq!(
        value(&r.headers, "Content-Type"),
        Some(&b"text/html; charset=utf-8"[..])
    );
    assert_eq!(value(&r.headers, "Content-Length"), Some(&b"13"[..]));
    // A given Content-Type is kept.
    let r = albedo::respond(
        b"POST",
        b"/reflect/",
        br#"{"body": "x", "headers": {"content-type": "application/json"}}"#,
    );
    assert_eq!(
        value(&r.headers, "Content-Type"),
        Some(&b"application/json"[..])
    );
    assert_eq!(albedo::canonical_header_key("x-foo-BAR"), "X-Foo-Bar");
    assert_eq!(albedo::canonical_header_key("bad name"), "bad name");
}

fn reflect_encoded_body() {
    let r = albedo::respond(
        b"POST",
        b"/reflect",
        br#"{"status": 500, "encodedBody": "PD9waHAg\nZWNobyA/Pg=="}"#,
    );
    assert_eq!(r.status, 500);
    assert_eq!(r.body, b("<?php echo ?>"));
    // `body` wins.
    let r = albedo::respond(
        b"POST",
        b"/reflect",
        br#"{"body": "a", "encodedBody": "Yg=="}"#,
    );
    assert_eq!(r.body, b("a"));
    // Bad base64 keeps the status.
    let r = albedo::respond(
        b"POST",
        b"/reflect",
        br#"{"status": 404, "encodedBody": "***"}"#,
    );
    assert_eq!(
        (r.status, r.body),
        (404, b("invalid base64 encoding of response body"))
    );
}

fn reflect_errors() {
    let r = albedo::respond(b"POST", b"/reflect", b"{not json");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (400, &b"Invalid JSON in request body"[..])
    );
    let r = albedo::respond(b"POST", b"/reflect", br#"{"status": 99}"#);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (400, &b"Invalid status code: 99"[..])
    );
    let r = albedo::respond(b"POST", b"/reflect", br#"{"status": 600}"#);
    assert_eq!(r.status, 400);
    let r = albedo::respond(b"POST", b"/reflect", br#"{}"#);
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert_eq!(value(&r.headers, "Content-Type"), None);
}

fn default_backend_response() {
    for (m, u) in [
        (&b"GET"[..], &b"/"[..]),
        (b"GET", b"/reflect"),
        (b"POST", b"/reflection"),
        (b"post", b"/reflect"),
    ] {
        let r = albedo::respond(m, u, br#"{"body": "x"}"#);
        assert_eq!((r.status, r.body.len()), (200, 0), "{m:?} {u:?}");
        assert_eq!(value(&r.headers, "Content-Type"), Some(&b"text/plain"[..]));
    }
}

fn sniffing() {
    assert_eq!(albedo::sniff(b"  <HTML>"), "text/html; charset=utf-8");
    assert_eq!(albedo::sniff(b"<title>x"), "text/html; charset=utf-8");
    assert_eq!(
        albedo::sniff(b"<?php echo 1; ?>"),
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        albedo::sniff(b"<?xml version=\"1.0\"?>"),
        "text/xml; charset=utf-8"
    );
    assert_eq!(albedo::sniff(b"<abc"), "text/plain; charset=utf-8");
    assert_eq!(
        albedo::sniff(b"java.lang.NullPointerException"),
        "text/plain; charset=utf-8"
    );
    assert_eq!(albedo::sniff(b"\x00\x01"), "application/octet-stream");
}

// --- log lines ------------------------------------------------------------------------------

fn entry(id: u64) -> LogEntry {
    LogEntry {
        id,
        ..LogEntry::default()
    }
}

fn log_line_rendering() {
    let e = LogEntry {
        id: 942100,
        message: Some("SQL Injection Attack Detected via libinjection".into()),
        data: Some("Matched Data: s&1 found within ARGS:id: 1' or \"1\"=\"1".into()),
        severity: Some("CRITICAL"),
        tags: vec!["attack-sqli".into(), "paranoia-level/1".into()],
        matched_var_name: "ARGS:id".into(),
        matched_data: "1' or \"1\"=\"1".into(),
        file: "rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf".into(),
        line: 46,
    };
    assert_eq!(
        e.render(),
        "ModSecurity: Warning. Matched \"1' or \\\"1\\\"=\\\"1\" at ARGS:id. \
         [file \"rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf\"] [line \"46\"] [id \"942100\"] \
         [msg \"SQL Injection Attack Detected via libinjection\"] \
         [data \"Matched Data: s&1 found within ARGS:id: 1' or \\\"1\\\"=\\\"1\"] \
         [severity \"CRITICAL\"] [tag \"attack-sqli\"] [tag \"paranoia-level/1\"]"
    );
    assert_eq!(
        entry(5).render(),
        "ModSecurity: Warning. Unconditional match in SecAction. [id \"5\"]"
    );
    assert_eq!(escape("a\\b\r\n\u{e9}"), "a\\\\b\\x0d\\x0a\\xc3\\xa9");
}

fn log_line_regexes_from_crs() {
    let check = |regex: &str, e: LogEntry, want: bool| {
        let r = regex::Regex::new(regex).unwrap();
        assert_eq!(r.is_match(&e.render()), want, "/{regex}/ on {}", e.render());
    };
    let multipart = r#"Multipart parsing error: Multipart: Invalid part header \(contains invalid character\)|\[id "922130"\].*\[msg "Multipart header contains characters outside of valid range"\]"#;
    let mut e = entry(922130);
    e.message = Some("Multipart header contains characters outside of valid range".into());
    e.data = Some("Matched Data: \u{e} found within MULTIPART_PART_HEADERS:…".into());
    check(multipart, e.clone(), true);
    e.id = 922131;
    check(multipart, e, false);

    let mut e = entry(932207);
    e.data = Some(
        "Matched Data: $u found within REQUEST_HEADERS:Referer: #x=foo;cat$u /etc$u/passwd".into(),
    );
    check(
        r"Matched Data: \$u found within REQUEST_HEADERS:Referer: #x=foo;cat\$u /etc\$u/passwd",
        e,
        true,
    );

    let mut e = entry(949110);
    e.message = Some("Inbound Anomaly Score Exceeded (Total Score: 5)".into());
    check(r"Inbound Anomaly Score Exceeded \(Total Score: ", e, true);

    let mut e = entry(920540);
    e.matched_var_name = "ARGS:testarg".into();
    check("ARGS:testarg", e, true);

    let mut e = entry(932300);
    e.data = Some("Matched Data: MAIL FROM:<Smith@bar.com> found within ARGS:textarea: x\r\nMAIL FROM:<Smith@bar.com>".into());
    check(
        r"Matched Data:.*MAIL FROM:<Smith@bar.com> found within ARGS:textarea:.*MAIL FROM:<Smith@bar.com>",
        e,
        true,
    );
}

fn log_check_logic() {
    let lo = LogOutput {
        expect_ids: vec![1, 2],
        no_expect_ids: vec![3],
        match_regex: Some(r#"\[id "2"\]"#.into()),
        no_match_regex: Some(r#"\[id "4"\]"#.into()),
        ..LogOutput::default()
    };
    let c = LogCheck::new(&lo).unwrap();
    let lines = |ids: &[u64]| ids.iter().map(|&i| entry(i).render()).collect::<Vec<_>>();
    assert!(c.check(&[2, 1, 9], &lines(&[2, 1, 9])).is_empty());
    assert_eq!(c.check(&[1], &lines(&[1])).len(), 2); // missing 2, no line with id 2
    assert_eq!(
        c.check(&[1, 2, 3], &lines(&[1, 2, 3])),
        vec!["unexpected [3]".to_string()]
    );
    assert_eq!(c.check(&[1, 2, 4], &lines(&[1, 2, 4])).len(), 1);
    assert!(LogCheck::new(&LogOutput {
        match_regex: Some("(".into()),
        ..LogOutput::default()
    })
    .is_err());
}

fn known_list_validation() {
    let ok = known::parse(
        "known:\n  - test: 920100-4\n    reason: server\n  - test: \"921140-1\"\n    reason: x\n",
    )
    .unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok["921140-1"], "x");
    assert!(known::parse("known: []\n").unwrap().is_empty());
    assert!(known::parse("known:\n  - test: 1-1\n    reason: ''\n").is_err());
    assert!(known::parse("known:\n  - test: 1-1\n").is_err());
    assert!(known::parse("known:\n  - test: 1-1\n    reason: a\n    extra: b\n").is_err());
    assert!(known::parse("known:\n  - test: 1\n    reason: a\n").is_err());
    assert!(known::parse("known:\n  - test: a-1\n    reason: a\n").is_err());
    assert!(
        known::parse("known:\n  - test: 1-1\n    reason: a\n  - test: 1-1\n    reason: b\n")
            .is_err()
    );
    assert!(known::parse("other: 1\nknown: []\n").is_err());
    let many: String = (0..=known::MAX_ENTRIES)
        .map(|i| format!("  - test: 1-{i}\n    reason: r\n"))
        .collect();
    assert!(known::parse(&format!("known:\n{many}")).is_err());
}

// --- YAML -----------------------------------------------------------------------------------

fn yaml_header_map() {
    let h: HeaderMap = yaml_serde::from_str(
        "B: x\nContent-Length: 7\nA: ''\nC: true\nD:\nE: 0x1F\nF: 007\nG: 1.50\nH: ~\n",
    )
    .unwrap();
    assert_eq!(
        h.0,
        hdrs(&[
            ("B", "x"),
            ("Content-Length", "7"),
            ("A", ""),
            ("C", "true"),
            ("D", ""),
            ("E", "0x1F"),
            ("F", "007"),
            ("G", "1.50"),
            ("H", "")
        ])
    );
    assert!(yaml_serde::from_str::<HeaderMap>("A: 1\nA: 2\n").is_err());
    assert!(yaml_serde::from_str::<HeaderMap>("A: [1]\n").is_err());
}

fn yaml_comment_only() {
    assert!(suite::is_comment_only("# nothing\n---\n\n# more\n"));
    assert!(!suite::is_comment_only("---\nrule_id: 1\n"));
}

fn yaml_test_file() {
    let text = r#"---
meta:
  author: x
rule_id: 920100
tests:
  - test_id: 4
    desc: d
    tags: [a]
    stages:
      - input:
          dest_addr: "127.0.0.1"
          port: 80
          method: "POST"
          headers:
            Host: localhost
          data: "a=b"
          future_field: 1
        output:
          log:
            expect_ids: [920100]
          status: 200
  - test_id: 5
    stages:
      - input:
          encoded_request: "R0VUIC8gSFRUUC8xLjANCkhvc3Q6DQoNCg=="
        output:
          status: 400
"#;
    let f: suite::TestFile = yaml_serde::from_str(text).unwrap();
    assert_eq!((f.rule_id, f.tests.len()), (920100, 2));
    let s = &f.tests[0].stages[0];
    assert!(s.output.checks_log());
    assert!(!f.tests[1].stages[0].output.checks_log());
    let mut unknown = std::collections::BTreeMap::new();
    suite::unknown_fields(&f, &mut unknown);
    assert_eq!(unknown.keys().collect::<Vec<_>>(), ["input.future_field"]);
    let p = crate::run::prepare(s).unwrap();
    assert_eq!(p.request.body, b("a=b"));
    assert!(crate::run::prepare(&f.tests[1].stages[0])
        .unwrap()
        .check
        .is_none());
    // A malformed file fails.
    assert!(yaml_serde::from_str::<suite::TestFile>("rule_id: x\ntests: []\n").is_err());
}

// --- driving and aggregation --------------------------------------------------------------

fn stage(yaml: &str) -> crate::run::PreparedStage {
    let s: suite::Stage = yaml_serde::from_str(yaml).unwrap();
    crate::run::prepare(&s).unwrap()
}

fn drive_and_aggregate_with_empty_rule_set() {
    // An empty rule set matches nothing, whatever the engine's state of completion.
    let waf = waf_core::Waf::builder().build().unwrap();
    let reflect = stage(
        "input: {method: POST, uri: /reflect, headers: {Content-Type: application/json}, data: '{\"status\": 201, \"body\": \"x\"}'}\noutput: {log: {no_expect_ids: [1]}}",
    );
    let out = crate::run::drive(&waf, &reflect.request, reflect.server);
    assert!(out.entries.is_empty() && out.intervention.is_none());
    assert_eq!(out.response.as_ref().map(|r| r.status), Some(201));
    assert!(crate::run::summary(&reflect.request, &out).contains("response: 201"));

    let pass = || stage("input: {uri: /}\noutput: {log: {no_expect_ids: [1]}}");
    let fail = || stage("input: {uri: /}\noutput: {log: {expect_ids: [1]}}");
    let skip = || stage("input: {uri: /}\noutput: {status: 400}");
    let job = |stages| crate::Job {
        id: "1-1".into(),
        desc: String::new(),
        file: String::new(),
        stages,
    };
    let result = |stages| crate::run_job(&waf, &job(stages), true);
    assert!(matches!(result(vec![pass()]), crate::TestResult::Passed));
    assert!(matches!(result(vec![skip()]), crate::TestResult::Skipped));
    assert!(matches!(
        result(vec![skip(), pass()]),
        crate::TestResult::Passed
    ));
    match result(vec![pass(), fail()]) {
        crate::TestResult::Failed { why, verbose } => {
            assert_eq!(why, "stage 2: missing [1]");
            assert!(verbose.contains("request: GET / HTTP/1.1"), "{verbose}");
        }
        _ => panic!("a failing stage fails the test"),
    }
    match result(vec![fail()]) {
        crate::TestResult::Failed { why, .. } => assert_eq!(why, "missing [1]"),
        _ => panic!("a failing stage fails the test"),
    }
}
