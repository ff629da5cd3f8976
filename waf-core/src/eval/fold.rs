//! Evaluating and applying the phase-1 setup fold ([`crate::compile::fold`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::compile::fold::{chain_effects_fold, effects_fold, reads_only_tx, Fold};
use crate::compile::Step;
use crate::eval::TxState;
use crate::transaction::ConnectionInfo;
use crate::waf::{EngineMode, Waf};

/// The phase-1 setup fold of `waf`'s program, evaluated on a transaction of its own (no
/// request: the rules in a fold read none); `None` with the engine off.
pub(crate) fn fold_setup(waf: &Waf) -> Option<Fold> {
    if waf.program.config.engine_mode == EngineMode::Off {
        return None;
    }
    let nowhere = SocketAddr::from(([0, 0, 0, 0], 0));
    let conn = ConnectionInfo::new(nowhere, nowhere);
    let mut tx = TxState::new(waf.clone(), &conn, SystemTime::UNIX_EPOCH, Some("fold"));
    tx.fold_setup()
}

impl TxState {
    /// The longest run of phase-1 steps that folds (see [`crate::compile::fold`]),
    /// evaluated on this transaction, which nothing else has touched; `None` when no run
    /// holds two rules.
    pub(crate) fn fold_setup(&mut self) -> Option<Fold> {
        let program = Arc::clone(&self.program);
        let steps = &program.phases[0];
        let mut best: Option<(usize, Fold)> = None;
        let mut i = 0;
        while i < steps.len() {
            match steps[i] {
                Step::Rule(r, _) if reads_only_tx(&program.rules[r]) => {
                    let (rules, fold) = self.fold_from(steps, i);
                    i = fold.end.max(i + 1);
                    if rules >= 2 && best.as_ref().is_none_or(|(n, _)| rules > *n) {
                        best = Some((rules, fold));
                    }
                }
                _ => i += 1,
            }
        }
        best.map(|(_, fold)| fold)
    }

    /// Evaluates the steps from `start` on an empty `TX` while they fold; returns how
    /// many rules did, and what they left.
    fn fold_from(&mut self, steps: &[Step], start: usize) -> (usize, Fold) {
        let program = Arc::clone(&self.program);
        self.data.tx.clear();
        self.data.start_rule();
        self.data.last_match = Default::default();
        self.data.last_buf.clear();
        self.data.phase = 1;
        let (mut end, mut rules, mut matched_any) = (start, 0, false);
        for (i, step) in steps.iter().enumerate().skip(start) {
            let Step::Rule(r, _) = *step else {
                continue;
            };
            let rule = &program.rules[r];
            if !reads_only_tx(rule) || (rule.chain.is_some() && !chain_effects_fold(rule)) {
                break;
            }
            // After `start_rule`, the last match so far is all in `last_buf`.
            self.data.start_rule();
            let tx_before = self.data.tx.live_entries();
            let last_before = (self.data.last_match.clone(), self.data.last_buf.clone());
            self.data.rule_id = rule.id;
            let matched = self.eval_rule(rule, rule, false);
            let changed = matched || self.data.tx.live_entries() != tx_before;
            if changed && !effects_fold(rule) {
                // Put back what the rule did: the run ends before it.
                self.data.tx.clear();
                self.data.tx.restore(&tx_before);
                (self.data.last_match, self.data.last_buf) = last_before;
                break;
            }
            matched_any |= matched;
            rules += 1;
            end = i + 1;
        }
        self.data.start_rule();
        let last_match = matched_any.then(|| {
            let (name, value) = (self.data.matched_var_name(), self.data.matched_var());
            (name.to_vec(), value.to_vec())
        });
        let fold = Fold {
            start,
            end,
            tx: self.data.tx.live_entries(),
            last_match,
        };
        (rules, fold)
    }

    /// Whether this transaction may take `fold` instead of running its steps: nothing set
    /// in `TX` yet, no rule or target removed.
    pub(super) fn fold_applies(&self) -> bool {
        self.data.tx.untouched() && self.removed_rules.is_empty() && self.removed_targets.is_empty()
    }

    /// Leaves what the fold's steps would have left.
    pub(super) fn apply_fold(&mut self, fold: &Fold) {
        self.data.tx.restore(&fold.tx);
        if let Some((name, value)) = &fold.last_match {
            self.data.start_rule();
            self.data.matched_buf.extend_from_slice(name);
            self.data.matched_buf.extend_from_slice(value);
            self.data.note_match(0, name.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::Step;
    use crate::Waf;

    /// The ids of the rules a configuration's fold stands for.
    fn folded(rules: &str) -> Vec<u64> {
        let waf = Waf::builder().seclang("t", rules).build().unwrap();
        let p = &waf.program;
        let Some(f) = &p.fold else { return Vec::new() };
        p.phases[0][f.start..f.end]
            .iter()
            .filter_map(|s| match s {
                Step::Rule(r, _) => Some(p.rules[*r].id),
                Step::Marker => None,
            })
            .collect()
    }

    #[test]
    fn the_longest_run_of_rules_that_read_and_set_only_tx_folds() {
        let on = "SecRuleEngine On\n";
        // 3 reads the request; 5 matched and logs; 6 would deny but does not match.
        let rules = format!(
            "{on}SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a=1\"\n\
             SecAction \"id:2,phase:1,pass,nolog,setvar:tx.b=%{{tx.a}}\"\n\
             SecRule ARGS \"@rx x\" \"id:3,phase:1,pass,nolog\"\n\
             SecAction \"id:4,phase:1,pass,nolog,setvar:tx.c=1\"\n\
             SecRule &TX:missing \"@eq 0\" \"id:7,phase:1,pass,nolog,setvar:tx.d=1\"\n\
             SecRule &TX:c \"@eq 0\" \"id:6,phase:1,deny,log\"\n\
             SecRule TX:c \"@eq 1\" \"id:8,phase:1,pass,nolog,setvar:tx.e=1\"\n\
             SecRule TX:c \"@eq 1\" \"id:5,phase:1,pass,log\"\n\
             SecAction \"id:9,phase:1,pass,nolog,setvar:tx.f=1\""
        );
        assert_eq!(folded(&rules), [4, 7, 6, 8]);
        // 3's starter matches and removes 5, then its chain fails: a real transaction
        // keeps the removal, so 3 ends the run.
        assert_eq!(
            folded(&format!(
                "{on}SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a=1\"\n\
                 SecAction \"id:2,phase:1,pass,nolog,setvar:tx.b=1\"\n\
                 SecRule TX:a \"@eq 1\" \"id:3,phase:1,pass,nolog,ctl:ruleRemoveById=5,chain\"\n\
                   SecRule TX:a \"@eq 2\" \"t:none\"\n\
                 SecAction \"id:4,phase:1,pass,nolog,setvar:tx.c=1\"\n\
                 SecAction \"id:5,phase:1,pass,nolog,setvar:tx.d=1\""
            )),
            [1, 2]
        );
        // A setvar reading the request, another collection, a phase-2 rule: no fold of two.
        assert_eq!(
            folded(&format!(
                "{on}SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a=%{{REQUEST_URI}}\"\n\
                 SecAction \"id:2,phase:1,pass,nolog,setvar:ip.a=1\"\n\
                 SecAction \"id:3,phase:2,pass,nolog,setvar:tx.a=1\""
            )),
            Vec::<u64>::new()
        );
    }

    /// `MATCHED_VAR` after the fold is the last folded match's, also when the run ends at
    /// a rule that matched right after another match.
    #[test]
    fn the_fold_leaves_the_last_folded_match() {
        let rules = "SecRuleEngine On\n\
             SecAction \"id:1,phase:1,pass,nolog,setvar:tx.a=1\"\n\
             SecRule TX:a \"@eq 1\" \"id:2,phase:1,pass,nolog,setvar:tx.bb=22\"\n\
             SecRule TX:bb \"@eq 22\" \"id:3,phase:1,pass,log\"";
        let waf = Waf::builder().seclang("t", rules).build().unwrap();
        let fold = waf.program.fold.as_ref().unwrap();
        assert_eq!((fold.start, fold.end), (0, 2));
        assert_eq!(
            fold.last_match,
            Some((b"TX:a".to_vec(), b"1".to_vec())),
            "{:?}",
            fold.last_match
                .as_ref()
                .map(|(n, v)| (String::from_utf8_lossy(n), String::from_utf8_lossy(v)))
        );
    }
}
