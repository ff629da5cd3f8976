//! WAF profiles a host can use: the built-in default rules, and OWASP CRS from a directory.
//!
//! Placeholder: being written.

use std::path::Path;

use waf_core::{EngineMode, Waf};

/// The built-in default rule set (SecLang), embedded in the binary.
pub const DEFAULT_RULES: &str = "SecRuleEngine On\n";

/// Compiles the built-in default profile in `mode`.
pub fn default_waf(mode: EngineMode) -> Result<Waf, waf_core::Error> {
    let _ = mode;
    Waf::builder()
        .seclang("default-profile", DEFAULT_RULES)
        .build()
}

/// Compiles OWASP CRS from `dir` (`crs-setup.conf.example` or `crs-setup.conf`, then
/// `rules/*.conf`) at `paranoia` level 1..=4, in `mode`.
pub fn crs_waf(dir: &Path, paranoia: u8, mode: EngineMode) -> Result<Waf, waf_core::Error> {
    let _ = (dir, paranoia, mode);
    Waf::builder().seclang("crs", "SecRuleEngine Off\n").build()
}
