//! `waf-proxy replay`: run recorded requests through a WAF without a network.
//!
//! Placeholder: being written.

use std::io::Write;
use std::path::PathBuf;

/// What to replay, and against which rules.
#[derive(Debug, Default)]
pub struct ReplayOptions {
    /// A proxy config file: replay against its first host's profile.
    pub config: Option<PathBuf>,
    /// A CRS directory: replay against CRS at PL1 (blocking).
    pub crs: Option<PathBuf>,
    /// JSON Lines files (the dataset format) or raw HTTP/1.1 request files.
    pub files: Vec<PathBuf>,
}

/// Totals of a replay run.
#[derive(Debug, Default)]
pub struct ReplaySummary {
    /// Requests replayed.
    pub requests: usize,
    /// Requests that got an intervention.
    pub blocked: usize,
}

/// Replays every request, writing one line per request (and rates when labels are
/// present) to `out`.
pub fn run(opts: &ReplayOptions, out: &mut dyn Write) -> std::io::Result<ReplaySummary> {
    let _ = (opts, out);
    Ok(ReplaySummary::default())
}
