//! The native policy's state shared through Redis by every process of a C host (every
//! nginx worker) and every host of a fleet: `waf_builder_fleet`.
//!
//! It is waf-redis's store, the one waf-proxy's `[state]` uses: rate-limit buckets, bans,
//! behaviour scores, waiting rooms, and the sign-in's codes, attempt counts, lockouts, rate
//! counters and sign-out revocations. Every decision stays local (the store answers from
//! its in-memory mirror, and one background thread reconciles the mirror with Redis every
//! interval), so no request ever waits on Redis.
//!
//! # Fork
//!
//! nginx builds its engines in the master and forks the workers, and a thread does not
//! survive `fork`. So `waf_builder_fleet` only checks the settings; the engine's store is
//! a [`LazyFleetStore`] that starts the fleet (its thread and connection) **in each
//! process** on the first transaction a worker makes (whatever the request: a worker's
//! mirror of the fleet's sign-in records must be filled before a code is posted to it). It learns of a fork through a
//! `pthread_atfork` child handler, which bumps a generation counter; a store made in
//! another generation (the parent's) is forgotten, never used or dropped. Within a process
//! every engine with the same settings shares one fleet (one thread, one connection), and
//! engines with the same namespace share one store.
//!
//! The prefixes the policy declares at build time (in the master) are replayed into each
//! process's store when it starts.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError, RwLock};
use std::time::Duration;

use waf_core::policy::{Cell, LineOp, LineSpec, LineStatus, MemoryStore, Store, ValueKind};
use waf_redis::{CutOff, Fleet, FleetConfig, FleetStore};

use crate::error::set_last_error;
use crate::types::{utf8, WafStatus};

/// `waf_fleet.cut_off`: while Redis is unreachable, each process enforces every limit on
/// its own traffic (the default).
pub const WAF_FLEET_CUT_OFF_LOCAL: u32 = 0;
/// `waf_fleet.cut_off`: while Redis is unreachable, each process enforces `limit / nodes`.
pub const WAF_FLEET_CUT_OFF_SHARE: u32 = 1;

/// Most Redis URLs `waf_fleet.servers` may hold.
pub const WAF_FLEET_MAX_SERVERS: usize = 64;

/// Where the fleet's Redis is and how to reconcile with it (`waf_builder_fleet`). Strings
/// are NUL-terminated UTF-8, borrowed for the call (the library copies them). A zero
/// number means the default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WafFleet {
    /// `server_count` Redis URLs (`redis://host:port[/db]`): one server, or the seeds of a
    /// Redis Cluster.
    pub servers: *const *const c_char,
    /// How many URLs `servers` holds (1..=WAF_FLEET_MAX_SERVERS).
    pub server_count: usize,
    /// Talk to a Redis Cluster (required for more than one URL).
    pub cluster: bool,
    /// The namespace of this engine's state in Redis: engines (and hosts) with the same
    /// namespace share their buckets, bans and waiting rooms. Non-empty.
    pub namespace_name: *const c_char,
    /// Prefix of every Redis key, or NULL for `"waf"`.
    pub prefix: *const c_char,
    /// Time between reconciliations in milliseconds (10..=1000; 0: 100).
    pub interval_ms: u32,
    /// Longest round in milliseconds, past which Redis counts as down (1..=10000; 0: 250).
    pub timeout_ms: u32,
    /// `WAF_FLEET_CUT_OFF_LOCAL` or `WAF_FLEET_CUT_OFF_SHARE`.
    pub cut_off: u32,
    /// Processes sharing the limits, for `WAF_FLEET_CUT_OFF_SHARE` (0: 1).
    pub nodes: u32,
}

/// Checks `f` and makes the configuration and namespace it describes (nothing connects).
///
/// # Safety
/// The pointers of `f` are NULL or as its fields say.
pub(crate) unsafe fn config(f: &WafFleet) -> Result<(FleetConfig, String), WafStatus> {
    let invalid = |m: String| {
        set_last_error(m);
        WafStatus::InvalidArgument
    };
    if f.server_count == 0 || f.servers.is_null() {
        return Err(invalid("fleet: no redis server given".into()));
    }
    if f.server_count > WAF_FLEET_MAX_SERVERS {
        return Err(invalid(format!(
            "fleet: {} redis servers, at most {WAF_FLEET_MAX_SERVERS}",
            f.server_count
        )));
    }
    let mut servers = Vec::with_capacity(f.server_count);
    for i in 0..f.server_count {
        // SAFETY: `servers` holds `server_count` pointers per the contract.
        let p = unsafe { *f.servers.add(i) };
        // SAFETY: each is NULL or NUL-terminated (utf8 reports NULL).
        servers.push(unsafe { utf8(p, "servers[i]") }?.to_string());
    }
    // SAFETY: NULL or NUL-terminated.
    let namespace = unsafe { utf8(f.namespace_name, "namespace_name") }?;
    if namespace.is_empty() {
        return Err(invalid("fleet: the namespace is empty".into()));
    }
    let mut c = FleetConfig::new(servers);
    c.cluster = f.cluster;
    if !f.prefix.is_null() {
        // SAFETY: non-null and NUL-terminated.
        c.prefix = unsafe { utf8(f.prefix, "prefix") }?.to_string();
    }
    if f.interval_ms != 0 {
        c.interval = Duration::from_millis(f.interval_ms.into());
    }
    if f.timeout_ms != 0 {
        c.timeout = Duration::from_millis(f.timeout_ms.into());
    }
    c.cut_off = match f.cut_off {
        WAF_FLEET_CUT_OFF_LOCAL => CutOff::Local,
        WAF_FLEET_CUT_OFF_SHARE => CutOff::Share,
        other => return Err(invalid(format!("fleet: cut_off {other} is not 0 or 1"))),
    };
    if f.nodes != 0 {
        c.nodes = f.nodes;
    }
    c.validate().map_err(|e| invalid(format!("fleet: {e}")))?;
    Ok((c, namespace.to_string()))
}

/// The process generation: bumped in the child of every `fork` (after the handler is
/// registered, which `waf_builder_fleet` does before any engine with a fleet exists).
static GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> c_int;
}

unsafe extern "C" fn forked() {
    ffi_guard!("forked", (), {
        // One atomic add: async-signal-safe, as a child handler must be.
        GENERATION.fetch_add(1, Ordering::Relaxed);
    })
}

/// Registers the fork handler once per process (and so for its children).
pub(crate) fn watch_forks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only does an atomic add.
        let rc = unsafe { pthread_atfork(None, None, Some(forked)) };
        if rc != 0 {
            eprintln!(
                "waf: [alert] pthread_atfork failed ({rc}): the fleet may not start after fork"
            );
        }
    });
}

/// The fleets of this process, one per configuration, with the generation they started in.
static FLEETS: Mutex<Vec<(u64, FleetConfig, Fleet)>> = Mutex::new(Vec::new());

/// The fleet for `config` in this process, started now if there is none.
fn fleet(config: &FleetConfig, generation: u64) -> Result<Fleet, String> {
    let mut fleets = FLEETS.lock().unwrap_or_else(PoisonError::into_inner);
    // Fleets of the parent process: their threads are not here. Forget them (their
    // memory is the parent's copy; running their destructors here is pointless).
    let mut i = 0;
    while i < fleets.len() {
        if fleets[i].0 == generation {
            i += 1;
        } else {
            std::mem::forget(fleets.swap_remove(i));
        }
    }
    if let Some((_, _, f)) = fleets.iter().find(|(_, c, _)| c == config) {
        return Ok(f.clone());
    }
    let f = Fleet::start(config.clone()).map_err(|e| e.to_string())?;
    fleets.push((generation, config.clone(), f.clone()));
    Ok(f)
}

/// The engine's policy store (see the module docs): the fleet's store of `namespace`,
/// started on first use in each process.
pub(crate) struct LazyFleetStore {
    config: FleetConfig,
    namespace: String,
    /// What the policy declared, replayed into each process's store.
    kinds: Mutex<Vec<(Box<[u8]>, ValueKind)>>,
    /// This process's store and the generation it belongs to.
    current: RwLock<Option<(u64, Arc<dyn Store>)>>,
}

impl std::fmt::Debug for LazyFleetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyFleetStore")
            .field("namespace", &self.namespace)
            .field("servers", &self.config.servers)
            .finish()
    }
}

impl LazyFleetStore {
    pub(crate) fn new(config: FleetConfig, namespace: String) -> LazyFleetStore {
        LazyFleetStore {
            config,
            namespace,
            kinds: Mutex::new(Vec::new()),
            current: RwLock::new(None),
        }
    }

    /// Runs `f` on this process's store: one atomic load and a read lock once started
    /// (held during `f`; only the first call of a process takes the write lock).
    fn with<R>(&self, f: impl FnOnce(&dyn Store) -> R) -> R {
        let generation = GENERATION.load(Ordering::Relaxed);
        {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((g, s)) = current.as_ref() {
                if *g == generation {
                    return f(&**s);
                }
            }
        }
        f(&*self.store())
    }

    /// Starts this process's store (its fleet thread and connection) if it has none yet:
    /// called by every transaction, so that a worker reconciles from its first request on,
    /// whatever that request touches (a sign-in code posted to a worker must find the
    /// fleet's records already mirrored there).
    pub(crate) fn start(&self) {
        self.with(|_| ());
    }

    /// This process's store, started now if this process has none.
    fn store(&self) -> Arc<dyn Store> {
        let generation = GENERATION.load(Ordering::Relaxed);
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, s)) = current.as_ref() {
            if *g == generation {
                return Arc::clone(s);
            }
        }
        if let Some(stale) = current.take() {
            // The parent's store: forget it (see `fleet`).
            std::mem::forget(stale);
        }
        let store: Arc<dyn Store> = match fleet(&self.config, generation) {
            Ok(f) => {
                let s: Arc<FleetStore> = f.store(&self.namespace);
                s
            }
            Err(e) => {
                eprintln!(
                    "waf: [alert] cannot start the fleet ({e}): the policy state of this \
                     process stays local"
                );
                Arc::new(MemoryStore::new(self.config.local_keys))
            }
        };
        for (prefix, kind) in self
            .kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            store.declare(prefix, *kind);
        }
        *current = Some((generation, Arc::clone(&store)));
        store
    }
}

impl Drop for LazyFleetStore {
    fn drop(&mut self) {
        let current = self
            .current
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((g, s)) = current {
            if g != GENERATION.load(Ordering::Relaxed) {
                std::mem::forget(s);
            }
        }
    }
}

impl Store for LazyFleetStore {
    fn update(
        &self,
        key: &[u8],
        now: u64,
        f: &mut dyn FnMut(Option<Cell>) -> Option<Cell>,
    ) -> Option<Cell> {
        self.with(|s| s.update(key, now, f))
    }

    fn remove(&self, key: &[u8]) -> bool {
        self.with(|s| s.remove(key))
    }

    fn scan(&self, prefix: &[u8], now: u64, f: &mut dyn FnMut(&[u8], Cell)) {
        self.with(|s| s.scan(prefix, now, f))
    }

    fn declare(&self, prefix: &[u8], kind: ValueKind) {
        let mut kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        match kinds.iter_mut().find(|(p, _)| **p == *prefix) {
            Some(e) => e.1 = kind,
            None => kinds.push((prefix.into(), kind)),
        }
        drop(kinds);
        // A store already started in this process learns it too.
        let generation = GENERATION.load(Ordering::Relaxed);
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, s)) = current.as_ref() {
            if *g == generation {
                s.declare(prefix, kind);
            }
        }
    }

    fn line(
        &self,
        room: &[u8],
        spec: &LineSpec,
        visitor: &[u8; 16],
        op: LineOp,
        now: u64,
    ) -> LineStatus {
        self.with(|s| s.line(room, spec, visitor, op, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the fork handler does, without a fork (a test process has threads): a store
    /// started in one generation is replaced by a new, empty one in the next, with the
    /// declared prefixes, and the parent's fleet is not reused.
    #[test]
    fn a_new_generation_gets_its_own_store() {
        // A closed port: the fleet stays cut off, which is all this test needs.
        let mut config = FleetConfig::new(vec!["redis://127.0.0.1:1".into()]);
        config.interval = Duration::from_millis(10);
        let lazy = LazyFleetStore::new(config, "gen-test".into());
        lazy.declare(b"zz", ValueKind::Ban);
        let cell = Cell {
            a: 1,
            b: 2,
            expires: u64::MAX,
        };
        lazy.update(b"key", 1, &mut |_| Some(cell));
        assert_eq!(lazy.update(b"key", 1, &mut |c| c), Some(cell));
        let before = lazy.store();
        // SAFETY: the handler only bumps the counter.
        unsafe { forked() };
        let after = lazy.store();
        assert!(
            !Arc::ptr_eq(&before, &after),
            "the parent's store was reused"
        );
        assert_eq!(
            lazy.update(b"key", 1, &mut |c| c),
            None,
            "the parent's state leaked"
        );
        // The same store for the rest of the generation.
        assert!(Arc::ptr_eq(&after, &lazy.store()));
        std::mem::forget(before);
    }
}
