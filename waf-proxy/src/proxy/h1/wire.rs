//! The bytes of the plain HTTP/1 path: chunked bodies decoded and written again, the
//! upstream's response head parsed (httparse), field names classified. No I/O.

use std::ops::Range;

use crate::edge::stream::chunk_size;

/// Longest chunk-size or trailer line accepted (as the edge follows them).
const MAX_CHUNK_LINE: usize = 4096;

/// Most header fields accepted in an upstream response head (hyper's default too).
const MAX_RESPONSE_FIELDS: usize = 100;

/// A chunked body being read: each piece of data found is written to the next hop as one
/// chunk, the last chunk as `0\r\n\r\n`; chunk extensions and trailers are dropped (the
/// next hop's framing is ours, RFC 9112 §7.1). With `raw` set, only the data is written
/// (a body held for the WAF, framed again later by its writer); it may be switched between
/// feeds.
#[derive(Debug, Default)]
pub(super) struct Chunked {
    state: ChunkState,
    /// Data bytes seen so far.
    pub(super) data: u64,
    /// Write the data alone, without chunk framing.
    pub(super) raw: bool,
}

#[derive(Debug, Default, Clone, Copy)]
enum ChunkState {
    /// A chunk-size line.
    #[default]
    Size,
    /// This many data bytes.
    Data(u64),
    /// The line end after a chunk's data.
    DataEnd,
    /// Trailer lines until an empty one.
    Trailers,
    /// The last chunk and its trailers have been read.
    Done,
}

/// The chunked framing is broken (a bad size line, no line end after data, a line too long).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BadChunk;

impl Chunked {
    /// Reads what it can of `input`, appending the body re-chunked to `out`. Returns how
    /// many bytes of `input` were used and whether the body has ended.
    pub(super) fn feed(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, bool), BadChunk> {
        let mut i = 0;
        loop {
            let rest = &input[i..];
            match self.state {
                ChunkState::Done => return Ok((i, true)),
                ChunkState::Size | ChunkState::Trailers => {
                    let Some(lf) = rest.iter().position(|&b| b == b'\n') else {
                        if rest.len() > MAX_CHUNK_LINE {
                            return Err(BadChunk);
                        }
                        return Ok((i, false));
                    };
                    if lf > MAX_CHUNK_LINE {
                        return Err(BadChunk);
                    }
                    let line = &rest[..lf];
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    i += lf + 1;
                    if matches!(self.state, ChunkState::Trailers) {
                        if line.is_empty() {
                            if !self.raw {
                                out.extend_from_slice(b"0\r\n\r\n");
                            }
                            self.state = ChunkState::Done;
                        }
                        continue;
                    }
                    self.state = match chunk_size(line).ok_or(BadChunk)? {
                        0 => ChunkState::Trailers,
                        n => ChunkState::Data(n),
                    };
                }
                ChunkState::Data(n) => {
                    if rest.is_empty() {
                        return Ok((i, false));
                    }
                    let k = (rest.len() as u64).min(n) as usize;
                    if self.raw {
                        out.extend_from_slice(&rest[..k]);
                    } else {
                        push_chunk(out, &rest[..k]);
                    }
                    self.data += k as u64;
                    i += k;
                    self.state = if k as u64 == n {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(n - k as u64)
                    };
                }
                ChunkState::DataEnd => {
                    if rest.first() == Some(&b'\n') {
                        i += 1;
                    } else if rest.len() < 2 {
                        return Ok((i, false));
                    } else if rest.starts_with(b"\r\n") {
                        i += 2;
                    } else {
                        return Err(BadChunk);
                    }
                    self.state = ChunkState::Size;
                }
            }
        }
    }
}

/// Appends `data` as one chunk (`data` not empty).
pub(super) fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    push_hex(out, data.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends a header field line `name: value\r\n`.
pub(super) fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends the field line `content-length: n\r\n`.
pub(super) fn push_content_length(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"content-length: ");
    push_dec(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends `v` in lower-case hex.
pub(super) fn push_hex(out: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - v.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (i * 4)) & 15) as usize]);
    }
}

/// Appends `v` in decimal.
pub(super) fn push_dec(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    let mut v = v;
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

/// `t` (seconds since the epoch) as an HTTP date (RFC 9110 §5.6.7, IMF-fixdate):
/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(super) fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = crate::log::civil_from_days(days);
    format!(
        "{}, {day:02} {} {year:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// An upstream response head, as ranges into the buffer it was parsed from.
#[derive(Debug, Default)]
pub(super) struct ResponseHead {
    /// The status code.
    pub(super) status: u16,
    /// The minor version: `HTTP/1.0` or `HTTP/1.1`.
    pub(super) http10: bool,
    /// The reason phrase.
    pub(super) reason: Range<usize>,
    /// The head's length, up to and including its empty line.
    pub(super) len: usize,
    /// Each field's name and value.
    pub(super) fields: Vec<(Range<usize>, Range<usize>)>,
}

/// The upstream's response head is not HTTP/1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BadResponse;

/// Parses a response head at the start of `buf` into `head`; `Ok(false)` when more bytes
/// are needed.
pub(super) fn parse_response(buf: &[u8], head: &mut ResponseHead) -> Result<bool, BadResponse> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_FIELDS];
    let mut r = httparse::Response::new(&mut fields);
    let len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(false),
        Err(_) => return Err(BadResponse),
    };
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| {
        let o = s.as_ptr() as usize - base;
        o..o + s.len()
    };
    head.status = r.code.ok_or(BadResponse)?;
    head.http10 = r.version == Some(0);
    head.reason = r.reason.map_or(0..0, |s| at(s.as_bytes()));
    head.len = len;
    head.fields.clear();
    for f in r.headers.iter() {
        head.fields.push((at(f.name.as_bytes()), at(f.value)));
    }
    Ok(true)
}

/// What a field name is to the plain path (case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Name {
    /// `Connection`.
    Connection,
    /// A hop-by-hop field other than `Connection` (RFC 9110 §7.6.1: `Keep-Alive`,
    /// `Proxy-Connection`, `Proxy-Authenticate`, `Proxy-Authorization`, `TE`, `Trailer`,
    /// `Upgrade`), and `Transfer-Encoding`.
    HopByHop,
    /// `Content-Length`.
    ContentLength,
    /// `Expect`.
    Expect,
    /// `X-Forwarded-For`.
    XForwardedFor,
    /// `X-Forwarded-Proto`.
    XForwardedProto,
    /// `X-Forwarded-Host`.
    XForwardedHost,
    /// `Forwarded`.
    Forwarded,
    /// `Set-Cookie`.
    SetCookie,
    /// `Host`.
    Host,
    /// Anything else.
    Other,
}

/// Classifies a field name.
pub(super) fn name_of(n: &[u8]) -> Name {
    let is = |s: &[u8]| n.eq_ignore_ascii_case(s);
    match n.len() {
        2 if is(b"te") => Name::HopByHop,
        4 if is(b"host") => Name::Host,
        6 if is(b"expect") => Name::Expect,
        7 if is(b"trailer") || is(b"upgrade") => Name::HopByHop,
        9 if is(b"forwarded") => Name::Forwarded,
        10 if is(b"connection") => Name::Connection,
        10 if is(b"keep-alive") || is(b"set-cookie") => {
            if is(b"set-cookie") {
                Name::SetCookie
            } else {
                Name::HopByHop
            }
        }
        14 if is(b"content-length") => Name::ContentLength,
        15 if is(b"x-forwarded-for") => Name::XForwardedFor,
        16 if is(b"proxy-connection") => Name::HopByHop,
        16 if is(b"x-forwarded-host") => Name::XForwardedHost,
        17 if is(b"x-forwarded-proto") => Name::XForwardedProto,
        17 if is(b"transfer-encoding") => Name::HopByHop,
        18 if is(b"proxy-authenticate") => Name::HopByHop,
        19 if is(b"proxy-authorization") => Name::HopByHop,
        _ => Name::Other,
    }
}

/// The comma-separated tokens of a field value, trimmed, empty ones skipped.
pub(super) fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` `step` bytes at a time (what is not used is kept for the next feed).
    fn dechunk(input: &[u8], step: usize) -> Result<(Vec<u8>, u64, usize), BadChunk> {
        let mut c = Chunked::default();
        let mut out = Vec::new();
        let mut held = Vec::new();
        let mut fed = 0;
        for piece in input.chunks(step) {
            held.extend_from_slice(piece);
            fed += piece.len();
            let (used, done) = c.feed(&held, &mut out)?;
            held.drain(..used);
            if done {
                // What follows the body: held, and not yet fed.
                return Ok((out, c.data, held.len() + input.len() - fed));
            }
        }
        Err(BadChunk)
    }

    #[test]
    fn chunked_bodies_are_rechunked_in_any_split() {
        let input = b"3;ext=1\r\nabc\r\n5\nhello\n0\r\nTrailer: 1\r\n\r\nGET";
        for step in 1..input.len() {
            let (out, data, left) = dechunk(input, step).unwrap();
            assert_eq!(data, 8, "step {step}");
            assert_eq!(left, 3, "step {step}");
            // Decoding what was written gives the same data.
            let (again, data2, _) = dechunk(&out, 1000).unwrap();
            assert_eq!(data2, 8);
            let text = String::from_utf8_lossy(&again).into_owned();
            assert!(text.ends_with("0\r\n\r\n"), "{text}");
        }
    }

    #[test]
    fn raw_decoding_gives_the_data_alone_in_any_split() {
        let input = b"3;ext=1\r\nabc\r\n5\nhello\n0\r\nTrailer: 1\r\n\r\nGET";
        for step in 1..input.len() {
            let mut c = Chunked {
                raw: true,
                ..Chunked::default()
            };
            let (mut out, mut held) = (Vec::new(), Vec::new());
            let mut done = false;
            for piece in input.chunks(step) {
                held.extend_from_slice(piece);
                let (used, d) = c.feed(&held, &mut out).unwrap();
                held.drain(..used);
                if d {
                    done = true;
                    break;
                }
            }
            assert!(done, "step {step}");
            assert_eq!(out, b"abchello", "step {step}");
            assert_eq!(c.data, 8);
        }
    }

    #[test]
    fn broken_chunks_are_refused() {
        for bad in [
            &b"x\r\n"[..],
            b"3\r\nabcX\r\n",
            b"ffffffffffffffff\r\n",
            b"3 x\r\n",
        ] {
            assert_eq!(dechunk(bad, 1000), Err(BadChunk), "{bad:?}");
        }
        let long = [&[b'1'; 10][..], &[b';'; 5000]].concat();
        assert_eq!(dechunk(&long, 100), Err(BadChunk));
    }

    #[test]
    fn http_dates() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn numbers() {
        let mut v = Vec::new();
        push_dec(&mut v, 0);
        v.push(b' ');
        push_dec(&mut v, 10240);
        v.push(b' ');
        push_hex(&mut v, 0x2800);
        assert_eq!(v, b"0 10240 2800");
    }

    #[test]
    fn response_heads() {
        let mut h = ResponseHead::default();
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Le", &mut h),
            Ok(false)
        );
        let buf = b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nX: y\r\n\r\nabc";
        assert_eq!(parse_response(buf, &mut h), Ok(true));
        assert_eq!((h.status, &buf[h.reason.clone()]), (404, &b"Not Found"[..]));
        assert_eq!(&buf[h.len..], b"abc");
        assert_eq!(h.fields.len(), 2);
        assert_eq!(&buf[h.fields[1].1.clone()], b"y");
        assert_eq!(
            parse_response(b"HTTQ/1.1 200 OK\r\n\r\n", &mut h),
            Err(BadResponse)
        );
    }

    #[test]
    fn names() {
        assert_eq!(name_of(b"Transfer-Encoding"), Name::HopByHop);
        assert_eq!(name_of(b"SET-COOKIE"), Name::SetCookie);
        assert_eq!(name_of(b"keep-alive"), Name::HopByHop);
        assert_eq!(name_of(b"x-forwarded-HOST"), Name::XForwardedHost);
        assert_eq!(name_of(b"content-type"), Name::Other);
        let t: Vec<&[u8]> = tokens(b" close , ,X-A").collect();
        assert_eq!(t, vec![&b"close"[..], b"X-A"]);
    }
}
