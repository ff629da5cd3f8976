//! The multi-pattern prefilter: which `@rx` rules can possibly match a value.
//!
//! Over 95 % of `@rx` evaluations on benign traffic return false (Coraza measured this on
//! CRS), and each costs a regex call. Rules that transform a value the same way see the
//! same bytes, so for each transformation chain we build one Aho-Corasick automaton over
//! the literals of every `@rx` rule using that chain (see `operators::rx_literals`). One
//! scan of the transformed value then tells which of those rules can match; the others
//! are answered "no match" without running their regex. The answer is cached per
//! (value, chain) for the phase, like the transformed value itself.
//!
//! A prefilter never yields a false negative: a rule gets one only when every match of its
//! regex starts with one of its literals, and the scan ignores ASCII case, which only
//! widens what it accepts. `tests/prefilter.rs` checks verdicts with and without it.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::Rule;
use crate::transformations::Transformation;

/// The automaton of one transformation chain.
#[derive(Debug)]
pub(crate) struct Prefilter {
    automaton: AhoCorasick,
    /// For each automaton pattern, the bits (rules) it enables.
    pattern_bits: Vec<Vec<u32>>,
    /// Number of 64-bit words in a bit set.
    pub(crate) words: usize,
    /// The transformation chain every rule of the group uses, and its prefix ids (for
    /// the plan's summaries, which transform values on the group's behalf).
    pub(crate) chain: Vec<Transformation>,
    pub(crate) prefix_ids: Vec<u32>,
}

impl Prefilter {
    /// Sets in `bits` (`words` long, zeroed) the bit of every rule whose literal occurs in
    /// `input`.
    pub(crate) fn scan(&self, input: &[u8], bits: &mut [u64]) {
        for m in self.automaton.find_overlapping_iter(input) {
            for &bit in &self.pattern_bits[m.pattern().as_usize()] {
                bits[bit as usize / 64] |= 1 << (bit % 64);
            }
        }
    }
}

/// A rule's place in the prefilters: its chain's automaton and its bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PrefilterRef {
    pub(crate) group: u32,
    pub(crate) bit: u32,
}

/// A prefilter being built: its index, literal → rule bits, and the number of bits.
#[derive(Default)]
struct GroupDraft {
    index: u32,
    literals: HashMap<Vec<u8>, Vec<u32>>,
    bits: u32,
    chain: Vec<Transformation>,
    prefix_ids: Vec<u32>,
}

/// Whether a literal is rare enough in ordinary values to be worth a place in an automaton.
/// A rule with a one-letter literal (a regex like `[a-z]+\(` gives every letter) passes
/// its prefilter on almost every value, so it would only add matches to every scan; such
/// rules run their operator directly. (Measured with callgrind on CRS: leaving out also
/// two-letter words such as `or` or common punctuation such as `/` costs more regex calls
/// than it saves in scans.)
fn selective(literal: &[u8]) -> bool {
    !matches!(literal, [b] if b.is_ascii_alphanumeric())
}

/// Groups with more literals than this get a contiguous NFA instead of a DFA.
const DFA_MAX_LITERALS: usize = 500;

/// Gives every eligible rule (chained ones too) a [`PrefilterRef`] and builds the
/// automata.
pub(crate) fn build(rules: &mut [Rule]) -> Vec<Prefilter> {
    // Keyed by the phase and the chain's last prefix id (`u32::MAX`: no transformation).
    let mut groups: HashMap<(u8, u32), GroupDraft> = HashMap::new();
    fn visit(rule: &mut Rule, phase: u8, groups: &mut HashMap<(u8, u32), GroupDraft>) {
        if let Some(op) = &rule.operator {
            if !rule.multi_match {
                if let Some(literals) = op
                    .operator
                    .required_literals()
                    .filter(|l| l.iter().all(|l| selective(l)))
                {
                    let chain_key = rule.prefix_ids.last().copied().unwrap_or(u32::MAX);
                    let next_group = groups.len() as u32;
                    let draft = groups
                        .entry((phase, chain_key))
                        .or_insert_with(|| GroupDraft {
                            index: next_group,
                            chain: rule.transformations.clone(),
                            prefix_ids: rule.prefix_ids.clone(),
                            ..GroupDraft::default()
                        });
                    let bit = draft.bits;
                    draft.bits += 1;
                    for l in literals {
                        draft.literals.entry(l.clone()).or_default().push(bit);
                    }
                    rule.prefilter = Some(PrefilterRef {
                        group: draft.index,
                        bit,
                    });
                }
            }
        }
        if let Some(child) = &mut rule.chain {
            visit(child, phase, groups);
        }
    }
    for rule in rules.iter_mut() {
        let phase = rule.phase;
        visit(rule, phase, &mut groups);
    }
    let mut out: Vec<(u32, Prefilter)> = Vec::new();
    for (_, mut draft) in groups {
        let (group, count) = (draft.index, draft.bits);
        let literals = std::mem::take(&mut draft.literals);
        let mut lits: Vec<(Vec<u8>, Vec<u32>)> = literals.into_iter().collect();
        lits.sort();
        // A DFA where it stays small: overlapping search on it follows no failure
        // transitions (the contiguous NFA was the top function of a CRS GET). Beyond
        // DFA_MAX_LITERALS the DFA grows to tens of MB (CRS: 75 MB in all, for 3-4 % fewer
        // instructions per request), so big groups get the compact NFA (8 MB in all).
        let kind = if lits.len() <= DFA_MAX_LITERALS {
            AhoCorasickKind::DFA
        } else {
            AhoCorasickKind::ContiguousNFA
        };
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(kind))
            .match_kind(MatchKind::Standard)
            .build(lits.iter().map(|(l, _)| l))
            .expect("literal sets are bounded (MAX_LITERALS per rule), so the automaton fits");
        out.push((
            group,
            Prefilter {
                automaton,
                pattern_bits: lits.into_iter().map(|(_, b)| b).collect(),
                words: (count as usize).div_ceil(64),
                chain: draft.chain,
                prefix_ids: draft.prefix_ids,
            },
        ));
    }
    out.sort_by_key(|(g, _)| *g);
    out.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use crate::Waf;

    /// How many CRS `@rx` rules get a prefilter (printed; asserted loosely so a regression
    /// in literal extraction shows).
    #[test]
    fn most_crs_regexes_are_prefiltered() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs");
        assert!(
            std::path::Path::new(dir).join("rules").is_dir(),
            "CRS missing at {dir} (the shared CRS checkout beside the repo)"
        );
        let waf = Waf::builder()
            .seclang_file(format!("{dir}/crs-setup.conf.example"))
            .seclang_glob(format!("{dir}/rules/*.conf"))
            .build()
            .unwrap();
        let (mut rx, mut with) = (0, 0);
        let mut without = Vec::new();
        fn walk(
            r: &crate::compile::Rule,
            head: u64,
            rx: &mut usize,
            with: &mut usize,
            without: &mut Vec<u64>,
        ) {
            if let Some(op) = &r.operator {
                if matches!(op.operator, crate::operators::Operator::Rx(_)) {
                    *rx += 1;
                    if r.prefilter.is_some() {
                        *with += 1;
                    } else {
                        without.push(head);
                    }
                }
            }
            if let Some(c) = &r.chain {
                walk(c, head, rx, with, without);
            }
        }
        for r in &waf.program.rules {
            walk(r, r.id, &mut rx, &mut with, &mut without);
        }
        println!("{with} of {rx} @rx rules prefiltered; without: {without:?}");
        assert!(with * 10 >= rx * 7, "{with} of {rx}");
    }
}
