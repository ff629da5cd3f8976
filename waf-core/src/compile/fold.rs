//! The setup at the start of phase 1, folded into its result.
//!
//! A rule set's first phase-1 rules often depend on nothing but its own settings: CRS's
//! `crs-setup.conf` `SecAction`s and its 901 rules test whether each `TX` setting is given
//! (`&TX:inbound_anomaly_score_threshold "@eq 0"`) and set the default if not, about 40
//! rules a transaction that leave the same `TX` table every time. When the `Waf` is built,
//! a run of such rules is evaluated once on an empty transaction (`eval::fold`), and
//! [`Fold`] keeps what it left. A transaction that reaches the run with nothing set in
//! `TX` and no rule or target removed gets that table in one copy and continues after the
//! run; any other transaction runs the rules.
//!
//! A rule belongs to the run when it reads only `TX` ([`reads_only_tx`]: `TX` targets, no
//! operator or a number comparison written in the rule) and, when it matched (or changed
//! `TX`) in the evaluation, all it does is set `TX` from `TX` ([`effects_fold`]: `setvar`
//! on `TX` with macros reading only `TX` and the match, `nolog`, `pass`, no severity, no
//! skip). A rule that did not match does nothing (CRS's `901001`, which denies a request
//! when the setup is missing, is in the run as long as the setup is there), except a chain
//! whose starter matched: its effects ran, so a chain's effects must fold whatever it
//! answered ([`chain_effects_fold`]).
//!
//! Worked example, from CRS: at build time `900000` and `900990` set
//! `tx.blocking_paranoia_level` and `tx.crs_setup_version`; `901100` finds
//! `&TX:inbound_anomaly_score_threshold` at 0 and sets it to 5, and so on to `901200`,
//! which zeroes the scores; `901320`, a chain that sets `tx.ua_hash` from the
//! `User-Agent`, ends the run. A
//! transaction then starts phase 1 with those 40-odd variables set at once.

use crate::actions::{CollectionName, Disruptive, Effect};
use crate::compile::Rule;
use crate::variables::Variable;

/// What a run of phase-1 steps leaves in a transaction that reaches it with nothing set
/// (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Fold {
    /// The steps of phase 1 it stands for: `start..end`.
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// The `TX` variables set after the run, as `eval::vars::TxVars::live_entries` lists
    /// them.
    pub(crate) tx: Vec<(usize, Vec<u8>, Vec<u8>)>,
    /// `MATCHED_VAR_NAME` and `MATCHED_VAR` after the run, when a rule in it matched.
    pub(crate) last_match: Option<(Vec<u8>, Vec<u8>)>,
}

/// Whether `rule` (with its chain) reads nothing but `TX`: its result is the same in
/// every transaction with the same `TX` table.
pub(crate) fn reads_only_tx(rule: &Rule) -> bool {
    let reads = |r: &Rule| {
        r.targets.iter().all(|t| t.variable == Variable::Tx)
            && r.operator.as_ref().is_none_or(|op| {
                op.operator.literal_comparison().is_some()
                    || matches!(
                        op.operator,
                        crate::operators::Operator::UnconditionalMatch(_)
                            | crate::operators::Operator::NoMatch(_)
                    )
            })
    };
    reads(rule) && rule.chain.as_deref().is_none_or(reads_only_tx)
}

/// Whether all a match of `rule` (with its chain) does is set `TX` from `TX` and the
/// match: nothing reported, nothing else changed.
pub(crate) fn effects_fold(rule: &Rule) -> bool {
    chain_effects_fold(rule)
        && !rule.log
        && matches!(rule.disruptive, Disruptive::Pass | Disruptive::Block)
        && rule.meta.severity.is_none()
        && rule.skip_after.is_none()
        && rule.skip == 0
}

/// Whether every effect of `rule` and its chained rules sets `TX` from `TX` and the match.
/// A chain starter's effects run when the starter matches, even if the chain then fails,
/// so a chain must pass this whatever the chain's answer (`ctl:ruleRemoveById` on a
/// starter would otherwise be lost to the fold).
pub(crate) fn chain_effects_fold(rule: &Rule) -> bool {
    let from_tx = |v: Variable| {
        matches!(
            v,
            Variable::Tx | Variable::MatchedVar | Variable::MatchedVarName
        )
    };
    let effects = |r: &Rule| {
        r.effects.iter().all(|e| match e {
            Effect::SetVar(s) => {
                s.collection == CollectionName::Tx
                    && s.key.reads_only(from_tx)
                    && s.op.value().is_none_or(|v| v.reads_only(from_tx))
            }
            _ => false,
        })
    };
    let mut link = Some(rule);
    while let Some(r) = link {
        if !effects(r) {
            return false;
        }
        link = r.chain.as_deref();
    }
    true
}
