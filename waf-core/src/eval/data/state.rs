//! What rules themselves set or produced: `TX`, `ENV`, persistent collections, matched variables, the current rule, severity and duration.

use super::{visit_named, Emit, LastMatch, Num, TxData, VarName, Visit};
use crate::actions::CollectionName;
use crate::variables::Variable;

impl TxData {
    /// Records a match of `TX:key` (or, with no key, of the count `&TX:name`: 1 or 0) as
    /// the rule loop records a match: appended to `MATCHED_VARS`, and made `MATCHED_VAR`
    /// and `MATCHED_VAR_NAME`. The value is read from the `TX` table's `slot`.
    pub(crate) fn record_tx_match(&mut self, key: Option<&[u8]>, slot: u32) {
        let start = self.matched_buf.len();
        VarName {
            variable: Variable::Tx,
            key,
        }
        .render(&mut self.matched_buf);
        let mid = self.matched_buf.len();
        let value = self.tx.get_slot(slot);
        let value: &[u8] = match (key, value) {
            (None, Some(_)) => b"1",
            (None, None) => b"0",
            (Some(_), v) => v.unwrap_or_default(),
        };
        self.matched_buf.extend_from_slice(value);
        self.note_match(start, mid);
    }

    /// Records the match whose name is `matched_buf[start..mid]` and whose value is the
    /// rest of the buffer: appended to `MATCHED_VARS`, and made `MATCHED_VAR` and
    /// `MATCHED_VAR_NAME`. The one place both the rule loop's matches and the plan's
    /// ([`TxData::record_tx_match`]) are recorded.
    #[inline]
    pub(crate) fn note_match(&mut self, start: usize, mid: usize) {
        let end = self.matched_buf.len();
        self.matched_vars.push((start..mid, mid..end));
        self.last_match = LastMatch {
            current: true,
            name: start..mid,
            value: mid..end,
        };
    }

    /// Empties `MATCHED_VARS` for the next rule. `MATCHED_VAR` and `MATCHED_VAR_NAME`
    /// outlive the rule: when the rule that ends matched, its buffer becomes `last_buf`
    /// (a swap, not a copy) and the last one is reused.
    #[inline]
    pub(crate) fn start_rule(&mut self) {
        if self.last_match.current {
            std::mem::swap(&mut self.matched_buf, &mut self.last_buf);
            self.last_match.current = false;
        }
        self.matched_buf.clear();
        self.matched_vars.clear();
    }

    /// `MATCHED_VAR`: the value of the last match of any rule.
    pub(crate) fn matched_var(&self) -> &[u8] {
        self.last_match_part(&self.last_match.value)
    }

    /// `MATCHED_VAR_NAME`: the variable name of the last match of any rule.
    pub(crate) fn matched_var_name(&self) -> &[u8] {
        self.last_match_part(&self.last_match.name)
    }

    fn last_match_part(&self, range: &std::ops::Range<usize>) -> &[u8] {
        let buf = match self.last_match.current {
            true => &self.matched_buf,
            false => &self.last_buf,
        };
        buf.get(range.clone()).unwrap_or_default()
    }

    /// [`TxData::visit`] for this family.
    pub(super) fn visit_state(&self, e: Emit<'_>, f: &mut Visit<'_>) {
        use Variable as V;
        let Emit {
            variable,
            selector,
            excluded,
            ..
        } = e;
        match variable {
            V::Tx => visit_named(
                variable,
                selector,
                excluded,
                |k| self.tx.get(k),
                self.tx.iter(),
                f,
            ),
            V::Env => visit_named(
                variable,
                selector,
                excluded,
                |k| self.env.get(k).map(Vec::as_slice),
                self.env.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
                f,
            ),
            V::Ip | V::Global | V::Session | V::User | V::Resource => {
                let col = match variable {
                    V::Ip => CollectionName::Ip,
                    V::Global => CollectionName::Global,
                    V::Session => CollectionName::Session,
                    V::User => CollectionName::User,
                    _ => CollectionName::Resource,
                };
                if let Some((_, rec)) = self.collections.get(&col) {
                    let mut keys: Vec<&Vec<u8>> = rec
                        .vars
                        .keys()
                        .filter(|k| selector.matches(k) && !excluded(k))
                        .collect();
                    keys.sort();
                    for k in keys {
                        f(
                            None,
                            VarName {
                                variable,
                                key: Some(k),
                            },
                            &rec.vars[k].0,
                        );
                    }
                }
            }
            V::MatchedVars | V::MatchedVarsNames => {
                for (name, value) in &self.matched_vars {
                    let key = &self.matched_buf[name.clone()];
                    let value = &self.matched_buf[value.clone()];
                    if selector.matches(key) && !excluded(key) {
                        f(
                            None,
                            VarName {
                                variable,
                                key: Some(key),
                            },
                            if variable == V::MatchedVars {
                                value
                            } else {
                                key
                            },
                        );
                    }
                }
            }
            V::MatchedVar => f(
                None,
                VarName {
                    variable,
                    key: None,
                },
                self.matched_var(),
            ),
            V::MatchedVarName => f(
                None,
                VarName {
                    variable,
                    key: None,
                },
                self.matched_var_name(),
            ),
            V::Rule if selector.matches(b"id") => f(
                None,
                VarName {
                    variable,
                    key: Some(b"id"),
                },
                Num::new(i128::from(self.rule_id)).as_bytes(),
            ),
            V::HighestSeverity => e.number(i128::from(self.highest_severity), f),
            V::Duration => e.number(i128::from(self.duration_micros), f),
            _ => {}
        }
    }
}
