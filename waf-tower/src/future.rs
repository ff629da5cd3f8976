//! [`ResponseFuture`]: the answer of a [`WafService`](crate::WafService).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;

use crate::body::WafBody;

/// The rest of a request that phase 1 let through: body inspection, the inner service,
/// then the response phases. Boxed once per request that passes phase 1.
pub(crate) type InnerFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<Response<WafBody<B>>, E>> + Send>>;

/// The future a [`WafService`](crate::WafService) returns.
pub struct ResponseFuture<B, E> {
    kind: Kind<B, E>,
}

enum Kind<B, E> {
    /// Phase 1 intervened: the block page, ready at once; the inner service never runs.
    Blocked {
        response: Option<Box<Response<WafBody<B>>>>,
    },
    /// Everything after phase 1.
    Inner { future: InnerFuture<B, E> },
}

impl<B, E> ResponseFuture<B, E> {
    pub(crate) fn blocked(response: Response<WafBody<B>>) -> Self {
        ResponseFuture {
            kind: Kind::Blocked {
                response: Some(Box::new(response)),
            },
        }
    }

    pub(crate) fn inner(future: InnerFuture<B, E>) -> Self {
        ResponseFuture {
            kind: Kind::Inner { future },
        }
    }
}

// No field is ever pinned: the inner future is boxed and the ready response is moved out.
impl<B, E> Unpin for ResponseFuture<B, E> {}

impl<B, E> Future for ResponseFuture<B, E> {
    type Output = Result<Response<WafBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().kind {
            Kind::Blocked { response } => match response.take() {
                Some(r) => Poll::Ready(Ok(*r)),
                None => panic!("ResponseFuture polled after completion"),
            },
            Kind::Inner { future } => future.as_mut().poll(cx),
        }
    }
}

impl<B, E> fmt::Debug for ResponseFuture<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Blocked { .. } => "Blocked",
            Kind::Inner { .. } => "Inner",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish()
    }
}
