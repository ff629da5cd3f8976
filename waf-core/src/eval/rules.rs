//! The rule loop of one phase, and the evaluation of one rule (chain).
//!
//! Semantics follow ModSecurity as Coraza implements it (Coraza passes the CRS suite):
//! - every value of every target goes through the rule's transformations and operator;
//! - each matching value sets `MATCHED_VAR`, `MATCHED_VAR_NAME`, appends to
//!   `MATCHED_VARS`, writes captures to `TX:0..9`, and then runs the rule's per-match
//!   effects (`setvar`, `ctl`, ...), even when a later chained rule does not match;
//! - a chained rule runs only when its parent matched;
//! - when the whole chain matched, the starter is reported and its disruptive and flow
//!   actions (`deny`, `allow`, `skipAfter`, `skip`) take effect. In `DetectionOnly`, a
//!   would-be intervention is recorded and evaluation goes on.

use std::ops::Range;

use crate::actions::{AllowScope, Disruptive};
use crate::compile::prefilter::PrefilterRef;
use crate::compile::{Rule, Step};
use crate::eval::cache::Slot;
use crate::eval::data::{Num, VarName};
use crate::eval::plan::Planned;
use crate::eval::TxState;
use crate::limits::DEFAULT_MATCHED_DATA_LEN;
use crate::operators::Captures;
use crate::report::MatchedRule;
use crate::transformations::features;
use crate::variables::Selector;
use crate::verdict::{DisruptiveAction, Intervention, Verdict};
use crate::waf::EngineMode;

/// The matches of the rule being evaluated, kept until its targets are all evaluated.
/// Names, values and captures live in one byte buffer that keeps its capacity across
/// rules, so matching allocates nothing in the steady state.
#[derive(Debug, Default)]
pub(super) struct MatchScratch {
    buf: Vec<u8>,
    matches: Vec<MatchRec>,
    captures: Vec<Range<usize>>,
    caps: Captures,
}

/// One matching value: ranges into [`MatchScratch::buf`].
#[derive(Clone, Debug)]
struct MatchRec {
    name: Range<usize>,
    value: Range<usize>,
    /// Range into [`MatchScratch::captures`] (empty without `capture`).
    captures: Range<usize>,
}

impl MatchScratch {
    fn clear(&mut self) {
        self.buf.clear();
        self.matches.clear();
        self.captures.clear();
    }

    /// Clears the scratch for another transaction; false when it grew too large to keep.
    pub(super) fn clear_for_reuse(&mut self) -> bool {
        self.clear();
        self.buf.capacity() <= 256 * 1024 && self.matches.capacity() <= 4096
    }

    pub(super) fn push(&mut self, name: &VarName<'_>, value: &[u8], captured: bool) {
        let start = self.buf.len();
        name.render(&mut self.buf);
        let name = start..self.buf.len();
        self.buf.extend_from_slice(value);
        let value = name.end..self.buf.len();
        let first = self.captures.len();
        if captured {
            for g in &self.caps.groups {
                let s = self.buf.len();
                self.buf.extend_from_slice(g);
                self.captures.push(s..self.buf.len());
            }
        }
        self.matches.push(MatchRec {
            name,
            value,
            captures: first..self.captures.len(),
        });
    }
}

use super::cache::CANDIDATE_LISTS_FROM;

/// What the loop does after a matched rule.
enum Flow {
    Next,
    Stop,
}

impl TxState {
    pub(super) fn run_phase_inner(&mut self, phase: u8) -> Verdict {
        if self.mode == EngineMode::Off {
            return Verdict::Continue;
        }
        match (self.allow, phase) {
            (Some(AllowScope::All), 1..=4) | (Some(AllowScope::Request), 1 | 2) => {
                return Verdict::Continue
            }
            _ => {}
        }
        self.cache.start_phase(self.data.keyed_values());
        self.nonempty = self.data.nonempty_collections();
        self.data.phase = phase;
        let program = std::sync::Arc::clone(&self.program);
        let steps = &program.phases[usize::from(phase - 1)];
        let mut i = 0;
        let mut skip = 0u32;
        // The setup that phase 1 starts with, evaluated once (`compile::fold`).
        let fold = program.fold.as_ref().filter(|_| phase == 1);
        while i < steps.len() {
            if let Some(f) = fold.filter(|f| f.start == i && skip == 0 && self.fold_applies()) {
                self.apply_fold(f);
                i = f.end;
                continue;
            }
            let Step::Rule(r, plan) = &steps[i] else {
                i += 1;
                continue;
            };
            i += 1;
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let rule = &program.rules[*r];
            self.data.start_rule();
            // The step's copy of the plan first: most rules end here, and the rule itself
            // is not read (a ruled-out rule has no effect, removed or not).
            let planned = !program.reference;
            let decided = match planned.then(|| self.plan_step(plan, rule)) {
                Some(Planned::NoMatch) => continue,
                Some(Planned::Match) => true,
                Some(Planned::Unknown) | None => false,
            };
            if self.is_removed(rule) {
                continue;
            }
            self.data.rule_id = rule.id;
            if decided {
                // As the general path does with a chain starter's one match.
                self.record_planned_match(plan);
                for effect in &rule.effects {
                    self.apply_effect(effect);
                }
            } else if !self.eval_rule(rule, rule, planned) {
                continue;
            }
            if let Flow::Stop = self.on_chain_matched(rule, phase) {
                break;
            }
            if let Some((_, target)) = &rule.skip_after {
                if *target == usize::MAX {
                    break;
                }
                i = target + 1;
            }
            skip = rule.skip;
        }
        if self.allow == Some(AllowScope::Phase) {
            self.allow = None;
        }
        if self.allow == Some(AllowScope::Request) && phase == 2 {
            self.allow = None;
        }
        match &self.intervention {
            Some(iv) => Verdict::Intervene(iv.clone()),
            None => Verdict::Continue,
        }
    }

    fn is_removed(&self, rule: &Rule) -> bool {
        self.removed_rules.iter().any(|s| rule.selected_by(s))
    }

    /// Evaluates `rule` (the starter or a chained rule of `head`); true when it and its
    /// chain matched. `ruled_in`: the plan already failed to rule `rule` out.
    pub(super) fn eval_rule(&mut self, rule: &Rule, head: &Rule, ruled_in: bool) -> bool {
        self.scratch.clear();
        let matched = self.eval_rule_inner(rule, head, ruled_in);
        if *self.data.match_limit_exceeded.get_mut() {
            *self.data.match_limit_exceeded.get_mut() = false;
            // A backtracking `@rx` gave up (operators/rx_backtrack.rs), as ModSecurity flags it.
            self.data.tx.set(b"msc_pcre_limits_exceeded", b"1");
        }
        matched
    }

    fn eval_rule_inner(&mut self, rule: &Rule, head: &Rule, ruled_in: bool) -> bool {
        match &rule.operator {
            None => self.scratch.matches.push(MatchRec {
                name: 0..0,
                value: 0..0,
                captures: 0..0,
            }),
            Some(_) if !self.program.reference && self.plan_decides(rule, ruled_in) => {
                if self.scratch.matches.is_empty() {
                    return false;
                }
            }
            Some(op) => {
                let reference = self.program.reference;
                let data = &self.data;
                let cache = &mut self.cache;
                // Borrowed, not taken: most rules match nothing, and then the scratch
                // never moves (moving it in and out cost 5 % of a CRS GET, callgrind).
                let scratch = &mut self.scratch;
                let prefilters = &self.program.prefilters;
                let group_of = |r: Option<PrefilterRef>| {
                    r.filter(|_| !reference)
                        .and_then(|r| prefilters.get(r.group as usize).map(|p| (r, p)))
                };
                let prefilter = group_of(rule.prefilter);
                // A `multiMatch` rule's raw values are prefiltered in the group of values
                // with no transformation (`compile::prefilter::build`).
                let raw_prefilter = group_of(rule.raw_prefilter);
                let removed_targets = &self.removed_targets;
                for target in &rule.targets {
                    let variable = target.variable;
                    // Most targets have no exclusion of their variable, static or removed
                    // at run time: then no key is excluded, and no value asks.
                    let may_exclude = rule.exclusions.iter().any(|(v, _)| *v == variable)
                        || removed_targets.iter().any(|(_, t)| t.variable == variable);
                    let excluded = |key: &[u8]| {
                        may_exclude
                            && (rule
                                .exclusions
                                .iter()
                                .any(|(v, s)| *v == variable && s.matches(key))
                                || removed_targets.iter().any(|(s, t)| {
                                    t.variable == variable
                                        && t.selector.matches(key)
                                        && head.selected_by(s)
                                }))
                    };
                    // Runs the operator on one value (unless its result is `known`) and
                    // records a match; true when it matched.
                    let capturing = rule.capture && !op.negated;
                    // Only rules whose answers another rule reuses have an id, never a
                    // capturing one (`compile::keep_shared_memos`).
                    let memo = op.memo;
                    let chain = rule.prefix_ids.last().copied().unwrap_or(u32::MAX);
                    // The byte classes every match needs (`operators::rx_classes`); the
                    // reference evaluation runs without, so the plan test checks the gate.
                    let gate = if reference { 0 } else { op.required_classes };
                    // `classes`: the value's byte classes when the caller knows them, or 0.
                    let mut check_known =
                        |value: &[u8],
                         name: &VarName<'_>,
                         known: Option<bool>,
                         classes: features::Features| {
                            let hit = known.unwrap_or_else(|| {
                                if gate != 0 {
                                    let classes = match classes {
                                        0 => features::of(value),
                                        c => c,
                                    };
                                    if classes & gate == 0 {
                                        // No byte every match needs: the operator would
                                        // answer "no match".
                                        return false;
                                    }
                                }
                                op.operator.evaluate(
                                    value,
                                    data,
                                    if capturing {
                                        Some(&mut scratch.caps)
                                    } else {
                                        None
                                    },
                                )
                            });
                            if hit != op.negated {
                                scratch.push(name, value, capturing);
                                true
                            } else {
                                false
                            }
                        };
                    // A big collection read whole: its values have candidate lists.
                    let whole_big = !target.count
                        && matches!(target.selector, Selector::All)
                        && data
                            .indexed_len(variable)
                            .is_some_and(|n| n >= CANDIDATE_LISTS_FROM);
                    // Under a prefiltered, non-negated operator (never a `multiMatch` one,
                    // which has `raw_prefilter` instead): visit only the values whose
                    // literals let this rule match (see `Candidates`).
                    if let Some((r, p)) = prefilter.filter(|_| whole_big && !op.negated) {
                        let range = cache.candidate_range(
                            data,
                            variable,
                            r.group,
                            r.bit,
                            &rule.transformations,
                            &rule.prefix_ids,
                            p,
                        );
                        for i in range {
                            let pos = cache
                                .candidates(variable, r.group)
                                .map_or(0, |c| c.position(i));
                            let (Some(key), name, raw) = data.indexed(variable, pos) else {
                                continue;
                            };
                            if name.key.is_some_and(&excluded) {
                                continue;
                            }
                            let slot = cache.transform_slot(
                                key,
                                raw,
                                &rule.transformations,
                                &rule.prefix_ids,
                            );
                            let memo = memo.map(|m| (key, chain, m));
                            let known = memo.and_then(|k| cache.recall(k));
                            let classes = match (gate, known) {
                                (0, _) | (_, Some(_)) => 0,
                                _ => cache.classes(key, slot, raw),
                            };
                            let matched =
                                check_known(cache.slice(slot, raw), &name, known, classes);
                            if let (Some(k), None) = (memo, known) {
                                cache.remember(k, matched != op.negated);
                            }
                        }
                        continue;
                    }
                    // A `multiMatch` rule over a big collection: the raw values its
                    // literals rule out are not given to the operator, but every value's
                    // steps still are (their outputs are not prefiltered).
                    if let Some((r, p)) = raw_prefilter.filter(|_| whole_big) {
                        let range =
                            cache.candidate_range(data, variable, r.group, r.bit, &[], &[], p);
                        // The candidates' positions are ascending: one cursor walks them.
                        let mut next = range.start;
                        for pos in 0..data.indexed_len(variable).unwrap_or(0) {
                            let (key, name, raw) = data.indexed(variable, pos);
                            if name.key.is_some_and(&excluded) {
                                continue;
                            }
                            let mut candidate = key.is_none();
                            while next < range.end {
                                let at = cache
                                    .candidates(variable, r.group)
                                    .map_or(usize::MAX, |c| c.position(next));
                                if at >= pos {
                                    candidate |= at == pos;
                                    break;
                                }
                                next += 1;
                            }
                            let classes = match key {
                                Some(k) => cache.classes(k, Slot::Raw, raw),
                                None => features::of(raw),
                            };
                            let known = (!candidate).then_some(false);
                            if check_known(raw, &name, known, classes) {
                                continue;
                            }
                            cache.each_step(raw, classes, &rule.transformations, |v, c| {
                                check_known(v, &name, None, c)
                            });
                        }
                        continue;
                    }
                    if target.count {
                        let n = data.count(variable, &target.selector, &excluded);
                        let name = VarName {
                            variable,
                            key: None,
                        };
                        let num = Num::new(n as i128);
                        let value = super::cache::apply_all(num.as_bytes(), &rule.transformations);
                        check_known(&value, &name, None, 0);
                        continue;
                    }
                    data.visit(
                        variable,
                        &target.selector,
                        &excluded,
                        &mut |key, name, raw| {
                            if rule.multi_match {
                                // Run the operator on the value before and after each step that
                                // changed it; on the raw value only if its literals occur.
                                let (classes, known) = match (raw_prefilter, key) {
                                    (Some((r, p)), Some(k)) => (
                                        cache.classes(k, Slot::Raw, raw),
                                        (!cache.prefilter_passes(
                                            k,
                                            Slot::Raw,
                                            raw,
                                            r.group,
                                            r.bit,
                                            p,
                                        ))
                                        .then_some(false),
                                    ),
                                    _ => (features::of(raw), None),
                                };
                                if check_known(raw, &name, known, classes) {
                                    return;
                                }
                                cache.each_step(raw, classes, &rule.transformations, |v, c| {
                                    check_known(v, &name, None, c)
                                });
                            } else if let Some(key) = key.filter(|_| !reference) {
                                let slot = cache.transform_slot(
                                    key,
                                    raw,
                                    &rule.transformations,
                                    &rule.prefix_ids,
                                );
                                let known = match prefilter {
                                    Some((r, p))
                                        if !cache.prefilter_passes(
                                            key, slot, raw, r.group, r.bit, p,
                                        ) =>
                                    {
                                        // None of the rule's literals occurs, so its regex
                                        // cannot match.
                                        Some(false)
                                    }
                                    _ => None,
                                };
                                let memo =
                                    memo.filter(|_| known.is_none()).map(|m| (key, chain, m));
                                let known = known.or_else(|| memo.and_then(|k| cache.recall(k)));
                                let classes = match (gate, known) {
                                    (0, _) | (_, Some(_)) => 0,
                                    _ => cache.classes(key, slot, raw),
                                };
                                let matched =
                                    check_known(cache.slice(slot, raw), &name, known, classes);
                                if let (Some(k), None) = (memo, known) {
                                    cache.remember(k, matched != op.negated);
                                }
                            } else {
                                let value = super::cache::apply_all(raw, &rule.transformations);
                                check_known(&value, &name, None, 0);
                            }
                        },
                    );
                }
            }
        }
        if self.scratch.matches.is_empty() {
            return false;
        }
        // Effects need `&mut self` but never touch the scratch, so the matches are read in
        // place, one at a time (moving the scratch out and back cost two copies of it per
        // matched rule).
        for i in 0..self.scratch.matches.len() {
            let m = self.scratch.matches[i].clone();
            let scratch = &self.scratch;
            if rule.operator.is_some() {
                let (name, value) = (&scratch.buf[m.name.clone()], &scratch.buf[m.value.clone()]);
                let data = &mut self.data;
                let start = data.matched_buf.len();
                data.matched_buf.extend_from_slice(name);
                data.matched_buf.extend_from_slice(value);
                data.note_match(start, start + name.len());
            }
            for (n, r) in scratch.captures[m.captures.clone()]
                .iter()
                .enumerate()
                .take(10)
            {
                let group = &scratch.buf[r.clone()];
                let key = [b'0' + n as u8];
                self.data.tx.set(&key, group);
            }
            for effect in &rule.effects {
                self.apply_effect(effect);
            }
        }
        match &rule.chain {
            Some(child) => self.eval_rule(child, head, false),
            None => true,
        }
    }

    /// Reports a matched chain and carries out its disruptive action.
    fn on_chain_matched(&mut self, rule: &Rule, phase: u8) -> Flow {
        if let Some(sev) = rule.meta.severity {
            self.data.highest_severity = self.data.highest_severity.min(sev.number());
        }
        // `nolog` rules that only pass (CRS's many initialisation and scoring rules) are
        // not reported: building their record would cost more than running them.
        if !rule.log && matches!(rule.disruptive, Disruptive::Pass | Disruptive::Block) {
            return Flow::Next;
        }
        let message = rule
            .meta
            .msg
            .as_ref()
            .map(|m| String::from_utf8_lossy(&m.expand(&self.data)).into_owned());
        let data = rule
            .meta
            .logdata
            .as_ref()
            .map(|m| String::from_utf8_lossy(&m.expand(&self.data)).into_owned());
        let disruptive = !matches!(rule.disruptive, Disruptive::Pass);
        let matched_var = self.data.matched_var();
        let matched_data_end = matched_var.len().min(DEFAULT_MATCHED_DATA_LEN);
        self.matched.push(MatchedRule {
            id: rule.id,
            phase,
            message: message.clone(),
            data,
            tags: rule.meta.tags.clone(),
            severity: rule.meta.severity,
            matched_var_name: String::from_utf8_lossy(self.data.matched_var_name()).into_owned(),
            matched_data: String::from_utf8_lossy(&matched_var[..matched_data_end]).into_owned(),
            log: rule.log,
            disruptive,
            file: rule.span.file.to_string(),
            line: rule.span.line,
        });
        let action = match &rule.disruptive {
            Disruptive::Pass | Disruptive::Block => return Flow::Next,
            Disruptive::Allow(scope) => {
                self.allow = Some(*scope);
                return Flow::Stop;
            }
            Disruptive::Deny => DisruptiveAction::Deny,
            Disruptive::Drop => DisruptiveAction::Drop,
            Disruptive::Redirect(url) => {
                DisruptiveAction::Redirect(String::from_utf8_lossy(&url.expand(&self.data)).into())
            }
        };
        let status = match (&action, rule.status) {
            (DisruptiveAction::Redirect(_), s) if !(300..400).contains(&s) => 302,
            (_, s) => s,
        };
        let iv = Intervention {
            status,
            action,
            rule_id: rule.id,
            message,
        };
        match self.mode {
            EngineMode::On => {
                self.intervention = Some(iv);
                Flow::Stop
            }
            _ => {
                self.would_intervene.get_or_insert(iv);
                Flow::Next
            }
        }
    }
}
