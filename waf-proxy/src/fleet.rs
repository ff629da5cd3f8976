//! `[state]`: rate limits and bans shared by a fleet of proxies through Redis, Valkey or a
//! Redis Cluster ([`waf_redis`]).
//!
//! ```toml
//! [state]
//! redis = ["redis://10.0.0.5:7000", "redis://10.0.0.6:7000"]   # one URL, or cluster seeds
//! cluster = true
//! interval_ms = 50          # reconcile every 50 ms (10..=1000, default 100)
//! timeout_ms = 250          # a round slower than this counts as Redis down (default 250)
//! cut_off = "share"         # while Redis is down: "local" (default) or "share"
//! nodes = 3                 # the fleet's size, for "share": limit / 3 per node
//! prefix = "waf"            # of every Redis key (default "waf")
//! ```
//!
//! Each host's policy state lives in the fleet's store for the host's label (its first
//! name), so every proxy with the same config shares each host's buckets, bans, waiting
//! rooms (one line and one count of visitors in for the fleet) and sign-in (codes, attempts,
//! lockouts, rate counters, sign-out revocations: a code sent by one proxy signs in through
//! any other, `waf_redis::record`). The
//! decisions stay local: no request waits on Redis (see the `waf_redis` crate docs for the
//! accuracy and the failure policy). `[state]` is read at start only; a reload that changes
//! it logs that a restart is needed. `/metrics` has `waf_proxy_fleet_*`.

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use waf_redis::{
    CutOff, Fleet, FleetConfig, FleetError, MAX_INTERVAL_MS, MAX_NODES, MIN_INTERVAL_MS,
};

use crate::config::{line_col, ConfigError};

/// `[state]` as written. Unknown keys are errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    /// One URL, or a list (cluster seed nodes).
    pub redis: Spanned<Urls>,
    /// Redis Cluster (default false).
    #[serde(default)]
    pub cluster: Option<Spanned<bool>>,
    /// Reconciliation interval in ms (default 100).
    #[serde(default)]
    pub interval_ms: Option<Spanned<u64>>,
    /// Longest round in ms (default 250).
    #[serde(default)]
    pub timeout_ms: Option<Spanned<u64>>,
    /// `"local"` (default) or `"share"`.
    #[serde(default)]
    pub cut_off: Option<Spanned<String>>,
    /// Nodes in the fleet (for `cut_off = "share"`).
    #[serde(default)]
    pub nodes: Option<Spanned<u32>>,
    /// Key prefix (default `"waf"`).
    #[serde(default)]
    pub prefix: Option<Spanned<String>>,
}

/// `redis = "url"` or `redis = ["url", ...]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Urls {
    /// One URL.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// Checks `[state]` (spans into `text`); `Ok(None)` when there is none. `shares`: some
/// host has rate limits, bans, a waiting room or sign-in (otherwise `[state]` would have no
/// effect).
pub fn validate(
    path: &Path,
    text: &str,
    raw: Option<RawState>,
    shares: bool,
) -> Result<Option<FleetConfig>, Vec<ConfigError>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let mut errs: Vec<(Range<usize>, String)> = Vec::new();
    let redis_span = raw.redis.span();
    let servers = match raw.redis.into_inner() {
        Urls::One(u) => vec![u],
        Urls::Many(v) => v,
    };
    let mut c = FleetConfig::new(servers);
    if !shares {
        errs.push((
            redis_span.clone(),
            "no host has a rate limit, bans or a waiting room, so there is nothing to share".into(),
        ));
    }
    if let Some(v) = &raw.cluster {
        c.cluster = *v.get_ref();
    }
    if let Some(v) = &raw.interval_ms {
        let ms = *v.get_ref();
        if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
            errs.push((v.span(), FleetError::Interval(ms).to_string()));
        }
        c.interval = Duration::from_millis(ms);
    }
    if let Some(v) = &raw.timeout_ms {
        let ms = *v.get_ref();
        if ms == 0 || ms > 10_000 {
            errs.push((v.span(), FleetError::Timeout(ms).to_string()));
        }
        c.timeout = Duration::from_millis(ms);
    }
    if let Some(v) = &raw.prefix {
        let p = v.get_ref();
        if p.is_empty() || p.contains(['{', '}']) {
            errs.push((v.span(), FleetError::Prefix(p.clone()).to_string()));
        }
        c.prefix = p.clone();
    }
    if let Some(v) = &raw.cut_off {
        match v.get_ref().as_str() {
            "local" => c.cut_off = CutOff::Local,
            "share" => c.cut_off = CutOff::Share,
            other => errs.push((
                v.span(),
                format!("cut_off {other:?}: expected \"local\" or \"share\""),
            )),
        }
    }
    match (&raw.nodes, c.cut_off) {
        (Some(n), CutOff::Share) => {
            let nodes = *n.get_ref();
            if !(2..=MAX_NODES).contains(&nodes) {
                errs.push((
                    n.span(),
                    format!("nodes {nodes} is outside 2..={MAX_NODES}"),
                ));
            }
            c.nodes = nodes;
        }
        (Some(n), _) => errs.push((
            n.span(),
            "nodes has no effect unless cut_off = \"share\"".into(),
        )),
        (None, CutOff::Share) => errs.push((
            raw.cut_off
                .as_ref()
                .map_or(redis_span.clone(), |v| v.span()),
            "cut_off = \"share\" needs nodes (the fleet's size)".into(),
        )),
        (None, _) => {}
    }
    if errs.is_empty() {
        // What is left: the URLs, and their count against `cluster`.
        if let Err(e) = c.validate() {
            errs.push((redis_span, e.to_string()));
        }
    }
    if errs.is_empty() {
        return Ok(Some(c));
    }
    Err(errs
        .into_iter()
        .map(|(span, m)| {
            let (line, col) = line_col(text, span.start);
            ConfigError {
                location: format!("{}:{line}:{col}", path.display()),
                message: format!("[state]: {m}"),
            }
        })
        .collect())
}

static FLEET: OnceLock<Fleet> = OnceLock::new();

/// Starts the fleet's reconciliation thread when the config has `[state]` (once per
/// process; the serving command calls it before building the state).
pub fn start(state: Option<&FleetConfig>) -> Result<(), String> {
    let Some(cfg) = state else {
        return Ok(());
    };
    if FLEET.get().is_some() {
        return Ok(());
    }
    let fleet = Fleet::start(cfg.clone()).map_err(|e| e.to_string())?;
    let _ = FLEET.set(fleet);
    eprintln!(
        "waf-proxy: fleet state on {} ({} ms)",
        cfg.servers.join(", "),
        cfg.interval.as_millis()
    );
    Ok(())
}

/// The fleet store of host `label`, when a fleet runs.
pub fn store(label: &str) -> Option<Arc<dyn waf_core::policy::Store>> {
    let s: Arc<dyn waf_core::policy::Store> = FLEET.get()?.store(label);
    Some(s)
}

/// Prometheus lines for the fleet's reconciliation.
pub fn metrics(out: &mut String) {
    let Some(f) = FLEET.get() else {
        return;
    };
    let s = f.stats();
    out.push_str(&format!(
        "# HELP waf_proxy_fleet_connected 1 while the last reconciliation with Redis succeeded.\n\
         # TYPE waf_proxy_fleet_connected gauge\n\
         waf_proxy_fleet_connected {}\n\
         # HELP waf_proxy_fleet_rounds_total Reconciliation rounds that succeeded.\n\
         # TYPE waf_proxy_fleet_rounds_total counter\n\
         waf_proxy_fleet_rounds_total {}\n\
         # HELP waf_proxy_fleet_failures_total Connection attempts and rounds that failed (Redis down or slow).\n\
         # TYPE waf_proxy_fleet_failures_total counter\n\
         waf_proxy_fleet_failures_total {}\n\
         # HELP waf_proxy_fleet_outages_total Times Redis became unreachable.\n\
         # TYPE waf_proxy_fleet_outages_total counter\n\
         waf_proxy_fleet_outages_total {}\n\
         # HELP waf_proxy_fleet_commands_total Redis commands sent.\n\
         # TYPE waf_proxy_fleet_commands_total counter\n\
         waf_proxy_fleet_commands_total {}\n\
         # HELP waf_proxy_fleet_dropped_total Changes kept local because too many keys were pending.\n\
         # TYPE waf_proxy_fleet_dropped_total counter\n\
         waf_proxy_fleet_dropped_total {}\n",
        u8::from(s.connected),
        s.rounds,
        s.failures,
        s.outages,
        s.commands,
        s.dropped
    ));
}
