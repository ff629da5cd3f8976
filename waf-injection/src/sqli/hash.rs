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

/// Bits in the keyword filter: one per (length ≤ 31, first byte, last byte), the bytes
/// folded to their low five bits (so `a` and `A` share a bit).
pub(crate) const WORD_FILTER_BITS: usize = 32 * 32 * 32;

/// The bit of the keyword filter for a word of `len` bytes from `first` to `last`.
#[inline(always)]
pub(crate) fn word_filter_bit(len: usize, first: u8, last: u8) -> usize {
    (len & 31) << 10 | usize::from(first & 31) << 5 | usize::from(last & 31)
}

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// The key of `word` (upper-cased as libinjection's `cstrcasecmp` does: `a`-`z` only), or
/// `None` when it is too long to be a keyword.
#[inline]
pub(crate) fn word_key(word: &[u8]) -> Option<WordKey> {
    let mut buf = [0u8; 32];
    buf.get_mut(..word.len())?.copy_from_slice(word);
    word_key_buf(&buf, word.len())
}

/// The key of the first `len` bytes of `buf` (the bytes after them are ignored), or
/// `None` when `len` is over [`WORD_KEY_MAX`].
///
/// Upper-cases eight bytes at a time: a fixed ~30 instructions whatever the length, where
/// a byte loop cost about 8 per byte (callgrind, `benches/detect.rs`).
#[inline]
pub(crate) fn word_key_buf(buf: &[u8; 32], len: usize) -> Option<WordKey> {
    if len > WORD_KEY_MAX {
        return None;
    }
    let mut key = [0u64; 4];
    for (i, (k, chunk)) in key.iter_mut().zip(buf.chunks_exact(8)).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        let valid = len.saturating_sub(i * 8);
        let mask = if valid >= 8 {
            u64::MAX
        } else {
            (1u64 << (valid * 8)) - 1
        };
        *k = upper8(u64::from_le_bytes(eight) & mask);
    }
    key[3] |= (len as u64) << 56;
    Some(key)
}

/// `a`-`z` to `A`-`Z` in each byte of `w`; every other byte (≥ 0x80 included) unchanged.
#[inline(always)]
fn upper8(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low = w & LOW7;
    // Per byte, no carries: the low seven bits plus at most 0x1f stay below 0x100.
    let ge_a = low + 0x1f1f_1f1f_1f1f_1f1f; // high bit set when byte >= 'a'
    let gt_z = low + 0x0505_0505_0505_0505; // high bit set when byte > 'z'
    let lower = ge_a & !gt_z & !w & HIGH;
    w - (lower >> 2)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_case_every_byte() {
        for b in 0..=255u8 {
            let w = u64::from(b) * 0x0101_0101_0101_0101;
            let want = u64::from(b.to_ascii_uppercase()) * 0x0101_0101_0101_0101;
            assert_eq!(upper8(w), want, "{b:#x}");
        }
        assert_eq!(word_key(b"select"), word_key(b"SELECT"));
        assert_ne!(word_key(b"select"), word_key(b"select\0"));
        assert_eq!(word_key(&[b'a'; 31]), None);
    }
}
