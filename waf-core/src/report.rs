//! The record of a finished transaction: matched rules, scores, intervention.

use crate::verdict::Intervention;

/// What happened in a transaction, returned by [`crate::Transaction::finish`].
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// Unique id of the transaction (`UNIQUE_ID`); reads as a `&str`.
    pub unique_id: UniqueId,
    /// Every rule (chain) that matched, in the order it matched, except `nolog` rules that
    /// do not disrupt (they only keep score).
    pub matched_rules: Vec<MatchedRule>,
    /// `TX.inbound_anomaly_score` (CRS), or 0.
    pub inbound_anomaly_score: i64,
    /// `TX.outbound_anomaly_score` (CRS), or 0.
    pub outbound_anomaly_score: i64,
    /// The intervention the host was told to carry out, if any.
    pub intervention: Option<Intervention>,
    /// In detection-only mode: the intervention that would have happened.
    pub would_intervene: Option<Intervention>,
    /// Native policy bans, rules and rate limits that matched, shadow mode included.
    pub policy: Vec<crate::policy::PolicyHit>,
    /// The ML detector's score of the request (`ml` feature, with a model configured and
    /// the request scored in phase 2); `None` otherwise.
    pub ml: Option<MlScore>,
}

/// A transaction's unique id, held inline when it fits (the engine's own ids take 19
/// bytes), so that finishing a transaction allocates nothing; a longer id a host supplied
/// is kept on the heap. Dereferences to `str` and compares with strings.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct UniqueId(IdRepr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum IdRepr {
    Inline {
        len: u8,
        bytes: [u8; UniqueId::INLINE],
    },
    Heap(Box<str>),
}

impl UniqueId {
    /// The longest id held inline.
    const INLINE: usize = 46;

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Only ever filled from a `&str` cut at its length.
            IdRepr::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            IdRepr::Heap(s) => s,
        }
    }
}

impl From<&str> for UniqueId {
    fn from(s: &str) -> UniqueId {
        if s.len() > UniqueId::INLINE {
            return UniqueId(IdRepr::Heap(s.into()));
        }
        let mut bytes = [0; UniqueId::INLINE];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        UniqueId(IdRepr::Inline {
            len: s.len() as u8,
            bytes,
        })
    }
}

impl Default for UniqueId {
    fn default() -> UniqueId {
        UniqueId::from("")
    }
}

impl std::ops::Deref for UniqueId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for UniqueId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for UniqueId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for UniqueId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for UniqueId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl serde::Serialize for UniqueId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What the ML detector made of a request (see `waf_core::ml`, `ml` feature).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct MlScore {
    /// The request's score: the highest of its values', in `[0, 1]` (0 when every value was
    /// trivially benign). Rules see it as `TX:ML_SCORE`, in per mille.
    pub score: f32,
    /// The name of the value that scored highest (`ARGS:q`, `REQUEST_HEADERS:Referer`;
    /// `TX:ML_VAR`), empty when none was scored.
    pub var: String,
    /// Values scored (by the model or from the score cache).
    pub values: usize,
    /// Of those, values whose score came from the cache.
    pub cached: usize,
    /// Values skipped as trivially benign (score 0).
    pub skipped: usize,
    /// Feature rows (windows) scored.
    pub rows: usize,
    /// An inference error, if the model failed (its rows then score 0). A model that loaded
    /// does not fail on any input; this is for the log.
    pub error: Option<String>,
}

impl MlScore {
    /// The score in per mille, as `TX:ML_SCORE` and `ml.score` give it.
    pub fn per_mille(&self) -> i64 {
        (f64::from(self.score) * 1000.0).round() as i64
    }
}

/// One matched rule.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct MatchedRule {
    /// Rule id.
    pub id: u64,
    /// Phase (1..=5) it ran in.
    pub phase: u8,
    /// Expanded `msg`, if the rule has one.
    pub message: Option<String>,
    /// Expanded `logdata`, if the rule has one.
    pub data: Option<String>,
    /// `tag` values.
    pub tags: Vec<String>,
    /// `severity`, if given.
    pub severity: Option<Severity>,
    /// Name of the variable that matched last, e.g. `ARGS:id`.
    pub matched_var_name: String,
    /// Its (transformed) value, lossily decoded, at most [`crate::limits::DEFAULT_MATCHED_DATA_LEN`] bytes.
    pub matched_data: String,
    /// Whether the rule logs (`log`, the default, rather than `nolog`).
    pub log: bool,
    /// Whether the rule is disruptive (deny/drop/redirect, or block with a blocking default).
    pub disruptive: bool,
    /// Source file and line of the rule.
    pub file: String,
    /// Line of the rule in `file`.
    pub line: u32,
}

/// Syslog-style severity of a rule (`severity:CRITICAL` or `severity:2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// 0
    Emergency,
    /// 1
    Alert,
    /// 2
    Critical,
    /// 3
    Error,
    /// 4
    Warning,
    /// 5
    Notice,
    /// 6
    Info,
    /// 7
    Debug,
}

impl Severity {
    /// Parses a name (`CRITICAL`, any case) or a number `0..=7`.
    pub fn parse(s: &str) -> Option<Severity> {
        use Severity::*;
        const ALL: [Severity; 8] = [
            Emergency, Alert, Critical, Error, Warning, Notice, Info, Debug,
        ];
        if let Ok(n) = s.parse::<usize>() {
            return ALL.get(n).copied();
        }
        ALL.iter()
            .copied()
            .find(|v| v.name().eq_ignore_ascii_case(s))
    }

    /// The upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Emergency => "EMERGENCY",
            Severity::Alert => "ALERT",
            Severity::Critical => "CRITICAL",
            Severity::Error => "ERROR",
            Severity::Warning => "WARNING",
            Severity::Notice => "NOTICE",
            Severity::Info => "INFO",
            Severity::Debug => "DEBUG",
        }
    }

    /// The number, 0 (emergency) to 7 (debug).
    pub fn number(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::UniqueId;

    #[test]
    fn unique_ids_of_any_length_read_back() {
        for s in [
            "",
            "18f2c3a4b5c6d7e8000001",
            &"x".repeat(46),
            &"é".repeat(40),
        ] {
            let id = UniqueId::from(s);
            assert_eq!(id, s);
            assert_eq!(id.to_string(), s);
            assert_eq!(format!("{id:?}"), format!("{s:?}"));
        }
    }
}
