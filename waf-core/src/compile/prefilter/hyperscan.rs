//! The Hyperscan back-end (cargo feature `hyperscan`): one block-mode database per group of
//! the group's `@rx` patterns that have no literal set, scanned once per (value, group).
//!
//! Every pattern is compiled with the flags the `regex` crate runs it with (`DOTALL`,
//! `MULTILINE`, bytes not UTF-8), plus `SINGLEMATCH` (a rule only needs to know *whether*
//! it may match) and `PREFILTER` (Hyperscan may report a superset of the matches, which
//! lets it accept constructs it could not run exactly, and bound its compile size). The
//! rule then confirms with its own regex, so Hyperscan decides speed, never results.
//!
//! Patterns that can match the empty string never get here (`Rx::scan_pattern`): Hyperscan
//! refuses them ("matches an empty buffer", the `!@rx ^$` trap), and they would pass every
//! value anyway. A pattern Hyperscan still refuses is named by the compile error; it is
//! taken out and the rest compiled again, so one odd pattern costs its rule the fast path,
//! not the group.
//!
//! Scratch space: Hyperscan needs a scratch per concurrent scan. One prototype is grown
//! over every database of the program at load; each pooled transaction cache clones it
//! once (`hs_clone_scratch`, under a lock taken only then) and keeps it, so the request path
//! neither allocates one nor shares one between threads.

use std::sync::{Arc, Mutex};

use hyperscan::{BlockDatabase, BlockMode, Builder, Matching, Pattern, PatternFlags, Patterns};

use super::{set_bit, Candidate, ScanScratch, Scanner};

/// The database of one group.
pub(crate) struct HyperscanScanner {
    db: BlockDatabase,
    /// The bits of the patterns in `db` (the match id is the bit).
    bits: Vec<u32>,
    /// A scratch valid for every database of the program (set by [`share_scratch`]),
    /// only ever cloned: locked once per new transaction cache, never per scan.
    prototype: Option<Arc<Mutex<hyperscan::Scratch>>>,
}

impl std::fmt::Debug for HyperscanScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HyperscanScanner")
            .field("patterns", &self.bits.len())
            .finish()
    }
}

/// Values shorter than this are not scanned: every pattern of the database is then a
/// candidate. Measured with callgrind (benches/PROFILE.md, "Hyperscan"): a block-mode scan
/// of a CRS group costs about 3,000 instructions before the first byte, more than the few
/// regexes it would rule out on a short value.
const MIN_SCAN_LEN: usize = 128;

impl HyperscanScanner {
    /// Whether a value of `len` bytes is not scanned: a short value costs less to check
    /// with each candidate's regex than to scan (and one past `u32` cannot be).
    pub(crate) fn skips(&self, len: usize) -> bool {
        len < MIN_SCAN_LEN || u32::try_from(len).is_err()
    }

    /// Sets the bit of every pattern of the database: what a value that is not scanned
    /// gets.
    pub(crate) fn set_all(&self, bits: &mut [u64]) {
        for &b in &self.bits {
            set_bit(bits, b);
        }
    }
}

/// Flags of every pattern (see the module docs).
fn flags() -> PatternFlags {
    PatternFlags::DOTALL
        | PatternFlags::MULTILINE
        | PatternFlags::SINGLEMATCH
        | PatternFlags::PREFILTER
}

impl HyperscanScanner {
    /// Compiles `candidates` into one database; returns it (if any pattern compiled) and
    /// the indices of the candidates Hyperscan refused.
    pub(super) fn build(candidates: &[Candidate]) -> (Option<HyperscanScanner>, Vec<usize>) {
        let mut refused = Vec::new();
        let mut live: Vec<usize> = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            // A NUL cannot cross the C API.
            if c.pattern.contains('\0') {
                refused.push(i);
            } else {
                live.push(i);
            }
        }
        while !live.is_empty() {
            let patterns: Vec<Pattern> = live
                .iter()
                .map(|&i| Pattern {
                    expression: candidates[i].pattern.clone(),
                    flags: flags(),
                    id: Some(candidates[i].bit as usize),
                    ext: Default::default(),
                    som: None,
                })
                .collect();
            match Patterns(patterns).build::<BlockMode>() {
                Ok(db) => {
                    let bits = live.iter().map(|&i| candidates[i].bit).collect();
                    return (
                        Some(HyperscanScanner {
                            db,
                            bits,
                            prototype: None,
                        }),
                        refused,
                    );
                }
                Err(e) => match failed_expression(&e) {
                    Some(k) if k < live.len() => refused.push(live.remove(k)),
                    // An error naming no pattern (out of memory, a database too large):
                    // the whole group keeps the literal back-end.
                    _ => {
                        refused.append(&mut live);
                    }
                },
            }
        }
        refused.sort_unstable();
        (None, refused)
    }
}

/// The index of the expression a compile error names, if it names one.
fn failed_expression(e: &hyperscan::Error) -> Option<usize> {
    match e {
        hyperscan::Error::Hyperscan(hyperscan::HsError::CompileError(c)) => c.expression(),
        _ => None,
    }
}

/// Grows one scratch over every database and gives each scanner a handle on it.
pub(super) fn share_scratch<'a>(scanners: impl Iterator<Item = &'a mut HyperscanScanner>) {
    let scanners: Vec<&mut HyperscanScanner> = scanners.collect();
    let mut prototype: Option<hyperscan::Scratch> = None;
    for s in &scanners {
        match &mut prototype {
            None => prototype = s.db.alloc_scratch().ok(),
            Some(p) => {
                // A failure leaves the prototype too small for this database; its scans
                // then grow their own copy (see `scan`).
                let _ = s.db.realloc_scratch(p);
            }
        }
    }
    let prototype = prototype.map(|p| Arc::new(Mutex::new(p)));
    for s in scanners {
        s.prototype = prototype.clone();
    }
}

impl HyperscanScanner {
    /// The scratch of this transaction, cloned from the prototype on first use.
    fn scratch<'s>(&self, scratch: &'s mut ScanScratch) -> Option<&'s mut hyperscan::Scratch> {
        if scratch.hyperscan.is_none() {
            scratch.hyperscan = match &self.prototype {
                Some(p) => p.lock().ok().map(|p| p.clone()),
                None => self.db.alloc_scratch().ok(),
            }
            .map(Mutex::new);
        }
        scratch.hyperscan.as_mut().and_then(|m| m.get_mut().ok())
    }
}

impl Scanner for HyperscanScanner {
    fn scan(&self, input: &[u8], bits: &mut [u64], scratch: &mut ScanScratch) {
        let fail_open = |bits: &mut [u64]| self.set_all(bits);
        if self.skips(input.len()) {
            return fail_open(bits);
        }
        let Some(s) = self.scratch(scratch) else {
            return fail_open(bits);
        };
        let run = |s: &hyperscan::Scratch, bits: &mut [u64]| {
            self.db
                .scan(input, s, |id: u32, _from: u64, _to: u64, _flags: u32| {
                    set_bit(bits, id);
                    Matching::Continue
                })
        };
        if run(s, bits).is_err() {
            // A scratch too small for this database (the prototype could not grow): grow
            // this copy and try once more; failing that, every pattern is a candidate.
            if self.db.realloc_scratch(s).is_err() || run(s, bits).is_err() {
                fail_open(bits);
            }
        }
    }
}
