//! The two hash functions behind the generated lookup tables.
//!
//! `build.rs` includes this file too (`#[path]`), so the tables it lays out and the lookups
//! in [`super::keywords`] can never disagree on where a key lives.

/// log2 of the number of slots of the keyword table (985 words: load factor under 0.5).
pub(crate) const WORD_SLOT_BITS: u32 = 11;

/// log2 of the number of slots of the fingerprint table (8,367 fingerprints: load factor
/// about 0.51).
pub(crate) const FP_SLOT_BITS: u32 = 14;

/// The longest key the keyword table can hold (the longest keyword has 29 bytes; the last
/// byte of a [`WordKey`] holds the length).
pub(crate) const WORD_KEY_MAX: usize = 30;

/// An upper-cased word of at most [`WORD_KEY_MAX`] bytes, zero-padded, its length in the
/// last byte, as four little-endian words: equal keys mean equal words.
pub(crate) type WordKey = [u64; 4];

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// The key of `word` (upper-cased as libinjection's `cstrcasecmp` does: `a`-`z` only), or
/// `None` when it is too long to be a keyword.
#[inline]
pub(crate) fn word_key(word: &[u8]) -> Option<WordKey> {
    if word.len() > WORD_KEY_MAX {
        return None;
    }
    let mut buf = [0u8; 32];
    for (dst, &b) in buf.iter_mut().zip(word) {
        *dst = b.to_ascii_uppercase();
    }
    buf[31] = word.len() as u8;
    let mut key = [0u64; 4];
    for (k, chunk) in key.iter_mut().zip(buf.chunks_exact(8)) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        *k = u64::from_le_bytes(eight);
    }
    Some(key)
}

/// The first slot to probe for `key` in the keyword table.
#[inline]
pub(crate) fn word_slot(key: &WordKey) -> usize {
    let mut h = key[0].wrapping_mul(MUL);
    h = (h ^ key[1]).wrapping_mul(MUL);
    h = (h ^ key[2] ^ key[3]).wrapping_mul(MUL);
    (h >> (64 - WORD_SLOT_BITS)) as usize
}

/// The first slot to probe for a packed fingerprint (see `keywords::fingerprint_key`).
#[inline]
pub(crate) fn fp_slot(key: u64) -> usize {
    (key.wrapping_mul(MUL) >> (64 - FP_SLOT_BITS)) as usize
}
