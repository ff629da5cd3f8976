//! WAF profiles a host can use: the built-in default rules, and OWASP CRS from a directory.
//!
//! # The default profile
//!
//! [`DEFAULT_RULES`] (`profiles/default.conf`, embedded in the binary) is the team's own rule
//! set, written in SecLang, for hosts that name no rules. It is a complete configuration:
//! engine on, request body access with limits, the JSON and XML body processors chosen by
//! `Content-Type`, a 400 for a body that does not parse, then detection rules with ids in
//! `100000..=199999` for SQL injection and XSS (libinjection plus a few regexes), path
//! traversal and LFI, RFI, SSRF to metadata and internal addresses, Log4Shell lookups,
//! command injection, template injection, NoSQL and LDAP injection, XXE, protocol abuse
//! (Content-Length with Transfer-Encoding, control bytes in headers, CRLF injection) and
//! scanners. It is not derived from CRS.
//!
//! It uses anomaly scoring: detection rules add 5 (an attack on its own) or 3 (a weaker
//! signal) to `TX:inbound_anomaly_score` and pass; rules 199001 (end of phase 1) and 199002
//! (end of phase 2) deny with 403 at 5. Scoring rather than a `deny` on each rule means that
//! every matching rule shows in the report, two weak signals can add up, and an operator
//! can tune the threshold in one place. Weak patterns need a second, independent signal:
//! libinjection and the quoted-SQL, shell-separator and risky-HTML rules score less in a
//! value that reads as text (a document, a sentence, a JSON text), and the SQL and shell
//! grammar rules (190163-190171, 170140, 170180-170185) fire on the shape of an injection read from
//! the value's tokens (a quote closed then an operator, a boolean comparison in a value cut
//! open, a separator then a command word with shell-shaped arguments), not on a keyword.
//! Headers that have a grammar (Accept-Language, Origin, X-Forwarded-For, Referer,
//! X-Client-Data, request ids) count when a value breaks it and carries code punctuation
//! (110300-110305).
//!
//! On the team's dev corpus it blocks 94.7 % of attacks (every class with 50 or more
//! requests at 91 % or more; sqli is the lowest) and 0.19 % of benign requests, and none of
//! the real-traffic suite (`tests/fixtures/realtraffic/`); `tests/profile.rs` asserts each
//! figure, per class.
//!
//! # CRS
//!
//! [`crs_waf`] builds OWASP CRS v4 from its directory, unmodified, with the engine settings
//! CRS expects (those of `examples/crs.conf`) and the paranoia level set by rule 900000.

use std::path::Path;

use waf_core::{EngineMode, Waf, WafBuilder};

/// The built-in default rule set (SecLang), embedded in the binary.
///
/// It starts with `SecRuleEngine On`; [`default_waf`] appends the engine mode it is asked
/// for after it.
pub const DEFAULT_RULES: &str = include_str!("../profiles/default.conf");

/// Engine settings CRS expects before `crs-setup.conf`: body access and limits, and the
/// body processors chosen by `Content-Type` (as in ModSecurity's recommended config).
const CRS_BASE: &str = include_str!("../profiles/crs-base.conf");

/// Compiles the built-in default profile in `mode`.
///
/// Errors only if the embedded rules fail to compile, which `tests/profile.rs` rules out.
pub fn default_waf(mode: EngineMode) -> Result<Waf, waf_core::Error> {
    default_builder(mode).build()
}

/// The builder behind [`default_waf`], for hosts that add to it (exclusions).
pub fn default_builder(mode: EngineMode) -> WafBuilder {
    Waf::builder()
        .seclang("default-profile", DEFAULT_RULES)
        .seclang("default-profile-mode", engine_directive(mode))
}

/// Compiles OWASP CRS from `dir` at `paranoia` level, in `mode`.
///
/// The rules load in this order: engine settings (body access, limits, JSON/XML body
/// processors by `Content-Type`), `SecRuleEngine` for `mode`, a `SecAction` with id 900000
/// setting `tx.blocking_paranoia_level` to `paranoia`, `DIR/crs-setup.conf` if present
/// (otherwise `DIR/crs-setup.conf.example`), then `DIR/rules/*.conf` in name order.
///
/// `paranoia` is clamped to CRS's range `1..=4`: 0 means 1, anything above 4 means 4.
/// Errors: the setup file or `rules/*.conf` cannot be read, or a rule does not compile (for
/// example a `crs-setup.conf` that sets rule 900000 itself).
pub fn crs_waf(dir: &Path, paranoia: u8, mode: EngineMode) -> Result<Waf, waf_core::Error> {
    crs_builder(dir, paranoia, mode).build()
}

/// The builder behind [`crs_waf`]: the one place CRS's engine settings come from, for
/// hosts with exclusions too.
pub fn crs_builder(dir: &Path, paranoia: u8, mode: EngineMode) -> WafBuilder {
    let paranoia = paranoia.clamp(1, 4);
    let setup = {
        let own = dir.join("crs-setup.conf");
        if own.is_file() {
            own
        } else {
            dir.join("crs-setup.conf.example")
        }
    };
    let paranoia_rule = format!(
        "SecAction \"id:900000,phase:1,pass,t:none,nolog,\
         setvar:tx.blocking_paranoia_level={paranoia}\"\n"
    );
    let rules = dir.join("rules").join("*.conf");
    Waf::builder()
        .seclang("crs-base", CRS_BASE)
        .seclang("crs-mode", engine_directive(mode))
        .seclang("crs-paranoia", paranoia_rule)
        .seclang_file(setup)
        .seclang_glob(rules.to_string_lossy().into_owned())
}

/// The `SecRuleEngine` directive for `mode`.
pub(crate) fn engine_directive(mode: EngineMode) -> &'static str {
    match mode {
        EngineMode::On => "SecRuleEngine On\n",
        EngineMode::DetectionOnly => "SecRuleEngine DetectionOnly\n",
        // `EngineMode` is non-exhaustive: anything new that this crate does not know
        // inspects nothing rather than blocking in a way nobody asked for.
        _ => "SecRuleEngine Off\n",
    }
}
