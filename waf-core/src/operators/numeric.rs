//! Shared parts of the number comparisons `@eq`, `@ge`, `@gt`, `@le`, `@lt`.
//!
//! ModSecurity v3 reads both the value and the argument with `std::stoi`-like rules, and
//! uses 0 when that fails. We copy the tolerant reading, as C's `atoi` does it: leading
//! whitespace is skipped, then an optional sign, then digits; anything after the digits is
//! ignored, and no digit at all gives 0 (`""`, `"xxx"`). So `@eq 0` matches `xxx` and
//! `@gt %{tx.max_num_args}` compares with 0 while the variable is unset. We use 64-bit
//! numbers and saturate instead of overflowing (ModSecurity's `stoi` throws and yields 0 on
//! overflow, which would let `99999999999` pass `@gt 1000`; saturating is the safer reading).
//! Coraza is stricter (`strconv.Atoi`, so `"10abc"` is 0); the ModSecurity vectors agree with
//! the tolerant reading.

use std::borrow::Cow;

use crate::macros::{MacroExpander, MacroString};

/// A number argument: parsed once when literal, expanded and parsed per call otherwise.
#[derive(Debug)]
pub(crate) enum NumberArgument {
    /// No macro: the number.
    Literal(i64),
    /// With macros (`%{tx.max_num_args}`).
    Macro(MacroString),
}

impl NumberArgument {
    /// Parses `argument`. Non-numeric literals are accepted (they read as 0, as in
    /// ModSecurity); unknown or unclosed macros are an error.
    pub(crate) fn new(argument: &str) -> Result<NumberArgument, String> {
        let template = MacroString::parse(argument)?;
        Ok(match template.as_literal() {
            Some(literal) => NumberArgument::Literal(parse_integer(literal)),
            None => NumberArgument::Macro(template),
        })
    }

    /// The number, when no macro is involved.
    pub(crate) fn literal(&self) -> Option<i64> {
        match self {
            NumberArgument::Literal(n) => Some(*n),
            NumberArgument::Macro(_) => None,
        }
    }

    /// The template, when the argument has macros.
    pub(crate) fn template_mut(&mut self) -> Option<&mut MacroString> {
        match self {
            NumberArgument::Literal(_) => None,
            NumberArgument::Macro(m) => Some(m),
        }
    }

    /// The argument's value for this call.
    pub(crate) fn value(&self, expander: &dyn MacroExpander) -> i64 {
        match self {
            NumberArgument::Literal(n) => *n,
            NumberArgument::Macro(m) => {
                let expanded: Cow<'_, [u8]> = m.expand_lent(expander);
                parse_integer(&expanded)
            }
        }
    }
}

/// One of the number comparisons, for callers that hold the argument themselves (the
/// plan's `TX` tests, [`crate::compile::plan::TxCompare`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comparison {
    /// `@eq`.
    Eq,
    /// `@ge`.
    Ge,
    /// `@gt`.
    Gt,
    /// `@le`.
    Le,
    /// `@lt`.
    Lt,
}

impl Comparison {
    /// Whether `value` compares to `argument` as the operator asks.
    pub(crate) fn holds(self, value: i64, argument: i64) -> bool {
        match self {
            Comparison::Eq => value == argument,
            Comparison::Ge => value >= argument,
            Comparison::Gt => value > argument,
            Comparison::Le => value <= argument,
            Comparison::Lt => value < argument,
        }
    }
}

/// Reads an integer the way C's `atoi` does (see the module docs), saturating at the `i64`
/// bounds.
pub(crate) fn parse_integer(text: &[u8]) -> i64 {
    let mut rest = text;
    while let [b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r', tail @ ..] = rest {
        rest = tail;
    }
    let negative = match rest {
        [b'-', tail @ ..] => {
            rest = tail;
            true
        }
        [b'+', tail @ ..] => {
            rest = tail;
            false
        }
        _ => false,
    };
    let mut value: i64 = 0;
    for &b in rest.iter().take_while(|b| b.is_ascii_digit()) {
        let digit = i64::from(b - b'0');
        value = value.saturating_mul(10);
        value = if negative {
            value.saturating_sub(digit)
        } else {
            value.saturating_add(digit)
        };
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::FixedExpander;

    #[test]
    fn atoi_rules() {
        assert_eq!(parse_integer(b""), 0);
        assert_eq!(parse_integer(b"xxx"), 0);
        assert_eq!(parse_integer(b"42"), 42);
        assert_eq!(parse_integer(b"  \t-17abc"), -17);
        assert_eq!(parse_integer(b"+5"), 5);
        assert_eq!(parse_integer(b"- 5"), 0);
        assert_eq!(parse_integer(b"5 6"), 5);
        assert_eq!(parse_integer(b"99999999999999999999999"), i64::MAX);
        assert_eq!(parse_integer(b"-99999999999999999999999"), i64::MIN);
    }

    #[test]
    fn literal_and_macro() {
        assert!(matches!(
            NumberArgument::new("10").unwrap(),
            NumberArgument::Literal(10)
        ));
        let m = NumberArgument::new("%{tx.paranoia}").unwrap();
        assert_eq!(m.value(&FixedExpander(b"3")), 3);
        assert_eq!(m.value(&FixedExpander(b"")), 0);
        assert!(NumberArgument::new("%{tx.x").is_err());
    }
}
