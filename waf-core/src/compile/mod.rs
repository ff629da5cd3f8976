//! Syntax tree → [`Program`], the immutable rule set a [`crate::Waf`] runs.
//!
//! The second of the three stages. Everything that can be decided once is decided here:
//! names become enums, operators and regexes are compiled, `block` is resolved against
//! `SecDefaultAction`, chains are linked, `skipAfter` markers become step indices, and
//! `SecRuleRemove*`/`SecRuleUpdate*` directives are applied to the rules they name wherever
//! those are defined, before or after the directive: libmodsecurity 3 keeps them as
//! rule-set-wide exceptions consulted at run time (ModSecurity 2 applied them only to rules
//! defined before; a v2 rule set that relied on an update placed before its rule having no
//! effect behaves differently, none known). Anything unsupported fails the load with its location;
//! an exclusion that names nothing is a warning.

mod config;
pub(crate) mod exclusion;
pub(crate) mod fold;
pub(crate) mod plan;
pub(crate) mod prefilter;
mod rule;

pub use prefilter::ScanBackend;
use std::collections::HashMap;
use std::path::Path;

use crate::actions::{self, Action, CollectionName, Disruptive, Effect};
use crate::error::{Error, ErrorKind, Location, Warning};
use crate::macros::MacroString;
use crate::operators::{Operator, OperatorError};
use crate::seclang::{ActionAst, Directive, DirectiveKind, IdRange, RuleAst, Span, VariableAst};
use crate::transformations::Transformation;
use crate::variables::{Selector, Variable};

pub(crate) use config::Config;
pub use config::LimitAction;
pub(crate) use rule::{Metadata, Rule, RuleOperator, Target};

/// The compiled, immutable rule set. It holds no run-time state: what transactions share
/// at run time lives beside it in the `Waf` (`eval::Runtime`).
#[derive(Debug, Default)]
pub(crate) struct Program {
    pub(crate) config: Config,
    /// Chain starters and `SecAction`s, in definition order.
    pub(crate) rules: Vec<Rule>,
    /// For each phase 1..=5 (index 0..=4), the steps in order.
    pub(crate) phases: [Vec<Step>; 5],
    /// One prefilter per transformation chain (see [`prefilter`]).
    pub(crate) prefilters: Vec<prefilter::Prefilter>,
    /// Value summaries the rules' plans refer to (see [`plan`]).
    pub(crate) summaries: plan::Summaries,
    /// The `TX` names every transaction's table keeps at fixed slots
    /// ([`plan::RulePlan::tx_slot`]).
    pub(crate) tx_names: std::sync::Arc<[Vec<u8>]>,
    pub(crate) warnings: Vec<Warning>,
    /// Evaluate every rule the straightforward way: every value of every target through
    /// the transformations and the operator, with no prefilter, cache or skip. Slower;
    /// the differential test's oracle for the plan (`tests/plan`).
    pub(crate) reference: bool,
    /// Path-scoped [`crate::Exclusion`]s, applied by each transaction before phase 1.
    pub(crate) path_exclusions: Vec<exclusion::PathExclusion>,
    /// Columns of the per-transaction table of transformed values (`Rule::prefix_ids`
    /// are below this, or `u32::MAX`; see [`cache_columns`]).
    pub(crate) prefix_count: usize,
    /// The setup at the start of phase 1, evaluated once (see [`fold`]); set when the
    /// `Waf` is built, never with [`Program::reference`].
    pub(crate) fold: Option<fold::Fold>,
}

/// One step of a phase.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Run `Program::rules[i]`; with a copy of its plan, which the rule loop reads first
    /// (see [`plan::RulePlan`]).
    Rule(usize, plan::RulePlan),
    /// A `SecMarker`: only its position matters (`skipAfter` targets are resolved to it).
    Marker,
}

impl Program {
    pub(crate) fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Warns about path exclusions that select no rule of the program.
    pub(crate) fn warn_unmatched(&mut self, exclusions: &[exclusion::PathExclusion]) {
        for (i, e) in exclusions.iter().enumerate() {
            if !self.rules.iter().any(|r| r.selected_by(&e.rules)) {
                self.warnings.push(Warning {
                    location: None,
                    message: format!("exclusion[{i}] by {} matches no rule", e.rules),
                });
            }
        }
    }
}

/// A rule before its actions are folded: updates by later directives land here first.
struct Draft {
    span: Span,
    ast: Option<RuleAst>,
    actions: Vec<ActionAst>,
    chain: Vec<Draft>,
    id: u64,
    phase: u8,
    tags: Vec<String>,
    msg: Option<String>,
    removed: bool,
    extra_exclusions: Vec<VariableAst>,
    extra_targets: Vec<VariableAst>,
}

enum Item {
    Rule(usize),
    Marker(String),
}

/// Compiles directives in order; the prefilter groups are scanned by `backend`.
///
/// Takes the directives by value and moves their syntax trees into the drafts (one copy,
/// not three: a copy of CRS's trees is several megabytes, alive while the automata are
/// built). The drafts live until the end: freeing them earlier lowers the peak of one load
/// by 2-3 MB, but an nginx reloading CRS then settles 8.5 MB higher in the master and in
/// every worker (after about 20 reloads; `benches/PROFILE.md`, thirteenth session).
pub(crate) fn compile(directives: Vec<Directive>, backend: ScanBackend) -> Result<Program, Error> {
    let mut config = Config::default();
    let mut warnings = Vec::new();
    let mut drafts: Vec<Draft> = Vec::new();
    let mut items: Vec<Item> = Vec::new();
    // Snapshots of the default actions per phase; drafts refer to one by index.
    let mut default_sets: Vec<[Vec<ActionAst>; 5]> = vec![Default::default()];
    let mut chain_open = false;
    let mut seen_ids: HashMap<u64, Span> = HashMap::new();
    // Removal and update directives, applied once every rule is known (see the module doc).
    let mut exceptions: Vec<Directive> = Vec::new();

    // The directives are moved into the drafts, not copied: a copy of CRS's syntax trees
    // is several megabytes, and it was alive while the automata were built.
    for mut d in directives {
        if let Some(note) = &d.note {
            warnings.push(Warning {
                location: Some(Location::from_span(&d.span)),
                message: note.clone(),
            });
        }
        match &d.kind {
            DirectiveKind::Rule(_) | DirectiveKind::Action(_) => {
                let kind = std::mem::replace(&mut d.kind, DirectiveKind::Action(Vec::new()));
                // The actions live in the draft's `actions`, not also in its tree.
                let (ast, acts) = match kind {
                    DirectiveKind::Rule(mut r) => {
                        let acts = std::mem::take(&mut r.actions);
                        (Some(r), acts)
                    }
                    DirectiveKind::Action(a) => (None, a),
                    _ => unreachable!("matched above"),
                };
                let has_chain = acts.iter().any(|a| a.name.eq_ignore_ascii_case("chain"));
                let mut draft = Draft {
                    span: d.span.clone(),
                    ast,
                    actions: acts,
                    chain: Vec::new(),
                    id: 0,
                    phase: 2,
                    tags: Vec::new(),
                    msg: None,
                    removed: false,
                    extra_exclusions: Vec::new(),
                    extra_targets: Vec::new(),
                };
                if chain_open {
                    let parent = drafts
                        .last_mut()
                        .expect("chain_open implies a parent draft");
                    parent.chain.push(draft);
                } else {
                    scan_metadata(&mut draft)?;
                    // libmodsecurity 3 runs a `SecAction` without an id (v2 refuses it); a
                    // `SecRule` needs one in both.
                    let anonymous_action = draft.id == 0 && draft.ast.is_none();
                    if draft.id == 0 && !anonymous_action {
                        return Err(Error::new(
                            ErrorKind::Invalid,
                            Some(&d.span),
                            "rule has no id action",
                        ));
                    }
                    if anonymous_action {
                    } else if let Some(prev) = seen_ids.insert(draft.id, d.span.clone()) {
                        return Err(Error::new(
                            ErrorKind::Invalid,
                            Some(&d.span),
                            format!(
                                "duplicate rule id {} (first defined at {})",
                                draft.id,
                                Location::from_span(&prev)
                            ),
                        ));
                    }
                    items.push(Item::Rule(drafts.len()));
                    drafts.push(draft);
                }
                chain_open = has_chain;
            }
            other => {
                if chain_open {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Some(&d.span),
                        "a rule with the chain action must be followed by a SecRule",
                    ));
                }
                if matches!(
                    other,
                    DirectiveKind::RemoveById(_)
                        | DirectiveKind::RemoveByTag(_)
                        | DirectiveKind::RemoveByMsg(_)
                        | DirectiveKind::UpdateTargetById { .. }
                        | DirectiveKind::UpdateTargetByTag { .. }
                        | DirectiveKind::UpdateTargetByMsg { .. }
                        | DirectiveKind::UpdateActionById { .. }
                ) {
                    exceptions.push(d);
                    continue;
                }
                apply_directive(
                    other,
                    &d.span,
                    &mut config,
                    &mut warnings,
                    &mut drafts,
                    &mut items,
                    &mut default_sets,
                )?;
            }
        }
    }
    for d in exceptions {
        apply_directive(
            &d.kind,
            &d.span,
            &mut config,
            &mut warnings,
            &mut drafts,
            &mut items,
            &mut default_sets,
        )?;
    }
    if chain_open {
        // ModSecurity loads a rule set whose last rule says `chain` with nothing after it,
        // and that chain never completes, so it never fires (v3 `RuleWithOperator::evaluate`:
        // "rule is marked as chained but there isn't a subsequent rule"). Same here: the
        // rule is dropped, with a warning.
        if let Some(last) = drafts.last_mut() {
            last.removed = true;
            warnings.push(Warning {
                location: Some(Location::from_span(&last.span)),
                message: format!(
                    "rule {} has the chain action but no rule follows: it never matches",
                    last.id
                ),
            });
        }
    }

    // Fold drafts into rules and lay out the phases.
    let mut interner = PrefixInterner::default();
    let mut rules = Vec::with_capacity(items.len());
    let mut phases: [Vec<Step>; 5] = Default::default();
    let mut markers_per_phase: [Vec<(String, usize)>; 5] = Default::default();
    for item in &items {
        match item {
            Item::Rule(i) => {
                let draft = &drafts[*i];
                if draft.removed {
                    continue;
                }
                // libmodsecurity 3 reads the defaults from the rule set at run time, so the
                // last default of a phase applies to every rule of that phase, before or
                // after it (ModSecurity 2 applied it to the rules that follow).
                let rule = build_rule(
                    draft,
                    &default_sets[default_sets.len() - 1],
                    None,
                    &mut interner,
                    &config,
                )?;
                let phase_index = usize::from(rule.phase - 1);
                phases[phase_index].push(Step::Rule(rules.len(), plan::RulePlan::default()));
                rules.push(rule);
            }
            Item::Marker(name) => {
                for (p, steps) in phases.iter_mut().enumerate() {
                    markers_per_phase[p].push((name.clone(), steps.len()));
                    steps.push(Step::Marker);
                }
            }
        }
    }
    // Resolve skipAfter: the first marker of that name after the rule in its phase.
    for (p, steps) in phases.iter().enumerate() {
        for (pos, step) in steps.iter().enumerate() {
            let Step::Rule(r, _) = *step else { continue };
            let rule = &mut rules[r];
            if let Some((name, target)) = &mut rule.skip_after {
                *target = markers_per_phase[p]
                    .iter()
                    .find(|(m, at)| *at > pos && m == name)
                    .map_or(usize::MAX, |(_, at)| *at);
                if !markers_per_phase[p].iter().any(|(m, _)| m == name) {
                    warnings.push(Warning {
                        location: Some(Location::from_span(&rule.span)),
                        message: format!("skipAfter names marker {name:?}, which is not defined"),
                    });
                }
            }
        }
    }

    warn_unmatched_ctl_exclusions(&rules, &mut warnings);
    warn_backtracking(&rules, &mut warnings);
    let prefix_count = cache_columns(&mut rules);
    keep_shared_memos(&mut rules);
    let prefilters = prefilter::build(&mut rules, backend);
    let summaries = plan::build(&mut rules);
    let tx_names = slot_tx_names(&mut rules);
    for step in phases.iter_mut().flatten() {
        if let Step::Rule(r, plan) = step {
            *plan = rules[*r].plan;
        }
    }
    Ok(Program {
        prefilters,
        tx_names: tx_names.into(),
        summaries,
        config,
        rules,
        phases,
        warnings,
        reference: false,
        path_exclusions: Vec::new(),
        prefix_count,
        fold: None,
    })
}

/// Gives the `TX` name of every planned `TX` test ([`plan::RulePlan::tx_test`]) and of
/// every `setvar` of a `TX` name without macros a slot, so that the transaction reads and
/// sets them by index; returns the names by slot (`Program::tx_names`).
fn slot_tx_names(rules: &mut [Rule]) -> Vec<Vec<u8>> {
    #[derive(Default)]
    struct Slots {
        names: Vec<Vec<u8>>,
        index: HashMap<Vec<u8>, u32>,
    }
    impl Slots {
        fn slot(&mut self, name: &[u8]) -> u32 {
            let Slots { names, index } = self;
            *index.entry(name.to_vec()).or_insert_with(|| {
                names.push(name.to_vec());
                names.len() as u32 - 1
            })
        }
    }
    /// The `TX` names `%{tx.name}` reads: macro keys are lower-cased, as the table keeps
    /// names.
    fn macros(m: &mut MacroString, slots: &mut Slots) {
        m.slot_tx_keys(|key| slots.slot(key));
    }
    fn visit(rule: &mut Rule, slots: &mut Slots) {
        if let (true, [t]) = (rule.plan.tx_test, rule.targets.as_slice()) {
            // Selector keys are lower-cased, as the table keeps names.
            if let Selector::Key(key) = &t.selector {
                rule.plan.tx_slot = slots.slot(key);
            }
        }
        if let Some(m) = rule
            .operator
            .as_mut()
            .and_then(|op| op.operator.argument_mut())
        {
            macros(m, slots);
        }
        for effect in &mut rule.effects {
            let Effect::SetVar(s) = effect else { continue };
            // `SetVar::parse` lower-cased the name.
            if let Some(name) = s
                .key
                .as_literal()
                .filter(|_| s.collection == CollectionName::Tx)
            {
                s.tx_slot = slots.slot(name);
            }
            macros(&mut s.key, slots);
            if let Some(value) = s.op.template_mut() {
                macros(value, slots);
            }
        }
        let meta = &mut rule.meta;
        for m in meta.msg.iter_mut().chain(meta.logdata.iter_mut()) {
            macros(m, slots);
        }
        if let Some(child) = &mut rule.chain {
            visit(child, slots);
        }
    }
    let mut slots = Slots::default();
    for rule in rules {
        visit(rule, &mut slots);
    }
    slots.names
}

/// Renumbers every rule's chain prefix ids to columns of the per-transaction table of
/// transformed values, and returns how many there are. A prefix gets a column only when a
/// cached result can be read back: it ends some rule's chain, or it starts two or more
/// distinct chains (`t:urlDecodeUni` before `t:lowercase` in one and `t:htmlEntityDecode`
/// in another). Other steps get `u32::MAX` and are computed on the way, not stored: on CRS
/// this keeps a value's row at a fraction of the prefixes, which is what a big body's
/// memory is made of.
fn cache_columns(rules: &mut [Rule]) -> usize {
    fn chains<'r>(rule: &'r Rule, out: &mut Vec<&'r [u32]>) {
        if !rule.prefix_ids.is_empty() {
            out.push(&rule.prefix_ids);
        }
        if let Some(c) = &rule.chain {
            chains(c, out);
        }
    }
    let mut all = Vec::new();
    for r in rules.iter() {
        chains(r, &mut all);
    }
    all.sort();
    all.dedup();
    // For each prefix id: is it a chain's end, and how many distinct chains it starts.
    let mut ends: HashMap<u32, ()> = HashMap::new();
    let mut starts: HashMap<u32, usize> = HashMap::new();
    for chain in &all {
        if let Some((last, proper)) = chain.split_last() {
            ends.insert(*last, ());
            for p in proper {
                *starts.entry(*p).or_default() += 1;
            }
        }
    }
    let mut column: HashMap<u32, u32> = HashMap::new();
    let mut wanted: Vec<u32> = ends
        .keys()
        .copied()
        .chain(starts.iter().filter(|(_, n)| **n >= 2).map(|(p, _)| *p))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    for (i, p) in wanted.iter().enumerate() {
        column.insert(*p, i as u32);
    }
    fn renumber(rule: &mut Rule, column: &HashMap<u32, u32>) {
        for p in &mut rule.prefix_ids {
            *p = column.get(p).copied().unwrap_or(u32::MAX);
        }
        if let Some(c) = &mut rule.chain {
            renumber(c, column);
        }
    }
    for r in rules.iter_mut() {
        renumber(r, &column);
    }
    wanted.len()
}

/// Keeps a rule's operator memo id (see [`RuleOperator::memo`]) only where another rule
/// asks the same question of the same transformed values: same memo id, same chain
/// column, and no capture (a remembered answer has no groups to fill, so a capturing,
/// non-negated operator never remembers). The rule loop remembers exactly the rules left
/// with an id. A result nobody asks for again is not worth a hash-table entry per value:
/// on a 10 KB JSON body, CRS's unshared ids filled a table of 3,584 entries (about
/// 100 KB) that no later rule read.
fn keep_shared_memos(rules: &mut [Rule]) {
    fn key(rule: &Rule) -> Option<(u32, u32)> {
        let op = rule.operator.as_ref()?;
        let remembered = !rule.capture || op.negated;
        let chain = rule.prefix_ids.last().copied().unwrap_or(u32::MAX);
        op.memo.filter(|_| remembered).map(|m| (m, chain))
    }
    fn count(rule: &Rule, seen: &mut HashMap<(u32, u32), usize>) {
        if let Some(k) = key(rule) {
            *seen.entry(k).or_default() += 1;
        }
        if let Some(c) = &rule.chain {
            count(c, seen);
        }
    }
    fn prune(rule: &mut Rule, seen: &HashMap<(u32, u32), usize>) {
        if key(rule).is_none_or(|k| seen.get(&k).copied().unwrap_or(0) < 2) {
            if let Some(op) = &mut rule.operator {
                op.memo = None;
            }
        }
        if let Some(c) = &mut rule.chain {
            prune(c, seen);
        }
    }
    let mut seen = HashMap::new();
    for r in rules.iter() {
        count(r, &mut seen);
    }
    for r in rules.iter_mut() {
        prune(r, &seen);
    }
}

/// Names each rule that runs a pattern on the backtracking engine (`@rx` or a key regex the
/// linear-time engine cannot compile): it is bounded by `SecPcreMatchLimit`, not linear.
fn warn_backtracking(rules: &[Rule], warnings: &mut Vec<Warning>) {
    fn visit(rule: &Rule, id: u64, warnings: &mut Vec<Warning>) {
        let op = rule
            .operator
            .as_ref()
            .is_some_and(|o| o.operator.uses_backtracking());
        let keys = rule
            .targets
            .iter()
            .map(|t| &t.selector)
            .chain(rule.exclusions.iter().map(|(_, s)| s))
            .any(|s| s.uses_backtracking());
        if op || keys {
            let what = match (op, keys) {
                (true, true) => "its @rx pattern and a key regex",
                (true, false) => "its @rx pattern",
                _ => "a key regex",
            };
            warnings.push(Warning {
                location: Some(Location::from_span(&rule.span)),
                message: format!(
                    "rule {id}: {what} needs the backtracking engine (look-around or backreferences); \
                     it runs bounded by SecPcreMatchLimit, not in linear time"
                ),
            });
        }
        if let Some(c) = &rule.chain {
            visit(c, id, warnings);
        }
    }
    for r in rules {
        visit(r, r.id, warnings);
    }
}

/// A `ctl:ruleRemove*` that selects no rule of the whole set has no effect: say so at load.
fn warn_unmatched_ctl_exclusions(rules: &[Rule], warnings: &mut Vec<Warning>) {
    use crate::actions::ctl::Ctl;
    use crate::actions::Effect;
    fn ctls<'r>(rule: &'r Rule, out: &mut Vec<(&'r Span, &'r Ctl)>) {
        for e in &rule.effects {
            if let Effect::Ctl(c) = e {
                out.push((&rule.span, c));
            }
        }
        if let Some(child) = &rule.chain {
            ctls(child, out);
        }
    }
    let mut all = Vec::new();
    for rule in rules {
        ctls(rule, &mut all);
    }
    for (span, ctl) in all {
        let selector = match ctl {
            Ctl::RuleRemove(s) | Ctl::RuleRemoveTarget(s, _) => s,
            _ => continue,
        };
        if !rules.iter().any(|r| r.selected_by(selector)) {
            warnings.push(Warning {
                location: Some(Location::from_span(span)),
                message: format!("ctl exclusion by {selector} matches no rule"),
            });
        }
    }
}

/// Reads id, phase, tags and msg of a draft (needed by removal and update directives).
fn scan_metadata(draft: &mut Draft) -> Result<(), Error> {
    for a in &draft.actions {
        match a.name.to_ascii_lowercase().as_str() {
            "id" | "phase" => match actions::parse(a) {
                Ok(Action::Id(id)) => draft.id = id,
                Ok(Action::Phase(p)) => draft.phase = p,
                Ok(_) => {}
                Err(e) => return Err(Error::new(ErrorKind::Invalid, Some(&a.span), e)),
            },
            "tag" => draft.tags.push(a.value.clone().unwrap_or_default()),
            "msg" => draft.msg = a.value.clone(),
            _ => {}
        }
    }
    Ok(())
}

fn in_ranges(ranges: &[IdRange], id: u64) -> bool {
    ranges.iter().any(|r| (r.start..=r.end).contains(&id))
}

#[allow(clippy::too_many_arguments)]
fn apply_directive(
    kind: &DirectiveKind,
    span: &Span,
    config: &mut Config,
    warnings: &mut Vec<Warning>,
    drafts: &mut [Draft],
    items: &mut Vec<Item>,
    default_sets: &mut Vec<[Vec<ActionAst>; 5]>,
) -> Result<(), Error> {
    let warn = |warnings: &mut Vec<Warning>, message: String| {
        warnings.push(Warning {
            location: Some(Location::from_span(span)),
            message,
        })
    };
    match kind {
        DirectiveKind::Rule(_) | DirectiveKind::Action(_) => unreachable!("handled by compile"),
        DirectiveKind::Marker(name) => items.push(Item::Marker(name.clone())),
        DirectiveKind::DefaultAction(acts) => {
            let mut phase = None;
            for a in acts {
                match actions::parse(a) {
                    Ok(Action::Phase(p)) => phase = Some(p),
                    Ok(Action::Transform(None)) => {
                        // libmodsecurity 3: "The transformation none is not suitable to be
                        // part of the SecDefaultActions".
                        return Err(Error::new(
                            ErrorKind::Invalid,
                            Some(&a.span),
                            "t:none cannot be part of SecDefaultAction",
                        ));
                    }
                    Ok(Action::Id(_)) => {
                        return Err(Error::new(
                            ErrorKind::Invalid,
                            Some(&a.span),
                            "SecDefaultAction cannot have an id",
                        ))
                    }
                    Ok(_) => {}
                    Err(e) => return Err(Error::new(ErrorKind::Invalid, Some(&a.span), e)),
                }
            }
            let phase = phase.ok_or_else(|| {
                Error::new(
                    ErrorKind::Invalid,
                    Some(span),
                    "SecDefaultAction must name a phase",
                )
            })?;
            // libmodsecurity 3 refuses a default without a disruptive action, and a second
            // default for a phase in one configuration context (here: one file; a later
            // file's default replaces an earlier file's).
            if !acts
                .iter()
                .any(|a| matches!(actions::parse(a), Ok(Action::Disruptive(_))))
            {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    Some(span),
                    "SecDefaultAction must specify a disruptive action",
                ));
            }
            let current = default_sets.last().map(|set| &set[usize::from(phase - 1)]);
            if let Some(prev) = current.and_then(|acts| acts.first()) {
                if prev.span.file == span.file {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Some(span),
                        format!(
                            "SecDefaultAction can only be placed once per phase and \
                             configuration context: phase {phase} was set at {}",
                            Location::from_span(&prev.span)
                        ),
                    ));
                }
            }
            let mut set = default_sets.last().cloned().unwrap_or_default();
            set[usize::from(phase - 1)] = acts.clone();
            default_sets.push(set);
        }
        DirectiveKind::RemoveById(ranges) => {
            let mut hit = false;
            for d in drafts.iter_mut().filter(|d| in_ranges(ranges, d.id)) {
                d.removed = true;
                hit = true;
            }
            if !hit {
                warn(warnings, "SecRuleRemoveById matches no rule".into());
            }
        }
        DirectiveKind::RemoveByTag(tag) => {
            let mut hit = false;
            for d in drafts
                .iter_mut()
                .filter(|d| d.tags.iter().any(|t| t == tag))
            {
                d.removed = true;
                hit = true;
            }
            if !hit {
                warn(
                    warnings,
                    format!("SecRuleRemoveByTag {tag:?} matches no rule"),
                );
            }
        }
        DirectiveKind::RemoveByMsg(msg) => {
            let mut hit = false;
            for d in drafts
                .iter_mut()
                .filter(|d| d.msg.as_deref() == Some(msg.as_str()))
            {
                d.removed = true;
                hit = true;
            }
            if !hit {
                warn(
                    warnings,
                    format!("SecRuleRemoveByMsg {msg:?} matches no rule"),
                );
            }
        }
        DirectiveKind::UpdateTargetById {
            ids,
            targets,
            replaced,
        } => update_targets(
            drafts,
            |d| in_ranges(ids, d.id),
            targets,
            replaced.as_deref(),
            span,
            warnings,
            "SecRuleUpdateTargetById",
        )?,
        DirectiveKind::UpdateTargetByTag {
            tag,
            targets,
            replaced,
        } => update_targets(
            drafts,
            |d| d.tags.iter().any(|t| t == tag),
            targets,
            replaced.as_deref(),
            span,
            warnings,
            "SecRuleUpdateTargetByTag",
        )?,
        DirectiveKind::UpdateTargetByMsg {
            msg,
            targets,
            replaced,
        } => update_targets(
            drafts,
            |d| d.msg.as_deref() == Some(msg.as_str()),
            targets,
            replaced.as_deref(),
            span,
            warnings,
            "SecRuleUpdateTargetByMsg",
        )?,
        DirectiveKind::UpdateActionById { id, actions: acts } => {
            for a in acts {
                let lower = a.name.to_ascii_lowercase();
                if lower == "id" || lower == "phase" || lower == "chain" {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        Some(&a.span),
                        format!("SecRuleUpdateActionById cannot change {}", a.name),
                    ));
                }
                actions::parse(a).map_err(|e| Error::new(ErrorKind::Invalid, Some(&a.span), e))?;
            }
            match drafts.iter_mut().find(|d| d.id == *id) {
                Some(d) => {
                    d.actions.extend(acts.iter().cloned());
                    scan_metadata(d)?;
                }
                None => warn(warnings, format!("SecRuleUpdateActionById: no rule {id}")),
            }
        }
        DirectiveKind::Setting { name, args } => config.apply(name, args, span, warnings)?,
    }
    Ok(())
}

fn update_targets(
    drafts: &mut [Draft],
    select: impl Fn(&Draft) -> bool,
    targets: &[VariableAst],
    replaced: Option<&[VariableAst]>,
    span: &Span,
    warnings: &mut Vec<Warning>,
    directive: &str,
) -> Result<(), Error> {
    if replaced.is_some() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Some(span),
            format!("unsupported: {directive} with a replaced-target argument"),
        ));
    }
    // Check the targets compile, so a typo fails at its own location.
    for t in targets {
        compile_target(t)?;
    }
    let mut hit = false;
    for d in drafts.iter_mut().filter(|d| select(d)) {
        hit = true;
        for t in targets {
            if t.exclusion {
                d.extra_exclusions.push(t.clone());
            } else {
                d.extra_targets.push(t.clone());
            }
        }
    }
    if !hit {
        warnings.push(Warning {
            location: Some(Location::from_span(span)),
            message: format!("{directive} matches no rule"),
        });
    }
    Ok(())
}

/// Gives each distinct transformation-chain prefix a number.
#[derive(Default)]
struct PrefixInterner {
    ids: HashMap<Vec<Transformation>, u32>,
    next: u32,
    /// (lower-cased operator name, argument) -> memo id.
    operators: HashMap<(String, String), u32>,
}

impl PrefixInterner {
    /// The memo id of an operator with this argument.
    fn operator_id(&mut self, name: &str, argument: &str) -> u32 {
        let next = self.operators.len() as u32;
        *self
            .operators
            .entry((name.to_ascii_lowercase(), argument.to_string()))
            .or_insert(next)
    }

    fn prefix_ids(&mut self, chain: &[Transformation]) -> Vec<u32> {
        (1..=chain.len())
            .map(|n| {
                let next = &mut self.next;
                *self.ids.entry(chain[..n].to_vec()).or_insert_with(|| {
                    *next += 1;
                    *next - 1
                })
            })
            .collect()
    }
}

fn invalid(span: &Span, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Invalid, Some(span), msg)
}

/// Folds default actions, the rule's actions and later updates into a [`Rule`].
fn build_rule(
    draft: &Draft,
    defaults: &[Vec<ActionAst>; 5],
    parent_phase: Option<u8>,
    interner: &mut PrefixInterner,
    config: &Config,
) -> Result<Rule, Error> {
    let is_chained = parent_phase.is_some();
    let phase = parent_phase.unwrap_or(draft.phase);
    let mut rule = Rule {
        id: if is_chained { 0 } else { draft.id },
        phase,
        span: draft.span.clone(),
        targets: Vec::new(),
        exclusions: Vec::new(),
        operator: None,
        transformations: Vec::new(),
        prefix_ids: Vec::new(),
        meta: Metadata::default(),
        disruptive: Disruptive::Pass,
        status: 403,
        log: true,
        auditlog: true,
        capture: false,
        multi_match: false,
        skip_after: None,
        skip: 0,
        effects: Vec::new(),
        chain: None,
        prefilter: None,
        raw_prefilter: None,
        plan: Default::default(),
    };

    // Default actions of the phase: transformations, logging, disruptive action, status.
    let mut default_disruptive = Disruptive::Pass;
    let mut default_status = None;
    for a in &defaults[usize::from(phase - 1)] {
        match actions::parse(a).map_err(|e| invalid(&a.span, e))? {
            Action::Transform(Some(t)) => rule.transformations.push(with_map(t, config)),
            Action::Transform(None) => rule.transformations.clear(),
            Action::Log(v) => rule.log = v,
            Action::AuditLog(v) => rule.auditlog = v,
            Action::Disruptive(d) => default_disruptive = d,
            Action::Status(s) => default_status = Some(s),
            _ => {}
        }
    }

    let mut own_disruptive = None;
    let mut own_status = None;
    let mut has_chain = false;
    for a in &draft.actions {
        let action = actions::parse(a).map_err(|e| {
            let kind = if e.starts_with("unsupported") {
                ErrorKind::Unsupported
            } else {
                ErrorKind::Invalid
            };
            Error::new(kind, Some(&a.span), e)
        })?;
        match action {
            // libmodsecurity 3 accepts `id` and `phase` on a chained rule and goes by the
            // chain starter's (the chained rule runs when its starter matched).
            Action::Id(_) | Action::Phase(_) => {}
            Action::Msg(m) => rule.meta.msg = Some(m),
            Action::LogData(m) => rule.meta.logdata = Some(m),
            Action::Tag(t) => rule.meta.tags.push(t),
            Action::Severity(s) => rule.meta.severity = Some(s),
            Action::Ver(v) => rule.meta.ver = Some(v),
            Action::Rev(v) => rule.meta.rev = Some(v),
            Action::Maturity(v) => rule.meta.maturity = Some(v),
            Action::Accuracy(v) => rule.meta.accuracy = Some(v),
            Action::Disruptive(d) => {
                if is_chained && d != Disruptive::Pass {
                    return Err(invalid(
                        &a.span,
                        "a chained rule cannot have a disruptive action",
                    ));
                }
                own_disruptive = Some(d);
            }
            Action::Status(s) => own_status = Some(s),
            Action::Chain => has_chain = true,
            Action::SkipAfter(m) => rule.skip_after = Some((m, usize::MAX)),
            Action::Skip(n) => rule.skip = n,
            Action::Log(v) => rule.log = v,
            Action::AuditLog(v) => rule.auditlog = v,
            Action::Transform(Some(t)) => rule.transformations.push(with_map(t, config)),
            Action::Transform(None) => rule.transformations.clear(),
            Action::Capture => rule.capture = true,
            Action::MultiMatch => rule.multi_match = true,
            Action::Effect(e) => rule.effects.push(e),
            Action::Xmlns(..) => {}
        }
    }
    let inherits = matches!(own_disruptive, None | Some(Disruptive::Block));
    // Only `block` takes the default's disruptive action: libmodsecurity 3 skips a
    // default's disruptive action for a rule "that does not contain block"
    // (`RuleWithActions::executeAction`), so a rule without one passes (ModSecurity 2 gave
    // it the default's).
    rule.disruptive = match own_disruptive {
        Some(Disruptive::Block) if !is_chained => default_disruptive.clone(),
        None | Some(Disruptive::Block) => Disruptive::Pass,
        Some(d) => d,
    };
    if inherits {
        own_status = own_status.or(default_status);
    }
    // A chained rule's own `status:` (0: none) is folded into its starter below.
    rule.status = own_status.unwrap_or(if is_chained { 0 } else { 403 });
    rule.prefix_ids = interner.prefix_ids(&rule.transformations);

    // Targets and operator.
    let namespaces: Vec<(String, String)> = draft
        .actions
        .iter()
        .filter_map(|a| match actions::parse(a) {
            Ok(Action::Xmlns(prefix, uri)) => Some((prefix, uri)),
            _ => None,
        })
        .collect();
    let rules_dir = Path::new(&*draft.span.file).parent().map(Path::to_path_buf);
    if let Some(ast) = &draft.ast {
        for v in ast.variables.iter().chain(&draft.extra_targets) {
            let (variable, selector) = compile_target_ns(v, &namespaces)?;
            if v.exclusion {
                rule.exclusions.push((variable, selector));
            } else {
                rule.targets.push(Target {
                    variable,
                    selector,
                    count: v.count,
                });
            }
        }
        for v in &draft.extra_exclusions {
            let (variable, selector) = compile_target(v)?;
            rule.exclusions.push((variable, selector));
        }
        let op = &ast.operator;
        let compiled = if op.name.eq_ignore_ascii_case("rx") {
            Operator::rx(&op.argument, config.backtrack_limit())
        } else {
            Operator::compile(&op.name, &op.argument, rules_dir.as_deref())
        };
        let operator = compiled.map_err(|e| {
            let (kind, message) = match e {
                OperatorError::Unsupported(m) => (ErrorKind::Unsupported, m),
                OperatorError::Invalid(m) => (ErrorKind::Invalid, m),
            };
            Error::new(kind, Some(&op.span), message)
        })?;
        // Expensive operators whose result depends on the value alone (no macro argument)
        // share an id per (operator, argument), so rules asking the same question of the
        // same transformed value get one evaluation per transaction.
        let memo = matches!(
            operator,
            Operator::DetectSqli(_) | Operator::DetectXss(_) | Operator::Rx(_) | Operator::Pm(_)
        )
        .then(|| interner.operator_id(&op.name, &op.argument));
        rule.operator = Some(RuleOperator {
            required_classes: operator.required_classes(),
            operator,
            negated: op.negated,
            memo,
        });
    }

    // Chained drafts are stored flat on the starter; the starter links them.
    if has_chain && !is_chained {
        if draft.chain.is_empty() {
            return Err(invalid(&draft.span, "chain action without a chained rule"));
        }
        // Chained drafts are stored flat on the starter: child i chains to child i+1.
        let mut next: Option<Box<Rule>> = None;
        for c in draft.chain.iter().rev() {
            let mut built = build_rule(
                &Draft {
                    span: c.span.clone(),
                    ast: c.ast.clone(),
                    actions: c.actions.clone(),
                    chain: Vec::new(),
                    id: 0,
                    phase,
                    tags: Vec::new(),
                    msg: None,
                    removed: false,
                    extra_exclusions: Vec::new(),
                    extra_targets: Vec::new(),
                },
                defaults,
                Some(phase),
                interner,
                config,
            )?;
            let child_has_chain = c
                .actions
                .iter()
                .any(|a| a.name.eq_ignore_ascii_case("chain"));
            if child_has_chain != next.is_some() {
                return Err(invalid(&c.span, "chain action without a chained rule"));
            }
            built.chain = next.take();
            next = Some(Box::new(built));
        }
        rule.chain = next;
        fold_chain_metadata(&mut rule);
    }
    Ok(rule)
}

/// `t:urlDecodeUni` with the `SecUnicodeMapFile` table when one is configured.
fn with_map(t: Transformation, config: &Config) -> Transformation {
    match (&t, &config.unicode_map) {
        (Transformation::UrlDecodeUni, Some(map)) => {
            Transformation::UrlDecodeUniMapped(std::sync::Arc::clone(map))
        }
        _ => t,
    }
}

/// Metadata written on chained rules acts for the whole chain, as in libmodsecurity 3, where
/// each link's actions run when it matches and a later link's `status`, `msg`, `logdata` and
/// `severity` overwrite the starter's (the chain's report and intervention are the
/// starter's, so they are moved there); `tag`s add up.
fn fold_chain_metadata(starter: &mut Rule) {
    let mut link = starter.chain.as_deref_mut();
    let mut meta = Metadata::default();
    let mut status = 0;
    while let Some(l) = link {
        if l.status != 0 {
            status = l.status;
        }
        if let Some(m) = l.meta.msg.take() {
            meta.msg = Some(m);
        }
        if let Some(m) = l.meta.logdata.take() {
            meta.logdata = Some(m);
        }
        if let Some(s) = l.meta.severity.take() {
            meta.severity = Some(s);
        }
        meta.tags.append(&mut l.meta.tags);
        link = l.chain.as_deref_mut();
    }
    if status != 0 {
        starter.status = status;
    }
    if meta.msg.is_some() {
        starter.meta.msg = meta.msg;
    }
    if meta.logdata.is_some() {
        starter.meta.logdata = meta.logdata;
    }
    if meta.severity.is_some() {
        starter.meta.severity = meta.severity;
    }
    starter.meta.tags.append(&mut meta.tags);
}

/// Variables this engine never fills: a rule on them would silently never match, so they
/// fail the load instead.
fn unsupported_variable(variable: Variable) -> Option<&'static str> {
    use Variable as V;
    Some(match variable {
        V::Geo => "needs @geoLookup, which is not supported",
        V::FilesTmpNames | V::FilesTmpContent => "uploaded files are not stored on disk",
        V::FullRequest => "the raw request is not kept",
        V::AuthType | V::RemoteUser => "the engine does not see HTTP authentication results",
        V::SessionId | V::UserId => "setsid/setuid are not supported",
        _ => return None,
    })
}

/// A target's variable and key selector.
fn compile_target(v: &VariableAst) -> Result<(Variable, Selector), Error> {
    compile_target_ns(v, &[])
}

/// [`compile_target`] with the `xmlns` prefix bindings of the rule, for XPath keys.
fn compile_target_ns(
    v: &VariableAst,
    namespaces: &[(String, String)],
) -> Result<(Variable, Selector), Error> {
    let variable = Variable::from_name(&v.name).ok_or_else(|| {
        Error::new(
            ErrorKind::Unsupported,
            Some(&v.span),
            format!("unknown variable {}", v.name),
        )
    })?;
    if let Some(why) = unsupported_variable(variable) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Some(&v.span),
            format!("unsupported variable {}: {why}", variable.name()),
        ));
    }
    let selector = match &v.selector {
        None => Selector::All,
        Some(crate::seclang::SelectorAst::Key(k)) => {
            if variable == Variable::Xml && k != "/*" && k != "//@*" {
                let xpath = crate::body::xpath::XPath::compile(k, namespaces)
                    .map_err(|e| Error::new(ErrorKind::Unsupported, Some(&v.span), e))?;
                Selector::XPath(Box::new(xpath))
            } else {
                Selector::Key(k.as_bytes().to_ascii_lowercase())
            }
        }
        Some(crate::seclang::SelectorAst::Regex(r)) => {
            Selector::regex(r).map_err(|e| Error::new(ErrorKind::Invalid, Some(&v.span), e))?
        }
    };
    if !matches!(selector, Selector::All) && !variable.is_collection() {
        return Err(Error::new(
            ErrorKind::Invalid,
            Some(&v.span),
            format!("{} is not a collection and takes no key", variable.name()),
        ));
    }
    Ok((variable, selector))
}
