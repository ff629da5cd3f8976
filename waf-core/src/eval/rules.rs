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

use std::borrow::Cow;

use crate::actions::ctl::RuleSelector;
use crate::actions::{AllowScope, Disruptive};
use crate::compile::{Rule, Step};
use crate::eval::data::{Num, Pair, VarName};
use crate::eval::TxState;
use crate::limits::DEFAULT_MATCHED_DATA_LEN;
use crate::operators::Captures;
use crate::report::MatchedRule;
use crate::variables::Selector;
use crate::verdict::{DisruptiveAction, Intervention, Verdict};
use crate::waf::EngineMode;

/// One matching value, kept until the rule's targets are all evaluated.
struct Match {
    name: Vec<u8>,
    value: Vec<u8>,
    captures: Option<Vec<Vec<u8>>>,
}

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
        self.cache.clear();
        let program = std::sync::Arc::clone(&self.program);
        let steps = &program.phases[usize::from(phase - 1)];
        let mut i = 0;
        let mut skip = 0u32;
        while i < steps.len() {
            let Step::Rule(r) = steps[i] else {
                i += 1;
                continue;
            };
            i += 1;
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let rule = &program.rules[r];
            if self.is_removed(rule) {
                continue;
            }
            self.data.matched_vars.clear();
            self.data.rule_id = rule.id;
            if !self.eval_rule(rule, rule) {
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
        self.removed_rules.iter().any(|s| selects(s, rule))
    }

    /// Evaluates `rule` (the starter or a chained rule of `head`); true when it and its
    /// chain matched.
    fn eval_rule(&mut self, rule: &Rule, head: &Rule) -> bool {
        let mut matches: Vec<Match> = Vec::new();
        match &rule.operator {
            None => matches.push(Match {
                name: Vec::new(),
                value: Vec::new(),
                captures: None,
            }),
            Some(op) => {
                let data = &self.data;
                let cache = &mut self.cache;
                let prefilter = rule.prefilter.and_then(|r| {
                    self.program
                        .prefilters
                        .get(r.group as usize)
                        .map(|p| (r, p))
                });
                let removed_targets = &self.removed_targets;
                for target in &rule.targets {
                    let variable = target.variable;
                    let excluded = |key: &[u8]| {
                        rule.exclusions
                            .iter()
                            .any(|(v, s)| *v == variable && s.matches(key))
                            || removed_targets.iter().any(|(s, t)| {
                                t.variable == variable
                                    && t.selector.matches(key)
                                    && selects(s, head)
                            })
                    };
                    // Runs the operator on one value (unless its result is `known`) and
                    // records a match; true when it matched.
                    let mut check_known =
                        |value: &[u8], name: &VarName<'_>, known: Option<bool>| {
                            let mut caps = Captures::default();
                            let hit = known.unwrap_or_else(|| {
                                op.operator.evaluate(
                                    value,
                                    data,
                                    if rule.capture && !op.negated {
                                        Some(&mut caps)
                                    } else {
                                        None
                                    },
                                )
                            });
                            if hit != op.negated {
                                let mut rendered = Vec::new();
                                name.render(&mut rendered);
                                matches.push(Match {
                                    name: rendered,
                                    value: value.to_vec(),
                                    captures: (rule.capture && !op.negated).then_some(caps.groups),
                                });
                                true
                            } else {
                                false
                            }
                        };
                    // Big collections under a prefiltered, non-negated operator: visit only
                    // the values whose literals let this rule match (see `Candidates`).
                    if let Some((r, p)) = prefilter.filter(|_| {
                        !rule.multi_match
                            && !op.negated
                            && !target.count
                            && matches!(target.selector, Selector::All)
                            && data.indexed_len(variable).is_some()
                    }) {
                        if cache.candidates(variable, r.group).is_none() {
                            cache.build_candidates(
                                data,
                                variable,
                                r.group,
                                &rule.transformations,
                                &rule.prefix_ids,
                                p,
                            );
                        }
                        let range = cache
                            .candidates(variable, r.group)
                            .map_or(0..0, |c| c.range(r.bit));
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
                            check_known(cache.slice(slot, raw), &name, None);
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
                        check_known(&value, &name, None);
                        continue;
                    }
                    data.visit(
                        variable,
                        &target.selector,
                        &excluded,
                        &mut |key, name, raw| {
                            if rule.multi_match {
                                // Run the operator on the value before and after each step that
                                // changed it.
                                if check_known(raw, &name, None) {
                                    return;
                                }
                                let mut value: Cow<'_, [u8]> = Cow::Borrowed(raw);
                                for t in &rule.transformations {
                                    let next = match t.apply(&value) {
                                        Cow::Borrowed(_) => None,
                                        Cow::Owned(v) => Some(v),
                                    };
                                    if let Some(v) = next {
                                        value = Cow::Owned(v);
                                        if check_known(&value, &name, None) {
                                            return;
                                        }
                                    }
                                }
                            } else if let Some(key) = key {
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
                                check_known(cache.slice(slot, raw), &name, known);
                            } else {
                                let value = super::cache::apply_all(raw, &rule.transformations);
                                check_known(&value, &name, None);
                            }
                        },
                    );
                }
            }
        }
        if matches.is_empty() {
            return false;
        }
        for m in matches {
            if rule.operator.is_some() {
                self.data
                    .matched_vars
                    .push(Pair::new(m.name.clone(), m.value.clone()));
                self.data.matched_var_name = m.name;
                self.data.matched_var = m.value;
            }
            if let Some(groups) = m.captures {
                for (i, g) in groups.into_iter().enumerate().take(10) {
                    self.data.tx.insert(i.to_string().into_bytes(), g);
                }
            }
            for effect in &rule.effects {
                self.apply_effect(effect);
            }
        }
        match &rule.chain {
            Some(child) => self.eval_rule(child, head),
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
        let matched_data_end = self.data.matched_var.len().min(DEFAULT_MATCHED_DATA_LEN);
        self.matched.push(MatchedRule {
            id: rule.id,
            phase,
            message: message.clone(),
            data,
            tags: rule.meta.tags.clone(),
            severity: rule.meta.severity,
            matched_var_name: String::from_utf8_lossy(&self.data.matched_var_name).into_owned(),
            matched_data: String::from_utf8_lossy(&self.data.matched_var[..matched_data_end])
                .into_owned(),
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
            Disruptive::Redirect(url) => DisruptiveAction::Redirect(url.clone()),
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

/// Whether a `ctl` rule selector picks `rule` (tags and msg are the starter's).
pub(super) fn selects(selector: &RuleSelector, rule: &Rule) -> bool {
    match selector {
        RuleSelector::Ids(ranges) => ranges.iter().any(|r| (r.start..=r.end).contains(&rule.id)),
        RuleSelector::Tag(tag) => rule.has_tag(tag),
        RuleSelector::Msg(msg) => rule
            .meta
            .msg
            .as_ref()
            .and_then(|m| m.as_literal())
            .is_some_and(|m| m == msg.as_bytes()),
    }
}
