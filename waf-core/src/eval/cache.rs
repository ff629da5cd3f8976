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

use crate::compile::prefilter::Prefilter;
use crate::eval::data::ValueKey;
use crate::transformations::Transformation;

/// A multiplicative (Fx-style) hasher for the engine's internal maps, whose keys are
/// small integers or short variable names chosen by rule authors, not attackers (SipHash
/// would cost more than many transformations).
#[derive(Default)]
pub(crate) struct FastHasher(u64);

/// `HashMap` state using [`FastHasher`].
pub(crate) type FastState = BuildHasherDefault<FastHasher>;

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Where a cached value lives: the raw value itself (every step so far left it
/// unchanged) or a buffer in the arena.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    Raw,
    Arena(usize),
}

/// Transformed values of one phase.
#[derive(Debug, Default)]
pub(crate) struct TransformCache {
    /// (value, chain prefix) → where the result is. Each entry is already resolved, so a
    /// hit costs one lookup however long the chain.
    map: HashMap<(ValueKey, u32), Slot, FastState>,
    /// Values some step changed.
    arena: Vec<Vec<u8>>,
    /// (value, prefilter group) → offset of its bit set in `bits`.
    prefiltered: HashMap<(ValueKey, u32), usize, FastState>,
    bits: Vec<u64>,
}

impl TransformCache {
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.arena.clear();
        self.prefiltered.clear();
        self.bits.clear();
    }

    /// Whether the prefilter of `group` lets the rule with `bit` see the value `key`
    /// (transformed: `slot`). Scans once per (value, group) per phase.
    pub(crate) fn prefilter_passes(
        &mut self,
        key: ValueKey,
        slot: Slot,
        raw: &[u8],
        group: u32,
        bit: u32,
        prefilter: &Prefilter,
    ) -> bool {
        let offset = match self.prefiltered.get(&(key, group)) {
            Some(&o) => o,
            None => {
                let offset = self.bits.len();
                self.bits.resize(offset + prefilter.words, 0);
                let input = match slot {
                    Slot::Raw => raw,
                    Slot::Arena(i) => &self.arena[i],
                };
                prefilter.scan(input, &mut self.bits[offset..]);
                self.prefiltered.insert((key, group), offset);
                offset
            }
        };
        self.bits[offset + bit as usize / 64] & (1 << (bit % 64)) != 0
    }

    /// Where `raw` after `chain` is, computing and caching it as needed (see
    /// [`TransformCache::slice`]).
    pub(crate) fn transform_slot(
        &mut self,
        key: ValueKey,
        raw: &[u8],
        chain: &[Transformation],
        prefix_ids: &[u32],
    ) -> Slot {
        let n = chain.len();
        if n == 0 {
            return Slot::Raw;
        }
        if let Some(&slot) = self.map.get(&(key, prefix_ids[n - 1])) {
            return slot;
        }
        if self.map.capacity() == 0 {
            self.map.reserve(256);
        }
        // The longest cached prefix, if any.
        let mut start = 0;
        let mut slot = Slot::Raw;
        for i in (0..n - 1).rev() {
            if let Some(&s) = self.map.get(&(key, prefix_ids[i])) {
                start = i + 1;
                slot = s;
                break;
            }
        }
        for i in start..n {
            let changed = match chain[i].apply(self.slice(slot, raw)) {
                Cow::Borrowed(_) => None,
                Cow::Owned(v) => Some(v),
            };
            if let Some(v) = changed {
                self.arena.push(v);
                slot = Slot::Arena(self.arena.len() - 1);
            }
            self.map.insert((key, prefix_ids[i]), slot);
        }
        slot
    }

    /// The bytes of a slot from [`TransformCache::transform_slot`] for `raw`.
    pub(crate) fn slice<'a>(&'a self, slot: Slot, raw: &'a [u8]) -> &'a [u8] {
        match slot {
            Slot::Raw => raw,
            Slot::Arena(i) => &self.arena[i],
        }
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
