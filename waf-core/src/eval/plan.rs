//! The run-time side of the per-phase plan ([`crate::compile::plan`]): deciding a rule
//! from what the plan knows, before (and instead of) visiting its values.

use crate::compile::Rule;
use crate::eval::data::VarName;
use crate::eval::TxState;
use crate::variables::{Selector, Variable};

impl TxState {
    /// Whether the plan decides `rule` without the value loop (see
    /// [`crate::compile::plan`]): then the scratch holds its matches (none when the plan
    /// shows it cannot match).
    pub(super) fn plan_decides(&mut self, rule: &Rule) -> bool {
        // A target removed at run time (`ctl:ruleRemoveTarget*`) could be this rule's
        // `TX:name` only if it names `TX`: CRS removes `REQUEST_FILENAME` from its XSS
        // rules on nearly every request (941010), and that must not send every paranoia
        // gate of the phases after it to the value loop.
        if rule.plan.tx_test
            && self
                .removed_targets
                .iter()
                .all(|(_, t)| t.variable != Variable::Tx)
        {
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
        self.plan_rules_out(rule)
    }

    /// Whether the plan shows, without visiting values, that `rule` cannot match.
    fn plan_rules_out(&mut self, rule: &Rule) -> bool {
        if rule.plan.collections_only
            && rule
                .targets
                .iter()
                .all(|t| self.data.collection_len(t.variable) == 0)
        {
            return true;
        }
        let gate = rule.plan.class_gate;
        if gate != 0 {
            // The raw values' classes of every target first (one `AND` each), then a bound
            // on each step's output for all of them together (the bound is monotone).
            let mut classes = 0;
            for t in &rule.targets {
                classes |= self.cache.variable_classes(&self.data, t.variable);
                if classes & gate != 0 {
                    break;
                }
            }
            if classes & gate == 0
                && (classes & rule.plan.chain_triggers == 0
                    || rule.transformations.iter().all(|step| {
                        classes = step.output_classes(classes);
                        classes & gate == 0
                    }))
            {
                return true;
            }
        }
        let (start, end) = rule.plan.summaries;
        let Some(pf) = rule.prefilter.filter(|_| start < end) else {
            return false;
        };
        let program = &self.program;
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
