//! [`WafBody`]: the response body the client gets, and the request payload the handler gets.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::Payload;
use actix_web::error::PayloadError;
use bytes::Bytes;
use futures_core::Stream;
use waf_core::host::Finisher;

/// A response body that went through the WAF: bytes buffered for inspection (sent first,
/// exactly as the handler produced them), then the rest of the handler's body, streamed.
///
/// A body that was not inspected is the handler's body; a block page is only the page. The
/// transaction's last phase runs, and its report is sent, when this body ends or is dropped.
pub struct WafBody {
    prefix: Option<Bytes>,
    rest: Option<BoxBody>,
    finisher: Option<Finisher>,
}

impl WafBody {
    pub(crate) fn new(
        prefix: Option<Bytes>,
        rest: Option<BoxBody>,
        finisher: Option<Finisher>,
    ) -> Self {
        WafBody {
            prefix,
            rest,
            finisher,
        }
    }
}

impl fmt::Debug for WafBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WafBody")
            .field("prefix_len", &self.prefix.as_ref().map(Bytes::len))
            .field("streaming", &self.rest.is_some())
            .finish_non_exhaustive()
    }
}

impl MessageBody for WafBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        let prefix = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        match self.rest.as_ref().map(MessageBody::size) {
            None => BodySize::Sized(prefix),
            Some(BodySize::Sized(n)) => BodySize::Sized(n + prefix),
            Some(BodySize::Stream) => BodySize::Stream,
            Some(BodySize::None) if self.prefix.is_none() => BodySize::None,
            Some(BodySize::None) => BodySize::Sized(prefix),
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        if let Some(prefix) = this.prefix.take() {
            if !prefix.is_empty() {
                return Poll::Ready(Some(Ok(prefix)));
            }
        }
        if let Some(rest) = this.rest.as_mut() {
            match Pin::new(rest).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(item)) => return Poll::Ready(Some(item)),
                Poll::Ready(None) => this.rest = None,
            }
        }
        // Dropping the finisher runs phase 5 and sends the report.
        this.finisher = None;
        Poll::Ready(None)
    }
}

/// The request payload the handler reads after inspection: the buffered bytes, then the
/// unread rest of the original payload.
pub(crate) struct PrefixedPayload {
    pub(crate) prefix: Option<Bytes>,
    pub(crate) rest: Option<Payload>,
}

impl Stream for PrefixedPayload {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(prefix) = this.prefix.take() {
            if !prefix.is_empty() {
                return Poll::Ready(Some(Ok(prefix)));
            }
        }
        match this.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_next(cx),
            None => Poll::Ready(None),
        }
    }
}
