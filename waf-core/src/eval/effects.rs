//! Per-match effects: `setvar`, `ctl`, `initcol`, `setenv`, `expirevar`.

use crate::actions::ctl::Ctl;
use crate::actions::setvar::{parse_int, SetVarOp};
use crate::actions::{CollectionName, Effect, SetVar};
use crate::eval::data::Num;
use crate::eval::TxState;

impl TxState {
    /// Applies the path-scoped [`crate::Exclusion`]s whose prefix the request path
    /// (`REQUEST_FILENAME`) starts with, as a `ctl` rule placed before every other would.
    pub(super) fn apply_path_exclusions(&mut self) {
        for e in &self.program.path_exclusions {
            if !self.data.filename.starts_with(&e.prefix) {
                continue;
            }
            match &e.target {
                None => self.removed_rules.push(e.rules.clone()),
                Some(t) => self.removed_targets.push((e.rules.clone(), t.clone())),
            }
        }
    }

    pub(super) fn apply_effect(&mut self, effect: &Effect) {
        match effect {
            Effect::SetVar(s) => self.set_var(s),
            Effect::Ctl(c) => self.apply_ctl(c),
            Effect::InitCol(col, key) => {
                let key = key.expand(&self.data).into_owned();
                let rec = self.runtime.store.load(*col, &key, self.data.epoch_secs);
                self.data.collections.insert(*col, (key, rec));
            }
            Effect::SetEnv(name, value) => {
                let name = name.expand(&self.data).to_ascii_lowercase();
                let value = value.expand(&self.data).into_owned();
                self.data.env.insert(name, value);
            }
            Effect::ExpireVar(col, key, secs) => {
                let key = key.expand(&self.data).to_ascii_lowercase();
                let secs = parse_int(&secs.expand(&self.data)).max(0) as u64;
                let expiry = self.data.epoch_secs.saturating_add(secs);
                if let Some((_, rec)) = self.data.collections.get_mut(col) {
                    if let Some(entry) = rec.vars.get_mut(&key) {
                        entry.1 = expiry;
                    }
                }
            }
        }
    }

    fn set_var(&mut self, s: &SetVar) {
        // A `TX` name without macros has a slot in the table (`eval::vars`): set and read
        // by index, with no hashing (`TxVars::get_at`, `set_at`). Names and values with
        // macros are expanded into the transaction's recycled text buffers.
        let mut text = std::mem::take(&mut self.text);
        let key: &[u8] = match s.key.as_literal() {
            // `SetVar::parse` lower-cased the name; what its macros expand to may not be.
            Some(l) => l,
            None => {
                text.key.clear();
                s.key.expand_into(&self.data, &mut text.key);
                text.key.make_ascii_lowercase();
                &text.key
            }
        };
        let num;
        let value: Option<&[u8]> = match &s.op {
            SetVarOp::Delete => None,
            SetVarOp::Set(v) => Some(match v.as_literal() {
                Some(l) => l,
                None => {
                    text.value.clear();
                    v.expand_into(&self.data, &mut text.value);
                    &text.value
                }
            }),
            SetVarOp::Add(v) | SetVarOp::Sub(v) => {
                let delta = parse_int(&v.expand_lent(&self.data));
                let current = match s.collection {
                    CollectionName::Tx => self.data.tx.get_at(s.tx_slot, key),
                    col => self.var_value(col, key),
                };
                let current = current.map_or(0, parse_int);
                let n = if matches!(s.op, SetVarOp::Add(_)) {
                    current.saturating_add(delta)
                } else {
                    current.saturating_sub(delta)
                };
                num = Num::new(i128::from(n));
                Some(num.as_bytes())
            }
        };
        match s.collection {
            CollectionName::Tx => match value {
                // Overwrite in place when the variable exists: no allocation.
                Some(v) => self.data.tx.set_at(s.tx_slot, key, v),
                None => {
                    self.data.tx.remove(key);
                }
            },
            col => {
                // Persistent collections must be initialised with initcol first, as in
                // ModSecurity; a setvar on an uninitialised one has nothing to change.
                if let Some((_, rec)) = self.data.collections.get_mut(&col) {
                    match value {
                        Some(v) => {
                            let expiry = rec.vars.get(key).map_or(0, |e| e.1);
                            rec.vars.insert(key.to_vec(), (v.to_vec(), expiry));
                        }
                        None => {
                            rec.vars.remove(key);
                        }
                    }
                }
            }
        }
        self.text = text;
    }

    fn var_value(&self, col: CollectionName, key: &[u8]) -> Option<&[u8]> {
        match col {
            CollectionName::Tx => self.data.tx.get(key),
            col => self
                .data
                .collections
                .get(&col)
                .and_then(|(_, rec)| rec.vars.get(key))
                .map(|(v, _)| v.as_slice()),
        }
    }

    fn apply_ctl(&mut self, ctl: &Ctl) {
        match ctl {
            Ctl::RuleEngine(mode) => self.mode = *mode,
            Ctl::RuleRemove(sel) => self.removed_rules.push(sel.clone()),
            Ctl::RuleRemoveTarget(sel, target) => {
                self.removed_targets.push((sel.clone(), target.clone()))
            }
            Ctl::RequestBodyProcessor(p) => {
                self.body_processor = Some(*p);
                self.data.body_processor = Some(*p);
            }
            Ctl::ForceRequestBodyVariable(on) => self.force_request_body_variable = *on,
            Ctl::RequestBodyAccess(on) => self.request_body_access = *on,
            Ctl::RequestBodyLimit(n) => self.request_body_limit = *n,
            Ctl::ResponseBodyAccess(on) => self.response_body_access = *on,
            Ctl::ResponseBodyLimit(n) => self.response_body_limit = *n,
            Ctl::AuditEngine(on) => self.audit_engine = *on,
            // The core writes no audit log (see `Ctl::AuditLogParts`).
            Ctl::AuditLogParts => {}
        }
    }
}
