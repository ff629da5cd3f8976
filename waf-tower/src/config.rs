//! The options a [`WafLayer`](crate::WafLayer) is built with, and where reports go.

use std::fmt;

use waf_core::host::HostOptions;
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
pub const DEFAULT_REQUEST_ID_HEADER: &str = waf_core::host::DEFAULT_REQUEST_ID_HEADER;

/// What to do with a body larger than its limit (shared by every host adapter).
pub use waf_core::host::OverLimit;

/// Where every transaction's [`Report`] goes.
pub(crate) type Sink = waf_core::host::ReportSink;

/// Everything a [`WafService`](crate::WafService) needs, shared by all its clones.
pub(crate) struct Config {
    pub(crate) waf: Waf,
    /// Trusted proxies, request id header, body limits and their over-limit actions.
    pub(crate) options: HostOptions,
    pub(crate) sink: Sink,
    /// Sends the sign-in mails (`[gates.sign_in]`).
    pub(crate) mailer: Option<std::sync::Arc<dyn waf_core::host::Mailer>>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("options", &self.options)
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
