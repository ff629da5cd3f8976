//! Macro strings: `%{tx.anomaly_score}`, `%{MATCHED_VAR}`, `%{REQUEST_HEADERS.User-Agent}`.
//!
//! Parsed once at compile time into literal and variable parts; expanded per transaction by
//! whoever implements [`MacroExpander`] (the evaluation state). A string without `%{` is a
//! literal and costs nothing to expand.

use std::borrow::Cow;

use crate::variables::Variable;

/// A string with `%{VAR}` / `%{VAR.key}` references, compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MacroString {
    parts: Vec<MacroPart>,
}

/// One piece of a [`MacroString`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MacroPart {
    /// Text copied as is.
    Literal(Vec<u8>),
    /// A variable reference.
    Variable(MacroVar),
    /// `%{TX:/^score_/}`: the first value whose key matches the regex, as libmodsecurity 3
    /// expands a macro naming a regex-keyed variable.
    Matching {
        /// The variable.
        variable: Variable,
        /// The key regex (boxed: rare, and twice the size of the other variants; CRS
        /// has about 2,000 macro parts).
        keys: Box<KeyRegex>,
    },
}

/// The variable a [`MacroPart::Variable`] names: `%{tx.anomaly_score}`,
/// `%{REQUEST_HEADERS.User-Agent}`, `%{MATCHED_VAR}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MacroVar {
    /// The variable.
    pub(crate) variable: Variable,
    /// The key after `.` or `:`, lower-cased (collection keys are case-insensitive).
    pub(crate) key: Option<String>,
    /// For `TX` with a key: the key's slot in the transaction's `TX` table
    /// (`Program::tx_names`, set by the compiler, as for `setvar` names and the plan's `TX`
    /// tests), so that expanding `%{tx.critical_anomaly_score}` reads an index, not a
    /// hash; `u32::MAX` until then, or for any other variable.
    pub(crate) tx_slot: u32,
}

/// The key regex of a [`MacroPart::Matching`], compared by its pattern.
#[derive(Clone, Debug)]
pub(crate) struct KeyRegex {
    pattern: String,
    selector: crate::variables::Selector,
}

impl PartialEq for KeyRegex {
    fn eq(&self, other: &KeyRegex) -> bool {
        self.pattern == other.pattern
    }
}

impl Eq for KeyRegex {}

impl MacroString {
    /// Compiles `text`. Fails with a message when a `%{...}` names an unknown variable or
    /// is not closed.
    pub(crate) fn parse(text: &str) -> Result<MacroString, String> {
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("%{") {
            literal.extend_from_slice(&rest.as_bytes()[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(format!("unclosed macro in {text:?}"));
            };
            let inner = after[..end].trim();
            let (name, key) = match inner.find(['.', ':']) {
                Some(i) => (&inner[..i], Some(&inner[i + 1..])),
                None => (inner, None),
            };
            let variable = Variable::from_name(name)
                .ok_or_else(|| format!("unknown variable {name:?} in macro %{{{inner}}}"))?;
            if !literal.is_empty() {
                parts.push(MacroPart::Literal(std::mem::take(&mut literal)));
            }
            let regex = key
                .filter(|k| k.len() >= 2 && k.starts_with('/') && k.ends_with('/'))
                .map(|k| &k[1..k.len() - 1]);
            match regex {
                Some(pattern) => parts.push(MacroPart::Matching {
                    variable,
                    keys: Box::new(KeyRegex {
                        pattern: pattern.to_string(),
                        selector: crate::variables::Selector::regex(pattern)
                            .map_err(|e| format!("{e} in macro %{{{inner}}}"))?,
                    }),
                }),
                None => parts.push(MacroPart::Variable(MacroVar {
                    variable,
                    key: key.map(str::to_ascii_lowercase),
                    tx_slot: u32::MAX,
                })),
            }
            rest = &after[end + 1..];
        }
        literal.extend_from_slice(rest.as_bytes());
        if !literal.is_empty() || parts.is_empty() {
            parts.push(MacroPart::Literal(literal));
        }
        Ok(MacroString { parts })
    }

    /// Whether every variable the string's macros read is one `reads` accepts (true for a
    /// literal).
    pub(crate) fn reads_only(&self, reads: impl Fn(Variable) -> bool) -> bool {
        self.parts.iter().all(|p| match p {
            MacroPart::Literal(_) => true,
            MacroPart::Variable(MacroVar { variable, .. })
            | MacroPart::Matching { variable, .. } => reads(*variable),
        })
    }

    /// Gives each keyed `TX` reference (`%{tx.name}`) the slot `slot` returns for its
    /// lower-cased name ([`MacroVar::tx_slot`]; the compiler's table of `TX` names).
    pub(crate) fn slot_tx_keys(&mut self, mut slot: impl FnMut(&[u8]) -> u32) {
        for part in &mut self.parts {
            if let MacroPart::Variable(MacroVar {
                variable: Variable::Tx,
                key: Some(key),
                tx_slot,
            }) = part
            {
                *tx_slot = slot(key.as_bytes());
            }
        }
    }

    /// The text when the string has no macro.
    pub(crate) fn as_literal(&self) -> Option<&[u8]> {
        match self.parts.as_slice() {
            [MacroPart::Literal(l)] => Some(l),
            _ => None,
        }
    }

    /// Like [`MacroString::expand`], but also borrows when the string is one macro whose
    /// value the expander can lend (`%{tx.inbound_anomaly_score_threshold}` as an
    /// operator's argument: no allocation per evaluation).
    pub(crate) fn expand_lent<'a>(&'a self, expander: &'a dyn MacroExpander) -> Cow<'a, [u8]> {
        if let [MacroPart::Variable(var)] = self.parts.as_slice() {
            if let Some(v) = expander.borrow_variable(var) {
                return Cow::Borrowed(v);
            }
        }
        self.expand(expander)
    }

    /// Expands with `expander`; borrows when the string is a literal.
    pub(crate) fn expand<'a>(&'a self, expander: &dyn MacroExpander) -> Cow<'a, [u8]> {
        if let Some(l) = self.as_literal() {
            return Cow::Borrowed(l);
        }
        let mut out = Vec::new();
        self.expand_into(expander, &mut out);
        Cow::Owned(out)
    }

    /// Appends the expansion to `out` (a caller's reused buffer: no allocation once it is
    /// large enough).
    pub(crate) fn expand_into(&self, expander: &dyn MacroExpander, out: &mut Vec<u8>) {
        for part in &self.parts {
            match part {
                MacroPart::Literal(l) => out.extend_from_slice(l),
                MacroPart::Variable(var) => expander.append_variable(var, out),
                MacroPart::Matching { variable, keys } => {
                    expander.append_matching(*variable, &keys.selector, out)
                }
            }
        }
    }
}

/// Resolves a variable reference to bytes during expansion (implemented by the transaction
/// state). A missing variable expands to nothing.
pub(crate) trait MacroExpander {
    /// Appends the value of `var` to `out`.
    fn append_variable(&self, var: &MacroVar, out: &mut Vec<u8>);

    /// The value of `var` as a slice, when the expander holds it as one (`TX:name`):
    /// lets a string that is one macro expand without a copy. `None` means "ask
    /// [`MacroExpander::append_variable`]", not "missing".
    fn borrow_variable(&self, var: &MacroVar) -> Option<&[u8]> {
        let _ = var;
        None
    }

    /// Appends the first value of `variable` whose key `keys` selects (`%{TX:/re/}`);
    /// nothing when none does.
    fn append_matching(
        &self,
        variable: Variable,
        keys: &crate::variables::Selector,
        out: &mut Vec<u8>,
    ) {
        let _ = (variable, keys, out);
    }

    /// Called by an operator whose backtracking search hit its match limit, so that the
    /// transaction can set `TX:MSC_PCRE_LIMITS_EXCEEDED` (see `operators/rx_backtrack.rs`).
    fn note_match_limit_exceeded(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl MacroExpander for Fixed {
        fn append_variable(&self, var: &MacroVar, out: &mut Vec<u8>) {
            out.extend_from_slice(var.variable.name().as_bytes());
            if let Some(k) = &var.key {
                out.push(b'.');
                out.extend_from_slice(k.as_bytes());
            }
        }
    }

    #[test]
    fn literal_borrows() {
        let m = MacroString::parse("abc").unwrap();
        assert_eq!(m.as_literal(), Some(&b"abc"[..]));
        assert!(matches!(m.expand(&Fixed), Cow::Borrowed(b"abc")));
    }

    #[test]
    fn expands_keys_lower_cased() {
        let m = MacroString::parse("x %{tx.Score} %{MATCHED_VAR}!").unwrap();
        assert_eq!(&*m.expand(&Fixed), b"x TX.score MATCHED_VAR!");
    }

    #[test]
    fn regex_keys_are_selectors() {
        let m = MacroString::parse("%{TX:/^Score_/}").unwrap();
        assert!(matches!(
            m.parts.as_slice(),
            [MacroPart::Matching { variable: Variable::Tx, keys }] if keys.pattern == "^Score_"
        ));
        assert!(MacroString::parse("%{TX:/(/}").is_err());
    }

    #[test]
    fn rejects_unknown_and_unclosed() {
        assert!(MacroString::parse("%{nope}").is_err());
        assert!(MacroString::parse("%{tx.a").is_err());
    }
}
