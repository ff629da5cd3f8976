//! What a [`crate::Fleet`] is told: where Redis is, how often to reconcile, and what to do
//! while Redis cannot be reached. Every knob has a `DEFAULT_*`, and every bound is checked
//! by [`FleetConfig::validate`] before a thread is started.

use std::time::Duration;

/// Default time between two reconciliations with Redis: 100 ms. A ban made on one node is
/// enforced everywhere about one interval later; see the crate docs for how the interval
/// enters the accuracy of a rate limit.
pub const DEFAULT_INTERVAL_MS: u64 = 100;
/// Shortest interval accepted (10 ms): below it the Redis round trips of a fleet cost more
/// than they buy.
pub const MIN_INTERVAL_MS: u64 = 10;
/// Longest interval accepted (1,000 ms): a ban must hold fleet-wide within a second.
pub const MAX_INTERVAL_MS: u64 = 1_000;
/// Default longest wait for one reconciliation (connect, or one round of pipelines): 250 ms.
/// Past it Redis counts as unreachable ("slow" is "down"), the node goes on alone and
/// reconnects with backoff.
pub const DEFAULT_TIMEOUT_MS: u64 = 250;
/// First wait before a reconnection attempt; it doubles after each failure.
pub const MIN_BACKOFF_MS: u64 = 100;
/// Longest wait between two reconnection attempts.
pub const MAX_BACKOFF_MS: u64 = 5_000;
/// Default number of hash-tag buckets the rate-limit keys of one namespace are spread
/// over. Each bucket is one Cluster slot and one pipeline per interval, so 16 buckets give
/// at most 16 (concurrent) pipelines per interval and spread the load over up to 16
/// shards.
pub const DEFAULT_TAG_BUCKETS: u32 = 16;
/// Most rate-limit keys sent in one reconciliation per namespace; the rest stay pending
/// for the next one. Bounds the size of a pipeline (about 150 bytes a key) to ~1.5 MB.
pub const DEFAULT_MAX_KEYS_PER_SYNC: usize = 10_000;
/// Most keys with changes waiting to be sent, per namespace (and as many watched keys).
/// While Redis is down nothing is sent, so a flood of new clients would otherwise grow the
/// pending maps without bound; past this, changes to new keys stay local only (counted in
/// `FleetStats::dropped`). About 100 bytes a key: ~10 MB at worst.
pub const DEFAULT_MAX_PENDING_KEYS: usize = 100_000;
/// Default number of keys held in the local store of each namespace (as
/// `waf_core::limits::DEFAULT_POLICY_STATE_KEYS`).
pub const DEFAULT_LOCAL_KEYS: usize = waf_core::limits::DEFAULT_POLICY_STATE_KEYS;
/// Most nodes `nodes` may say.
pub const MAX_NODES: u32 = 1_000;

/// What a node does with its rate limits while it cannot reach Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CutOff {
    /// Keep enforcing each limit on local traffic alone (a client that spreads over `n`
    /// cut-off nodes gets up to `n` times the limit). The default: no legitimate client is
    /// refused because Redis is down.
    #[default]
    Local,
    /// Enforce `limit / nodes` on each node: the fleet as a whole stays within the limit
    /// (when the load balancer spreads evenly), at the price of refusing a client that
    /// sticks to one node earlier.
    Share,
}

/// Where Redis is and how to reconcile with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// `redis://host:port[/db]` URLs (also `rediss://` when the crate is built with TLS):
    /// one for a single server or Valkey, the seed nodes of a Redis Cluster.
    pub servers: Vec<String>,
    /// Talk to a Redis Cluster (slots, redirections) instead of a single server.
    pub cluster: bool,
    /// Time between reconciliations (default [`DEFAULT_INTERVAL_MS`]).
    pub interval: Duration,
    /// Longest wait for one reconciliation (default [`DEFAULT_TIMEOUT_MS`]).
    pub timeout: Duration,
    /// What rate limits do while Redis is unreachable (default [`CutOff::Local`]).
    pub cut_off: CutOff,
    /// How many nodes share the limits, for [`CutOff::Share`] (default 1).
    pub nodes: u32,
    /// Prefix of every Redis key, so that several fleets can share one Redis (default
    /// `"waf"`).
    pub prefix: String,
    /// Keys kept in each namespace's local store (default [`DEFAULT_LOCAL_KEYS`]).
    pub local_keys: usize,
}

impl FleetConfig {
    /// The defaults, on `servers`.
    pub fn new(servers: Vec<String>) -> FleetConfig {
        FleetConfig {
            servers,
            cluster: false,
            interval: Duration::from_millis(DEFAULT_INTERVAL_MS),
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            cut_off: CutOff::Local,
            nodes: 1,
            prefix: "waf".to_string(),
            local_keys: DEFAULT_LOCAL_KEYS,
        }
    }

    /// Checks every bound; the first problem found.
    pub fn validate(&self) -> Result<(), FleetError> {
        if self.servers.is_empty() {
            return Err(FleetError::NoServer);
        }
        if !self.cluster && self.servers.len() > 1 {
            return Err(FleetError::ManyServers(self.servers.len()));
        }
        for s in &self.servers {
            redis::Client::open(s.as_str()).map_err(|e| FleetError::Url {
                url: s.clone(),
                reason: e.to_string(),
            })?;
        }
        let ms = self.interval.as_millis() as u64;
        if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
            return Err(FleetError::Interval(ms));
        }
        let t = self.timeout.as_millis() as u64;
        if t == 0 || t > 10_000 {
            return Err(FleetError::Timeout(t));
        }
        if !(1..=MAX_NODES).contains(&self.nodes) {
            return Err(FleetError::Nodes(self.nodes));
        }
        if self.cut_off == CutOff::Share && self.nodes < 2 {
            return Err(FleetError::ShareAlone);
        }
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(FleetError::Prefix(self.prefix.clone()));
        }
        if self.local_keys == 0 {
            return Err(FleetError::LocalKeys);
        }
        Ok(())
    }
}

/// A [`FleetConfig`] that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetError {
    /// No Redis URL.
    #[error("no redis server given")]
    NoServer,
    /// Several URLs without `cluster`.
    #[error(
        "{0} redis servers given: several servers are the seeds of a cluster (set cluster = true)"
    )]
    ManyServers(usize),
    /// A URL the client cannot parse.
    #[error("{url:?} is not a redis URL: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// An interval out of bounds (milliseconds).
    #[error("interval {0} ms is outside {MIN_INTERVAL_MS}..={MAX_INTERVAL_MS} ms")]
    Interval(u64),
    /// A timeout out of bounds (milliseconds).
    #[error("timeout {0} ms is outside 1..=10000 ms")]
    Timeout(u64),
    /// A node count out of bounds.
    #[error("nodes {0} is outside 1..={MAX_NODES}")]
    Nodes(u32),
    /// `cut_off = share` with one node: the share is the whole limit.
    #[error("cut_off = \"share\" divides each limit by `nodes`, which must then be at least 2")]
    ShareAlone,
    /// An empty prefix, or one with a hash-tag brace.
    #[error("prefix {0:?} must be non-empty and hold no '{{' or '}}'")]
    Prefix(String),
    /// `local_keys` is 0.
    #[error("local_keys must be at least 1")]
    LocalKeys,
    /// The reconciliation thread could not be started.
    #[error("cannot start the fleet thread: {0}")]
    Thread(String),
}
