//! libinjection's word table: keyword, function, operator and type lookups, and the
//! fingerprint blacklist.
//!
//! C libinjection binary-searches one sorted table of about 9,350 entries (keywords and
//! `0`-prefixed fingerprints together) with a case-folding compare, about 14 string
//! compares per lookup. Here `build.rs` splits that table in two open-addressing hash
//! tables laid out at compile time:
//!
//! - words: upper-cased into a [`WordKey`] on the stack (no allocation; a word longer than
//!   the longest keyword is rejected before hashing), then one or two slot probes;
//! - fingerprints: up to 5 letters packed into a `u64`, then one or two probes.
//!
//! Splitting is exact: a word lookup can only reach a fingerprint entry with a word
//! starting with `0`, and words start with a letter, `_`, `$` or a byte ≥ 0x80 (digits go
//! to the number parser); backtick strings can hold `0…`, but there only a function type
//! counts, and merged words contain a space.

use super::hash::{
    fp_slot, word_filter_bit, word_key, word_key_buf, word_slot, WordKey, FP_SLOT_BITS,
    WORD_FILTER_BITS, WORD_KEY_MAX, WORD_SLOT_BITS,
};

include!(concat!(env!("OUT_DIR"), "/sqli_tables.rs"));

/// The type letter of `word` (any case) in libinjection's table, or `None` when it is not
/// there (`libinjection_sqli_lookup_word` with `LOOKUP_WORD`; `CHAR_NULL` is `None`).
#[inline]
pub(crate) fn lookup_word(word: &[u8]) -> Option<u8> {
    let (&first, &last) = (word.first()?, word.last()?);
    if !maybe_word(word.len(), first, last) {
        return None;
    }
    lookup_key(&word_key(word)?)
}

/// [`lookup_word`] of the first `len` bytes of `buf`.
#[inline]
pub(crate) fn lookup_buf(buf: &[u8; 32], len: usize) -> Option<u8> {
    if len == 0 || len > WORD_KEY_MAX || !maybe_word(len, buf[0], buf[len - 1]) {
        return None;
    }
    lookup_key(&word_key_buf(buf, len)?)
}

/// A filter in front of the hash table: false when no keyword has this length, first
/// and last letter. It rejects most non-keywords for about ten instructions, where
/// building the key and probing costs about a hundred (callgrind, `benches/detect.rs`).
#[inline(always)]
fn maybe_word(len: usize, first: u8, last: u8) -> bool {
    let bit = word_filter_bit(len, first, last);
    WORD_FILTER
        .get(bit / 64)
        .is_some_and(|w| w >> (bit % 64) & 1 == 1)
}

#[inline]
fn lookup_key(key: &WordKey) -> Option<u8> {
    let mask = (1usize << WORD_SLOT_BITS) - 1;
    let mut slot = word_slot(key);
    loop {
        let index = usize::from(WORD_SLOTS[slot & mask]);
        let entry = index.checked_sub(1)?;
        if WORD_KEYS.get(entry) == Some(key) {
            return WORD_KINDS.get(entry).copied();
        }
        slot = (slot + 1) & mask;
    }
}

/// Whether some multi-word entry (`UNION ALL`, `LOCK IN SHARE MODE`) starts with `word`
/// and a space: a quick filter before [`lookup_word`] on `"word next"`. It may say yes
/// wrongly (it only checks the length and first letter), never no wrongly.
#[inline]
pub(crate) fn may_start_phrase(word: &[u8]) -> bool {
    let Some(&first) = word.first() else {
        return false;
    };
    let letter = first.to_ascii_uppercase().wrapping_sub(b'A');
    letter < 26
        && PHRASE_STARTS
            .get(word.len())
            .is_some_and(|bits| bits >> letter & 1 == 1)
}

/// Whether `fingerprint` (the type letters, any case) is in libinjection's blacklist
/// (`libinjection_sqli_blacklist`: upper-cased, prefixed with `0`, looked up as type `F`).
#[inline]
pub(crate) fn is_blacklisted(fingerprint: &[u8]) -> bool {
    if fingerprint.is_empty() || fingerprint.len() > 8 {
        return false;
    }
    let mut eight = [0u8; 8];
    for (dst, &b) in eight.iter_mut().zip(fingerprint) {
        if b == 0 {
            return false;
        }
        *dst = b.to_ascii_uppercase();
    }
    let key = u64::from_le_bytes(eight);
    let mask = (1usize << FP_SLOT_BITS) - 1;
    let mut slot = fp_slot(key);
    loop {
        let entry = FP_SLOTS[slot & mask];
        if entry == key {
            return true;
        }
        if entry == 0 {
            return false;
        }
        slot = (slot + 1) & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(lookup_word(b"select"), Some(b'E'));
        assert_eq!(lookup_word(b"UNION"), Some(b'U'));
        assert_eq!(lookup_word(b"uNiOn AlL"), Some(b'U'));
        assert_eq!(lookup_word(b"||"), Some(b'&'));
        assert_eq!(lookup_word(b"sleep"), Some(b'f'));
        assert_eq!(lookup_word(b"selectx"), None);
        assert_eq!(lookup_word(b""), None);
        assert_eq!(lookup_word(b"select\0"), None);
        assert_eq!(lookup_word(&[b'a'; 40]), None);
    }

    #[test]
    fn fingerprints() {
        assert!(is_blacklisted(b"s&sos"));
        assert!(is_blacklisted(b"1UE"));
        assert!(!is_blacklisted(b"s"));
        assert!(!is_blacklisted(b""));
        assert!(!is_blacklisted(b"nnnnn"));
    }
}
