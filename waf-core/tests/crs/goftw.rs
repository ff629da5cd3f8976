//! How go-ftw turns a test stage into the bytes it sends (crs-tests.md §3.2).
//!
//! Read from go-ftw v2 (`ftwhttp/request.go` `BuildRequest`, `encodeDataParameters`,
//! `AddStandardHeaders`; `ftwhttp/header.go`; `test/defaults.go`; `test/data.go`), and
//! written again here, byte for byte where it matters:
//! - headers from the YAML map are sorted by name (`NewHeaderFromMap`), then go-ftw appends
//!   `Content-Type`, `Connection` and `Content-Length` in that order when they are missing;
//! - `data` is a Go template (only the `{{ "x" | repeat N }}` form occurs in CRS);
//! - the urlencoded body is re-encoded only when `url.QueryUnescape(data) == data`;
//! - a multipart body has every `\n` replaced by `\r\n`, even without autocompletion.

use base64::Engine as _;

use crate::suite::Input;

/// A request as go-ftw writes it: request line parts and the bytes after the request line
/// (header section, blank line, body).
#[derive(Debug, Clone, PartialEq)]
pub struct WireRequest {
    pub method: Vec<u8>,
    pub uri: Vec<u8>,
    pub version: Vec<u8>,
    /// Header fields in the order written.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Body bytes written after the blank line.
    pub body: Vec<u8>,
}

/// Builds the request of a stage that has no `encoded_request`.
pub fn build_request(input: &Input) -> Result<WireRequest, String> {
    let method = input.method.clone().unwrap_or_else(|| "GET".into());
    let uri = input.uri.clone().unwrap_or_else(|| "/".into());
    let version = input.version.clone().unwrap_or_else(|| "HTTP/1.1".into());
    let autocomplete = input.autocomplete_headers.unwrap_or(true);

    let mut headers: Vec<(String, String)> = input
        .headers
        .as_ref()
        .map(|h| h.0.clone())
        .unwrap_or_default();
    // Go's slices.Sort on strings: byte order.
    headers.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));

    let mut data: Vec<u8> = match (&input.data, &input.encoded_data) {
        (Some(d), _) => expand_template(d)?.into_bytes(),
        (None, Some(e)) => base64::engine::general_purpose::STANDARD
            .decode(strip_newlines(e))
            .map_err(|e| format!("encoded_data is not base64: {e}"))?,
        (None, None) => Vec::new(),
    };

    if !data.is_empty() && autocomplete {
        if !has_any(&headers, "Content-Type") {
            headers.push((
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            ));
        }
        data = encode_data_parameters(&headers, data);
    }

    if headers.iter().any(|(n, v)| {
        same_name(n, "Content-Type") && v.to_lowercase().contains("multipart/form-data;")
    }) {
        data = crlf_rewrite(&data);
    }

    if autocomplete {
        if !has_any(&headers, "Connection") {
            headers.push(("Connection".into(), "close".into()));
        }
        if !has_any(&headers, "Content-Length") && (!data.is_empty() || method_wants_body(&method))
        {
            headers.push(("Content-Length".into(), data.len().to_string()));
        }
    }

    Ok(WireRequest {
        method: method.into_bytes(),
        uri: uri.into_bytes(),
        version: version.into_bytes(),
        headers: headers
            .into_iter()
            .map(|(n, v)| (n.into_bytes(), v.into_bytes()))
            .collect(),
        body: data,
    })
}

/// Decodes `encoded_request` as go-ftw does (`base64.StdEncoding.DecodeString`, which skips
/// `\r` and `\n`).
pub fn decode_encoded_request(b64: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(strip_newlines(b64))
        .map_err(|e| format!("encoded_request is not base64: {e}"))
}

fn strip_newlines(s: &str) -> String {
    s.chars().filter(|c| *c != '\r' && *c != '\n').collect()
}

/// go-ftw's `methodsWithBodyRegex`, `^POST|PUT|PATCH|DELETE$`: note the alternation binds
/// loosely, so it means "starts with POST, or contains PUT or PATCH, or ends with DELETE".
pub fn method_wants_body(method: &str) -> bool {
    method.starts_with("POST")
        || method.contains("PUT")
        || method.contains("PATCH")
        || method.ends_with("DELETE")
}

/// `textproto.CanonicalMIMEHeaderKey` equality, which for these purposes is ASCII
/// case-insensitive equality.
fn same_name(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn has_any(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(n, _)| same_name(n, name))
}

/// `encodeDataParameters`: if a `Content-Type` equals (case-insensitively)
/// `application/x-www-form-urlencoded` and unescaping the data changes nothing, split on
/// `&` and the first `=` and `QueryEscape` each key and value. A trailing `&` is lost, as
/// in go-ftw. Data that fails to unescape (a bad `%`) is sent unchanged.
pub fn encode_data_parameters(headers: &[(String, String)], data: Vec<u8>) -> Vec<u8> {
    if data.is_empty() {
        return data;
    }
    let urlencoded = headers.iter().any(|(n, v)| {
        same_name(n, "Content-Type") && v.eq_ignore_ascii_case("application/x-www-form-urlencoded")
    });
    if !urlencoded {
        return data;
    }
    match query_unescape(&data) {
        Some(u) if u == data => {}
        _ => return data,
    }
    let mut out = Vec::with_capacity(data.len() * 2);
    for token in data.split(|&b| b == b'&') {
        match token.iter().position(|&b| b == b'=') {
            None => out.extend_from_slice(&query_escape(token)),
            Some(eq) => {
                out.extend_from_slice(&query_escape(&token[..eq]));
                out.push(b'=');
                out.extend_from_slice(&query_escape(&token[eq + 1..]));
            }
        }
        out.push(b'&');
    }
    // go-ftw loops `for len(remaining) > 0`: a trailing `&` leaves an empty remainder and no
    // empty token, so exactly one `&` is stripped whether or not the data ended with one.
    if data.ends_with(b"&") {
        // split() yields a final empty token for the trailing `&`; go-ftw does not.
        out.pop();
    }
    out.pop();
    out
}

/// Go's `url.QueryUnescape`: `+` becomes a space, `%XX` a byte; `None` for a `%` not
/// followed by two hex digits.
pub fn query_unescape(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                if i + 2 >= s.len() {
                    return None;
                }
                let hi = hex_val(s[i + 1])?;
                let lo = hex_val(s[i + 2])?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Go's `url.QueryEscape`: keeps `A-Z a-z 0-9 - _ . ~`, turns a space into `+`, and every
/// other byte into `%XX` with upper-case hex.
pub fn query_escape(s: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b),
            b' ' => out.push(b'+'),
            _ => {
                out.push(b'%');
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
        }
    }
    out
}

/// Replaces every `\n` with `\r\n` (Go's `bytes.ReplaceAll`, so an existing `\r\n` becomes
/// `\r\r\n`).
pub fn crlf_rewrite(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 16);
    for &b in data {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

/// go-ftw runs `data` through Go's `text/template` with the sprig functions. CRS uses one
/// form, `{{ "text" | repeat N }}`; anything else between `{{` and `}}` is an error here,
/// so that a new construct is noticed instead of being sent literally.
pub fn expand_template(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unclosed template action in data: {:?}", &rest[start..]))?;
        out.push_str(&eval_action(&after[..end])?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn eval_action(action: &str) -> Result<String, String> {
    let unsupported = || format!("unsupported template action in data: {{{{{action}}}}}");
    let a = action.trim();
    if a.starts_with('-') || a.ends_with('-') {
        return Err(unsupported());
    }
    // `"text" | repeat N`
    let (lit, func) = a.split_once('|').ok_or_else(unsupported)?;
    let lit = lit.trim();
    if lit.len() < 2
        || !lit.starts_with('"')
        || !lit.ends_with('"')
        || lit[1..lit.len() - 1].contains(['"', '\\'])
    {
        return Err(unsupported());
    }
    let text = &lit[1..lit.len() - 1];
    let mut words = func.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("repeat"), Some(n), None) => {
            let n: usize = n.parse().map_err(|_| unsupported())?;
            Ok(text.repeat(n))
        }
        _ => Err(unsupported()),
    }
}
