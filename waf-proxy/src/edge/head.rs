//! The decision on one HTTP/1 request head, from its raw bytes (no I/O).
//!
//! [`check`] is given the head up to and including its empty line and answers either
//! [`Checked::Pass`] (how the body is framed, and the request target rewritten when the
//! `http` crate would refuse it) or [`Checked::Refuse`] (a status and a [`Reason`]). The
//! table of decisions is in the crate README ("HTTP edge cases"); each arm below cites the
//! rule it follows.

use std::ops::Range;

use bytes::Bytes;

/// How many bytes of a head are accepted, its request line and header count: the limits
/// [`check`] enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLimits {
    /// The whole head, request line and headers (431 past it).
    pub max_head: usize,
    /// The request line (414 past it).
    pub max_line: usize,
    /// Header fields (431 past it).
    pub max_headers: usize,
}

/// Why a request was refused at the edge, before the WAF. The label is the metric's and the
/// log line's `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The request line is not `METHOD SP TARGET SP HTTP/x.y`.
    BadRequestLine,
    /// The method is not a token.
    BadMethod,
    /// A control byte (0x00-0x1F, 0x7F) in the request target.
    BadTarget,
    /// A version other than HTTP/1.0 and HTTP/1.1.
    UnsupportedVersion,
    /// The request line is longer than the limit.
    LineTooLong,
    /// The head is longer than the limit.
    HeadTooLarge,
    /// More header fields than the limit.
    TooManyHeaders,
    /// A header line that begins with a space or tab (obs-fold).
    ObsFold,
    /// A header line without a colon, or an empty or invalid field name (including space
    /// before the colon).
    BadHeaderName,
    /// A control byte other than tab in a field value (a lone CR included).
    BadHeaderValue,
    /// `Content-Length` that is not one decimal number.
    BadContentLength,
    /// More than one `Content-Length` field.
    DuplicateContentLength,
    /// More than one `Transfer-Encoding` field.
    DuplicateTransferEncoding,
    /// `Transfer-Encoding` other than exactly `chunked`.
    UnsupportedTransferEncoding,
    /// Both `Transfer-Encoding` and `Content-Length`.
    TransferEncodingAndContentLength,
    /// `Transfer-Encoding` in an HTTP/1.0 request.
    TransferEncodingInHttp10,
    /// An HTTP/1.1 request without `Host`.
    MissingHost,
    /// More than one `Host` field.
    DuplicateHost,
}

impl Reason {
    /// The label in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequestLine => "bad_request_line",
            Reason::BadMethod => "bad_method",
            Reason::BadTarget => "bad_request_target",
            Reason::UnsupportedVersion => "unsupported_version",
            Reason::LineTooLong => "request_line_too_long",
            Reason::HeadTooLarge => "head_too_large",
            Reason::TooManyHeaders => "too_many_headers",
            Reason::ObsFold => "obs_fold",
            Reason::BadHeaderName => "bad_header_name",
            Reason::BadHeaderValue => "bad_header_value",
            Reason::BadContentLength => "bad_content_length",
            Reason::DuplicateContentLength => "duplicate_content_length",
            Reason::DuplicateTransferEncoding => "duplicate_transfer_encoding",
            Reason::UnsupportedTransferEncoding => "unsupported_transfer_encoding",
            Reason::TransferEncodingAndContentLength => "transfer_encoding_and_content_length",
            Reason::TransferEncodingInHttp10 => "transfer_encoding_in_http10",
            Reason::MissingHost => "missing_host",
            Reason::DuplicateHost => "duplicate_host",
        }
    }

    /// The status the client gets.
    pub fn status(self) -> u16 {
        match self {
            Reason::UnsupportedVersion => 505,
            Reason::LineTooLong => 414,
            Reason::HeadTooLarge | Reason::TooManyHeaders => 431,
            Reason::UnsupportedTransferEncoding => 501,
            _ => 400,
        }
    }
}

/// How the body after a passed head is framed (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The answer of [`check`].
#[derive(Debug, PartialEq, Eq)]
pub enum Checked {
    /// Hand the head on.
    Pass {
        /// The body's framing.
        framing: Framing,
        /// An `Upgrade` request (`Connection: upgrade` and an `Upgrade` field): after its
        /// head the connection may stop being HTTP/1.
        upgrade: bool,
        /// When the request target had to be rewritten for the HTTP library: the head to
        /// hand on instead, and the target as the client sent it (what the WAF inspects).
        rewritten: Option<(Vec<u8>, Bytes)>,
    },
    /// Answer with `reason.status()` and close the connection.
    Refuse(Reason),
}

/// Decides on `head` (the bytes up to and including the empty line; bare LF line ends are
/// accepted, as nginx does).
pub fn check(head: &[u8], limits: &HeadLimits) -> Checked {
    match check_inner(head, limits, None) {
        Ok(c) => c,
        Err(r) => Checked::Refuse(r),
    }
}

/// Where the parts of a head are, as byte ranges into it: what [`check_spans`] found on
/// its way, so the request path does not parse the head again.
#[derive(Debug, Default)]
pub struct Spans {
    /// The method.
    pub method: Range<usize>,
    /// The request target as sent.
    pub target: Range<usize>,
    /// The request is HTTP/1.0.
    pub http10: bool,
    /// Each field's name and value (the value without surrounding blanks), in order.
    pub fields: Vec<(Range<usize>, Range<usize>)>,
}

/// [`check`], also filling `spans` (cleared first; complete only when the answer is
/// [`Checked::Pass`]).
pub fn check_spans(head: &[u8], limits: &HeadLimits, spans: &mut Spans) -> Checked {
    spans.fields.clear();
    match check_inner(head, limits, Some(spans)) {
        Ok(c) => c,
        Err(r) => Checked::Refuse(r),
    }
}

fn check_inner(
    head: &[u8],
    limits: &HeadLimits,
    mut spans: Option<&mut Spans>,
) -> Result<Checked, Reason> {
    if head.len() > limits.max_head {
        return Err(Reason::HeadTooLarge);
    }
    let mut lines = Lines { rest: head };
    // RFC 9112 §2.2: empty lines before the request line are ignored.
    let line = loop {
        match lines.next() {
            Some([]) => continue,
            Some(l) => break l,
            None => return Err(Reason::BadRequestLine),
        }
    };
    if line.len() > limits.max_line {
        return Err(Reason::LineTooLong);
    }
    let line_start = offset_in(head, line);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Reason::BadRequestLine);
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(Reason::BadMethod);
    }
    if target.is_empty() || version.contains(&b' ') {
        return Err(Reason::BadRequestLine);
    }
    if target.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return Err(Reason::BadTarget);
    }
    let http10 = match version {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        v if v.len() == 8 && v.starts_with(b"HTTP/") && v[6] == b'.' => {
            return Err(Reason::UnsupportedVersion)
        }
        _ => return Err(Reason::BadRequestLine),
    };
    if let Some(sp) = spans.as_deref_mut() {
        let m = offset_in(head, method);
        sp.method = m..m + method.len();
        let t = offset_in(head, target);
        sp.target = t..t + target.len();
        sp.http10 = http10;
    }

    let (mut count, mut cl, mut te, mut hosts) = (0usize, None::<u64>, 0usize, 0usize);
    let mut cl_seen = false;
    let mut te_chunked = true;
    let (mut upgrade_field, mut connection_upgrade) = (false, false);
    for l in lines.by_ref() {
        if l.is_empty() {
            break;
        }
        count += 1;
        if count > limits.max_headers {
            return Err(Reason::TooManyHeaders);
        }
        // RFC 9112 §5.2: a server may reject obs-fold with 400.
        if matches!(l[0], b' ' | b'\t') {
            return Err(Reason::ObsFold);
        }
        let Some(colon) = l.iter().position(|&b| b == b':') else {
            return Err(Reason::BadHeaderName);
        };
        let (name, value) = (&l[..colon], trim(&l[colon + 1..]));
        // RFC 9112 §5.1: no whitespace between name and colon (400).
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(Reason::BadHeaderName);
        }
        // RFC 9110 §5.5: field-vchar / obs-text / SP / HTAB; CR, LF and NUL are invalid.
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(Reason::BadHeaderValue);
        }
        if let Some(sp) = spans.as_deref_mut() {
            let n = offset_in(head, name);
            let v = offset_in(head, value);
            sp.fields.push((n..n + name.len(), v..v + value.len()));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            if cl_seen {
                return Err(Reason::DuplicateContentLength);
            }
            cl_seen = true;
            if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
                return Err(Reason::BadContentLength);
            }
            cl = Some(
                value
                    .iter()
                    .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')),
            );
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            te += 1;
            if te > 1 {
                return Err(Reason::DuplicateTransferEncoding);
            }
            te_chunked = value.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade_field = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection_upgrade |= value
                .split(|&b| b == b',')
                .any(|t| trim(t).eq_ignore_ascii_case(b"upgrade"));
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            if hosts > 1 {
                return Err(Reason::DuplicateHost);
            }
        }
    }
    // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 means the framing is faulty.
    if te > 0 && http10 {
        return Err(Reason::TransferEncodingInHttp10);
    }
    // RFC 9112 §6.3 (3): a server may reject a request with both; smuggling needs it.
    if te > 0 && cl_seen {
        return Err(Reason::TransferEncodingAndContentLength);
    }
    // RFC 9112 §6.3 (4): an unknown final coding cannot be framed; 501 as nginx answers.
    if te > 0 && !te_chunked {
        return Err(Reason::UnsupportedTransferEncoding);
    }
    // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host.
    if !http10 && hosts == 0 {
        return Err(Reason::MissingHost);
    }
    let framing = match (te > 0, cl) {
        (true, _) => Framing::Chunked,
        (false, Some(0) | None) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
    };
    let rewritten = rewrite_target(target).map(|new_target| {
        let t_start = line_start + method.len() + 1;
        let mut h = Vec::with_capacity(head.len() + new_target.len());
        h.extend_from_slice(&head[..t_start]);
        h.extend_from_slice(&new_target);
        h.extend_from_slice(&head[t_start + target.len()..]);
        (h, Bytes::copy_from_slice(target))
    });
    Ok(Checked::Pass {
        framing,
        rewritten,
        upgrade: upgrade_field && connection_upgrade,
    })
}

/// The target percent-encoded where the `http` crate's URI parser would refuse it (`"` and
/// `<`, `>`, backtick in the path, `"`, `<`, `>` in the query, bytes 0x80-0xFF when the
/// target is not UTF-8); `None` when it takes the target as it is. A `#` (which `http`
/// cuts off) also makes the WAF see the target as sent. Percent-encoding these bytes does
/// not change what the URI means (RFC 3986 §2.1: none is reserved).
fn rewrite_target(target: &[u8]) -> Option<Vec<u8>> {
    // Only origin form and absolute form have a path to encode; authority form (CONNECT)
    // and `*` go to the library as they are.
    let path_start = if target[0] == b'/' {
        0
    } else if let Some(i) = find(target, b"://") {
        let after = i + 3;
        target[after..]
            .iter()
            .position(|&b| b == b'/' || b == b'?')
            .map_or(target.len(), |p| after + p)
    } else {
        return None;
    };
    // Most targets have none of the bytes that may need encoding: one table lookup a byte.
    if !target[path_start..]
        .iter()
        .any(|&b| MAY_NEED_ENCODING[b as usize])
    {
        return None;
    }
    let utf8 = std::str::from_utf8(target).is_ok();
    let mut in_query = false;
    let mut needs = false;
    for &b in &target[path_start..] {
        if b == b'#' {
            needs = true;
            break;
        }
        if b == b'?' {
            in_query = true;
        }
        if refused(b, in_query, utf8) {
            needs = true;
            break;
        }
    }
    if !needs {
        return None;
    }
    let mut out = Vec::with_capacity(target.len() + 16);
    out.extend_from_slice(&target[..path_start]);
    let mut in_query = false;
    for &b in &target[path_start..] {
        if b == b'?' {
            in_query = true;
        }
        if refused(b, in_query, utf8) {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
    Some(out)
}

/// Whether `http` 1.x's path or query table refuses `b` (its `build_path_map` and
/// `build_query_map`).
/// The bytes [`refused`] may answer `true` for, and `#` (which always needs encoding).
static MAY_NEED_ENCODING: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x80;
    while b < 256 {
        t[b] = true;
        b += 1;
    }
    t[b'<' as usize] = true;
    t[b'>' as usize] = true;
    t[b'"' as usize] = true;
    t[b'`' as usize] = true;
    t[b'#' as usize] = true;
    t
};

fn refused(b: u8, in_query: bool, utf8: bool) -> bool {
    match b {
        0x80..=0xff => !utf8,
        b'<' | b'>' => true,
        b'"' => in_query,
        b'`' => !in_query,
        _ => false,
    }
}

struct Lines<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match self.rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
            None => (self.rest, &[][..]),
        };
        self.rest = rest;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| b != b' ' && b != b'\t');
    // An empty value stays inside `v` (its offset is used by `check_spans`).
    let Some(start) = start else {
        return &v[v.len()..];
    };
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .unwrap_or(start);
    &v[start..=end]
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: HeadLimits = HeadLimits {
        max_head: 1024,
        max_line: 256,
        max_headers: 8,
    };

    fn refuse(head: &[u8]) -> Option<Reason> {
        match check(head, &L) {
            Checked::Refuse(r) => Some(r),
            Checked::Pass { .. } => None,
        }
    }

    #[test]
    fn decisions() {
        let t: &[(&[u8], Option<Reason>)] = &[
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", None),
            (b"\r\nGET / HTTP/1.1\nHost: a\n\n", None),
            (b"GET / HTTP/1.0\r\n\r\n", None),
            (b"GET / HTTP/1.1\r\n\r\n", Some(Reason::MissingHost)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Some(Reason::DuplicateHost)),
            (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", Some(Reason::UnsupportedVersion)),
            (b"GET / HTTQ/1.1\r\nHost: a\r\n\r\n", Some(Reason::BadRequestLine)),
            (b"GET /  HTTP/1.1\r\nHost: a\r\n\r\n", Some(Reason::BadRequestLine)),
            (b"GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n", Some(Reason::BadTarget)),
            (b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", Some(Reason::BadMethod)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n y\r\n\r\n", Some(Reason::ObsFold)),
            (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", Some(Reason::BadHeaderName)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", Some(Reason::BadHeaderName)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", Some(Reason::BadHeaderValue)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", Some(Reason::BadHeaderValue)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX: caf\xe9\r\n\r\n", None),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", Some(Reason::BadContentLength)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", Some(Reason::BadContentLength)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", Some(Reason::DuplicateContentLength)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", Some(Reason::TransferEncodingAndContentLength)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Some(Reason::UnsupportedTransferEncoding)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", Some(Reason::DuplicateTransferEncoding)),
            (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Some(Reason::TransferEncodingInHttp10)),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", None),
        ];
        for (head, want) in t {
            assert_eq!(refuse(head), *want, "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn limits() {
        let long_line = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(300));
        assert_eq!(refuse(long_line.as_bytes()), Some(Reason::LineTooLong));
        let many: String = (0..9).map(|i| format!("X-{i}: 1\r\n")).collect();
        let head = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        assert_eq!(refuse(head.as_bytes()), Some(Reason::TooManyHeaders));
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "b".repeat(1100)
        );
        assert_eq!(refuse(big.as_bytes()), Some(Reason::HeadTooLarge));
    }

    #[test]
    fn framing() {
        let f = |h: &[u8]| match check(h, &L) {
            Checked::Pass { framing, .. } => framing,
            Checked::Refuse(r) => panic!("{r:?}"),
        };
        assert_eq!(f(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Framing::None);
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 12\r\n\r\n"),
            Framing::Length(12)
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n"),
            Framing::Chunked
        );
    }

    #[test]
    fn targets_the_uri_parser_refuses_are_encoded_and_kept_raw() {
        let r = |h: &[u8]| match check(h, &L) {
            Checked::Pass { rewritten, .. } => rewritten,
            Checked::Refuse(r) => panic!("{r:?}"),
        };
        assert_eq!(r(b"GET /a?b=1 HTTP/1.1\r\nHost: a\r\n\r\n"), None);
        assert_eq!(
            r(b"GET /{a}|\\^?x={}|\\^` HTTP/1.1\r\nHost: a\r\n\r\n"),
            None
        );
        assert_eq!(
            r("GET /caf\u{e9}?q=\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n".as_bytes()),
            None
        );
        let (head, raw) = r(b"GET /<p>`?q=\"<x>\"&l=caf\xe9 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!(&raw[..], b"/<p>`?q=\"<x>\"&l=caf\xe9");
        assert_eq!(
            head,
            b"GET /%3Cp%3E%60?q=%22%3Cx%3E%22&l=caf%E9 HTTP/1.1\r\nHost: a\r\n\r\n"
        );
        let (head, _) = r(b"GET http://h/a<b HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        assert_eq!(head, b"GET http://h/a%3Cb HTTP/1.1\r\nHost: h\r\n\r\n");
        let (head, raw) = r(b"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!(
            (&head[..14], &raw[..]),
            (&b"GET /a#frag HT"[..], &b"/a#frag"[..])
        );
        // Every request-target byte nginx takes is taken and comes out parseable.
        for b in (0x21u8..=0x7e).chain(0x80..=0xff) {
            let mut h = b"GET /p".to_vec();
            h.push(b);
            h.extend_from_slice(b"?q=");
            h.push(b);
            h.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
            let head = match check(&h, &L) {
                Checked::Pass {
                    rewritten: Some((head, _)),
                    ..
                } => head,
                Checked::Pass {
                    rewritten: None, ..
                } => h.clone(),
                Checked::Refuse(r) => panic!("byte {b:#x}: {r:?}"),
            };
            let t = &head[4..];
            let t = String::from_utf8_lossy(&t[..t.iter().position(|&c| c == b' ').unwrap()]);
            assert!(t.parse::<http::Uri>().is_ok(), "byte {b:#x}: {t}");
        }
    }
}
