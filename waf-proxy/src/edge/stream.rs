//! The connection wrapper that runs [`check`](super::head::check) on every request head
//! before hyper parses it.
//!
//! It follows the framing of each request (`Content-Length` bytes, or chunked until the
//! last chunk and its trailers) to find the next head, so pipelined and keep-alive
//! requests are all checked. For each head it pushes one [`Entry`] on the connection's
//! [`Ledger`]; the request handler takes them in order (hyper serves HTTP/1 requests of a
//! connection one after the other). A refused head is replaced by a small placeholder
//! request that the handler answers with the refusal, and nothing more is read from the
//! connection: the handler's `Connection: close` ends it.
//!
//! Cost: the bytes go from the socket to a buffer here and from it to hyper's buffer (one
//! extra copy), and each head is scanned once more.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::head::{check, Checked, Framing, HeadLimits};
use super::{Entry, Ledger};

/// What stands in for a refused request: hyper parses it, the handler answers it from the
/// ledger.
const PLACEHOLDER: &[u8] = b"GET / HTTP/1.1\r\nhost: refused.invalid\r\n\r\n";

/// The HTTP/2 connection preface (RFC 9113 §3.4): an h2c prior-knowledge connection, not
/// checked here.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// Longest chunk-size or trailer line followed; past it the framing is left to hyper.
const MAX_CHUNK_LINE: usize = 4096;

/// Bytes read from the socket at once.
const READ_SIZE: usize = 16 * 1024;

#[derive(Debug)]
enum State {
    /// Waiting for a complete head.
    Head { first: bool },
    /// This many body bytes follow.
    Body(u64),
    /// Chunked: expecting a chunk-size line.
    ChunkSize,
    /// Chunked: this many data bytes, then CRLF.
    ChunkData(u64),
    /// Chunked: the CRLF after a chunk's data.
    ChunkEnd,
    /// Chunked: trailer lines until an empty one.
    Trailers,
    /// Not followed any more (HTTP/2, or framing the wrapper cannot follow): the bytes go
    /// to hyper as they are, and hyper decides.
    Through,
    /// A refusal was handed on; nothing more is read.
    Refused,
}

/// A connection whose request heads are checked; see the module docs.
#[derive(Debug)]
pub struct Guarded<S> {
    inner: S,
    state: State,
    limits: HeadLimits,
    ledger: Arc<Ledger>,
    /// Read from the socket, not yet looked at.
    raw: BytesMut,
    /// Ready for hyper.
    out: BytesMut,
    /// The socket has ended.
    eof: bool,
    /// Where socket reads land (zeroed once, not per read).
    scratch: Box<[u8]>,
}

impl<S> Guarded<S> {
    /// Wraps `inner`; entries go to `ledger`.
    pub fn new(inner: S, limits: HeadLimits, ledger: Arc<Ledger>) -> Guarded<S> {
        Guarded {
            inner,
            state: State::Head { first: true },
            limits,
            ledger,
            raw: BytesMut::with_capacity(READ_SIZE),
            out: BytesMut::new(),
            eof: false,
            scratch: vec![0; READ_SIZE].into_boxed_slice(),
        }
    }

    /// Wraps `inner` whose first bytes, `read`, were already taken from it: a connection the
    /// plain HTTP/1 path ([`crate::proxy::h1`]) hands over at a request head. `first` says
    /// whether that head is the connection's first (which may be the HTTP/2 preface).
    pub fn with_read(
        inner: S,
        limits: HeadLimits,
        ledger: Arc<Ledger>,
        read: &[u8],
        first: bool,
    ) -> Guarded<S> {
        let mut g = Guarded::new(inner, limits, ledger);
        g.raw.extend_from_slice(read);
        g.state = State::Head { first };
        g.advance();
        g
    }

    /// Moves what can be decided from `raw` to `out`. Returns whether anything moved.
    fn advance(&mut self) -> bool {
        let before = self.raw.len();
        loop {
            if self.raw.is_empty() {
                break;
            }
            match self.state {
                State::Through => {
                    let all = self.raw.split();
                    self.emit(all);
                }
                State::Refused => {
                    self.raw.clear();
                }
                State::Head { first } => {
                    if first {
                        let n = self.raw.len().min(H2_PREFACE.len());
                        if self.raw[..n] == H2_PREFACE[..n] {
                            if n == H2_PREFACE.len() {
                                self.state = State::Through;
                                continue;
                            }
                            if !self.eof {
                                break; // could still be the preface
                            }
                        }
                    }
                    let Some(end) = head_end(&self.raw) else {
                        if self.raw.len() > self.limits.max_head || self.eof {
                            // Too large, or cut off: a too-large head is refused; a head
                            // cut off by the end of the stream goes to hyper as it is.
                            if self.raw.len() > self.limits.max_head {
                                self.refuse(super::head::Reason::HeadTooLarge);
                            } else {
                                self.state = State::Through;
                            }
                            continue;
                        }
                        break;
                    };
                    let head = self.raw.split_to(end);
                    match check(&head, &self.limits) {
                        Checked::Refuse(r) => self.refuse(r),
                        Checked::Pass {
                            framing,
                            rewritten,
                            upgrade,
                        } => {
                            let raw_target = match rewritten {
                                Some((new_head, raw)) => {
                                    self.emit(BytesMut::from(&new_head[..]));
                                    Some(raw)
                                }
                                None => {
                                    self.emit(head);
                                    None
                                }
                            };
                            self.ledger.push(Entry::Pass { raw_target });
                            self.state = after_head(framing, upgrade);
                        }
                    }
                }
                State::Body(n) => {
                    let k = (self.raw.len() as u64).min(n);
                    let part = self.raw.split_to(k as usize);
                    self.emit(part);
                    self.state = if k == n {
                        State::Head { first: false }
                    } else {
                        State::Body(n - k)
                    };
                }
                State::ChunkData(n) => {
                    let k = (self.raw.len() as u64).min(n);
                    let part = self.raw.split_to(k as usize);
                    self.emit(part);
                    self.state = if k == n {
                        State::ChunkEnd
                    } else {
                        State::ChunkData(n - k)
                    };
                }
                State::ChunkEnd => {
                    // CRLF (or a bare LF) after the data.
                    let want: &[u8] = if self.raw[0] == b'\n' { b"\n" } else { b"\r\n" };
                    if self.raw.len() < want.len() {
                        break;
                    }
                    if self.raw[..want.len()] != *want {
                        self.state = State::Through;
                        continue;
                    }
                    let part = self.raw.split_to(want.len());
                    self.emit(part);
                    self.state = State::ChunkSize;
                }
                State::ChunkSize | State::Trailers => {
                    let Some(lf) = self.raw.iter().position(|&b| b == b'\n') else {
                        if self.raw.len() > MAX_CHUNK_LINE {
                            self.state = State::Through;
                            continue;
                        }
                        break;
                    };
                    let line = self.raw.split_to(lf + 1);
                    let next = after_line(&self.state, &line);
                    self.emit(line);
                    self.state = next;
                }
            }
        }
        before != self.raw.len() || !self.out.is_empty()
    }

    /// How many bytes at the front of `b` go to hyper as they are, following their framing
    /// (the state moves past them, and each head passed is checked and entered in the
    /// ledger). It stops before what must be held or replaced: a head not yet complete, a
    /// head to rewrite or refuse, a chunk line cut off or malformed; [`Self::advance`] takes
    /// it from there, as it would have from the start. The first head never comes here (see
    /// [`Self::first_head`]).
    fn pass_through(&mut self, b: &[u8]) -> usize {
        let mut i = 0;
        while i < b.len() {
            let rest = &b[i..];
            match self.state {
                State::Through => return b.len(),
                State::Refused | State::Head { first: true } => return i,
                State::Head { first: false } => {
                    let Some(end) = head_end(rest) else {
                        return i;
                    };
                    match check(&rest[..end], &self.limits) {
                        Checked::Pass {
                            framing,
                            upgrade,
                            rewritten: None,
                        } => {
                            self.ledger.push(Entry::Pass { raw_target: None });
                            self.state = after_head(framing, upgrade);
                            i += end;
                        }
                        _ => return i,
                    }
                }
                State::Body(n) => {
                    let k = (rest.len() as u64).min(n);
                    i += k as usize;
                    self.state = if k == n {
                        State::Head { first: false }
                    } else {
                        State::Body(n - k)
                    };
                }
                State::ChunkData(n) => {
                    let k = (rest.len() as u64).min(n);
                    i += k as usize;
                    self.state = if k == n {
                        State::ChunkEnd
                    } else {
                        State::ChunkData(n - k)
                    };
                }
                State::ChunkEnd => {
                    let n = if rest.starts_with(b"\n") {
                        1
                    } else if rest.starts_with(b"\r\n") {
                        2
                    } else {
                        return i;
                    };
                    i += n;
                    self.state = State::ChunkSize;
                }
                State::ChunkSize | State::Trailers => {
                    let Some(lf) = rest.iter().position(|&c| c == b'\n') else {
                        return i;
                    };
                    let next = after_line(&self.state, &rest[..=lf]);
                    if matches!(next, State::Through) {
                        return i;
                    }
                    i += lf + 1;
                    self.state = next;
                }
            }
        }
        i
    }

    fn emit(&mut self, b: BytesMut) {
        if self.out.is_empty() {
            self.out = b;
        } else {
            self.out.extend_from_slice(&b);
        }
    }

    fn refuse(&mut self, r: super::head::Reason) {
        self.ledger.push(Entry::Refuse(r));
        self.emit(BytesMut::from(PLACEHOLDER));
        self.raw.clear();
        self.state = State::Refused;
    }
}

/// The state after a passed head. After an Upgrade request the bytes may be another
/// protocol (WebSocket): they pass unchecked. The proxy closes the connection after any
/// answer but 101, so no HTTP/1 request follows unchecked.
fn after_head(framing: Framing, upgrade: bool) -> State {
    if upgrade {
        return State::Through;
    }
    match framing {
        Framing::None => State::Head { first: false },
        Framing::Length(n) => State::Body(n),
        Framing::Chunked => State::ChunkSize,
    }
}

/// The state after a chunk-size or trailer line (`line` ends with its LF).
fn after_line(state: &State, line: &[u8]) -> State {
    let text = line.strip_suffix(b"\n").unwrap_or(line);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    if matches!(state, State::Trailers) {
        if text.is_empty() {
            State::Head { first: false }
        } else {
            State::Trailers
        }
    } else {
        match chunk_size(text) {
            Some(0) => State::Trailers,
            Some(n) => State::ChunkData(n),
            None => State::Through,
        }
    }
}

/// The end of the head (after its empty line), accepting bare LF.
pub(crate) fn head_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    // Leading empty lines (RFC 9112 §2.2) do not end a head.
    while i < b.len() && (b[i] == b'\r' || b[i] == b'\n') {
        i += 1;
    }
    while let Some(p) = b[i..].iter().position(|&c| c == b'\n') {
        let lf = i + p;
        let rest = &b[lf + 1..];
        if rest.first() == Some(&b'\n') {
            return Some(lf + 2);
        }
        if rest.len() >= 2 && rest[0] == b'\r' && rest[1] == b'\n' {
            return Some(lf + 3);
        }
        i = lf + 1;
    }
    None
}

/// The size of a chunk-size line (hex, then optional `;ext`), at most 15 hex digits.
pub(crate) fn chunk_size(line: &[u8]) -> Option<u64> {
    let hex_len = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if hex_len == 0 || hex_len > 15 {
        return None;
    }
    let rest = &line[hex_len..];
    if !(rest.is_empty() || matches!(rest[0], b';' | b' ' | b'\t')) {
        return None;
    }
    let s = std::str::from_utf8(&line[..hex_len]).ok()?;
    u64::from_str_radix(s, 16).ok()
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.out.is_empty() {
                let n = this.out.len().min(buf.remaining());
                buf.put_slice(&this.out[..n]);
                this.out.advance(n);
                return Poll::Ready(Ok(()));
            }
            if matches!(this.state, State::Refused) {
                // The handler answers the placeholder with `Connection: close`; until
                // hyper closes, there is nothing more to read.
                return Poll::Pending;
            }
            if this.raw.is_empty()
                && !this.eof
                && buf.remaining() > 0
                && !matches!(this.state, State::Head { first: true })
            {
                // Nothing held back: read straight into hyper's buffer and check the bytes
                // where they landed; only what must be held or replaced is taken back.
                let start = buf.filled().len();
                match Pin::new(&mut this.inner).poll_read(cx, buf) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {}
                }
                let filled = &buf.filled()[start..];
                if filled.is_empty() {
                    this.eof = true;
                    return Poll::Ready(Ok(()));
                }
                let pass = this.pass_through(filled);
                if pass < filled.len() {
                    this.raw.extend_from_slice(&filled[pass..]);
                    buf.set_filled(start + pass);
                    this.advance();
                }
                if pass > 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            if this.eof {
                if this.advance() && !this.out.is_empty() {
                    continue;
                }
                if !this.raw.is_empty() {
                    let rest = this.raw.split();
                    this.emit(rest);
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            match this.poll_fill(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
        }
    }
}

impl<S: AsyncRead + Unpin> Guarded<S> {
    /// Reads once from the socket and moves what can be decided on.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut rb = ReadBuf::new(&mut self.scratch[..]);
        let polled = Pin::new(&mut self.inner).poll_read(cx, &mut rb);
        let got = rb.filled().len();
        self.raw.extend_from_slice(rb.filled());
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Ready(Ok(())) => {
                if got == 0 {
                    self.eof = true;
                }
                self.advance();
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Waits until the first request head is complete (or refused, or the connection
    /// ended). The caller bounds it with the header-read timeout: hyper's own timer starts
    /// only once its HTTP/1 connection exists, and the automatic HTTP/2 detection before
    /// that waits for bytes this wrapper holds back until the head is whole.
    pub async fn first_head(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| loop {
            if !self.out.is_empty() || self.eof || matches!(self.state, State::Refused) {
                return Poll::Ready(Ok(()));
            }
            match self.poll_fill(cx) {
                Poll::Ready(Ok(())) => continue,
                other => return other,
            }
        })
        .await
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const L: HeadLimits = HeadLimits {
        max_head: 4096,
        max_line: 1024,
        max_headers: 50,
    };

    /// Feeds `input` in pieces of `step` bytes, read `read` bytes at a time (7: every head is
    /// held and copied; 4096: whole heads are checked in the reader's buffer); returns what
    /// hyper would read and the ledger's entries.
    async fn run_with(input: &[u8], step: usize, read: usize) -> (Vec<u8>, Vec<Entry>) {
        let (mut client, server) = tokio::io::duplex(64);
        let ledger = Arc::new(Ledger::default());
        let mut g = Guarded::new(server, L, ledger.clone());
        let input = input.to_vec();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for c in input.chunks(step) {
                client.write_all(c).await.unwrap();
            }
            client.shutdown().await.unwrap();
            client
        });
        let mut out = Vec::new();
        let mut buf = vec![0u8; read];
        loop {
            let r =
                tokio::time::timeout(std::time::Duration::from_millis(200), g.read(&mut buf)).await;
            match r {
                Ok(Ok(0)) | Err(_) => break,
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
                Ok(Err(e)) => panic!("{e}"),
            }
        }
        let _ = writer.await;
        let mut entries = Vec::new();
        while let Some(e) = ledger.pop() {
            entries.push(e);
        }
        (out, entries)
    }

    /// [`run_with`] with both read sizes; the answers must agree.
    async fn run(input: &[u8], step: usize) -> (Vec<u8>, Vec<Entry>) {
        let small = run_with(input, step, 7).await;
        let large = run_with(input, step, 4096).await;
        assert_eq!(
            String::from_utf8_lossy(&small.0),
            String::from_utf8_lossy(&large.0),
            "step {step}"
        );
        assert_eq!(small.1, large.1, "step {step}");
        large
    }

    #[tokio::test]
    async fn pipelined_requests_are_each_checked_in_any_chunking() {
        let input: &[u8] = b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /<b> HTTP/1.1\r\nHost: a\r\n\r\nPOST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nT: 1\r\n\r\nGET /d HTTP/1.1\r\nHost: a\r\n\r\n";
        for step in [1, 2, 3, 7, 64, 1000] {
            let (out, entries) = run(input, step).await;
            let want = String::from_utf8_lossy(input).replace("/<b>", "/%3Cb%3E");
            assert_eq!(String::from_utf8_lossy(&out), want, "step {step}");
            assert_eq!(entries.len(), 4, "step {step}");
            assert_eq!(
                entries[1],
                Entry::Pass {
                    raw_target: Some(bytes::Bytes::from_static(b"/<b>"))
                }
            );
        }
    }

    #[tokio::test]
    async fn a_request_smuggled_after_chunked_is_never_seen() {
        let input: &[u8] = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n";
        for step in [1, 5, 1000] {
            let (out, entries) = run(input, step).await;
            assert_eq!(out, PLACEHOLDER, "step {step}");
            assert_eq!(
                entries,
                vec![Entry::Refuse(
                    super::super::head::Reason::TransferEncodingAndContentLength
                )]
            );
        }
    }

    #[tokio::test]
    async fn a_refusal_after_passed_requests_comes_in_its_place() {
        let ok: &[u8] = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz";
        let bad: &[u8] = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n";
        let input = [ok, bad].concat();
        for step in [1, 4, 13, 1000] {
            let (out, entries) = run(&input, step).await;
            assert_eq!(out, [ok, PLACEHOLDER].concat(), "step {step}");
            let pass = Entry::Pass { raw_target: None };
            let refuse =
                Entry::Refuse(super::super::head::Reason::TransferEncodingAndContentLength);
            assert_eq!(entries, vec![pass.clone(), pass, refuse], "step {step}");
        }
    }

    #[tokio::test]
    async fn bare_lf_chunks_and_upgrades_are_followed() {
        let input: &[u8] = b"GET / HTTP/1.1\nHost: a\n\nPOST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\nGET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05hello GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n";
        for step in [1, 5, 1000] {
            let (out, entries) = run(input, step).await;
            assert_eq!(out, input, "step {step}");
            // The bytes after the Upgrade head are not HTTP/1 any more: not checked.
            assert_eq!(entries.len(), 3, "step {step}");
        }
    }

    #[tokio::test]
    async fn h2_prior_knowledge_goes_through() {
        let input: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
        let (out, entries) = run(input, 3).await;
        assert_eq!(out, input);
        assert!(entries.is_empty());
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_size(b"1a"), Some(26));
        assert_eq!(chunk_size(b"0;ext=1"), Some(0));
        assert_eq!(chunk_size(b""), None);
        assert_eq!(chunk_size(b"-1"), None);
        assert_eq!(chunk_size(b"1x"), None);
        assert_eq!(chunk_size(b"ffffffffffffffff"), None);
    }
}
