//! The `TX` collection: a map from names to values that keeps its buffers when cleared.
//!
//! CRS sets about a hundred `TX` variables on every request (its 901 rules copy the setup
//! into `TX`, then every rule adds to the scores), and they are the same names request after
//! request. A `HashMap<Vec<u8>, Vec<u8>>` allocates a key and a value for each of them per
//! transaction. [`TxVars`] instead marks its entries dead on [`TxVars::clear`] and revives
//! them in place when the name is set again, so a recycled transaction (see
//! [`super::pool`]) sets its `TX` variables without allocating.
//!
//! The names the program's paranoia gates and other single-`TX` tests read are placed at
//! fixed slots, in the program's order ([`TxVars::prepare`]), so such a test reads its value
//! by index ([`TxVars::get_slot`]) instead of hashing the name: CRS makes about 150 of them
//! per request.
//!
//! Names stay in the table while dead; [`TxVars::clear`] drops everything once the table
//! holds more than [`MAX_RETAINED`] names, so names made from request data (CRS builds
//! `tx.header_name_920450_<header>`) cannot grow it without bound.

use std::collections::HashMap;
use std::sync::Arc;

use super::cache::FastState;

/// Names kept across [`TxVars::clear`]; beyond this the table starts empty again.
const MAX_RETAINED: usize = 1024;

/// One variable: its name, value, and whether it is set in this transaction. The name is
/// also the key of [`TxVars::index`]; keeping it here lets [`TxVars::iter`] walk one vector
/// instead of the hash table (0.5 % of a CRS GET, callgrind), and names are allocated once
/// per pooled table, not per transaction.
#[derive(Debug)]
struct Entry {
    name: Vec<u8>,
    value: Vec<u8>,
    live: bool,
}

/// The `TX` collection of one transaction.
#[derive(Debug, Default)]
pub(crate) struct TxVars {
    /// Name → index in `entries`, for live and dead entries.
    index: HashMap<Vec<u8>, usize, FastState>,
    entries: Vec<Entry>,
    /// The names [`TxVars::prepare`] placed at the front of `entries`, in slot order.
    slots: Option<Arc<[Vec<u8>]>>,
    /// Whether anything was set or removed since the table was cleared.
    touched: bool,
}

impl TxVars {
    /// The value of `name`, if set.
    pub(crate) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        let &i = self.index.get(name)?;
        let e = &self.entries[i];
        e.live.then_some(e.value.as_slice())
    }

    /// Places `names` at slots `0..names.len()` (all unset), unless this table already
    /// holds them there: a recycled table of the same program keeps them.
    pub(crate) fn prepare(&mut self, names: &Arc<[Vec<u8>]>) {
        if self.slots.as_ref().is_some_and(|s| Arc::ptr_eq(s, names)) {
            return;
        }
        *self = TxVars::default();
        for name in names.iter() {
            if self.index.contains_key(name) {
                continue;
            }
            self.index.insert(name.clone(), self.entries.len());
            self.entries.push(Entry {
                name: name.clone(),
                value: Vec::new(),
                live: false,
            });
        }
        // Slots are indices only when every name took its own (names are distinct).
        if self.entries.len() == names.len() {
            self.slots = Some(Arc::clone(names));
        }
    }

    /// The value at `slot` of the names given to [`TxVars::prepare`], if set; `None` also
    /// when the table was not prepared with them (then use [`TxVars::get`]).
    #[inline]
    pub(crate) fn get_slot(&self, slot: u32) -> Option<&[u8]> {
        let e = self.entries.get(slot as usize)?;
        e.live.then_some(e.value.as_slice())
    }

    /// The value at `slot` of the names given to [`TxVars::prepare`] (`Some(None)`: not
    /// set), or `None` when the table does not hold those slots (then read by name).
    #[inline]
    pub(crate) fn try_slot(&self, slot: u32) -> Option<Option<&[u8]>> {
        match self.slots.as_ref() {
            Some(names) if (slot as usize) < names.len() => Some(self.get_slot(slot)),
            _ => None,
        }
    }

    /// The value of `name`, whose slot among the names given to [`TxVars::prepare`] is
    /// `slot` (`u32::MAX`: none): by index when the table holds its slots, else by name.
    /// The transaction prepares its table with its program's names, the only ones its
    /// slots refer to.
    #[inline]
    pub(crate) fn get_at(&self, slot: u32, name: &[u8]) -> Option<&[u8]> {
        match self.slots.as_ref() {
            Some(names) if (slot as usize) < names.len() => self.get_slot(slot),
            _ => self.get(name),
        }
    }

    /// Sets `name` to `value`, by `slot` as [`TxVars::get_at`] reads it.
    #[inline]
    pub(crate) fn set_at(&mut self, slot: u32, name: &[u8], value: &[u8]) {
        match self.slots.as_ref() {
            Some(names) if (slot as usize) < names.len() => self.set_slot(slot, value),
            _ => self.set(name, value),
        }
    }

    /// Sets the variable at `slot` of the names given to [`TxVars::prepare`].
    #[inline]
    fn set_slot(&mut self, slot: u32, value: &[u8]) {
        self.touched = true;
        if let Some(e) = self.entries.get_mut(slot as usize) {
            e.value.clear();
            e.value.extend_from_slice(value);
            e.live = true;
        }
    }

    /// Whether [`TxVars::get_slot`] reads the slots of `names`.
    #[cfg(test)]
    fn has_slots(&self, names: &Arc<[Vec<u8>]>) -> bool {
        self.slots.as_ref().is_some_and(|s| Arc::ptr_eq(s, names))
    }

    /// Sets `name` to `value`, reusing the entry's buffer when the name was seen before.
    pub(crate) fn set(&mut self, name: &[u8], value: &[u8]) {
        self.touched = true;
        match self.index.get(name) {
            Some(&i) => {
                let e = &mut self.entries[i];
                e.value.clear();
                e.value.extend_from_slice(value);
                e.live = true;
            }
            None => {
                self.index.insert(name.to_vec(), self.entries.len());
                self.entries.push(Entry {
                    name: name.to_vec(),
                    value: value.to_vec(),
                    live: true,
                });
            }
        }
    }

    /// Unsets `name`.
    pub(crate) fn remove(&mut self, name: &[u8]) {
        self.touched = true;
        if let Some(&i) = self.index.get(name) {
            self.entries[i].live = false;
        }
    }

    /// The variables set, as (name, value), in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries
            .iter()
            .filter(|e| e.live)
            .map(|e| (e.name.as_slice(), e.value.as_slice()))
    }

    /// Unsets every variable, keeping names and buffers for the next transaction (up to
    /// [`MAX_RETAINED`] names).
    pub(crate) fn clear(&mut self) {
        if self.entries.len() > MAX_RETAINED {
            *self = TxVars::default();
            return;
        }
        for e in &mut self.entries {
            e.live = false;
        }
        self.touched = false;
    }

    /// Whether nothing was set or removed since the table was cleared (or made).
    pub(crate) fn untouched(&self) -> bool {
        !self.touched
    }

    /// The variables set, with their place in the table: what [`TxVars::restore`] puts
    /// back.
    pub(crate) fn live_entries(&self) -> Vec<(usize, Vec<u8>, Vec<u8>)> {
        let live = self.entries.iter().enumerate().filter(|(_, e)| e.live);
        live.map(|(i, e)| (i, e.name.clone(), e.value.clone()))
            .collect()
    }

    /// Sets the variables `entries` lists ([`TxVars::live_entries`] of a table prepared
    /// with the same names): in place, without hashing a name, where this table holds the
    /// same name at the same place (always at a slot of [`TxVars::prepare`]'s names, which
    /// is not compared again; elsewhere when a table of the same program made its names in
    /// the same order), else by name.
    pub(crate) fn restore(&mut self, entries: &[(usize, Vec<u8>, Vec<u8>)]) {
        let slots = self.slots.as_ref().map_or(0, |s| s.len());
        for (i, name, value) in entries {
            match self.entries.get_mut(*i) {
                Some(e) if *i < slots || e.name == *name => {
                    e.value.clear();
                    e.value.extend_from_slice(value);
                    e.live = true;
                    self.touched = true;
                }
                _ => self.set(name, value),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_remove_and_clear_keep_semantics() {
        let mut v = TxVars::default();
        assert_eq!(v.get(b"a"), None);
        v.set(b"a", b"1");
        v.set(b"b", b"2");
        v.set(b"a", b"3");
        assert_eq!(v.get(b"a"), Some(&b"3"[..]));
        assert_eq!(v.iter().count(), 2);
        v.remove(b"a");
        assert_eq!(v.get(b"a"), None);
        assert_eq!(v.iter().count(), 1);
        v.remove(b"a");
        assert_eq!(v.iter().count(), 1);
        v.clear();
        assert_eq!(v.get(b"b"), None);
        assert_eq!(v.iter().count(), 0);
        v.set(b"b", b"");
        assert_eq!(v.get(b"b"), Some(&b""[..]));
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![(&b"b"[..], &b""[..])]);
    }

    #[test]
    fn slots_read_what_names_set() {
        let names: Arc<[Vec<u8>]> = vec![b"pl".to_vec(), b"score".to_vec()].into();
        let mut v = TxVars::default();
        v.set(b"other", b"x");
        v.prepare(&names);
        assert!(v.has_slots(&names));
        assert_eq!(v.get(b"other"), None, "preparing starts a fresh table");
        assert_eq!(v.get_slot(0), None);
        v.set(b"score", b"5");
        v.set(b"pl", b"2");
        assert_eq!(v.get_slot(0), Some(&b"2"[..]));
        assert_eq!(v.get_slot(1), Some(&b"5"[..]));
        v.remove(b"pl");
        assert_eq!(v.get_slot(0), None);
        v.clear();
        v.prepare(&names);
        assert_eq!(
            v.get_slot(1),
            None,
            "a recycled table keeps its slots, unset"
        );
        v.set_slot(1, b"7");
        assert_eq!(v.get(b"score"), Some(&b"7"[..]));
        assert_eq!(v.get_slot(1), Some(&b"7"[..]));
        // Past the retention limit the table starts over, and must be prepared again.
        for i in 0..=MAX_RETAINED {
            v.set(format!("n{i}").as_bytes(), b"x");
        }
        v.clear();
        assert!(!v.has_slots(&names));
        v.prepare(&names);
        v.set(b"pl", b"1");
        assert_eq!(v.get_slot(0), Some(&b"1"[..]));
    }

    #[test]
    fn clear_forgets_names_beyond_the_retention_limit() {
        let mut v = TxVars::default();
        for i in 0..=MAX_RETAINED {
            v.set(format!("n{i}").as_bytes(), b"x");
        }
        v.clear();
        assert!(v.entries.is_empty() && v.index.is_empty());
    }
}
