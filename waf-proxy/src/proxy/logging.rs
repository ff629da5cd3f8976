//! Stage 6, `logging`: runs once per request, when the response body ends or is dropped
//! (so also when the client goes away): the access line, the audit record, metrics. Also
//! the responses the proxy makes itself (block pages, limits, upstream failures), which
//! carry the same logging.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use serde::Serialize;
use waf_core::host;
use waf_core::{DisruptiveAction, Intervention, Report, Transaction, Verdict};

use super::response::add_host_headers;
use super::ConnCtx;
use crate::client::{BoxError, ProxyBody};
use crate::log::rfc3339;
use crate::server::Shared;
use crate::state::State;

/// The response body type: the upstream's (or a generated) body, followed by logging.
pub struct ResBody {
    pub(super) inner: ProxyBody,
    pub(super) fin: Option<Box<Finish>>,
}

/// Everything `logging` needs, carried by the response body until it ends.
pub(super) struct Finish {
    pub(super) shared: Arc<Shared>,
    pub(super) state: Arc<State>,
    pub(super) host: Option<usize>,
    /// Boxed: inline, the transaction made `Finish` large enough that building it (and the
    /// record) cost two long copies per request even with no transaction.
    pub(super) tx: Option<Box<Transaction>>,
    pub(super) rec: Record,
    pub(super) inspect_response: bool,
    pub(super) response_ended: bool,
    /// The request's `Accept`, for the block page's format.
    pub(super) accept: Option<Vec<u8>>,
    /// `logging` has run (or this is a husk left by `take`).
    pub(super) done: bool,
    /// The connection is TLS (for HSTS on generated responses).
    pub(super) https: bool,
}

/// The access log line.
#[derive(Serialize)]
pub(super) struct Record {
    /// Formatted only when the line is written.
    #[serde(serialize_with = "ser_time")]
    pub(super) time: SystemTime,
    pub(super) request_id: String,
    pub(super) client_ip: IpAddr,
    pub(super) host: String,
    #[serde(serialize_with = "ser_display")]
    pub(super) method: http::Method,
    /// The path as sent, made text only when a line is written.
    #[serde(serialize_with = "ser_path")]
    pub(super) path: LogPath,
    pub(super) status: u16,
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    pub(super) duration_ms: f64,
    pub(super) upstream_ms: Option<f64>,
    pub(super) waf_us: u64,
    pub(super) action: &'static str,
    pub(super) rule_ids: Vec<u64>,
    pub(super) anomaly_score: i64,
    /// The ML detector's score (`[hosts.waf] ml`), when it scored the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ml_score: Option<f32>,
    /// The value that scored highest (`ARGS:q`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ml_var: Option<String>,
    #[serde(serialize_with = "ser_opt_display")]
    pub(super) upstream: Option<http::uri::Authority>,
    /// Why the edge refused the request (`action` is then `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<&'static str>,
    #[serde(skip)]
    pub(super) started: Instant,
    #[serde(skip)]
    pub(super) waf_time: Duration,
    #[serde(skip)]
    pub(super) upstream_time: Option<Duration>,
}

/// The request path of a log record, kept as the request had it (a reference-counted
/// URI or the raw target) and made text only when a line is written.
#[derive(Clone, Debug, Default)]
pub(super) enum LogPath {
    /// None known (refused before a request existed).
    #[default]
    None,
    /// The parsed URI's path.
    Uri(http::Uri),
    /// The raw target as the client sent it (its path is logged).
    Raw(Bytes),
}

impl LogPath {
    /// The path as text (bytes that are not UTF-8 replaced).
    pub(super) fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            LogPath::None => "".into(),
            LogPath::Uri(u) => u.path().into(),
            LogPath::Raw(raw) => String::from_utf8_lossy(super::request::raw_path(raw)),
        }
    }
}

fn ser_path<S: serde::Serializer>(p: &LogPath, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.text())
}

fn ser_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*t))
}

fn ser_display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn ser_opt_display<S: serde::Serializer, T: std::fmt::Display>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

impl Record {
    pub(super) fn blank(started: Instant) -> Record {
        Record {
            time: SystemTime::UNIX_EPOCH,
            request_id: String::new(),
            client_ip: IpAddr::from([0, 0, 0, 0]),
            host: String::new(),
            method: http::Method::GET,
            path: LogPath::None,
            status: 0,
            bytes_in: 0,
            bytes_out: 0,
            duration_ms: 0.0,
            upstream_ms: None,
            waf_us: 0,
            action: "pass",
            rule_ids: Vec::new(),
            anomaly_score: 0,
            ml_score: None,
            ml_var: None,
            upstream: None,
            reason: None,
            started,
            waf_time: Duration::ZERO,
            upstream_time: None,
        }
    }
}

impl Finish {
    pub(super) fn new(
        conn: &ConnCtx,
        state: Arc<State>,
        host: Option<usize>,
        tx: Option<Transaction>,
        rec: Record,
    ) -> Box<Finish> {
        // Boxed once here: the stages pass it on as a pointer, and the response body
        // keeps it (moving the struct itself was ~1.5 k instructions per request).
        Box::new(Finish {
            shared: conn.shared.clone(),
            state,
            host,
            tx: tx.map(Box::new),
            rec,
            inspect_response: false,
            response_ended: false,
            accept: None,
            done: false,
            https: conn.https,
        })
    }

    /// A response the proxy makes itself (block page, limit, upstream failure).
    pub(super) fn generated(
        mut self: Box<Self>,
        status: StatusCode,
        mut headers: http::HeaderMap,
        body: String,
    ) -> Response<ResBody> {
        self.rec.status = status.as_u16();
        self.response_ended = true;
        if let Some(hi) = self.host {
            let state = self.state.clone();
            add_host_headers(&mut headers, &state.hosts[hi], self.https);
        }
        // The page's own type wins: a JSON block page is sent as JSON. Only pages made
        // here without one (error pages, which are HTML) get the HTML type.
        headers
            .entry(header::CONTENT_TYPE)
            .or_insert(HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Ok(v) = HeaderValue::from_str(&self.rec.request_id) {
            let name = match self.host {
                Some(hi) => self.state.hosts[hi].options.request_id_header.clone(),
                None => http::HeaderName::from_static(host::DEFAULT_REQUEST_ID_HEADER),
            };
            headers.insert(name, v);
        }
        let mut resp = Response::new(ResBody {
            inner: Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed(),
            fin: Some(self),
        });
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        resp
    }

    pub(super) fn error_response(&mut self, status: StatusCode, what: &str) -> Response<ResBody> {
        let body = page(status, what, &self.rec.request_id);
        let fin = self.take();
        fin.generated(status, http::HeaderMap::new(), body)
    }

    /// The answer to an intervention: `waf_core::host`'s block page (HTML or JSON by
    /// `Accept`, naming the request id and nothing an attacker could use).
    pub(super) fn block(&mut self, i: &Intervention) -> Response<ResBody> {
        // A gate (challenge, waiting room, sign-in) answers with its own page.
        if let Some(r) = self
            .tx
            .as_ref()
            .and_then(|tx| tx.policy_effects().gate_response(&self.rec.request_id))
        {
            self.rec.action = "gate";
            let mut headers = http::HeaderMap::new();
            r.write_headers(&mut headers);
            let fin = self.take();
            return fin.generated(r.status, headers, r.body);
        }
        self.rec.action = "block";
        let page = match self.host {
            Some(hi) => self.state.hosts[hi].waf.block_response(
                i,
                &self.rec.request_id,
                self.accept.as_deref(),
            ),
            None => host::block_response(i, &self.rec.request_id, self.accept.as_deref()),
        };
        let mut headers = http::HeaderMap::new();
        if let Some(v) = page
            .location
            .as_deref()
            .and_then(|l| HeaderValue::from_str(l).ok())
        {
            headers.insert(header::LOCATION, v);
        }
        if matches!(i.action, DisruptiveAction::Drop) {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(page.content_type),
        );
        if page.content_type.starts_with("text/html") {
            // The page's own inline style, whatever the host's CSP says.
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(host::pages::PAGE_CSP),
            );
        }
        let mut body = page.body;
        if let Some(tx) = &self.tx {
            crate::policy::edit_block(tx.policy_effects(), &mut headers, &mut body);
        }
        let fin = self.take();
        fin.generated(page.status, headers, body)
    }

    pub(super) fn take(&mut self) -> Box<Finish> {
        let started = self.rec.started;
        self.done = true;
        Box::new(Finish {
            shared: self.shared.clone(),
            state: self.state.clone(),
            host: self.host,
            tx: self.tx.take(),
            rec: std::mem::replace(&mut self.rec, Record::blank(started)),
            inspect_response: false,
            response_ended: self.response_ended,
            accept: self.accept.take(),
            done: false,
            https: self.https,
        })
    }

    /// `logging`: runs once per request, from `Drop`, so also when the client goes away
    /// before the response (status 499, as nginx logs it).
    fn complete(&mut self) {
        self.done = true;
        let mut report: Option<Report> = None;
        if let Some(mut tx) = self.tx.take() {
            if !self.response_ended {
                let t = Instant::now();
                // The response has gone out: an intervention now can only be logged
                // (action `detect`).
                if let Verdict::Intervene(_) = tx.response_end() {
                    if self.rec.action == "pass" {
                        self.rec.action = "detect";
                    }
                }
                self.rec.waf_time += t.elapsed();
            }
            let t = Instant::now();
            report = Some(tx.finish());
            self.rec.waf_time += t.elapsed();
        }
        let rec = &mut self.rec;
        if rec.status == 0 {
            rec.status = 499;
            if rec.action == "pass" {
                rec.action = "client_abort";
            }
        }
        let elapsed = rec.started.elapsed();
        rec.duration_ms = elapsed.as_secs_f64() * 1e3;
        rec.upstream_ms = rec.upstream_time.map(|d| d.as_secs_f64() * 1e3);
        rec.waf_us = rec.waf_time.as_micros() as u64;
        if let Some(r) = &report {
            rec.rule_ids = r.matched_rules.iter().map(|m| m.id).collect();
            rec.anomaly_score = r.inbound_anomaly_score;
            if let Some(ml) = &r.ml {
                rec.ml_score = Some(ml.score);
                rec.ml_var = Some(ml.var.clone());
            }
            if rec.action == "pass" && r.would_intervene.is_some() {
                rec.action = "detect";
            }
        }
        let m = &self.shared.metrics;
        // Metrics are labelled by the configured host (bounded), logs by the requested name.
        let label = self
            .host
            .map_or("-", |i| self.state.hosts[i].label.as_str());
        m.request(label, rec.status, rec.action);
        m.latency.observe(elapsed);
        m.waf_time.observe(rec.waf_time);
        if let Some(d) = rec.upstream_time {
            m.upstream_time.observe(d);
        }
        if let Some(score) = rec.ml_score {
            m.ml_score.observe(score);
        }
        if let Some(r) = &report {
            if !r.matched_rules.is_empty() {
                m.rule_hits(r.matched_rules.iter().map(|x| x.id));
            }
        }
        if self.shared.access_log.enabled() {
            if let Ok(line) = serde_json::to_vec(&*rec) {
                self.shared.access_log.send(line);
            }
        }
        if let Some(r) = &report {
            if self.shared.audit_log.enabled()
                && (!r.matched_rules.is_empty() || !r.policy.is_empty())
            {
                if let Ok(line) = serde_json::to_vec(&audit_record(rec, r)) {
                    self.shared.audit_log.send(line);
                }
            }
        }
    }
}

fn audit_record<'a>(rec: &'a Record, r: &'a Report) -> serde_json::Value {
    let rules: Vec<serde_json::Value> = r
        .matched_rules
        .iter()
        .map(|m| {
            serde_json::json!({
                "id": m.id,
                "phase": m.phase,
                "message": m.message,
                "data": m.data,
                "severity": m.severity.map(|s| s.name()),
                "tags": m.tags,
                "matched_var": m.matched_var_name,
                "matched_data": m.matched_data,
                "disruptive": m.disruptive,
                "file": m.file,
                "line": m.line,
            })
        })
        .collect();
    serde_json::json!({
        "time": rfc3339(rec.time),
        "request_id": rec.request_id,
        "client_ip": rec.client_ip,
        "host": rec.host,
        "method": rec.method.as_str(),
        "path": rec.path.text(),
        "status": rec.status,
        "action": rec.action,
        "inbound_anomaly_score": r.inbound_anomaly_score,
        "outbound_anomaly_score": r.outbound_anomaly_score,
        "intervention": r.intervention.as_ref().map(|i| serde_json::json!({"status": i.status, "rule_id": i.rule_id, "message": i.message})),
        "would_intervene": r.would_intervene.as_ref().map(|i| serde_json::json!({"status": i.status, "rule_id": i.rule_id, "message": i.message})),
        "policy": crate::policy::audit_hits(r),
        "ml": r.ml.as_ref().map(|m| serde_json::json!({"score": m.score, "var": m.var, "values": m.values, "error": m.error})),
        "rules": rules,
    })
}

impl Body for ResBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(fin), Some(d)) = (this.fin.as_mut(), frame.data_ref()) {
                    fin.rec.bytes_out += d.len() as u64;
                    if fin.inspect_response {
                        if let Some(tx) = fin.tx.as_mut() {
                            let t = Instant::now();
                            let _ = tx.response_body(d);
                            fin.rec.waf_time += t.elapsed();
                        }
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.fin = None; // logging, from Finish's Drop
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.fin = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.done {
            self.complete();
        }
    }
}

impl std::fmt::Debug for ResBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResBody")
    }
}

/// A request id when no transaction makes one: the process's start time in microseconds
/// and a counter, in hex. Written by hand: `format!` here was a measurable share of the
/// WAF-off request path (benches/PROFILE.md).
pub(super) fn fallback_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static START: OnceLock<u64> = OnceLock::new();
    static N: AtomicU64 = AtomicU64::new(0);
    let start = *START.get_or_init(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros() as u64
    });
    let n = N.fetch_add(1, Ordering::Relaxed);
    let mut id = String::with_capacity(32);
    push_hex(&mut id, start);
    id.push('-');
    push_hex(&mut id, n);
    id
}

fn push_hex(out: &mut String, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - v.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(char::from(HEX[((v >> (i * 4)) & 15) as usize]));
    }
}

/// The HTML page of a generated response.
pub(super) fn page(status: StatusCode, what: &str, request_id: &str) -> String {
    let code = status.as_u16();
    let reason = status.canonical_reason().unwrap_or("");
    format!(
        "<!doctype html>\n<html><head><title>{code} {reason}</title></head>\
         <body><h1>{code} {reason}</h1><p>{what}.</p>\
         <p>Request id: <code>{request_id}</code></p></body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_ids_are_hex_and_unique() {
        let (a, b) = (fallback_id(), fallback_id());
        assert_ne!(a, b);
        let (start, n) = a.split_once('-').unwrap();
        assert!(u64::from_str_radix(start, 16).unwrap() > 0);
        u64::from_str_radix(n, 16).unwrap();
        let mut s = String::new();
        push_hex(&mut s, 0);
        push_hex(&mut s, 0xabc);
        push_hex(&mut s, u64::MAX);
        assert_eq!(s, "0abcffffffffffffffff");
    }
}
