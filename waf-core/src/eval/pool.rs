//! Buffers of finished transactions, kept for the next ones.
//!
//! A transaction fills hash tables and buffers (the request and response data with the
//! `TX` collection, the transformation cache, the match scratch, the expansion buffers)
//! that reach the same sizes request after request. Starting each
//! transaction with empty ones costs an allocation per `TX` variable and a rehash per table
//! growth; instead a finished (or dropped) transaction clears them and leaves them here, and
//! the next transaction of the same [`crate::Waf`] takes them.
//!
//! Only containers travel, never values: every one is cleared before it is put back (and
//! dropped instead when a big request made it large), so nothing of one request is visible
//! to the next.
//!
//! The pool is split into [`crate::limits::TABLE_POOL_SHARDS`] free lists, and a thread always uses the same one
//! (chosen from the address of a thread-local), so workers do not share a lock: a
//! transaction takes and returns its tables on its own shard, and when that shard is busy
//! (a transaction that moved to another thread, or more threads than shards) it simply
//! allocates or drops instead of waiting.
//!
//! A shard keeps as many sets as its thread has had transactions in flight at once (at
//! least [`crate::limits::TABLE_POOL_PER_SHARD`], at most
//! [`crate::limits::TABLE_POOL_MAX_PER_SHARD`]): a proxy worker holds one transaction per
//! connection waiting on its upstream, and a set that is dropped because the list is full
//! is one the next transaction builds again from empty tables, on memory no cache holds
//! (`benches/PROFILE.md`, fourteenth session: 8 kept at 64 connections cost a CRS GET 54-56
//! µs of gateway CPU, 64 kept 37-42 µs). What it keeps is never more than that peak needed.

use std::sync::Mutex;

use super::cache::TransformCache;
use super::data::TxData;
use super::rules::MatchScratch;
use crate::actions::ctl::{RuleSelector, TargetRef};

/// The reusable containers of one transaction, all empty.
#[derive(Debug, Default)]
pub(super) struct Recycled {
    pub(super) data: TxData,
    pub(super) cache: TransformCache,
    pub(super) scratch: MatchScratch,
    pub(super) text: TextScratch,
    /// The rules and targets `ctl`s removed (see `TxState::removed_rules`).
    pub(super) removed_rules: Vec<RuleSelector>,
    pub(super) removed_targets: Vec<(RuleSelector, TargetRef)>,
}

/// Buffers that `setvar` expands names and values into (`eval::effects`).
#[derive(Debug, Default)]
pub(super) struct TextScratch {
    pub(super) key: Vec<u8>,
    pub(super) value: Vec<u8>,
}

impl TextScratch {
    /// Clears the buffers; false when one grew too large to keep.
    fn clear_for_reuse(&mut self) -> bool {
        self.key.clear();
        self.value.clear();
        self.key.capacity() <= 4096 && self.value.capacity() <= 64 * 1024
    }
}

/// The free sets of one [`crate::Waf`].
#[derive(Debug, Default)]
pub(crate) struct Pool {
    shards: [Mutex<Shard>; crate::limits::TABLE_POOL_SHARDS],
}

/// One thread's free list.
#[derive(Debug, Default)]
struct Shard {
    free: Vec<Recycled>,
    /// Sets taken from this shard and not yet put back (a guess: a transaction that moved
    /// to another thread is put back there, and one that found the shard busy is not
    /// counted).
    lent: usize,
    /// The most `lent` has been: how many sets the free list may keep.
    peak: usize,
}

thread_local! {
    /// Only its address is used: it tells threads apart without a global counter.
    static ANCHOR: u8 = const { 0 };
}

/// The shard of the calling thread.
fn shard_index() -> usize {
    let addr = ANCHOR.with(|a| a as *const u8 as usize);
    // Thread-locals of different threads lie at least a page apart.
    (addr >> 12).wrapping_mul(0x9E37_79B9) >> 7 & (crate::limits::TABLE_POOL_SHARDS - 1)
}

impl Pool {
    /// A set of empty containers: a recycled one if the thread's shard has one.
    pub(super) fn take(&self) -> Recycled {
        let recycled = self.shards[shard_index()]
            .try_lock()
            .ok()
            .and_then(|mut shard| {
                shard.lent += 1;
                shard.peak = shard.peak.max(shard.lent);
                shard.free.pop()
            });
        recycled.unwrap_or_default()
    }

    /// Drops every kept set (see [`crate::Waf::internal_empty_table_pool`]).
    pub(crate) fn empty(&self) {
        for shard in &self.shards {
            if let Ok(mut shard) = shard.lock() {
                shard.free.clear();
            }
        }
    }

    /// Clears `recycled` and keeps it, unless the shard is full or busy, or it grew large.
    pub(super) fn put(&self, mut recycled: Recycled) {
        recycled.data.clear_for_reuse();
        recycled.removed_rules.clear();
        recycled.removed_rules.shrink_to(64);
        recycled.removed_targets.clear();
        recycled.removed_targets.shrink_to(64);
        if !recycled.cache.clear_for_reuse()
            || !recycled.scratch.clear_for_reuse()
            || !recycled.text.clear_for_reuse()
        {
            return;
        }
        if let Ok(mut shard) = self.shards[shard_index()].try_lock() {
            shard.lent = shard.lent.saturating_sub(1);
            let keep = shard.peak.clamp(
                crate::limits::TABLE_POOL_PER_SHARD,
                crate::limits::TABLE_POOL_MAX_PER_SHARD,
            );
            if shard.free.len() < keep {
                shard.free.push(recycled);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_gets_back_what_it_returned() {
        let pool = Pool::default();
        let mut r = Recycled::default();
        r.data.tx.set(b"a", b"1");
        r.data.method.extend_from_slice(b"GET");
        r.text.value.extend_from_slice(b"x");
        pool.put(r);
        let back = pool.take();
        assert_eq!(back.data.tx.get(b"a"), None, "returned tables are cleared");
        assert!(back.data.method.is_empty() && back.text.value.is_empty());
        assert_eq!(free_sets(&pool), 0);
    }

    /// A thread that had more transactions in flight than the floor keeps a set for each,
    /// up to the ceiling; one that had few keeps the floor.
    /// The sets `pool` keeps, over all shards.
    fn free_sets(pool: &Pool) -> usize {
        pool.shards
            .iter()
            .map(|s| s.lock().unwrap().free.len())
            .sum()
    }

    #[test]
    fn a_shard_keeps_what_its_peak_in_flight_needed() {
        use crate::limits::{TABLE_POOL_MAX_PER_SHARD, TABLE_POOL_PER_SHARD};
        let kept = |in_flight: usize| {
            let pool = Pool::default();
            let sets: Vec<Recycled> = (0..in_flight).map(|_| pool.take()).collect();
            for set in sets {
                pool.put(set);
            }
            free_sets(&pool)
        };
        assert_eq!(kept(3), 3);
        assert_eq!(kept(TABLE_POOL_PER_SHARD + 40), TABLE_POOL_PER_SHARD + 40);
        assert_eq!(kept(TABLE_POOL_MAX_PER_SHARD + 5), TABLE_POOL_MAX_PER_SHARD);
        // The floor holds when sets come back from elsewhere uncounted.
        let pool = Pool::default();
        for _ in 0..TABLE_POOL_PER_SHARD + 5 {
            pool.put(Recycled::default());
        }
        assert_eq!(free_sets(&pool), TABLE_POOL_PER_SHARD);
    }
}
