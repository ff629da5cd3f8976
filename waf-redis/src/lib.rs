//! Fleet-wide state for `waf-core`'s native policy: rate limits, bans, scores, waiting
//! rooms and sign-in that hold across every node of a fleet, kept in Redis, Valkey or a
//! Redis Cluster.
//!
//! # Overview
//!
//! `waf-core` keeps its counters and bans behind one small trait,
//! [`waf_core::policy::Store`], and does no I/O. This crate is the host side of that seam:
//! a [`Fleet`] owns one connection to Redis and one background thread; each policy
//! (a proxy host, a middleware) gets a [`FleetStore`] from it, which the protections use
//! like any store.
//!
//! It is **local-first** (`DESIGN.md` "State and fleets"): no request waits on Redis. Every
//! decision is taken on local state, in memory; the thread reconciles that state with
//! Redis every `interval` (default 100 ms) in batches: one pipeline round per interval (one
//! pipeline per Cluster slot), whatever the request rate.
//!
//! ```no_run
//! use waf_redis::{Fleet, FleetConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = FleetConfig::new(vec!["redis://127.0.0.1:6379".into()]);
//! config.interval = std::time::Duration::from_millis(50);
//! let fleet = Fleet::start(config)?;
//! let policy: waf_core::policy::PolicyConfig = toml::from_str(
//!     "[[rate_limit]]\nname = \"all\"\nrequests = 100\n[bans]\nttl_secs = 600\n",
//! )?;
//! let waf = waf_core::Waf::builder()
//!     .policy(policy)
//!     .policy_store(fleet.store("my-app"))
//!     .build()?;
//! # let _ = waf; Ok(())
//! # }
//! ```
//!
//! # What is shared
//!
//! - **Rate limits** (every `[[rate_limit]]`): each bucket's GCRA state. A node sends the
//!   requests it counted, Redis adds them to the fleet's bucket (a Lua script), and the
//!   node charges its local bucket with what the others counted ([`sync`] explains the
//!   arithmetic). Over-admission in one interval becomes debt that the bucket pays back,
//!   so the fleet's long-run rate is the limit.
//! - **Bans** (`[bans]`, from scoring or the admin API) and unbans: published in the next
//!   round, with a version counter every node reads each round; a ban made on one node is
//!   enforced on every node within `interval + round trip` (well under the 1 s bound).
//!   A ban's expiry needs no message: every copy ends at the same time.
//! - **Behaviour scores** (`[scoring]`): each node sends the points it added, Redis keeps
//!   the fleet's decaying sum, and the node that sees it cross the threshold bans (a shared
//!   ban) and resets it. The streak of consecutive 4xx answers stays per node.
//! - A key this node changed within the last 2 s is *watched*: every round also fetches the
//!   fleet's view of it, so that a client active here sees what the other nodes added
//!   before its next request, not only after this node's next change.
//! - **Waiting rooms** (`[[gates.waiting_room]]`): one line for the whole fleet, in
//!   arrival order, and at most `capacity` visitors in, counted over every node. Redis
//!   holds the line and the places and only Redis calls a visitor in (one Lua script per
//!   room and round); each node answers its requests from a mirror of what the rounds said
//!   ([`line`] has the details, and what happens while Redis is down: nobody new is let
//!   in, those in stay in).
//! - **Email-code sign-in** (`[gates.sign_in]`): the codes sent (as keyed hashes), their
//!   wrong attempts, lockouts, the per-address and per-IP counters, and sign-out
//!   revocations. These are broadcast: a code asked for through one node must be known to
//!   whichever node it is posted to, so every round sends this node's changes and reads
//!   everyone's since its last read, in one Lua script per namespace; attempts add up in
//!   Redis, a used code is consumed once there, and every node knows a change within
//!   `2 × (interval + round trip)` ([`record`] has the merge rules and the brute-force
//!   bound that window gives).
//! - **Not shared**: lists, geo and reputation data (configuration, not state: give every
//!   node the same).
//!
//! # Accuracy
//!
//! With `n` nodes, a limit of `r` requests per second with burst `b`, a reconciliation
//! interval `τ` and a round trip `ρ`, the requests a client spreading over the nodes gets
//! through in any window of `W` seconds, once the first burst has been paid back (after
//! `(n−1)·b/r` seconds), are
//!
//! ```text
//! A(W) ≤ b + r·W + (n−1)·r·(τ + ρ)        A(W) ≥ r·W − (n−1)·r·(τ + ρ)
//! ```
//!
//! so the relative error is at most `(n−1)·(τ+ρ)/W`: 2 × 0.051 / 5 = 2 % for three nodes,
//! `τ` = 50 ms and a 5 s window. From cold, fresh buckets on `n` nodes let up to
//! `n·b` through at once (`(n−1)·b` too many), which the buckets then pay back. A client
//! that switches to a node it has not used for a while can get one burst there before the
//! next round charges it. Clock skew between nodes moves a bucket by the skew (one Lua
//! script compares the node's clock with the fleet's TAT): keep the nodes on NTP.
//!
//! # Cost
//!
//! One round per interval: a `GET` of the ban-list version, one `EVAL` per bucket or score
//! changed or watched, the ban changes, one `EVAL` for the sign-in records of a namespace
//! with sign-in (its changes, and the read of everyone's); a node sends about `(1 + keys active within 2 s) / τ`
//! commands per second, whatever its request rate, at most
//! [`DEFAULT_MAX_KEYS_PER_SYNC`] keys a round (the rest wait a round).
//!
//! # Failure policy
//!
//! Redis down or slow (a round not answered within `timeout`, default 250 ms): every node
//! goes on deciding with its local state, logs one warning per outage (and one when Redis
//! is back), counts in [`FleetStats`] (the proxy exports them), and reconnects with
//! exponential backoff from 100 ms to 5 s. What was counted and banned meanwhile stays
//! pending and is sent when Redis is back; bans the fleet lost (Redis restarted empty) are
//! republished. While cut off, [`CutOff`] chooses: `Local` (default) enforces each limit on
//! local traffic alone, `Share` enforces `limit / nodes` per node so the fleet as a whole
//! stays within the limit. No request ever fails or waits because of Redis.
//!
//! # Crate features
//!
//! None; the `redis` client is built with tokio and Cluster support. The background thread
//! runs its own current-thread tokio runtime, so any host (tokio, actix, a C host) can use
//! a [`Fleet`].

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod config;
pub mod line;
pub mod record;
mod store;
pub mod sync;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub use config::{
    CutOff, FleetConfig, FleetError, DEFAULT_INTERVAL_MS, DEFAULT_LOCAL_KEYS,
    DEFAULT_MAX_KEYS_PER_SYNC, DEFAULT_MAX_PENDING_KEYS, DEFAULT_TAG_BUCKETS, DEFAULT_TIMEOUT_MS,
    MAX_BACKOFF_MS, MAX_INTERVAL_MS, MAX_NODES, MIN_BACKOFF_MS, MIN_INTERVAL_MS,
};
pub use line::DEFAULT_MAX_LINE_VISITORS;
pub use store::FleetStore;

use store::Status;

/// Counters of the reconciliation, for metrics.
#[derive(Debug, Default)]
struct Stats {
    rounds: AtomicU64,
    failures: AtomicU64,
    outages: AtomicU64,
    connects: AtomicU64,
    commands: AtomicU64,
}

/// A snapshot of a fleet's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStats {
    /// Whether the last round succeeded.
    pub connected: bool,
    /// Rounds that succeeded.
    pub rounds: u64,
    /// Connection attempts and rounds that failed.
    pub failures: u64,
    /// Times Redis went from reachable (or never reached) to unreachable.
    pub outages: u64,
    /// Connections made (the first and every reconnection).
    pub connects: u64,
    /// Redis commands sent (a script counts as one; Redis's `INFO commandstats` also
    /// counts the commands a script runs).
    pub commands: u64,
    /// Changes kept local because [`DEFAULT_MAX_PENDING_KEYS`] keys were already pending
    /// (a flood of new clients while Redis was down).
    pub dropped: u64,
}

/// What the handle and the thread share.
#[derive(Debug)]
struct Shared {
    config: FleetConfig,
    status: Arc<Status>,
    stats: Stats,
    stores: Mutex<Vec<Weak<FleetStore>>>,
}

impl Shared {
    fn live_stores(&self) -> Vec<Arc<FleetStore>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        stores.retain(|w| w.strong_count() > 0);
        stores.iter().filter_map(Weak::upgrade).collect()
    }
}

/// One fleet: the Redis connection, the reconciliation thread, and the stores it keeps in
/// step. Cheap to clone; the thread stops when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Fleet {
    shared: Arc<Shared>,
}

impl Fleet {
    /// Checks `config` and starts the reconciliation thread. Returns at once: the first
    /// connection is made in the background (until it succeeds, the stores are cut off).
    pub fn start(config: FleetConfig) -> Result<Fleet, FleetError> {
        config.validate()?;
        let weight = match config.cut_off {
            CutOff::Share => u64::from(config.nodes),
            CutOff::Local => 1,
        };
        let shared = Arc::new(Shared {
            status: Arc::new(Status {
                connected: AtomicBool::new(false),
                cut_off_weight: weight,
            }),
            stats: Stats::default(),
            stores: Mutex::new(Vec::new()),
            config,
        });
        let weak = Arc::downgrade(&shared);
        let cfg = shared.config.clone();
        let status = shared.status.clone();
        std::thread::Builder::new()
            .name("waf-fleet".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot start the fleet runtime: state stays local");
                        return;
                    }
                };
                rt.block_on(sync::run(weak, cfg));
                status.connected.store(false, Ordering::Relaxed);
            })
            .map_err(|e| FleetError::Thread(e.to_string()))?;
        Ok(Fleet { shared })
    }

    /// The store of `namespace` (a host, an application): the same store for the same
    /// name while it is in use, so a reload that builds a new `Waf` keeps its state.
    /// Namespaces are separate in Redis too: two policies never share a bucket.
    pub fn store(&self, namespace: &str) -> Arc<FleetStore> {
        let mut stores = self.shared.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = stores
            .iter()
            .filter_map(Weak::upgrade)
            .find(|s| s.namespace() == namespace)
        {
            return s;
        }
        let s = Arc::new(FleetStore::new(
            namespace.to_string(),
            self.shared.config.local_keys,
            self.shared.status.clone(),
        ));
        stores.push(Arc::downgrade(&s));
        s
    }

    /// The counters now.
    pub fn stats(&self) -> FleetStats {
        let s = &self.shared.stats;
        FleetStats {
            connected: self.shared.status.connected.load(Ordering::Relaxed),
            rounds: s.rounds.load(Ordering::Relaxed),
            failures: s.failures.load(Ordering::Relaxed),
            outages: s.outages.load(Ordering::Relaxed),
            connects: s.connects.load(Ordering::Relaxed),
            commands: s.commands.load(Ordering::Relaxed),
            dropped: self
                .shared
                .live_stores()
                .iter()
                .map(|s| s.dropped.load(Ordering::Relaxed))
                .sum(),
        }
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &FleetConfig {
        &self.shared.config
    }
}
