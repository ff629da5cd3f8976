//! The literal back-end: one Aho-Corasick automaton per group over the literals that every
//! match of a rule must contain (`operators::rx_literals`, `@pm` phrases).

use std::collections::HashMap;

use super::automaton::LiteralAutomaton;
use super::{set_bit, ScanScratch, Scanner};

/// Groups with more literals than this get a contiguous NFA instead of a DFA. CRS's two
/// groups of 456 and 493 literals took 3.5 MB as DFAs and 0.2 MB as NFAs (CRS heap peak
/// 34.2 MB -> 30.4 MB at 400), for +0.3 % instructions per GET: they are read by few
/// values.
pub(super) const DFA_MAX_LITERALS: usize = 400;

/// The automaton of one group.
#[derive(Debug)]
pub(crate) struct LiteralScanner {
    automaton: LiteralAutomaton,
    /// For each automaton pattern, the bits (rules) it enables.
    pattern_bits: Vec<Vec<u32>>,
}

impl LiteralScanner {
    /// Builds the automaton of `literals` (literal → rule bits); `None` when there are none.
    pub(super) fn build(literals: HashMap<Vec<u8>, Vec<u32>>) -> Option<LiteralScanner> {
        if literals.is_empty() {
            return None;
        }
        let mut lits: Vec<(Vec<u8>, Vec<u32>)> = literals.into_iter().collect();
        lits.sort();
        // A DFA where it stays small: overlapping search on it follows no failure
        // transitions (the contiguous NFA was the top function of a CRS GET). Beyond
        // DFA_MAX_LITERALS the DFA grows to tens of MB (CRS: 75 MB in all, for 3-4 % fewer
        // instructions per request), so big groups get the compact NFA (8 MB in all).
        let dfa = lits.len() <= DFA_MAX_LITERALS;
        let automaton = LiteralAutomaton::build(lits.iter().map(|(l, _)| &l[..]), dfa)
            .expect("literal sets are bounded (MAX_LITERALS per rule), so the automaton fits");
        Some(LiteralScanner {
            automaton,
            pattern_bits: lits.into_iter().map(|(_, b)| b).collect(),
        })
    }
}

impl Scanner for LiteralScanner {
    fn scan(&self, input: &[u8], bits: &mut [u64], _: &mut ScanScratch) {
        self.automaton.for_each(input, |p| {
            for &bit in &self.pattern_bits[p as usize] {
                set_bit(bits, bit);
            }
        });
    }
}
