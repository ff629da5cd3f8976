//! The state seam: counters, scores and bans behind one small trait.
//!
//! Modelled on governor's `state.rs`: a protection is (its compiled config, a store, the
//! time the caller passes in), so the store can be swapped (in memory here, Redis in the
//! host, next issue) without touching the arithmetic in [`super::gcra`], [`super::scoring`]
//! or [`super::ban`]. The trait is deliberately tiny: one read-modify-write, one removal, one
//! walk for the admin listener. Time is always an argument (`now`, nanoseconds since the
//! Unix epoch); the store never reads a clock.
//!
//! [`MemoryStore`] is sharded: a key's hash picks one of [`SHARDS`] shards, each a small
//! mutex-guarded map with an intrusive LRU list, so two requests only contend when their
//! keys land in the same shard, and there is no global lock. The number of keys is bounded
//! (`max_keys`); inserting into a full shard evicts that shard's least recently used key in
//! O(1) (unlinking the tail of the list), never by a scan.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

/// One stored value: two numbers whose meaning belongs to the protection that wrote them
/// (GCRA: theoretical arrival time; score: points and time of the last update; ban: end of
/// the ban and the offence count), and when the entry may be forgotten.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    /// First value.
    pub a: u64,
    /// Second value.
    pub b: u64,
    /// Nanoseconds since the Unix epoch after which the entry is gone.
    pub expires: u64,
}

/// Where a protection keeps its per-client state.
///
/// Keys are opaque bytes the protection builds (a kind byte, the protection's index, then
/// the client key). Implementations must be safe to call from many threads at once and
/// must not block on I/O on the request path (a networked store answers from a local copy
/// and reconciles in the background, `DESIGN.md` "State and fleets").
pub trait Store: Send + Sync + fmt::Debug {
    /// Atomically replaces the cell at `key` with `f(current)`, where `current` is `None`
    /// when the key is absent or expired at `now`; `f` returning `None` removes it.
    /// Returns what `f` returned.
    fn update(
        &self,
        key: &[u8],
        now: u64,
        f: &mut dyn FnMut(Option<Cell>) -> Option<Cell>,
    ) -> Option<Cell>;

    /// Removes `key`; whether it was there.
    fn remove(&self, key: &[u8]) -> bool;

    /// Calls `f` for every unexpired entry whose key starts with `prefix` (admin use, not
    /// the request path).
    fn scan(&self, prefix: &[u8], now: u64, f: &mut dyn FnMut(&[u8], Cell));

    /// Tells the store that the keys starting with `prefix` hold `kind` values, so that a
    /// store shared by a fleet knows how to reconcile them (a GCRA bucket is reconciled
    /// differently from a ban). Called by the policy when it is compiled, before any
    /// request; a later call for the same prefix replaces the earlier one (a reload). The
    /// in-memory store keeps every kind alike and ignores it.
    fn declare(&self, prefix: &[u8], kind: ValueKind) {
        let _ = (prefix, kind);
    }

    /// One step of a waiting room's line (`room` is the room's key prefix): a visitor in
    /// line (or new) asks whether it is its turn ([`LineOp::Wait`]), an admitted visitor
    /// keeps its place warm ([`LineOp::Active`]). Visitors are let in strictly in arrival
    /// order, at most `spec.capacity` at a time and `spec.interval` apart.
    ///
    /// The provided body keeps the line in this store's cells through [`Store::update`]
    /// (a ticket counter, a head and one cell per place; `policy::gate::queue` explains
    /// it), which is atomic on one node. A store shared by a fleet overrides it so that
    /// every node sees one line: `waf-redis` answers from a local mirror and lets Redis
    /// call the visitors in one atomic script per round, so a request never waits on the
    /// network.
    fn line(
        &self,
        room: &[u8],
        spec: &LineSpec,
        visitor: &[u8; 16],
        op: LineOp,
        now: u64,
    ) -> LineStatus {
        crate::policy::gate::queue::local_line(self, room, spec, visitor, op, now)
    }
}

/// A waiting room's rules, as a [`Store::line`] needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSpec {
    /// Visitors in at most.
    pub capacity: u32,
    /// Nanoseconds between two calls (0: no rate limit).
    pub interval: u64,
    /// Nanoseconds after its last request that an admitted visitor's place is freed.
    pub idle: u64,
    /// Nanoseconds a called visitor has to come back for its place.
    pub claim: u64,
}

/// What a visitor asks of a waiting room's line ([`Store::line`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineOp {
    /// In line, or new (joins at the back): is it my turn?
    Wait {
        /// When the visitor first asked (nanoseconds since the epoch, from its signed
        /// ticket): a fleet orders the visitors of every node by it.
        arrival: u64,
    },
    /// Admitted: this request keeps the place (its idle time starts again).
    Active {
        /// What [`LineStatus::Admitted`] said when the visitor was let in (kept in its
        /// signed admission cookie).
        place: u64,
    },
}

/// A line's answer ([`Store::line`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineStatus {
    /// In: let the request through.
    Admitted {
        /// Where the store keeps the visitor, to give back with [`LineOp::Active`] (the
        /// in-memory store: the ticket and the place's index, so that an admitted request
        /// costs one update; a fleet store ignores it).
        place: u64,
    },
    /// Waiting at this position (1 = next).
    Waiting {
        /// The position (1 = next).
        position: u64,
        /// A fleet store has not yet heard from Redis about this visitor (new here):
        /// `position` is its best guess, and the page asks again after a second.
        estimated: bool,
    },
    /// An [`LineOp::Active`] visitor whose place is gone (idle too long): back in line.
    Gone,
}

/// What a protection keeps in a [`Cell`], as told to [`Store::declare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueKind {
    /// A GCRA bucket ([`super::rate_limit`]): `a` is the theoretical arrival time, and
    /// every request the bucket counts moves it forward by `interval` nanoseconds (from
    /// `now` when it lies in the past).
    Gcra {
        /// The emission interval, `period / rate`, in nanoseconds (at least 1).
        interval: u64,
    },
    /// A ban ([`super::ban`]): `a` is when it ends, `b` the client's offences.
    Ban,
    /// A behaviour score ([`super::scoring`]): the low [`SCORE_POINTS_BITS`] bits of `a`
    /// hold the points in thousandths, the bits above them the client's current streak of
    /// 4xx answers; `b` is the time of the last update. The points halve every
    /// `half_life` nanoseconds.
    Score {
        /// The half-life of a score, in nanoseconds.
        half_life: u64,
    },
    /// A record every node of a fleet must know at once, whatever node the client asks
    /// next (the sign-in's codes, lockouts and sign-out revocations, [`super::gate`]): `a`
    /// says what the record is (a code's keyed hash; 1 for a flag), `b` counts events on it
    /// (a code's wrong attempts). A fleet store publishes a record written or replaced
    /// (last writer wins), what was added to `b` (added to the fleet's `b` only while the
    /// fleet's record has the same `a`, so attempts on an older code never count against a
    /// newer one), and a removal, which removes only the record with the same `a` (a used
    /// code is consumed, a newer one written elsewhere stays).
    Shared,
    /// A fixed-window count every node of a fleet must know at once (the sign-in's codes
    /// sent per address and per IP, wrong codes per IP): `a` is the count, `expires` the end
    /// of the window. A fleet store publishes what it added; the fleet's count is the sum
    /// over the nodes, in the window of the first node that counted.
    Count,
}

/// Bits of a score cell's `a` that hold its points ([`ValueKind::Score`]).
pub const SCORE_POINTS_BITS: u32 = 40;

/// Number of shards in [`MemoryStore`] (a power of two).
pub const SHARDS: usize = 64;

const NIL: u32 = u32::MAX;

/// The in-memory [`Store`]: sharded, bounded, LRU eviction in O(1).
pub struct MemoryStore {
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("per_shard", &self.per_shard)
            .finish()
    }
}

#[derive(Default)]
struct Shard {
    map: HashMap<Box<[u8]>, u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used: evicted first.
    tail: u32,
}

struct Slot {
    key: Box<[u8]>,
    cell: Cell,
    prev: u32,
    next: u32,
}

impl MemoryStore {
    /// A store holding at most `max_keys` keys (rounded up to a multiple of [`SHARDS`]).
    /// Worst-case memory is about `max_keys * (key length + 80)` bytes.
    pub fn new(max_keys: usize) -> MemoryStore {
        let per_shard = max_keys.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    head: NIL,
                    tail: NIL,
                    ..Shard::default()
                })
            })
            .collect();
        MemoryStore {
            hasher: RandomState::new(),
            shards,
            per_shard,
        }
    }

    /// Number of keys held now (expired ones included until touched or evicted).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, key: &[u8]) -> &Mutex<Shard> {
        let h = self.hasher.hash_one(key) as usize;
        &self.shards[(h >> 7) & (SHARDS - 1)]
    }
}

/// A poisoned shard only means another thread panicked while holding it; the data is a
/// plain map that is consistent between statements, so keep using it.
fn lock(m: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shard {
    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let s = &self.slots[i as usize];
            (s.prev, s.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let s = &mut self.slots[i as usize];
            s.prev = NIL;
            s.next = old;
        }
        if old != NIL {
            self.slots[old as usize].prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
    }

    fn delete(&mut self, i: u32) {
        self.unlink(i);
        let key = std::mem::take(&mut self.slots[i as usize].key);
        self.map.remove(&key);
        self.free.push(i);
    }

    fn insert(&mut self, key: &[u8], cell: Cell, cap: usize) {
        if self.map.len() >= cap && self.tail != NIL {
            let lru = self.tail;
            self.delete(lru);
        }
        let slot = Slot {
            key: key.into(),
            cell,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.map.insert(key.into(), i);
        self.push_front(i);
    }
}

impl Store for MemoryStore {
    fn update(
        &self,
        key: &[u8],
        now: u64,
        f: &mut dyn FnMut(Option<Cell>) -> Option<Cell>,
    ) -> Option<Cell> {
        let mut shard = lock(self.shard(key));
        match shard.map.get(key).copied() {
            Some(i) => {
                let old = shard.slots[i as usize].cell;
                let current = (old.expires > now).then_some(old);
                match f(current) {
                    Some(cell) => {
                        shard.slots[i as usize].cell = cell;
                        if shard.head != i {
                            shard.unlink(i);
                            shard.push_front(i);
                        }
                        Some(cell)
                    }
                    None => {
                        shard.delete(i);
                        None
                    }
                }
            }
            None => {
                let cell = f(None)?;
                let cap = self.per_shard;
                shard.insert(key, cell, cap);
                Some(cell)
            }
        }
    }

    fn remove(&self, key: &[u8]) -> bool {
        let mut shard = lock(self.shard(key));
        match shard.map.get(key).copied() {
            Some(i) => {
                shard.delete(i);
                true
            }
            None => false,
        }
    }

    fn scan(&self, prefix: &[u8], now: u64, f: &mut dyn FnMut(&[u8], Cell)) {
        for shard in self.shards.iter() {
            let shard = lock(shard);
            for (key, &i) in &shard.map {
                let cell = shard.slots[i as usize].cell;
                if key.starts_with(prefix) && cell.expires > now {
                    f(key, cell);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(s: &MemoryStore, key: &[u8], a: u64, now: u64) {
        s.update(key, now, &mut |_| {
            Some(Cell {
                a,
                b: 0,
                expires: now + 1_000,
            })
        });
    }

    fn get(s: &MemoryStore, key: &[u8], now: u64) -> Option<u64> {
        s.update(key, now, &mut |c| c).map(|c| c.a)
    }

    #[test]
    fn update_sees_the_previous_value_until_it_expires() {
        let s = MemoryStore::new(100);
        put(&s, b"k", 7, 0);
        assert_eq!(get(&s, b"k", 999), Some(7));
        assert_eq!(get(&s, b"k", 1_000), None, "expired at `expires`");
    }

    #[test]
    fn keys_are_bounded_and_the_least_recently_used_goes_first() {
        // One key per shard: a second key in the same shard evicts the older one.
        let s = MemoryStore::new(SHARDS);
        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for (i, k) in keys.iter().enumerate() {
            put(&s, k, i as u64, 0);
        }
        assert!(s.len() <= SHARDS, "{} keys held", s.len());
        // The last key written is always still there.
        assert_eq!(get(&s, keys.last().unwrap(), 0), Some(9_999));
    }

    #[test]
    fn touching_a_key_protects_it_from_eviction() {
        let s = MemoryStore::new(2 * SHARDS);
        // Find three keys in one shard.
        let mut same = Vec::new();
        let target = s.shard(b"anchor") as *const _;
        for i in 0..100_000u32 {
            let k = i.to_be_bytes().to_vec();
            if std::ptr::eq(s.shard(&k), target) {
                same.push(k);
                if same.len() == 3 {
                    break;
                }
            }
        }
        put(&s, &same[0], 0, 0);
        put(&s, &same[1], 1, 0);
        assert_eq!(get(&s, &same[0], 0), Some(0)); // same[0] is now most recent
        put(&s, &same[2], 2, 0); // evicts same[1]
        assert_eq!(get(&s, &same[1], 0), None);
        assert_eq!(get(&s, &same[0], 0), Some(0));
        assert_eq!(get(&s, &same[2], 0), Some(2));
    }

    #[test]
    fn remove_and_scan() {
        let s = MemoryStore::new(100);
        put(&s, b"ban:a", 1, 0);
        put(&s, b"ban:b", 2, 0);
        put(&s, b"rl:c", 3, 0);
        let mut seen = Vec::new();
        s.scan(b"ban:", 0, &mut |k, c| seen.push((k.to_vec(), c.a)));
        seen.sort();
        assert_eq!(seen, vec![(b"ban:a".to_vec(), 1), (b"ban:b".to_vec(), 2)]);
        assert!(s.remove(b"ban:a"));
        assert!(!s.remove(b"ban:a"));
        assert_eq!(get(&s, b"ban:a", 0), None);
    }

    #[test]
    fn update_returning_none_deletes() {
        let s = MemoryStore::new(100);
        put(&s, b"k", 1, 0);
        s.update(b"k", 0, &mut |_| None);
        assert!(s.is_empty());
    }
}
