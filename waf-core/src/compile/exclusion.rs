//! [`crate::Exclusion`]s → what the compiler and the evaluator apply (the table in
//! `crate::exclusion`): exclusions that hold everywhere become `SecRuleRemove*` and
//! `SecRuleUpdateTarget*` directives placed after every rule source, so they act exactly as
//! those directives do; path-scoped ones become [`PathExclusion`]s that each transaction
//! applies before phase 1, as a `ctl` rule placed first would.

use std::sync::Arc;

use crate::actions::ctl::{parse_target, RuleSelector, TargetRef};
use crate::error::{Error, ErrorKind};
use crate::exclusion::{ExcludedRules, Exclusion};
use crate::seclang::{Directive, DirectiveKind, IdRange, SelectorAst, Span, VariableAst};

/// A path-scoped exclusion, ready for the transaction.
#[derive(Debug)]
pub(crate) struct PathExclusion {
    /// Requests whose `REQUEST_FILENAME` starts with this.
    pub(crate) prefix: Vec<u8>,
    /// The rules.
    pub(crate) rules: RuleSelector,
    /// The one target, or `None` for the whole rule.
    pub(crate) target: Option<TargetRef>,
}

/// Splits `exclusions` into directives to append after the rules and path exclusions.
pub(crate) fn lower(
    exclusions: &[Exclusion],
) -> Result<(Vec<Directive>, Vec<PathExclusion>), Error> {
    let mut directives = Vec::new();
    let mut paths = Vec::new();
    for (i, e) in exclusions.iter().enumerate() {
        let span = Span {
            file: Arc::from(format!("exclusion[{i}]")),
            line: 1,
            column: 1,
        };
        let invalid = |message: String| Error::new(ErrorKind::Invalid, Some(&span), message);
        let ids = |ranges: &[std::ops::RangeInclusive<u64>]| -> Result<Vec<IdRange>, Error> {
            if ranges.is_empty() {
                return Err(invalid("an exclusion needs at least one rule id".into()));
            }
            ranges
                .iter()
                .map(|r| match (*r.start(), *r.end()) {
                    (0, _) => Err(invalid("rule id 0 does not exist".into())),
                    (start, end) if start <= end => Ok(IdRange { start, end }),
                    (start, end) => Err(invalid(format!("empty id range {start}-{end}"))),
                })
                .collect()
        };
        match &e.path_prefix {
            None => {
                let kind = match (&e.rules, &e.target) {
                    (ExcludedRules::Ids(r), None) => DirectiveKind::RemoveById(ids(r)?),
                    (ExcludedRules::Tag(t), None) => DirectiveKind::RemoveByTag(t.clone()),
                    (ExcludedRules::Ids(r), Some(t)) => DirectiveKind::UpdateTargetById {
                        ids: ids(r)?,
                        targets: vec![excluded_target(t, &span)?],
                        replaced: None,
                    },
                    (ExcludedRules::Tag(tag), Some(t)) => DirectiveKind::UpdateTargetByTag {
                        tag: tag.clone(),
                        targets: vec![excluded_target(t, &span)?],
                        replaced: None,
                    },
                };
                directives.push(Directive {
                    span: span.clone(),
                    kind,
                    note: None,
                });
            }
            Some(prefix) => {
                if !prefix.starts_with('/') {
                    return Err(invalid(format!("path prefix {prefix:?} must start with /")));
                }
                let rules = match &e.rules {
                    ExcludedRules::Ids(r) => RuleSelector::Ids(ids(r)?.into()),
                    ExcludedRules::Tag(t) => RuleSelector::Tag(t.as_str().into()),
                };
                let target = match &e.target {
                    None => None,
                    Some(t) => Some(parse_target(t).map_err(|m| invalid(format!("{t:?}: {m}")))?),
                };
                paths.push(PathExclusion {
                    prefix: prefix.as_bytes().to_vec(),
                    rules,
                    target,
                });
            }
        }
    }
    Ok((directives, paths))
}

/// `!TARGET` for a `SecRuleUpdateTarget*` directive.
fn excluded_target(text: &str, span: &Span) -> Result<VariableAst, Error> {
    let text = text.trim();
    let (name, selector) = match text.split_once(':') {
        None => (text, None),
        Some((n, k)) => {
            let k = k.trim();
            let sel = match k.strip_prefix('/').and_then(|r| r.strip_suffix('/')) {
                Some(re) => SelectorAst::Regex(re.to_string()),
                None => SelectorAst::Key(k.to_string()),
            };
            (n.trim(), Some(sel))
        }
    };
    if name.is_empty() {
        return Err(Error::new(
            ErrorKind::Invalid,
            Some(span),
            format!("exclusion target {text:?} names no variable"),
        ));
    }
    Ok(VariableAst {
        span: span.clone(),
        exclusion: true,
        count: false,
        name: name.to_string(),
        selector,
    })
}
