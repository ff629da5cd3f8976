//! The native policy in the proxy: its TOML, its admin endpoints and its per-request glue.
//!
//! ```toml
//! [[list]]                         # shared by every host
//! name = "office"
//! kind = "ip"                      # or "string"
//! items = ["192.0.2.0/24"]         # and/or file = "office.txt" (reloaded when it changes)
//!
//! [geo]                            # shared: MaxMind-format databases
//! country_db = "GeoLite2-Country.mmdb"
//! asn_db = "GeoLite2-ASN.mmdb"
//!
//! [[reputation]]                   # shared: scored CIDR lists
//! name = "tor"
//! category = "tor"
//! score = 80
//! file = "tor-exits.txt"
//!
//! [[host]]
//! names = ["shop.example"]
//! upstream = "app"
//! [[host.rules]]                   # this host's rules, in order
//! name = "office-only-admin"
//! expression = 'http.request.uri.path starts_with "/admin" and not ip.src in $office'
//! action = "block"
//! [[host.rate_limit]]
//! name = "login"
//! match = 'http.request.uri.path == "/login"'
//! requests = 5
//! period_secs = 60
//! count_statuses = [401]
//! [host.bans]
//! ttl_secs = 600
//! [host.scoring]
//! threshold = 20
//! [host.gates]                     # challenges, waiting rooms, sign-in (waf_core::policy::gate)
//! keys = ["at least 32 bytes of secret"]
//! [[host.gates.waiting_room]]
//! name = "sale"
//! capacity = 500
//! [host.gates.sign_in]             # needs [smtp] (crate::mail)
//! allowed = ["@example.com"]
//! ```
//!
//! Relative file paths are relative to the config file. The policy is compiled when the
//! config is checked, so `waf-proxy check` reports an expression error with its rule, line
//! and column. Each host's counters, scores and bans live in a store kept across reloads
//! (by host name). The admin listener shows them: `GET /bans` (JSON), `DELETE
//! /bans/<ip>` lifts one; `/metrics` has the rules' and limits' hit counters. List files
//! and databases are re-read by a timer ([`spawn_file_reloader`]), off the request path.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use waf_core::policy::gate::GateConfig;
use waf_core::policy::{
    BanConfig, GeoConfig, ListConfig, PolicyConfig, PolicyEffects, RateLimitConfig,
    ReputationConfig, RuleConfig, ScoringConfig, Store,
};
use waf_core::{Waf, WafBuilder};

use crate::state::State;

/// How often list files and geo databases are checked for changes.
pub const DEFAULT_LIST_RELOAD_MS: u64 = 5_000;

/// The top-level, shared parts: `[[list]]`, `[geo]`, `[[reputation]]`.
#[derive(Debug, Clone, Default)]
pub struct SharedPolicy {
    lists: Vec<ListConfig>,
    geo: Option<GeoConfig>,
    reputation: Vec<ReputationConfig>,
}

impl SharedPolicy {
    /// From the raw file, with paths made relative to `base`.
    pub fn new(
        mut lists: Vec<ListConfig>,
        mut geo: Option<GeoConfig>,
        mut reputation: Vec<ReputationConfig>,
        base: &Path,
    ) -> SharedPolicy {
        for l in &mut lists {
            l.file = l.file.take().map(|f| base.join(f));
        }
        for r in &mut reputation {
            r.file = r.file.take().map(|f| base.join(f));
        }
        if let Some(g) = &mut geo {
            g.country_db = g.country_db.take().map(|f| base.join(f));
            g.asn_db = g.asn_db.take().map(|f| base.join(f));
        }
        SharedPolicy {
            lists,
            geo,
            reputation,
        }
    }
}

/// A host's policy from its `[[host.rules]]`, `[[host.rate_limit]]`, `[host.bans]` and
/// `[host.scoring]` plus the shared parts; `None` when the host has none of its own.
/// Compiled here once to report errors with their location (`Err`: the message).
pub fn host_policy(
    shared: &SharedPolicy,
    mut rules: Vec<RuleConfig>,
    rate_limits: Vec<RateLimitConfig>,
    bans: Option<BanConfig>,
    scoring: Option<ScoringConfig>,
    mut gates: Option<GateConfig>,
    base: &Path,
) -> Result<Option<PolicyConfig>, String> {
    if rules.is_empty()
        && rate_limits.is_empty()
        && bans.is_none()
        && scoring.is_none()
        && gates.is_none()
    {
        return Ok(None);
    }
    for r in &mut rules {
        r.page_file = r.page_file.take().map(|f| base.join(f));
    }
    if let Some(g) = &mut gates {
        g.pages.resolve_paths(base);
    }
    let config = PolicyConfig {
        lists: shared.lists.clone(),
        rules,
        rate_limits,
        bans,
        scoring,
        geo: shared.geo.clone(),
        reputation: shared.reputation.clone(),
        gates,
    };
    WafBuilder::check_policy(&config).map_err(|e| e.to_string())?;
    Ok(Some(config))
}

/// Where each `[[host.rules]]` expression starts in the file, for [`locate_in_file`].
#[derive(serde::Deserialize)]
struct SpannedDoc {
    #[serde(default)]
    host: Vec<SpannedHost>,
}

#[derive(serde::Deserialize)]
struct SpannedHost {
    #[serde(default)]
    rules: Vec<SpannedRule>,
}

#[derive(serde::Deserialize)]
struct SpannedRule {
    name: String,
    expression: toml::Spanned<String>,
}

/// Adds the file position to policy errors that point into a `[[host.rules]]` expression
/// (`rule "x" expression:L:C`): `(proxy.toml:LINE:COL)`. Exact for literal strings
/// (`'...'`, `'''...'''`), approximate for basic strings with escapes.
pub fn locate_in_file(path: &Path, text: &str, errors: &mut crate::config::ConfigErrors) {
    let Ok(doc) = toml::from_str::<SpannedDoc>(text) else {
        return;
    };
    for e in &mut errors.0 {
        let Some(host) = e
            .location
            .strip_suffix(".policy")
            .and_then(|l| l.rsplit("host[").next())
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        let Some(rest) = e.message.strip_prefix("rule \"") else {
            continue;
        };
        let Some((name, rest)) = rest.split_once("\" expression:") else {
            continue;
        };
        let mut nums = rest.splitn(3, ':');
        let (Some(Ok(line)), Some(Ok(col))) = (
            nums.next().map(str::parse::<usize>),
            nums.next().map(str::parse::<usize>),
        ) else {
            continue;
        };
        let Some(rule) = doc
            .host
            .get(host)
            .and_then(|h| h.rules.iter().find(|r| r.name == name))
        else {
            continue;
        };
        let span = rule.expression.span();
        let raw = &text[span.start..span.end.min(text.len())];
        let quote = if raw.starts_with("'''") || raw.starts_with("\"\"\"") {
            3
        } else {
            1
        };
        let mut start = span.start + quote;
        if quote == 3 && text[start..].starts_with('\n') {
            start += 1;
        }
        // Offset of (line, col) inside the expression, then the file position of that.
        let expr = rule.expression.get_ref();
        let mut offset = 0;
        for (i, l) in expr.split('\n').enumerate() {
            if i + 1 == line {
                offset += l
                    .char_indices()
                    .nth(col.saturating_sub(1))
                    .map_or(l.len(), |(b, _)| b);
                break;
            }
            offset += l.len() + 1;
        }
        // Basic strings with escapes can put the offset inside a character: then say nothing.
        let Some(before) = text.get(..(start + offset).min(text.len())) else {
            continue;
        };
        let file_line = before.matches('\n').count() + 1;
        let file_col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        // The file position goes on the first line, before the `^^^` lines.
        let at = format!(" ({}:{file_line}:{file_col})", path.display());
        e.message = match e.message.split_once('\n') {
            Some((first, tail)) => format!("{first}{at}\n{tail}"),
            None => format!("{}{at}", e.message),
        };
    }
}

/// Stores by host label, kept across config reloads so bans and counters survive them.
fn stores() -> &'static Mutex<HashMap<String, Arc<dyn Store>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn Store>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

/// `waf` with the host's policy attached (state in the host's long-lived store).
pub fn attach(waf: Waf, policy: Option<&PolicyConfig>, label: &str) -> Result<Waf, String> {
    let Some(config) = policy else {
        return Ok(waf);
    };
    let mut stores = stores().lock().unwrap_or_else(|e| e.into_inner());
    // With `[state]`, the fleet's store of this host (the same one across reloads).
    let store = crate::fleet::store(label).or_else(|| stores.get(label).cloned());
    let waf = waf.with_policy(config, store).map_err(|e| e.to_string())?;
    stores.insert(label.to_string(), waf.policy_store());
    Ok(waf)
}

/// Applies the policy's request header edits to the headers sent upstream.
pub fn edit_request(headers: &mut HeaderMap, effects: &PolicyEffects) {
    effects.edit_request_headers(headers);
}

/// Adds the policy's answer headers (`Retry-After`) to a block response, and its page.
pub fn edit_block(effects: &PolicyEffects, headers: &mut HeaderMap, body: &mut String) {
    if let Some(page) = effects.edit_block_headers(headers) {
        *body = String::from_utf8_lossy(page).into_owned();
    }
}

/// The admin listener's `/bans` endpoints: `(status, content type, body)`.
pub fn admin(
    state: &State,
    method: &http::Method,
    path: &str,
) -> (http::StatusCode, &'static str, String) {
    use http::StatusCode;
    let now = SystemTime::now();
    if path == "/bans" && method == http::Method::GET {
        let mut out = Vec::new();
        for h in &state.hosts {
            for b in h.waf.bans(now) {
                let until = b
                    .until
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default();
                out.push(serde_json::json!({
                    "host": h.label,
                    "ip": b.ip.to_string(),
                    "until_unix": until.as_secs(),
                    "offences": b.offences,
                }));
            }
        }
        return (
            StatusCode::OK,
            "application/json",
            format!("{}\n", serde_json::Value::Array(out)),
        );
    }
    if let Some(ip) = path.strip_prefix("/bans/") {
        if method != http::Method::DELETE {
            return (
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "use DELETE\n".into(),
            );
        }
        let Ok(ip) = ip.parse::<IpAddr>() else {
            return (
                StatusCode::BAD_REQUEST,
                "text/plain",
                format!("{ip:?} is not an IP address\n"),
            );
        };
        let lifted = state.hosts.iter().filter(|h| h.waf.unban(ip)).count();
        return if lifted > 0 {
            (
                StatusCode::OK,
                "text/plain",
                format!("unbanned {ip} on {lifted} host(s)\n"),
            )
        } else {
            (
                StatusCode::NOT_FOUND,
                "text/plain",
                format!("{ip} is not banned\n"),
            )
        };
    }
    (StatusCode::NOT_FOUND, "text/plain", "not found\n".into())
}

/// The policy hits of a transaction for the audit record (shadow hits included: that is how
/// a rule on trial shows what it would have blocked).
pub fn audit_hits(r: &waf_core::Report) -> serde_json::Value {
    r.policy
        .iter()
        .map(|h| serde_json::json!({"kind": h.kind, "name": h.name, "action": h.action, "shadow": h.shadow}))
        .collect()
}

/// Prometheus lines for the rules' and limits' hit counters.
pub fn metrics(state: &State, out: &mut String) {
    out.push_str("# HELP waf_proxy_policy_hits_total Policy rules matched and rate limits exceeded (shadow: would have acted).\n# TYPE waf_proxy_policy_hits_total counter\n");
    for h in &state.hosts {
        for c in h.waf.policy_counters() {
            out.push_str(&format!(
                "waf_proxy_policy_hits_total{{host=\"{}\",kind=\"{}\",name=\"{}\",shadow=\"{}\"}} {}\n",
                h.label,
                c.kind,
                c.name.replace(['"', '\\', '\n'], "_"),
                c.shadow,
                c.hits
            ));
        }
        out.push_str(&format!(
            "waf_proxy_policy_bans{{host=\"{}\"}} {}\n",
            h.label,
            h.waf.bans(SystemTime::now()).len()
        ));
    }
    crate::fleet::metrics(out);
}

/// Re-reads changed list files and databases of the running state every `every`, on a
/// blocking thread (file reads), never on a request.
pub fn spawn_file_reloader(
    state: Arc<arc_swap::ArcSwap<State>>,
    every: Duration,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("policy-files".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let s = state.load();
            for h in &s.hosts {
                match h.waf.reload_policy_files() {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(host = %h.label, files = n, "policy files reloaded"),
                    Err(e) => tracing::error!(host = %h.label, error = %e, "policy file reload failed, keeping the old contents"),
                }
            }
        })
}
