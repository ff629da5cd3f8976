//! The backend: albedo (coreruleset/albedo `server/server.go`), emulated.
//!
//! `POST /reflect` (or `/reflect/...`) reads a JSON spec `{status, headers, body,
//! encodedBody, logMessage}` and answers with it, as albedo behind Go's `net/http` does:
//! invalid JSON gives 400 `Invalid JSON in request body`; a status outside 100..=599 gives
//! 400 `Invalid status code: N` (the spec's headers are already set); status 0 means 200;
//! `body` wins over `encodedBody`; bad base64 keeps the status and answers
//! `invalid base64 encoding of response body`. Go adds `Content-Type` by sniffing when the
//! spec gives none and the body is not empty, and `Content-Length`.
//!
//! Every other request gets 200, `Content-Type: text/plain` and no body (albedo writes no
//! body and no type; like Coraza's harness we set `text/plain`).

use base64::Engine as _;
use serde_json::Value;

/// The response the backend sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// Answers a request as albedo would.
pub fn respond(method: &[u8], uri: &[u8], body: &[u8]) -> Response {
    let path = uri.split(|&b| b == b'?').next().unwrap_or(b"");
    if method == b"POST" && (path == b"/reflect" || path.starts_with(b"/reflect/")) {
        return reflect(body);
    }
    Response {
        status: 200,
        headers: vec![
            (b"Content-Type".to_vec(), b"text/plain".to_vec()),
            (b"Content-Length".to_vec(), b"0".to_vec()),
        ],
        body: Vec::new(),
    }
}

/// The decoded reflection spec.
#[derive(Debug, Default, PartialEq)]
pub struct Spec {
    pub status: i64,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub encoded_body: String,
}

/// Decodes the spec as Go's `json.Unmarshal` into albedo's struct would: field names match
/// case-insensitively (an exact match wins), unknown fields are ignored, `null` leaves a
/// field empty, a value of the wrong type is an error.
pub fn decode_spec(body: &[u8]) -> Option<Spec> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => return Some(Spec::default()),
        _ => return None,
    };
    let field = |name: &str| -> Option<&Value> {
        obj.get(name).or_else(|| {
            obj.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    };
    let string = |name: &str| -> Option<String> {
        match field(name) {
            None | Some(Value::Null) => Some(String::new()),
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => None,
        }
    };
    let mut spec = Spec {
        status: match field("status") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) => n.as_i64()?,
            Some(_) => return None,
        },
        body: string("body")?,
        encoded_body: string("encodedBody")?,
        ..Spec::default()
    };
    string("logMessage")?;
    match field("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                match v {
                    Value::String(s) => spec.headers.push((k.clone(), s.clone())),
                    Value::Null => spec.headers.push((k.clone(), String::new())),
                    _ => return None,
                }
            }
        }
        Some(_) => return None,
    }
    // Go ranges over a map in random order; sort for a deterministic answer.
    spec.headers.sort();
    Some(spec)
}

fn reflect(body: &[u8]) -> Response {
    let Some(spec) = decode_spec(body) else {
        return finish(400, Vec::new(), b"Invalid JSON in request body".to_vec());
    };
    let headers: Vec<(Vec<u8>, Vec<u8>)> = spec
        .headers
        .iter()
        .map(|(n, v)| (canonical_header_key(n).into_bytes(), v.clone().into_bytes()))
        .collect();
    if (spec.status > 0 && spec.status < 100) || spec.status >= 600 {
        let msg = format!("Invalid status code: {}", spec.status);
        return finish(400, headers, msg.into_bytes());
    }
    // Left: 0 (albedo answers 200), 100..=599, or negative (Go's WriteHeader panics and the
    // connection drops; we answer 200 rather than model that).
    let status = u16::try_from(spec.status)
        .ok()
        .filter(|s| *s != 0)
        .unwrap_or(200);
    let out = if !spec.body.is_empty() {
        spec.body.into_bytes()
    } else if spec.encoded_body.is_empty() {
        Vec::new()
    } else {
        let cleaned: String = spec
            .encoded_body
            .chars()
            .filter(|c| *c != '\r' && *c != '\n')
            .collect();
        match base64::engine::general_purpose::STANDARD.decode(cleaned) {
            Ok(b) => b,
            Err(_) => b"invalid base64 encoding of response body".to_vec(),
        }
    };
    finish(status, headers, out)
}

fn finish(status: u16, mut headers: Vec<(Vec<u8>, Vec<u8>)>, body: Vec<u8>) -> Response {
    let has = |h: &[(Vec<u8>, Vec<u8>)], n: &[u8]| h.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    if !body.is_empty() && !has(&headers, b"Content-Type") {
        headers.push((b"Content-Type".to_vec(), sniff(&body).as_bytes().to_vec()));
    }
    if !has(&headers, b"Content-Length") {
        headers.push((
            b"Content-Length".to_vec(),
            body.len().to_string().into_bytes(),
        ));
    }
    Response {
        status,
        headers,
        body,
    }
}

/// Go's `textproto.CanonicalMIMEHeaderKey`: upper-case the first letter and each letter
/// after `-`, lower-case the rest; names with a space or other non-token byte are left
/// alone.
pub fn canonical_header_key(name: &str) -> String {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return name.to_string();
    }
    let mut upper = true;
    name.bytes()
        .map(|b| {
            let c = if upper {
                b.to_ascii_uppercase()
            } else {
                b.to_ascii_lowercase()
            };
            upper = b == b'-';
            c as char
        })
        .collect()
}

/// A subset of Go's `http.DetectContentType` that covers text bodies: HTML and XML
/// signatures after leading white space, UTF BOMs, `%PDF-`, then `text/plain` unless a
/// binary control byte occurs in the first 512 bytes.
pub fn sniff(body: &[u8]) -> &'static str {
    let data = &body[..body.len().min(512)];
    let ws = data
        .iter()
        .position(|b| !matches!(b, b'\t' | b'\n' | 0x0c | b'\r' | b' '))
        .unwrap_or(data.len());
    let trimmed = &data[ws..];
    const HTML: &[&[u8]] = &[
        b"<!DOCTYPE HTML",
        b"<HTML",
        b"<HEAD",
        b"<SCRIPT",
        b"<IFRAME",
        b"<H1",
        b"<DIV",
        b"<FONT",
        b"<TABLE",
        b"<A",
        b"<STYLE",
        b"<TITLE",
        b"<B",
        b"<BODY",
        b"<BR",
        b"<P",
        b"<!--",
    ];
    for sig in HTML {
        if trimmed.len() > sig.len()
            && trimmed[..sig.len()].eq_ignore_ascii_case(sig)
            && matches!(trimmed[sig.len()], b' ' | b'>')
        {
            return "text/html; charset=utf-8";
        }
    }
    if trimmed.starts_with(b"<?xml") {
        return "text/xml; charset=utf-8";
    }
    if data.starts_with(b"\xFE\xFF") {
        return "text/plain; charset=utf-16be";
    }
    if data.starts_with(b"\xFF\xFE") {
        return "text/plain; charset=utf-16le";
    }
    if data.starts_with(b"\xEF\xBB\xBF") {
        return "text/plain; charset=utf-8";
    }
    if data.starts_with(b"%PDF-") {
        return "application/pdf";
    }
    let binary = |b: &u8| matches!(b, 0x00..=0x08 | 0x0b | 0x0e..=0x1a | 0x1c..=0x1f);
    if data.iter().any(binary) {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}
