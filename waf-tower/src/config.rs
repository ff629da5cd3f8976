//! The options a [`WafLayer`](crate::WafLayer) is built with, and where reports go.

use std::fmt;

use http::HeaderName;
use waf_core::host::TrustedProxies;
use waf_core::{Report, Waf};

/// Default for [`WafLayerBuilder::request_body_limit`](crate::WafLayerBuilder::request_body_limit):
/// 13,107,200 bytes (12.5 MiB), the value CRS recommends for `SecRequestBodyLimit`.
///
/// It bounds what one request can make the middleware buffer (the limit plus one chunk).
pub const DEFAULT_REQUEST_BODY_LIMIT: usize = waf_core::limits::DEFAULT_REQUEST_BODY_LIMIT;

/// Default for [`WafLayerBuilder::response_body_limit`](crate::WafLayerBuilder::response_body_limit):
/// 524,288 bytes (512 KiB), the value CRS recommends for `SecResponseBodyLimit`.
///
/// Only responses whose MIME type the rules inspect (`SecResponseBodyMimeType`) are
/// buffered at all.
pub const DEFAULT_RESPONSE_BODY_LIMIT: usize = waf_core::limits::DEFAULT_RESPONSE_BODY_LIMIT;

/// The response header that carries the request id, by default.
pub const DEFAULT_REQUEST_ID_HEADER: &str = "x-request-id";

/// What to do with a body larger than its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverLimit {
    /// Answer with an intervention: 413 for a request body (without calling the handler),
    /// 500 for a response body. In detection-only mode this is reported as a would-be
    /// intervention and the body is handled as with `ProcessPartial`.
    Reject,
    /// Inspect the first `limit` bytes, then pass the whole body through unchanged.
    ProcessPartial,
}

/// Where every transaction's [`Report`] goes.
pub(crate) type Sink = waf_core::host::ReportSink;

/// Everything a [`WafService`](crate::WafService) needs, shared by all its clones.
pub(crate) struct Config {
    pub(crate) waf: Waf,
    pub(crate) trusted_proxies: TrustedProxies,
    pub(crate) request_id_header: HeaderName,
    pub(crate) request_body_limit: usize,
    pub(crate) request_body_over_limit: OverLimit,
    pub(crate) response_body_limit: usize,
    pub(crate) response_body_over_limit: OverLimit,
    pub(crate) sink: Sink,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("trusted_proxies", &self.trusted_proxies.to_string())
            .field("request_id_header", &self.request_id_header)
            .field("request_body_limit", &self.request_body_limit)
            .field("request_body_over_limit", &self.request_body_over_limit)
            .field("response_body_limit", &self.response_body_limit)
            .field("response_body_over_limit", &self.response_body_over_limit)
            .finish_non_exhaustive()
    }
}

/// The default sink: one `tracing` event per transaction, target `waf`.
///
/// A block is logged at `info` (an operator does not have to act on an attack that was
/// stopped), a would-be block in detection-only mode at `info`, matches that did not block
/// at `debug`, and clean transactions at `trace`.
pub(crate) fn trace_report(report: &Report) {
    let rules: Vec<u64> = report
        .matched_rules
        .iter()
        .filter(|r| r.log)
        .map(|r| r.id)
        .collect();
    if let Some(i) = &report.intervention {
        tracing::info!(
            target: "waf",
            request_id = %report.unique_id,
            action = "block",
            status = i.status,
            rule_id = i.rule_id,
            matched_rules = ?rules,
            inbound_anomaly_score = report.inbound_anomaly_score,
            outbound_anomaly_score = report.outbound_anomaly_score,
            "request blocked"
        );
    } else if let Some(i) = &report.would_intervene {
        tracing::info!(
            target: "waf",
            request_id = %report.unique_id,
            action = "detect",
            status = i.status,
            rule_id = i.rule_id,
            matched_rules = ?rules,
            inbound_anomaly_score = report.inbound_anomaly_score,
            outbound_anomaly_score = report.outbound_anomaly_score,
            "request would have been blocked (detection only)"
        );
    } else if !rules.is_empty() {
        tracing::debug!(
            target: "waf",
            request_id = %report.unique_id,
            action = "pass",
            matched_rules = ?rules,
            "rules matched"
        );
    } else {
        tracing::trace!(target: "waf", request_id = %report.unique_id, action = "pass", "clean");
    }
}
