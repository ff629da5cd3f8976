//! Rate limiting: GCRA buckets ([`super::gcra`]) keyed by any combination of request
//! properties, answered with 429 and `Retry-After`.
//!
//! A limit applies to every request its `match` expression selects (all requests when
//! there is none), or, when it has no `match` and a rule names it (`action =
//! "rate_limit"`), only to the requests that rule matches: that is how a limit is scoped
//! per host (each host has its own policy), per path or path pattern (`match =
//! 'http.request.uri.path wildcard "/api/*"'`) and per rule. The bucket key is built from
//! `key` (`ip`, `prefix` (/`ipv4_prefix`, /`ipv6_prefix`, default /24 and /64),
//! `header:NAME`, `cookie:NAME`, `arg:NAME`, `path`, `host`, `method`, `user_agent`), so a
//! limit per API key and path is `key = ["header:x-api-key", "path"]`.
//!
//! With `count_statuses` (for example `[401, 403]`), a request is refused when its bucket
//! is full but only responses with those statuses fill it ([`crate::Transaction::finish`]):
//! a login limit that counts only failures.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};
use super::expr::Expr;
use super::gcra::{Conformance, Gcra};
use super::list::canonical;
use super::state::{Cell, Store, ValueKind};
use super::{Request, NANOS};

/// `[[rate_limit]]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// The name rules and `rate["name"]` use.
    pub name: String,
    /// What identifies a bucket (default `["ip"]`).
    #[serde(default = "default_key")]
    pub key: Vec<String>,
    /// Requests allowed per `period_secs`.
    pub requests: u64,
    /// The period, in seconds (default 1).
    #[serde(default = "default_period")]
    pub period_secs: u64,
    /// Requests allowed at once from an empty bucket (default `requests`).
    #[serde(default)]
    pub burst: Option<u64>,
    /// Which requests the limit applies to (an expression); see the module docs.
    #[serde(default, rename = "match")]
    pub when: Option<String>,
    /// Only responses with these statuses count (default: every request counts).
    #[serde(default)]
    pub count_statuses: Vec<u16>,
    /// Status of the refusal (default 429).
    #[serde(default = "default_status")]
    pub status: u16,
    /// Prefix length of `prefix` keys for IPv4 (default 24).
    #[serde(default)]
    pub ipv4_prefix: Option<u8>,
    /// Prefix length of `prefix` keys for IPv6 (default 64).
    #[serde(default)]
    pub ipv6_prefix: Option<u8>,
    /// Count and report, never refuse.
    #[serde(default)]
    pub shadow: bool,
}

fn default_key() -> Vec<String> {
    vec!["ip".to_string()]
}
fn default_period() -> u64 {
    1
}
fn default_status() -> u16 {
    429
}

/// One component of a bucket key.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyPart {
    Ip,
    Prefix { v4: u8, v6: u8 },
    Header(Box<[u8]>),
    Cookie(Box<[u8]>),
    Arg(Box<[u8]>),
    Path,
    Host,
    Method,
    UserAgent,
}

/// A compiled limit.
#[derive(Debug)]
pub(crate) struct RateLimit {
    pub(crate) name: String,
    index: u16,
    gcra: Gcra,
    key: Vec<KeyPart>,
    pub(crate) when: Option<Expr>,
    /// Statuses that fill the bucket; empty: every request.
    pub(crate) count_statuses: Vec<u16>,
    pub(crate) status: u16,
    pub(crate) shadow: bool,
    /// Applies only where a rule names it.
    pub(crate) from_rules_only: bool,
    /// Requests refused (or, in shadow mode, that would have been).
    pub(crate) hits: AtomicU64,
}

const KIND: u8 = b'r';

/// The outcome of one limit for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Within the limit.
    Pass,
    /// Over it: nanoseconds until the client may retry.
    Over(u64),
}

impl RateLimit {
    /// Compiles everything but `when` (which the caller compiles against the policy's scheme).
    pub(crate) fn compile(c: &RateLimitConfig, index: usize) -> Result<RateLimit, PolicyError> {
        let bad = |m: String| {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("rate limit {:?}: {m}", c.name),
            ))
        };
        if c.requests == 0 || c.period_secs == 0 {
            return bad("`requests` and `period_secs` must be at least 1".into());
        }
        if c.burst == Some(0) {
            return bad("`burst` must be at least 1".into());
        }
        if !(400..=599).contains(&c.status) {
            return bad(format!("status {} is not a 4xx or 5xx status", c.status));
        }
        if c.key.is_empty() {
            return bad("`key` is empty".into());
        }
        let v4 = c.ipv4_prefix.unwrap_or(24);
        let v6 = c.ipv6_prefix.unwrap_or(64);
        if v4 > 32 || v6 > 128 {
            return bad(format!("prefix /{v4} or /{v6} is too long"));
        }
        let mut key = Vec::new();
        for part in &c.key {
            let (kind, arg) = match part.split_once(':') {
                Some((k, a)) => (k, Some(a)),
                None => (part.as_str(), None),
            };
            let named = |f: fn(Box<[u8]>) -> KeyPart| match arg {
                Some(a) if !a.is_empty() => Ok(f(a.as_bytes().into())),
                _ => Err(()),
            };
            let p = match (kind, arg) {
                ("ip", None) => Ok(KeyPart::Ip),
                ("prefix", None) => Ok(KeyPart::Prefix { v4, v6 }),
                ("header", _) => {
                    named(|a| KeyPart::Header(a.to_ascii_lowercase().into_boxed_slice()))
                }
                ("cookie", _) => named(KeyPart::Cookie),
                ("arg", _) => named(KeyPart::Arg),
                ("path", None) => Ok(KeyPart::Path),
                ("host", None) => Ok(KeyPart::Host),
                ("method", None) => Ok(KeyPart::Method),
                ("user_agent", None) => Ok(KeyPart::UserAgent),
                _ => Err(()),
            };
            match p {
                Ok(p) => key.push(p),
                Err(()) => {
                    return bad(format!(
                        "unknown key {part:?} (ip, prefix, header:NAME, cookie:NAME, arg:NAME, path, host, method, user_agent)"
                    ))
                }
            }
        }
        if (c.ipv4_prefix.is_some() || c.ipv6_prefix.is_some())
            && !key.iter().any(|k| matches!(k, KeyPart::Prefix { .. }))
        {
            return bad("`ipv4_prefix`/`ipv6_prefix` have no effect without a `prefix` key".into());
        }
        let Ok(index) = u16::try_from(index) else {
            return bad("too many rate limits".into());
        };
        Ok(RateLimit {
            name: c.name.clone(),
            index,
            gcra: Gcra::new(
                c.requests,
                c.period_secs.saturating_mul(NANOS),
                c.burst.unwrap_or(c.requests),
            ),
            key,
            when: None,
            count_statuses: c.count_statuses.clone(),
            status: c.status,
            shadow: c.shadow,
            from_rules_only: false,
            hits: AtomicU64::new(0),
        })
    }

    /// The prefix every bucket key of this limit starts with, and what its cells hold.
    pub(crate) fn kind(&self) -> ([u8; 3], ValueKind) {
        let i = self.index.to_be_bytes();
        (
            [KIND, i[0], i[1]],
            ValueKind::Gcra {
                interval: self.gcra.interval,
            },
        )
    }

    /// The bucket key of `req`, written into `out`.
    pub(crate) fn key(&self, req: &Request<'_>, out: &mut Vec<u8>) {
        out.clear();
        out.push(KIND);
        out.extend_from_slice(&self.index.to_be_bytes());
        for part in &self.key {
            let start = out.len();
            out.extend_from_slice(&[0, 0]);
            match part {
                KeyPart::Ip => push_ip(out, canonical(req.client), 32, 128),
                KeyPart::Prefix { v4, v6 } => push_ip(out, canonical(req.client), *v4, *v6),
                KeyPart::Header(name) => {
                    out.extend_from_slice(req.header(name).unwrap_or_default())
                }
                KeyPart::Cookie(name) => {
                    out.extend_from_slice(req.cookie(name).unwrap_or_default())
                }
                KeyPart::Arg(name) => {
                    let v = super::expr::fields::query_arg(req.query(), name).unwrap_or_default();
                    out.extend_from_slice(&v);
                }
                KeyPart::Path => {
                    out.extend_from_slice(&super::expr::fields::normalized_path(req.raw_path()))
                }
                KeyPart::Host => out.extend_from_slice(&req.host()),
                KeyPart::Method => out.extend_from_slice(req.head.method),
                KeyPart::UserAgent => {
                    out.extend_from_slice(req.header(b"user-agent").unwrap_or_default())
                }
            }
            // Length-prefixed so ("ab", "c") and ("a", "bc") are different keys.
            let len = u16::try_from(out.len() - start - 2).unwrap_or(u16::MAX);
            out[start..start + 2].copy_from_slice(&len.to_be_bytes());
        }
    }

    /// Request time: with `count_statuses`, only whether the bucket has room; otherwise
    /// the request is counted too.
    pub(crate) fn check(&self, store: &dyn Store, key: &[u8], now: u64) -> Check {
        let count = self.count_statuses.is_empty();
        let mut result = Check::Pass;
        store.update(key, now, &mut |c| {
            let tat = c.map_or(0, |c| c.a);
            match self.gcra.check(tat, now) {
                Conformance::Allow(new) if count => Some(Cell {
                    a: new,
                    b: 0,
                    expires: self.gcra.expiry(new),
                }),
                Conformance::Allow(_) => c,
                Conformance::Deny(wait) => {
                    result = Check::Over(wait);
                    c
                }
            }
        });
        result
    }

    /// Response time (limits with `count_statuses`): counts the response if its status is
    /// one of them.
    pub(crate) fn count(&self, store: &dyn Store, key: &[u8], status: u16, now: u64) {
        if !self.count_statuses.contains(&status) {
            return;
        }
        store.update(key, now, &mut |c| {
            let tat = c.map_or(0, |c| c.a);
            match self.gcra.check(tat, now) {
                Conformance::Allow(new) => Some(Cell {
                    a: new,
                    b: 0,
                    expires: self.gcra.expiry(new),
                }),
                Conformance::Deny(_) => c,
            }
        });
    }

    /// How many requests the bucket of `key` holds (`rate["name"]`).
    pub(crate) fn level(&self, store: &dyn Store, key: &[u8], now: u64) -> i64 {
        let tat = store.update(key, now, &mut |c| c).map_or(0, |c| c.a);
        i64::try_from(self.gcra.level(tat, now)).unwrap_or(i64::MAX)
    }

    pub(crate) fn record_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }
}

fn push_ip(out: &mut Vec<u8>, ip: IpAddr, v4: u8, v6: u8) {
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let mask = if v4 == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(v4))
            };
            out.extend_from_slice(&(bits & mask).to_be_bytes());
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let mask = if v6 == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(v6))
            };
            out.extend_from_slice(&(bits & mask).to_be_bytes());
        }
    }
}
