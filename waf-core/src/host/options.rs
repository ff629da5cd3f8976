//! The options every host adapter takes, and what a body over its limit gets.

use http::HeaderName;

use super::{Finisher, TrustedProxies};
use crate::verdict::{DisruptiveAction, Intervention};
use crate::waf::EngineMode;

/// The response header that carries the request id, by default.
pub const DEFAULT_REQUEST_ID_HEADER: &str = "x-request-id";

/// What to do with a body larger than its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverLimit {
    /// Answer with an intervention: 413 for a request body (the application never sees the
    /// request), 500 for a response body. In detection-only mode this is reported as a
    /// would-be intervention and the body is handled as with `ProcessPartial`.
    Reject,
    /// Inspect the first `limit` bytes, then pass the whole body through unchanged.
    ProcessPartial,
}

/// The options of a host adapter: who is trusted, where the request id goes, and the body
/// limits with what happens past them. Start from [`HostOptions::default`] and change
/// fields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostOptions {
    /// Peers whose `X-Forwarded-For` / `Forwarded` are believed (default: none).
    pub trusted_proxies: TrustedProxies,
    /// The header that carries the request id, in and out (default `x-request-id`).
    pub request_id_header: HeaderName,
    /// Most request body bytes buffered for inspection (default
    /// [`DEFAULT_REQUEST_BODY_LIMIT`](crate::limits::DEFAULT_REQUEST_BODY_LIMIT)).
    pub request_body_limit: usize,
    /// What a request body past the limit gets (default [`OverLimit::Reject`], 413).
    pub request_body_over_limit: OverLimit,
    /// Most response body bytes buffered for inspection, for the MIME types the rules
    /// inspect only (default
    /// [`DEFAULT_RESPONSE_BODY_LIMIT`](crate::limits::DEFAULT_RESPONSE_BODY_LIMIT)).
    pub response_body_limit: usize,
    /// What a response body past the limit gets (default [`OverLimit::ProcessPartial`]).
    pub response_body_over_limit: OverLimit,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            trusted_proxies: TrustedProxies::default(),
            request_id_header: HeaderName::from_static(DEFAULT_REQUEST_ID_HEADER),
            request_body_limit: crate::limits::DEFAULT_REQUEST_BODY_LIMIT,
            request_body_over_limit: OverLimit::Reject,
            response_body_limit: crate::limits::DEFAULT_RESPONSE_BODY_LIMIT,
            response_body_over_limit: OverLimit::ProcessPartial,
        }
    }
}

/// A body over its limit (`what` is `request` or `response`): the intervention to answer
/// with under [`OverLimit::Reject`] in blocking mode, recorded on `finisher`; `None`
/// otherwise, after recording a would-be intervention in detection-only mode.
pub fn over_limit(
    mode: EngineMode,
    action: OverLimit,
    status: u16,
    what: &str,
    finisher: &mut Finisher,
) -> Option<Intervention> {
    if action != OverLimit::Reject {
        return None;
    }
    let i = Intervention {
        status,
        action: DisruptiveAction::Deny,
        rule_id: 0,
        message: Some(format!("{what} body is larger than the limit")),
    };
    match mode {
        EngineMode::On => {
            finisher.set_intervention(i.clone());
            Some(i)
        }
        EngineMode::DetectionOnly => {
            finisher.set_would_intervene(i);
            None
        }
        _ => None,
    }
}
