//! The options a [`Waf`](crate::Waf) middleware is built with, and where reports go.

use std::fmt;
use std::sync::Arc;

use waf_core::host::TrustedProxies;
use waf_core::Report;

use crate::middleware::Waf;

/// Default for [`WafBuilder::request_body_limit`]: 13,107,200 bytes (12.5 MiB), the value
/// CRS recommends for `SecRequestBodyLimit`. It bounds what one request can make the
/// middleware buffer (the limit plus one chunk).
pub const DEFAULT_REQUEST_BODY_LIMIT: usize = waf_core::limits::DEFAULT_REQUEST_BODY_LIMIT;

/// Default for [`WafBuilder::response_body_limit`]: 524,288 bytes (512 KiB), the value CRS
/// recommends for `SecResponseBodyLimit`. Only responses whose MIME type the rules inspect
/// are buffered at all.
pub const DEFAULT_RESPONSE_BODY_LIMIT: usize = waf_core::limits::DEFAULT_RESPONSE_BODY_LIMIT;

/// The response header that carries the request id, by default.
pub const DEFAULT_REQUEST_ID_HEADER: &str = "x-request-id";

/// What to do with a body larger than its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverLimit {
    /// Answer with an intervention: 413 for a request body (the handler never runs), 500 for
    /// a response body. In detection-only mode this is reported as a would-be intervention
    /// and the body is handled as with `ProcessPartial`.
    Reject,
    /// Inspect the first `limit` bytes, then pass the whole body through unchanged.
    ProcessPartial,
}

pub(crate) type Sink = waf_core::host::ReportSink;

pub(crate) struct Config {
    pub(crate) waf: waf_core::Waf,
    pub(crate) trusted_proxies: TrustedProxies,
    pub(crate) request_id_header: http::HeaderName,
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

/// Options for a [`Waf`] middleware; every one has a default.
#[derive(Debug)]
pub struct WafBuilder {
    config: Config,
}

impl WafBuilder {
    pub(crate) fn new(waf: waf_core::Waf) -> WafBuilder {
        WafBuilder {
            config: Config {
                waf,
                trusted_proxies: TrustedProxies::none(),
                request_id_header: http::HeaderName::from_static(DEFAULT_REQUEST_ID_HEADER),
                request_body_limit: DEFAULT_REQUEST_BODY_LIMIT,
                request_body_over_limit: OverLimit::Reject,
                response_body_limit: DEFAULT_RESPONSE_BODY_LIMIT,
                response_body_over_limit: OverLimit::ProcessPartial,
                sink: Arc::new(trace_report),
            },
        }
    }

    /// Proxies whose `X-Forwarded-For` / `Forwarded` headers and request id are believed.
    /// Default: none, so the client is always the peer.
    pub fn trusted_proxies(mut self, trusted: TrustedProxies) -> Self {
        self.config.trusted_proxies = trusted;
        self
    }

    /// The header that carries the request id on every response (and, from a trusted
    /// proxy, on the request). Default: [`DEFAULT_REQUEST_ID_HEADER`] (`x-request-id`).
    pub fn request_id_header(mut self, name: http::HeaderName) -> Self {
        self.config.request_id_header = name;
        self
    }

    /// The most request body bytes buffered for inspection. Default:
    /// [`DEFAULT_REQUEST_BODY_LIMIT`]. The engine's `SecRequestBodyLimit` also applies: the
    /// smaller limit wins.
    pub fn request_body_limit(mut self, bytes: usize) -> Self {
        self.config.request_body_limit = bytes;
        self
    }

    /// What to do with a request body over the limit. Default: [`OverLimit::Reject`] (413).
    /// A `Content-Length` over the limit is rejected before any of the body is read.
    pub fn request_body_over_limit(mut self, action: OverLimit) -> Self {
        self.config.request_body_over_limit = action;
        self
    }

    /// The most response body bytes buffered for inspection (only for MIME types the rules
    /// inspect). Default: [`DEFAULT_RESPONSE_BODY_LIMIT`].
    pub fn response_body_limit(mut self, bytes: usize) -> Self {
        self.config.response_body_limit = bytes;
        self
    }

    /// What to do with an inspected response body over the limit. Default:
    /// [`OverLimit::ProcessPartial`].
    pub fn response_body_over_limit(mut self, action: OverLimit) -> Self {
        self.config.response_body_over_limit = action;
        self
    }

    /// Sends every transaction's [`Report`] to `sink` instead of the default `tracing`
    /// event (target `waf`: `info` for blocks and would-be blocks, `debug` for other
    /// matches). Called once per transaction, when the response is done or dropped.
    pub fn on_report(mut self, sink: impl Fn(&Report) + Send + Sync + 'static) -> Self {
        self.config.sink = Arc::new(sink);
        self
    }

    /// Adds a native policy (rules with conditions, lists, rate limits, bans, IP
    /// intelligence: [`waf_core::policy`]) to the middleware's `Waf`; its errors name the
    /// rule, line and column.
    pub fn policy(
        mut self,
        config: &waf_core::policy::PolicyConfig,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.config.waf = self.config.waf.with_policy(config, None)?;
        Ok(self)
    }

    /// The middleware.
    pub fn build(self) -> Waf {
        Waf::from_config(Arc::new(self.config))
    }
}

/// The default sink: one `tracing` event per transaction, target `waf`.
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
