//! The multi-pattern prefilter: which `@rx` and `@pm` rules can possibly match a value.
//!
//! Over 95 % of `@rx` evaluations on benign traffic return false (Coraza measured this on
//! CRS), and each costs a regex call. Rules that transform a value the same way see the
//! same bytes, so the rules of each (phase, transformation chain) form one *group*, and one
//! scan of the transformed value tells which rules of the group can match it; the others are
//! answered "no match" without running their operator. The answer is cached per (value,
//! group) for the transaction, like the transformed value itself.
//!
//! A group gathers rules that read different variables, and a value is read only by the
//! rules that name its variable. Where only one variable reads a value (headers, cookies
//! and their names, single values: `eval::data::reader_of`) and that variable's rules hold
//! at most half of the group's literals, the value is scanned with an automaton over
//! those literals alone ([`Prefilter::scan_for`]): in CRS's phase 2 `t:none` group the
//! rules that read `REQUEST_HEADERS` hold 154 of 3,598 literals, and a GET's header values
//! were read by the NFA of all of them.
//!
//! # Back-ends
//!
//! A group's scan is done by one or two back-ends behind [`Scanner`], each setting the bits
//! of the rules it may let through:
//!
//! - [`literals`] (always built, pure Rust): one Aho-Corasick automaton over the literals
//!   every match of a rule must contain (`operators::rx_literals`, and `@pm` phrases). A
//!   rule without a selective literal set gets no bit and runs its operator on every value.
//! - `hyperscan` (the `hyperscan` cargo feature, [`ScanBackend::Hyperscan`]): one
//!   Hyperscan database of the group's `@rx` patterns that have no literal set (the rest
//!   keep the automaton, measured faster), compiled in prefilter mode (a superset of the
//!   regex's matches), and scanned on values of 128 bytes or more. A pattern Hyperscan
//!   cannot compile (one that matches the empty string, one with Unicode classes, one it
//!   refuses) is let through on every value.
//!
//! Either way a set bit only makes a rule a *candidate*: the rule still runs its own
//! operator (the `regex` crate for `@rx`), so matched data, captures and verdicts never
//! depend on the back-end. `tests/plan` checks this for both back-ends.
//!
//! # Soundness
//!
//! A prefilter never yields a false negative: a rule gets a literal set only when every
//! match of its regex contains one of its literals, and the literal scan ignores ASCII case,
//! which only widens what it accepts; Hyperscan's prefilter mode promises a superset of the
//! pattern's matches, and a scan that fails for any reason sets every bit of the group.

use std::collections::HashMap;
use std::fmt;

use super::Rule;
use crate::transformations::Transformation;
use crate::variables::Variable;

mod automaton;
#[cfg(feature = "hyperscan")]
mod hyperscan;
pub(crate) mod literals;

/// Which multi-pattern engine scans values for the prefilter (see the module docs of
/// `compile::prefilter`). Results never depend on it; speed and load time do.
///
/// The default is the literal back-end even in a build with Hyperscan: on CRS it is the
/// faster one (`benches/PROFILE.md`, "Hyperscan": with Hyperscan a CRS GET costs about the
/// same and a 10 KB JSON or form body 14-33 % more instructions), so Hyperscan is chosen
/// explicitly, for rule sets whose patterns have no literals to prefilter on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanBackend {
    /// The measured faster one for CRS: [`ScanBackend::Literals`].
    #[default]
    Auto,
    /// Aho-Corasick over each rule's required literals (pure Rust, builds everywhere).
    Literals,
    /// Hyperscan databases of the `@rx` patterns, literals for the rest. Needs the
    /// `hyperscan` cargo feature; without it, [`crate::WafBuilder::build`] fails.
    Hyperscan,
}

impl ScanBackend {
    /// Whether this build can use Hyperscan (the `hyperscan` feature).
    pub const HYPERSCAN_AVAILABLE: bool = cfg!(feature = "hyperscan");

    /// The back-end [`ScanBackend::Auto`] stands for.
    pub fn resolve(self) -> ScanBackend {
        match self {
            ScanBackend::Auto => ScanBackend::Literals,
            other => other,
        }
    }
}

/// What a prefilter back-end does: set the bit of every rule of its group that may match.
pub(crate) trait Scanner: fmt::Debug + Send + Sync {
    /// Sets in `bits` (zeroed by the caller, one bit per rule of the group) the bit of every
    /// rule that may match `input`. Must never leave out a rule that matches; extra bits
    /// only cost an operator call.
    fn scan(&self, input: &[u8], bits: &mut [u64], scratch: &mut ScanScratch);
}

/// Per-transaction working memory of the back-ends, kept with the transformation cache (so
/// pooled with it, never shared between threads). Empty for the literal back-end.
#[derive(Default)]
pub(crate) struct ScanScratch {
    /// In a `Mutex` only to be `Sync` (a `Transaction` is): reached through `&mut` with
    /// `get_mut`, it is never locked.
    #[cfg(feature = "hyperscan")]
    hyperscan: Option<std::sync::Mutex<::hyperscan::Scratch>>,
}

impl fmt::Debug for ScanScratch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScanScratch").finish_non_exhaustive()
    }
}

/// The scanners of one group.
#[derive(Debug)]
pub(crate) struct Prefilter {
    literals: Option<literals::LiteralScanner>,
    /// Automata over only the literals of the rules that read one variable, for the
    /// variables whose values no other variable reads ([`narrowable`]) and whose rules
    /// hold at most half of the group's literals: CRS's phase 2 `t:none` group has 3,598
    /// literals, of which the rules reading `REQUEST_HEADERS` hold 154.
    narrow: Vec<(Variable, literals::LiteralScanner)>,
    /// This group's place in the program's [`Union`] scan, when it has literals: one scan
    /// of a value answers every group whose chain left the value unchanged but for ASCII
    /// case (see [`Union`]).
    pub(crate) union: Option<(std::sync::Arc<Union>, u32)>,
    /// Which of the program's unions holds the group's literals (see [`Union`]), if any.
    in_union: Option<usize>,
    #[cfg(feature = "hyperscan")]
    hyperscan: Option<hyperscan::HyperscanScanner>,
    /// Bits set on every scan: rules whose pattern a back-end refused after they got a bit.
    always: Vec<u32>,
    /// Number of 64-bit words in a bit set.
    pub(crate) words: usize,
    /// The transformation chain every rule of the group uses, and its prefix ids (for
    /// the plan's summaries, which transform values on the group's behalf).
    pub(crate) chain: Vec<Transformation>,
    pub(crate) prefix_ids: Vec<u32>,
    /// The byte classes ([`crate::transformations::features`]) that can make a step of
    /// `chain` other than `t:lowercase` change a value: a value holding none of them
    /// leaves the chain unchanged but for ASCII case, so the union's hits on its raw
    /// bytes answer for the group without transforming it.
    pub(crate) case_only_unless: crate::transformations::features::Features,
}

impl Prefilter {
    /// [`Prefilter::scan`] for a value that only `reader` reads (`None`: unknown or
    /// several): the bits of the rules that read `reader` are the same, others may be left
    /// out.
    pub(crate) fn scan_for(
        &self,
        reader: Option<Variable>,
        input: &[u8],
        bits: &mut [u64],
        scratch: &mut ScanScratch,
    ) {
        let narrow = reader.and_then(|v| self.narrow.iter().find(|(n, _)| *n == v));
        let Some((_, scanner)) = narrow else {
            return self.scan(input, bits, scratch);
        };
        scanner.scan(input, bits, scratch);
        self.scan_beside_literals(input, bits, scratch);
    }

    /// Sets in `bits` (`words` long, zeroed) the bit of every rule of the group that may
    /// match `input`.
    fn scan(&self, input: &[u8], bits: &mut [u64], scratch: &mut ScanScratch) {
        if let Some(l) = &self.literals {
            l.scan(input, bits, scratch);
        }
        #[cfg(feature = "hyperscan")]
        if let Some(h) = &self.hyperscan {
            h.scan(input, bits, scratch);
        }
        for &bit in &self.always {
            set_bit(bits, bit);
        }
    }

    /// What [`Prefilter::scan`] adds to the literal back-end's bits: the Hyperscan
    /// database's and the bits set on every scan. With [`Prefilter::union`], the literal
    /// bits come from the union scan and this does the rest.
    pub(crate) fn scan_beside_literals(
        &self,
        input: &[u8],
        bits: &mut [u64],
        scratch: &mut ScanScratch,
    ) {
        #[cfg(feature = "hyperscan")]
        if let Some(h) = &self.hyperscan {
            h.scan(input, bits, scratch);
        }
        #[cfg(not(feature = "hyperscan"))]
        let _ = (input, scratch);
        for &bit in &self.always {
            set_bit(bits, bit);
        }
    }

    /// The group's bits for a value its chain leaves unchanged but for ASCII case, from
    /// the union patterns found in the value's raw bytes (`hits`); `len` is the value's
    /// length. `None` when that does not decide them: no union, or a Hyperscan database
    /// that must read the value (one long enough to scan; a shorter one gets every
    /// pattern of the database, as the scan would give it).
    pub(crate) fn bits_from_hits(&self, hits: &[u32], len: usize, bits: &mut [u64]) -> Option<()> {
        let (union, group) = self.union.as_ref()?;
        #[cfg(feature = "hyperscan")]
        if let Some(h) = &self.hyperscan {
            if !h.skips(len) {
                return None;
            }
            h.set_all(bits);
        }
        #[cfg(not(feature = "hyperscan"))]
        let _ = len;
        union.bits_of(hits, *group, bits);
        for &bit in &self.always {
            set_bit(bits, bit);
        }
        Some(())
    }

    /// Whether [`Prefilter::bits_from_hits`] may decide this group's bits (it has a place
    /// in the union).
    pub(crate) fn decides_from_hits(&self) -> bool {
        self.union.is_some()
    }

    /// Whether the group has a Hyperscan database (never without the `hyperscan`
    /// feature): then [`Prefilter::bits_from_hits`] needs the value's length.
    pub(crate) fn has_hyperscan(&self) -> bool {
        #[cfg(feature = "hyperscan")]
        if self.hyperscan.is_some() {
            return true;
        }
        false
    }

    /// Whether some rule of the group gets its bit on every value (no literals to
    /// prefilter on).
    pub(crate) fn sets_always(&self) -> bool {
        !self.always.is_empty()
    }
}

/// (group, bit) pairs that one union pattern enables.
type GroupBits = Vec<(u32, u32)>;

/// A group's literals, each with the bits (rules) it enables.
type LiteralBits = HashMap<Vec<u8>, Vec<u32>>;

/// The literals of the rules of a group that read each narrowed variable (see
/// [`Prefilter::scan_for`]).
type NarrowBits = Vec<(Variable, LiteralBits)>;

/// One Aho-Corasick automaton over the literals of every group (ASCII case ignored, as
/// each group's own automaton ignores it).
///
/// CRS reads the same values through about 40 transformation chains, and on ordinary
/// values most chains change nothing, or only letter case (`t:lowercase`). Every such
/// (value, group) scan used to read the same bytes again with the group's automaton. The
/// union automaton reads a value once per transaction; its matches, scattered into each
/// group's bits, are exactly what the group's automaton would have found on that value
/// (or on a case variant of it: both ignore ASCII case). Groups whose chain did change the
/// value scan the transformed value with their own automaton, as before.
///
/// There are two ([`UNIONS`]): one over the groups small enough for a DFA of their own
/// ([`SMALL_UNION`]), and one over the request phases' big groups (over
/// [`literals::DFA_MAX_LITERALS`] literals: CRS's `t:none` and `t:urlDecodeUni` groups of
/// phases 1 and 2, which hold the big `@pmFromFile` lists). A value of a big collection
/// was scanned by every big group whose rules read it, each a contiguous NFA at about 50
/// instructions a byte (four or five scans per value of a JSON body); the big union reads
/// it once, for the candidate lists of big collections only (a GET's few values cost more
/// through it). Kept apart from the small groups' union, which every value pays for and
/// which would grow several times (CRS: 2,062 literals, 0.4 MB, against 6,553, 1.0 MB).
#[derive(Debug)]
pub(crate) struct Union {
    /// Which union this is (`0..UNIONS`): the transaction keeps each one's hits apart.
    pub(crate) index: usize,
    automaton: automaton::LiteralAutomaton,
    /// For each union pattern, the (group, bit) pairs it enables, sorted by group.
    entries: Vec<GroupBits>,
}

/// The number of unions a program has (see [`Union`]): [`SMALL_UNION`] and the big groups'.
pub(crate) const UNIONS: usize = 2;

/// The index of the union over the groups small enough for a DFA.
pub(crate) const SMALL_UNION: usize = 0;

/// The index of the union over the request phases' big groups.
const BIG_UNION: usize = 1;

impl Union {
    /// Builds union `index` of the groups' literal sets (literal → (group, bit) pairs).
    fn build(literals: HashMap<Vec<u8>, GroupBits>, index: usize) -> Option<Union> {
        if literals.is_empty() {
            return None;
        }
        let mut lits: Vec<_> = literals.into_iter().collect();
        lits.sort();
        let automaton =
            automaton::LiteralAutomaton::build(lits.iter().map(|(l, _)| &l[..]), false).ok()?;
        Some(Union {
            index,
            automaton,
            entries: lits
                .into_iter()
                .map(|(_, mut e)| {
                    e.sort_unstable();
                    e.dedup();
                    e
                })
                .collect(),
        })
    }

    /// Appends to `hits` the distinct patterns that occur in `input`.
    pub(crate) fn scan(&self, input: &[u8], hits: &mut Vec<u32>) {
        let start = hits.len();
        self.automaton.for_each(input, |p| hits.push(p));
        if hits.len() - start > 1 {
            hits[start..].sort_unstable();
            let mut w = start + 1;
            for r in start + 1..hits.len() {
                if hits[r] != hits[w - 1] {
                    hits[w] = hits[r];
                    w += 1;
                }
            }
            hits.truncate(w);
        }
    }

    /// Sets in `bits` the bits of `group` that the patterns `hits` enable.
    pub(crate) fn bits_of(&self, hits: &[u32], group: u32, bits: &mut [u64]) {
        for &p in hits {
            let Some(entries) = self.entries.get(p as usize) else {
                continue;
            };
            let from = entries.partition_point(|&(g, _)| g < group);
            for &(g, bit) in &entries[from..] {
                if g != group {
                    break;
                }
                set_bit(bits, bit);
            }
        }
    }
}

/// Sets `bit` in `bits`.
fn set_bit(bits: &mut [u64], bit: u32) {
    if let Some(w) = bits.get_mut(bit as usize / 64) {
        *w |= 1 << (bit % 64);
    }
}

/// A rule's place in the prefilters: its group and its bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PrefilterRef {
    pub(crate) group: u32,
    pub(crate) bit: u32,
}

/// A group being built: its index, what each back-end gets, and the number of bits.
#[derive(Default)]
struct GroupDraft {
    index: u32,
    /// literal → rule bits.
    literals: HashMap<Vec<u8>, Vec<u32>>,
    /// For each [`narrowable`] variable some rule of the group reads, the bits of those
    /// rules (the narrow automata's literals are picked from `literals` by them).
    readers: HashMap<Variable, Vec<u32>>,
    /// Hyperscan patterns with their bit, and the rule's literals to fall back on.
    patterns: Vec<Candidate>,
    bits: u32,
    chain: Vec<Transformation>,
    prefix_ids: Vec<u32>,
}

/// A pattern offered to Hyperscan.
#[cfg_attr(not(feature = "hyperscan"), allow(dead_code))]
struct Candidate {
    pattern: String,
    bit: u32,
    literals: Option<Vec<Vec<u8>>>,
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

/// Whether the values of `variable` are read by no other variable, so that a scan with
/// only its rules' literals answers for every rule that reads them (`eval::data::reader_of`
/// names the variable of such a value).
pub(crate) fn narrowable(variable: Variable) -> bool {
    use Variable as V;
    !variable.is_collection()
        || matches!(
            variable,
            V::RequestHeaders
                | V::RequestHeadersNames
                | V::RequestCookies
                | V::RequestCookiesNames
                | V::ResponseHeaders
                | V::ResponseHeadersNames
        )
}

/// Gives every eligible rule (chained ones too) a [`PrefilterRef`] and builds the groups'
/// scanners with `backend` ([`ScanBackend::resolve`]d).
pub(crate) fn build(rules: &mut [Rule], backend: ScanBackend) -> Vec<Prefilter> {
    let use_hyperscan = backend.resolve() == ScanBackend::Hyperscan;
    // Keyed by the phase and the chain's last prefix id (`u32::MAX`: no transformation).
    let mut groups: HashMap<(u8, u32), GroupDraft> = HashMap::new();
    fn visit(
        rule: &mut Rule,
        phase: u8,
        use_hyperscan: bool,
        groups: &mut HashMap<(u8, u32), GroupDraft>,
    ) {
        if let Some(op) = &rule.operator {
            let literals = op
                .operator
                .required_literals()
                .filter(|l| l.iter().all(|l| selective(l)));
            // Measured (benches/PROFILE.md, "Hyperscan"): a Hyperscan scan costs ~3,000
            // instructions to start and tens per byte for CRS's patterns, against a few
            // hundred and a few for the literal automaton; so Hyperscan takes only the
            // patterns the literal back-end cannot prefilter. A `multiMatch` rule runs its
            // operator on the raw value and on each step's output: only the raw value is
            // prefiltered, by its literals, in the group of values with no transformation.
            let pattern = op
                .operator
                .scan_pattern()
                .filter(|_| use_hyperscan && literals.is_none() && !rule.multi_match);
            if literals.is_some() || pattern.is_some() {
                let (chain_key, chain, prefix_ids) = match rule.multi_match {
                    false => (
                        rule.prefix_ids.last().copied().unwrap_or(u32::MAX),
                        &rule.transformations[..],
                        &rule.prefix_ids[..],
                    ),
                    true => (u32::MAX, &[][..], &[][..]),
                };
                let next_group = groups.len() as u32;
                let draft = groups
                    .entry((phase, chain_key))
                    .or_insert_with(|| GroupDraft {
                        index: next_group,
                        chain: chain.to_vec(),
                        prefix_ids: prefix_ids.to_vec(),
                        ..GroupDraft::default()
                    });
                let bit = draft.bits;
                draft.bits += 1;
                match pattern {
                    Some(p) => draft.patterns.push(Candidate {
                        pattern: p.to_owned(),
                        bit,
                        literals: literals.map(<[_]>::to_vec),
                    }),
                    None => {
                        for l in literals.into_iter().flatten() {
                            draft.literals.entry(l.clone()).or_default().push(bit);
                        }
                        for t in rule.targets.iter().filter(|t| narrowable(t.variable)) {
                            let bits = draft.readers.entry(t.variable).or_default();
                            if bits.last() != Some(&bit) {
                                bits.push(bit);
                            }
                        }
                    }
                }
                let place = Some(PrefilterRef {
                    group: draft.index,
                    bit,
                });
                match rule.multi_match {
                    false => rule.prefilter = place,
                    true => rule.raw_prefilter = place,
                }
            }
        }
        if let Some(child) = &mut rule.chain {
            visit(child, phase, use_hyperscan, groups);
        }
    }
    for rule in rules.iter_mut() {
        let phase = rule.phase;
        visit(rule, phase, use_hyperscan, &mut groups);
    }
    let mut out: Vec<(u32, Prefilter)> = Vec::new();
    // The literals of the groups small enough for a DFA, and those of the big groups
    // (see `Union`).
    let mut union_literals: [HashMap<Vec<u8>, GroupBits>; UNIONS] = Default::default();
    // (group, literal → rule bits) of each group, for its automaton.
    let mut pending: Vec<(u32, LiteralBits, NarrowBits)> = Vec::new();
    for ((phase, _), mut draft) in groups {
        let mut always = Vec::new();
        #[cfg(feature = "hyperscan")]
        let hyperscan = {
            let (scanner, refused) = hyperscan::HyperscanScanner::build(&draft.patterns);
            for i in refused {
                let c = &draft.patterns[i];
                match &c.literals {
                    Some(lits) => {
                        for l in lits {
                            draft.literals.entry(l.clone()).or_default().push(c.bit);
                        }
                    }
                    None => always.push(c.bit),
                }
            }
            scanner
        };
        #[cfg(not(feature = "hyperscan"))]
        always.extend(draft.patterns.iter().map(|c| c.bit));
        always.sort_unstable();
        // Groups too big for a DFA scan with their own (compact) automaton go to a union of
        // their own: in the small groups' union they would multiply its size and slow
        // every value's scan. Only the request's: the big union pays off on big
        // collections (arguments, JSON and XML bodies), which phases 3 and 4 do not have.
        let which = match draft.literals.len() > literals::DFA_MAX_LITERALS {
            false => Some(SMALL_UNION),
            true => (phase <= 2).then_some(BIG_UNION),
        };
        if let Some(union) = which.map(|w| &mut union_literals[w]) {
            for (l, bits) in &draft.literals {
                let entry = union.entry(l.to_ascii_lowercase()).or_default();
                entry.extend(bits.iter().map(|&b| (draft.index, b)));
            }
        }
        // The group's automaton is built after the union's (below), with the narrow ones.
        // None beside a Hyperscan database: literals of patterns it refused joined the
        // group's set above, not the variables' sets.
        let has_literals = !draft.literals.is_empty();
        let mut narrow: NarrowBits = Vec::new();
        if draft.patterns.is_empty() {
            for (v, readers) in std::mem::take(&mut draft.readers) {
                let mut reads = vec![false; draft.bits as usize];
                for &b in &readers {
                    reads[b as usize] = true;
                }
                let read = |bits: &Vec<u32>| bits.iter().any(|&b| reads[b as usize]);
                let count = draft.literals.values().filter(|bits| read(bits)).count();
                if count * 2 > draft.literals.len() {
                    continue;
                }
                // Only the literals, and the bits, of the rules that read `v`.
                let lits: LiteralBits = draft
                    .literals
                    .iter()
                    .filter(|(_, bits)| read(bits))
                    .map(|(l, bits)| {
                        let mine = bits.iter().copied().filter(|&b| reads[b as usize]);
                        (l.clone(), mine.collect())
                    })
                    .collect();
                narrow.push((v, lits));
            }
        }
        narrow.sort_by_key(|(v, _)| *v);
        pending.push((draft.index, std::mem::take(&mut draft.literals), narrow));
        out.push((
            draft.index,
            Prefilter {
                narrow: Vec::new(),
                union: None,
                in_union: which.filter(|_| has_literals),
                literals: None,
                #[cfg(feature = "hyperscan")]
                hyperscan,
                always,
                words: (draft.bits as usize).div_ceil(64),
                case_only_unless: draft
                    .chain
                    .iter()
                    .filter(|t| !matches!(t, Transformation::Lowercase))
                    .fold(0, |m, t| m | t.triggers()),
                chain: draft.chain,
                prefix_ids: draft.prefix_ids,
            },
        ));
    }
    out.sort_by_key(|(g, _)| *g);
    let mut prefilters: Vec<Prefilter> = out.into_iter().map(|(_, p)| p).collect();
    // The union first, then each group's automaton: building an automaton goes through a
    // bigger intermediate one (aho-corasick's noncontiguous NFA), and the union's (2.5 MB
    // for CRS) was the peak of loading when it came last (`benches/PROFILE.md`, "Eighth
    // session").
    for (which, literals) in union_literals.into_iter().enumerate() {
        let Some(union) = Union::build(literals, which).map(std::sync::Arc::new) else {
            continue;
        };
        for (i, p) in prefilters.iter_mut().enumerate() {
            if p.in_union == Some(which) {
                p.union = Some((std::sync::Arc::clone(&union), i as u32));
            }
        }
    }
    // Biggest sets first, in a fixed order: each build's intermediate automaton then
    // comes while least else is held, and the peak of loading no longer depends on a hash
    // map's order (it varied by 5 MB of heap from run to run; smallest first is 1.4 MB
    // worse than biggest first).
    pending.sort_by_key(|(group, lits, narrow)| {
        let narrow: usize = narrow.iter().map(|(_, l)| l.len()).sum();
        (std::cmp::Reverse(lits.len() + narrow), *group)
    });
    for (group, lits, narrow) in pending {
        if let Some(p) = prefilters.get_mut(group as usize) {
            p.literals = literals::LiteralScanner::build(lits);
            p.narrow = narrow
                .into_iter()
                .filter_map(|(v, lits)| Some((v, literals::LiteralScanner::build(lits)?)))
                .collect();
        }
    }
    #[cfg(feature = "hyperscan")]
    hyperscan::share_scratch(prefilters.iter_mut().filter_map(|p| p.hyperscan.as_mut()));
    prefilters
}

#[cfg(test)]
mod tests {
    use super::ScanBackend;
    use crate::{ConnectionInfo, RequestHead, Waf};

    /// Every back-end this build has.
    fn backends() -> Vec<ScanBackend> {
        let mut b = vec![ScanBackend::Literals];
        if ScanBackend::HYPERSCAN_AVAILABLE {
            b.push(ScanBackend::Hyperscan);
        }
        b
    }

    /// The ids of the rules of `rules` that match a GET of `uri`, with `backend`.
    fn matched(rules: &str, uri: &str, backend: ScanBackend) -> Vec<u64> {
        let waf = Waf::builder()
            .seclang("t.conf", format!("SecRuleEngine DetectionOnly\n{rules}"))
            .scan_backend(backend)
            .build()
            .unwrap();
        let conn = ConnectionInfo::new(
            "192.0.2.1:1234".parse().unwrap(),
            "192.0.2.2:80".parse().unwrap(),
        );
        let mut tx = waf.transaction(&conn, std::time::SystemTime::UNIX_EPOCH);
        let head = RequestHead::new(b"GET", uri.as_bytes(), b"HTTP/1.1", &[]);
        let _ = tx.request_headers(&head);
        let _ = tx.request_end();
        let mut ids: Vec<u64> = tx.finish().matched_rules.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids
    }

    /// The traps of a regex scanner in front of `regex`: patterns that match the empty
    /// string (`!@rx ^$`, which Hyperscan refuses), `\s` and the vertical tab, a pattern
    /// only the `regex` crate reads (`(?-u:..)`), a pattern without literals, and `(?i)`.
    /// Each back-end must give the oracle's answer.
    #[test]
    fn backends_agree_on_the_traps() {
        let rules = r#"
SecRule ARGS:a "!@rx ^$" "id:1,phase:1,pass"
SecRule ARGS:a "@rx x\sy" "id:2,phase:1,pass,t:urlDecodeUni"
SecRule ARGS:a "@rx (?-u:\w)zz\d" "id:3,phase:1,pass"
SecRule ARGS:a "@rx ^[0-9a-f]{4}$" "id:4,phase:1,pass"
SecRule ARGS:a "@rx (?i)select\b" "id:5,phase:1,pass"
SecRule ARGS:a "@rx a.b" "id:6,phase:1,pass,t:urlDecodeUni"
"#;
        let cases: &[(&str, &[u64])] = &[
            ("/?a=", &[]),
            ("/?a=x%0by", &[1, 2]),
            ("/?a=x%20y", &[1, 2]),
            ("/?a=qzz7", &[1, 3]),
            ("/?a=beef", &[1, 4]),
            ("/?a=SeLeCt+1", &[1, 5]),
            ("/?a=a%0Ab", &[1, 6]),
            ("/?a=a%C3%A9b", &[1]),
            ("/?a=nothing", &[1]),
        ];
        for backend in backends() {
            for (uri, want) in cases {
                assert_eq!(
                    matched(rules, uri, backend),
                    *want,
                    "{uri} with {backend:?}"
                );
                // The same on a long value (Hyperscan scans only values of 128 bytes or
                // more): one more line that matches nothing.
                if !uri.ends_with('=') {
                    let long = format!("{uri}%0A{}", "~".repeat(200));
                    assert_eq!(
                        matched(rules, &long, backend),
                        *want,
                        "{long} with {backend:?}"
                    );
                }
            }
        }
    }

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
            .scan_backend(ScanBackend::Literals)
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

    /// With Hyperscan, nearly every CRS `@rx` rule is prefiltered: Hyperscan takes the
    /// patterns the literal back-end has no literal set for.
    #[cfg(feature = "hyperscan")]
    #[test]
    fn hyperscan_prefilters_nearly_all_crs_regexes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs");
        let waf = Waf::builder()
            .seclang_file(format!("{dir}/crs-setup.conf.example"))
            .seclang_glob(format!("{dir}/rules/*.conf"))
            .scan_backend(ScanBackend::Hyperscan)
            .build()
            .unwrap();
        let (mut rx, mut with, mut always) = (0, 0, 0);
        fn walk(r: &crate::compile::Rule, rx: &mut usize, with: &mut usize) {
            if let Some(op) = &r.operator {
                if matches!(op.operator, crate::operators::Operator::Rx(_)) {
                    *rx += 1;
                    *with += usize::from(r.prefilter.is_some());
                }
            }
            if let Some(c) = &r.chain {
                walk(c, rx, with);
            }
        }
        for r in &waf.program.rules {
            walk(r, &mut rx, &mut with);
        }
        let groups = waf.program.prefilters.len();
        let with_db = waf
            .program
            .prefilters
            .iter()
            .filter(|p| p.has_hyperscan())
            .count();
        for p in &waf.program.prefilters {
            always += p.always.len();
        }
        println!("{with} of {rx} @rx rules prefiltered; {with_db} of {groups} groups have a Hyperscan database; {always} bits always set");
        assert!(with * 100 >= rx * 92, "{with} of {rx}");
        assert!(with_db >= 1, "{with_db} of {groups}");
    }
}
