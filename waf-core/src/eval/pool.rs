//! Buffers of finished transactions, kept for the next ones.
//!
//! A transaction fills hash tables and buffers (the `TX` collection, the transformation
//! cache, the match scratch) that reach the same sizes request after request. Starting each
//! transaction with empty ones costs an allocation per `TX` variable and a rehash per table
//! growth; instead a finished (or dropped) transaction clears them and leaves them here, and
//! the next transaction of the same [`crate::Waf`] takes them.
//!
//! Only containers travel, never values: every one is cleared before it is put back (and
//! dropped instead when a big request made it large), so nothing of one request is visible
//! to the next.

use std::sync::Mutex;

use super::cache::TransformCache;
use super::rules::MatchScratch;
use super::vars::TxVars;

/// Sets kept at most; more transactions in flight than this just allocate.
const MAX_POOLED: usize = 64;

/// The reusable containers of one transaction, all empty.
#[derive(Debug, Default)]
pub(super) struct Recycled {
    pub(super) tx: TxVars,
    pub(super) cache: TransformCache,
    pub(super) scratch: MatchScratch,
}

/// The free sets of one [`crate::Waf`].
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: Mutex<Vec<Recycled>>,
}

impl Pool {
    /// A set of empty containers: a recycled one if any.
    pub(super) fn take(&self) -> Recycled {
        let recycled = self.free.lock().ok().and_then(|mut free| free.pop());
        recycled.unwrap_or_default()
    }

    /// Clears `recycled` and keeps it, unless the pool is full or it grew large.
    pub(super) fn put(&self, mut recycled: Recycled) {
        recycled.tx.clear();
        if !recycled.cache.clear_for_reuse() || !recycled.scratch.clear_for_reuse() {
            return;
        }
        if let Ok(mut free) = self.free.lock() {
            if free.len() < MAX_POOLED {
                free.push(recycled);
            }
        }
    }
}
