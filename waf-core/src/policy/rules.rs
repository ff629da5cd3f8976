//! Custom rules: a condition ([`super::expr`]) and an action, evaluated in written order.
//!
//! ```toml
//! [[rules]]
//! name = "admin-from-office-only"
//! expression = 'http.request.uri.path starts_with "/admin" and not ip.src in $office'
//! action = "block"
//! status = 403
//! ```
//!
//! Actions. *Terminating* ones end the rule list for the request (the first that matches
//! decides, then [`super::decide`] weighs it against bans and rate limits):
//! - `block`: answer `status` (default 403), optionally with `page` (the body to send).
//! - `allow`: stop evaluating rules; `skip` says what else is skipped: any of `"bans"`,
//!   `"rate_limits"`, `"crs"` (the SecLang rules), `"scoring"`; default all four.
//! - `challenge`: a cookie or proof-of-work challenge (`challenge = "cookie" | "pow"`,
//!   `difficulty`), answered with status `status` (default 403) until the client holds a
//!   pass cookie ([`super::gate::challenge`]); needs `[gates]`.
//!
//! The others apply and go on: `log` (only counted and reported), `set_header` /
//! `remove_header` (`header`, `value`: the host applies them to the request it forwards,
//! [`crate::Transaction::policy_effects`]), `skip` (`rule_ids`, `tags`: CRS rules removed
//! for this request, like `ctl:ruleRemoveById`), `rate_limit` (apply the limit named
//! `rate_limit` to the requests this rule matches).
//!
//! Every rule may be `shadow = true`: evaluated and counted as "would have acted", never
//! acting. A rule whose expression reads `waf.score` runs after the CRS request phases
//! (only `block`, `challenge` and `log` make sense there). An option that has no effect
//! for the action (`status` on `log`) is a load error.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};
use super::expr::Expr;
use crate::actions::ctl::RuleSelector;
use crate::seclang::IdRange;

/// `[[rules]]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// A name for messages, metrics and reports.
    pub name: String,
    /// A numeric id, reported as the intervention's rule id (default 0).
    #[serde(default)]
    pub id: u64,
    /// The condition.
    pub expression: String,
    /// What to do when it holds.
    pub action: RuleAction,
    /// `block`, `challenge`: the status (default 403).
    #[serde(default)]
    pub status: Option<u16>,
    /// `block`: the body to answer with.
    #[serde(default)]
    pub page: Option<String>,
    /// `block`: a file holding the body to answer with.
    #[serde(default)]
    pub page_file: Option<PathBuf>,
    /// `allow`: what else to skip.
    #[serde(default)]
    pub skip: Option<Vec<AllowSkip>>,
    /// `set_header`, `remove_header`: the request header.
    #[serde(default)]
    pub header: Option<String>,
    /// `set_header`: its value.
    #[serde(default)]
    pub value: Option<String>,
    /// `skip`: CRS rule ids or ranges (`942100`, `"942000-942999"`).
    #[serde(default)]
    pub rule_ids: Vec<RuleIdSpec>,
    /// `skip`: CRS rule tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// `rate_limit`: the limit's name.
    #[serde(default)]
    pub rate_limit: Option<String>,
    /// `challenge`: which one (default `pow`; [`super::gate::challenge`]).
    #[serde(default)]
    pub challenge: Option<super::gate::ChallengeKind>,
    /// `challenge = "pow"`: leading zero bits (default `[gates.challenge] difficulty`).
    #[serde(default)]
    pub difficulty: Option<u8>,
    /// Evaluate and count, never act.
    #[serde(default)]
    pub shadow: bool,
}

/// A rule's action.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuleAction {
    /// Refuse the request.
    Block,
    /// Let it through, skipping what `skip` says.
    Allow,
    /// Count and report only.
    Log,
    /// Challenge the client (cookie or proof of work) until it holds a pass.
    Challenge,
    /// Set a request header.
    SetHeader,
    /// Remove a request header.
    RemoveHeader,
    /// Remove CRS rules for this request.
    Skip,
    /// Apply a named rate limit.
    RateLimit,
}

/// What an `allow` skips besides the remaining rules.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AllowSkip {
    /// Bans: an allowed client is let in even while banned.
    Bans,
    /// Rate limits.
    RateLimits,
    /// The SecLang (CRS) rules.
    Crs,
    /// Behaviour scoring of the response.
    Scoring,
}

/// A rule id or an inclusive range written `"a-b"`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum RuleIdSpec {
    /// One id.
    Id(u64),
    /// `"942100"` or `"942000-942999"`.
    Range(String),
}

/// What an `allow` skips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Skips {
    pub(crate) bans: bool,
    pub(crate) rate_limits: bool,
    pub(crate) crs: bool,
    pub(crate) scoring: bool,
}

/// A compiled action.
#[derive(Debug)]
pub(crate) enum Action {
    Block {
        status: u16,
        page: Option<Arc<[u8]>>,
    },
    Allow(Skips),
    Log,
    Challenge {
        status: u16,
        kind: super::gate::ChallengeKind,
        difficulty: Option<u8>,
    },
    SetHeader(String, String),
    RemoveHeader(String),
    Skip(Vec<RuleSelector>),
    RateLimit(usize),
}

/// A compiled rule.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) name: String,
    pub(crate) id: u64,
    pub(crate) expr: Expr,
    pub(crate) action: Action,
    pub(crate) shadow: bool,
    /// Reads `waf.score`: runs after the CRS request phases.
    pub(crate) late: bool,
    pub(crate) hits: AtomicU64,
}

impl Rule {
    /// Compiles the action of `c` (the expression is compiled by the caller).
    pub(crate) fn compile(
        c: &RuleConfig,
        expr: Expr,
        late: bool,
        rate_limits: &[String],
    ) -> Result<Rule, PolicyError> {
        let what = format!("rule {:?}", c.name);
        let bad = |m: String| {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("{what}: {m}"),
            ))
        };
        // Which options each action reads; anything else set is an error.
        let allowed: &[&str] = match c.action {
            RuleAction::Block => &["status", "page", "page_file"],
            RuleAction::Allow => &["skip"],
            RuleAction::Log => &[],
            RuleAction::Challenge => &["status", "challenge", "difficulty"],
            RuleAction::SetHeader => &["header", "value"],
            RuleAction::RemoveHeader => &["header"],
            RuleAction::Skip => &["rule_ids", "tags"],
            RuleAction::RateLimit => &["rate_limit"],
        };
        let set = [
            ("status", c.status.is_some()),
            ("page", c.page.is_some()),
            ("page_file", c.page_file.is_some()),
            ("skip", c.skip.is_some()),
            ("header", c.header.is_some()),
            ("value", c.value.is_some()),
            ("rule_ids", !c.rule_ids.is_empty()),
            ("tags", !c.tags.is_empty()),
            ("rate_limit", c.rate_limit.is_some()),
            ("challenge", c.challenge.is_some()),
            ("difficulty", c.difficulty.is_some()),
        ];
        if let Some((name, _)) = set.iter().find(|(n, on)| *on && !allowed.contains(n)) {
            return bad(format!("`{name}` has no effect with action {:?}", c.action));
        }
        if late
            && !matches!(
                c.action,
                RuleAction::Block | RuleAction::Challenge | RuleAction::Log
            )
        {
            return bad(format!(
                "reads waf.score, so it runs after the request phases, where {:?} has no effect (use block, challenge or log)",
                c.action
            ));
        }
        let status = |default: u16| match c.status {
            Some(s @ 400..=599) => Ok(s),
            None => Ok(default),
            Some(s) => Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("{what}: status {s} is not a 4xx or 5xx status"),
            )),
        };
        let header = || match &c.header {
            Some(h) if http::HeaderName::from_bytes(h.as_bytes()).is_ok() => Ok(h.clone()),
            Some(h) => Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("{what}: {h:?} is not a header name"),
            )),
            None => Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("{what}: `header` is missing"),
            )),
        };
        let action = match c.action {
            RuleAction::Block => {
                let page = match (&c.page, &c.page_file) {
                    (Some(_), Some(_)) => return bad("give `page` or `page_file`, not both".into()),
                    (Some(p), None) => Some(Arc::from(p.as_bytes())),
                    (None, Some(f)) => Some(Arc::from(std::fs::read(f).map_err(|e| {
                        PolicyError::new(
                            PolicyErrorKind::Io,
                            format!("{what}: cannot read {}: {e}", f.display()),
                        )
                    })?)),
                    (None, None) => None,
                };
                Action::Block {
                    status: status(403)?,
                    page,
                }
            }
            RuleAction::Allow => {
                let list = c.skip.clone().unwrap_or_else(|| {
                    vec![
                        AllowSkip::Bans,
                        AllowSkip::RateLimits,
                        AllowSkip::Crs,
                        AllowSkip::Scoring,
                    ]
                });
                Action::Allow(Skips {
                    bans: list.contains(&AllowSkip::Bans),
                    rate_limits: list.contains(&AllowSkip::RateLimits),
                    crs: list.contains(&AllowSkip::Crs),
                    scoring: list.contains(&AllowSkip::Scoring),
                })
            }
            RuleAction::Log => Action::Log,
            RuleAction::Challenge => {
                let kind = c.challenge.unwrap_or_default();
                if let Some(d) = c.difficulty {
                    if kind != super::gate::ChallengeKind::Pow {
                        return bad("`difficulty` has no effect with challenge = \"cookie\"".into());
                    }
                    super::gate::challenge::check_difficulty(d).map_err(|e| {
                        PolicyError::new(PolicyErrorKind::Invalid, format!("{what}: {e}"))
                    })?;
                }
                Action::Challenge {
                    status: status(403)?,
                    kind,
                    difficulty: c.difficulty,
                }
            }
            RuleAction::SetHeader => {
                let value = c.value.clone().unwrap_or_default();
                if http::HeaderValue::from_str(&value).is_err() {
                    return bad(format!("{value:?} is not a header value"));
                }
                Action::SetHeader(header()?, value)
            }
            RuleAction::RemoveHeader => Action::RemoveHeader(header()?),
            RuleAction::Skip => {
                let mut selectors = Vec::new();
                let mut ranges = Vec::new();
                for spec in &c.rule_ids {
                    ranges.push(match spec {
                        RuleIdSpec::Id(id) => IdRange {
                            start: *id,
                            end: *id,
                        },
                        RuleIdSpec::Range(s) => parse_range(s).ok_or_else(|| {
                            PolicyError::new(
                                PolicyErrorKind::Invalid,
                                format!("{what}: {s:?} is not a rule id or range"),
                            )
                        })?,
                    });
                }
                if !ranges.is_empty() {
                    selectors.push(RuleSelector::Ids(ranges.into()));
                }
                selectors.extend(c.tags.iter().map(|t| RuleSelector::Tag(t.as_str().into())));
                if selectors.is_empty() {
                    return bad("`skip` needs `rule_ids` or `tags`".into());
                }
                Action::Skip(selectors)
            }
            RuleAction::RateLimit => {
                let Some(name) = &c.rate_limit else {
                    return bad("`rate_limit` is missing".into());
                };
                match rate_limits.iter().position(|r| r == name) {
                    Some(i) => Action::RateLimit(i),
                    None => return bad(format!("unknown rate limit {name:?}")),
                }
            }
        };
        Ok(Rule {
            name: c.name.clone(),
            id: c.id,
            expr,
            action,
            shadow: c.shadow,
            late,
            hits: AtomicU64::new(0),
        })
    }

    pub(crate) fn record_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the action ends the rule list.
    pub(crate) fn terminates(&self) -> bool {
        matches!(
            self.action,
            Action::Block { .. } | Action::Allow(_) | Action::Challenge { .. }
        )
    }
}

fn parse_range(s: &str) -> Option<IdRange> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let (start, end) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (start <= end).then_some(IdRange { start, end })
}
