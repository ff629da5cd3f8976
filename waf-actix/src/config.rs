//! The options a [`Waf`](crate::Waf) middleware is built with, and where reports go.

use std::fmt;
use std::sync::Arc;

use waf_core::host::{HostOptions, TrustedProxies};
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
pub const DEFAULT_REQUEST_ID_HEADER: &str = waf_core::host::DEFAULT_REQUEST_ID_HEADER;

/// What to do with a body larger than its limit (shared by every host adapter).
pub use waf_core::host::OverLimit;

pub(crate) type Sink = waf_core::host::ReportSink;

pub(crate) struct Config {
    pub(crate) waf: waf_core::Waf,
    /// Trusted proxies, request id header, body limits and their over-limit actions.
    pub(crate) options: HostOptions,
    pub(crate) sink: Sink,
    /// Sends the sign-in mails (`[gates.sign_in]`).
    pub(crate) mailer: Option<Arc<dyn waf_core::host::Mailer>>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("options", &self.options)
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
                options: HostOptions::default(),
                sink: Arc::new(trace_report),
                mailer: None,
            },
        }
    }

    /// Proxies whose `X-Forwarded-For` / `Forwarded` headers and request id are believed.
    /// Default: none, so the client is always the peer.
    pub fn trusted_proxies(mut self, trusted: TrustedProxies) -> Self {
        self.config.options.trusted_proxies = trusted;
        self
    }

    /// The header that carries the request id on every response (and, from a trusted
    /// proxy, on the request). Default: [`DEFAULT_REQUEST_ID_HEADER`] (`x-request-id`).
    pub fn request_id_header(mut self, name: http::HeaderName) -> Self {
        self.config.options.request_id_header = name;
        self
    }

    /// The most request body bytes buffered for inspection. Default:
    /// [`DEFAULT_REQUEST_BODY_LIMIT`]. The engine's `SecRequestBodyLimit` also applies: the
    /// smaller limit wins.
    pub fn request_body_limit(mut self, bytes: usize) -> Self {
        self.config.options.request_body_limit = bytes;
        self
    }

    /// What to do with a request body over the limit. Default: [`OverLimit::Reject`] (413).
    /// A `Content-Length` over the limit is rejected before any of the body is read.
    pub fn request_body_over_limit(mut self, action: OverLimit) -> Self {
        self.config.options.request_body_over_limit = action;
        self
    }

    /// The most response body bytes buffered for inspection (only for MIME types the rules
    /// inspect). Default: [`DEFAULT_RESPONSE_BODY_LIMIT`].
    pub fn response_body_limit(mut self, bytes: usize) -> Self {
        self.config.options.response_body_limit = bytes;
        self
    }

    /// What to do with an inspected response body over the limit. Default:
    /// [`OverLimit::ProcessPartial`].
    pub fn response_body_over_limit(mut self, action: OverLimit) -> Self {
        self.config.options.response_body_over_limit = action;
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
    /// intelligence, and the gates: challenges, waiting rooms, sign-in:
    /// [`waf_core::policy`]) to the middleware's `Waf`; its errors name the rule, line and
    /// column. The gates' endpoints (`/.waf/` by default) are answered by the middleware;
    /// sign-in needs a [`mailer`](Self::mailer).
    pub fn policy(
        self,
        config: &waf_core::policy::PolicyConfig,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.attach_policy(config, None)
    }

    /// Adds a native policy whose rate limits and bans hold for a whole fleet: its state
    /// lives in `store` (from [`waf_redis::Fleet::store`], the same namespace on every
    /// node), decided locally and reconciled with Redis in the background.
    #[cfg(feature = "redis")]
    pub fn fleet_policy(
        self,
        config: &waf_core::policy::PolicyConfig,
        store: Arc<waf_redis::FleetStore>,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.attach_policy(config, Some(store))
    }

    /// Compiles `config` into the `Waf`, with its state in `store` (a new in-memory one
    /// when `None`).
    fn attach_policy(
        mut self,
        config: &waf_core::policy::PolicyConfig,
        store: Option<Arc<dyn waf_core::policy::Store>>,
    ) -> Result<Self, waf_core::policy::PolicyError> {
        self.config.waf = self.config.waf.with_policy(config, store)?;
        Ok(self)
    }

    /// Sends the sign-in mails (`[gates.sign_in]`): the application's own [`Mailer`], or
    /// `SmtpMailer` (feature `smtp`, re-exported from waf-tower). Without one, a sign-in
    /// form gets the "could not send" page.
    ///
    /// [`Mailer`]: waf_core::host::Mailer
    pub fn mailer(mut self, mailer: Arc<dyn waf_core::host::Mailer>) -> Self {
        self.config.mailer = Some(mailer);
        self
    }

    /// The middleware.
    pub fn build(self) -> Waf {
        if self.config.waf.has_sign_in() && self.config.mailer.is_none() {
            tracing::warn!(
                "[gates.sign_in] without a mailer (WafBuilder::mailer): no sign-in code can be sent"
            );
        }
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use waf_core::{DisruptiveAction, Intervention, Report};

    /// What `trace_report` logs for `report`, as `tracing-subscriber`'s text format.
    fn logged(report: &Report) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || super::trace_report(report));
        let text = buf.0.lock().unwrap().clone();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn blocks_and_would_be_blocks_carry_the_anomaly_scores() {
        let i = Intervention {
            status: 403,
            action: DisruptiveAction::Deny,
            rule_id: 949110,
            message: None,
        };
        let mut blocked = Report::default();
        blocked.inbound_anomaly_score = 15;
        blocked.outbound_anomaly_score = 4;
        blocked.intervention = Some(i.clone());
        let mut detected = Report::default();
        detected.inbound_anomaly_score = 15;
        detected.outbound_anomaly_score = 4;
        detected.would_intervene = Some(i);
        for (r, action) in [(&blocked, "block"), (&detected, "detect")] {
            let line = logged(r);
            assert!(line.contains(&format!("action=\"{action}\"")), "{line}");
            assert!(line.contains("inbound_anomaly_score=15"), "{line}");
            assert!(line.contains("outbound_anomaly_score=4"), "{line}");
        }
    }
}
