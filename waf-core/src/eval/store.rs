//! Persistent collections (`IP`, `GLOBAL`, `SESSION`, `USER`, `RESOURCE`) kept in memory by
//! one `Waf`.
//!
//! `initcol:ip=%{remote_addr}` copies the record into the transaction; when the transaction
//! finishes, changed records are written back. Records expire after `SecCollectionTimeout`
//! (or a variable's `expirevar`), judged by the `now` the host passes in.
//!
//! The store is split into [`crate::limits::COLLECTION_STORE_SHARDS`] shards by a hash of (collection, key), each behind its
//! own lock, so transactions of different clients do not wait on one another: nothing on
//! the request path takes a lock shared by every worker. The number of records is bounded by
//! [`crate::limits::DEFAULT_COLLECTION_RECORDS`] (split evenly over the shards). When a
//! shard is full, eviction costs O(1) amortised: a second-chance (clock) queue in insertion
//! order drops the first record that is expired or was not written since it last came round,
//! looking at no more than [`crate::limits::COLLECTION_EVICTION_LOOKS`] records, and never
//! scans the shard.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use crate::actions::CollectionName;
use crate::eval::cache::FastState;
use crate::limits::DEFAULT_COLLECTION_RECORDS;

/// One stored record: variables and their expiry (seconds since the epoch, 0 = never).
#[derive(Clone, Debug, Default)]
pub(crate) struct Record {
    pub(crate) vars: HashMap<Vec<u8>, (Vec<u8>, u64)>,
    pub(crate) updated: u64,
}

type RecordKey = (CollectionName, Vec<u8>);

/// A stored record and its second-chance bit.
#[derive(Debug)]
struct Slot {
    record: Record,
    /// Written since the clock hand last passed it.
    referenced: bool,
}

/// One shard: its records, and their keys in clock order (each key exactly once).
#[derive(Debug, Default)]
struct Shard {
    records: HashMap<RecordKey, Slot, FastState>,
    clock: VecDeque<RecordKey>,
}

impl Shard {
    /// Drops one record: the first in clock order that is expired or unreferenced.
    fn evict_one(&mut self, now: u64, timeout: u64) {
        for _ in 0..crate::limits::COLLECTION_EVICTION_LOOKS {
            let Some(key) = self.clock.pop_front() else {
                return;
            };
            // Invariant: `clock` holds exactly the keys of `records`.
            let Some(slot) = self.records.get_mut(&key) else {
                continue;
            };
            let expired = slot.record.updated.saturating_add(timeout) <= now;
            if expired || !slot.referenced {
                self.records.remove(&key);
                return;
            }
            slot.referenced = false;
            self.clock.push_back(key);
        }
        if let Some(key) = self.clock.pop_front() {
            self.records.remove(&key);
        }
    }
}

/// All records of one `Waf`.
#[derive(Debug)]
pub(crate) struct Store {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
}

impl Default for Store {
    fn default() -> Store {
        Store::with_capacity(DEFAULT_COLLECTION_RECORDS)
    }
}

impl Store {
    /// A store that keeps at most about `records` records.
    pub(crate) fn with_capacity(records: usize) -> Store {
        Store {
            shards: (0..crate::limits::COLLECTION_STORE_SHARDS)
                .map(|_| Mutex::default())
                .collect(),
            per_shard: records
                .div_ceil(crate::limits::COLLECTION_STORE_SHARDS)
                .max(1),
        }
    }

    fn shard(&self, col: CollectionName, key: &[u8]) -> MutexGuard<'_, Shard> {
        let mut h = FastState::default().build_hasher();
        col.hash(&mut h);
        key.hash(&mut h);
        // The multiplicative hash puts its best bits at the top.
        let i = (h.finish() >> 40) as usize % crate::limits::COLLECTION_STORE_SHARDS;
        match self.shards[i].lock() {
            Ok(g) => g,
            // A panic while holding the lock leaves a consistent map (every update is one
            // insert or remove), so the data is still usable.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A copy of the record, with expired variables removed.
    pub(crate) fn load(&self, col: CollectionName, key: &[u8], now: u64) -> Record {
        let shard = self.shard(col, key);
        let mut rec = shard
            .records
            .get(&(col, key.to_vec()))
            .map(|s| s.record.clone())
            .unwrap_or_default();
        drop(shard);
        rec.vars.retain(|_, (_, exp)| *exp == 0 || *exp > now);
        rec
    }

    /// Writes a record back.
    pub(crate) fn save(
        &self,
        col: CollectionName,
        key: Vec<u8>,
        mut rec: Record,
        now: u64,
        timeout: u64,
    ) {
        rec.updated = now;
        let mut shard = self.shard(col, &key);
        let key = (col, key);
        if let Some(slot) = shard.records.get_mut(&key) {
            slot.record = rec;
            slot.referenced = true;
            return;
        }
        while shard.records.len() >= self.per_shard {
            shard.evict_one(now, timeout);
        }
        shard.clock.push_back(key.clone());
        shard.records.insert(
            key,
            Slot {
                record: rec,
                referenced: false,
            },
        );
    }

    /// Records held (all shards).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.records.len()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: &[u8]) -> Record {
        let mut r = Record::default();
        r.vars.insert(b"n".to_vec(), (v.to_vec(), 0));
        r
    }

    #[test]
    fn records_round_trip_and_variables_expire() {
        let store = Store::default();
        let mut r = rec(b"1");
        r.vars.insert(b"gone".to_vec(), (b"x".to_vec(), 50));
        store.save(CollectionName::Ip, b"1.2.3.4".to_vec(), r, 10, 3600);
        let back = store.load(CollectionName::Ip, b"1.2.3.4", 20);
        assert_eq!(back.vars[&b"n"[..]].0, b"1");
        assert!(back.vars.contains_key(&b"gone"[..]));
        let later = store.load(CollectionName::Ip, b"1.2.3.4", 60);
        assert!(!later.vars.contains_key(&b"gone"[..]));
        assert!(store
            .load(CollectionName::Global, b"1.2.3.4", 20)
            .vars
            .is_empty());
    }

    #[test]
    fn the_store_stays_bounded_and_keeps_records_written_again() {
        let store = Store::with_capacity(crate::limits::COLLECTION_STORE_SHARDS * 4);
        // A record written on every round survives a flood of one-off keys.
        for i in 0..10_000u32 {
            store.save(
                CollectionName::Ip,
                i.to_be_bytes().to_vec(),
                rec(b"x"),
                100,
                3600,
            );
            store.save(CollectionName::Ip, b"hot".to_vec(), rec(b"h"), 100, 3600);
            assert!(store.len() <= crate::limits::COLLECTION_STORE_SHARDS * 4);
        }
        let hot = store.load(CollectionName::Ip, b"hot", 100);
        assert_eq!(hot.vars[&b"n"[..]].0, b"h");
    }
}
