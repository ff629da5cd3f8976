//! Per-transaction cache of transformed values.
//!
//! CRS runs about 40 distinct transformation chains over the same few dozen values, and
//! many chains share a prefix (`urlDecodeUni` then more). The cache is keyed by
//! (value identity, chain-prefix id); a step that leaves its input unchanged is stored as
//! "unchanged" rather than as a copy, so a benign value costs no allocation at all.
//! Transformed values and prefilter results are kept for the whole transaction (a header
//! transformed in phase 1 is not transformed again in phase 2; see [`ValueKey`] for why
//! keys stay valid); what depends on a collection's full contents (candidate lists,
//! summaries) is dropped at the start of every phase, because a phase may add values.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::compile::plan::{Summary, VarSet};
use crate::compile::prefilter::{Prefilter, ScanScratch, Union, SMALL_UNION, UNIONS};
use crate::eval::chain_table::ChainTable;
use crate::eval::data::{TxData, ValueKey, SOURCES};
use crate::transformations::{features, Transformation};
use crate::variables::{Selector, Variable};

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

/// Collections with fewer values are visited value by value: building candidate lists
/// costs more than it saves for a handful of headers or query arguments.
pub(crate) const CANDIDATE_LISTS_FROM: usize = 16;

/// Values longer than this are summarised with each group's own automaton rather than
/// from the union's hits (see [`TransformCache::summary_passes`]).
const UNION_SUMMARY_MAX: usize = 512;

/// Where a cached value lives: the raw value itself (every step so far left it
/// unchanged) or a buffer in the arena.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    Raw,
    Arena(usize),
}

/// Transformed values of one transaction.
#[derive(Debug, Default)]
pub(crate) struct TransformCache {
    /// For each value source (see [`ValueKey`]), value index → row of `table`
    /// (`u32::MAX`: no row yet). Keys are dense per source, so a row is found by indexing,
    /// not hashing.
    rows: [Vec<u32>; SOURCES],
    /// A row per value, a column per cached chain prefix (`Program::prefix_count`): 0 =
    /// not computed, 1 = the raw value (every step so far left it unchanged), `k + 2` =
    /// `arena[k]` (see [`ChainTable`]). Each entry is already resolved, so a hit costs a
    /// few loads however long the chain, and no hashing.
    table: ChainTable,
    /// Transformed values some step changed, end to end: `spans[k]` is the range of value
    /// `k`. One buffer rather than a `Vec` each: no allocation per value once it has grown,
    /// and no per-allocation overhead in a big body's peak memory.
    arena: Vec<u8>,
    spans: Vec<(u32, u32)>,
    /// For each value of `spans`: its byte classes (`transformations::features`), 0 while
    /// not computed.
    span_features: Vec<u32>,
    /// (value, prefilter group) → offset of its bit set in `bits`.
    prefiltered: HashMap<(ValueKey, u32), usize, FastState>,
    bits: Vec<u64>,
    /// (collection, prefilter group) → for each rule bit, the positions of the values
    /// that passed the prefilter for it (see [`Candidates`]).
    candidates: HashMap<(Variable, u32), Candidates, FastState>,
    /// For each row of `table`: the byte classes of the raw value
    /// (`transformations::features`), 0 while not computed.
    features: Vec<u32>,
    /// Operator results: (value, chain column, operator memo id) -> what the operator
    /// answered, so rules asking the same question of the same transformed value (the
    /// default profile scores some patterns twice, in text and outside it) evaluate once.
    memo: HashMap<(ValueKey, u32, u32), bool, FastState>,
    /// For each summary of the program (see [`crate::compile::plan`]): 1 + the offset of
    /// its bit set in `bits`, or 0 while not computed in this phase.
    summaries: Vec<u32>,
    /// The prefilter back-ends' working memory (Hyperscan's scratch), kept across
    /// transactions with the rest of the cache.
    scan_scratch: ScanScratch,
    /// For each union of the program (see [`crate::compile::prefilter::Union`]) and each
    /// row of `table`: the range of `hits` holding that union's patterns found in the raw
    /// value, scanned once per transaction; `u32::MAX` while not scanned.
    union_rows: [Vec<(u32, u32)>; UNIONS],
    /// For each big collection whose candidate lists were built in this phase: per
    /// position, the value's row (see [`Positional`]), so that a group decides a value its
    /// chain cannot change from its raw bytes' classes and union hits, with no lookup by
    /// key (most values of a big body have no union hit for most groups).
    positional: HashMap<Variable, Positional, FastState>,
    hits: Vec<u32>,
    /// For each variable (by `Variable as usize`): the byte classes of its raw values,
    /// ORed, 0 while not computed in this phase (see [`TransformCache::variable_classes`]).
    var_classes: Vec<u32>,
    /// [`TransformCache::set_classes`] by target set (0: not yet computed this phase).
    set_classes: Vec<u32>,
    /// Where a step writes its output before it joins the arena (no buffer per step).
    step_out: Vec<u8>,
    /// (rule bit, position) pairs of the candidate list being built, kept for the next.
    pairs: Vec<(u32, u32)>,
    /// The value and the next step's output of a `multiMatch` rule, which runs its
    /// operator after each step instead of keeping the steps ([`TransformCache::each_step`]).
    step_buffers: [Vec<u8>; 2],
}

/// The values of a big collection by position: a bit per union (`1 << Union::index`) whose
/// hits and the raw bytes' classes are known for every value, and each value's row
/// (`u32::MAX`: a value without a key, which takes the ordinary path). A row costs 4 bytes
/// a value; the classes and hits stay in the per-row tables.
type Positional = (u32, Vec<u32>);

/// Inverted prefilter results for one collection: `positions[offsets[b]..offsets[b + 1]]`
/// are, in visiting order, the values whose literals enable rule bit `b`. A rule then
/// visits only those, instead of every value of the collection: on a 10 KB JSON body that
/// is a few values instead of hundreds per rule.
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    offsets: Vec<u32>,
    positions: Vec<u32>,
}

impl Candidates {
    /// The range of `positions` for `bit`.
    pub(crate) fn range(&self, bit: u32) -> std::ops::Range<usize> {
        let b = bit as usize;
        match (self.offsets.get(b), self.offsets.get(b + 1)) {
            (Some(&s), Some(&e)) => s as usize..e as usize,
            _ => 0..0,
        }
    }

    /// The position at index `i` of a range from [`Candidates::range`].
    pub(crate) fn position(&self, i: usize) -> usize {
        self.positions[i] as usize
    }
}

impl TransformCache {
    /// Forgets what depends on whole collections, which the next phase may extend, and
    /// makes room for a row per value the phase can read (`values`, an upper bound from
    /// [`TxData::keyed_values`]): the per-row tables grow once a phase, to their size,
    /// instead of doubling (a doubling holds the old and the new table at once: on a 10 KB
    /// JSON body that moment was the transaction's peak).
    pub(crate) fn start_phase(&mut self, values: usize) {
        self.candidates.clear();
        self.positional.clear();
        self.summaries.clear();
        self.var_classes.clear();
        self.set_classes.clear();
        // An eighth more than the bound: a later phase that adds a few values (the response
        // headers) then fits, instead of growing every table once more.
        if values > self.table.row_capacity() {
            let rows = values + values / 8 + 16;
            self.table.reserve_rows(rows);
            self.features
                .reserve_exact(rows.saturating_sub(self.features.len()));
            for r in &mut self.union_rows {
                r.reserve_exact(rows.saturating_sub(r.len()));
            }
        }
    }

    /// Sets the number of chain prefix ids of the program the cache serves.
    pub(crate) fn set_width(&mut self, width: usize) {
        self.table.set_width(width);
    }

    pub(crate) fn clear(&mut self) {
        for r in &mut self.rows {
            r.clear();
        }
        self.step_out.clear();
        self.pairs.clear();
        for b in &mut self.step_buffers {
            b.clear();
        }
        self.table.clear();
        self.features.clear();
        self.arena.clear();
        self.spans.clear();
        self.span_features.clear();
        self.prefiltered.clear();
        self.bits.clear();
        self.candidates.clear();
        self.summaries.clear();
        self.memo.clear();
        for rows in &mut self.union_rows {
            rows.clear();
        }
        self.positional.clear();
        self.hits.clear();
        self.var_classes.clear();
        self.set_classes.clear();
    }

    /// A remembered operator result (see [`TransformCache::remember`]).
    pub(crate) fn recall(&self, key: (ValueKey, u32, u32)) -> Option<bool> {
        self.memo.get(&key).copied()
    }

    /// Remembers what an operator answered for a transformed value.
    pub(crate) fn remember(&mut self, key: (ValueKey, u32, u32), result: bool) {
        self.memo.insert(key, result);
    }

    /// For a `multiMatch` rule: applies `chain` to `raw` (whose byte classes are
    /// `classes`) step by step and calls `check` with the value after each step that
    /// changed it and its classes, until `check` returns true. A step the classes show
    /// cannot change the value is passed by unread (`transformations::features`). The
    /// values go through the cache's two step buffers; none is kept.
    pub(crate) fn each_step(
        &mut self,
        raw: &[u8],
        mut classes: features::Features,
        chain: &[Transformation],
        mut check: impl FnMut(&[u8], features::Features) -> bool,
    ) {
        // `cur` holds the value once a step changed it; `next` takes the next output.
        let [cur, next] = &mut self.step_buffers;
        let mut changed = false;
        for t in chain {
            if !t.may_change(classes) {
                continue;
            }
            let input: &[u8] = if changed { cur } else { raw };
            if t.apply_into(input, next) {
                std::mem::swap(cur, next);
                changed = true;
                classes = features::of(cur);
                if check(cur, classes) {
                    return;
                }
            }
        }
    }

    /// Clears the cache for another transaction; false when its tables grew too large to
    /// be worth keeping (a request with many values), and it should be dropped instead.
    pub(crate) fn clear_for_reuse(&mut self) -> bool {
        self.clear();
        self.table.capacity_bytes() <= 256 * 1024
            && self.rows.iter().all(|r| r.capacity() <= 4 * 1024)
            && self.prefiltered.capacity() <= 16 * 1024
            && self.arena.capacity() <= 256 * 1024
            && self.spans.capacity() <= 16 * 1024
            && self.bits.capacity() <= 64 * 1024
            && self.candidates.capacity() <= 1024
            && self.memo.capacity() <= 16 * 1024
            && self.union_rows.iter().all(|r| r.capacity() <= 16 * 1024)
            && self.hits.capacity() <= 64 * 1024
            && self.step_out.capacity() <= 64 * 1024
            && self.pairs.capacity() <= 16 * 1024
            && self.step_buffers.iter().all(|b| b.capacity() <= 64 * 1024)
    }

    /// Whether the rule with prefilter `bit` can match any value of the variable of
    /// summary `id` (spec `summary`, group prefilter `prefilter`): false means none of its
    /// literals occurs in any of them. The summary is computed on first use in a phase.
    pub(crate) fn summary_passes(
        &mut self,
        data: &TxData,
        id: u32,
        summary: &Summary,
        bit: u32,
        prefilter: &Prefilter,
    ) -> bool {
        let i = id as usize;
        if self.summaries.len() <= i {
            self.summaries.resize(i + 1, 0);
        }
        let offset = match self.summaries[i] {
            0 => {
                let offset = self.summarise(data, summary, prefilter);
                self.summaries[i] = offset as u32 + 1;
                offset
            }
            o => o as usize - 1,
        };
        self.bits[offset + bit as usize / 64] & (1 << (bit % 64)) != 0
    }

    /// ORs the prefilter bits of every value of the summary's variable into a new bit set;
    /// returns its offset in `bits`.
    ///
    /// A big collection read whole is summarised from its candidate lists instead (built
    /// here if not yet): they hold the same answer per rule, building them records no
    /// per-value result (see [`Candidates`]), and the rules that pass read them next.
    fn summarise(&mut self, data: &TxData, summary: &Summary, prefilter: &Prefilter) -> usize {
        let words = prefilter.words;
        let offset = self.bits.len();
        self.bits.resize(offset + words, 0);
        let (variable, group) = (summary.variable, summary.group);
        if matches!(summary.selector, Selector::All)
            && data
                .indexed_len(variable)
                .is_some_and(|n| n >= CANDIDATE_LISTS_FROM)
        {
            if self.candidates(variable, group).is_none() {
                let (chain, ids) = (&prefilter.chain, &prefilter.prefix_ids);
                self.build_candidates(data, variable, group, chain, ids, prefilter);
            }
            if let Some(c) = self.candidates.get(&(variable, group)) {
                for bit in 0..words * 64 {
                    if !c.range(bit as u32).is_empty() {
                        self.bits[offset + bit / 64] |= 1 << (bit % 64);
                    }
                }
            }
            return offset;
        }
        let mut add = |key: Option<ValueKey>, raw: &[u8]| {
            let Some(key) = key else {
                // The planner summarises only keyed variables; should one yield an unkeyed
                // value, let every rule through rather than guess.
                self.bits[offset..offset + words].fill(u64::MAX);
                return;
            };
            // A short value the group's chain leaves as it is but for case: the union's
            // hits on its raw bytes (one scan per value and transaction) give the group's
            // bits, with no transformation and no scan of the group's own. A long value
            // (a body) is read by few groups, and the union's bigger automaton costs more
            // per byte than the group's DFA.
            // Only the small groups' union: the big groups' one pays off on big collections
            // (`build_candidates`), not on a GET's few values (+8 % instructions per CRS
            // GET when summaries used it too, callgrind).
            let union = prefilter
                .union
                .as_ref()
                .filter(|(u, _)| u.index == SMALL_UNION && prefilter.decides_from_hits());
            if let Some((union, _)) = union.filter(|_| raw.len() <= UNION_SUMMARY_MAX) {
                let row = self.row(key);
                if self.raw_features(row, raw) & prefilter.case_only_unless == 0 {
                    let (s, e) = self.union_range(row, raw, union);
                    let (hits, bits) = (&self.hits[s as usize..e as usize], &mut self.bits);
                    let bits = &mut bits[offset..offset + words];
                    if prefilter.bits_from_hits(hits, raw.len(), bits).is_some() {
                        return;
                    }
                }
            }
            let slot = self.transform_slot(key, raw, &prefilter.chain, &prefilter.prefix_ids);
            let o = self.prefilter_bits(key, slot, raw, summary.group, prefilter);
            for w in 0..words {
                self.bits[offset + w] |= self.bits[o + w];
            }
        };
        match &summary.selector {
            Selector::All => data.visit_every(summary.variable, &mut |key, _, raw| add(key, raw)),
            one => data.visit(summary.variable, one, &|_| false, &mut |key, _, raw| {
                add(key, raw)
            }),
        }
        offset
    }

    /// The byte classes (`transformations::features`) of every raw value of `variable`,
    /// ORed; computed once per phase (a phase may add values), from the classes the cache
    /// keeps per value. Only for the request and response variables the plan summarises
    /// (`compile::plan`), whose values do not change within a phase.
    pub(crate) fn variable_classes(
        &mut self,
        data: &TxData,
        variable: Variable,
    ) -> features::Features {
        let i = variable as usize;
        if let Some(&c) = self.var_classes.get(i).filter(|&&c| c != 0) {
            return c;
        }
        let mut classes = features::KNOWN;
        data.visit_every(variable, &mut |key, _, raw| {
            classes |= match key {
                Some(key) => {
                    let row = self.row(key);
                    self.raw_features(row, raw)
                }
                None => features::of(raw),
            };
        });
        if self.var_classes.len() <= i {
            self.var_classes.resize(i + 1, 0);
        }
        self.var_classes[i] = classes;
        classes
    }

    /// The classes of every value of the variables of `set`, ORed ([`Self::variable_classes`]
    /// of each); `id` is its index in `Summaries::target_sets`. Once a phase per set: most
    /// of CRS's attack rules read the same set.
    pub(crate) fn set_classes(
        &mut self,
        data: &TxData,
        id: u32,
        set: VarSet,
    ) -> features::Features {
        let i = id as usize;
        if let Some(&c) = self.set_classes.get(i).filter(|&&c| c != 0) {
            return c;
        }
        let mut classes = features::KNOWN;
        set.any(|v| {
            classes |= self.variable_classes(data, v);
            false
        });
        if self.set_classes.len() <= i {
            self.set_classes.resize(i + 1, 0);
        }
        self.set_classes[i] = classes;
        classes
    }

    /// The candidate lists of `variable` for a prefilter group, if already built.
    pub(crate) fn candidates(&self, variable: Variable, group: u32) -> Option<&Candidates> {
        self.candidates.get(&(variable, group))
    }

    /// The range of the candidate positions of rule `bit` among the values of `variable`
    /// for `group` (whose rules use `chain`), building the group's lists on first use; read
    /// the positions with [`Candidates::position`] (ascending within the range).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn candidate_range(
        &mut self,
        data: &TxData,
        variable: Variable,
        group: u32,
        bit: u32,
        chain: &[Transformation],
        prefix_ids: &[u32],
        prefilter: &Prefilter,
    ) -> std::ops::Range<usize> {
        if self.candidates(variable, group).is_none() {
            self.build_candidates(data, variable, group, chain, prefix_ids, prefilter);
        }
        self.candidates(variable, group)
            .map_or(0..0, |c| c.range(bit))
    }

    /// Builds the candidate lists of `variable` for `group`, whose rules use `chain`.
    pub(crate) fn build_candidates(
        &mut self,
        data: &TxData,
        variable: Variable,
        group: u32,
        chain: &[Transformation],
        prefix_ids: &[u32],
        prefilter: &Prefilter,
    ) {
        let len = data.indexed_len(variable).unwrap_or(0);
        let mut pairs = std::mem::take(&mut self.pairs);
        // Scan results of values not scanned before go to this buffer, not to `bits` and
        // `prefiltered`: the lists below are what the group's rules read, and on a big body
        // recording every (value, group) cost a hash-table insert per value and group.
        let mut scanned = vec![0u64; prefilter.words];
        let mut scan_scratch = std::mem::take(&mut self.scan_scratch);
        // The values' rows by position, their raw bytes' classes and union hits known (see
        // `Positional`).
        let (positional, union) = match &prefilter.union {
            Some((union, _)) if prefilter.decides_from_hits() => {
                (self.positional(data, variable, len, union), union.index)
            }
            _ => ((0, Vec::new()), 0),
        };
        // Bits set without a literal: the rules with none, and a Hyperscan database's on a
        // short value.
        let always = prefilter.sets_always() || prefilter.has_hyperscan();
        for pos in 0..len {
            // A value the chain leaves as it is but for case: the union's hits on its raw
            // bytes give the group's bits, with no transformation and no scan of its own.
            if let Some(&row) = positional.1.get(pos).filter(|&&r| r != u32::MAX) {
                // Both were computed by `positional`; were they not, every class sends the
                // value the ordinary way.
                let classes = self.features.get(row as usize).copied().unwrap_or(u32::MAX);
                let (s, e) = self.union_rows[union]
                    .get(row as usize)
                    .copied()
                    .unwrap_or((0, 0));
                if classes & prefilter.case_only_unless == 0 {
                    if s == e && !always {
                        continue;
                    }
                    scanned.fill(0);
                    let hits = &self.hits[s as usize..e as usize];
                    // A Hyperscan database needs the value's length (the value is read
                    // only then).
                    let len = match prefilter.has_hyperscan() {
                        true => data.indexed(variable, pos).2.len(),
                        false => 0,
                    };
                    if prefilter.bits_from_hits(hits, len, &mut scanned).is_some() {
                        push_bits(&mut pairs, &scanned, pos);
                        continue;
                    }
                }
            }
            let (Some(key), _, raw) = data.indexed(variable, pos) else {
                continue;
            };
            let slot = self.transform_slot(key, raw, chain, prefix_ids);
            let words = match self.prefiltered.get(&(key, group)) {
                Some(&offset) => &self.bits[offset..offset + prefilter.words],
                None => {
                    scanned.fill(0);
                    self.scan_group(key, slot, raw, prefilter, &mut scanned, &mut scan_scratch);
                    &scanned[..]
                }
            };
            push_bits(&mut pairs, words, pos);
        }
        self.scan_scratch = scan_scratch;
        if !positional.1.is_empty() {
            self.positional.insert(variable, positional);
        }
        pairs.sort_by_key(|&(b, _)| b);
        let nbits = prefilter.words * 64;
        let mut offsets = vec![0u32; nbits + 1];
        for &(b, _) in &pairs {
            offsets[b as usize + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        // Exactly sized: the lists live until the phase ends, and collecting in place
        // would keep the pairs' buffer, twice their size.
        let mut positions = Vec::with_capacity(pairs.len());
        positions.extend(pairs.iter().map(|&(_, p)| p));
        pairs.clear();
        self.pairs = pairs;
        self.candidates
            .insert((variable, group), Candidates { offsets, positions });
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
        let offset = self.prefilter_bits(key, slot, raw, group, prefilter);
        self.bits[offset + bit as usize / 64] & (1 << (bit % 64)) != 0
    }

    /// The offset in `bits` of the prefilter result of (value, group), scanning on a miss.
    fn prefilter_bits(
        &mut self,
        key: ValueKey,
        slot: Slot,
        raw: &[u8],
        group: u32,
        prefilter: &Prefilter,
    ) -> usize {
        if let Some(&o) = self.prefiltered.get(&(key, group)) {
            return o;
        }
        let offset = self.bits.len();
        self.bits.resize(offset + prefilter.words, 0);
        // Single values and small collections scan with the group's own automaton (a
        // DFA for most groups): on a few short values that costs less than the union's
        // bigger automaton; the union pays off on big collections (`build_candidates`).
        let input = slot_slice(&self.arena, &self.spans, slot, raw);
        let reader = crate::eval::data::reader_of(key);
        prefilter.scan_for(
            reader,
            input,
            &mut self.bits[offset..],
            &mut self.scan_scratch,
        );
        self.prefiltered.insert((key, group), offset);
        offset
    }

    /// Sets in `bits` what the group's prefilter lets through for value `key` after its
    /// chain (`slot`). When the chain left the value as it was but for ASCII case, the
    /// literal bits come from the value's one union scan (see
    /// [`crate::compile::prefilter::Union`]); otherwise the group's own automaton scans
    /// the transformed value.
    fn scan_group(
        &mut self,
        key: ValueKey,
        slot: Slot,
        raw: &[u8],
        prefilter: &Prefilter,
        bits: &mut [u64],
        scratch: &mut ScanScratch,
    ) {
        let input = self.slice(slot, raw);
        let same = match slot {
            Slot::Raw => true,
            Slot::Arena(_) => input.eq_ignore_ascii_case(raw),
        };
        let Some((union, group)) = prefilter.union.as_ref().filter(|_| same) else {
            prefilter.scan_for(crate::eval::data::reader_of(key), input, bits, scratch);
            return;
        };
        let row = self.row(key);
        let (s, e) = self.union_range(row, raw, union);
        union.bits_of(&self.hits[s as usize..e as usize], *group, bits);
        prefilter.scan_beside_literals(self.slice(slot, raw), bits, scratch);
    }

    /// The row of `key` in `table`, made on first use. A value's row is looked up once per
    /// rule that reads it (tens of thousands of times for a big body), so the lookup is
    /// inlined and making the row is not.
    #[inline]
    fn row(&mut self, key: ValueKey) -> usize {
        let (source, index) = ((key >> 32) as usize, (key & 0xffff_ffff) as usize);
        match self.rows.get(source).and_then(|rows| rows.get(index)) {
            Some(&row) if row != u32::MAX => row as usize,
            _ => self.new_row(source, index),
        }
    }

    /// [`TransformCache::row`] for a value without a row yet.
    #[cold]
    #[inline(never)]
    fn new_row(&mut self, source: usize, index: usize) -> usize {
        let Some(rows) = self.rows.get_mut(source) else {
            // Not a key `TxData` makes; a fresh row keeps the answer right.
            return self.table.push_row();
        };
        if rows.len() <= index {
            rows.resize(index + 1, u32::MAX);
        }
        if rows[index] == u32::MAX {
            rows[index] = self.table.push_row() as u32;
        }
        rows[index] as usize
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
        let row = self.row(key);
        // `u32::MAX`: a step whose result is not kept (`compile::cache_columns`).
        let entry = |table: &ChainTable, id: u32| match id {
            u32::MAX => 0,
            id => table.get(row, id as usize),
        };
        let decode = |e: u32| match e {
            1 => Slot::Raw,
            k => Slot::Arena(k as usize - 2),
        };
        let last = entry(&self.table, prefix_ids[n - 1]);
        if last != 0 {
            return decode(last);
        }
        // The longest cached prefix, if any.
        let mut start = 0;
        let mut slot = Slot::Raw;
        for i in (0..n - 1).rev() {
            let e = entry(&self.table, prefix_ids[i]);
            if e != 0 {
                start = i + 1;
                slot = decode(e);
                break;
            }
        }
        // The byte classes of the value the next step reads, while known (see
        // `transformations::features`): a step they show cannot change it is passed by.
        let mut features = match slot {
            Slot::Raw => self.raw_features(row, raw),
            Slot::Arena(_) => 0,
        };
        for i in start..n {
            let step = &chain[i];
            // Field by field: the step reads the arena and writes `step_out`.
            let changed = (features == 0 || step.may_change(features))
                && step.apply_into(
                    slot_slice(&self.arena, &self.spans, slot, raw),
                    &mut self.step_out,
                );
            if changed {
                slot = keep_in(
                    &mut self.arena,
                    &mut self.spans,
                    &mut self.span_features,
                    &self.step_out,
                );
                // Lower-casing only turns capitals into small letters: every other class
                // is as it was.
                features = match step {
                    Transformation::Lowercase => features & !features::UPPER,
                    _ => 0,
                };
            }
            let code = match slot {
                Slot::Raw => 1,
                Slot::Arena(k) => k as u32 + 2,
            };
            // A prefix id past the width (a program and cache mismatch) is not recorded.
            if prefix_ids[i] != u32::MAX {
                self.table.set(row, prefix_ids[i] as usize, code);
            }
        }
        slot
    }

    /// The rows of the values of `variable` (`len` of them) by position, with their raw
    /// bytes' classes and `union`'s hits computed: on the first candidate build of the
    /// phase that needs them, taken out of the cache (the caller puts them back).
    fn positional(
        &mut self,
        data: &TxData,
        variable: Variable,
        len: usize,
        union: &Union,
    ) -> Positional {
        let (known, mut rows) = self
            .positional
            .remove(&variable)
            .filter(|p| p.1.len() == len)
            .unwrap_or_else(|| (0, Vec::with_capacity(len)));
        let bit = 1u32 << union.index;
        if known & bit != 0 {
            return (known, rows);
        }
        // One pass: the rows are found (on the phase's first build) as the values are
        // classified and scanned for this union.
        let fresh = rows.is_empty();
        for pos in 0..len {
            let (key, _, raw) = data.indexed(variable, pos);
            let row = if fresh {
                let row = key.map_or(u32::MAX, |k| self.row(k) as u32);
                rows.push(row);
                row
            } else {
                rows[pos]
            };
            if row != u32::MAX {
                self.raw_features(row as usize, raw);
                self.union_range(row as usize, raw, union);
            }
        }
        (known | bit, rows)
    }

    /// The range of `hits` holding the union patterns found in the raw value of `row`,
    /// scanned on first use.
    #[inline]
    fn union_range(&mut self, row: usize, raw: &[u8], union: &Union) -> (u32, u32) {
        match self.union_rows[union.index].get(row) {
            Some(&range) if range.0 != u32::MAX => range,
            _ => self.scan_union(row, raw, union),
        }
    }

    /// [`TransformCache::union_range`] for a value the union has not read yet.
    #[cold]
    #[inline(never)]
    fn scan_union(&mut self, row: usize, raw: &[u8], union: &Union) -> (u32, u32) {
        // `Union::index` is below `UNIONS` (`compile::prefilter::build` makes them).
        let rows = &mut self.union_rows[union.index];
        if rows.len() <= row {
            rows.resize(row + 1, (u32::MAX, 0));
        }
        let s = self.hits.len();
        union.scan(raw, &mut self.hits);
        rows[row] = (s as u32, self.hits.len() as u32);
        rows[row]
    }

    /// The byte classes of the raw value of `row`, computed on first use.
    #[inline]
    fn raw_features(&mut self, row: usize, raw: &[u8]) -> u32 {
        match self.features.get(row) {
            Some(&f) if f != 0 => f,
            _ => self.new_raw_features(row, raw),
        }
    }

    /// [`TransformCache::raw_features`] for a value not classified yet.
    #[cold]
    #[inline(never)]
    fn new_raw_features(&mut self, row: usize, raw: &[u8]) -> u32 {
        if self.features.len() <= row {
            self.features.resize(row + 1, 0);
        }
        self.features[row] = features::of(raw);
        self.features[row]
    }

    /// The byte classes (`transformations::features`) of `raw` after a chain left it in
    /// `slot` (from [`TransformCache::transform_slot`] for `key`), computed once per value.
    pub(crate) fn classes(&mut self, key: ValueKey, slot: Slot, raw: &[u8]) -> features::Features {
        match slot {
            Slot::Raw => {
                let row = self.row(key);
                self.raw_features(row, raw)
            }
            Slot::Arena(i) => match self.span_features.get(i) {
                Some(&f) if f != 0 => f,
                _ => {
                    let f = features::of(self.arena_value(i));
                    if let Some(e) = self.span_features.get_mut(i) {
                        *e = f;
                    }
                    f
                }
            },
        }
    }

    /// Value `i` of the arena.
    fn arena_value(&self, i: usize) -> &[u8] {
        arena_slice(&self.arena, &self.spans, i)
    }

    /// The bytes of a slot from [`TransformCache::transform_slot`] for `raw`.
    pub(crate) fn slice<'a>(&'a self, slot: Slot, raw: &'a [u8]) -> &'a [u8] {
        slot_slice(&self.arena, &self.spans, slot, raw)
    }
}

/// Copies a transformed value into the arena (`arena`, `spans`, `span_features` of a
/// [`TransformCache`]); its slot.
fn keep_in(
    arena: &mut Vec<u8>,
    spans: &mut Vec<(u32, u32)>,
    span_features: &mut Vec<u32>,
    value: &[u8],
) -> Slot {
    let start = arena.len();
    arena.extend_from_slice(value);
    // The arena holds the transformed values of one transaction, bounded by the body
    // limit times the chains; past 4 GiB the offsets would wrap, so saturate instead
    // (a value then reads as a shorter one, never out of bounds).
    let span = (
        u32::try_from(start).unwrap_or(u32::MAX),
        u32::try_from(arena.len()).unwrap_or(u32::MAX),
    );
    spans.push(span);
    span_features.push(0);
    Slot::Arena(spans.len() - 1)
}

/// Value `k` of an arena (`arena`, `spans` of a [`TransformCache`]).
fn arena_slice<'a>(arena: &'a [u8], spans: &[(u32, u32)], k: usize) -> &'a [u8] {
    let (s, e) = spans.get(k).copied().unwrap_or_default();
    arena.get(s as usize..e as usize).unwrap_or_default()
}

/// [`TransformCache::slice`] from the arena's fields, for callers that write other fields
/// of the cache meanwhile.
fn slot_slice<'a>(arena: &'a [u8], spans: &[(u32, u32)], slot: Slot, raw: &'a [u8]) -> &'a [u8] {
    match slot {
        Slot::Raw => raw,
        Slot::Arena(k) => arena_slice(arena, spans, k),
    }
}

/// Appends (bit, `pos`) for every bit set in `words`.
fn push_bits(pairs: &mut Vec<(u32, u32)>, words: &[u64], pos: usize) {
    for (w, &word) in words.iter().enumerate() {
        let mut x = word;
        while x != 0 {
            let b = x.trailing_zeros();
            pairs.push((w as u32 * 64 + b, pos as u32));
            x &= x - 1;
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
