//! Persistent collections (`IP`, `GLOBAL`, `SESSION`, `USER`, `RESOURCE`) kept in memory by
//! one `Waf`.
//!
//! `initcol:ip=%{remote_addr}` copies the record into the transaction; when the transaction
//! finishes, changed records are written back. Records expire after `SecCollectionTimeout`
//! (or a variable's `expirevar`), judged by the `now` the host passes in. The number of
//! records is bounded by [`crate::limits::DEFAULT_COLLECTION_RECORDS`]; when full, expired
//! records are dropped first, then the oldest.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::actions::CollectionName;

/// One stored record: variables and their expiry (seconds since the epoch, 0 = never).
#[derive(Clone, Debug, Default)]
pub(crate) struct Record {
    pub(crate) vars: HashMap<Vec<u8>, (Vec<u8>, u64)>,
    pub(crate) updated: u64,
}

/// All records of one `Waf`.
#[derive(Debug, Default)]
pub(crate) struct Store {
    records: Mutex<HashMap<(CollectionName, Vec<u8>), Record>>,
}

impl Store {
    /// A copy of the record, with expired variables removed.
    pub(crate) fn load(&self, col: CollectionName, key: &[u8], now: u64) -> Record {
        let guard = match self.records.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut rec = guard.get(&(col, key.to_vec())).cloned().unwrap_or_default();
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
        let mut guard = match self.records.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if guard.len() >= crate::limits::DEFAULT_COLLECTION_RECORDS
            && !guard.contains_key(&(col, key.clone()))
        {
            guard.retain(|_, r| r.updated + timeout > now);
            if guard.len() >= crate::limits::DEFAULT_COLLECTION_RECORDS {
                if let Some(oldest) = guard
                    .iter()
                    .min_by_key(|(_, r)| r.updated)
                    .map(|(k, _)| k.clone())
                {
                    guard.remove(&oldest);
                }
            }
        }
        rec.updated = now;
        guard.insert((col, key), rec);
    }
}
