//! The configuration file: TOML, read into raw serde types, then validated into [`Config`].
//!
//! Parse, don't validate (STYLE 27): [`RawConfig`] mirrors the file with
//! `deny_unknown_fields` and documented defaults; [`Config::try_from`] turns it into types
//! that cannot hold an invalid value (socket addresses parsed, upstream names resolved to
//! indices, modes as enums). Every problem found is reported, each with its location: the
//! file, line and column for syntax errors, the key path (`host[1].upstream`) for the rest.
//!
//! ```toml
//! [server]
//! listen = ["127.0.0.1:8080"]          # plain HTTP listeners (default shown)
//! listen_tls = ["127.0.0.1:8443"]      # HTTPS listeners (default: none)
//! workers = 0                          # runtimes, one per core when 0 (default)
//! header_read_timeout_ms = 10000       # slow request heads, and idle keep-alive
//!                                      # connections: closed after this (default)
//! body_read_timeout_ms = 30000         # slow bodies the WAF buffers: 408 (default)
//! max_request_head = 32768             # request line + headers, bytes: 431 past it
//! max_request_line = 8192              # request line, bytes: 414 past it
//! max_headers = 100                    # header fields: 431 past it
//! websocket_idle_timeout_ms = 300000   # an upgraded connection (WebSocket) with no byte
//!                                      # either way for this long is closed (default)
//! trusted_proxies = ["10.0.0.0/8"]     # peers whose X-Forwarded-For we believe (default: none)
//! reload_poll_ms = 1000                # check the file for changes; 0 = only SIGHUP
//! shutdown_timeout_ms = 10000          # SIGTERM: stop accepting, let requests finish
//!
//! [admin]
//! listen = "127.0.0.1:9901"            # /metrics and /healthz (default: off)
//!
//! [log]
//! access = "stdout"                    # "stdout", "off" or a file path (default "stdout")
//! audit = "off"                        # matched rules as JSON lines: "stdout", "off", path
//! queue = 8192                         # lines buffered before new ones are dropped
//!
//! [[upstream]]
//! name = "app"
//! servers = ["127.0.0.1:3000", "127.0.0.1:3001"]   # round robin
//! connect_timeout_ms = 2000            # then the next server, or 502
//! read_timeout_ms = 30000              # until the response head; then 504 (checked every 250 ms)
//! idle_timeout_ms = 60000              # pooled idle connections are closed after this
//! fail_timeout_ms = 10000              # a server that failed is skipped this long
//! max_idle_per_server = 64
//! # servers written "https://host:port" are reached over TLS, always verified:
//! tls = { ca = "ca.pem", server_name = "app.internal", cert = "client.pem", key = "client.key" }
//!                                      # ca defaults to the system bundle, server_name to
//!                                      # the server's host; cert/key only for mutual TLS
//! health = { path = "/healthz", interval_ms = 5000, timeout_ms = 2000, expect_status = 200,
//!            rise = 2, fall = 3 }      # active checks (default: none; passive always on)
//!
//! [[host]]
//! names = ["example.com", "*.example.com"]   # Host header and SNI; "*" matches any
//! upstream = "app"
//! default = true                       # answers requests for unknown names
//! tls = { cert = "example.pem", key = "example.key" }
//! waf = { mode = "block", rules = ["rules/*.conf"] }  # or crs = "/path/crs", paranoia = 2;
//!                                      # neither: the built-in default profile
//! limits = { max_request_body = 10485760, max_response_buffer = 1048576 }
//!                                      # max_response_buffer: response bytes held for
//!                                      # phase 4 when its rules can block (see proxy.rs)
//! headers = { hsts = "max-age=31536000", csp = "default-src 'self'" }
//! cookies = { secure = true, http_only = true, same_site = "Lax" }
//! forwarding = { x_forwarded = true, forwarded = true }
//!
//! [state]                              # share rate limits and bans with a fleet (default:
//!                                      # each process alone); see crate::fleet
//! redis = "redis://10.0.0.5:6379"      # or a list of cluster seed nodes
//! cluster = false                      # Redis Cluster
//! interval_ms = 100                    # reconcile every (10..=1000)
//! timeout_ms = 250                     # a round slower than this: Redis counts as down
//! cut_off = "local"                    # while Redis is down: "local" limits, or "share":
//! nodes = 3                            #   limit / nodes on each node (nodes: share only)
//! prefix = "waf"                       # of every Redis key
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use waf_core::host::TrustedProxies;

/// Default idle timeout of an upgraded (WebSocket) connection: 5 minutes.
pub const DEFAULT_WEBSOCKET_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Largest `max_request_head` accepted: hyper's read buffer must hold the head.
pub const MAX_REQUEST_HEAD_CAP: usize = 256 * 1024;
/// Largest `max_headers` accepted.
pub const MAX_HEADERS_CAP: usize = 1000;

/// Default plain HTTP listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default time a client has to send a complete request head (slowloris defence).
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Default longest wait for the next chunk of a request body the WAF buffers; then 408.
pub const DEFAULT_BODY_READ_TIMEOUT_MS: u64 = 30_000;
/// Default time in-flight requests get to finish on SIGTERM before the process exits.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 10_000;
/// Default interval at which the config file is checked for changes.
pub const DEFAULT_RELOAD_POLL_MS: u64 = 1_000;
/// Default number of log lines queued for the writer before lines are dropped (and
/// counted): bounds the memory the logs can hold to about this many lines.
pub const DEFAULT_LOG_QUEUE: usize = 8_192;
/// Default upstream connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Default time to wait for the upstream's response head before answering 504.
pub const DEFAULT_READ_TIMEOUT_MS: u64 = 30_000;
/// Default time a pooled upstream connection may stay idle.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Default time a failed upstream server is skipped (passive health).
pub const DEFAULT_FAIL_TIMEOUT_MS: u64 = 10_000;
/// Default number of idle pooled connections per upstream server and worker.
pub const DEFAULT_MAX_IDLE_PER_SERVER: usize = 64;
/// Default request body limit (10 MiB): larger bodies get 413. Bodies the WAF inspects are
/// buffered up to this size, so it is also the worst-case memory per request.
pub const DEFAULT_MAX_REQUEST_BODY: u64 = 10 * 1024 * 1024;
/// Default most response bytes held for phase 4 (1 MiB per request in flight).
pub const DEFAULT_MAX_RESPONSE_BUFFER: u64 = 1024 * 1024;
/// Default `Strict-Transport-Security` value, sent on HTTPS responses only.
pub const DEFAULT_HSTS: &str = "max-age=31536000";

// ---------------------------------------------------------------------------------------
// Raw: what the file says.

/// The file as written. Unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Listeners and connection settings.
    #[serde(default)]
    pub server: RawServer,
    /// The admin listener (metrics, health).
    #[serde(default)]
    pub admin: RawAdmin,
    /// Access and audit logs.
    #[serde(default)]
    pub log: RawLog,
    /// Upstream groups.
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<RawUpstream>,
    /// Virtual hosts.
    #[serde(default, rename = "host")]
    pub hosts: Vec<RawHost>,
    /// Named lists for policy rules, shared by all hosts (`crate::policy`).
    #[serde(default, rename = "list")]
    pub lists: Vec<waf_core::policy::ListConfig>,
    /// Country and ASN databases, shared by all hosts.
    #[serde(default)]
    pub geo: Option<waf_core::policy::GeoConfig>,
    /// Reputation lists, shared by all hosts.
    #[serde(default)]
    pub reputation: Vec<waf_core::policy::ReputationConfig>,
    /// Fleet state on Redis (`crate::fleet`).
    #[serde(default)]
    pub state: Option<crate::fleet::RawState>,
    /// The mail relay that sends sign-in codes (`[smtp]`, `crate::mail`).
    #[serde(default)]
    pub smtp: Option<crate::mail::RawSmtp>,
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawServer {
    /// Plain HTTP listen addresses (default `["127.0.0.1:8080"]`).
    pub listen: Vec<String>,
    /// HTTPS listen addresses (default none).
    pub listen_tls: Vec<String>,
    /// Worker runtimes; 0 = one per available core (default 0).
    pub workers: usize,
    /// Time a client has to send a complete request head, counted from the connection's
    /// start or the end of the previous response, in ms (default 10000). It also closes
    /// idle keep-alive connections.
    pub header_read_timeout_ms: u64,
    /// Longest wait for the next chunk of a buffered request body, in ms (default 30000).
    pub body_read_timeout_ms: u64,
    /// Longest request head (request line and headers) in bytes; 431 past it (default
    /// 32768, at most 262144).
    pub max_request_head: usize,
    /// Longest request line in bytes; 414 past it (default 8192).
    pub max_request_line: usize,
    /// Most header fields in a request; 431 past it (default 100, at most 1000).
    pub max_headers: usize,
    /// An upgraded connection (WebSocket) is closed after this long without a byte in
    /// either direction, in ms (default 300000).
    pub websocket_idle_timeout_ms: u64,
    /// Trusted proxy networks (CIDR or address; default none).
    pub trusted_proxies: Vec<String>,
    /// Config file poll interval in ms; 0 disables polling (default 1000).
    pub reload_poll_ms: u64,
    /// Drain time on SIGTERM, in ms (default 10000).
    pub shutdown_timeout_ms: u64,
}

impl Default for RawServer {
    fn default() -> Self {
        RawServer {
            listen: vec![DEFAULT_LISTEN.to_string()],
            listen_tls: Vec::new(),
            workers: 0,
            header_read_timeout_ms: DEFAULT_HEADER_READ_TIMEOUT_MS,
            body_read_timeout_ms: DEFAULT_BODY_READ_TIMEOUT_MS,
            max_request_head: crate::edge::DEFAULT_MAX_REQUEST_HEAD,
            max_request_line: crate::edge::DEFAULT_MAX_REQUEST_LINE,
            max_headers: crate::edge::DEFAULT_MAX_HEADERS,
            websocket_idle_timeout_ms: DEFAULT_WEBSOCKET_IDLE_TIMEOUT_MS,
            trusted_proxies: Vec::new(),
            reload_poll_ms: DEFAULT_RELOAD_POLL_MS,
            shutdown_timeout_ms: DEFAULT_SHUTDOWN_TIMEOUT_MS,
        }
    }
}

/// `[admin]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Admin listen address (default: no admin listener).
    pub listen: Option<String>,
}

/// `[log]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLog {
    /// `"stdout"`, `"off"` or a file path (default `"stdout"`).
    pub access: String,
    /// `"stdout"`, `"off"` or a file path (default `"off"`).
    pub audit: String,
    /// Queue length (default 8192).
    pub queue: usize,
}

impl Default for RawLog {
    fn default() -> Self {
        RawLog {
            access: "stdout".into(),
            audit: "off".into(),
            queue: DEFAULT_LOG_QUEUE,
        }
    }
}

/// `[[upstream]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// The name hosts refer to.
    pub name: String,
    /// `host:port` of each server (at least one).
    pub servers: Vec<String>,
    /// Connect timeout in ms (default 2000).
    #[serde(default = "d_connect")]
    pub connect_timeout_ms: u64,
    /// Response-head timeout in ms (default 30000).
    #[serde(default = "d_read")]
    pub read_timeout_ms: u64,
    /// Idle pooled connection timeout in ms (default 60000).
    #[serde(default = "d_idle")]
    pub idle_timeout_ms: u64,
    /// Passive health: how long a failed server is skipped, in ms (default 10000).
    #[serde(default = "d_fail")]
    pub fail_timeout_ms: u64,
    /// Idle connections kept per server and worker (default 64).
    #[serde(default = "d_max_idle")]
    pub max_idle_per_server: usize,
    /// TLS to the servers written `https://host:port` (default: the system's CA bundle,
    /// the server's own name, no client certificate).
    #[serde(default)]
    pub tls: Option<RawUpstreamTls>,
    /// Active health checks (default: none; passive checks always run).
    #[serde(default)]
    pub health: Option<RawHealth>,
}

/// `health = { path, interval_ms, timeout_ms, expect_status, rise, fall }`: every
/// `interval_ms` each server gets `GET path`; `fall` failures in a row (no answer within
/// `timeout_ms`, or another status than `expect_status`) take it out of rotation, `rise`
/// successes in a row put it back.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// The path to request (default `/`).
    #[serde(default = "d_health_path")]
    pub path: String,
    /// Time between checks of a server, in ms (default 5000).
    #[serde(default = "d_health_interval")]
    pub interval_ms: u64,
    /// Longest wait for the answer, in ms (default 2000).
    #[serde(default = "d_health_timeout")]
    pub timeout_ms: u64,
    /// The status a healthy server answers (default 200).
    #[serde(default = "d_health_status")]
    pub expect_status: u16,
    /// Successes in a row that bring a server back (default 2).
    #[serde(default = "d_health_rise")]
    pub rise: u32,
    /// Failures in a row that take a server out (default 3).
    #[serde(default = "d_health_fall")]
    pub fall: u32,
}

fn d_health_path() -> String {
    "/".into()
}
fn d_health_interval() -> u64 {
    5000
}
fn d_health_timeout() -> u64 {
    2000
}
fn d_health_status() -> u16 {
    200
}
fn d_health_rise() -> u32 {
    2
}
fn d_health_fall() -> u32 {
    3
}

/// An upstream's active health check, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// `GET` this path.
    pub path: http::uri::PathAndQuery,
    /// Between checks.
    pub interval: Duration,
    /// Answer timeout.
    pub timeout: Duration,
    /// Healthy status.
    pub expect_status: u16,
    /// Successes to come back.
    pub rise: u32,
    /// Failures to go out.
    pub fall: u32,
}

/// `tls = { ca, server_name, cert, key }` of an upstream. Certificates are always verified.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamTls {
    /// PEM bundle of the CAs to trust (default [`SYSTEM_CA_BUNDLE`]).
    pub ca: Option<PathBuf>,
    /// The name to send in SNI and to verify the certificate against (default: the
    /// server's host).
    pub server_name: Option<String>,
    /// PEM client certificate chain, for upstreams that require one (with `key`).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
}

/// Where the system's CA bundle is on Debian (`ca-certificates`).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn d_connect() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
}
fn d_read() -> u64 {
    DEFAULT_READ_TIMEOUT_MS
}
fn d_idle() -> u64 {
    DEFAULT_IDLE_TIMEOUT_MS
}
fn d_fail() -> u64 {
    DEFAULT_FAIL_TIMEOUT_MS
}
fn d_max_idle() -> usize {
    DEFAULT_MAX_IDLE_PER_SERVER
}
fn d_true() -> bool {
    true
}
fn d_paranoia() -> u8 {
    1
}
fn d_mode() -> String {
    "block".into()
}
fn d_body() -> u64 {
    DEFAULT_MAX_REQUEST_BODY
}
fn d_response_buffer() -> u64 {
    DEFAULT_MAX_RESPONSE_BUFFER
}
fn d_hsts() -> Option<String> {
    Some(DEFAULT_HSTS.into())
}
fn d_nosniff() -> bool {
    true
}
fn d_frame() -> Option<String> {
    Some("SAMEORIGIN".into())
}
fn d_referrer() -> Option<String> {
    Some("strict-origin-when-cross-origin".into())
}

/// `[[host]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    /// Names matched against Host and SNI: exact, `*.suffix`, or `*` for any.
    pub names: Vec<String>,
    /// The upstream's name.
    pub upstream: String,
    /// Serve requests whose name matches no host (at most one host; default false; when
    /// no host is default, such requests get 421).
    #[serde(default)]
    pub default: bool,
    /// Certificate and key for HTTPS (PEM files).
    pub tls: Option<RawTls>,
    /// The WAF profile.
    #[serde(default)]
    pub waf: RawWaf,
    /// Request limits.
    #[serde(default)]
    pub limits: RawLimits,
    /// Security headers added to responses.
    #[serde(default)]
    pub headers: RawHeaders,
    /// Set-Cookie hardening.
    #[serde(default)]
    pub cookies: RawCookies,
    /// Forwarding headers for the upstream.
    #[serde(default)]
    pub forwarding: RawForwarding,
    /// Policy rules (`[[host.rules]]`, `crate::policy`).
    #[serde(default)]
    pub rules: Vec<waf_core::policy::RuleConfig>,
    /// Rate limits (`[[host.rate_limit]]`).
    #[serde(default)]
    pub rate_limit: Vec<waf_core::policy::RateLimitConfig>,
    /// Bans (`[host.bans]`).
    #[serde(default)]
    pub bans: Option<waf_core::policy::BanConfig>,
    /// Behaviour scoring (`[host.scoring]`).
    #[serde(default)]
    pub scoring: Option<waf_core::policy::ScoringConfig>,
    /// Challenges, waiting rooms and sign-in (`[host.gates]`, `waf_core::policy::gate`).
    #[serde(default)]
    pub gates: Option<waf_core::policy::gate::GateConfig>,
}

/// `tls = { cert, key }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// `waf = { .. }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWaf {
    /// `"block"`, `"detect"` or `"off"` (default `"block"`).
    #[serde(default = "d_mode")]
    pub mode: String,
    /// SecLang rule files or globs (relative to the config file).
    #[serde(default)]
    pub rules: Vec<String>,
    /// An OWASP CRS directory.
    pub crs: Option<PathBuf>,
    /// CRS paranoia level 1..=4 (default 1).
    #[serde(default = "d_paranoia")]
    pub paranoia: u8,
    /// Rules switched off, optionally only under a path prefix.
    #[serde(default)]
    pub exclusions: Vec<RawExclusion>,
    /// The ML detector (detect mode: a score for rules, logs and metrics): `"off"` (the
    /// default), `"default"` (the model built into the binary) or the path of an `.onnx`
    /// model (relative to the config file). Needs the `ml` cargo feature (on by default).
    #[serde(default)]
    pub ml: Option<String>,
}

impl Default for RawWaf {
    fn default() -> Self {
        RawWaf {
            mode: d_mode(),
            rules: Vec::new(),
            crs: None,
            paranoia: 1,
            exclusions: Vec::new(),
            ml: None,
        }
    }
}

/// One exclusion: `{ rule_ids = [942100, "942000-942999"], path_prefix = "/api/" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExclusion {
    /// Rule ids (numbers) or ranges (`"FROM-TO"` strings) to switch off.
    pub rule_ids: Vec<RawRuleId>,
    /// Only for request paths starting with this (default: everywhere).
    pub path_prefix: Option<String>,
}

/// A rule id or a range of ids as written.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawRuleId {
    /// One id.
    Id(u64),
    /// `"FROM-TO"`, inclusive.
    Range(String),
}

/// `limits = { .. }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Largest request body in bytes (default 10 MiB); larger gets 413.
    #[serde(default = "d_body")]
    pub max_request_body: u64,
    /// Most response bytes held back so that phase 4 can still replace the response, when
    /// the host's rules can block in phase 4 and the response's type is inspected (default
    /// 1 MiB). A longer body streams: what was held is sent, the rest follows, and phase 4
    /// can then only log.
    #[serde(default = "d_response_buffer")]
    pub max_response_buffer: u64,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            max_request_body: DEFAULT_MAX_REQUEST_BODY,
            max_response_buffer: DEFAULT_MAX_RESPONSE_BUFFER,
        }
    }
}

/// `headers = { .. }`: each `None`/`false` switches that header off.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeaders {
    /// `Strict-Transport-Security` on HTTPS responses (default `max-age=31536000`).
    #[serde(default = "d_hsts")]
    pub hsts: Option<String>,
    /// `X-Content-Type-Options: nosniff` (default true).
    #[serde(default = "d_nosniff")]
    pub content_type_options: bool,
    /// `X-Frame-Options` (default `SAMEORIGIN`; `""` switches it off).
    #[serde(default = "d_frame")]
    pub frame_options: Option<String>,
    /// `Referrer-Policy` (default `strict-origin-when-cross-origin`; `""` = off).
    #[serde(default = "d_referrer")]
    pub referrer_policy: Option<String>,
    /// `Content-Security-Policy` (default none).
    pub csp: Option<String>,
}

impl Default for RawHeaders {
    fn default() -> Self {
        RawHeaders {
            hsts: d_hsts(),
            content_type_options: true,
            frame_options: d_frame(),
            referrer_policy: d_referrer(),
            csp: None,
        }
    }
}

/// `cookies = { .. }`: attributes added to every upstream `Set-Cookie` lacking them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCookies {
    /// Add `Secure` (on HTTPS responses only; default false).
    #[serde(default)]
    pub secure: bool,
    /// Add `HttpOnly` (default false).
    #[serde(default)]
    pub http_only: bool,
    /// Add `SameSite=` this: `"Strict"`, `"Lax"` or `"None"` (default none).
    pub same_site: Option<String>,
}

/// `forwarding = { .. }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawForwarding {
    /// Set `X-Forwarded-For`, `-Proto`, `-Host` (default true).
    #[serde(default = "d_true")]
    pub x_forwarded: bool,
    /// Set `Forwarded` (RFC 7239; default true).
    #[serde(default = "d_true")]
    pub forwarded: bool,
}

impl Default for RawForwarding {
    fn default() -> Self {
        RawForwarding {
            x_forwarded: true,
            forwarded: true,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Validated.

/// A config problem and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// `file:line:column` or `file: key.path`.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// All the problems of one file.
#[derive(Debug, Clone)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A validated config.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from (for relative paths and messages).
    pub path: PathBuf,
    /// Plain listeners.
    pub listen: Vec<SocketAddr>,
    /// TLS listeners.
    pub listen_tls: Vec<SocketAddr>,
    /// Worker runtimes (resolved: never 0).
    pub workers: usize,
    /// Header read timeout.
    pub header_read_timeout: Duration,
    /// Body chunk timeout (buffered bodies).
    pub body_read_timeout: Duration,
    /// Request head limits (the HTTP/1 edge).
    pub head_limits: crate::edge::HeadLimits,
    /// Idle timeout of upgraded connections.
    pub websocket_idle_timeout: Duration,
    /// Trusted proxies.
    pub trusted_proxies: TrustedProxies,
    /// File poll interval; `None` = SIGHUP only.
    pub reload_poll: Option<Duration>,
    /// Drain time on SIGTERM.
    pub shutdown_timeout: Duration,
    /// Admin listener.
    pub admin: Option<SocketAddr>,
    /// Access log target.
    pub access_log: LogTarget,
    /// Audit log target.
    pub audit_log: LogTarget,
    /// Log queue length.
    pub log_queue: usize,
    /// Upstreams.
    pub upstreams: Vec<UpstreamConfig>,
    /// Hosts.
    pub hosts: Vec<HostConfig>,
    /// Rate limits and bans shared with a fleet through Redis (`[state]`), if configured.
    pub state: Option<waf_redis::FleetConfig>,
    /// The mail relay for sign-in codes.
    pub smtp: Option<crate::mail::Smtp>,
}

/// Where log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// Nowhere.
    Off,
    /// Standard output.
    Stdout,
    /// Appended to this file.
    File(PathBuf),
}

/// A validated upstream group.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Its name.
    pub name: String,
    /// Server addresses, as written (`host:port`), resolved at connect time.
    pub servers: Vec<String>,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Response-head timeout.
    pub read_timeout: Duration,
    /// Idle pooled connection timeout.
    pub idle_timeout: Duration,
    /// Passive health timeout.
    pub fail_timeout: Duration,
    /// Idle connections per server and worker.
    pub max_idle_per_server: usize,
    /// TLS settings, used for the `https://` servers.
    pub tls: UpstreamTls,
    /// Active health check, if configured.
    pub health: Option<HealthCheck>,
}

/// An upstream's TLS settings, validated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// The CA bundle to trust.
    pub ca: PathBuf,
    /// SNI and verification name; `None`: the server's host.
    pub server_name: Option<String>,
    /// Client certificate chain and key.
    pub client: Option<(PathBuf, PathBuf)>,
}

/// WAF mode of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WafMode {
    /// Interventions are carried out.
    Block,
    /// Rules run and are logged; nothing is blocked.
    Detect,
    /// No rule runs.
    Off,
}

impl WafMode {
    /// The engine mode.
    pub fn engine_mode(self) -> waf_core::EngineMode {
        match self {
            WafMode::Block => waf_core::EngineMode::On,
            WafMode::Detect => waf_core::EngineMode::DetectionOnly,
            WafMode::Off => waf_core::EngineMode::Off,
        }
    }
}

/// Which rules a host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WafRules {
    /// The built-in default profile.
    Default,
    /// SecLang files (paths or globs, resolved against the config's directory).
    Files(Vec<String>),
    /// OWASP CRS from a directory, at a paranoia level.
    Crs {
        /// The CRS directory.
        dir: PathBuf,
        /// 1..=4.
        paranoia: u8,
    },
}

/// A validated WAF profile.
#[derive(Debug, Clone)]
pub struct WafConfig {
    /// Mode.
    pub mode: WafMode,
    /// Rules.
    pub rules: WafRules,
    /// Exclusions.
    pub exclusions: Vec<Exclusion>,
    /// The ML detector's model, loaded and checked when the config is; `None` = off.
    #[cfg(feature = "ml")]
    pub ml: Option<waf_core::ml::Model>,
}

/// A validated exclusion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    /// Inclusive rule id ranges (`(id, id)` for one rule).
    pub rule_ids: Vec<(u64, u64)>,
    /// Only under this request path prefix; `None` = everywhere.
    pub path_prefix: Option<String>,
}

/// A validated `SameSite` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    /// `Strict`.
    Strict,
    /// `Lax`.
    Lax,
    /// `None`.
    None,
}

impl SameSite {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            SameSite::Strict => "Strict",
            SameSite::Lax => "Lax",
            SameSite::None => "None",
        }
    }
}

/// A validated host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Lower-cased names.
    pub names: Vec<String>,
    /// Index into [`Config::upstreams`].
    pub upstream: usize,
    /// The default host.
    pub default: bool,
    /// `(cert, key)` paths, resolved.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// WAF profile.
    pub waf: WafConfig,
    /// Request body limit.
    pub max_request_body: u64,
    /// Response bytes held for a blocking phase 4.
    pub max_response_buffer: u64,
    /// HSTS value.
    pub hsts: Option<String>,
    /// nosniff.
    pub content_type_options: bool,
    /// X-Frame-Options.
    pub frame_options: Option<String>,
    /// Referrer-Policy.
    pub referrer_policy: Option<String>,
    /// CSP.
    pub csp: Option<String>,
    /// Cookie: Secure.
    pub cookie_secure: bool,
    /// Cookie: HttpOnly.
    pub cookie_http_only: bool,
    /// Cookie: SameSite.
    pub cookie_same_site: Option<SameSite>,
    /// X-Forwarded-*.
    pub x_forwarded: bool,
    /// Forwarded.
    pub forwarded: bool,
    /// The native policy (rules, lists, rate limits, bans), if the host has one.
    pub policy: Option<waf_core::policy::PolicyConfig>,
}

impl Config {
    /// Reads and validates the file at `path`, returning every problem found.
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError {
                location: path.display().to_string(),
                message: format!("cannot read: {e}"),
            }])
        })?;
        Config::parse(path, &text)
    }

    /// Validates `text` as if read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigErrors> {
        let mut raw: RawConfig = toml::from_str(text).map_err(|e| {
            let location = match e.span() {
                Some(span) => {
                    let (line, col) = line_col(text, span.start);
                    format!("{}:{line}:{col}", path.display())
                }
                None => path.display().to_string(),
            };
            ConfigErrors(vec![ConfigError {
                location,
                message: e.message().to_string(),
            }])
        })?;
        let state = raw.state.take();
        let shares = raw.hosts.iter().any(|h| {
            !h.rate_limit.is_empty()
                || h.bans.is_some()
                || h.gates
                    .as_ref()
                    .is_some_and(|g| !g.waiting_rooms.is_empty() || g.sign_in.is_some())
        });
        let fleet = crate::fleet::validate(path, text, state, shares);
        let mut config = Config::try_from((path, raw)).map_err(|mut e| {
            crate::policy::locate_in_file(path, text, &mut e);
            if let Err(f) = &fleet {
                e.0.extend(f.iter().cloned());
            }
            e
        })?;
        config.state = fleet.map_err(ConfigErrors)?;
        Ok(config)
    }
}

pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Errors<'a> {
    file: &'a Path,
    list: Vec<ConfigError>,
}

impl Errors<'_> {
    fn push(&mut self, key: impl fmt::Display, message: impl Into<String>) {
        self.list.push(ConfigError {
            location: format!("{}: {key}", self.file.display()),
            message: message.into(),
        });
    }
}

fn parse_addr(errs: &mut Errors<'_>, key: &str, s: &str) -> Option<SocketAddr> {
    match s.parse() {
        Ok(a) => Some(a),
        Err(_) => {
            errs.push(key, format!("{s:?} is not an IP:port address"));
            None
        }
    }
}

fn parse_target(errs: &mut Errors<'_>, key: &str, s: &str, base: &Path) -> LogTarget {
    match s {
        "off" => LogTarget::Off,
        "stdout" => LogTarget::Stdout,
        "" => {
            errs.push(key, "empty; use \"off\", \"stdout\" or a path");
            LogTarget::Off
        }
        p => LogTarget::File(base.join(p)),
    }
}

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// `[hosts.waf] ml`: loads and checks the model now, so a bad one fails the config with
/// its key (a reload keeps the old config).
#[cfg(feature = "ml")]
fn ml_model(
    errs: &mut Errors<'_>,
    key: &str,
    v: Option<&str>,
    base: &Path,
) -> Option<waf_core::ml::Model> {
    let loaded = match v? {
        "off" => return None,
        "default" => waf_core::ml::Model::default_model(),
        path => waf_core::ml::Model::from_file(base.join(path)),
    };
    loaded.map_err(|e| errs.push(key, e.to_string())).ok()
}

/// `[hosts.waf] ml` in a build without the `ml` feature: anything but `"off"` is an error,
/// not a setting silently ignored.
#[cfg(not(feature = "ml"))]
fn ml_model(errs: &mut Errors<'_>, key: &str, v: Option<&str>, _base: &Path) {
    if let Some(v) = v.filter(|v| *v != "off") {
        errs.push(
            key,
            format!("{v:?}: this waf-proxy was built without the `ml` feature"),
        );
    }
}

fn header_value_ok(errs: &mut Errors<'_>, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        if http::HeaderValue::from_str(v).is_err() {
            errs.push(key, format!("{v:?} is not a valid header value"));
        }
    }
}

impl TryFrom<(&Path, RawConfig)> for Config {
    type Error = ConfigErrors;

    fn try_from((path, raw): (&Path, RawConfig)) -> Result<Config, ConfigErrors> {
        let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut errs = Errors {
            file: path,
            list: Vec::new(),
        };
        let s = raw.server;
        let listen: Vec<SocketAddr> = s
            .listen
            .iter()
            .enumerate()
            .filter_map(|(i, a)| parse_addr(&mut errs, &format!("server.listen[{i}]"), a))
            .collect();
        let listen_tls: Vec<SocketAddr> = s
            .listen_tls
            .iter()
            .enumerate()
            .filter_map(|(i, a)| parse_addr(&mut errs, &format!("server.listen_tls[{i}]"), a))
            .collect();
        if s.listen.is_empty() && s.listen_tls.is_empty() {
            errs.push("server", "no listener: set listen or listen_tls");
        }
        if s.header_read_timeout_ms == 0 {
            errs.push("server.header_read_timeout_ms", "must be > 0");
        }
        if s.body_read_timeout_ms == 0 {
            errs.push("server.body_read_timeout_ms", "must be > 0");
        }
        if s.websocket_idle_timeout_ms == 0 {
            errs.push("server.websocket_idle_timeout_ms", "must be > 0");
        }
        if !(1024..=MAX_REQUEST_HEAD_CAP).contains(&s.max_request_head) {
            errs.push(
                "server.max_request_head",
                format!("must be 1024..={MAX_REQUEST_HEAD_CAP}"),
            );
        }
        if s.max_request_line < 64 || s.max_request_line > s.max_request_head {
            errs.push(
                "server.max_request_line",
                "must be at least 64 and at most max_request_head",
            );
        }
        if !(1..=MAX_HEADERS_CAP).contains(&s.max_headers) {
            errs.push(
                "server.max_headers",
                format!("must be 1..={MAX_HEADERS_CAP}"),
            );
        }
        for (i, p) in s.trusted_proxies.iter().enumerate() {
            if let Err(e) = TrustedProxies::from_entries([p]) {
                errs.push(format!("server.trusted_proxies[{i}]"), e.to_string());
            }
        }
        let trusted_proxies = TrustedProxies::from_entries(&s.trusted_proxies)
            .unwrap_or_else(|_| TrustedProxies::none());
        let workers = if s.workers == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            s.workers
        };
        let admin = raw
            .admin
            .listen
            .as_deref()
            .and_then(|a| parse_addr(&mut errs, "admin.listen", a));
        let access_log = parse_target(&mut errs, "log.access", &raw.log.access, &base);
        let audit_log = parse_target(&mut errs, "log.audit", &raw.log.audit, &base);
        if raw.log.queue == 0 {
            errs.push("log.queue", "must be > 0");
        }

        let mut upstreams = Vec::new();
        for (i, u) in raw.upstreams.into_iter().enumerate() {
            let key = format!("upstream[{i}]");
            if u.name.is_empty() {
                errs.push(format!("{key}.name"), "empty");
            }
            if upstreams.iter().any(|x: &UpstreamConfig| x.name == u.name) {
                errs.push(
                    format!("{key}.name"),
                    format!("duplicate upstream {:?}", u.name),
                );
            }
            if u.servers.is_empty() {
                errs.push(format!("{key}.servers"), "needs at least one server");
            }
            for (j, srv) in u.servers.iter().enumerate() {
                let srv = srv
                    .strip_prefix("https://")
                    .or_else(|| srv.strip_prefix("http://"))
                    .unwrap_or(srv);
                let ok = srv
                    .rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
                if !ok {
                    errs.push(
                        format!("{key}.servers[{j}]"),
                        format!("{srv:?} is not host:port"),
                    );
                }
            }
            for (name, v) in [
                ("connect_timeout_ms", u.connect_timeout_ms),
                ("read_timeout_ms", u.read_timeout_ms),
                ("idle_timeout_ms", u.idle_timeout_ms),
            ] {
                if v == 0 {
                    errs.push(format!("{key}.{name}"), "must be > 0");
                }
            }
            let raw_tls = u.tls.unwrap_or(RawUpstreamTls {
                ca: None,
                server_name: None,
                cert: None,
                key: None,
            });
            let client = match (raw_tls.cert, raw_tls.key) {
                (Some(c), Some(k)) => Some((base.join(c), base.join(k))),
                (None, None) => None,
                _ => {
                    errs.push(format!("{key}.tls"), "cert and key go together");
                    None
                }
            };
            if let Some(n) = &raw_tls.server_name {
                if rustls::pki_types::ServerName::try_from(n.as_str()).is_err() {
                    errs.push(
                        format!("{key}.tls.server_name"),
                        format!("{n:?} is not a DNS name or IP address"),
                    );
                }
            }
            let tls = UpstreamTls {
                ca: raw_tls
                    .ca
                    .map_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE), |c| base.join(c)),
                server_name: raw_tls.server_name,
                client,
            };
            let health = u.health.and_then(|h| {
                let k = format!("{key}.health");
                let path = match h.path.parse::<http::uri::PathAndQuery>() {
                    Ok(p) if h.path.starts_with('/') => Some(p),
                    _ => {
                        errs.push(format!("{k}.path"), format!("{:?} is not a path", h.path));
                        None
                    }
                };
                if h.interval_ms == 0 || h.timeout_ms == 0 {
                    errs.push(k.clone(), "interval_ms and timeout_ms must be > 0");
                }
                if h.rise == 0 || h.fall == 0 {
                    errs.push(k.clone(), "rise and fall must be > 0");
                }
                if !(100..=599).contains(&h.expect_status) {
                    errs.push(format!("{k}.expect_status"), "must be 100..=599");
                }
                Some(HealthCheck {
                    path: path?,
                    interval: Duration::from_millis(h.interval_ms),
                    timeout: Duration::from_millis(h.timeout_ms),
                    expect_status: h.expect_status,
                    rise: h.rise,
                    fall: h.fall,
                })
            });
            upstreams.push(UpstreamConfig {
                health,
                tls,
                name: u.name,
                servers: u.servers,
                connect_timeout: Duration::from_millis(u.connect_timeout_ms),
                read_timeout: Duration::from_millis(u.read_timeout_ms),
                idle_timeout: Duration::from_millis(u.idle_timeout_ms),
                fail_timeout: Duration::from_millis(u.fail_timeout_ms),
                max_idle_per_server: u.max_idle_per_server,
            });
        }

        let mut hosts = Vec::new();
        if raw.hosts.is_empty() {
            errs.push("host", "no [[host]]");
        }
        let mut defaults = 0;
        let shared_policy =
            crate::policy::SharedPolicy::new(raw.lists, raw.geo, raw.reputation, &base);
        let smtp = raw
            .smtp
            .map(|r| crate::mail::Smtp::try_from(r).map_err(|e| errs.push("smtp", e)))
            .and_then(Result::ok);
        for (i, h) in raw.hosts.into_iter().enumerate() {
            let key = format!("host[{i}]");
            if h.gates.as_ref().is_some_and(|g| g.sign_in.is_some()) && smtp.is_none() {
                errs.push(
                    format!("{key}.gates.sign_in"),
                    "sign-in sends codes by mail: add an [smtp] section",
                );
            }
            let policy = crate::policy::host_policy(
                &shared_policy,
                h.rules,
                h.rate_limit,
                h.bans,
                h.scoring,
                h.gates,
                &base,
            )
            .unwrap_or_else(|e| {
                errs.push(format!("{key}.policy"), e);
                None
            });
            if h.names.is_empty() {
                errs.push(format!("{key}.names"), "needs at least one name");
            }
            let upstream = match upstreams.iter().position(|u| u.name == h.upstream) {
                Some(u) => u,
                None => {
                    errs.push(
                        format!("{key}.upstream"),
                        format!("unknown upstream {:?}", h.upstream),
                    );
                    0
                }
            };
            if h.default {
                defaults += 1;
            }
            let tls = h.tls.map(|t| (base.join(t.cert), base.join(t.key)));
            if let Some((c, k)) = &tls {
                for (name, p) in [("cert", c), ("key", k)] {
                    if !p.is_file() {
                        errs.push(
                            format!("{key}.tls.{name}"),
                            format!("{} is not a readable file", p.display()),
                        );
                    }
                }
            }
            let mode = match h.waf.mode.as_str() {
                "block" => WafMode::Block,
                "detect" => WafMode::Detect,
                "off" => WafMode::Off,
                m => {
                    errs.push(
                        format!("{key}.waf.mode"),
                        format!("{m:?}: expected \"block\", \"detect\" or \"off\""),
                    );
                    WafMode::Block
                }
            };
            if !(1..=4).contains(&h.waf.paranoia) {
                errs.push(
                    format!("{key}.waf.paranoia"),
                    format!("{}: expected 1 to 4", h.waf.paranoia),
                );
            }
            let rules = match (h.waf.crs, h.waf.rules.is_empty()) {
                (Some(_), false) => {
                    errs.push(format!("{key}.waf"), "set either rules or crs, not both");
                    WafRules::Default
                }
                (Some(dir), true) => {
                    let dir = base.join(dir);
                    if !dir.join("rules").is_dir() {
                        errs.push(
                            format!("{key}.waf.crs"),
                            format!("{} has no rules/ directory", dir.display()),
                        );
                    }
                    WafRules::Crs {
                        dir,
                        paranoia: h.waf.paranoia,
                    }
                }
                (None, false) => WafRules::Files(
                    h.waf
                        .rules
                        .iter()
                        .map(|r| base.join(r).to_string_lossy().into_owned())
                        .collect(),
                ),
                (None, true) => WafRules::Default,
            };
            let mut exclusions = Vec::new();
            for (j, e) in h.waf.exclusions.into_iter().enumerate() {
                if e.rule_ids.is_empty() {
                    errs.push(format!("{key}.waf.exclusions[{j}].rule_ids"), "empty");
                }
                if let Some(p) = &e.path_prefix {
                    if !p.starts_with('/') || p.contains(['"', '\'', '\\', ' ']) {
                        errs.push(
                            format!("{key}.waf.exclusions[{j}].path_prefix"),
                            format!("{p:?}: must start with / and hold no quotes or spaces"),
                        );
                    }
                }
                let mut ids = Vec::new();
                for (k, r) in e.rule_ids.iter().enumerate() {
                    let range = match r {
                        RawRuleId::Id(id) => Some((*id, *id)),
                        RawRuleId::Range(s) => s.split_once('-').and_then(|(a, b)| {
                            let (a, b) =
                                (a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?);
                            (a <= b).then_some((a, b))
                        }),
                    };
                    match range {
                        Some(r) if r.0 > 0 => ids.push(r),
                        _ => errs.push(
                            format!("{key}.waf.exclusions[{j}].rule_ids[{k}]"),
                            "expected a rule id > 0 or a range \"FROM-TO\"",
                        ),
                    }
                }
                exclusions.push(Exclusion {
                    rule_ids: ids,
                    path_prefix: e.path_prefix,
                });
            }
            #[cfg_attr(not(feature = "ml"), allow(clippy::let_unit_value, unused_variables))]
            let ml = ml_model(
                &mut errs,
                &format!("{key}.waf.ml"),
                h.waf.ml.as_deref(),
                &base,
            );
            let hd = h.headers;
            header_value_ok(&mut errs, &format!("{key}.headers.hsts"), &hd.hsts);
            header_value_ok(
                &mut errs,
                &format!("{key}.headers.frame_options"),
                &hd.frame_options,
            );
            header_value_ok(
                &mut errs,
                &format!("{key}.headers.referrer_policy"),
                &hd.referrer_policy,
            );
            header_value_ok(&mut errs, &format!("{key}.headers.csp"), &hd.csp);
            let same_site = match h.cookies.same_site.as_deref() {
                None => None,
                Some(s) if s.eq_ignore_ascii_case("strict") => Some(SameSite::Strict),
                Some(s) if s.eq_ignore_ascii_case("lax") => Some(SameSite::Lax),
                Some(s) if s.eq_ignore_ascii_case("none") => Some(SameSite::None),
                Some(s) => {
                    errs.push(
                        format!("{key}.cookies.same_site"),
                        format!("{s:?}: expected \"Strict\", \"Lax\" or \"None\""),
                    );
                    None
                }
            };
            hosts.push(HostConfig {
                names: h.names.iter().map(|n| n.to_ascii_lowercase()).collect(),
                upstream,
                default: h.default,
                tls,
                waf: WafConfig {
                    mode,
                    rules,
                    exclusions,
                    #[cfg(feature = "ml")]
                    ml,
                },
                max_request_body: h.limits.max_request_body,
                max_response_buffer: h.limits.max_response_buffer,
                hsts: nonempty(hd.hsts),
                content_type_options: hd.content_type_options,
                frame_options: nonempty(hd.frame_options),
                referrer_policy: nonempty(hd.referrer_policy),
                csp: nonempty(hd.csp),
                cookie_secure: h.cookies.secure,
                cookie_http_only: h.cookies.http_only,
                cookie_same_site: same_site,
                x_forwarded: h.forwarding.x_forwarded,
                forwarded: h.forwarding.forwarded,
                policy,
            });
        }
        if defaults > 1 {
            errs.push(
                "host",
                format!("{defaults} hosts have default = true; at most one may"),
            );
        }
        if !listen_tls.is_empty() && !hosts.iter().any(|h| h.tls.is_some()) {
            errs.push("server.listen_tls", "no host has tls = { cert, key }");
        }
        if !errs.list.is_empty() {
            return Err(ConfigErrors(errs.list));
        }
        Ok(Config {
            path: path.to_path_buf(),
            listen,
            listen_tls,
            workers,
            header_read_timeout: Duration::from_millis(s.header_read_timeout_ms),
            body_read_timeout: Duration::from_millis(s.body_read_timeout_ms),
            websocket_idle_timeout: Duration::from_millis(s.websocket_idle_timeout_ms),
            head_limits: crate::edge::HeadLimits {
                max_head: s.max_request_head,
                max_line: s.max_request_line,
                max_headers: s.max_headers,
            },
            trusted_proxies,
            reload_poll: (s.reload_poll_ms > 0).then(|| Duration::from_millis(s.reload_poll_ms)),
            shutdown_timeout: Duration::from_millis(s.shutdown_timeout_ms),
            admin,
            access_log,
            audit_log,
            log_queue: raw.log.queue,
            upstreams,
            hosts,
            state: None,
            smtp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigErrors> {
        Config::parse(Path::new("t.toml"), text)
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = parse(
            "[[upstream]]\nname='a'\nservers=['127.0.0.1:1']\n[[host]]\nnames=['*']\nupstream='a'\n",
        )
        .unwrap();
        assert_eq!(c.listen, vec!["127.0.0.1:8080".parse().unwrap()]);
        assert_eq!(c.hosts[0].waf.rules, WafRules::Default);
        assert_eq!(c.hosts[0].waf.mode, WafMode::Block);
        assert_eq!(c.hosts[0].max_request_body, DEFAULT_MAX_REQUEST_BODY);
        assert_eq!(c.access_log, LogTarget::Stdout);
    }

    #[test]
    fn unknown_key_has_line_and_column() {
        let e = parse("[server]\nlisten = []\nbogus = 1\n").unwrap_err();
        assert_eq!(e.0.len(), 1);
        assert!(e.0[0].location.starts_with("t.toml:3:"), "{}", e);
        assert!(e.0[0].message.contains("bogus"), "{}", e);
    }

    #[test]
    fn every_semantic_error_is_reported_with_its_key() {
        let e = parse(
            "[server]\nlisten=['nope']\n[[upstream]]\nname='a'\nservers=['x']\n\
             [[host]]\nnames=['a']\nupstream='b'\nwaf={mode='loud', paranoia=7}\n",
        )
        .unwrap_err();
        let text = e.to_string();
        for needle in [
            "server.listen[0]",
            "upstream[0].servers[0]",
            "host[0].upstream",
            "host[0].waf.mode",
            "host[0].waf.paranoia",
        ] {
            assert!(text.contains(needle), "{needle} missing in:\n{text}");
        }
    }
}
