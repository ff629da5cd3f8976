//! `waf-proxy replay`: run recorded requests through a WAF without a network.
//!
//! A user tests a rule set against recorded traffic before deploying it:
//!
//! ```text
//! waf-proxy replay [--config CONFIG | --crs DIR] FILE...
//! ```
//!
//! With no option the built-in default profile ([`crate::profile::default_waf`]) is used;
//! `--crs DIR` builds OWASP CRS from `DIR` at paranoia level 1 ([`crate::profile::crs_waf`]).
//!
//! # Input
//!
//! Each `FILE` is either
//! - JSON Lines, one request per line, in the format of the team's dataset
//!   (`id`, `label`, `class`, `method`, `path`, `query`, `headers`, `body`; only `path` is
//!   required), recognised by its first non-blank byte being `{`; or
//! - one raw HTTP/1.1 request (request line, header fields, blank line, body). The body is
//!   cut at `Content-Length`, or de-chunked when `Transfer-Encoding: chunked`; an HTTP
//!   request that does not parse is reported as an error line, not a crash.
//!
//! Each file is read whole into memory; a file of recorded traffic is expected to fit.
//!
//! # Output
//!
//! One tab-separated line per request:
//!
//! ```text
//! <id>\t<pass|block STATUS|error>\t<rule ids, comma-separated, or ->\t<label/class or ->
//! ```
//!
//! The rule ids are those of the logging rules that matched, in match order without
//! repeats. When any request carries a label, a summary follows: per class, how many
//! requests there were and how many were blocked, then the detection rate over attacks and
//! the false-positive rate over benign requests.
//!
//! Each request runs phases 1 and 2 only (there is no response to inspect); a request is
//! blocked when either phase returns an intervention.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::SystemTime;

use waf_core::{ConnectionInfo, EngineMode, RequestHead, Transaction, Verdict, Waf};

use crate::profile;

/// What to replay, and against which rules.
#[derive(Debug, Default)]
pub struct ReplayOptions {
    /// A proxy config file: replay against its first host's profile.
    ///
    /// Not supported yet: [`run`] answers an [`io::ErrorKind::Unsupported`] error.
    pub config: Option<PathBuf>,
    /// A CRS directory: replay against CRS at PL1 (blocking).
    pub crs: Option<PathBuf>,
    /// JSON Lines files (the dataset format) or raw HTTP/1.1 request files.
    pub files: Vec<PathBuf>,
}

/// Totals of a replay run.
#[derive(Debug, Default)]
pub struct ReplaySummary {
    /// Requests replayed (including those that could not be read).
    pub requests: usize,
    /// Requests that got an intervention.
    pub blocked: usize,
    /// Records that could not be turned into a request (bad JSON, unparsable HTTP).
    pub errors: usize,
    /// Per class (`sqli`, ..., `benign`, or the label when there is no class): totals.
    pub classes: BTreeMap<String, ClassCount>,
    /// Labelled attacks replayed, and how many were blocked.
    pub attacks: ClassCount,
    /// Labelled benign requests replayed, and how many were blocked.
    pub benign: ClassCount,
}

/// How many requests of one kind were replayed, and how many of them were blocked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCount {
    /// Requests replayed.
    pub total: usize,
    /// Of those, requests blocked.
    pub blocked: usize,
}

impl ClassCount {
    /// `blocked / total`, or 0 when there were none.
    pub fn rate(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.blocked as f64 / self.total as f64
        }
    }

    fn add(&mut self, blocked: bool) {
        self.total += 1;
        self.blocked += usize::from(blocked);
    }
}

impl ReplaySummary {
    /// Share of labelled attacks that were blocked (0 when there were none).
    pub fn detection_rate(&self) -> f64 {
        self.attacks.rate()
    }

    /// Share of labelled benign requests that were blocked (0 when there were none).
    pub fn false_positive_rate(&self) -> f64 {
        self.benign.rate()
    }
}

/// Replays every request, writing one line per request (and rates when labels are
/// present) to `out`.
///
/// Errors: an unreadable file, a failure to write to `out`, an invalid `config`, or a rule
/// set that does not compile. A malformed record is not an error:
/// it gets an `error` line and is counted in [`ReplaySummary::errors`].
pub fn run(opts: &ReplayOptions, out: &mut dyn Write) -> io::Result<ReplaySummary> {
    let waf = match (&opts.config, &opts.crs) {
        (Some(_), Some(_)) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "replay takes --config or --crs, not both",
            ))
        }
        (Some(path), None) => {
            // The first host's profile, compiled exactly as the proxy compiles it.
            let config = crate::config::Config::load(path)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let host = config.hosts.first().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: no host", path.display()),
                )
            })?;
            crate::state::build_waf(&host.waf)
        }
        (None, Some(dir)) => profile::crs_waf(dir, 1, EngineMode::On),
        (None, None) => profile::default_waf(EngineMode::On),
    }
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    run_with(&waf, &opts.files, out)
}

/// Replays every request in `files` through `waf`, as [`run`] does.
pub fn run_with(waf: &Waf, files: &[PathBuf], out: &mut dyn Write) -> io::Result<ReplaySummary> {
    let mut summary = ReplaySummary::default();
    for file in files {
        let data = std::fs::read(file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
        if is_json_lines(&data) {
            for (n, line) in data.split(|&b| b == b'\n').enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let fallback_id = format!("{}:{}", file.display(), n + 1);
                let outcome = match parse_json_record(line) {
                    Ok(rec) => {
                        let id = rec.id.clone().unwrap_or(fallback_id);
                        let result = inspect(waf, &rec.request);
                        Outcome {
                            id,
                            label: rec.label,
                            class: rec.class,
                            result: Ok(result),
                        }
                    }
                    Err(msg) => Outcome {
                        id: fallback_id,
                        label: None,
                        class: None,
                        result: Err(msg),
                    },
                };
                record(&mut summary, &outcome, out)?;
            }
        } else {
            let outcome = Outcome {
                id: file.display().to_string(),
                label: None,
                class: None,
                result: parse_raw_http(&data).map(|req| inspect(waf, &req)),
            };
            record(&mut summary, &outcome, out)?;
        }
    }
    if summary.attacks.total + summary.benign.total > 0 {
        write_rates(&summary, out)?;
    }
    Ok(summary)
}

/// Training and measurement dump of the ML detector (`ml` feature; `waf-proxy ml-dump`,
/// used by `waf-core/models/train.py`): for every JSON Lines record, one JSON line with its
/// `id`, `label`, `class`, whether `waf` blocked it or would have in detection-only mode
/// (`blocked`), the ML score of the request
/// (`ml`, `null` when not scored, e.g. blocked in phase 1), and every value the detector
/// looks at as `[name, value, score]`. Values are bytes written as Latin-1 text (each byte
/// one character below U+0100), so the script gets the exact bytes back.
#[cfg(feature = "ml")]
pub fn ml_dump(waf: &Waf, files: &[PathBuf], out: &mut dyn Write) -> io::Result<usize> {
    let mut n = 0;
    for file in files {
        let data = std::fs::read(file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
        for line in data.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(rec) = parse_json_record(line) else {
                continue;
            };
            let (tx, verdict) = run_request(waf, &rec.request);
            let values: Vec<serde_json::Value> = tx
                .internal_ml_values()
                .into_iter()
                .map(|(name, v, score)| {
                    let text: String = v.iter().map(|&b| char::from(b)).collect();
                    serde_json::json!([name, text, score])
                })
                .collect();
            let mut blocked = verdict.intervention().is_some();
            let report = tx.finish();
            blocked |= report.intervention.is_some() || report.would_intervene.is_some();
            let line = serde_json::json!({
                "id": rec.id,
                "label": rec.label,
                "class": rec.class,
                "blocked": blocked,
                "ml": report.ml.as_ref().map(|m| m.score),
                "ml_var": report.ml.as_ref().map(|m| m.var.clone()),
                "values": values,
            });
            writeln!(out, "{line}")?;
            n += 1;
        }
    }
    Ok(n)
}

/// One request, owned, as replay feeds it to the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Method as sent.
    pub method: Vec<u8>,
    /// Request target (`/path?query`) as sent.
    pub uri: Vec<u8>,
    /// `HTTP/1.1` unless the raw request said otherwise.
    pub version: Vec<u8>,
    /// Header fields in order.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The request body (de-chunked).
    pub body: Vec<u8>,
}

/// What the engine decided for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// The status of the intervention, if the request was blocked.
    pub blocked: Option<u16>,
    /// Ids of the logging rules that matched, in order, without repeats.
    pub rule_ids: Vec<u64>,
}

/// Runs one request through phases 1 and 2 of `waf`.
pub fn inspect(waf: &Waf, req: &ReplayRequest) -> Inspection {
    let (tx, verdict) = run_request(waf, req);
    let blocked = verdict.intervention().map(|i| i.status);
    let report = tx.finish();
    let mut rule_ids: Vec<u64> = Vec::new();
    for rule in report.matched_rules.iter().filter(|r| r.log) {
        if !rule_ids.contains(&rule.id) {
            rule_ids.push(rule.id);
        }
    }
    Inspection { blocked, rule_ids }
}

/// Feeds `req` through phases 1 and 2 of `waf` from a fixed client and server; returns the
/// transaction (for its report) and the last verdict.
fn run_request(waf: &Waf, req: &ReplayRequest) -> (Transaction, Verdict) {
    let client: SocketAddr = SocketAddr::from(([192, 0, 2, 1], 40000));
    let server: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 80));
    let conn = ConnectionInfo::new(client, server);
    let mut tx = waf.transaction(&conn, SystemTime::UNIX_EPOCH);
    let headers: Vec<(&[u8], &[u8])> = req
        .headers
        .iter()
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect();
    let head = RequestHead::new(&req.method, &req.uri, &req.version, &headers);
    let mut verdict = tx.request_headers(&head);
    if matches!(verdict, Verdict::Continue) && tx.wants_request_body() && !req.body.is_empty() {
        verdict = tx.request_body(&req.body);
    }
    if matches!(verdict, Verdict::Continue) {
        verdict = tx.request_end();
    }
    (tx, verdict)
}

struct Outcome {
    id: String,
    label: Option<String>,
    class: Option<String>,
    result: Result<Inspection, String>,
}

fn record(summary: &mut ReplaySummary, o: &Outcome, out: &mut dyn Write) -> io::Result<()> {
    summary.requests += 1;
    let tag = match (&o.label, &o.class) {
        (Some(l), Some(c)) => format!("{l}/{c}"),
        (Some(l), None) => l.clone(),
        (None, Some(c)) => c.clone(),
        (None, None) => "-".to_string(),
    };
    let id = sanitize(&o.id);
    let inspection = match &o.result {
        Ok(i) => i,
        Err(msg) => {
            summary.errors += 1;
            return writeln!(out, "{id}\terror\t-\t{tag}\t{}", sanitize(msg));
        }
    };
    let blocked = inspection.blocked.is_some();
    summary.blocked += usize::from(blocked);
    let verdict = match inspection.blocked {
        Some(status) => format!("block {status}"),
        None => "pass".to_string(),
    };
    let rules = if inspection.rule_ids.is_empty() {
        "-".to_string()
    } else {
        let ids: Vec<String> = inspection.rule_ids.iter().map(u64::to_string).collect();
        ids.join(",")
    };
    writeln!(out, "{id}\t{verdict}\t{rules}\t{tag}")?;
    if let Some(label) = &o.label {
        let class = o.class.clone().unwrap_or_else(|| label.clone());
        summary.classes.entry(class).or_default().add(blocked);
        match label.as_str() {
            "attack" => summary.attacks.add(blocked),
            "benign" => summary.benign.add(blocked),
            _ => {}
        }
    }
    Ok(())
}

fn write_rates(s: &ReplaySummary, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "# class\ttotal\tblocked\trate")?;
    for (class, c) in &s.classes {
        writeln!(
            out,
            "# {}\t{}\t{}\t{:.2}%",
            sanitize(class),
            c.total,
            c.blocked,
            100.0 * c.rate()
        )?;
    }
    writeln!(
        out,
        "# detection rate: {}/{} attacks blocked ({:.2}%)",
        s.attacks.blocked,
        s.attacks.total,
        100.0 * s.detection_rate()
    )?;
    writeln!(
        out,
        "# false-positive rate: {}/{} benign blocked ({:.2}%)",
        s.benign.blocked,
        s.benign.total,
        100.0 * s.false_positive_rate()
    )
}

/// Replaces tabs and line breaks so that one request stays one line.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn is_json_lines(data: &[u8]) -> bool {
    data.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

struct JsonRecord {
    id: Option<String>,
    label: Option<String>,
    class: Option<String>,
    request: ReplayRequest,
}

fn parse_json_record(line: &[u8]) -> Result<JsonRecord, String> {
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("bad JSON: {e}"))?;
    let obj = value
        .as_object()
        .ok_or_else(|| "a record must be a JSON object".to_string())?;
    let text = |key: &str| -> Result<Option<String>, String> {
        match obj.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("field {key:?} must be a string")),
        }
    };
    let path = text("path")?.ok_or_else(|| "field \"path\" is missing".to_string())?;
    let query = text("query")?.unwrap_or_default();
    let mut uri = path.into_bytes();
    if !query.is_empty() {
        uri.push(b'?');
        uri.extend_from_slice(query.as_bytes());
    }
    let mut headers = Vec::new();
    match obj.get("headers") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(map)) => {
            for (name, value) in map {
                let value = value
                    .as_str()
                    .ok_or_else(|| format!("header {name:?} must be a string"))?;
                headers.push((name.as_bytes().to_vec(), latin1(value)));
            }
        }
        Some(_) => return Err("field \"headers\" must be an object".to_string()),
    }
    Ok(JsonRecord {
        id: text("id")?,
        label: text("label")?,
        class: text("class")?,
        request: ReplayRequest {
            method: text("method")?.unwrap_or_else(|| "GET".into()).into_bytes(),
            uri,
            version: b"HTTP/1.1".to_vec(),
            headers,
            body: text("body")?.unwrap_or_default().into_bytes(),
        },
    })
}

/// Header values in the dataset are Latin-1 text stored as JSON strings: send each
/// character below U+0100 as one byte, as a client would, and anything else as UTF-8.
fn latin1(s: &str) -> Vec<u8> {
    if s.is_ascii() {
        return s.as_bytes().to_vec();
    }
    if s.chars().all(|c| (c as u32) < 0x100) {
        return s.chars().map(|c| c as u32 as u8).collect();
    }
    s.as_bytes().to_vec()
}

/// Parses one raw HTTP/1.x request. Line ends may be CRLF or bare LF.
pub fn parse_raw_http(data: &[u8]) -> Result<ReplayRequest, String> {
    let mut rest = data;
    // Tolerate blank lines before the request line (RFC 9112 §2.2).
    while let Some(r) = rest
        .strip_prefix(b"\r\n")
        .or_else(|| rest.strip_prefix(b"\n"))
    {
        rest = r;
    }
    let (line, after) = split_line(rest).ok_or("no request line")?;
    rest = after;
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    let method = parts.next().ok_or("empty request line")?;
    let uri = parts.next().ok_or("request line has no target")?;
    let version = parts.next().unwrap_or(b"HTTP/1.1");
    if parts.next().is_some() {
        return Err("request line has more than three parts".into());
    }
    let mut headers = Vec::new();
    loop {
        let (line, after) = split_line(rest).ok_or("header section does not end")?;
        rest = after;
        if line.is_empty() {
            break;
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("header line without a colon")?;
        let (name, value) = line.split_at(colon);
        // `value` starts with the colon found above, so it is not empty.
        headers.push((name.to_vec(), value[1..].trim_ascii().to_vec()));
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_slice())
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case(b"chunked")) {
        dechunk(rest)?
    } else if let Some(len) = header("content-length") {
        let len: usize = std::str::from_utf8(len)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad Content-Length")?;
        // A Content-Length past the end takes what is there.
        rest[..len.min(rest.len())].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(ReplayRequest {
        method: method.to_vec(),
        uri: uri.to_vec(),
        version: version.to_vec(),
        headers,
        body,
    })
}

/// Splits off one line; the line excludes its `\n` and an `\r` before it.
fn split_line(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let nl = data.iter().position(|&b| b == b'\n')?;
    // `nl` is the index of a byte of `data`, so both slices are in bounds.
    let line = &data[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Some((line, &data[nl + 1..]))
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let (line, after) = split_line(data).ok_or("chunk size line does not end")?;
        let size = line.split(|&b| b == b';').next().unwrap_or(line);
        let size = std::str::from_utf8(size.trim_ascii())
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or("bad chunk size")?;
        if size == 0 {
            return Ok(body);
        }
        if after.len() < size {
            return Err("chunk is shorter than its size".into());
        }
        // `after` holds at least `size` bytes (checked above).
        body.extend_from_slice(&after[..size]);
        data = &after[size..];
        data = data
            .strip_prefix(b"\r\n")
            .or_else(|| data.strip_prefix(b"\n"))
            .ok_or("chunk not followed by a line end")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_request_with_content_length() {
        let req =
            parse_raw_http(b"POST /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcdef")
                .unwrap();
        assert_eq!(req.method, b"POST");
        assert_eq!(req.uri, b"/a?b=1");
        assert_eq!(req.headers.len(), 2);
        assert_eq!(req.body, b"abc");
    }

    #[test]
    fn raw_request_chunked() {
        let req = parse_raw_http(
            b"POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n3\nabc\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(req.body, b"abcde");
    }

    #[test]
    fn raw_request_errors_are_values() {
        for bad in [
            &b""[..],
            b"GET\r\n\r\n",
            b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"GET / HTTP/1.1 extra\r\n\r\n",
        ] {
            assert!(parse_raw_http(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn json_record_errors_are_values() {
        assert!(parse_json_record(b"{").is_err());
        assert!(parse_json_record(b"[1]").is_err());
        assert!(parse_json_record(br#"{"id":"x"}"#).is_err());
        assert!(parse_json_record(br#"{"path":"/","headers":[]}"#).is_err());
        assert!(parse_json_record(br#"{"path":"/","headers":{"a":1}}"#).is_err());
        let rec =
            parse_json_record(br#"{"path":"/p","query":"a=1","headers":{"X":"\u00e9"}}"#).unwrap();
        assert_eq!(rec.request.uri, b"/p?a=1");
        assert_eq!(rec.request.headers, vec![(b"X".to_vec(), vec![0xe9])]);
        assert_eq!(rec.request.method, b"GET");
    }
}
