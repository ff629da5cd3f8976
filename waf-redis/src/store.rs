//! [`FleetStore`]: the [`Store`] the protections see. Every answer comes from a local
//! [`MemoryStore`]; on the side, the store notes what the fleet must learn (requests a
//! rate-limit bucket counted, points a score gained, bans set or lifted) for the reconciliation task
//! ([`crate::sync`]) to send, and takes back what the fleet did.
//!
//! The request path pays one extra shard lock for a counted request or a changed ban, and
//! nothing for a read; it never waits on the network.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use waf_core::policy::{Cell, LineOp, LineSpec, LineStatus, MemoryStore, Store, ValueKind};

use crate::line::{LineBatch, Lines};
use crate::record::RecOp;

/// Shards of the pending maps (as many as the local store's).
const SHARDS: usize = waf_core::policy::SHARDS;

/// Whether the fleet is reachable, shared by the task and every store of a fleet.
#[derive(Debug)]
pub(crate) struct Status {
    /// The last reconciliation succeeded.
    pub(crate) connected: AtomicBool,
    /// How many times a counted request weighs while cut off (`nodes` for
    /// [`crate::CutOff::Share`], 1 for [`crate::CutOff::Local`]).
    pub(crate) cut_off_weight: u64,
}

impl Status {
    fn weight(&self) -> u64 {
        if self.connected.load(Ordering::Relaxed) {
            1
        } else {
            self.cut_off_weight
        }
    }
}

/// A score change to publish: points added (thousandths), after a reset to zero when
/// `reset` (the client crossed the threshold and was banned).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ScoreOp {
    pub(crate) reset: bool,
    pub(crate) add: f64,
    pub(crate) half_life: u64,
}

impl ScoreOp {
    /// `self`, then `later`.
    fn then(self, later: ScoreOp) -> ScoreOp {
        if later.reset {
            later
        } else {
            ScoreOp {
                reset: self.reset,
                add: self.add + later.add,
                half_life: later.half_life,
            }
        }
    }
}

const POINTS_MASK: u64 = (1 << waf_core::policy::SCORE_POINTS_BITS) - 1;

/// The points of a score cell at `now`, in thousandths.
fn points_at(c: &Cell, now: u64, half_life: u64) -> f64 {
    let age = now.saturating_sub(c.b) as f64;
    (c.a & POINTS_MASK) as f64 * (-age / half_life.max(1) as f64 * std::f64::consts::LN_2).exp()
}

/// A ban change to publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BanOp {
    /// Set (or replace) the ban with this cell.
    Set(Cell),
    /// Lift it.
    Remove,
}

#[derive(Default)]
struct Pending {
    /// Rate-limit key -> (requests counted since the last reconciliation, interval).
    hits: HashMap<Box<[u8]>, (u64, u64)>,
    /// Ban key -> the latest change.
    bans: HashMap<Box<[u8]>, BanOp>,
    /// Score key -> what changed since the last reconciliation.
    scores: HashMap<Box<[u8]>, ScoreOp>,
    /// Keys changed here lately -> until when, and what they hold: each round also fetches
    /// the fleet's view of these, so that this node sees what the others add to a client
    /// it has just seen, before the client's next request.
    watch: HashMap<Box<[u8]>, (u64, ValueKind)>,
    /// Shared record or count key -> what changed since the last reconciliation
    /// ([`crate::record`]).
    records: HashMap<Box<[u8]>, RecOp>,
}

/// What one reconciliation takes from a store.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// `(key, requests to charge, interval)`.
    pub(crate) hits: Vec<(Box<[u8]>, u64, u64)>,
    /// Ban changes.
    pub(crate) bans: Vec<(Box<[u8]>, BanOp)>,
    /// Score changes.
    pub(crate) scores: Vec<(Box<[u8]>, ScoreOp)>,
    /// Waiting rooms' news.
    pub(crate) lines: Vec<LineBatch>,
    /// Shared records' and counts' changes.
    pub(crate) records: Vec<(Box<[u8]>, RecOp)>,
    /// The store holds shared records or counts: the round reads the fleet's changes.
    pub(crate) reads_records: bool,
}

/// A [`Store`] for one namespace (one policy: a host of the proxy, one middleware) whose
/// rate limits and bans hold for a whole fleet. Made by [`crate::Fleet::store`]; give it
/// to `WafBuilder::policy_store` (or the host's builder).
///
/// Decisions are local: a rate-limit bucket is the local GCRA bucket, charged in the
/// background with the requests the other nodes counted; a ban is the local copy of the
/// fleet's ban list; a behaviour score is the fleet's decaying sum of the points every node
/// added (the streak of 4xx answers stays per node).
pub struct FleetStore {
    pub(crate) namespace: String,
    local: MemoryStore,
    kinds: RwLock<Vec<(Box<[u8]>, ValueKind)>>,
    pending: Box<[Mutex<Pending>]>,
    hasher: RandomState,
    pub(crate) status: Arc<Status>,
    /// Requests counted locally (for the accuracy figures).
    counted: AtomicU64,
    /// Changes kept local because too many keys were pending.
    pub(crate) dropped: AtomicU64,
    /// The waiting rooms' mirrors ([`crate::line`]).
    pub(crate) lines: Lines,
}

impl fmt::Debug for FleetStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetStore")
            .field("namespace", &self.namespace)
            .field("local", &self.local)
            .finish()
    }
}

/// How long a key changed here stays watched (2 s): a client active on this node within the
/// last two seconds has its bucket and score kept in step with the fleet's every round.
pub(crate) const WATCH_NS: u64 = 2_000_000_000;

/// Pending or watched keys per shard ([`crate::DEFAULT_MAX_PENDING_KEYS`] over the shards).
const PER_SHARD: usize = crate::config::DEFAULT_MAX_PENDING_KEYS.div_ceil(SHARDS);

fn watch(p: &mut Pending, key: &[u8], now: u64, kind: ValueKind) {
    let until = now.saturating_add(WATCH_NS);
    let room = p.watch.len() < PER_SHARD;
    match p.watch.get_mut(key) {
        Some(e) => *e = (until, kind),
        None if room => {
            p.watch.insert(key.into(), (until, kind));
        }
        None => {}
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned map only means a panic elsewhere while it was held; the map itself is
    // consistent between statements.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FleetStore {
    pub(crate) fn new(namespace: String, local_keys: usize, status: Arc<Status>) -> FleetStore {
        FleetStore {
            namespace,
            local: MemoryStore::new(local_keys),
            kinds: RwLock::new(Vec::new()),
            pending: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            status,
            counted: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            lines: Lines::default(),
        }
    }

    /// The namespace this store was made for.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Whether the last reconciliation with Redis succeeded.
    pub fn is_connected(&self) -> bool {
        self.status.connected.load(Ordering::Relaxed)
    }

    fn kind_of(&self, key: &[u8]) -> Option<ValueKind> {
        let kinds = self.kinds.read().unwrap_or_else(|e| e.into_inner());
        kinds
            .iter()
            .find(|(p, _)| key.starts_with(p))
            .map(|(_, k)| *k)
    }

    /// The prefix bans are declared under, if any.
    pub(crate) fn ban_prefix(&self) -> Option<Box<[u8]>> {
        let kinds = self.kinds.read().unwrap_or_else(|e| e.into_inner());
        kinds
            .iter()
            .find(|(_, k)| *k == ValueKind::Ban)
            .map(|(p, _)| p.clone())
    }

    fn shard(&self, key: &[u8]) -> &Mutex<Pending> {
        let h = self.hasher.hash_one(key) as usize;
        &self.pending[(h >> 7) & (SHARDS - 1)]
    }

    fn note_hits(&self, key: &[u8], hits: u64, interval: u64, now: u64) {
        self.counted.fetch_add(hits, Ordering::Relaxed);
        let mut p = lock(self.shard(key));
        watch(&mut p, key, now, ValueKind::Gcra { interval });
        let room = p.hits.len() < PER_SHARD;
        match p.hits.get_mut(key) {
            Some(e) => {
                e.0 = e.0.saturating_add(hits);
                e.1 = interval;
            }
            None if room => {
                p.hits.insert(key.into(), (hits, interval));
            }
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn note_score(&self, key: &[u8], op: ScoreOp, now: u64) {
        let mut p = lock(self.shard(key));
        let half_life = op.half_life;
        watch(&mut p, key, now, ValueKind::Score { half_life });
        let room = p.scores.len() < PER_SHARD;
        match p.scores.get_mut(key) {
            Some(e) => *e = e.then(op),
            None if room => {
                p.scores.insert(key.into(), op);
            }
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The score change on `key` since the batch was taken.
    pub(crate) fn pending_score(&self, key: &[u8]) -> Option<ScoreOp> {
        lock(self.shard(key)).scores.get(key).copied()
    }

    /// Takes the fleet's score of `key` (thousandths of a point at `now`) into the local
    /// one: the fleet's, plus what was added here since the batch was taken. The streak of
    /// 4xx answers stays the node's own.
    pub(crate) fn apply_score(&self, key: &[u8], half_life: u64, fleet: f64, now: u64) {
        let since = self.pending_score(key);
        if since.is_some_and(|s| s.reset) {
            return; // reset here meanwhile: the next round tells the fleet
        }
        let target = (fleet + since.map_or(0.0, |s| s.add)).clamp(0.0, POINTS_MASK as f64) as u64;
        self.local.update(key, now, &mut |c| {
            let streak = c.map_or(0, |c| c.a & !POINTS_MASK);
            if c.is_none() && target == 0 {
                return None;
            }
            Some(Cell {
                a: target | streak,
                b: now,
                expires: now.saturating_add(half_life.saturating_mul(16)),
            })
        });
    }

    fn note_ban(&self, key: &[u8], op: BanOp) {
        lock(self.shard(key)).bans.insert(key.into(), op);
    }

    fn note_record(&self, key: &[u8], op: RecOp) {
        let mut p = lock(self.shard(key));
        let room = p.records.len() < PER_SHARD;
        match p.records.get_mut(key) {
            Some(e) => *e = e.then(op),
            None if room => {
                p.records.insert(key.into(), op);
            }
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether a shared record or count is declared (the round then reads the fleet's
    /// changes every time, [`crate::record`]).
    pub(crate) fn has_records(&self) -> bool {
        let kinds = self.kinds.read().unwrap_or_else(|e| e.into_inner());
        kinds
            .iter()
            .any(|(_, k)| matches!(k, ValueKind::Shared | ValueKind::Count))
    }

    /// Takes the fleet's value of a shared record or count (`None`: removed or expired)
    /// into the local store, with this node's changes since the batch was taken on top.
    pub(crate) fn apply_record(&self, key: &[u8], fleet: Option<Cell>, now: u64) {
        if !matches!(
            self.kind_of(key),
            Some(ValueKind::Shared | ValueKind::Count)
        ) {
            return; // not (or no longer) declared here
        }
        let fleet = fleet.filter(|c| c.expires > now);
        let pending = lock(self.shard(key)).records.get(key).copied();
        let value = match pending {
            None => fleet,
            Some(op) => match op.over(fleet) {
                Some(v) => v,
                None => return,
            },
        };
        match value {
            Some(v) => {
                self.local.update(key, now, &mut |_| Some(v));
            }
            None => {
                self.local.remove(key);
            }
        }
    }

    /// Takes what is pending (at most `max_keys` rate keys; the rest waits), and a request
    /// for the fleet's view of each key watched at `now` that has no change of its own.
    pub(crate) fn take(&self, max_keys: usize, now: u64) -> Batch {
        let mut b = Batch {
            lines: self.lines.take(now),
            reads_records: self.has_records(),
            ..Batch::default()
        };
        for shard in self.pending.iter() {
            let mut p = lock(shard);
            let p = &mut *p;
            p.watch.retain(|_, (until, _)| *until > now);
            for (k, (_, kind)) in &p.watch {
                match *kind {
                    ValueKind::Gcra { interval } if !p.hits.contains_key(k) => {
                        p.hits.insert(k.clone(), (0, interval));
                    }
                    ValueKind::Score { half_life } if !p.scores.contains_key(k) => {
                        p.scores.insert(
                            k.clone(),
                            ScoreOp {
                                reset: false,
                                add: 0.0,
                                half_life,
                            },
                        );
                    }
                    _ => {}
                }
            }
            b.bans.extend(p.bans.drain());
            b.scores.extend(p.scores.drain());
            if b.records.len() < max_keys {
                if p.records.len() <= max_keys - b.records.len() {
                    b.records.extend(p.records.drain());
                } else {
                    let room = max_keys - b.records.len();
                    let keys: Vec<Box<[u8]>> = p.records.keys().take(room).cloned().collect();
                    for k in keys {
                        if let Some(op) = p.records.remove(&k) {
                            b.records.push((k, op));
                        }
                    }
                }
            }
            if b.hits.len() >= max_keys {
                continue;
            }
            if p.hits.len() <= max_keys - b.hits.len() {
                b.hits.extend(p.hits.drain().map(|(k, (n, i))| (k, n, i)));
            } else {
                let room = max_keys - b.hits.len();
                let keys: Vec<Box<[u8]>> = p.hits.keys().take(room).cloned().collect();
                for k in keys {
                    if let Some((n, i)) = p.hits.remove(&k) {
                        b.hits.push((k, n, i));
                    }
                }
            }
        }
        b
    }

    /// Puts back a batch that could not be sent; what changed since wins.
    pub(crate) fn restore(&self, batch: Batch) {
        self.lines.restore(batch.lines);
        for (k, n, i) in batch.hits {
            let mut p = lock(self.shard(&k));
            let e = p.hits.entry(k).or_insert((0, i));
            e.0 = e.0.saturating_add(n);
        }
        for (k, op) in batch.bans {
            let mut p = lock(self.shard(&k));
            p.bans.entry(k).or_insert(op);
        }
        for (k, op) in batch.scores {
            let mut p = lock(self.shard(&k));
            match p.scores.get_mut(&k) {
                Some(later) => *later = op.then(*later),
                None => {
                    p.scores.insert(k, op);
                }
            }
        }
        for (k, op) in batch.records {
            let mut p = lock(self.shard(&k));
            match p.records.get_mut(&k) {
                Some(later) => *later = op.then(*later),
                None => {
                    p.records.insert(k, op);
                }
            }
        }
    }

    /// Requests counted on `key` since the batch was taken.
    pub(crate) fn pending_hits(&self, key: &[u8]) -> u64 {
        lock(self.shard(key)).hits.get(key).map_or(0, |e| e.0)
    }

    /// Whether a ban change on `key` waits to be published.
    fn ban_pending(&self, key: &[u8]) -> bool {
        lock(self.shard(key)).bans.contains_key(key)
    }

    /// The local TAT of `key` (0 when none).
    pub(crate) fn local_tat(&self, key: &[u8], now: u64) -> u64 {
        self.local.update(key, now, &mut |c| c).map_or(0, |c| c.a)
    }

    /// Takes the fleet's TAT for `key` into the local bucket: the bucket is at least as
    /// full as the fleet's, plus what was counted here since the batch was taken.
    pub(crate) fn apply_tat(&self, key: &[u8], interval: u64, fleet_tat: u64, now: u64) {
        let since = self.pending_hits(key);
        let target = fleet_tat.saturating_add(since.saturating_mul(interval));
        if target <= now {
            return;
        }
        self.local.update(key, now, &mut |c| match c {
            Some(c) if c.a >= target => Some(c),
            _ => Some(Cell {
                a: target,
                b: 0,
                expires: target.saturating_add(1),
            }),
        });
    }

    /// Makes the local bans the fleet's `bans` (plus the changes not yet published).
    pub(crate) fn apply_bans(&self, bans: &[(Vec<u8>, Cell)], now: u64) {
        let Some(prefix) = self.ban_prefix() else {
            return;
        };
        let mut remote = HashSet::new();
        for (key, cell) in bans {
            if !key.starts_with(&prefix) || cell.expires <= now {
                continue;
            }
            remote.insert(key.as_slice());
            if self.ban_pending(key) {
                continue;
            }
            let r = *cell;
            self.local.update(key, now, &mut |c| {
                Some(match c {
                    Some(c) if c == r => c,
                    // The fleet's copy is the truth: a later ban elsewhere replaces ours.
                    _ => r,
                })
            });
        }
        let mut gone = Vec::new();
        self.local.scan(&prefix, now, &mut |k, _| {
            if !remote.contains(k) {
                gone.push(k.to_vec());
            }
        });
        for k in gone {
            if !self.ban_pending(&k) {
                self.local.remove(&k);
            }
        }
    }

    /// Every local ban (republished when Redis lost its data).
    pub(crate) fn local_bans(&self, now: u64) -> Vec<(Vec<u8>, Cell)> {
        let Some(prefix) = self.ban_prefix() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        self.local
            .scan(&prefix, now, &mut |k, c| out.push((k.to_vec(), c)));
        out
    }

    /// Requests counted locally on shared rate limits since start.
    pub fn counted(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }
}

impl Store for FleetStore {
    fn update(
        &self,
        key: &[u8],
        now: u64,
        f: &mut dyn FnMut(Option<Cell>) -> Option<Cell>,
    ) -> Option<Cell> {
        match self.kind_of(key) {
            Some(ValueKind::Gcra { interval }) => {
                let interval = interval.max(1);
                let weight = self.status.weight();
                let mut hits = 0;
                let out = self.local.update(key, now, &mut |c| {
                    let base = c.map_or(0, |c| c.a).max(now);
                    let mut new = f(c);
                    if let Some(n) = &mut new {
                        if n.a > base && c.is_none_or(|c| c.a != n.a) {
                            let advance = n.a - base;
                            hits = advance.div_ceil(interval);
                            if weight > 1 {
                                // Cut off with `share`: each request weighs `nodes`, so
                                // this node alone allows `limit / nodes`.
                                n.a = base.saturating_add(advance.saturating_mul(weight));
                                n.expires = n.a.saturating_add(1);
                            }
                        }
                    }
                    new
                });
                if hits > 0 {
                    self.note_hits(key, hits, interval, now);
                }
                out
            }
            Some(ValueKind::Score { half_life }) => {
                let mut op = None;
                let out = self.local.update(key, now, &mut |c| {
                    let before = c.map_or(0.0, |c| points_at(&c, now, half_life));
                    let new = f(c);
                    let after = new.map_or(0.0, |n| points_at(&n, now, half_life));
                    if after > before + 0.5 {
                        op = Some(ScoreOp {
                            reset: false,
                            add: after - before,
                            half_life,
                        });
                    } else if after + 0.5 < before {
                        // Only a ban resets a score: start the fleet's again from `after`.
                        op = Some(ScoreOp {
                            reset: true,
                            add: after,
                            half_life,
                        });
                    }
                    new
                });
                if let Some(op) = op {
                    self.note_score(key, op, now);
                }
                out
            }
            Some(ValueKind::Ban) => {
                let mut changed = None;
                let out = self.local.update(key, now, &mut |c| {
                    let new = f(c);
                    if new != c {
                        changed = Some(new);
                    }
                    new
                });
                if let Some(new) = changed {
                    self.note_ban(key, new.map_or(BanOp::Remove, BanOp::Set));
                }
                out
            }
            Some(kind @ (ValueKind::Shared | ValueKind::Count)) => {
                let mut op = None;
                let out = self.local.update(key, now, &mut |c| {
                    let new = f(c);
                    op = RecOp::of(kind, c, new);
                    new
                });
                if let Some(op) = op {
                    self.note_record(key, op);
                }
                out
            }
            _ => self.local.update(key, now, f),
        }
    }

    fn remove(&self, key: &[u8]) -> bool {
        match self.kind_of(key) {
            Some(ValueKind::Ban) => {
                let was = self.local.remove(key);
                self.note_ban(key, BanOp::Remove);
                was
            }
            Some(kind @ ValueKind::Shared) => {
                let mut op = None;
                // The removed record's `a` makes the removal conditional in Redis.
                self.local.update(key, 0, &mut |c| {
                    op = RecOp::of(kind, c, None);
                    None
                });
                if let Some(op) = op {
                    self.note_record(key, op);
                }
                op.is_some()
            }
            _ => self.local.remove(key),
        }
    }

    fn scan(&self, prefix: &[u8], now: u64, f: &mut dyn FnMut(&[u8], Cell)) {
        self.local.scan(prefix, now, f)
    }

    fn line(
        &self,
        room: &[u8],
        spec: &LineSpec,
        visitor: &[u8; 16],
        op: LineOp,
        now: u64,
    ) -> LineStatus {
        self.lines.line(room, spec, visitor, op, now)
    }

    fn declare(&self, prefix: &[u8], kind: ValueKind) {
        let mut kinds = self.kinds.write().unwrap_or_else(|e| e.into_inner());
        match kinds.iter_mut().find(|(p, _)| **p == *prefix) {
            Some(e) => e.1 = kind,
            None => kinds.push((prefix.into(), kind)),
        }
        // Longest prefix first, so a more specific declaration wins.
        kinds.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(weight: u64, connected: bool) -> FleetStore {
        let status = Arc::new(Status {
            connected: AtomicBool::new(connected),
            cut_off_weight: weight,
        });
        let s = FleetStore::new("t".into(), 1000, status);
        s.declare(b"r\0\0", ValueKind::Gcra { interval: 10 });
        s.declare(b"b", ValueKind::Ban);
        s.declare(
            b"s",
            ValueKind::Score {
                half_life: 1_000_000,
            },
        );
        s
    }

    fn hit(s: &FleetStore, key: &[u8], now: u64) {
        s.update(key, now, &mut |c| {
            let tat = c.map_or(0, |c| c.a).max(now) + 10;
            Some(Cell {
                a: tat,
                b: 0,
                expires: tat + 1,
            })
        });
    }

    #[test]
    fn counted_requests_are_pending_until_taken() {
        let s = store(1, true);
        for _ in 0..5 {
            hit(&s, b"r\0\0k", 1000);
        }
        // A read counts nothing.
        s.update(b"r\0\0k", 1000, &mut |c| c);
        let b = s.take(100, 1000);
        assert_eq!(b.hits, vec![(b"r\0\0k".to_vec().into_boxed_slice(), 5, 10)]);
        // Then, while watched, a request for the fleet's view (no requests to charge).
        assert_eq!(
            s.take(100, 1000).hits,
            vec![(b"r\0\0k".to_vec().into_boxed_slice(), 0, 10)]
        );
        assert!(s.take(100, 1000 + WATCH_NS).hits.is_empty());
        s.restore(b);
        hit(&s, b"r\0\0k", 1000);
        assert_eq!(s.pending_hits(b"r\0\0k"), 6);
    }

    #[test]
    fn the_fleets_tat_fills_the_local_bucket() {
        let s = store(1, true);
        hit(&s, b"r\0\0k", 1000);
        let _ = s.take(100, 1000);
        hit(&s, b"r\0\0k", 1000); // during the round trip
        s.apply_tat(b"r\0\0k", 10, 1500, 1000);
        assert_eq!(s.local_tat(b"r\0\0k", 1000), 1510);
        // A fleet view behind the local one changes nothing.
        s.apply_tat(b"r\0\0k", 10, 1100, 1000);
        assert_eq!(s.local_tat(b"r\0\0k", 1000), 1510);
    }

    #[test]
    fn cut_off_with_share_weighs_each_request_nodes_times() {
        let s = store(3, false);
        hit(&s, b"r\0\0k", 1000);
        assert_eq!(s.local_tat(b"r\0\0k", 1000), 1030);
        assert_eq!(
            s.take(100, 1000).hits[0].1,
            1,
            "the fleet is told one request"
        );
        let local = store(3, true);
        hit(&local, b"r\0\0k", 1000);
        assert_eq!(local.local_tat(b"r\0\0k", 1000), 1010);
    }

    fn score(s: &FleetStore, key: &[u8], milli: u64, now: u64) {
        s.update(key, now, &mut |_| {
            Some(Cell {
                a: milli,
                b: now,
                expires: now + 1_000_000,
            })
        });
    }

    #[test]
    fn score_points_are_sent_as_additions_and_a_drop_as_a_reset() {
        let s = store(1, true);
        score(&s, b"sK", 2_000, 10);
        score(&s, b"sK", 5_000, 10);
        let b = s.take(10, 10);
        assert_eq!(b.scores.len(), 1);
        assert!(!b.scores[0].1.reset && (b.scores[0].1.add - 5_000.0).abs() < 1.0);
        // The threshold was crossed: the score starts again from zero.
        score(&s, b"sK", 0, 10);
        let op = s.take(10, 10).scores[0].1;
        assert!(op.reset && op.add == 0.0, "{op:?}");
        // The fleet's view replaces the local points, the streak stays.
        score(&s, b"sK", (3 << 40) | 1_000, 10);
        let _ = s.take(10, 10);
        s.apply_score(b"sK", 1_000_000, 7_000.0, 10);
        let c = s.update(b"sK", 10, &mut |c| c).unwrap();
        assert_eq!(c.a, (3 << 40) | 7_000);
    }

    #[test]
    fn ban_changes_are_published_and_reads_are_not() {
        let s = store(1, true);
        let cell = Cell {
            a: 5000,
            b: 1,
            expires: 9000,
        };
        s.update(b"bX", 1000, &mut |_| Some(cell));
        s.update(b"bX", 1000, &mut |c| c);
        assert_eq!(
            s.take(10, 10).bans,
            vec![(b"bX".to_vec().into_boxed_slice(), BanOp::Set(cell))]
        );
        assert!(s.remove(b"bX"));
        assert_eq!(s.take(10, 10).bans[0].1, BanOp::Remove);
    }

    #[test]
    fn the_fleets_ban_list_replaces_the_local_one() {
        let s = store(1, true);
        let cell = Cell {
            a: 5000,
            b: 1,
            expires: 9000,
        };
        s.update(b"bOld", 1000, &mut |_| Some(cell));
        let _ = s.take(10, 10);
        s.update(b"bNew", 1000, &mut |_| Some(cell)); // not yet published
        s.apply_bans(&[(b"bRemote".to_vec(), cell)], 1000);
        let mut keys: Vec<Vec<u8>> = s.local_bans(1000).into_iter().map(|(k, _)| k).collect();
        keys.sort();
        assert_eq!(keys, vec![b"bNew".to_vec(), b"bRemote".to_vec()]);
        // Applying a fleet ban is not itself a change to publish.
        assert_eq!(s.take(10, 10).bans.len(), 1);
    }
}
