//! The server side of the wire: what an HTTP/1.1 server hands the WAF.
//!
//! Both kinds of stage go through here. An `encoded_request` is parsed whole (request line,
//! header fields, body). A built request keeps the request line go-ftw wrote (malformed
//! methods and versions reach the WAF as written, which is what these tests probe), but its
//! header section is written to bytes and parsed back, so both kinds get the same
//! treatment: header values trimmed of spaces and tabs, and the body framed per RFC 9112
//! §6.3 (chunked wins over `Content-Length`; a `Content-Length` shorter than the data cuts
//! it; no length means no body).

use crate::goftw::WireRequest;

/// The request the WAF sees.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRequest {
    pub method: Vec<u8>,
    pub uri: Vec<u8>,
    pub version: Vec<u8>,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
    /// How the body was delimited, for `CRS_VERBOSE`.
    pub framing: Framing,
}

/// How the request body was delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No `Content-Length` and no `Transfer-Encoding`: no body; `dropped` bytes were sent
    /// after the header section anyway.
    None { dropped: usize },
    /// `Content-Length: n`; `dropped` bytes beyond it.
    Length { declared: usize, dropped: usize },
    /// `Content-Length` present but not a number: the body is passed whole.
    BadLength,
    /// `Transfer-Encoding: chunked`, decoded; `complete` is false when the chunks were cut
    /// short or malformed (the decoded prefix is passed).
    Chunked { complete: bool },
    /// `Transfer-Encoding` other than chunked: the body is passed whole.
    OtherEncoding,
}

impl std::fmt::Display for Framing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Framing::None { dropped: 0 } => write!(f, "no body"),
            Framing::None { dropped } => write!(
                f,
                "no length, {dropped} bytes sent after the headers dropped"
            ),
            Framing::Length { declared, dropped } => {
                write!(f, "content-length {declared}")?;
                if *dropped > 0 {
                    write!(f, " ({dropped} bytes after it dropped)")?;
                }
                Ok(())
            }
            Framing::BadLength => write!(f, "invalid content-length, body passed whole"),
            Framing::Chunked { complete: true } => write!(f, "chunked"),
            Framing::Chunked { complete: false } => write!(f, "chunked, malformed or truncated"),
            Framing::OtherEncoding => write!(f, "unknown transfer-encoding, body passed whole"),
        }
    }
}

/// A built request as the server sees it: request line as given, header section and body
/// through the same parsing as raw requests.
pub fn receive_built(req: &WireRequest) -> ParsedRequest {
    let mut wire = Vec::new();
    for (n, v) in &req.headers {
        wire.extend_from_slice(n);
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(v);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(&req.body);
    let HeaderSection {
        fields: headers,
        rest,
    } = parse_header_section(&wire);
    let (body, framing) = frame_body(&headers, rest);
    ParsedRequest {
        method: req.method.clone(),
        uri: req.uri.clone(),
        version: req.version.clone(),
        headers,
        body,
        framing,
    }
}

/// A raw request (`encoded_request`). Lenient like a server that lets the WAF judge:
/// the request line is split at the first and the last space (no second space: HTTP/0.9
/// style, empty version); lines end in `\r\n` or `\n`.
pub fn parse_raw(raw: &[u8]) -> ParsedRequest {
    let (line, rest) = split_line(raw);
    let (method, target) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &[][..]),
    };
    let (uri, version) = match target.iter().rposition(|&b| b == b' ') {
        Some(i) => (&target[..i], &target[i + 1..]),
        None => (target, &[][..]),
    };
    let HeaderSection {
        fields: headers,
        rest,
    } = parse_header_section(rest);
    let (body, framing) = frame_body(&headers, rest);
    ParsedRequest {
        method: method.to_vec(),
        uri: uri.to_vec(),
        version: version.to_vec(),
        headers,
        body,
        framing,
    }
}

/// Splits off one line ending in `\n` (a `\r` before it is dropped). Without `\n`, the
/// whole input is the line.
fn split_line(s: &[u8]) -> (&[u8], &[u8]) {
    match s.iter().position(|&b| b == b'\n') {
        Some(i) => {
            let line = &s[..i];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            (line, &s[i + 1..])
        }
        None => (s, &[]),
    }
}

/// Parses header fields up to the blank line; returns them and the bytes after it. A line
/// starting with a space or tab continues the previous value (obsolete folding, joined with
/// one space). A line without `:` becomes a field with an empty value.
pub fn parse_header_section(mut s: &[u8]) -> HeaderSection<'_> {
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    while !s.is_empty() {
        let (line, rest) = split_line(s);
        s = rest;
        if line.is_empty() {
            break;
        }
        if matches!(line[0], b' ' | b'\t') {
            if let Some((_, v)) = headers.last_mut() {
                let cont = trim_ows(line);
                if !cont.is_empty() {
                    if !v.is_empty() {
                        v.push(b' ');
                    }
                    v.extend_from_slice(cont);
                }
                continue;
            }
        }
        match line.iter().position(|&b| b == b':') {
            Some(i) => headers.push((line[..i].to_vec(), trim_ows(&line[i + 1..]).to_vec())),
            None => headers.push((line.to_vec(), Vec::new())),
        }
    }
    HeaderSection {
        fields: headers,
        rest: s,
    }
}

/// Header fields, and the bytes after the blank line that ends them.
pub struct HeaderSection<'a> {
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    pub rest: &'a [u8],
}

fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |i| i + 1);
    &s[start..end.max(start)]
}

fn header<'a>(headers: &'a [(Vec<u8>, Vec<u8>)], name: &str) -> impl Iterator<Item = &'a [u8]> {
    let name = name.as_bytes().to_vec();
    headers
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(&name))
        .map(|(_, v)| v.as_slice())
}

/// Delimits the body per RFC 9112 §6.3.
pub fn frame_body(headers: &[(Vec<u8>, Vec<u8>)], rest: &[u8]) -> (Vec<u8>, Framing) {
    let te: Vec<&[u8]> = header(headers, "Transfer-Encoding").collect();
    if !te.is_empty() {
        let last = te
            .iter()
            .flat_map(|v| v.split(|&b| b == b','))
            .map(trim_ows)
            .rfind(|c| !c.is_empty())
            .unwrap_or(b"");
        if last.eq_ignore_ascii_case(b"chunked") {
            let (body, complete) = dechunk(rest);
            return (body, Framing::Chunked { complete });
        }
        return (rest.to_vec(), Framing::OtherEncoding);
    }
    let cl: Vec<&[u8]> = header(headers, "Content-Length").collect();
    if cl.is_empty() {
        return (
            Vec::new(),
            Framing::None {
                dropped: rest.len(),
            },
        );
    }
    let mut declared: Option<usize> = None;
    for v in cl
        .iter()
        .flat_map(|v| v.split(|&b| b == b','))
        .map(trim_ows)
    {
        let n = if !v.is_empty() && v.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse::<usize>().ok())
        } else {
            None
        };
        match (n, declared) {
            (None, _) => return (rest.to_vec(), Framing::BadLength),
            (Some(n), Some(d)) if n != d => return (rest.to_vec(), Framing::BadLength),
            (Some(n), _) => declared = Some(n),
        }
    }
    let declared = declared.unwrap_or(0);
    let take = declared.min(rest.len());
    (
        rest[..take].to_vec(),
        Framing::Length {
            declared,
            dropped: rest.len() - take,
        },
    )
}

/// Decodes a chunked body. Returns the decoded bytes and whether the last chunk was seen
/// and every chunk was well-formed; on error, the bytes decoded so far.
pub fn dechunk(mut s: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        if s.is_empty() {
            return (out, false);
        }
        let (line, rest) = split_line(s);
        let size = line
            .split(|&b| b == b';')
            .next()
            .map(trim_ows)
            .unwrap_or(b"");
        let size = match std::str::from_utf8(size)
            .ok()
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|t| usize::from_str_radix(t, 16).ok())
        {
            Some(n) => n,
            None => return (out, false),
        };
        s = rest;
        if size == 0 {
            // Trailer fields, if any, are not body.
            return (out, true);
        }
        if s.len() < size {
            out.extend_from_slice(s);
            return (out, false);
        }
        out.extend_from_slice(&s[..size]);
        s = &s[size..];
        if let Some(r) = s.strip_prefix(b"\r\n").or_else(|| s.strip_prefix(b"\n")) {
            s = r;
        } else {
            return (out, false);
        }
    }
}
