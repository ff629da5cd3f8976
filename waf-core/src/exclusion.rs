//! Typed rule exclusions: the one way a host turns a rule off for some requests or some
//! values, without writing SecLang.
//!
//! An [`Exclusion`] names *which* rules (ids or id ranges, or a tag), *where* (every
//! request, or requests whose `REQUEST_FILENAME` starts with a path prefix) and *what*
//! (the whole rule, or one target such as `ARGS:password`). They mean what ModSecurity's
//! exclusion directives mean, and are applied the way ModSecurity applies those:
//!
//! | where | what | ModSecurity equivalent | applied |
//! |---|---|---|---|
//! | everywhere | whole rule | `SecRuleRemoveById` / `SecRuleRemoveByTag` after the rules | at load: the rule is not compiled |
//! | everywhere | one target | `SecRuleUpdateTargetById` / `...ByTag` with `!TARGET` after the rules | at load: the target is excluded |
//! | path prefix | whole rule | a phase-1 rule before the rules with `ctl:ruleRemoveById` | per request, before phase 1 |
//! | path prefix | one target | the same with `ctl:ruleRemoveTargetById` | per request, before phase 1 |
//!
//! An exclusion that selects no rule loads with a warning; a target that names an unknown
//! variable fails the load.

use std::ops::RangeInclusive;

/// Which rules an [`Exclusion`] removes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExcludedRules {
    /// Rule ids and inclusive id ranges.
    Ids(Vec<RangeInclusive<u64>>),
    /// Every rule with this tag (compared as written, as `SecRuleRemoveByTag` in
    /// libmodsecurity 3 does).
    Tag(String),
}

/// A rule exclusion for [`crate::WafBuilder::exclusion`].
///
/// ```
/// use waf_core::Exclusion;
/// // 942100 never looks at the `password` argument under /login.
/// let e = Exclusion::rule_ids([942100..=942100]).under_path("/login").target("ARGS:password");
/// # let _ = e;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exclusion {
    pub(crate) rules: ExcludedRules,
    pub(crate) path_prefix: Option<String>,
    pub(crate) target: Option<String>,
}

impl Exclusion {
    /// Excludes the rules with these ids (`942100..=942100` for one rule).
    pub fn rule_ids(ids: impl IntoIterator<Item = RangeInclusive<u64>>) -> Exclusion {
        Exclusion {
            rules: ExcludedRules::Ids(ids.into_iter().collect()),
            path_prefix: None,
            target: None,
        }
    }

    /// Excludes every rule with `tag` (for example `attack-sqli`).
    pub fn tag(tag: impl Into<String>) -> Exclusion {
        Exclusion {
            rules: ExcludedRules::Tag(tag.into()),
            path_prefix: None,
            target: None,
        }
    }

    /// Only for requests whose path (`REQUEST_FILENAME`) starts with `prefix`.
    pub fn under_path(mut self, prefix: impl Into<String>) -> Exclusion {
        self.path_prefix = Some(prefix.into());
        self
    }

    /// Only this target (`ARGS:password`, `REQUEST_COOKIES:/^_ga/`, `REQUEST_HEADERS`),
    /// instead of the whole rule.
    pub fn target(mut self, target: impl Into<String>) -> Exclusion {
        self.target = Some(target.into());
        self
    }

    /// The rules it names.
    pub fn rules(&self) -> &ExcludedRules {
        &self.rules
    }
}
