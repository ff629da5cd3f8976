//! [`WafBody`]: the request body the handler gets and the response body the client gets.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use waf_core::host::Finisher;

/// A body that went through the WAF: bytes it buffered for inspection (sent first, exactly
/// as received), then the rest of the original body, streamed untouched.
///
/// A body that was not inspected is the original body; a block page is only the page. On a
/// response, the transaction's last phase runs and its report is sent when this body ends
/// or is dropped.
pub struct WafBody<B> {
    prefix: Option<Bytes>,
    trailers: Option<HeaderMap>,
    rest: Option<B>,
    finisher: Option<Finisher>,
}

impl<B> WafBody<B> {
    /// The original body, untouched.
    pub(crate) fn stream(body: B, finisher: Option<Finisher>) -> Self {
        WafBody {
            prefix: None,
            trailers: None,
            rest: Some(body),
            finisher,
        }
    }

    /// Buffered bytes, then the rest of the body if there is one.
    pub(crate) fn buffered(
        prefix: Bytes,
        trailers: Option<HeaderMap>,
        rest: Option<B>,
        finisher: Option<Finisher>,
    ) -> Self {
        WafBody {
            prefix: Some(prefix),
            trailers,
            rest,
            finisher,
        }
    }

    /// Just these bytes (a block page).
    pub(crate) fn full(bytes: Bytes) -> Self {
        WafBody::buffered(bytes, None, None, None)
    }
}

impl<B> fmt::Debug for WafBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WafBody")
            .field("prefix_len", &self.prefix.as_ref().map(Bytes::len))
            .field("streaming", &self.rest.is_some())
            .finish_non_exhaustive()
    }
}

impl<B> Body for WafBody<B>
where
    B: Body + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        if let Some(prefix) = this.prefix.take() {
            if !prefix.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(prefix))));
            }
        }
        if let Some(rest) = this.rest.as_mut() {
            match Pin::new(rest).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = frame.map_data(|mut d| d.copy_to_bytes(d.remaining()));
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => this.rest = None,
            }
        }
        if let Some(trailers) = this.trailers.take() {
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        // Dropping the finisher runs phase 5 and sends the report.
        this.finisher = None;
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.as_ref().is_none_or(Bytes::is_empty)
            && self.trailers.is_none()
            && self.rest.as_ref().is_none_or(B::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let prefix = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let rest = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), B::size_hint);
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(prefix));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(prefix));
        }
        hint
    }
}
