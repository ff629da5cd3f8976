//! ModSecurity-style error-log lines, rendered from the engine's report, and the checks
//! go-ftw runs on them (crs-tests.md §3.4-3.5).
//!
//! go-ftw reads the web server's error log; only rules that log (not `nolog`) appear there.
//! The regexes in the tests assume ModSecurity v2's line format, for example
//! `[id "922130"] [msg "..."]`, `Matched Data: X found within ARGS:x: ...` (CRS `logdata`),
//! or `Inbound Anomaly Score Exceeded (Total Score: 5)` (CRS `msg`). We render:
//!
//! ```text
//! ModSecurity: Warning. Matched "<matched data>" at <VAR:name>. [file "f"] [line "n"] [id "n"] [msg "..."] [data "..."] [severity "CRITICAL"] [tag "..."]...
//! ```
//!
//! The first sentence stands in for ModSecurity's operator message, which the report does
//! not carry. Values are escaped as ModSecurity's `log_escape` does: `"` and `\` get a
//! backslash, bytes outside printable ASCII become `\xHH`.

use regex::Regex;
use waf_core::MatchedRule;

/// What the harness needs from a matched rule. Our own type: `MatchedRule` is
/// `#[non_exhaustive]` and cannot be built outside `waf-core`, so unit tests use this.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogEntry {
    pub id: u64,
    pub message: Option<String>,
    pub data: Option<String>,
    pub severity: Option<&'static str>,
    pub tags: Vec<String>,
    pub matched_var_name: String,
    pub matched_data: String,
    pub file: String,
    pub line: u32,
}

impl LogEntry {
    pub fn from_matched(r: &MatchedRule) -> LogEntry {
        LogEntry {
            id: r.id,
            message: r.message.clone(),
            data: r.data.clone(),
            severity: r.severity.map(|s| s.name()),
            tags: r.tags.clone(),
            matched_var_name: r.matched_var_name.clone(),
            matched_data: r.matched_data.clone(),
            file: r.file.clone(),
            line: r.line,
        }
    }

    /// The error-log line for this entry.
    pub fn render(&self) -> String {
        let mut s = String::from("ModSecurity: Warning. ");
        if self.matched_var_name.is_empty() {
            s.push_str("Unconditional match in SecAction.");
        } else {
            s.push_str(&format!(
                "Matched \"{}\" at {}.",
                escape(&self.matched_data),
                escape(&self.matched_var_name)
            ));
        }
        if !self.file.is_empty() {
            s.push_str(&format!(
                " [file \"{}\"] [line \"{}\"]",
                escape(&self.file),
                self.line
            ));
        }
        s.push_str(&format!(" [id \"{}\"]", self.id));
        if let Some(m) = &self.message {
            s.push_str(&format!(" [msg \"{}\"]", escape(m)));
        }
        if let Some(d) = &self.data {
            s.push_str(&format!(" [data \"{}\"]", escape(d)));
        }
        if let Some(sev) = self.severity {
            s.push_str(&format!(" [severity \"{sev}\"]"));
        }
        for t in &self.tags {
            s.push_str(&format!(" [tag \"{}\"]", escape(t)));
        }
        s
    }
}

/// ModSecurity's `log_escape`: `"` → `\"`, `\` → `\\`, bytes outside printable ASCII → `\xHH`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// The log expectations of one stage, compiled.
#[derive(Debug)]
pub struct LogCheck {
    pub expect_ids: Vec<u64>,
    pub no_expect_ids: Vec<u64>,
    pub match_regex: Option<Regex>,
    pub no_match_regex: Option<Regex>,
}

impl LogCheck {
    pub fn new(log: &crate::suite::LogOutput) -> Result<LogCheck, String> {
        let compile = |r: &Option<String>| -> Result<Option<Regex>, String> {
            r.as_deref()
                .map(|r| Regex::new(r).map_err(|e| format!("bad regex {r:?}: {e}")))
                .transpose()
        };
        Ok(LogCheck {
            expect_ids: log.expect_ids.clone(),
            no_expect_ids: log.no_expect_ids.clone(),
            match_regex: compile(&log.match_regex)?,
            no_match_regex: compile(&log.no_match_regex)?,
        })
    }

    /// Checks the logged ids and lines; returns what went wrong, empty when it passed.
    pub fn check(&self, ids: &[u64], lines: &[String]) -> Vec<String> {
        let mut why = Vec::new();
        let missing: Vec<u64> = self
            .expect_ids
            .iter()
            .copied()
            .filter(|i| !ids.contains(i))
            .collect();
        if !missing.is_empty() {
            why.push(format!("missing {missing:?}"));
        }
        let unwanted: Vec<u64> = self
            .no_expect_ids
            .iter()
            .copied()
            .filter(|i| ids.contains(i))
            .collect();
        if !unwanted.is_empty() {
            why.push(format!("unexpected {unwanted:?}"));
        }
        if let Some(r) = &self.match_regex {
            if !lines.iter().any(|l| r.is_match(l)) {
                why.push(format!("no line matches /{}/", r.as_str()));
            }
        }
        if let Some(r) = &self.no_match_regex {
            if lines.iter().any(|l| r.is_match(l)) {
                why.push(format!("a line matches /{}/", r.as_str()));
            }
        }
        why
    }
}
