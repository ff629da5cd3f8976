//! What every host does for the gates (challenges, waiting rooms, sign-in), once:
//!
//! 1. A request under the gate prefix (`/.waf/` by default, [`Waf::is_gate_path`]) is
//!    answered by the core, not the application: read its small form body (at most
//!    [`DEFAULT_GATE_FORM_LEN`](crate::limits::DEFAULT_GATE_FORM_LEN) bytes) and call
//!    [`Waf::gate_request`]. When the answer carries a [`Mail`] (the sign-in code), the host
//!    sends it with a [`Mailer`] first and answers with [`after_mail`].
//! 2. An intervention is answered with [`intervention_response`]: the gate's page (or JSON,
//!    or redirect) when a gate intervened, otherwise the block page.
//! 3. A response that went through gets [`PolicyEffects::edit_response_headers`] (the
//!    renewed admission and session cookies, the admission from the waiting room).
//!
//! The core does no I/O: the [`Mailer`] is the host's (an application's own, or an SMTP
//! one the middleware crates offer behind a feature); the core never calls it.

use std::future::Future;
use std::pin::Pin;

use http::header::{CACHE_CONTROL, CONNECTION, CONTENT_TYPE, LOCATION};
use http::{HeaderValue, Response};

use crate::policy::gate::{GateResponse, Mail};
use crate::policy::PolicyEffects;
use crate::{DisruptiveAction, Intervention, Waf};

/// Sends the sign-in mails of a host ([`Mail`]: recipient, subject, plain-text body).
///
/// The host awaits the future before it answers the sign-in form; an `Err` makes the
/// visitor see the "could not send" page ([`after_mail`]). The error text is logged, so it
/// must not hold the code or the address. Implementations must bound the time a send takes.
pub trait Mailer: Send + Sync {
    /// Sends `mail`.
    fn send(&self, mail: Mail) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;
}

impl std::fmt::Debug for dyn Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn Mailer")
    }
}

/// The answer to send once the mail of `r` was sent (`Ok`) or not (`Err`, with the
/// "could not send" page). `r` without a mail is returned as it is.
pub fn after_mail(mut r: GateResponse, sent: &Result<(), String>) -> GateResponse {
    r.mail = None;
    match (sent, r.send_failed.take()) {
        (Err(_), Some(failed)) => *failed,
        _ => r,
    }
}

/// A gate's answer as an `http` response.
pub fn gate_http_response(r: &GateResponse) -> Response<Vec<u8>> {
    let mut resp = Response::new(r.body.clone().into_bytes());
    *resp.status_mut() = r.status;
    r.write_headers(resp.headers_mut());
    resp
}

/// The answer to intervention `i` of a transaction whose policy effects are `effects`:
/// the gate's answer when a gate intervened, else the block page (with the policy's pages,
/// [`Waf::block_response`]), a rate limit's `Retry-After`, a rule's own page,
/// `Cache-Control: no-store`, `Location` for a redirect and `Connection: close` for a drop
/// (a host that can drop the connection itself may do so instead). `accept` is the
/// request's `Accept` header. The host adds its request-id header.
pub fn intervention_response(
    waf: &Waf,
    effects: &PolicyEffects,
    i: &Intervention,
    request_id: &str,
    accept: Option<&[u8]>,
) -> Response<Vec<u8>> {
    if let Some(g) = effects.gate_response(request_id) {
        return gate_http_response(&g);
    }
    let page = waf.block_response(i, request_id, accept);
    let mut resp = Response::new(page.body.into_bytes());
    *resp.status_mut() = page.status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(page.content_type));
    if let Some(own) = effects.edit_block_headers(headers) {
        *resp.body_mut() = own.to_vec();
    }
    let headers = resp.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(location) = page.location.and_then(|l| HeaderValue::try_from(l).ok()) {
        headers.insert(LOCATION, location);
    }
    if i.action == DisruptiveAction::Drop {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn a_failed_mail_gives_the_failure_page() {
        let failed = GateResponse {
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: vec![],
            body: "not sent".into(),
            mail: None,
            send_failed: None,
        };
        let r = GateResponse {
            status: StatusCode::OK,
            headers: vec![("set-cookie", "a=b".into())],
            body: "sent".into(),
            mail: None,
            send_failed: Some(Box::new(failed.clone())),
        };
        assert_eq!(after_mail(r.clone(), &Err("refused".into())), failed);
        let ok = after_mail(r, &Ok(()));
        assert_eq!(ok.body, "sent");
        let http = gate_http_response(&ok);
        assert_eq!(http.headers()["set-cookie"], "a=b");
    }
}
