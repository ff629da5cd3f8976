//! One stage, in-process: the request as the server received it, through a `Transaction`,
//! the albedo response back through it, and the report's log lines.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Verdict, Waf};

use crate::albedo;
use crate::goftw;
use crate::http1::{self, ParsedRequest};
use crate::logline::{LogCheck, LogEntry};
use crate::suite::Stage;

/// Request bodies are fed in chunks of this size.
const REQUEST_CHUNK: usize = 4096;

/// Client port of every connection; the suite never looks at it.
const CLIENT_PORT: u16 = 50000;

/// The time every transaction starts at (2026-07-25): fixed, so runs are reproducible.
pub fn fixed_now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_785_000_000)
}

/// A stage ready to run.
#[derive(Debug)]
pub struct PreparedStage {
    pub request: ParsedRequest,
    /// `SERVER_ADDR`/`SERVER_PORT`: `dest_addr` (default `localhost`) and `port` (default 80).
    pub server: SocketAddr,
    /// `None` when the stage checks no log (status or transport error only): skipped.
    pub check: Option<LogCheck>,
    pub retry_once: bool,
}

/// Builds the request of a stage and compiles its checks.
pub fn prepare(stage: &Stage) -> Result<PreparedStage, String> {
    let input = &stage.input;
    let request = match &input.encoded_request {
        Some(b64) if !b64.is_empty() => {
            if input.data.as_deref().is_some_and(|d| !d.is_empty()) {
                return Err("both data and encoded_request are set".into());
            }
            http1::parse_raw(&goftw::decode_encoded_request(b64)?)
        }
        _ => http1::receive_built(&goftw::build_request(input)?),
    };
    let check = match (&stage.output.log, stage.output.checks_log()) {
        (Some(log), true) => Some(LogCheck::new(log)?),
        _ => None,
    };
    Ok(PreparedStage {
        request,
        server: server_addr(input.dest_addr.as_deref(), input.port),
        check,
        retry_once: stage.output.retry_once.unwrap_or(false),
    })
}

/// The server address a stage targets; `localhost` and names that are not IP addresses
/// become 127.0.0.1.
fn server_addr(dest: Option<&str>, port: Option<u16>) -> SocketAddr {
    let ip = dest
        .and_then(|d| d.parse::<IpAddr>().ok())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    SocketAddr::new(ip, port.unwrap_or(80))
}

/// What happened to one request.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Logged rules (`log`, not `nolog`), in match order.
    pub entries: Vec<LogEntry>,
    /// What the backend answered, if the request got that far.
    pub response: Option<albedo::Response>,
    /// Phase and status of an intervention, if one happened.
    pub intervention: Option<(u8, u16)>,
}

impl Outcome {
    pub fn ids(&self) -> Vec<u64> {
        self.entries.iter().map(|e| e.id).collect()
    }

    pub fn lines(&self) -> Vec<String> {
        self.entries.iter().map(LogEntry::render).collect()
    }
}

/// Runs one request through a transaction, as a server with the WAF in front of albedo
/// would. On an intervention, no later phase is fed (as a server would answer at once);
/// the transaction is still finished, so phase 5 runs.
pub fn drive(waf: &Waf, req: &ParsedRequest, server: SocketAddr) -> Outcome {
    let client = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), CLIENT_PORT);
    let conn = ConnectionInfo::new(client, server);
    let mut tx = waf.transaction(&conn, fixed_now());
    let mut out = Outcome::default();
    let stopped = |v: Verdict, phase: u8, out: &mut Outcome| -> bool {
        match v.intervention() {
            Some(i) => {
                out.intervention = Some((phase, i.status));
                true
            }
            None => false,
        }
    };

    'phases: {
        let headers: Vec<(&[u8], &[u8])> = req
            .headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        let head = RequestHead::new(&req.method, &req.uri, &req.version, &headers);
        if stopped(tx.request_headers(&head), 1, &mut out) {
            break 'phases;
        }
        if tx.wants_request_body() {
            for chunk in req.body.chunks(REQUEST_CHUNK) {
                if stopped(tx.request_body(chunk), 2, &mut out) {
                    break 'phases;
                }
            }
        }
        if stopped(tx.request_end(), 2, &mut out) {
            break 'phases;
        }

        let resp = albedo::respond(&req.method, &req.uri, &req.body);
        out.response = Some(resp.clone());
        let rheaders: Vec<(&[u8], &[u8])> = resp
            .headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        let rhead = ResponseHead::new(resp.status, b"HTTP/1.1", &rheaders);
        if stopped(tx.response_headers(&rhead), 3, &mut out) {
            break 'phases;
        }
        if tx.wants_response_body() && !resp.body.is_empty() {
            // Two chunks, so that streaming is exercised.
            let (a, b) = resp.body.split_at(resp.body.len() / 2);
            for chunk in [a, b] {
                if !chunk.is_empty() && stopped(tx.response_body(chunk), 4, &mut out) {
                    break 'phases;
                }
            }
        }
        if stopped(tx.response_end(), 4, &mut out) {
            break 'phases;
        }
    }

    let report = tx.finish();
    out.entries = report
        .matched_rules
        .iter()
        .filter(|r| r.log)
        .map(LogEntry::from_matched)
        .collect();
    out
}

/// A short, printable description of a request for `CRS_VERBOSE`.
pub fn summary(req: &ParsedRequest, out: &Outcome) -> String {
    let show = printable;
    let mut s = format!(
        "    request: {} {} {}\n",
        show(&req.method),
        show(&req.uri),
        show(&req.version)
    );
    for (n, v) in &req.headers {
        s.push_str(&format!("      {}: {}\n", show(n), show(v)));
    }
    let preview = &req.body[..req.body.len().min(200)];
    s.push_str(&format!(
        "    body: {} bytes ({}){}{}\n",
        req.body.len(),
        req.framing,
        if req.body.is_empty() { "" } else { ": " },
        show(preview)
    ));
    if let Some((phase, status)) = out.intervention {
        s.push_str(&format!(
            "    intervention in phase {phase}: status {status}\n"
        ));
    }
    if let Some(r) = &out.response {
        let headers: Vec<String> = r
            .headers
            .iter()
            .map(|(n, v)| format!("{}: {}", show(n), show(v)))
            .collect();
        s.push_str(&format!(
            "    response: {} [{}] {} bytes{}{}\n",
            r.status,
            headers.join(", "),
            r.body.len(),
            if r.body.is_empty() { "" } else { ": " },
            show(&r.body[..r.body.len().min(200)])
        ));
    }
    s
}

/// Bytes as text for messages: printable ASCII as is, anything else as `\xHH`.
pub fn printable(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        if (0x20..=0x7e).contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("\\x{c:02x}"));
        }
    }
    out
}
