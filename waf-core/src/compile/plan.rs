//! The per-phase plan: which rules can be decided without visiting their values.
//!
//! Most rules do not match most requests, and the engine used to learn that the slow way:
//! visit every value of every target, transform it, look up its prefilter result, and only
//! then find that nothing matched. The plan decides two cases up front, per rule, in a
//! few instructions:
//!
//! 1. **Summaries.** A non-negated rule with a prefilter (see [`super::prefilter`]) can only
//!    match a value in which one of its literals occurs. For the rule's prefilter group
//!    (one transformation chain) and each variable its targets name (or the one key a
//!    target names, `REQUEST_HEADERS:User-Agent`), the transaction computes once per
//!    phase the union of the prefilter bits of every such value (a *summary*, ignoring
//!    regex selectors and exclusions, so it is a superset).
//!    When the rule's bit is in none of its variables' summaries, no value can match and
//!    the rule is skipped. Every rule of a group that reads `ARGS` shares the group's
//!    `ARGS` summary, so each (value, chain) is transformed and scanned once per phase.
//! 2. **Empty targets.** A rule whose targets are all collections (no `&` counts, no
//!    single values) visits nothing when those collections are empty, so it cannot
//!    match, negated or not; it is skipped after a length check per target.
//!
//! 3. **Single `TX` tests.** CRS gates every paranoia level with rules such as
//!    `SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "...,skipAfter:END-..."`, about 200
//!    evaluations per request at PL1. A rule that reads one `TX:name`, with no
//!    transformation, exclusion, capture or `multiMatch`, is decided by looking the name
//!    up and running the operator once; only a match goes on to the general path, which
//!    records it. The name is resolved at load to a slot of the transaction's `TX` table
//!    ([`RulePlan::tx_slot`], `eval::vars`), so the look-up is an index, not a hash. When
//!    the operator compares with a number written in the rule ([`TxCompare`]) and the
//!    rule has no chain (every CRS gate and setup rule), the rule loop runs the
//!    comparison from the phase step, and on a match records it and runs the rule's
//!    effects and actions itself, without the general path.
//!
//! 4. **Class summaries.** A rule whose operator has a byte-class gate
//!    ([`crate::operators::rx_classes`]) cannot match a variable none of whose values holds
//!    a byte of those classes after its chain. The ORed classes of each variable's raw
//!    values are computed once per phase, and each step's
//!    [`crate::transformations::Transformation::output_classes`] bounds what the chain can
//!    make of them (a decoder may make anything of a `%`; `t:removeWhitespace` only takes
//!    classes away); when neither the raw classes nor any step's output meets the gate
//!    (`multiMatch` runs the operator after every step), the rule is skipped without
//!    visiting a value. On a JSON body, the `t:none` command-injection rules (932125,
//!    932230, 932370, ...) each visited all of its 1,200 values to learn that.
//!
//! **Where the plan lives.** Each phase step carries a copy of its rule's plan
//! ([`super::Step::Rule`]), and the rule loop decides from the step first: the rules a
//! plan decides (about 320 of the 390 a CRS GET reaches) are then read from one array in
//! order, not from their `Rule`s and the vectors those point to (about five cache lines
//! each, most of them cold in a proxy that serves other connections in between). The sets
//! of variables rules read are interned ([`Summaries::target_sets`]), so a phase ORs the
//! byte classes of a set once for all the rules that share it.
//!
//! None of these changes a result: a skipped rule is one whose value loop would have found no
//! match, a rule without a match has no effect, and a match the loop takes from the plan is
//! recorded as the value loop records it. `tests/plan` checks this against the
//! straightforward evaluation on every CRS test request and the development corpus.
//!
//! Worked example (CRS 942100 on `GET /?id=5`): its group is the `t:urlDecodeUni` chain;
//! its targets name `REQUEST_COOKIES`, `REQUEST_COOKIES_NAMES`, `ARGS_NAMES`, `ARGS`,
//! `XML`. The first rule of that group in phase 2 to read `ARGS` computes that summary:
//! it transforms `5` once, scans it once, and keeps its bits. 942100 `@detectSQLi` has no
//! literals, so it has no prefilter and runs as before; but 942190, whose literals
//! include `union` and `select`, finds its bit clear in all five summaries and is done
//! without touching a value.

use std::collections::HashMap;

use super::Rule;
use crate::operators::numeric::{parse_integer, Comparison};
use crate::variables::{Selector, Variable};

/// One variable (or one key of it) summarised for one prefilter group.
#[derive(Debug)]
pub(crate) struct Summary {
    /// Prefilter group (index into `Program::prefilters`).
    pub(crate) group: u32,
    /// A [`keyed`] variable.
    pub(crate) variable: Variable,
    /// `Selector::Key` for the one key summarised (`REQUEST_HEADERS:User-Agent`), or
    /// `Selector::All` for every value. A target with a regex selector reads the summary
    /// of every value.
    pub(crate) selector: Selector,
}

/// What the plan knows about one rule. The rule loop reads a copy of it kept in the
/// phase's steps ([`super::Step::Rule`]), so a rule the plan rules out costs one read of
/// its step, not of the rule and the vectors it points to (on a CRS GET the loop
/// otherwise touched about 5 cache lines per rule, most of its data misses in a proxy).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RulePlan {
    /// The rule's summaries, one per distinct target variable: a range of
    /// `Program::summary_refs`, whose entries index `Program::summaries`. Empty when the
    /// rule cannot use summaries.
    pub(crate) summaries: (u32, u32),
    /// The rule's place in the prefilters (a copy of `Rule::prefilter`).
    pub(crate) prefilter: Option<super::prefilter::PrefilterRef>,
    /// The variables the rule's targets read: an index into [`Summaries::target_sets`]
    /// (rules share sets: most of CRS's attack rules read the same six collections).
    pub(crate) target_set: u32,
    /// Every target is a whole collection (no count, no single value): an empty set of
    /// collections means no match.
    pub(crate) collections_only: bool,
    /// The rule reads one `TX:name`, or its count `&TX:name` (CRS's setup rules: 1 when
    /// set, else 0), and nothing else, untransformed, with no exclusion, capture or
    /// `multiMatch`: it can be decided by one lookup and one operator call.
    pub(crate) tx_test: bool,
    /// For a `tx_test` rule whose operator compares with a number written in the rule
    /// (`@lt 2`, CRS's paranoia gates): the comparison, run without the rule.
    pub(crate) tx_compare: Option<TxCompare>,
    /// The rule has no chained rule, so with `tx_compare` the rule loop can take its
    /// match as the whole chain's: record it and run its effects and actions itself.
    pub(crate) chainless: bool,
    /// The operator's byte-class gate ([`crate::compile::RuleOperator::required_classes`])
    /// when the rule can be ruled out by it as a whole: not negated, and every target a
    /// [`keyed`] variable read whole or by key (no count). 0 otherwise.
    pub(crate) class_gate: crate::transformations::features::Features,
    /// The byte classes that can make some step of the rule's chain act
    /// ([`crate::transformations::Transformation::triggers`]): values holding none of them
    /// leave the chain as they came.
    pub(crate) chain_triggers: crate::transformations::features::Features,
    /// For a `tx_test` rule, the slot of its name in `Program::tx_names` (set by the
    /// compiler after planning): the transaction's `TX` table keeps that name at that
    /// index, so the lookup is an index, not a hash.
    pub(crate) tx_slot: u32,
}

/// A planned `TX` test whose operator is a number comparison with a literal argument.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxCompare {
    /// The operator.
    pub(crate) comparison: Comparison,
    /// Its argument.
    pub(crate) number: i64,
    /// `!@lt`.
    pub(crate) negated: bool,
    /// `&TX:name`: the value compared is 1 when the name is set, else 0.
    pub(crate) count: bool,
}

impl TxCompare {
    /// Whether the rule matches, given the name's value (`None`: not set). As the value
    /// loop does it: an unset name is no value, so no match; its count is 0.
    pub(crate) fn matches(self, value: Option<&[u8]>) -> bool {
        let n = match (self.count, value) {
            (true, v) => i64::from(v.is_some()),
            (false, Some(v)) => parse_integer(v),
            (false, None) => return false,
        };
        self.comparison.holds(n, self.number) != self.negated
    }
}

/// A set of variables, one bit per [`Variable`] (in declaration order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct VarSet([u64; 2]);

const _: () = assert!(Variable::ALL.len() <= 128, "VarSet holds 128 variables");

impl VarSet {
    /// Adds `v`.
    pub(crate) fn insert(&mut self, v: Variable) {
        let i = v as usize;
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// Whether the sets share a variable.
    pub(crate) fn intersects(self, other: VarSet) -> bool {
        self.0[0] & other.0[0] != 0 || self.0[1] & other.0[1] != 0
    }

    /// Calls `f` with each variable of the set, in declaration order, until it returns
    /// true; returns whether it did.
    pub(crate) fn any(self, mut f: impl FnMut(Variable) -> bool) -> bool {
        for (w, mut bits) in self.0.into_iter().enumerate() {
            while bits != 0 {
                let v = Variable::ALL[w * 64 + bits.trailing_zeros() as usize];
                if f(v) {
                    return true;
                }
                bits &= bits - 1;
            }
        }
        false
    }
}

/// The summaries of a program and, for each rule, which of them it reads.
#[derive(Debug, Default)]
pub(crate) struct Summaries {
    /// Every (group, variable) some rule reads.
    pub(crate) specs: Vec<Summary>,
    /// The ranges of [`RulePlan::summaries`] point here.
    pub(crate) refs: Vec<u32>,
    /// The distinct sets of variables rules read ([`RulePlan::target_set`]).
    pub(crate) target_sets: Vec<VarSet>,
}

/// Whether every value [`crate::eval::data::TxData::visit`] yields for `v` carries a cache
/// key (so it has a transformed value and a prefilter result to summarise).
fn keyed(v: Variable) -> bool {
    use Variable as V;
    collection(v) && !matches!(v, V::FilesSizes)
        || matches!(
            v,
            V::RemoteAddr
                | V::RemotePort
                | V::RemoteHost
                | V::ServerAddr
                | V::ServerPort
                | V::ServerName
                | V::UniqueId
                | V::RequestMethod
                | V::RequestProtocol
                | V::RequestUriRaw
                | V::RequestUri
                | V::RequestFilename
                | V::PathInfo
                | V::RequestBasename
                | V::QueryString
                | V::RequestLine
                | V::RequestBody
                | V::ReqbodyProcessor
                | V::ReqbodyErrorMsg
                | V::ReqbodyProcessorErrorMsg
                | V::ResponseBody
                | V::ResponseContentLength
                | V::ResponseContentType
                | V::ResponseProtocol
                | V::ResponseStatus
                | V::ModsecBuild
                | V::WebAppId
        )
}

/// The request- and response-derived collections whose size
/// [`crate::eval::data::TxData::collection_len`] knows.
pub(crate) const COLLECTIONS: [Variable; 19] = {
    use Variable as V;
    [
        V::Args,
        V::ArgsGet,
        V::ArgsPost,
        V::ArgsNames,
        V::ArgsGetNames,
        V::ArgsPostNames,
        V::RequestHeaders,
        V::RequestHeadersNames,
        V::RequestCookies,
        V::RequestCookiesNames,
        V::ResponseHeaders,
        V::ResponseHeadersNames,
        V::Files,
        V::FilesNames,
        V::FilesSizes,
        V::MultipartPartHeaders,
        V::MultipartFilename,
        V::MultipartName,
        V::Xml,
    ]
};

/// Whether `v` is one of [`COLLECTIONS`].
pub(crate) fn collection(v: Variable) -> bool {
    COLLECTIONS.contains(&v)
}

/// Summaries by (group, variable, key).
type SummaryIndex = HashMap<(u32, Variable, Option<Vec<u8>>), u32>;

/// Plans every rule (chained ones too) and returns the summaries they read.
pub(crate) fn build(rules: &mut [Rule]) -> Summaries {
    let mut out = Summaries::default();
    let mut index: SummaryIndex = HashMap::new();
    let mut sets: HashMap<VarSet, u32> = HashMap::new();
    fn visit(
        rule: &mut Rule,
        out: &mut Summaries,
        index: &mut SummaryIndex,
        sets: &mut HashMap<VarSet, u32>,
    ) {
        if let Some(op) = &rule.operator {
            rule.plan.collections_only = !rule.targets.is_empty()
                && rule
                    .targets
                    .iter()
                    .all(|t| !t.count && collection(t.variable));
            rule.plan.tx_test = matches!(
                rule.targets.as_slice(),
                [t] if t.variable == Variable::Tx && matches!(t.selector, Selector::Key(_))
            ) && rule.transformations.is_empty()
                && rule.exclusions.is_empty()
                && !rule.capture
                && !rule.multi_match;
            rule.plan.tx_compare = match (rule.plan.tx_test, rule.targets.as_slice()) {
                (true, [t]) => op
                    .operator
                    .literal_comparison()
                    .map(|(comparison, number)| TxCompare {
                        comparison,
                        number,
                        negated: op.negated,
                        count: t.count,
                    }),
                _ => None,
            };
            rule.plan.chainless = rule.chain.is_none();
            rule.plan.prefilter = rule.prefilter;
            let mut set = VarSet::default();
            for t in &rule.targets {
                set.insert(t.variable);
            }
            rule.plan.target_set = *sets.entry(set).or_insert_with(|| {
                out.target_sets.push(set);
                out.target_sets.len() as u32 - 1
            });
            // 4. Class summaries: the classes of a variable's raw values, ORed, and what the
            // chain can make of them miss the operator's gate: then no value can match.
            let gate = op.required_classes;
            rule.plan.class_gate = if gate != 0
                && !op.negated
                && !rule.targets.is_empty()
                && rule.targets.iter().all(|t| !t.count && keyed(t.variable))
            {
                gate
            } else {
                0
            };
            rule.plan.chain_triggers = rule.transformations.iter().fold(0, |m, t| m | t.triggers());
            let summarisable = !op.negated
                && !rule.multi_match
                && !rule.targets.is_empty()
                && rule.targets.iter().all(|t| !t.count && keyed(t.variable));
            if let (Some(pf), true) = (rule.prefilter, summarisable) {
                let start = out.refs.len() as u32;
                for t in &rule.targets {
                    let key = match &t.selector {
                        Selector::Key(k) => Some(k.clone()),
                        _ => None,
                    };
                    let entry = index.entry((pf.group, t.variable, key.clone()));
                    let id = *entry.or_insert_with(|| {
                        out.specs.push(Summary {
                            group: pf.group,
                            variable: t.variable,
                            selector: key.map_or(Selector::All, Selector::Key),
                        });
                        out.specs.len() as u32 - 1
                    });
                    if !out.refs[start as usize..].contains(&id) {
                        out.refs.push(id);
                    }
                }
                rule.plan.summaries = (start, out.refs.len() as u32);
            }
        }
        if let Some(child) = &mut rule.chain {
            visit(child, out, index, sets);
        }
    }
    for rule in rules.iter_mut() {
        visit(rule, &mut out, &mut index, &mut sets);
    }
    out
}
