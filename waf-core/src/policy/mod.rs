//! Native protections: custom rules with conditions, IP and string lists, rate limits,
//! behaviour scoring and bans, IP intelligence. Configured with serde types, not SecLang.
//!
//! # Shape
//!
//! A [`PolicyConfig`] (deserialised from the host's TOML or built in code) is compiled once
//! by [`crate::WafBuilder::policy`] into a [`Policy`] that sits beside the compiled SecLang
//! program in the [`crate::Waf`]: expressions parsed and type-checked, fields resolved to
//! slots, lists and databases loaded. Counters, scores and bans are state, not
//! configuration: they live in a [`Store`] (one small trait, `now` as an argument;
//! [`MemoryStore`] by default), which a host can keep across reloads and share between
//! `Waf`s.
//!
//! One file per protection, here in evaluation order:
//!
//! 1. [`ban`]: is the client banned? (checked first on every request)
//! 2. [`rules`]: custom rules in written order over the fields of [`expr`], reading
//!    [`list`]s and IP intelligence ([`geo`] country and ASN, [`reputation`] lists); the
//!    first terminating action (allow, block, challenge) ends the list.
//! 3. [`rate_limit`]: GCRA buckets ([`gcra`]) for the limits that apply.
//! 4. The SecLang rules (CRS) run, unless an `allow` skipped them.
//! 5. Rules that read `waf.score` (the CRS anomaly score), after the request body phase.
//! 6. [`scoring`]: in [`crate::Transaction::finish`], the response status scores the client
//!    (and may ban it); rate limits with `count_statuses` count the response.
//!
//! All of it runs in [`crate::Transaction::request_headers`] before the SecLang phase 1
//! rules, whether `SecRuleEngine` is on or off; with `SecRuleEngine DetectionOnly` a
//! policy decision is reported as `would_intervene` and not carried out.
//!
//! # Precedence
//!
//! Steps 1-3 can each want something; [`decide`] is the one place that chooses, by this
//! table (first row that fits wins; a test per row below). Shadow-mode bans, rules and
//! limits never enter it: they are counted and reported only.
//!
//! | # | ban | deciding rule | rate limit over | result |
//! |---|-----|---------------|-----------------|--------|
//! | 1 | yes | allow that skips bans | any | allow |
//! | 2 | yes | anything else | any | ban |
//! | 3 | no | block | any | block |
//! | 4 | no | challenge | any | challenge |
//! | 5 | no | allow that skips rate limits | yes | allow |
//! | 6 | no | allow that keeps rate limits | yes | rate limit |
//! | 7 | no | none | yes | rate limit |
//! | 8 | no | allow | no | allow |
//! | 9 | no | none | no | continue |
//!
//! So allow-lists beat bans (an office allow-list is never locked out), a ban beats every
//! rule, a rule's explicit block beats a rate limit, and a rate limit only decides when
//! nothing else has.

mod ban;
mod error;
pub(crate) mod expr;
pub mod gate;
mod gcra;
mod geo;
mod list;
mod rate_limit;
mod reputation;
mod rules;
mod scoring;
mod state;

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::actions::ctl::RuleSelector;
use crate::transaction::{ConnectionInfo, RequestHead};
use crate::verdict::{DisruptiveAction, Intervention};

pub use ban::{BanConfig, BanEntry};
pub use error::{PolicyError, PolicyErrorKind, PolicyLocation};
pub use geo::GeoConfig;
pub use list::{IpList, ListConfig, ListKind, StringList};
pub use rate_limit::RateLimitConfig;
pub use reputation::ReputationConfig;
pub use rules::{AllowSkip, RuleAction, RuleConfig, RuleIdSpec};
pub use scoring::ScoringConfig;
pub use state::{
    Cell, LineOp, LineSpec, LineStatus, MemoryStore, Store, ValueKind, SCORE_POINTS_BITS, SHARDS,
};

use expr::fields::{Context, FieldRef};
use rate_limit::{Check, RateLimit};
use rules::{Action, Rule, Skips};

/// Nanoseconds per second.
pub(crate) const NANOS: u64 = 1_000_000_000;

/// A whole policy, as configured. Every part is optional; an empty policy costs nothing.
///
/// ```toml
/// [[list]]
/// name = "office"
/// kind = "ip"
/// items = ["192.0.2.0/24", "2001:db8:10::/48"]
///
/// [[rules]]
/// name = "office"
/// expression = "ip.src in $office"
/// action = "allow"
///
/// [[rate_limit]]
/// name = "login"
/// match = 'http.request.uri.path == "/login" and http.request.method == "POST"'
/// requests = 5
/// period_secs = 60
/// count_statuses = [401, 403]
///
/// [bans]
/// ttl_secs = 600
///
/// [scoring]
/// threshold = 20
/// ```
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Named lists (`[[list]]`).
    #[serde(default, rename = "list")]
    pub lists: Vec<ListConfig>,
    /// Custom rules (`[[rules]]`), in evaluation order.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Rate limits (`[[rate_limit]]`).
    #[serde(default, rename = "rate_limit")]
    pub rate_limits: Vec<RateLimitConfig>,
    /// Bans (`[bans]`).
    #[serde(default)]
    pub bans: Option<BanConfig>,
    /// Behaviour scoring (`[scoring]`); needs `[bans]`.
    #[serde(default)]
    pub scoring: Option<ScoringConfig>,
    /// Country and ASN databases (`[geo]`).
    #[serde(default)]
    pub geo: Option<GeoConfig>,
    /// Reputation lists (`[[reputation]]`).
    #[serde(default)]
    pub reputation: Vec<ReputationConfig>,
    /// Challenges, waiting rooms and sign-in, with their keys and pages (`[gates]`,
    /// [`gate`]).
    #[serde(default)]
    pub gates: Option<gate::GateConfig>,
}

impl PolicyConfig {
    /// Makes every relative file path in the policy (list and reputation files, geo
    /// databases, rule pages) relative to `base`, the directory of the file the policy was
    /// read from.
    pub fn resolve_paths(&mut self, base: &std::path::Path) {
        let join = |p: &mut Option<std::path::PathBuf>| {
            if let Some(f) = p.take() {
                *p = Some(base.join(f));
            }
        };
        self.lists.iter_mut().for_each(|l| join(&mut l.file));
        self.reputation.iter_mut().for_each(|r| join(&mut r.file));
        self.rules.iter_mut().for_each(|r| join(&mut r.page_file));
        if let Some(g) = &mut self.geo {
            join(&mut g.country_db);
            join(&mut g.asn_db);
        }
        if let Some(g) = &mut self.gates {
            g.pages.resolve_paths(base);
        }
    }
}

/// IP intelligence the fields read.
#[derive(Debug, Default)]
pub(crate) struct Intel {
    geo: Option<geo::Geo>,
    reputation: Vec<reputation::Reputation>,
}

impl Intel {
    pub(crate) fn country(&self, ip: IpAddr) -> Option<Vec<u8>> {
        self.geo.as_ref()?.country(ip)
    }
    pub(crate) fn asn(&self, ip: IpAddr) -> Option<u32> {
        self.geo.as_ref()?.asn(ip)
    }
    pub(crate) fn reputation(&self, ip: IpAddr) -> (i64, Option<&str>) {
        reputation::lookup(&self.reputation, ip)
    }
}

/// A compiled policy. Built by [`crate::WafBuilder::policy`]; held by the [`crate::Waf`].
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) lists: Vec<list::List>,
    pub(crate) slots: Vec<FieldRef>,
    rules: Vec<Rule>,
    has_late: bool,
    rate_limits: Vec<RateLimit>,
    bans: Option<ban::Bans>,
    scoring: Option<scoring::Scoring>,
    pub(crate) intel: Intel,
    store: Arc<dyn Store>,
    gates: Option<gate::Gates>,
}

/// Hit counters of one rule or rate limit, for metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyCounter {
    /// `rule` or `rate_limit`.
    pub kind: &'static str,
    /// The rule's or limit's name.
    pub name: String,
    /// Times it matched (rules) or refused (limits), shadow mode included.
    pub hits: u64,
    /// Whether it is in shadow mode (its hits are "would have acted").
    pub shadow: bool,
}

impl Policy {
    /// Whether a rule reads `ml.score` (which stays 0 without an ML model: a load warning).
    pub(crate) fn reads_ml_score(&self) -> bool {
        self.slots.contains(&FieldRef::MlScore)
    }

    /// The empty policy.
    pub(crate) fn empty() -> Policy {
        Policy {
            lists: Vec::new(),
            slots: Vec::new(),
            rules: Vec::new(),
            has_late: false,
            rate_limits: Vec::new(),
            bans: None,
            scoring: None,
            intel: Intel::default(),
            store: Arc::new(MemoryStore::new(64)),
            gates: None,
        }
    }

    /// Compiles `config`; state goes to `store` (a new [`MemoryStore`] when `None`).
    pub(crate) fn compile(
        config: &PolicyConfig,
        store: Option<Arc<dyn Store>>,
    ) -> Result<Policy, PolicyError> {
        let mut names = std::collections::HashSet::new();
        let mut lists = Vec::new();
        for l in &config.lists {
            if !names.insert(l.name.as_str()) {
                return Err(invalid(format!("list {:?} is defined twice", l.name)));
            }
            lists.push(list::List::load(l)?);
        }
        let list_names: Vec<(String, ListKind)> =
            lists.iter().map(|l| (l.name.clone(), l.kind)).collect();
        let mut slots = Vec::new();

        let mut rate_limits = Vec::new();
        let rate_names: Vec<String> = config.rate_limits.iter().map(|r| r.name.clone()).collect();
        for (i, c) in config.rate_limits.iter().enumerate() {
            if rate_names[..i].contains(&c.name) {
                return Err(invalid(format!("rate limit {:?} is defined twice", c.name)));
            }
            let mut rl = RateLimit::compile(c, i)?;
            if let Some(text) = &c.when {
                let mut scope = expr::Scope {
                    slots: &mut slots,
                    lists: &list_names,
                    rates: &[],
                };
                let e = expr::compile(&format!("rate limit {:?} match", c.name), text, &mut scope)?;
                rl.when = Some(e);
            }
            rate_limits.push(rl);
        }

        let mut rules = Vec::new();
        for c in &config.rules {
            let mut scope = expr::Scope {
                slots: &mut slots,
                lists: &list_names,
                rates: &rate_names,
            };
            let e = expr::compile(
                &format!("rule {:?} expression", c.name),
                &c.expression,
                &mut scope,
            )?;
            let mut late = false;
            e.visit_slots(&mut |s| {
                late |= matches!(slots[s], FieldRef::AnomalyScore | FieldRef::MlScore)
            });
            let rule = Rule::compile(c, e, late, &rate_names)?;
            if matches!(rule.action, Action::Challenge { .. }) && config.gates.is_none() {
                return Err(invalid(format!(
                    "rule {:?}: a challenge needs a [gates] section with signing keys",
                    c.name
                )));
            }
            rules.push(rule);
        }
        let gates = match &config.gates {
            Some(g) => {
                let mut compile_expr = |what: &str, text: &str| {
                    let mut scope = expr::Scope {
                        slots: &mut slots,
                        lists: &list_names,
                        rates: &rate_names,
                    };
                    expr::compile(what, text, &mut scope)
                };
                Some(gate::Gates::compile(g, &mut compile_expr)?)
            }
            None => None,
        };
        for (i, rl) in rate_limits.iter_mut().enumerate() {
            let named = rules
                .iter()
                .any(|r| matches!(r.action, Action::RateLimit(j) if j == i));
            rl.from_rules_only = named && rl.when.is_none();
        }

        let bans = config.bans.as_ref().map(ban::Bans::compile).transpose()?;
        let scoring = config
            .scoring
            .as_ref()
            .map(scoring::Scoring::compile)
            .transpose()?;
        if scoring.is_some() && bans.is_none() {
            return Err(invalid(
                "[scoring] bans clients over the threshold: add a [bans] section".to_string(),
            ));
        }
        let geo = config.geo.as_ref().map(geo::Geo::load).transpose()?;
        let reputation = config
            .reputation
            .iter()
            .map(reputation::Reputation::load)
            .collect::<Result<Vec<_>, _>>()?;
        let policy = Policy {
            lists,
            has_late: rules.iter().any(|r| r.late),
            slots,
            rules,
            rate_limits,
            bans,
            scoring,
            intel: Intel { geo, reputation },
            store: store.unwrap_or_else(|| {
                Arc::new(MemoryStore::new(crate::limits::DEFAULT_POLICY_STATE_KEYS))
            }),
            gates,
        };
        policy.check_sources(config)?;
        policy.declare_kinds();
        Ok(policy)
    }

    /// Tells the store what each key prefix holds ([`Store::declare`]).
    fn declare_kinds(&self) {
        for rl in &self.rate_limits {
            let (prefix, kind) = rl.kind();
            self.store.declare(&prefix, kind);
        }
        if self.bans.is_some() {
            self.store.declare(&[ban::KIND], ValueKind::Ban);
        }
        if let Some(s) = &self.scoring {
            let half_life = s.half_life_ns();
            self.store
                .declare(&[scoring::KIND], ValueKind::Score { half_life });
        }
        if let Some(g) = &self.gates {
            g.declare(&*self.store);
        }
    }

    /// Fields that would always read empty are errors: an option without effect.
    fn check_sources(&self, config: &PolicyConfig) -> Result<(), PolicyError> {
        let geo = config.geo.clone().unwrap_or_default();
        for slot in &self.slots {
            let missing = match slot {
                FieldRef::Country if geo.country_db.is_none() => {
                    "ip.src.country needs [geo] country_db"
                }
                FieldRef::Asn if geo.asn_db.is_none() => "ip.src.asnum needs [geo] asn_db",
                FieldRef::Reputation | FieldRef::Category if config.reputation.is_empty() => {
                    "ip.src.reputation and ip.src.category need a [[reputation]] list"
                }
                _ => continue,
            };
            return Err(invalid(missing.to_string()));
        }
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.rate_limits.is_empty()
            && self.bans.is_none()
            && self.gates.is_none()
    }

    /// Whether `path` is under the gate endpoints' prefix.
    pub(crate) fn is_gate_path(&self, path: &[u8]) -> bool {
        self.gates.as_ref().is_some_and(|g| g.is_gate_path(path))
    }

    /// Whether the policy has email-code sign-in (so its host needs a mailer).
    pub(crate) fn has_sign_in(&self) -> bool {
        self.gates.as_ref().is_some_and(|g| g.sign_in.is_some())
    }

    /// The pages of this policy (the built-in ones without `[gates]`).
    pub(crate) fn pages(&self) -> Option<&crate::host::Pages> {
        self.gates.as_ref().map(|g| &g.pages.0)
    }

    /// A gate endpoint request; `None` when `head` is not one.
    pub(crate) fn gate_request(
        &self,
        conn: &ConnectionInfo,
        head: &RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
        request_id: &str,
    ) -> Option<gate::GateResponse> {
        let gates = self.gates.as_ref()?;
        let req = Request {
            head,
            client: list::canonical(conn.client.ip()),
            tls: conn.tls,
            now: nanos(now),
            anomaly_score: 0,
            ml_score: 0,
        };
        if !gates.is_gate_path(req.raw_path()) {
            return None;
        }
        Some(gates.endpoint(&req, body, &*self.store).render(request_id))
    }

    /// `rate["name"]`: the bucket level of limit `i` for `req`.
    pub(crate) fn rate_level(&self, i: usize, req: &Request<'_>) -> i64 {
        let rl = &self.rate_limits[i];
        let mut key = Vec::with_capacity(32);
        rl.key(req, &mut key);
        rl.level(&*self.store, &key, req.now)
    }

    /// Re-reads list files and databases that changed; how many were swapped. Call it
    /// from a timer off the request path. On an error the old contents stay.
    pub(crate) fn reload(&self) -> Result<usize, PolicyError> {
        let mut n = 0;
        for l in &self.lists {
            n += usize::from(l.reload()?);
        }
        for r in &self.intel.reputation {
            n += usize::from(r.list.reload()?);
        }
        if let Some(g) = &self.intel.geo {
            n += g.reload()?;
        }
        Ok(n)
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn bans(&self, now: SystemTime) -> Vec<BanEntry> {
        match &self.bans {
            Some(b) => b.list(&*self.store, nanos(now)),
            None => Vec::new(),
        }
    }

    pub(crate) fn unban(&self, ip: IpAddr) -> bool {
        self.bans
            .as_ref()
            .is_some_and(|b| b.unban(&*self.store, ip))
    }

    pub(crate) fn ban(
        &self,
        ip: IpAddr,
        ttl_secs: Option<u64>,
        now: SystemTime,
    ) -> Option<SystemTime> {
        let b = self.bans.as_ref()?;
        let until = b.ban(
            &*self.store,
            ip,
            nanos(now),
            ttl_secs.map(|s| s.saturating_mul(NANOS)),
        );
        Some(UNIX_EPOCH + std::time::Duration::from_nanos(until))
    }

    pub(crate) fn counters(&self) -> Vec<PolicyCounter> {
        let rules = self.rules.iter().map(|r| PolicyCounter {
            kind: "rule",
            name: r.name.clone(),
            hits: r.hits.load(Ordering::Relaxed),
            shadow: r.shadow,
        });
        let limits = self.rate_limits.iter().map(|r| PolicyCounter {
            kind: "rate_limit",
            name: r.name.clone(),
            hits: r.hits.load(Ordering::Relaxed),
            shadow: r.shadow,
        });
        rules.chain(limits).collect()
    }
}

fn invalid(message: String) -> PolicyError {
    PolicyError::new(PolicyErrorKind::Invalid, message)
}

pub(crate) fn nanos(t: SystemTime) -> u64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The request as the policy sees it.
pub(crate) struct Request<'a> {
    pub(crate) head: &'a RequestHead<'a>,
    pub(crate) client: IpAddr,
    pub(crate) tls: bool,
    pub(crate) now: u64,
    pub(crate) anomaly_score: i64,
    /// The ML detector's score in per mille (`ml.score`), 0 when not scored.
    pub(crate) ml_score: i64,
}

impl<'a> Request<'a> {
    /// The first header called `name` (lower-case).
    pub(crate) fn header(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.head
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The request target without the fragment, and without scheme and authority when it
    /// is in absolute form.
    fn target(&self) -> (&'a [u8], Option<&'a [u8]>) {
        let uri = self.head.uri;
        let uri = &uri[..memchr::memchr(b'#', uri).unwrap_or(uri.len())];
        if uri.starts_with(b"/") || uri == b"*" {
            return (uri, None);
        }
        if let Some(i) = memchr::memmem::find(uri, b"://") {
            let rest = &uri[i + 3..];
            let end = rest
                .iter()
                .position(|&b| b == b'/' || b == b'?')
                .unwrap_or(rest.len());
            return (&rest[end..], Some(&rest[..end]));
        }
        (uri, None)
    }

    /// The path as sent (not decoded).
    pub(crate) fn raw_path(&self) -> &'a [u8] {
        let (t, _) = self.target();
        &t[..memchr::memchr(b'?', t).unwrap_or(t.len())]
    }

    /// The query string (after `?`), as sent.
    pub(crate) fn query(&self) -> &'a [u8] {
        let (t, _) = self.target();
        match memchr::memchr(b'?', t) {
            Some(i) => &t[i + 1..],
            None => b"",
        }
    }

    /// `Host` (or the authority of an absolute URI), lower-cased, without the port.
    pub(crate) fn host(&self) -> Cow<'a, [u8]> {
        let raw = self.header(b"host").or(self.target().1).unwrap_or_default();
        let raw = match raw.iter().rposition(|&b| b == b'@') {
            Some(i) => &raw[i + 1..],
            None => raw,
        };
        let host = if raw.starts_with(b"[") {
            &raw[..raw
                .iter()
                .position(|&b| b == b']')
                .map_or(raw.len(), |i| i + 1)]
        } else {
            &raw[..memchr::memchr(b':', raw).unwrap_or(raw.len())]
        };
        if host.iter().any(u8::is_ascii_uppercase) {
            Cow::Owned(host.to_ascii_lowercase())
        } else {
            Cow::Borrowed(host)
        }
    }

    /// The first cookie called `name`.
    pub(crate) fn cookie(&self, name: &[u8]) -> Option<&'a [u8]> {
        for (k, v) in self.head.headers {
            if !k.eq_ignore_ascii_case(b"cookie") {
                continue;
            }
            for part in v.split(|&b| b == b';') {
                let part = part.trim_ascii();
                let (k, v) = match part.iter().position(|&b| b == b'=') {
                    Some(i) => (&part[..i], &part[i + 1..]),
                    None => (part, &part[part.len()..]),
                };
                if k.trim_ascii() == name {
                    return Some(v.trim_ascii());
                }
            }
        }
        None
    }
}

/// A request header change a rule asks the host to make before forwarding.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderEdit {
    /// Set (replace) the header.
    Set(String, String),
    /// Remove every header of this name.
    Remove(String),
}

/// What the policy asks the host to do besides the verdict, from
/// [`crate::Transaction::policy_effects`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyEffects {
    /// Changes to the request before it is forwarded, in order.
    pub request_headers: Vec<HeaderEdit>,
    /// Headers to add to the answer (for example `Retry-After` on a 429).
    pub response_headers: Vec<(String, String)>,
    /// The body of a `block` rule's `page`, to send instead of the default block page.
    pub page: Option<Arc<[u8]>>,
    /// `Set-Cookie` values to add to the response of a request that goes through (an
    /// admission or session renewed, a visitor let in from a waiting room):
    /// [`PolicyEffects::edit_response_headers`].
    pub set_cookies: Vec<String>,
    /// A gate's answer (challenge, waiting room, sign-in) to send instead of the block
    /// page: [`PolicyEffects::gate_response`].
    pub gate: Option<gate::GateAnswer>,
    /// The gate cookies verified on this request, one bit per [`gate::VerifiedCookie`].
    verified_cookies: u8,
}

impl PolicyEffects {
    /// The names of the gate cookies (`__waf_pass`, `__waf_admit`, `__waf_session`) whose
    /// gate verified them on this request. The rules do not see them in `REQUEST_COOKIES`
    /// and `REQUEST_COOKIES_NAMES` (`REQUEST_HEADERS:Cookie` still carries them); a forged
    /// or unverified one is inspected as any cookie.
    pub fn verified_cookies(&self) -> impl Iterator<Item = &'static str> + '_ {
        gate::VerifiedCookie::ALL
            .into_iter()
            .filter(|c| self.verified_cookies & *c as u8 != 0)
            .map(gate::VerifiedCookie::name)
    }

    /// Marks gate cookie `c` as verified on this request.
    pub(crate) fn verified(&mut self, c: gate::VerifiedCookie) {
        self.verified_cookies |= c as u8;
    }

    /// Applies [`request_headers`](Self::request_headers) to the headers about to be
    /// forwarded (names and values were checked when the policy was compiled).
    pub fn edit_request_headers(&self, headers: &mut http::HeaderMap) {
        for edit in &self.request_headers {
            match edit {
                HeaderEdit::Set(k, v) => {
                    if let (Ok(k), Ok(v)) = (
                        http::HeaderName::from_bytes(k.as_bytes()),
                        http::HeaderValue::from_str(v),
                    ) {
                        headers.insert(k, v);
                    }
                }
                HeaderEdit::Remove(k) => {
                    if let Ok(k) = http::HeaderName::from_bytes(k.as_bytes()) {
                        headers.remove(k);
                    }
                }
            }
        }
    }

    /// What to answer instead of the block page when a gate intervened (the challenge
    /// page, the waiting room, a redirect to sign-in, or their JSON), for a request whose
    /// id is `request_id`.
    pub fn gate_response(&self, request_id: &str) -> Option<gate::GateResponse> {
        self.gate.as_ref().map(|g| g.render(request_id))
    }

    /// Adds [`set_cookies`](Self::set_cookies) to the response of a request that went
    /// through.
    pub fn edit_response_headers(&self, headers: &mut http::HeaderMap) {
        for c in &self.set_cookies {
            if let Ok(v) = http::HeaderValue::from_str(c) {
                headers.append(http::header::SET_COOKIE, v);
            }
        }
    }

    /// Adds [`response_headers`](Self::response_headers) (`Retry-After`) to a block answer;
    /// returns the rule's page when it has one, which replaces the default block page
    /// (send it as `text/html; charset=utf-8`).
    pub fn edit_block_headers(&self, headers: &mut http::HeaderMap) -> Option<&[u8]> {
        for (k, v) in &self.response_headers {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.as_bytes()),
                http::HeaderValue::from_str(v),
            ) {
                headers.insert(k, v);
            }
        }
        if self.page.is_some() {
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/html; charset=utf-8"),
            );
        }
        self.page.as_deref()
    }
}

/// A policy rule or limit that matched in a transaction, in [`crate::Report::policy`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyHit {
    /// `ban`, `rule` or `rate_limit`.
    pub kind: &'static str,
    /// The rule's or limit's name (empty for bans).
    pub name: String,
    /// Its action (`block`, `allow`, `log`, ...).
    pub action: &'static str,
    /// Shadow mode: counted, not carried out.
    pub shadow: bool,
}

/// What the request step asks of the SecLang engine.
#[derive(Debug, Default)]
pub(crate) struct PolicyStep {
    pub(crate) intervention: Option<Intervention>,
    pub(crate) skip_crs: bool,
    pub(crate) remove: Vec<RuleSelector>,
}

/// The candidates [`decide`] chooses between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleDecision {
    Allow(Skips),
    Block,
    Challenge,
}

/// The outcome of the precedence table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Ban,
    Block,
    Challenge,
    RateLimit,
    Continue,
}

/// The precedence table of the module docs, row by row.
pub(crate) fn decide(banned: bool, rule: Option<RuleDecision>, rate_over: bool) -> Decision {
    use RuleDecision as R;
    match (banned, rule, rate_over) {
        (true, Some(R::Allow(s)), _) if s.bans => Decision::Allow, // 1
        (true, _, _) => Decision::Ban,                             // 2
        (false, Some(R::Block), _) => Decision::Block,             // 3
        (false, Some(R::Challenge), _) => Decision::Challenge,     // 4
        (false, Some(R::Allow(s)), true) if s.rate_limits => Decision::Allow, // 5
        (false, Some(R::Allow(_)), true) => Decision::RateLimit,   // 6
        (false, None, true) => Decision::RateLimit,                // 7
        (false, Some(R::Allow(_)), false) => Decision::Allow,      // 8
        (false, None, false) => Decision::Continue,                // 9
    }
}

/// A request head kept for rules that run after the body phase.
#[derive(Debug, Default)]
struct SavedHead {
    method: Vec<u8>,
    uri: Vec<u8>,
    version: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The policy's part of one transaction.
#[derive(Debug)]
pub(crate) struct TxPolicy {
    policy: Arc<Policy>,
    client: IpAddr,
    tls: bool,
    now: u64,
    banned: bool,
    skip_scoring: bool,
    status: Option<u16>,
    counted: Vec<(usize, Vec<u8>)>,
    effects: PolicyEffects,
    hits: Vec<PolicyHit>,
    saved: Option<SavedHead>,
}

fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Block { .. } => "block",
        Action::Allow(_) => "allow",
        Action::Log => "log",
        Action::Challenge { .. } => "challenge",
        Action::SetHeader(..) => "set_header",
        Action::RemoveHeader(_) => "remove_header",
        Action::Skip(_) => "skip",
        Action::RateLimit(_) => "rate_limit",
    }
}

impl TxPolicy {
    pub(crate) fn new(policy: Arc<Policy>, conn: &ConnectionInfo, now: SystemTime) -> TxPolicy {
        TxPolicy {
            policy,
            client: list::canonical(conn.client.ip()),
            tls: conn.tls,
            now: nanos(now),
            banned: false,
            skip_scoring: false,
            status: None,
            counted: Vec::new(),
            effects: PolicyEffects::default(),
            hits: Vec::new(),
            saved: None,
        }
    }

    pub(crate) fn effects(&self) -> &PolicyEffects {
        &self.effects
    }

    pub(crate) fn has_late(&self) -> bool {
        self.policy.has_late
    }

    pub(crate) fn take_hits(&mut self) -> Vec<PolicyHit> {
        std::mem::take(&mut self.hits)
    }

    fn hit(&mut self, kind: &'static str, name: &str, action: &'static str, shadow: bool) {
        self.hits.push(PolicyHit {
            kind,
            name: name.to_string(),
            action,
            shadow,
        });
    }

    /// Steps 1-3 of the module docs.
    pub(crate) fn request_headers(&mut self, head: &RequestHead<'_>) -> PolicyStep {
        let policy = Arc::clone(&self.policy);
        let mut step = PolicyStep::default();
        if policy.is_empty() {
            return step;
        }
        if policy.has_late {
            self.saved = Some(SavedHead {
                method: head.method.to_vec(),
                uri: head.uri.to_vec(),
                version: head.version.to_vec(),
                headers: head
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect(),
            });
        }
        let store = &*policy.store;
        let req = Request {
            head,
            client: self.client,
            tls: self.tls,
            now: self.now,
            anomaly_score: 0,
            ml_score: 0,
        };

        // 1. Bans.
        let mut ban_left = None;
        if let Some(bans) = &policy.bans {
            if let Some(left) = bans.check(store, req.client, req.now) {
                self.hit("ban", "", "block", bans.shadow);
                if !bans.shadow {
                    ban_left = Some(left);
                }
            }
        }

        // 2. Rules.
        let mut cx = Context::new(&req, &policy);
        let mut deciding: Option<&Rule> = None;
        let mut from_rules: Vec<usize> = Vec::new();
        for rule in policy.rules.iter().filter(|r| !r.late) {
            if !rule.expr.eval(&mut cx) {
                continue;
            }
            if let Action::Challenge {
                kind, difficulty, ..
            } = &rule.action
            {
                // The gate endpoints are never challenged (the answer would be challenged),
                // and a visitor with a pass meets the challenge.
                match &policy.gates {
                    Some(g)
                        if g.is_gate_path(req.raw_path())
                            || gate::challenge::has_pass(
                                g,
                                &req,
                                *kind,
                                difficulty.unwrap_or(g.challenge.difficulty),
                            ) =>
                    {
                        if !g.is_gate_path(req.raw_path()) {
                            self.effects.verified(gate::VerifiedCookie::Pass);
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            rule.record_hit();
            self.hit("rule", &rule.name, action_name(&rule.action), rule.shadow);
            if rule.shadow {
                continue;
            }
            match &rule.action {
                Action::Block { .. } | Action::Allow(_) | Action::Challenge { .. } => {
                    deciding = Some(rule);
                    break;
                }
                Action::Log => {}
                Action::SetHeader(k, v) => self
                    .effects
                    .request_headers
                    .push(HeaderEdit::Set(k.clone(), v.clone())),
                Action::RemoveHeader(k) => self
                    .effects
                    .request_headers
                    .push(HeaderEdit::Remove(k.clone())),
                Action::Skip(sel) => step.remove.extend(sel.iter().cloned()),
                Action::RateLimit(i) => from_rules.push(*i),
            }
        }
        let rule_decision = deciding.map(|r| match &r.action {
            Action::Allow(s) => RuleDecision::Allow(*s),
            Action::Challenge { .. } => RuleDecision::Challenge,
            _ => RuleDecision::Block,
        });

        // 3. Rate limits, unless the outcome is already settled without them.
        let settled = ban_left.is_some()
            || matches!(
                rule_decision,
                Some(RuleDecision::Block | RuleDecision::Challenge)
            )
            || matches!(rule_decision, Some(RuleDecision::Allow(s)) if s.rate_limits);
        let mut over: Option<(usize, u64)> = None;
        if !settled {
            let mut key = Vec::with_capacity(48);
            for (i, rl) in policy.rate_limits.iter().enumerate() {
                let applies = from_rules.contains(&i)
                    || (!rl.from_rules_only && rl.when.as_ref().is_none_or(|e| e.eval(&mut cx)));
                if !applies {
                    continue;
                }
                rl.key(&req, &mut key);
                if let Check::Over(wait) = rl.check(store, &key, req.now) {
                    rl.record_hit();
                    self.hit("rate_limit", &rl.name, "block", rl.shadow);
                    if !rl.shadow {
                        over = Some((i, wait));
                        break;
                    }
                }
                if !rl.count_statuses.is_empty() {
                    self.counted.push((i, key.clone()));
                }
            }
        }

        let decision = decide(ban_left.is_some(), rule_decision, over.is_some());
        if matches!(decision, Decision::Continue | Decision::Allow) {
            // Sign-in and waiting rooms, for requests nothing else stopped.
            if let Some(g) = &policy.gates {
                if let Some(i) = g.access(&req, &mut cx, store, &mut self.effects) {
                    self.hit("gate", "", "challenge", false);
                    step.intervention = Some(i);
                    return step;
                }
            }
        }
        match decision {
            Decision::Continue => {}
            Decision::Allow => {
                if let Some(RuleDecision::Allow(s)) = rule_decision {
                    step.skip_crs = s.crs;
                    self.skip_scoring = s.scoring;
                }
            }
            Decision::Ban => {
                self.banned = true;
                let (status, left) = match (&policy.bans, ban_left) {
                    (Some(b), Some(left)) => (b.status, left),
                    _ => (403, 0),
                };
                self.retry_after(left);
                step.intervention = Some(deny(status, 0, "client is banned".to_string()));
            }
            Decision::Block | Decision::Challenge => {
                if let Some(rule) = deciding {
                    step.intervention = Some(self.rule_intervention(rule, &req));
                }
            }
            Decision::RateLimit => {
                if let Some((i, wait)) = over {
                    let rl = &policy.rate_limits[i];
                    self.retry_after(wait);
                    step.intervention = Some(deny(rl.status, 0, format!("rate limit {}", rl.name)));
                }
            }
        }
        step
    }

    fn retry_after(&mut self, wait_ns: u64) {
        let secs = wait_ns.div_ceil(NANOS).max(1);
        self.effects
            .response_headers
            .push(("Retry-After".to_string(), secs.to_string()));
    }

    fn rule_intervention(&mut self, rule: &Rule, req: &Request<'_>) -> Intervention {
        match &rule.action {
            Action::Block { status, page } => {
                self.effects.page = page.clone();
                deny(*status, rule.id, format!("policy rule {}", rule.name))
            }
            Action::Challenge {
                status,
                kind,
                difficulty,
            } => {
                if let Some(g) = &self.policy.gates {
                    let status =
                        http::StatusCode::from_u16(*status).unwrap_or(http::StatusCode::FORBIDDEN);
                    let d = difficulty.unwrap_or(g.challenge.difficulty);
                    let answer = gate::challenge::challenge(g, req, *kind, d, status);
                    let status = answer.status().as_u16();
                    self.effects.gate = Some(answer);
                    return deny(
                        status,
                        rule.id,
                        format!("policy rule {}: challenge", rule.name),
                    );
                }
                deny(*status, rule.id, format!("policy rule {}", rule.name))
            }
            _ => deny(403, rule.id, format!("policy rule {}", rule.name)),
        }
    }

    /// Step 5: rules that read `waf.score`, once the CRS request phases have run.
    pub(crate) fn request_end(&mut self, anomaly_score: i64, ml_score: i64) -> PolicyStep {
        let mut step = PolicyStep::default();
        let Some(saved) = self.saved.take() else {
            return step;
        };
        let policy = Arc::clone(&self.policy);
        let headers: Vec<(&[u8], &[u8])> = saved
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let head = RequestHead::new(&saved.method, &saved.uri, &saved.version, &headers);
        let req = Request {
            head: &head,
            client: self.client,
            tls: self.tls,
            now: self.now,
            anomaly_score,
            ml_score,
        };
        let mut cx = Context::new(&req, &policy);
        for rule in policy.rules.iter().filter(|r| r.late) {
            if !rule.expr.eval(&mut cx) {
                continue;
            }
            rule.record_hit();
            self.hit("rule", &rule.name, action_name(&rule.action), rule.shadow);
            if rule.shadow || !rule.terminates() {
                continue;
            }
            if let Action::Challenge {
                kind, difficulty, ..
            } = &rule.action
            {
                let passed = policy.gates.as_ref().is_some_and(|g| {
                    g.is_gate_path(req.raw_path())
                        || gate::challenge::has_pass(
                            g,
                            &req,
                            *kind,
                            difficulty.unwrap_or(g.challenge.difficulty),
                        )
                });
                if passed {
                    continue;
                }
            }
            step.intervention = Some(self.rule_intervention(rule, &req));
            break;
        }
        step
    }

    /// The response status, when the host reports it.
    pub(crate) fn response_status(&mut self, status: u16) {
        self.status = Some(status);
    }

    /// Step 6: count the response and score the client.
    pub(crate) fn finish(&mut self, intervention: Option<&Intervention>) {
        let policy = Arc::clone(&self.policy);
        let Some(status) = intervention.map(|i| i.status).or(self.status) else {
            return;
        };
        let store = &*policy.store;
        for (i, key) in std::mem::take(&mut self.counted) {
            policy.rate_limits[i].count(store, &key, status, self.now);
        }
        if self.banned || self.skip_scoring {
            return;
        }
        if let (Some(scoring), Some(bans)) = (&policy.scoring, &policy.bans) {
            scoring.record(
                store,
                bans,
                self.client,
                status,
                intervention.is_some(),
                self.now,
            );
        }
    }
}

fn deny(status: u16, rule_id: u64, message: String) -> Intervention {
    Intervention {
        status,
        action: DisruptiveAction::Deny,
        rule_id,
        message: Some(message),
    }
}

#[cfg(test)]
mod tests;

/// Refuses a policy with `[gates]` (challenges, waiting rooms, sign-in) for a host that does
/// not serve their pages and endpoints (`host` names it in the message): there a gate
/// would answer with a bare status, so the policy fails to load instead. waf-proxy,
/// waf-tower, waf-actix and the nginx module serve them; the C ABI calls this unless its
/// host said it serves them (`waf_builder_serve_gates`).
pub fn check_gates_served(config: &PolicyConfig, host: &str) -> Result<(), PolicyError> {
    if config.gates.is_some() {
        return Err(PolicyError::new(
            PolicyErrorKind::Invalid,
            format!(
                "[gates]: {host} does not serve the pages and /.waf/ endpoints of challenges, \
                 waiting rooms and sign-in (a C host opts in with waf_builder_serve_gates)"
            ),
        ));
    }
    Ok(())
}
