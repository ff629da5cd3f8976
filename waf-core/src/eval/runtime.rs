//! The run-time state of a [`crate::Waf`], kept apart from its immutable
//! [`crate::compile::Program`].
//!
//! The program is what the rules say, decided once at load; this is what transactions leave
//! behind for the ones after them: persistent collections ([`Store`]), recycled tables
//! ([`Pool`]) and the serial number behind `UNIQUE_ID`. Neither piece takes a lock that
//! every worker shares (see their module docs).

use std::sync::atomic::{AtomicU64, Ordering};

use super::pool::Pool;
use super::store::Store;

/// What the transactions of one `Waf` share.
#[derive(Debug, Default)]
pub(crate) struct Runtime {
    /// Persistent collections (`IP`, `GLOBAL`, ...).
    pub(crate) store: Store,
    /// Tables of finished transactions, reused by the next ones.
    pub(crate) pool: Pool,
    /// Transactions started, for `UNIQUE_ID`.
    serial: AtomicU64,
}

impl Runtime {
    /// A number unique among this `Waf`'s transactions.
    pub(crate) fn next_serial(&self) -> u64 {
        self.serial.fetch_add(1, Ordering::Relaxed)
    }
}
