//! [`Waf`]: a compiled rule set, and [`WafBuilder`], which makes one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use crate::compile::{self, LimitAction, Program};
use crate::error::{Error, ErrorKind, Warning};
use crate::eval::Runtime;
use crate::exclusion::Exclusion;
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
}

/// Collects rule sources, in order, and compiles them with [`WafBuilder::build`].
#[derive(Debug, Default)]
pub struct WafBuilder {
    sources: Vec<Source>,
    exclusions: Vec<Exclusion>,
    reference: bool,
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

    /// Adds a rule exclusion (see [`Exclusion`]): applied after every rule source, whatever
    /// order the builder calls come in.
    pub fn exclusion(mut self, exclusion: Exclusion) -> Self {
        self.exclusions.push(exclusion);
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
    pub fn build(self) -> Result<Waf, Error> {
        let mut directives = Vec::new();
        for source in self.sources {
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
        let mut program = compile::compile(&directives)?;
        program.warn_unmatched(&path_exclusions);
        program.reference = self.reference;
        program.path_exclusions = path_exclusions;
        Ok(Waf {
            program: Arc::new(program),
            runtime: Arc::new(Runtime::default()),
        })
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
    fn transactions_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Transaction>();
    }
}
