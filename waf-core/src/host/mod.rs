//! Glue that every host adapter needs: who the client is, which request id to use, and
//! what a blocked client sees.
//!
//! The engine itself only sees [`ConnectionInfo`](crate::ConnectionInfo) and a
//! [`Verdict`](crate::Verdict). Turning a socket peer and forwarding headers into a client
//! address, picking a request id, and rendering an [`Intervention`](crate::Intervention)
//! as a response are the same job in tower, actix-web, the proxy and the C module, so they
//! live here, once (`DESIGN.md`: "A feature that more than one host needs lives in
//! waf-core"). Like the rest of the crate this module does no I/O.
//!
//! - [`TrustedProxies`] and [`client_addr`]: `X-Forwarded-For` and `Forwarded` (RFC 7239)
//!   are believed only when the peer is a configured trusted proxy, and only as far as the
//!   chain of trusted hops goes.
//! - [`request_id`]: reuse an incoming request id only from a trusted peer, and only when it
//!   is short and made of safe characters.
//! - [`block_response`]: a small HTML or JSON page (chosen by `Accept`) that states the
//!   request id and nothing an attacker can use (no rule id, message or score).
//! - [`request_headers`] / [`request_head`] and [`response_headers`] / [`response_head`]:
//!   an `http` crate head as the engine takes it.
//! - [`Pages`]: the block, challenge, waiting-room and sign-in pages, styled,
//!   self-contained, translatable and replaceable.
//! - [`HostOptions`], [`OverLimit`] and [`over_limit`]: the options every adapter takes,
//!   and the intervention a body over its limit gets.
//! - [`intervention_response`], [`after_mail`] and [`Mailer`]: serving the gates'
//!   endpoints and pages, and the sign-in mail (`gate`'s docs give the steps).

pub(crate) mod block_page;
mod client_addr;
mod finisher;
mod gate;
mod head;
mod options;
pub mod pages;
mod request_id;

pub use block_page::{block_response, BlockPage};
pub use client_addr::{client_addr, InvalidCidr, TrustedProxies, MAX_FORWARDED_HOPS};
pub use finisher::{Finisher, ReportSink};
pub use gate::{after_mail, gate_http_response, intervention_response, Mailer};
pub use head::{request_head, request_headers, response_head, response_headers};
pub use options::{over_limit, HostOptions, OverLimit, DEFAULT_REQUEST_ID_HEADER};
pub use pages::{PageError, PageFiles, PageKind, Pages};
pub use request_id::{request_id, MAX_REQUEST_ID_LEN};

/// The bytes of an HTTP version as the engine expects them in
/// [`RequestHead::version`](crate::RequestHead) (`HTTP/1.1`, `HTTP/2.0`, ...).
pub fn http_version(version: http::Version) -> &'static [u8] {
    match version {
        http::Version::HTTP_09 => b"HTTP/0.9",
        http::Version::HTTP_10 => b"HTTP/1.0",
        http::Version::HTTP_2 => b"HTTP/2.0",
        http::Version::HTTP_3 => b"HTTP/3.0",
        _ => b"HTTP/1.1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(http_version(http::Version::HTTP_11), b"HTTP/1.1");
        assert_eq!(http_version(http::Version::HTTP_2), b"HTTP/2.0");
        assert_eq!(http_version(http::Version::HTTP_10), b"HTTP/1.0");
    }
}
