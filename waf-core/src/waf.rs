//! [`Waf`]: a compiled rule set, and [`WafBuilder`], which makes one.

use crate::compile::ScanBackend;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use crate::compile::{self, LimitAction, Program};
use crate::error::{Error, ErrorKind, Warning};
use crate::eval::Runtime;
use crate::exclusion::Exclusion;
use crate::policy::{self, Policy, PolicyConfig, PolicyCounter, PolicyError};
use crate::seclang;
use crate::transaction::{ConnectionInfo, Transaction};

/// The rule engine mode (`SecRuleEngine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineMode {
    /// Rules run and disruptive actions are carried out.
    On,
    /// Rules run and are reported; nothing is blocked.
    DetectionOnly,
    /// No rule runs.
    #[default]
    Off,
}

/// The engine settings a [`Waf`] runs with: what its `Sec*` directives set, with
/// ModSecurity's defaults for the rest. Hosts read the body limits from here; two rule sets
/// meant to behave alike can be compared.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineSettings {
    /// `SecRuleEngine`.
    pub mode: EngineMode,
    /// `SecRequestBodyAccess`.
    pub request_body_access: bool,
    /// `SecRequestBodyLimit`, bytes.
    pub request_body_limit: usize,
    /// `SecRequestBodyNoFilesLimit`, bytes.
    pub request_body_no_files_limit: usize,
    /// `SecRequestBodyLimitAction`.
    pub request_body_limit_action: LimitAction,
    /// `SecResponseBodyAccess`.
    pub response_body_access: bool,
    /// `SecResponseBodyLimit`, bytes.
    pub response_body_limit: usize,
    /// `SecResponseBodyLimitAction`.
    pub response_body_limit_action: LimitAction,
    /// `SecResponseBodyMimeType`, lower-cased.
    pub response_body_mime_types: Vec<String>,
    /// `SecRequestBodyJsonDepthLimit`.
    pub json_depth_limit: usize,
    /// `SecArgumentsLimit`.
    pub arguments_limit: usize,
}

/// A compiled rule set: immutable, `Send + Sync`, cheap to clone (an `Arc`).
///
/// Build one with [`Waf::builder`], then start a [`Transaction`] per request. To reload
/// rules, build a new `Waf` and swap it in; transactions in flight keep the old one.
#[derive(Clone, Debug)]
pub struct Waf {
    /// What the rules say: immutable once built.
    pub(crate) program: Arc<Program>,
    /// What its transactions share at run time (collections, recycled tables).
    pub(crate) runtime: Arc<Runtime>,
    /// The native policy, compiled beside the program; its state store inside.
    pub(crate) policy: Arc<Policy>,
    /// The ML detector's model ([`crate::ml`]), if one was configured.
    #[cfg(feature = "ml")]
    pub(crate) ml: Option<crate::ml::Model>,
}

impl Waf {
    /// Starts a builder.
    pub fn builder() -> WafBuilder {
        WafBuilder::default()
    }

    /// Starts a transaction for one request. `now` is the time the request arrived; the
    /// engine never reads a clock.
    pub fn transaction(&self, conn: &ConnectionInfo, now: SystemTime) -> Transaction {
        Transaction::new(self.clone(), conn, now, None)
    }

    /// Starts a transaction whose `UNIQUE_ID` is `id` (for example an `X-Request-Id` set by
    /// a trusted proxy) instead of one the engine makes up.
    pub fn transaction_with_id(
        &self,
        conn: &ConnectionInfo,
        now: SystemTime,
        id: &str,
    ) -> Transaction {
        Transaction::new(self.clone(), conn, now, Some(id))
    }

    /// Benchmarks only: drops the recycled tables this `Waf` keeps for its next
    /// transactions, so that the next one starts from empty containers (the allocation
    /// benchmark's "from empty" column).
    #[doc(hidden)]
    pub fn internal_empty_table_pool(&self) {
        self.runtime.pool.empty();
    }

    /// Load warnings: things that loaded but are probably mistakes.
    pub fn warnings(&self) -> &[Warning] {
        &self.program.warnings
    }

    /// The configured engine mode (`SecRuleEngine`).
    pub fn engine_mode(&self) -> EngineMode {
        self.program.config.engine_mode
    }

    /// The engine settings in force.
    pub fn engine_settings(&self) -> EngineSettings {
        let c = &self.program.config;
        EngineSettings {
            mode: c.engine_mode,
            request_body_access: c.request_body_access,
            request_body_limit: c.request_body_limit,
            request_body_no_files_limit: c.request_body_no_files_limit,
            request_body_limit_action: c.request_body_limit_action,
            response_body_access: c.response_body_access,
            response_body_limit: c.response_body_limit,
            response_body_limit_action: c.response_body_limit_action,
            response_body_mime_types: c
                .response_body_mime_types
                .iter()
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .collect(),
            json_depth_limit: c.json_depth_limit,
            arguments_limit: c.arguments_limit,
        }
    }

    /// Number of rules (chain starters and `SecAction`s) loaded.
    pub fn rule_count(&self) -> usize {
        self.program.rule_count()
    }

    /// The same rules with another native policy, compiled now (state in `store`, or a new
    /// [`policy::MemoryStore`]). For hosts that get their SecLang `Waf` from elsewhere (a
    /// profile) and add the policy afterwards.
    pub fn with_policy(
        &self,
        config: &PolicyConfig,
        store: Option<Arc<dyn policy::Store>>,
    ) -> Result<Waf, PolicyError> {
        Ok(Waf {
            program: Arc::clone(&self.program),
            runtime: Arc::clone(&self.runtime),
            policy: Arc::new(Policy::compile(config, store)?),
            #[cfg(feature = "ml")]
            ml: self.ml.clone(),
        })
    }

    /// The same rules and policy with the ML detector's model set (or removed with
    /// `None`); for hosts that get their `Waf` from elsewhere (a profile).
    #[cfg(feature = "ml")]
    pub fn with_ml_model(&self, model: Option<crate::ml::Model>) -> Waf {
        Waf {
            ml: model,
            ..self.clone()
        }
    }

    /// Re-reads the policy's list files and geo databases that changed since they were
    /// read, and swaps them in; returns how many were. Call it from a timer task, off the
    /// request path: requests never wait for it. On an error the old contents stay.
    pub fn reload_policy_files(&self) -> Result<usize, PolicyError> {
        self.policy.reload()
    }

    /// The policy's state store (rate-limit buckets, scores, bans). Pass it to
    /// [`WafBuilder::policy_store`] when building the next `Waf` to keep the state across
    /// a reload.
    pub fn policy_store(&self) -> Arc<dyn policy::Store> {
        Arc::clone(self.policy.store())
    }

    /// The bans in force at `now` (for the admin listener).
    pub fn bans(&self, now: SystemTime) -> Vec<policy::BanEntry> {
        self.policy.bans(now)
    }

    /// Lifts the ban on `ip` (and forgets its offences); whether there was one.
    pub fn unban(&self, ip: std::net::IpAddr) -> bool {
        self.policy.unban(ip)
    }

    /// Bans `ip` from `now` for `ttl_secs` (or the escalating TTL of `[bans]` when
    /// `None`); the end of the ban, or `None` when the policy has no `[bans]`.
    pub fn ban(
        &self,
        ip: std::net::IpAddr,
        ttl_secs: Option<u64>,
        now: SystemTime,
    ) -> Option<SystemTime> {
        self.policy.ban(ip, ttl_secs, now)
    }

    /// The ML detector's model, if one was configured ([`WafBuilder::ml_model`]).
    #[cfg(feature = "ml")]
    pub fn ml_model(&self) -> Option<&crate::ml::Model> {
        self.ml.as_ref()
    }

    /// Whether the native policy can act on a request (it has rules, rate limits or bans).
    /// A host that skips the transaction when the engine is off must not skip it then: the
    /// policy runs in every engine mode.
    pub fn has_policy(&self) -> bool {
        !self.policy.is_empty()
    }

    /// Hit counters of the policy's rules and rate limits, for metrics.
    pub fn policy_counters(&self) -> Vec<PolicyCounter> {
        self.policy.counters()
    }

    /// Whether `path` (the raw request path, without the query) is a gate endpoint of the
    /// policy (`[gates] path_prefix`, `/.waf/` by default): the challenge answer, sign-in
    /// and sign-out. The host then reads the body (up to
    /// [`DEFAULT_GATE_FORM_LEN`](crate::limits::DEFAULT_GATE_FORM_LEN)) and calls
    /// [`Waf::gate_request`] instead of forwarding the request.
    pub fn is_gate_path(&self, path: &[u8]) -> bool {
        self.policy.is_gate_path(path)
    }

    /// Whether the policy has email-code sign-in (`[gates.sign_in]`), whose codes the host
    /// must send ([`crate::host::Mailer`]).
    pub fn has_sign_in(&self) -> bool {
        self.policy.has_sign_in()
    }

    /// Answers a gate endpoint request (see [`Waf::is_gate_path`]) with its form `body`;
    /// `None` when `head` is not one. When the answer holds a
    /// [`mail`](policy::gate::GateResponse::mail), send it first, and answer
    /// [`send_failed`](policy::gate::GateResponse::send_failed) if that fails.
    pub fn gate_request(
        &self,
        conn: &ConnectionInfo,
        head: &crate::RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
        request_id: &str,
    ) -> Option<policy::gate::GateResponse> {
        self.policy.gate_request(conn, head, body, now, request_id)
    }

    /// The block page for `intervention` with this policy's pages (its `[gates]` templates
    /// and strings, else the built-in ones): [`crate::host::block_response`] for hosts
    /// whose deployment replaced the pages.
    pub fn block_response(
        &self,
        intervention: &crate::Intervention,
        request_id: &str,
        accept: Option<&[u8]>,
    ) -> crate::host::BlockPage {
        match self.policy.pages() {
            Some(p) => p.block(intervention, request_id, accept),
            None => crate::host::block_response(intervention, request_id, accept),
        }
    }

    /// Whether a response body can be blocked: the engine is `On`, `SecResponseBodyAccess`
    /// is on, and some phase-4 rule has a disruptive action (`deny`, `drop`, `redirect`,
    /// with `block` resolved). A host that streams responses can hold the body for phase 4
    /// only when this is true; otherwise phase 4 can log but never change the answer, so
    /// holding the body would only cost memory and latency. (A `ctl:ruleEngine=On` in a
    /// `DetectionOnly` engine is not counted.)
    pub fn response_body_can_intervene(&self) -> bool {
        let p = &self.program;
        p.config.engine_mode == EngineMode::On
            && p.config.response_body_access
            && p.rules.iter().any(|r| {
                r.phase == 4
                    && matches!(
                        r.disruptive,
                        crate::actions::Disruptive::Deny
                            | crate::actions::Disruptive::Drop
                            | crate::actions::Disruptive::Block
                            | crate::actions::Disruptive::Redirect(_)
                    )
            })
    }
}

/// Collects rule sources, in order, and compiles them with [`WafBuilder::build`].
#[derive(Debug, Default)]
pub struct WafBuilder {
    sources: Vec<Source>,
    policy: Option<PolicyConfig>,
    store: Option<Arc<dyn policy::Store>>,
    exclusions: Vec<Exclusion>,
    reference: bool,
    backend: ScanBackend,
    xml_depth_limit: Option<usize>,
    multipart_part_limit: Option<usize>,
    #[cfg(feature = "ml")]
    ml: Option<crate::ml::Model>,
}

#[derive(Debug)]
enum Source {
    Text { name: String, text: String },
    File(PathBuf),
    Glob(String),
}

impl WafBuilder {
    /// Adds inline SecLang text; `name` stands for the file name in errors.
    pub fn seclang(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.sources.push(Source::Text {
            name: name.into(),
            text: text.into(),
        });
        self
    }

    /// Adds a rule file (read at [`WafBuilder::build`]).
    pub fn seclang_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::File(path.into()));
        self
    }

    /// Adds every file matching a glob such as `rules/*.conf`, in name order. A glob that
    /// matches nothing is an error.
    pub fn seclang_glob(mut self, pattern: impl Into<String>) -> Self {
        self.sources.push(Source::Glob(pattern.into()));
        self
    }

    /// Sets the native policy ([`crate::policy`]): rules with conditions, lists, rate
    /// limits, bans, IP intelligence. Compiled by [`WafBuilder::build`].
    pub fn policy(mut self, config: PolicyConfig) -> Self {
        self.policy = Some(config);
        self
    }

    /// Keeps the policy's counters, scores and bans in `store` (by default a new
    /// [`policy::MemoryStore`]); give the previous `Waf`'s [`Waf::policy_store`] to keep
    /// them across a reload.
    pub fn policy_store(mut self, store: Arc<dyn policy::Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Compiles the policy alone, for `check` commands that want the [`PolicyError`] with
    /// its location rather than an [`Error`].
    pub fn check_policy(config: &PolicyConfig) -> Result<(), PolicyError> {
        Policy::compile(config, None).map(|_| ())
    }

    /// Adds a rule exclusion (see [`Exclusion`]): applied after every rule source, whatever
    /// order the builder calls come in.
    pub fn exclusion(mut self, exclusion: Exclusion) -> Self {
        self.exclusions.push(exclusion);
        self
    }

    /// Chooses the multi-pattern engine of the prefilter (by default [`ScanBackend::Auto`],
    /// the pure-Rust literal scanner, measured faster on CRS). Which rules match never
    /// depends on it. [`ScanBackend::Hyperscan`] in a
    /// build without the feature makes [`WafBuilder::build`] fail rather than run without it.
    pub fn scan_backend(mut self, backend: ScanBackend) -> Self {
        self.backend = backend;
        self
    }

    /// Deepest XML element nesting a request body may have (default
    /// [`crate::limits::DEFAULT_XML_DEPTH_LIMIT`]); a deeper body is refused with 400 and
    /// `REQBODY_ERROR` (SecLang has no directive for it). Must be at least 1.
    pub fn xml_depth_limit(mut self, depth: usize) -> Self {
        self.xml_depth_limit = Some(depth);
        self
    }

    /// Most parts a multipart request body may have (default
    /// [`crate::limits::DEFAULT_MULTIPART_PART_LIMIT`]); a body with more is refused with 400
    /// and `MULTIPART_FILE_LIMIT_EXCEEDED`. Must be at least 1.
    pub fn multipart_part_limit(mut self, parts: usize) -> Self {
        self.multipart_part_limit = Some(parts);
        self
    }

    /// Scores every request with `model` ([`crate::ml`]): `TX:ML_SCORE`, `TX:ML_VAR`,
    /// `ml.score` and [`crate::Report::ml`]. Load it once with
    /// [`crate::ml::Model::default_model`] or [`crate::ml::Model::from_file`]; a `Model`
    /// is cheap to clone.
    #[cfg(feature = "ml")]
    pub fn ml_model(mut self, model: crate::ml::Model) -> Self {
        self.ml = Some(model);
        self
    }

    /// Test oracle only: evaluates every rule the straightforward way (every value of every
    /// target through its transformations and operator; no prefilter, no cached
    /// transformations, no skipped rules). It gives the same results as the default, more
    /// slowly; the differential tests compare the two.
    #[doc(hidden)]
    pub fn internal_reference_evaluation(mut self) -> Self {
        self.reference = true;
        self
    }

    /// Reads, parses and compiles everything added, in order.
    pub fn build(mut self) -> Result<Waf, Error> {
        let mut directives = Vec::new();
        for source in std::mem::take(&mut self.sources) {
            match source {
                Source::Text { name, text } => directives.extend(seclang::parse_str(&name, &text)?),
                Source::File(path) => directives.extend(seclang::parse_file(&path)?),
                Source::Glob(pattern) => {
                    let paths = glob::glob(&pattern).map_err(|e| {
                        Error::new(ErrorKind::Io, None, format!("bad glob {pattern:?}: {e}"))
                    })?;
                    let mut paths: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
                    if paths.is_empty() {
                        return Err(Error::new(
                            ErrorKind::Io,
                            None,
                            format!("no file matches {pattern:?}"),
                        ));
                    }
                    paths.sort();
                    for path in paths {
                        directives.extend(seclang::parse_file(&path)?);
                    }
                }
            }
        }
        let (after, path_exclusions) = compile::exclusion::lower(&self.exclusions)?;
        directives.extend(after);
        if self.backend == ScanBackend::Hyperscan && !ScanBackend::HYPERSCAN_AVAILABLE {
            return Err(Error::new(
                ErrorKind::Unsupported,
                None,
                "the Hyperscan scan back-end was asked for, but this build has no `hyperscan` \
                 feature (build waf-core with `--features hyperscan` and libhs installed)",
            ));
        }
        let mut program = compile::compile(directives, self.backend)?;
        for (name, set, slot) in [
            (
                "xml_depth_limit",
                self.xml_depth_limit,
                &mut program.config.xml_depth_limit,
            ),
            (
                "multipart_part_limit",
                self.multipart_part_limit,
                &mut program.config.multipart_part_limit,
            ),
        ] {
            match set {
                Some(0) => {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        None,
                        format!("WafBuilder::{name} must be at least 1"),
                    ))
                }
                Some(n) => *slot = n,
                None => {}
            }
        }
        program.warn_unmatched(&path_exclusions);
        program.reference = self.reference;
        program.path_exclusions = path_exclusions;
        let policy = match &self.policy {
            Some(config) => Policy::compile(config, self.store)?,
            None => Policy::empty(),
        };
        #[cfg(feature = "ml")]
        let has_model = self.ml.is_some();
        #[cfg(not(feature = "ml"))]
        let has_model = false;
        if policy.reads_ml_score() && !has_model {
            program.warnings.push(Warning {
                location: None,
                message: "a policy rule reads ml.score, but no ML model is configured \
                          (the `ml` feature and WafBuilder::ml_model): ml.score is always 0"
                    .to_string(),
            });
        }
        let mut waf = Waf {
            program: Arc::new(program),
            runtime: Arc::new(Runtime::default()),
            policy: Arc::new(policy),
            #[cfg(feature = "ml")]
            ml: self.ml,
        };
        if !self.reference {
            let fold = crate::eval::fold_setup(&waf);
            if let Some(program) = Arc::get_mut(&mut waf.program) {
                program.fold = fold;
            }
        }
        Ok(waf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waf_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<Waf>();
    }

    #[test]
    fn response_body_can_intervene_needs_engine_access_and_a_disruptive_phase_4_rule() {
        let build = |text: &str| Waf::builder().seclang("t", text).build().unwrap();
        let deny4 = "SecRule RESPONSE_BODY \"@contains x\" \"id:1,phase:4,deny\"\n";
        let log4 = "SecRule RESPONSE_BODY \"@contains x\" \"id:1,phase:4,pass,log\"\n";
        let on = "SecRuleEngine On\nSecResponseBodyAccess On\n";
        assert!(build(&format!("{on}{deny4}")).response_body_can_intervene());
        assert!(!build(&format!("{on}{log4}")).response_body_can_intervene());
        assert!(!build(&format!("SecRuleEngine On\n{deny4}")).response_body_can_intervene());
        assert!(!build(&format!(
            "SecRuleEngine DetectionOnly\nSecResponseBodyAccess On\n{deny4}"
        ))
        .response_body_can_intervene());
        let default_deny = "SecDefaultAction \"phase:4,log,deny\"\n\
            SecRule RESPONSE_BODY \"@contains x\" \"id:1,phase:4,block\"\n";
        assert!(build(&format!("{on}{default_deny}")).response_body_can_intervene());
    }

    #[test]
    fn transactions_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Transaction>();
    }
}
