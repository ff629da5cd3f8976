//! Generates the SQLi lookup tables into `OUT_DIR` from libinjection's data.
//!
//! The data (libinjection's `sqlparse_data.json`: the character classes, about 1,000 SQL
//! keywords, functions and operators, and about 8,400 fingerprints) is read from the
//! `barbacane-libinjection` build dependency, which embeds it; it is not copied into this
//! repository and the crate does not link it. Out come two files:
//!
//! - `sqli_char_class.rs`: the 256-entry byte → [`Class`] table of the tokenizer;
//! - `sqli_tables.rs`: an open-addressing hash table of the keywords (upper-cased, packed
//!   into four `u64`) and one of the fingerprints (packed into a `u64`), laid out with the
//!   hash functions of `src/sqli/hash.rs`, so nothing is built at run time.

use std::fmt::Write as _;
use std::path::Path;

use libinjectionrs::sqli::sqli_data::{CharType, CHAR_MAP, SQL_KEYWORDS};

#[allow(dead_code)]
#[path = "src/sqli/hash.rs"]
mod hash;

/// Corrections to the dependency's table where it differs from libinjection 3.9.2 (the
/// oracle): `(word, Some(type))` adds or retypes a word, `(word, None)` removes it.
/// `tests/sqli_tables.rs` compares the generated tables with C's own lookup (every
/// fingerprint of up to five letters, every word of the table and of the corpus) and
/// `tests/sqli_differential.rs` the verdicts; both find no difference, so this is empty.
const OVERRIDES: &[(&str, Option<u8>)] = &[];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/sqli/hash.rs");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let out = Path::new(&out);
    std::fs::write(out.join("sqli_char_class.rs"), char_classes()).expect("write char classes");
    std::fs::write(out.join("sqli_tables.rs"), tables()).expect("write tables");
}

fn char_classes() -> String {
    let mut s = String::from("[\n");
    for (byte, class) in CHAR_MAP.iter().enumerate() {
        let name = match class {
            CharType::White => "White",
            CharType::Bang => "Op2",
            CharType::String => "String",
            CharType::Hash => "Hash",
            CharType::Money => "Money",
            CharType::Op1 => "Op1",
            CharType::Op2 => "Op2",
            CharType::LeftParens => "Char",
            CharType::RightParens => "Char",
            CharType::Unary => "Op1",
            CharType::Comma => "Char",
            CharType::Dash => "Dash",
            CharType::Number => "Number",
            CharType::Slash => "Slash",
            CharType::Semicolon => "Char",
            CharType::Variable => "Variable",
            CharType::Word => "Word",
            CharType::BString => "BString",
            CharType::EString => "EString",
            CharType::NQString => "NqString",
            CharType::QString => "QString",
            CharType::UString => "UString",
            CharType::XString => "XString",
            CharType::BWord => "BWord",
            CharType::Backslash => "Backslash",
            CharType::LeftBrace => "Char",
            CharType::RightBrace => "Char",
            CharType::Tick => "Tick",
            CharType::Other => "Other",
        };
        writeln!(s, "    Class::{name}, // {byte:#04x}").expect("write to String");
    }
    s.push(']');
    s
}

fn tables() -> String {
    let mut words: Vec<(String, u8)> = Vec::new();
    let mut fingerprints: Vec<u64> = Vec::new();
    for k in SQL_KEYWORDS {
        if OVERRIDES.iter().any(|(w, _)| *w == k.word) {
            continue;
        }
        if k.token_type == b'F' {
            fingerprints.push(fingerprint_key(k.word));
        } else {
            words.push((k.word.to_string(), k.token_type));
        }
    }
    for (w, t) in OVERRIDES {
        match t {
            Some(b'F') => fingerprints.push(fingerprint_key(w)),
            Some(t) => words.push((w.to_string(), *t)),
            None => {}
        }
    }

    // Keywords.
    let slots_len = 1usize << hash::WORD_SLOT_BITS;
    assert!(words.len() * 2 < slots_len, "keyword table too full");
    let mut slots = vec![0u16; slots_len];
    let mut keys = Vec::new();
    let mut max_probe = 0;
    for (w, t) in &words {
        let key = hash::word_key(w.as_bytes()).expect("every keyword fits a key");
        assert_eq!(w.to_ascii_uppercase(), *w, "keywords are upper case");
        let mut slot = hash::word_slot(&key);
        let mut probe = 0;
        while slots[slot] != 0 {
            assert!(
                keys[usize::from(slots[slot]) - 1] != (key, *t),
                "duplicate {w}"
            );
            slot = (slot + 1) & (slots_len - 1);
            probe += 1;
        }
        max_probe = max_probe.max(probe);
        keys.push((key, *t));
        slots[slot] = u16::try_from(keys.len()).expect("fewer than 65,536 keywords");
    }

    // Fingerprints.
    let fp_len = 1usize << hash::FP_SLOT_BITS;
    assert!(
        fingerprints.len() * 3 < fp_len * 2,
        "fingerprint table too full"
    );
    let mut fp_slots = vec![0u64; fp_len];
    for &key in &fingerprints {
        let mut slot = hash::fp_slot(key);
        while fp_slots[slot] != 0 {
            assert!(fp_slots[slot] != key, "duplicate fingerprint");
            slot = (slot + 1) & (fp_len - 1);
        }
        fp_slots[slot] = key;
    }

    // The length / first / last byte filter.
    let mut filter = vec![0u64; hash::WORD_FILTER_BITS / 64];
    for (w, _) in &words {
        let b = w.as_bytes();
        let bit = hash::word_filter_bit(b.len(), b[0], b[b.len() - 1]);
        filter[bit / 64] |= 1 << (bit % 64);
    }

    // First words (and word runs) of multi-word entries, by length and first letter.
    let mut phrase_starts = [0u32; 32];
    for (w, _) in &words {
        let mut end = 0;
        while let Some(space) = w[end..].find(' ') {
            let prefix = &w.as_bytes()[..end + space];
            let letter = prefix[0].wrapping_sub(b'A');
            assert!(letter < 26, "multi-word entries start with a letter: {w}");
            phrase_starts[prefix.len()] |= 1 << letter;
            end += space + 1;
        }
    }

    let mut s = String::new();
    writeln!(
        s,
        "// Generated by build.rs: {} keywords (longest probe {max_probe}), {} fingerprints.",
        keys.len(),
        fingerprints.len()
    )
    .expect("write");
    writeln!(s, "static WORD_SLOTS: [u16; {slots_len}] = {slots:?};").expect("write");
    writeln!(s, "static WORD_KEYS: [WordKey; {}] = [", keys.len()).expect("write");
    for (key, _) in &keys {
        writeln!(
            s,
            "    [{:#x}, {:#x}, {:#x}, {:#x}],",
            key[0], key[1], key[2], key[3]
        )
        .expect("write");
    }
    writeln!(s, "];").expect("write");
    let kinds: Vec<u8> = keys.iter().map(|(_, t)| *t).collect();
    writeln!(s, "static WORD_KINDS: [u8; {}] = {kinds:?};", kinds.len()).expect("write");
    writeln!(
        s,
        "static WORD_FILTER: [u64; WORD_FILTER_BITS / 64] = {filter:?};"
    )
    .expect("write");
    writeln!(s, "static PHRASE_STARTS: [u32; 32] = {phrase_starts:?};").expect("write");
    writeln!(s, "static FP_SLOTS: [u64; {fp_len}] = {fp_slots:?};").expect("write");
    s
}

/// The packed form of a fingerprint entry (`0` followed by up to 5 upper-case letters):
/// the letters after the `0`, little-endian, as `keywords::fingerprint_key` packs them.
fn fingerprint_key(word: &str) -> u64 {
    let letters = word
        .strip_prefix('0')
        .expect("fingerprints start with 0")
        .as_bytes();
    assert!(!letters.is_empty() && letters.len() <= 8, "{word}");
    let mut eight = [0u8; 8];
    eight[..letters.len()].copy_from_slice(letters);
    u64::from_le_bytes(eight)
}
