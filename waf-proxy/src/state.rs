//! The compiled, immutable state one config becomes: hosts with their WAFs and upstream
//! groups. Built off the request path (at start and on reload) and swapped atomically with
//! `arc-swap`; requests in flight keep the state they started with.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use http::HeaderValue;
use rustls::sign::CertifiedKey;
use waf_core::Waf;

use crate::config::{Config, HostConfig, UpstreamConfig, WafConfig, WafRules};
use crate::profile;

/// One config, compiled.
#[derive(Debug)]
pub struct State {
    /// The validated config.
    pub config: Config,
    /// Hosts, in config order.
    pub hosts: Vec<Host>,
    /// Upstream groups, in config order.
    pub upstreams: Vec<Arc<Upstream>>,
    exact: HashMap<String, usize>,
    suffixes: Vec<(String, usize)>,
    any: Option<usize>,
    default: Option<usize>,
}

/// A compiled virtual host.
#[derive(Debug)]
pub struct Host {
    /// Its config.
    pub config: HostConfig,
    /// Its first name, for logs and metrics.
    pub label: String,
    /// Its compiled WAF.
    pub waf: Waf,
    /// Its certificate, when it has one.
    pub cert: Option<Arc<CertifiedKey>>,
    /// Security headers to add to every response, ready to insert.
    pub security_headers: Vec<(http::HeaderName, HeaderValue)>,
    /// `Strict-Transport-Security`, added on HTTPS only.
    pub hsts: Option<HeaderValue>,
    /// What every host adapter takes ([`waf_core::host::HostOptions`]): the trusted
    /// proxies, the request id header and the request body limit (over it: 413, in every
    /// mode, since the limit also bounds the proxy's memory).
    pub options: waf_core::host::HostOptions,
    /// Phase 4 can block ([`Waf::response_body_can_intervene`]): inspected response
    /// bodies are held up to `max_response_buffer` before they are sent.
    pub hold_responses: bool,
}

/// An upstream group with its passive-health state.
#[derive(Debug)]
pub struct Upstream {
    /// Its config.
    pub config: UpstreamConfig,
    /// Its servers.
    pub servers: Vec<Server>,
    /// The TLS client config, when a server is `https://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Which pooled client of a worker serves it ([`crate::client::client_for`]).
    pub client_key: crate::client::ClientKey,
    next: AtomicUsize,
}

/// One upstream server.
#[derive(Debug)]
pub struct Server {
    /// `host:port`.
    pub authority: http::uri::Authority,
    /// Written `https://host:port`: reached over TLS.
    pub tls: bool,
    /// Active health: out of rotation until `rise` checks pass.
    active_down: std::sync::atomic::AtomicBool,
    /// Active health: checks passed (positive) or failed (negative) in a row.
    streak: std::sync::atomic::AtomicI64,
    /// Milliseconds since [`epoch`] until which the server is skipped; 0 = healthy.
    down_until_ms: AtomicU64,
}

/// The process's monotonic epoch for health deadlines.
pub fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

impl Upstream {
    /// Servers in the order to try them for one request: round robin from the next one,
    /// healthy servers first, then those marked down (better than failing outright when
    /// all are down).
    pub fn pick_order(&self) -> impl Iterator<Item = usize> + '_ {
        let n = self.servers.len();
        // n > 0 (config validation); with n == 0 the ring below is empty.
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n.max(1);
        let now = now_ms();
        let up = move |i: &usize| {
            let s = &self.servers[*i];
            s.down_until_ms.load(Ordering::Relaxed) <= now && !s.active_down.load(Ordering::Relaxed)
        };
        let ring = move || (0..n).map(move |k| (start + k) % n);
        ring().filter(up).chain(ring().filter(move |i| !up(i)))
    }

    /// Passive health: skip server `i` for the fail timeout.
    pub fn mark_down(&self, i: usize) {
        let until = now_ms() + self.config.fail_timeout.as_millis() as u64;
        self.servers[i]
            .down_until_ms
            .store(until, Ordering::Relaxed);
    }

    /// Whether server `i` is currently skipped (passive or active health).
    pub fn is_down(&self, i: usize) -> bool {
        let s = &self.servers[i];
        s.down_until_ms.load(Ordering::Relaxed) > now_ms() || s.active_down.load(Ordering::Relaxed)
    }

    /// Active health: records one check of server `i`; returns `Some(up)` when this check
    /// changed the server's state (`fall` failures in a row take it out, `rise` successes
    /// in a row bring it back).
    pub fn record_check(&self, i: usize, ok: bool, rise: u32, fall: u32) -> Option<bool> {
        let s = &self.servers[i];
        let prev = s.streak.load(Ordering::Relaxed);
        let streak = match (ok, prev > 0) {
            (true, true) => prev + 1,
            (true, false) => 1,
            (false, false) => prev - 1,
            (false, true) => -1,
        };
        s.streak.store(streak, Ordering::Relaxed);
        let down = s.active_down.load(Ordering::Relaxed);
        if down && streak >= i64::from(rise) {
            s.active_down.store(false, Ordering::Relaxed);
            return Some(true);
        }
        if !down && -streak >= i64::from(fall) {
            s.active_down.store(true, Ordering::Relaxed);
            return Some(false);
        }
        None
    }
}

impl State {
    /// Compiles `config`: rule sets, certificates, host table. Slow (CRS takes a while), so
    /// it runs off the request path. Errors name the host they come from.
    pub fn build(config: Config) -> Result<State, Vec<String>> {
        let mut errors = Vec::new();
        let mut hosts = Vec::new();
        for (i, h) in config.hosts.iter().enumerate() {
            let label = h.names.first().cloned().unwrap_or_default();
            let waf = match build_waf(&h.waf)
                .map_err(|e| e.to_string())
                .and_then(|w| crate::policy::attach(w, h.policy.as_ref(), &label))
            {
                Ok(w) => w,
                Err(e) => {
                    errors.push(format!("host[{i}].waf: {e}"));
                    continue;
                }
            };
            let cert = match &h.tls {
                None => None,
                Some((c, k)) => match crate::tls::load_certified_key(c, k) {
                    Ok(ck) => Some(ck),
                    Err(e) => {
                        errors.push(format!("host[{i}].tls: {e}"));
                        None
                    }
                },
            };
            let mut security_headers = Vec::new();
            let mut add = |name: &'static str, v: &Option<String>| {
                if let Some(v) = v {
                    // Validated in config::Config::try_from.
                    if let Ok(v) = HeaderValue::from_str(v) {
                        security_headers.push((http::HeaderName::from_static(name), v));
                    }
                }
            };
            if h.content_type_options {
                add("x-content-type-options", &Some("nosniff".into()));
            }
            add("x-frame-options", &h.frame_options);
            add("referrer-policy", &h.referrer_policy);
            add("content-security-policy", &h.csp);
            let hsts = h
                .hsts
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok());
            let hold_responses = waf.response_body_can_intervene();
            let mut options = waf_core::host::HostOptions::default();
            options.trusted_proxies = config.trusted_proxies.clone();
            options.request_body_limit = usize::try_from(h.max_request_body).unwrap_or(usize::MAX);
            options.request_body_over_limit = waf_core::host::OverLimit::Reject;
            hosts.push(Host {
                config: h.clone(),
                label: h.names.first().cloned().unwrap_or_default(),
                waf,
                cert,
                security_headers,
                hsts,
                options,
                hold_responses,
            });
        }
        let mut upstreams = Vec::new();
        for (i, u) in config.upstreams.iter().enumerate() {
            let mut servers = Vec::new();
            for s in &u.servers {
                let (tls, hostport) = match s.strip_prefix("https://") {
                    Some(rest) => (true, rest),
                    None => (false, s.strip_prefix("http://").unwrap_or(s)),
                };
                match hostport.parse::<http::uri::Authority>() {
                    Ok(authority) => servers.push(Server {
                        authority,
                        tls,
                        active_down: std::sync::atomic::AtomicBool::new(false),
                        streak: std::sync::atomic::AtomicI64::new(0),
                        down_until_ms: AtomicU64::new(0),
                    }),
                    Err(e) => errors.push(format!("upstream[{i}].servers: {s:?}: {e}")),
                }
            }
            let tls = if servers.iter().any(|s| s.tls) {
                match crate::client::tls_connector(&u.tls) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        errors.push(format!("upstream[{i}].tls: {e}"));
                        None
                    }
                }
            } else {
                None
            };
            upstreams.push(Arc::new(Upstream {
                config: u.clone(),
                servers,
                tls,
                client_key: crate::client::ClientKey::of(u),
                next: AtomicUsize::new(0),
            }));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut exact = HashMap::new();
        let mut suffixes = Vec::new();
        let mut any = None;
        let mut default = None;
        for (i, h) in config.hosts.iter().enumerate() {
            if h.default {
                default = Some(i);
            }
            for n in &h.names {
                if n == "*" {
                    any.get_or_insert(i);
                } else if let Some(s) = n.strip_prefix("*.") {
                    suffixes.push((format!(".{s}"), i));
                } else {
                    exact.entry(n.clone()).or_insert(i);
                }
            }
        }
        Ok(State {
            config,
            hosts,
            upstreams,
            exact,
            suffixes,
            any,
            default,
        })
    }

    /// The host for `name` (lower-case, no port): exact name, then `*.suffix`, then `*`,
    /// then the default host.
    pub fn find_host(&self, name: Option<&str>) -> Option<usize> {
        if let Some(name) = name {
            if let Some(i) = self.exact.get(name) {
                return Some(*i);
            }
            if let Some((_, i)) = self
                .suffixes
                .iter()
                .find(|(s, _)| name.ends_with(s.as_str()))
            {
                return Some(*i);
            }
        }
        self.any.or(self.default)
    }
}

/// Compiles a host's WAF profile: the profile's own builder (so a host with exclusions
/// runs with exactly the engine settings of one without), then its exclusions as typed
/// [`waf_core::Exclusion`]s.
pub fn build_waf(w: &WafConfig) -> Result<Waf, waf_core::Error> {
    let mode = w.mode.engine_mode();
    let mut b = match &w.rules {
        WafRules::Default => profile::default_builder(mode),
        WafRules::Crs { dir, paranoia } => profile::crs_builder(dir, *paranoia, mode),
        WafRules::Files(files) => {
            let mut b = Waf::builder();
            for f in files {
                if f.contains(['*', '?', '[']) {
                    b = b.seclang_glob(f.clone());
                } else {
                    b = b.seclang_file(f.clone());
                }
            }
            b.seclang("mode", profile::engine_directive(mode))
        }
    };
    for e in &w.exclusions {
        let mut x = waf_core::Exclusion::rule_ids(e.rule_ids.iter().map(|&(a, b)| a..=b));
        if let Some(p) = &e.path_prefix {
            x = x.under_path(p.clone());
        }
        b = b.exclusion(x);
    }
    #[cfg(feature = "ml")]
    if let Some(model) = &w.ml {
        b = b.ml_model(model.clone());
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn state(hosts: &str) -> State {
        let text = format!(
            "[[upstream]]\nname='a'\nservers=['127.0.0.1:1','127.0.0.1:2','127.0.0.1:3']\nfail_timeout_ms=60000\n{hosts}"
        );
        let cfg = Config::parse(Path::new("t.toml"), &text).unwrap();
        State::build(cfg).unwrap()
    }

    #[test]
    fn hosts_match_exact_then_wildcard_then_default() {
        let s = state(
            "[[host]]\nnames=['a.test']\nupstream='a'\nwaf={mode='off'}\n\
             [[host]]\nnames=['*.b.test']\nupstream='a'\nwaf={mode='off'}\n\
             [[host]]\nnames=['c.test']\nupstream='a'\ndefault=true\nwaf={mode='off'}\n",
        );
        assert_eq!(s.find_host(Some("a.test")), Some(0));
        assert_eq!(s.find_host(Some("x.b.test")), Some(1));
        assert_eq!(
            s.find_host(Some("b.test")),
            Some(2),
            "*.b.test does not match b.test"
        );
        assert_eq!(s.find_host(Some("other")), Some(2));
        assert_eq!(s.find_host(None), Some(2));
        let s = state("[[host]]\nnames=['a.test']\nupstream='a'\nwaf={mode='off'}\n");
        assert_eq!(s.find_host(Some("other")), None);
    }

    /// Issue 11 item 7: a CRS host with exclusions used to be assembled from a second copy
    /// of CRS's engine settings, which had drifted (response body access, limits, JSON
    /// depth). Both now come from `profile::crs_builder`.
    #[test]
    fn crs_hosts_with_and_without_exclusions_run_the_same_engine_settings() {
        use crate::config::{Exclusion, WafMode};
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs"));
        assert!(
            dir.join("rules").is_dir(),
            "this test needs OWASP CRS at {}",
            dir.display()
        );
        let plain = WafConfig {
            mode: WafMode::Block,
            rules: WafRules::Crs {
                dir: dir.to_path_buf(),
                paranoia: 1,
            },
            exclusions: Vec::new(),
            #[cfg(feature = "ml")]
            ml: None,
        };
        let excluded = WafConfig {
            exclusions: vec![
                Exclusion {
                    rule_ids: vec![(942100, 942100)],
                    path_prefix: Some("/api/".into()),
                },
                Exclusion {
                    rule_ids: vec![(920350, 920350)],
                    path_prefix: None,
                },
            ],
            ..plain.clone()
        };
        let a = build_waf(&plain).unwrap();
        let b = build_waf(&excluded).unwrap();
        assert_eq!(a.engine_settings(), b.engine_settings());
        assert!(a.engine_settings().response_body_access);
        assert_eq!(a.rule_count(), b.rule_count() + 1, "920350 is removed");
        // The path exclusion holds under /api/ only.
        let verdict = |waf: &Waf, uri: &str| {
            let conn = waf_core::ConnectionInfo::new(
                "192.0.2.1:4000".parse().unwrap(),
                "127.0.0.1:80".parse().unwrap(),
            );
            let mut tx = waf.transaction(&conn, std::time::SystemTime::UNIX_EPOCH);
            let headers: [(&[u8], &[u8]); 2] =
                [(b"Host", b"example.com"), (b"User-Agent", b"curl/8")];
            let head = waf_core::RequestHead::new(b"GET", uri.as_bytes(), b"HTTP/1.1", &headers);
            let _ = tx.request_headers(&head);
            let _ = tx.request_end();
            tx.finish()
                .matched_rules
                .iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        };
        let sqli = "?id=1%27%20OR%201=1--";
        assert!(verdict(&b, &format!("/shop{sqli}")).contains(&942100));
        assert!(!verdict(&b, &format!("/api/x{sqli}")).contains(&942100));
        assert!(verdict(&a, &format!("/api/x{sqli}")).contains(&942100));
    }

    #[test]
    fn round_robin_skips_servers_marked_down() {
        let s = state("[[host]]\nnames=['*']\nupstream='a'\nwaf={mode='off'}\n");
        let u = &s.upstreams[0];
        let firsts: Vec<usize> = (0..6).map(|_| u.pick_order().next().unwrap()).collect();
        assert_eq!(firsts, vec![0, 1, 2, 0, 1, 2]);
        u.mark_down(1);
        assert!(u.is_down(1));
        let firsts: Vec<usize> = (0..4).map(|_| u.pick_order().next().unwrap()).collect();
        assert!(!firsts.contains(&1), "{firsts:?}");
        // A server that is down is still tried last, rather than failing outright.
        let order: Vec<usize> = u.pick_order().collect();
        assert_eq!(order.len(), 3);
        assert_eq!(order[2], 1);
    }
}
