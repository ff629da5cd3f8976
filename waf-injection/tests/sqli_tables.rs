//! The tables `build.rs` generates from `barbacane-libinjection`'s copy of libinjection's
//! data, checked against the C library's own lookup (`libinjection_sqli_lookup_word`,
//! exported by libmodsecurity.so.3) rather than only through verdicts:
//!
//! - every fingerprint of one to five letters over the token alphabet (about 10 million):
//!   blacklisted here exactly when C's table has it;
//! - every word of the dependency's table, and every word and word pair of the
//!   differential corpus: the same type letter here and in C.

mod common;

use std::collections::HashSet;
use std::ffi::{c_char, c_int};

use libloading::Library;

use waf_injection::sqli::internal::{is_blacklisted, lookup_word};

/// `LOOKUP_WORD` of `enum lookup_type` (libinjection_sqli.h).
const LOOKUP_WORD: c_int = 1;

type LookupFn = unsafe extern "C" fn(*mut u8, c_int, *const c_char, usize) -> c_char;

/// C's table, through `libinjection_sqli_lookup_word`.
struct CTable {
    lookup: LookupFn,
    /// A zeroed `libinjection_sqli_state` stand-in: `LOOKUP_WORD` never reads it.
    state: Vec<u8>,
    _lib: Library,
}

impl CTable {
    fn load() -> CTable {
        let path = std::env::var("WAF_INJECTION_ORACLE")
            .unwrap_or_else(|_| "/usr/lib/x86_64-linux-gnu/libmodsecurity.so.3".into());
        // SAFETY: the symbol is libinjection 3.9.2's `libinjection_sqli_lookup_word`, with
        // the signature of its header.
        unsafe {
            let lib = Library::new(&path).expect("load the libinjection oracle");
            let lookup = *lib
                .get::<LookupFn>(b"libinjection_sqli_lookup_word\0")
                .expect("libinjection_sqli_lookup_word");
            CTable {
                lookup,
                state: vec![0; 1 << 16],
                _lib: lib,
            }
        }
    }

    /// The type letter of `word`, or `None` (`CHAR_NULL`).
    fn lookup(&mut self, word: &[u8]) -> Option<u8> {
        // SAFETY: the pointer and length describe a live slice; with `LOOKUP_WORD` the C
        // function only binary-searches its static table (the state buffer is a zeroed
        // block larger than the C struct).
        let t = unsafe {
            (self.lookup)(
                self.state.as_mut_ptr(),
                LOOKUP_WORD,
                word.as_ptr().cast(),
                word.len(),
            )
        };
        (t != 0).then_some(t as u8)
    }
}

#[test]
fn fingerprints_match_the_c_table() {
    const ALPHABET: &[u8] = b"KUBETFN1VSO&CA(){}.,:;?X\\";
    let mut c = CTable::load();
    let mut checked = 0usize;
    let mut blacklisted = 0usize;
    let mut differences = Vec::new();
    let mut fp = Vec::with_capacity(5);
    let mut key = Vec::with_capacity(6);
    for len in 1..=5u32 {
        for mut n in 0..ALPHABET.len().pow(len) {
            fp.clear();
            for _ in 0..len {
                fp.push(ALPHABET[n % ALPHABET.len()]);
                n /= ALPHABET.len();
            }
            key.clear();
            key.push(b'0');
            key.extend_from_slice(&fp);
            let theirs = c.lookup(&key) == Some(b'F');
            let ours = is_blacklisted(&fp) && is_blacklisted(&fp.to_ascii_lowercase());
            checked += 1;
            blacklisted += usize::from(theirs);
            if ours != theirs {
                differences.push((fp.clone(), ours, theirs));
            }
        }
    }
    eprintln!(
        "sqli fingerprints: {checked} checked, {blacklisted} blacklisted by C, {} differences",
        differences.len()
    );
    for (fp, ours, theirs) in differences.iter().take(20) {
        eprintln!("  {}: ours {ours}, C {theirs}", fp.escape_ascii());
    }
    assert!(differences.is_empty());
}

#[test]
fn words_match_the_c_table() {
    let mut c = CTable::load();
    let mut words: HashSet<Vec<u8>> = libinjectionrs::sqli::sqli_data::SQL_KEYWORDS
        .iter()
        .map(|k| k.word.as_bytes().to_vec())
        .collect();
    // Every word-like run of the corpus, lower-cased too, and each pair of neighbours.
    for input in common::corpus::all() {
        let runs: Vec<&[u8]> = input
            .split(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$' | b'@')))
            .filter(|w| !w.is_empty() && w.len() <= 32)
            .collect();
        for w in &runs {
            words.insert(w.to_vec());
            words.insert(w.to_ascii_lowercase());
        }
        for pair in runs.windows(2) {
            words.insert([pair[0], b" ", pair[1]].concat());
        }
    }
    let mut differences = Vec::new();
    for w in &words {
        let theirs = c.lookup(w);
        if theirs == Some(b'F') {
            // Fingerprints live in their own table here (checked above).
            continue;
        }
        let ours = lookup_word(w);
        if ours != theirs {
            differences.push((w.clone(), ours, theirs));
        }
    }
    eprintln!(
        "sqli words: {} checked, {} differences",
        words.len(),
        differences.len()
    );
    for (w, ours, theirs) in differences.iter().take(20) {
        eprintln!(
            "  {}: ours {:?}, C {:?}",
            w.escape_ascii(),
            ours.map(char::from),
            theirs.map(char::from)
        );
    }
    assert!(differences.is_empty());
}
