//! `setvar`: create, change or delete a collection variable.
//!
//! ```text
//! setvar:tx.score=+%{tx.critical_anomaly_score}   add
//! setvar:tx.score=-5                              subtract
//! setvar:'tx.rfi_parameter_%{MATCHED_VAR_NAME}=.%{tx.1}'   set (macros in key and value)
//! setvar:!tx.score                                delete
//! setvar:tx.flag                                  set to "1"
//! ```
//! Keys are case-insensitive (stored lower-cased). Arithmetic parses both sides as
//! integers the way ModSecurity does (`atoi`: garbage is 0).

use crate::macros::MacroString;

/// A collection `setvar`, `initcol` and `expirevar` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CollectionName {
    /// `TX`: per transaction.
    Tx,
    /// `IP`: per client, kept in the `Waf`.
    Ip,
    /// `GLOBAL`: one per `Waf`.
    Global,
    /// `SESSION`.
    Session,
    /// `USER`.
    User,
    /// `RESOURCE`.
    Resource,
}

impl CollectionName {
    pub(crate) fn parse(name: &str) -> Result<CollectionName, String> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "tx" => CollectionName::Tx,
            "ip" => CollectionName::Ip,
            "global" => CollectionName::Global,
            "session" => CollectionName::Session,
            "user" => CollectionName::User,
            "resource" => CollectionName::Resource,
            _ => return Err(format!("unknown collection {name:?}")),
        })
    }
}

/// What a `setvar` does to its variable.
#[derive(Debug)]
pub(crate) enum SetVarOp {
    /// `=value` (or no `=`: "1").
    Set(MacroString),
    /// `=+value`.
    Add(MacroString),
    /// `=-value`.
    Sub(MacroString),
    /// `!name`.
    Delete,
}

impl SetVarOp {
    /// The value's template (`None` for `!name`).
    pub(crate) fn value(&self) -> Option<&MacroString> {
        match self {
            SetVarOp::Set(v) | SetVarOp::Add(v) | SetVarOp::Sub(v) => Some(v),
            SetVarOp::Delete => None,
        }
    }

    /// The value's template, to change (`None` for `!name`).
    pub(crate) fn template_mut(&mut self) -> Option<&mut MacroString> {
        match self {
            SetVarOp::Set(v) | SetVarOp::Add(v) | SetVarOp::Sub(v) => Some(v),
            SetVarOp::Delete => None,
        }
    }
}

/// A compiled `setvar`.
#[derive(Debug)]
pub(crate) struct SetVar {
    pub(crate) collection: CollectionName,
    pub(crate) key: MacroString,
    pub(crate) op: SetVarOp,
    /// For a `TX` variable whose name has no macro: its slot in the transaction's `TX`
    /// table (`Program::tx_names`, set by the compiler), or `u32::MAX`.
    pub(crate) tx_slot: u32,
}

impl SetVar {
    pub(crate) fn parse(text: &str) -> Result<SetVar, String> {
        let text = text.trim();
        let (delete, text) = match text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (target, value) = match text.split_once('=') {
            Some((t, v)) => (t.trim(), Some(v)),
            None => (text, None),
        };
        let (col, key) = target
            .split_once('.')
            .ok_or_else(|| format!("setvar needs collection.name, got {target:?}"))?;
        if key.is_empty() {
            return Err(format!("setvar has an empty variable name in {text:?}"));
        }
        let collection = CollectionName::parse(col.trim())?;
        // Keys are case-insensitive: lower-case the literal parts once, here (macro names
        // are case-insensitive too).
        let key = MacroString::parse(&key.to_ascii_lowercase())?;
        let op = match (delete, value) {
            (true, None) => SetVarOp::Delete,
            (true, Some(_)) => return Err(format!("setvar:!{text} cannot have a value")),
            (false, None) => SetVarOp::Set(MacroString::parse("1")?),
            (false, Some(v)) => {
                if let Some(rest) = v.strip_prefix('+') {
                    SetVarOp::Add(MacroString::parse(rest)?)
                } else if let Some(rest) = v.strip_prefix('-') {
                    SetVarOp::Sub(MacroString::parse(rest)?)
                } else {
                    SetVarOp::Set(MacroString::parse(v)?)
                }
            }
        };
        Ok(SetVar {
            collection,
            key,
            op,
            tx_slot: u32::MAX,
        })
    }
}

/// ModSecurity's integer reading of a variable: optional whitespace, sign, digits; anything
/// else ends the number; no digits is 0. Saturates instead of overflowing.
pub(crate) fn parse_int(bytes: &[u8]) -> i64 {
    let mut i = 0;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    let mut negative = false;
    if i < bytes.len() && (bytes[i] == b'-' || bytes[i] == b'+') {
        negative = bytes[i] == b'-';
        i += 1;
    }
    let mut n: i64 = 0;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        n = n
            .saturating_mul(10)
            .saturating_add(i64::from(bytes[i] - b'0'));
        i += 1;
    }
    if negative {
        -n
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let s = SetVar::parse("tx.score=+%{tx.critical_anomaly_score}").unwrap();
        assert_eq!(s.collection, CollectionName::Tx);
        assert!(matches!(s.op, SetVarOp::Add(_)));
        assert!(matches!(
            SetVar::parse("!TX.a").unwrap().op,
            SetVarOp::Delete
        ));
        assert!(matches!(
            SetVar::parse("ip.x").unwrap().op,
            SetVarOp::Set(_)
        ));
        assert!(matches!(
            SetVar::parse("tx.a=-1").unwrap().op,
            SetVarOp::Sub(_)
        ));
        assert!(SetVar::parse("nope.a=1").is_err());
        assert!(SetVar::parse("tx=1").is_err());
    }

    #[test]
    fn integers_like_atoi() {
        assert_eq!(parse_int(b" 42abc"), 42);
        assert_eq!(parse_int(b"-7"), -7);
        assert_eq!(parse_int(b"abc"), 0);
        assert_eq!(parse_int(b""), 0);
        assert_eq!(parse_int(b"99999999999999999999999"), i64::MAX);
    }
}
