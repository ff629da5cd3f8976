//! Per-transaction evaluation: the state behind [`crate::Transaction`].
//!
//! The third stage. [`TxState`] owns what the transaction has seen ([`data::TxData`]),
//! the transformation cache and the per-transaction overrides that `ctl` can make, and
//! runs the steps of each phase ([`rules`]).

mod cache;
mod chain_table;
pub(crate) mod data;
mod effects;
mod fold;
mod plan;
mod request;
mod rules;

mod pool;
mod runtime;
mod store;
mod time;
mod vars;

pub(crate) use fold::fold_setup;
pub(crate) use runtime::Runtime;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::actions::ctl::{BodyProcessor, RuleSelector, TargetRef};
use crate::actions::AllowScope;
use crate::body;
use crate::compile::{LimitAction, Program};
use crate::report::{MatchedRule, Report};
use crate::transaction::{ConnectionInfo, RequestHead, ResponseHead};
use crate::verdict::{DisruptiveAction, Intervention, Verdict};
use crate::waf::{EngineMode, Waf};

use cache::TransformCache;
use data::{FileInfo, Pair, TxData};

/// Where the transaction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    ExpectRequestHeaders,
    ExpectRequestBody,
    ExpectResponseHeaders,
    ExpectResponseBody,
    Finished,
}

/// The state of one transaction.
#[derive(Debug)]
pub(crate) struct TxState {
    program: Arc<Program>,
    runtime: Arc<Runtime>,
    data: TxData,
    cache: TransformCache,
    stage: Stage,
    mode: EngineMode,
    request_body_access: bool,
    request_body_limit: usize,
    response_body_access: bool,
    response_body_limit: usize,
    body_processor: Option<BodyProcessor>,
    force_request_body_variable: bool,
    audit_engine: bool,
    removed_rules: Vec<RuleSelector>,
    removed_targets: Vec<(RuleSelector, TargetRef)>,
    allow: Option<AllowScope>,
    intervention: Option<Intervention>,
    would_intervene: Option<Intervention>,
    matched: Vec<MatchedRule>,
    request_body_over_limit: bool,
    response_body_over_limit: bool,
    scratch: rules::MatchScratch,
    /// The [`crate::compile::plan::COLLECTIONS`] that hold a value in this phase.
    nonempty: crate::compile::plan::VarSet,
    /// Where `setvar` expands names and values (see `effects`).
    text: pool::TextScratch,
    policy: crate::policy::TxPolicy,
    #[cfg(feature = "ml")]
    ml_model: Option<crate::ml::Model>,
    ml: Option<crate::report::MlScore>,
}

impl Drop for TxState {
    /// Leaves the transaction's tables to the next transaction (see [`pool`]).
    fn drop(&mut self) {
        self.runtime.pool.put(pool::Recycled {
            data: std::mem::take(&mut self.data),
            cache: std::mem::take(&mut self.cache),
            scratch: std::mem::take(&mut self.scratch),
            text: std::mem::take(&mut self.text),
            removed_rules: std::mem::take(&mut self.removed_rules),
            removed_targets: std::mem::take(&mut self.removed_targets),
        });
    }
}

impl TxState {
    pub(crate) fn new(
        waf: Waf,
        conn: &ConnectionInfo,
        now: SystemTime,
        id: Option<&str>,
    ) -> TxState {
        let Waf {
            program,
            runtime,
            policy,
            #[cfg(feature = "ml")]
            ml,
        } = waf;
        let policy = crate::policy::TxPolicy::new(policy, conn, now);
        let config = &program.config;
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let serial = runtime.next_serial();
        let mut recycled = runtime.pool.take();
        recycled.cache.set_width(program.prefix_count);
        let mut data = recycled.data;
        data.tx.prepare(&program.tx_names);
        // Writes into the recycled buffers below cannot fail.
        use std::io::Write;
        // With the engine off no rule runs (and no `ctl` can turn it on), so what only rules
        // read is not formatted: a host that runs just the policy pays for none of it.
        if config.engine_mode != EngineMode::Off {
            let _ = write!(data.remote_addr, "{}", conn.client.ip());
            let _ = write!(data.remote_port, "{}", conn.client.port());
            let _ = write!(data.server_addr, "{}", conn.server.ip());
            let _ = write!(data.server_port, "{}", conn.server.port());
            data.web_app_id
                .extend_from_slice(config.web_app_id.as_bytes());
        }
        match id {
            Some(id) => data.unique_id.extend_from_slice(id.as_bytes()),
            None => {
                let _ = write!(
                    data.unique_id,
                    "{:x}{:06x}",
                    since.as_micros(),
                    serial & 0xff_ffff
                );
            }
        }
        data.epoch_secs = since.as_secs();
        data.highest_severity = 255;
        TxState {
            mode: config.engine_mode,
            request_body_access: config.request_body_access,
            request_body_limit: config.request_body_limit,
            response_body_access: config.response_body_access,
            response_body_limit: config.response_body_limit,
            data,
            program,
            runtime,
            cache: recycled.cache,
            stage: Stage::ExpectRequestHeaders,
            body_processor: None,
            force_request_body_variable: false,
            audit_engine: true,
            removed_rules: recycled.removed_rules,
            removed_targets: recycled.removed_targets,
            allow: None,
            intervention: None,
            would_intervene: None,
            matched: Vec::new(),
            request_body_over_limit: false,
            response_body_over_limit: false,
            scratch: recycled.scratch,
            nonempty: Default::default(),
            text: recycled.text,
            policy,
            #[cfg(feature = "ml")]
            ml_model: ml,
            ml: None,
        }
    }

    pub(crate) fn unique_id(&self) -> &str {
        // Made from a formatted number or a caller's `&str`, so always UTF-8.
        std::str::from_utf8(&self.data.unique_id).unwrap_or_default()
    }

    fn stopped(&self) -> Option<Verdict> {
        self.intervention.clone().map(Verdict::Intervene)
    }

    pub(crate) fn request_headers(&mut self, head: &RequestHead<'_>) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        if self.stage != Stage::ExpectRequestHeaders {
            return Verdict::Continue;
        }
        self.stage = Stage::ExpectRequestBody;
        let step = self.policy.request_headers(head);
        if let Some(v) = self.apply_policy(step) {
            return v;
        }
        if self.mode == EngineMode::Off {
            // No rule runs (and so no ctl can turn the engine on): copy nothing.
            return Verdict::Continue;
        }
        request::set_request_line(&mut self.data, head.method, head.uri, head.version);
        self.apply_path_exclusions();
        let separator = self.program.config.argument_separator;
        let limit = self.program.config.arguments_limit;
        let headers = head.headers.iter().map(|&(k, v)| (k, v));
        self.data.set_pairs(|d| &mut d.request_headers, headers);
        let mut pairs = Vec::new();
        for (k, v) in head.headers {
            if k.eq_ignore_ascii_case(b"cookie") {
                body::cookie::parse(v, &mut pairs);
            }
        }
        data::drop_verified_cookies(
            &mut pairs,
            &mut self.data.request_headers,
            self.policy.effects(),
        );
        self.data.cookies = pairs.drain(..).map(|(k, v)| Pair::new(k, v)).collect();
        // The query string's pairs go straight into recycled pairs (`TxData::pair`).
        let query = std::mem::take(&mut self.data.query_string);
        let outcome = self.data.fill_pairs(
            |d| &mut d.args_get,
            |push| body::urlencoded::parse_each(&query, separator, limit, push),
        );
        self.data.query_string = query;
        self.data.urlencoded_error |= outcome.invalid_encoding;
        if outcome.args_limit_exceeded {
            // A limit never drops input silently (issue 13): refuse instead.
            let _ = self.limit_intervention(400, "query string has more arguments than the limit");
        }
        // As libmodsecurity does, REQBODY_PROCESSOR is known from Content-Type in phase 1
        // already (CRS rules test it there); rules may still change it with ctl.
        self.data.body_processor = self.default_body_processor();
        self.run_phase(1)
    }

    pub(crate) fn wants_request_body(&self) -> bool {
        self.mode != EngineMode::Off && self.request_body_access && self.intervention.is_none()
    }

    pub(crate) fn request_body(&mut self, chunk: &[u8]) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        if self.stage != Stage::ExpectRequestBody {
            return Verdict::Continue;
        }
        self.data.request_body_length += chunk.len();
        if !self.wants_request_body() {
            // libmodsecurity 3 enforces SecRequestBodyLimit on every body it is given, body
            // access or not (`Transaction::appendRequestBody`).
            if self.mode != EngineMode::Off
                && !self.request_body_over_limit
                && self.data.request_body_length > self.request_body_limit
            {
                return self.request_body_limit_hit();
            }
            return Verdict::Continue;
        }
        if self.request_body_over_limit {
            return Verdict::Continue;
        }
        let room = self
            .request_body_limit
            .saturating_sub(self.data.request_body.len());
        if chunk.len() <= room {
            self.data.request_body.extend_from_slice(chunk);
            return Verdict::Continue;
        }
        self.data.request_body.extend_from_slice(&chunk[..room]);
        self.request_body_limit_hit()
    }

    /// The request body went past `SecRequestBodyLimit`: `INBOUND_DATA_ERROR`, and with
    /// `Reject` a 403, the status libmodsecurity 3 answers ("Request body limit is marked
    /// to reject the request").
    fn request_body_limit_hit(&mut self) -> Verdict {
        self.request_body_over_limit = true;
        self.data.inbound_data_error = true;
        match self.program.config.request_body_limit_action {
            LimitAction::ProcessPartial => Verdict::Continue,
            LimitAction::Reject => {
                self.limit_intervention(403, "request body is larger than the limit")
            }
        }
    }

    fn limit_intervention(&mut self, status: u16, message: &str) -> Verdict {
        let iv = Intervention {
            status,
            action: DisruptiveAction::Deny,
            rule_id: 0,
            message: Some(message.to_string()),
        };
        match self.mode {
            EngineMode::On => {
                self.intervention = Some(iv.clone());
                Verdict::Intervene(iv)
            }
            _ => {
                self.would_intervene.get_or_insert(iv);
                Verdict::Continue
            }
        }
    }

    pub(crate) fn request_end(&mut self) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        if self.stage > Stage::ExpectRequestBody {
            return Verdict::Continue;
        }
        if self.stage == Stage::ExpectRequestHeaders {
            // The host skipped phase 1; run it on an empty request rather than not at all.
            let head = RequestHead::new(b"", b"", b"", &[]);
            if let Verdict::Intervene(i) = self.request_headers(&head) {
                return Verdict::Intervene(i);
            }
        }
        self.stage = Stage::ExpectResponseHeaders;
        if self.wants_request_body() {
            self.process_request_body();
        } else if self.mode != EngineMode::Off
            && !self.request_body_over_limit
            && self.declared_body_length() > self.request_body_limit
        {
            // Body access off and the host sent no body: its declared length still counts
            // against the limit, as the body would in libmodsecurity 3.
            if let v @ Verdict::Intervene(_) = self.request_body_limit_hit() {
                return v;
            }
        }
        #[cfg(feature = "ml")]
        self.score_ml();
        let verdict = self.run_phase(2);
        if verdict == Verdict::Continue && self.policy.has_late() {
            let score = crate::actions::setvar::parse_int(
                self.data
                    .tx
                    .get(b"inbound_anomaly_score")
                    .unwrap_or_default(),
            );
            let ml = self
                .ml
                .as_ref()
                .map_or(0, crate::report::MlScore::per_mille);
            let step = self.policy.request_end(score, ml);
            if let Some(v) = self.apply_policy(step) {
                return v;
            }
        }
        verdict
    }

    /// Carries out what the native policy decided ([`crate::policy`]).
    fn apply_policy(&mut self, step: crate::policy::PolicyStep) -> Option<Verdict> {
        self.removed_rules.extend(step.remove);
        if step.skip_crs {
            self.allow = Some(AllowScope::All);
        }
        let iv = step.intervention?;
        if self.mode == EngineMode::DetectionOnly {
            self.would_intervene.get_or_insert(iv);
            return None;
        }
        self.intervention = Some(iv.clone());
        Some(Verdict::Intervene(iv))
    }

    pub(crate) fn policy_effects(&self) -> &crate::policy::PolicyEffects {
        self.policy.effects()
    }

    fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.data
            .request_headers
            .iter()
            .find(|p| p.key.eq_ignore_ascii_case(name))
            .map(|p| p.value.as_slice())
    }

    /// The body processor Content-Type implies (ModSecurity picks only these two by itself).
    fn default_body_processor(&self) -> Option<BodyProcessor> {
        let mime = mime_of(self.header(b"content-type").unwrap_or_default());
        if mime.eq_ignore_ascii_case(b"application/x-www-form-urlencoded") {
            Some(BodyProcessor::Urlencoded)
        } else if mime.eq_ignore_ascii_case(b"multipart/form-data") {
            Some(BodyProcessor::Multipart)
        } else {
            None
        }
    }

    /// Phase-2 body processing. Before a processor runs, the body is made into what the
    /// application will read (issue 13): `Content-Encoding` undone
    /// (`body::content_encoding`), the declared charset or BOM decoded to UTF-8
    /// (`body::charset`), and a body that is JSON or a form inspected as such whatever its
    /// label (`body::sniff`). What cannot be decoded, and every processor limit (arguments,
    /// JSON and XML depth, multipart parts), refuses the request with 400 through
    /// [`Self::limit_intervention`], whatever the rules say: no limit lets input through
    /// uninspected.
    fn process_request_body(&mut self) {
        let content_type = self
            .header(b"content-type")
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let mut processor = self
            .body_processor
            .or_else(|| self.default_body_processor());
        let mut body = std::mem::take(&mut self.data.request_body);
        if !body.is_empty() {
            // Two different Content-Type or Content-Encoding headers: the backend may
            // read either, so no single reading can be inspected (issue 13). Refuse.
            for name in [&b"content-type"[..], b"content-encoding"] {
                let mut values = self
                    .data
                    .request_headers
                    .iter()
                    .filter(|p| p.key.eq_ignore_ascii_case(name))
                    .map(|p| p.value.trim_ascii());
                if let Some(first) = values.next() {
                    if values.any(|v| !v.eq_ignore_ascii_case(first)) {
                        self.data.body_processor = processor;
                        self.data.request_body = body;
                        self.refuse_body(format!(
                            "Conflicting {} headers",
                            String::from_utf8_lossy(name)
                        ));
                        return;
                    }
                }
            }
            if let Some(coding) = self.header(b"content-encoding").map(<[u8]>::to_vec) {
                match body::content_encoding::decode(&coding, body, self.request_body_limit) {
                    Ok(decoded) => body = decoded,
                    Err(body::content_encoding::Refused(msg)) => {
                        self.data.body_processor = processor;
                        self.refuse_body(msg);
                        return;
                    }
                }
            }
            // Multipart parts carry their own charsets; only a charset that changes the
            // framing bytes (EBCDIC, UTF-16/32) is decoded for the whole multipart body.
            let label = body::charset::param(&content_type);
            let whole = processor != Some(BodyProcessor::Multipart)
                || label.as_deref().is_some_and(|l| !ascii_compatible(l));
            // For a multipart body only the label is checked (on no bytes): an unknown
            // one is refused like anywhere else.
            let sample: &[u8] = if whole { &body } else { b"" };
            if whole || label.is_some() {
                match body::charset::decode(label.as_deref(), sample) {
                    Ok(_) if !whole => {}
                    Ok(std::borrow::Cow::Borrowed(b)) if b.len() != body.len() => {
                        body = b.to_vec(); // a BOM was removed
                    }
                    Ok(std::borrow::Cow::Borrowed(_)) => {}
                    Ok(std::borrow::Cow::Owned(decoded)) => body = decoded,
                    Err(body::charset::Unsupported(l)) => {
                        self.data.body_processor = processor;
                        self.data.request_body = body;
                        self.refuse_body(format!(
                            "Request body charset {} is not supported",
                            String::from_utf8_lossy(&l)
                        ));
                        return;
                    }
                }
            }
            // Values of an ASCII-compatible legacy charset (Shift_JIS, windows-1251) are
            // percent-decoded bytes in that charset: decode them after parsing.
            let value_charset = label.filter(|l| ascii_compatible(l) && !is_utf8_label(l));
            if processor.is_none()
                && body::sniff::is_form(&body, self.program.config.argument_separator)
            {
                processor = Some(BodyProcessor::Urlencoded);
            }
            if processor.is_none()
                && body::sniff::may_be_xml(&body)
                && body::xml::parse(&body, self.program.config.xml_depth_limit).is_ok()
            {
                processor = Some(BodyProcessor::Xml);
            }
            if matches!(processor, None | Some(BodyProcessor::Urlencoded))
                && body::sniff::may_be_json(&body)
            {
                let config = &self.program.config;
                let mut pairs = Vec::new();
                let parsed = body::json::parse(
                    &body,
                    config.json_depth_limit,
                    config.arguments_limit,
                    &mut pairs,
                );
                if let Err(e) = &parsed {
                    // Too large to inspect as JSON: refuse rather than let it through as
                    // opaque text. (A syntax error only means it is not JSON.)
                    if e.kind == body::BodyErrorKind::Limit {
                        let msg = e.message.clone();
                        self.data.body_processor = processor;
                        self.data.request_body = body;
                        self.refuse_body(msg);
                        return;
                    }
                }
                if parsed.is_ok() {
                    self.data
                        .args_post
                        .extend(pairs.into_iter().map(|(k, v)| Pair::new(k, v)));
                    if processor.is_none() {
                        processor = Some(BodyProcessor::Json);
                        self.data.body_processor = processor;
                        self.data.request_body_visible = self.force_request_body_variable;
                        self.data.request_body = body;
                        return;
                    }
                }
            }
            self.data.body_processor = processor;
            self.run_body_processor(processor, &content_type, &body, value_charset.as_deref());
        }
        self.data.body_processor = processor;
        let config = &self.program.config;
        if processor != Some(BodyProcessor::Multipart)
            && body.len() > config.request_body_no_files_limit
        {
            self.data.inbound_data_error = true;
        }
        if processor != Some(BodyProcessor::Multipart)
            && body.len() > config.request_body_no_files_limit
            && !self.data.reqbody_error
        {
            // ModSecurity flags the body as not fully processed.
            let msg = format!(
                "Request body no files data length is larger than the configured limit ({})",
                config.request_body_no_files_limit
            );
            self.set_body_error(msg);
        }
        self.data.request_body_visible =
            self.force_request_body_variable || processor == Some(BodyProcessor::Urlencoded);
        self.data.request_body = body;
    }

    /// Refuses the request for a body that cannot be inspected: `REQBODY_ERROR` for the
    /// audit log and rules, and a 400 intervention that does not depend on them.
    fn refuse_body(&mut self, msg: String) {
        self.set_body_error(msg.clone());
        let _ = self.limit_intervention(400, &msg);
    }

    fn run_body_processor(
        &mut self,
        processor: Option<BodyProcessor>,
        content_type: &[u8],
        body: &[u8],
        value_charset: Option<&[u8]>,
    ) {
        let config = &self.program.config;
        // SecArgumentsLimit counts ARGS, query string and body together (libmodsecurity 3
        // `Transaction::addArgument`): the body gets what the query string left.
        let arg_room = config
            .arguments_limit
            .saturating_sub(self.data.args_get.len());
        match processor {
            Some(BodyProcessor::Urlencoded) => {
                let mut pairs = Vec::new();
                let outcome =
                    body::urlencoded::parse(body, config.argument_separator, arg_room, &mut pairs);
                self.data.urlencoded_error |= outcome.invalid_encoding;
                if let Some(cs) = value_charset {
                    for (k, v) in &mut pairs {
                        for x in [k, v] {
                            if let Ok(std::borrow::Cow::Owned(d)) =
                                body::charset::decode(Some(cs), x)
                            {
                                *x = d;
                            }
                        }
                    }
                }
                self.data
                    .args_post
                    .extend(pairs.into_iter().map(|(k, v)| Pair::new(k, v)));
                if outcome.args_limit_exceeded {
                    self.refuse_body(format!(
                        "Request body has more than {} arguments",
                        config.arguments_limit
                    ));
                }
            }
            Some(BodyProcessor::Json) => {
                let mut pairs = Vec::new();
                let result = body::json::parse(body, config.json_depth_limit, arg_room, &mut pairs);
                self.data
                    .args_post
                    .extend(pairs.into_iter().map(|(k, v)| Pair::new(k, v)));
                match result {
                    Err(e) if e.kind == body::BodyErrorKind::Limit => self.refuse_body(e.message),
                    Err(e) => self.set_body_error(e.message),
                    Ok(()) => {}
                }
            }
            Some(BodyProcessor::Xml) => match body::xml::parse(body, config.xml_depth_limit) {
                Ok(xml) => {
                    self.data.xml_text = xml.text_nodes;
                    self.data.xml_attrs = xml.attr_values;
                }
                Err(e) if e.kind == body::BodyErrorKind::Limit => self.refuse_body(e.message),
                Err(e) => self.set_body_error(e.message),
            },
            Some(BodyProcessor::Multipart) => {
                let limits = body::multipart::MultipartLimits {
                    max_parts: config.multipart_part_limit,
                    ..Default::default()
                };
                let mp = body::multipart::parse(content_type, body, &limits);
                let strict_error = mp.strict_error();
                self.data
                    .args_post
                    .extend(mp.args.into_iter().map(|(k, v)| Pair::new(k, v)));
                self.data.files = mp
                    .files
                    .iter()
                    .map(|f| FileInfo {
                        field: f.field_name.clone(),
                        filename: f.filename.clone(),
                        size: f.size,
                    })
                    .collect();
                self.data.part_headers = mp
                    .part_headers
                    .into_iter()
                    .map(|(k, v)| Pair::new(k, v))
                    .collect();
                self.data.multipart_names = mp.names;
                self.data.multipart_filenames = mp.filenames;
                let fl = &mp.flags;
                self.data.multipart = data::MultipartFlags {
                    boundary_quoted: fl.boundary_quoted,
                    boundary_whitespace: fl.boundary_whitespace,
                    crlf_lf_lines: fl.crlf_lf_lines(),
                    data_after: fl.data_after,
                    data_before: fl.data_before,
                    file_limit_exceeded: fl.file_limit_exceeded,
                    header_folding: fl.header_folding,
                    invalid_header_folding: fl.invalid_header_folding,
                    invalid_part: fl.invalid_part,
                    invalid_quoting: fl.invalid_quoting,
                    lf_line: fl.lf_line,
                    missing_semicolon: fl.missing_semicolon,
                    unmatched_boundary: fl.unmatched_boundary,
                    strict_error,
                };
                if let Some(msg) = mp.error {
                    match mp.error_kind {
                        body::BodyErrorKind::Limit => self.refuse_body(msg),
                        body::BodyErrorKind::Malformed => self.set_body_error(msg),
                    }
                }
            }
            None => {}
        }
    }

    /// The request body's length: what was fed, or `Content-Length` when nothing was.
    fn declared_body_length(&self) -> usize {
        if self.data.request_body_length > 0 {
            return self.data.request_body_length;
        }
        self.data
            .request_headers
            .iter()
            .find(|p| p.key.eq_ignore_ascii_case(b"content-length"))
            .and_then(|p| std::str::from_utf8(&p.value).ok())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    fn set_body_error(&mut self, msg: String) {
        self.data.reqbody_error = true;
        self.data.reqbody_error_msg = msg.into_bytes();
    }

    pub(crate) fn response_headers(&mut self, head: &ResponseHead<'_>) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        if self.stage < Stage::ExpectResponseHeaders {
            if let Verdict::Intervene(i) = self.request_end() {
                return Verdict::Intervene(i);
            }
        }
        if self.stage != Stage::ExpectResponseHeaders {
            return Verdict::Continue;
        }
        self.policy.response_status(head.status);
        self.stage = Stage::ExpectResponseBody;
        if self.mode == EngineMode::Off {
            return Verdict::Continue;
        }
        self.data.response_status.clear();
        // Writing into a `Vec` cannot fail.
        let _ = std::io::Write::write_fmt(
            &mut self.data.response_status,
            format_args!("{}", head.status),
        );
        data::refill(&mut self.data.response_protocol, head.version);
        let headers = head.headers.iter().map(|&(k, v)| (k, v));
        self.data.set_pairs(|d| &mut d.response_headers, headers);
        for (k, v) in head.headers {
            if k.eq_ignore_ascii_case(b"content-type") {
                data::refill(&mut self.data.response_content_type, v);
            } else if k.eq_ignore_ascii_case(b"content-length") {
                data::refill(&mut self.data.response_content_length, v);
            }
        }
        self.run_phase(3)
    }

    pub(crate) fn wants_response_body(&self) -> bool {
        if self.mode == EngineMode::Off || !self.response_body_access || self.intervention.is_some()
        {
            return false;
        }
        let mime = mime_of(&self.data.response_content_type);
        // The configured types are lower-cased at load.
        let types = &self.program.config.response_body_mime_types;
        types.iter().any(|t| t.eq_ignore_ascii_case(mime))
    }

    pub(crate) fn response_body(&mut self, chunk: &[u8]) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        if self.stage != Stage::ExpectResponseBody
            || !self.wants_response_body()
            || self.response_body_over_limit
        {
            return Verdict::Continue;
        }
        let room = self
            .response_body_limit
            .saturating_sub(self.data.response_body.len());
        if chunk.len() <= room {
            self.data.response_body.extend_from_slice(chunk);
            return Verdict::Continue;
        }
        self.data.response_body.extend_from_slice(&chunk[..room]);
        self.response_body_over_limit = true;
        self.data.outbound_data_error = true;
        match self.program.config.response_body_limit_action {
            LimitAction::ProcessPartial => Verdict::Continue,
            // libmodsecurity 3 answers 403 ("Response body limit is marked to reject").
            LimitAction::Reject => {
                self.limit_intervention(403, "response body is larger than the limit")
            }
        }
    }

    pub(crate) fn response_end(&mut self) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        if self.stage < Stage::ExpectResponseBody {
            let head = ResponseHead::new(200, b"HTTP/1.1", &[]);
            if let Verdict::Intervene(i) = self.response_headers(&head) {
                return Verdict::Intervene(i);
            }
        }
        if self.stage != Stage::ExpectResponseBody {
            return Verdict::Continue;
        }
        self.stage = Stage::Finished;
        self.run_phase(4)
    }

    pub(crate) fn finish(mut self) -> Report {
        // Phase 5 always runs, even after an intervention (ModSecurity's logging phase).
        let _ = self.run_phase_inner(5);
        self.persist_collections();
        self.policy.finish(self.intervention.as_ref());
        let tx_num = |name: &[u8]| {
            self.data
                .tx
                .get(name)
                .map_or(0, crate::actions::setvar::parse_int)
        };
        Report {
            unique_id: self.unique_id().into(),
            inbound_anomaly_score: tx_num(b"blocking_inbound_anomaly_score")
                .max(tx_num(b"inbound_anomaly_score")),
            outbound_anomaly_score: tx_num(b"blocking_outbound_anomaly_score")
                .max(tx_num(b"outbound_anomaly_score")),
            matched_rules: std::mem::take(&mut self.matched),
            intervention: self.intervention.take(),
            would_intervene: self.would_intervene.take(),
            policy: self.policy.take_hits(),
            ml: self.ml.take(),
        }
    }

    /// The ML detector (`crate::ml`): scores the request's values once, at the start of
    /// phase 2, and sets `TX:ML_SCORE` (per mille) and `TX:ML_VAR` for the rules.
    #[cfg(feature = "ml")]
    fn score_ml(&mut self) {
        if self.mode == EngineMode::Off {
            return;
        }
        let Some(model) = &self.ml_model else {
            return;
        };
        let ml = crate::ml::values::score(model, &self.data);
        self.data
            .tx
            .set(b"ml_score", ml.per_mille().to_string().as_bytes());
        self.data.tx.set(b"ml_var", ml.var.as_bytes());
        self.ml = Some(ml);
    }

    /// The values the ML detector scores, with names and scores (training dump, tests).
    #[cfg(feature = "ml")]
    pub(crate) fn ml_values(&self) -> Vec<(String, Vec<u8>, f32)> {
        crate::ml::values::scored_values(self.ml_model.as_ref(), &self.data)
    }

    fn persist_collections(&mut self) {
        let now = self.data.epoch_secs;
        let timeout = self.program.config.collection_timeout_secs;
        for (col, (key, rec)) in std::mem::take(&mut self.data.collections) {
            self.runtime.store.save(col, key, rec, now, timeout);
        }
    }

    fn run_phase(&mut self, phase: u8) -> Verdict {
        if let Some(v) = self.stopped() {
            return v;
        }
        self.run_phase_inner(phase)
    }
}

/// Whether a charset label keeps ASCII bytes as ASCII (so form and multipart framing
/// survive it): not EBCDIC, UTF-16 or UTF-32. Unknown labels count as compatible here; the
/// decoder refuses them.
fn ascii_compatible(label: &[u8]) -> bool {
    if label.starts_with(b"utf-16") || label.starts_with(b"utf-32") || label.starts_with(b"ucs-") {
        return false;
    }
    match encoding_rs::Encoding::for_label(label) {
        Some(e) => e.is_ascii_compatible(),
        None => {
            !(label.starts_with(b"ibm") || label.starts_with(b"cp") || label.starts_with(b"ebcdic"))
        }
    }
}

fn is_utf8_label(label: &[u8]) -> bool {
    matches!(label, b"utf-8" | b"utf8" | b"us-ascii" | b"ascii")
}

/// The MIME type of a Content-Type value: before `;`, trimmed (compare it ignoring ASCII
/// case).
fn mime_of(content_type: &[u8]) -> &[u8] {
    let end = content_type
        .iter()
        .position(|&b| b == b';')
        .unwrap_or(content_type.len());
    content_type[..end].trim_ascii()
}
