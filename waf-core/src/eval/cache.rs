//! Per-transaction cache of transformed values.
//!
//! CRS runs about 40 distinct transformation chains over the same few dozen values, and
//! many chains share a prefix (`urlDecodeUni` then more). The cache is keyed by
//! (value identity, chain-prefix id); a step that leaves its input unchanged is stored as
//! "unchanged" rather than as a copy, so a benign value costs no allocation at all. The
//! cache is cleared at the start of every phase, because a phase may add values (the body
//! adds `ARGS_POST`) and indices are only stable within one.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::eval::data::ValueKey;
use crate::transformations::Transformation;

/// A multiplicative hasher for the small integer keys of the cache (SipHash would cost
/// more than many transformations).
#[derive(Default)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Transformed values of one phase.
#[derive(Debug, Default)]
pub(crate) struct TransformCache {
    /// `None`: this step left the value unchanged.
    map: HashMap<(ValueKey, u32), Option<Vec<u8>>, BuildHasherDefault<IntHasher>>,
}

impl TransformCache {
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }

    /// `raw` after `chain`, reusing and filling the cache when the value has a key.
    pub(crate) fn transform<'a>(
        &'a mut self,
        key: Option<ValueKey>,
        raw: &'a [u8],
        chain: &[Transformation],
        prefix_ids: &[u32],
    ) -> Cow<'a, [u8]> {
        if chain.is_empty() {
            return Cow::Borrowed(raw);
        }
        let Some(key) = key else {
            return apply_all(raw, chain);
        };
        let n = chain.len();
        let mut start = 0;
        for i in (0..n).rev() {
            if self.map.contains_key(&(key, prefix_ids[i])) {
                start = i + 1;
                break;
            }
        }
        for i in start..n {
            let out = {
                let input = self.resolve(key, &prefix_ids[..i], raw);
                match chain[i].apply(input) {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(v) => Some(v),
                }
            };
            self.map.insert((key, prefix_ids[i]), out);
        }
        Cow::Borrowed(self.resolve(key, prefix_ids, raw))
    }

    /// The value after the chain identified by `prefix_ids` (all cached).
    fn resolve<'a>(&'a self, key: ValueKey, prefix_ids: &[u32], raw: &'a [u8]) -> &'a [u8] {
        for id in prefix_ids.iter().rev() {
            match self.map.get(&(key, *id)) {
                Some(Some(v)) => return v,
                Some(None) => continue,
                None => break,
            }
        }
        raw
    }
}

/// Applies a chain without caching, allocating only when a step changes the value.
pub(crate) fn apply_all<'a>(raw: &'a [u8], chain: &[Transformation]) -> Cow<'a, [u8]> {
    let mut value = Cow::Borrowed(raw);
    for t in chain {
        value = match value {
            Cow::Borrowed(b) => t.apply(b),
            Cow::Owned(v) => {
                let changed = match t.apply(&v) {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(n) => Some(n),
                };
                Cow::Owned(changed.unwrap_or(v))
            }
        };
    }
    value
}
