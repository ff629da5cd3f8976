//! Compiled rules and their targets.

use crate::actions::ctl::RuleSelector;
use crate::actions::{Disruptive, Effect};
use crate::macros::MacroString;
use crate::operators::Operator;
use crate::report::Severity;
use crate::seclang::Span;
use crate::transformations::Transformation;
use crate::variables::{Selector, Variable};

/// One compiled rule: a chain starter, a chained rule or a `SecAction`.
#[derive(Debug)]
pub(crate) struct Rule {
    /// Rule id; 0 for chained rules.
    pub(crate) id: u64,
    /// Phase 1..=5.
    pub(crate) phase: u8,
    /// Where it is defined.
    pub(crate) span: Span,
    /// What it inspects.
    pub(crate) targets: Vec<Target>,
    /// `!VAR:key` exclusions, from the rule and from `SecRuleUpdateTargetBy*`.
    pub(crate) exclusions: Vec<(Variable, Selector)>,
    /// The operator; `None` for `SecAction` (always matches).
    pub(crate) operator: Option<RuleOperator>,
    /// Transformations, after `t:none` and default actions are resolved.
    pub(crate) transformations: Vec<Transformation>,
    /// `prefix_ids[i]` is the column of `transformations[..=i]` in the per-transaction
    /// table of transformed values, or `u32::MAX` when that step's result is not kept
    /// (see `compile::cache_columns`). The last one always has a column.
    pub(crate) prefix_ids: Vec<u32>,
    /// Metadata used in reports and macros.
    pub(crate) meta: Metadata,
    /// The disruptive action, with `block` resolved against `SecDefaultAction`.
    pub(crate) disruptive: Disruptive,
    /// Status for `deny` (`status:N`, or the default action's, or 403).
    pub(crate) status: u16,
    /// `log` / `nolog`.
    pub(crate) log: bool,
    /// `auditlog` / `noauditlog`.
    pub(crate) auditlog: bool,
    /// `capture`.
    pub(crate) capture: bool,
    /// `multiMatch`.
    pub(crate) multi_match: bool,
    /// `skipAfter:MARKER`, resolved to a step index in the rule's phase by the compiler
    /// (`usize::MAX` when the marker does not follow: skip the rest of the phase).
    pub(crate) skip_after: Option<(String, usize)>,
    /// `skip:N`.
    pub(crate) skip: u32,
    /// Per-match effects in written order.
    pub(crate) effects: Vec<Effect>,
    /// The chained rule, if `chain`.
    pub(crate) chain: Option<Box<Rule>>,
    /// The rule's place in the prefilter of its transformation chain, if it has one.
    pub(crate) prefilter: Option<super::prefilter::PrefilterRef>,
    /// For a `multiMatch` rule: its place in the prefilter of values with no
    /// transformation, which tells whether its operator can match the raw value (the
    /// first of the values it runs on; the steps' outputs are not prefiltered).
    pub(crate) raw_prefilter: Option<super::prefilter::PrefilterRef>,
    /// What the plan decides before visiting values (see [`super::plan`]).
    pub(crate) plan: super::plan::RulePlan,
}

/// Report metadata of a rule.
#[derive(Debug, Default)]
pub(crate) struct Metadata {
    pub(crate) msg: Option<MacroString>,
    pub(crate) logdata: Option<MacroString>,
    pub(crate) tags: Vec<String>,
    pub(crate) severity: Option<Severity>,
    pub(crate) ver: Option<String>,
    pub(crate) rev: Option<String>,
    pub(crate) maturity: Option<u8>,
    pub(crate) accuracy: Option<u8>,
}

/// An operator with its negation.
#[derive(Debug)]
pub(crate) struct RuleOperator {
    pub(crate) operator: Operator,
    pub(crate) negated: bool,
    /// For operators whose result depends on the value alone and is worth remembering
    /// (`@detectSQLi`, `@detectXSS`, `@rx`, `@pm`): an id shared by every rule with the same
    /// operator and argument, kept only where another rule reuses the answer and the rule
    /// does not capture (`compile::keep_shared_memos`). The transaction remembers the
    /// result per (value, chain, id).
    pub(crate) memo: Option<u32>,
    /// The operator's [`Operator::required_classes`]: a value whose byte classes
    /// ([`crate::transformations::features`]) miss all of them gets "no match" without a
    /// call. 0: every value is evaluated.
    pub(crate) required_classes: crate::transformations::features::Features,
}

/// One thing a rule inspects.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) variable: Variable,
    pub(crate) selector: Selector,
    /// `&VAR`: the number of values.
    pub(crate) count: bool,
}

impl Rule {
    /// Whether any rule in the chain has this tag (tags live on the chain starter).
    pub(crate) fn has_tag(&self, tag: &str) -> bool {
        self.meta.tags.iter().any(|t| t == tag)
    }

    /// Whether a `ctl` or `SecRuleRemove*` selector picks this rule (tags and msg are the
    /// starter's).
    pub(crate) fn selected_by(&self, selector: &RuleSelector) -> bool {
        match selector {
            RuleSelector::Ids(ranges) => {
                ranges.iter().any(|r| (r.start..=r.end).contains(&self.id))
            }
            RuleSelector::Tag(tag) => self.has_tag(tag),
            RuleSelector::Msg(msg) => self
                .meta
                .msg
                .as_ref()
                .and_then(|m| m.as_literal())
                .is_some_and(|m| m == msg.as_bytes()),
        }
    }
}
