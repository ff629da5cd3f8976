//! Prometheus metrics, served on the admin listener as text format 0.0.4.
//!
//! Counters are atomics or short mutex-guarded maps (one uncontended lock per request,
//! tens of nanoseconds); histograms use fixed buckets.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upstream TCP connections opened since start (pool misses), all workers.
pub static UPSTREAM_CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// Latency bucket bounds in seconds.
const BOUNDS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// A fixed-bucket histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BOUNDS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BOUNDS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (b, c) in BOUNDS.iter().zip(&self.buckets) {
            cum += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Score bucket bounds of [`ScoreHistogram`] (the ML detector's score, `0..=1`).
const SCORE_BOUNDS: [f64; 12] = [
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999,
];

/// A fixed-bucket histogram of scores in `[0, 1]` (the ML detector's).
#[derive(Debug, Default)]
pub struct ScoreHistogram {
    buckets: [AtomicU64; SCORE_BOUNDS.len()],
    count: AtomicU64,
    /// Sum of the scores in millionths.
    sum_micro: AtomicU64,
}

impl ScoreHistogram {
    /// Records one score (clamped to `[0, 1]`).
    pub fn observe(&self, score: f32) {
        let s = f64::from(score).clamp(0.0, 1.0);
        if let Some(i) = SCORE_BOUNDS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micro
            .fetch_add((s * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (b, c) in SCORE_BOUNDS.iter().zip(&self.buckets) {
            cum += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// FNV-1a: the per-request counter maps have short, trusted keys (configured host labels,
/// static action names), so SipHash's DoS resistance buys nothing there and costs a
/// measurable share of the WAF-off request path (benches/PROFILE.md).
#[derive(Default)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

/// Requests of one host by (status, action).
type StatusCounts = FastMap<(u16, &'static str), u64>;

/// All metrics of the process.
#[derive(Debug, Default)]
pub struct Metrics {
    /// host -> (status, action) -> count; looked up by `&str`, so no allocation per request.
    requests: Mutex<FastMap<String, StatusCounts>>,
    rule_hits: Mutex<HashMap<u64, u64>>,
    upstream_errors: Mutex<HashMap<(String, &'static str), u64>>,
    refused: Mutex<HashMap<&'static str, u64>>,
    /// Whole-request latency.
    pub latency: Histogram,
    /// Time spent in the WAF per request.
    pub waf_time: Histogram,
    /// Time to the upstream's response head.
    pub upstream_time: Histogram,
    /// The ML detector's request scores (hosts with `[hosts.waf] ml`).
    pub ml_score: ScoreHistogram,
    /// Successful reloads.
    pub reloads_ok: AtomicU64,
    /// Failed reloads (the old config kept serving).
    pub reloads_failed: AtomicU64,
}

impl Metrics {
    /// Counts a finished request.
    pub fn request(&self, host: &str, status: u16, action: &'static str) {
        if let Ok(mut m) = self.requests.lock() {
            let per_host = match m.get_mut(host) {
                Some(h) => h,
                None => m.entry(host.to_string()).or_default(),
            };
            *per_host.entry((status, action)).or_default() += 1;
        }
    }

    /// Counts matched rules.
    pub fn rule_hits(&self, ids: impl Iterator<Item = u64>) {
        if let Ok(mut m) = self.rule_hits.lock() {
            for id in ids {
                *m.entry(id).or_default() += 1;
            }
        }
    }

    /// Counts an upstream failure of `kind` (`connect`, `timeout`, `error`).
    pub fn upstream_error(&self, server: &str, kind: &'static str) {
        if let Ok(mut m) = self.upstream_errors.lock() {
            *m.entry((server.to_string(), kind)).or_default() += 1;
        }
    }

    /// Counts a request the HTTP/1 edge refused, by reason.
    pub fn refused(&self, reason: &'static str) {
        if let Ok(mut m) = self.refused.lock() {
            *m.entry(reason).or_default() += 1;
        }
    }

    /// The Prometheus text; `extra` holds lines computed by the caller (pool gauges, logs).
    pub fn render(&self, extra: &str) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP waf_proxy_requests_total Requests by host, status and WAF action.\n# TYPE waf_proxy_requests_total counter\n");
        if let Ok(m) = self.requests.lock() {
            for (host, per_host) in m.iter() {
                for ((status, action), n) in per_host {
                    let _ = writeln!(
                        out,
                        "waf_proxy_requests_total{{host=\"{}\",status=\"{status}\",action=\"{action}\"}} {n}",
                        escape(host)
                    );
                }
            }
        }
        out.push_str("# HELP waf_proxy_rule_hits_total Matched rules by id.\n# TYPE waf_proxy_rule_hits_total counter\n");
        if let Ok(m) = self.rule_hits.lock() {
            for (id, n) in m.iter() {
                let _ = writeln!(out, "waf_proxy_rule_hits_total{{rule_id=\"{id}\"}} {n}");
            }
        }
        out.push_str("# HELP waf_proxy_upstream_errors_total Upstream failures by server and kind.\n# TYPE waf_proxy_upstream_errors_total counter\n");
        if let Ok(m) = self.upstream_errors.lock() {
            for ((server, kind), n) in m.iter() {
                let _ = writeln!(
                    out,
                    "waf_proxy_upstream_errors_total{{server=\"{}\",kind=\"{kind}\"}} {n}",
                    escape(server)
                );
            }
        }
        out.push_str("# HELP waf_proxy_refused_total Requests refused at the HTTP/1 edge, by reason.\n# TYPE waf_proxy_refused_total counter\n");
        if let Ok(m) = self.refused.lock() {
            for (reason, n) in m.iter() {
                let _ = writeln!(out, "waf_proxy_refused_total{{reason=\"{reason}\"}} {n}");
            }
        }
        let _ = writeln!(
            out,
            "# HELP waf_proxy_upstream_connections_total Upstream connections opened (pool misses).\n\
             # TYPE waf_proxy_upstream_connections_total counter\n\
             waf_proxy_upstream_connections_total {}",
            UPSTREAM_CONNECTIONS.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP waf_proxy_reloads_total Config reloads by result.\n\
             # TYPE waf_proxy_reloads_total counter\n\
             waf_proxy_reloads_total{{result=\"ok\"}} {}\n\
             waf_proxy_reloads_total{{result=\"failed\"}} {}",
            self.reloads_ok.load(Ordering::Relaxed),
            self.reloads_failed.load(Ordering::Relaxed)
        );
        self.latency.render(
            &mut out,
            "waf_proxy_request_duration_seconds",
            "Time from request head to the end of the response.",
        );
        self.waf_time.render(
            &mut out,
            "waf_proxy_waf_duration_seconds",
            "Time spent in WAF inspection per request.",
        );
        self.upstream_time.render(
            &mut out,
            "waf_proxy_upstream_duration_seconds",
            "Time to the upstream response head.",
        );
        self.ml_score.render(
            &mut out,
            "waf_proxy_ml_score",
            "ML detector score per scored request (0 benign .. 1 attack).",
        );
        out.push_str(extra);
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
