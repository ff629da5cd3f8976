//! The run-time side of the per-phase plan ([`crate::compile::plan`]): deciding a rule
//! from what the plan knows, before (and instead of) visiting its values.

use crate::compile::plan::RulePlan;
use crate::compile::Rule;
use crate::eval::data::VarName;
use crate::eval::TxState;
use crate::variables::{Selector, Variable};

/// What the plan tells of a rule before its values are visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Planned {
    /// It cannot match.
    NoMatch,
    /// It matches, and it has no chained rule ([`RulePlan::chainless`]): record the
    /// match with [`TxState::record_planned_match`], then run its effects and actions.
    Match,
    /// The rule must be evaluated.
    Unknown,
}

impl TxState {
    /// Whether the plan decides `rule` without the value loop (see
    /// [`crate::compile::plan`]): then the scratch holds its matches (none when the plan
    /// shows it cannot match).
    ///
    /// `ruled_in`: the rule loop already ran [`TxState::plan_rules_out`] on the step's copy
    /// of the plan and it did not rule the rule out; only a `TX` test's match is left to
    /// record.
    pub(super) fn plan_decides(&mut self, rule: &Rule, ruled_in: bool) -> bool {
        if rule.plan.tx_test && self.tx_untouched() {
            if let (Some(op), [target]) = (&rule.operator, rule.targets.as_slice()) {
                if let Selector::Key(key) = &target.selector {
                    let value = self.data.tx.get_at(rule.plan.tx_slot, key);
                    if target.count {
                        // As the value loop counts (`TxData::count`): one name, set or not;
                        // a match is recorded under `TX` with the count as its value.
                        let n: &[u8] = if value.is_some() { b"1" } else { b"0" };
                        if op.operator.evaluate(n, &self.data, None) != op.negated {
                            let name = VarName {
                                variable: Variable::Tx,
                                key: None,
                            };
                            self.scratch.push(&name, n, false);
                        }
                        return true;
                    }
                    // As `TxData::visit` and the value loop would: nothing set is nothing
                    // visited; a match is recorded under `TX:name`. The name's slot is an
                    // index into the table (`eval::vars`), not a hash lookup.
                    if let Some(v) = value {
                        if op.operator.evaluate(v, &self.data, None) != op.negated {
                            let name = VarName {
                                variable: Variable::Tx,
                                key: Some(key),
                            };
                            self.scratch.push(&name, v, false);
                        }
                    }
                    return true;
                }
            }
        }
        !ruled_in && self.plan_rules_out(&rule.plan, rule)
    }

    /// Whether no `ctl:ruleRemoveTarget*` of this transaction names `TX`, so that a planned
    /// `TX` test reads its one name: a removed target could be the rule's `TX:name` only if
    /// it names `TX`. (CRS removes `REQUEST_FILENAME` from its XSS rules on nearly every
    /// request, 941010, and that must not send every paranoia gate of the phases after it
    /// to the value loop.)
    fn tx_untouched(&self) -> bool {
        self.removed_targets
            .iter()
            .all(|(_, t)| t.variable != Variable::Tx)
    }

    /// What `plan` (the copy in a phase step) tells of `rule` without visiting values.
    /// `rule` is read only when the plan alone cannot tell (a chain that may change a
    /// value's byte classes), so that on the rule loop's common path a decided rule costs
    /// the read of its step.
    pub(super) fn plan_step(&mut self, plan: &RulePlan, rule: &Rule) -> Planned {
        if let Some(test) = plan.tx_compare.filter(|_| self.tx_untouched()) {
            if let Some(value) = self.data.tx.try_slot(plan.tx_slot) {
                return match (test.matches(value), plan.chainless) {
                    (false, _) => Planned::NoMatch,
                    (true, true) => Planned::Match,
                    (true, false) => Planned::Unknown,
                };
            }
        }
        if self.plan_rules_out(plan, rule) {
            Planned::NoMatch
        } else {
            Planned::Unknown
        }
    }

    /// Records the match of a [`Planned::Match`] as the value loop would have: in
    /// `MATCHED_VARS`, `MATCHED_VAR` and `MATCHED_VAR_NAME`, under `TX:name` (`TX` for a
    /// count, whose value is 1 or 0).
    pub(super) fn record_planned_match(&mut self, plan: &RulePlan) {
        let Some(test) = plan.tx_compare else { return };
        let key = match test.count {
            true => None,
            false => self.program.tx_names.get(plan.tx_slot as usize),
        };
        self.data
            .record_tx_match(key.map(Vec::as_slice), plan.tx_slot);
    }

    /// Whether `plan` (the rule's, or the copy in its phase step) shows, without visiting
    /// values, that `rule` cannot match; as [`TxState::plan_step`], it reads `rule` only
    /// when the plan alone cannot tell.
    pub(super) fn plan_rules_out(&mut self, plan: &RulePlan, rule: &Rule) -> bool {
        let program = &self.program;
        let targets = program.summaries.target_sets.get(plan.target_set as usize);
        if plan.collections_only && targets.is_some_and(|t| !t.intersects(self.nonempty)) {
            return true;
        }
        let gate = plan.class_gate;
        if let (true, Some(&targets)) = (gate != 0, targets) {
            // The raw values' classes of every target first (one `AND` each), then a bound
            // on each step's output for all of them together (the bound is monotone).
            let mut classes = self.cache.set_classes(&self.data, plan.target_set, targets);
            if classes & gate == 0
                && (classes & plan.chain_triggers == 0
                    || rule.transformations.iter().all(|step| {
                        classes = step.output_classes(classes);
                        classes & gate == 0
                    }))
            {
                return true;
            }
        }
        let (start, end) = plan.summaries;
        let Some(pf) = plan.prefilter.filter(|_| start < end) else {
            return false;
        };
        let (Some(refs), Some(prefilter)) = (
            program.summaries.refs.get(start as usize..end as usize),
            program.prefilters.get(pf.group as usize),
        ) else {
            return false;
        };
        !refs.iter().any(|&id| {
            let Some(spec) = program.summaries.specs.get(id as usize) else {
                return true;
            };
            self.cache
                .summary_passes(&self.data, id, spec, pf.bit, prefilter)
        })
    }
}
