//! `waf_tx`: one request/response pair, driven phase by phase.

use std::ffi::{c_char, c_void, CString};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use waf_core::{ConnectionInfo, DisruptiveAction, RequestHead, ResponseHead, Transaction, Verdict};

use crate::engine::{c_string, WafEngine};
use crate::error::set_last_error;
use crate::types::{
    bytes, headers, utf8, WafAction, WafIntervention, WafReport, WafReportCallback, WafStatus,
};

/// One transaction (one request and its response), created by `waf_tx_new` and freed with
/// `waf_tx_free`, finished or not. Used by one thread at a time; it may move to another
/// thread between calls. Strings it hands out live until the next phase call or the free.
pub struct WafTx {
    /// `None` once finished.
    tx: Option<Transaction>,
    unique_id: CString,
    callback: WafReportCallback,
    user_data: *mut c_void,
    fail_open: bool,
    /// Set when a call panicked: every later phase answers with the panic verdict.
    poisoned: bool,
    /// Storage behind `waf_intervention.url` / `.log` of the last phase call.
    url: Option<CString>,
    log: Option<CString>,
    /// For the gates (`crate::gate`): the engine, the connection, when the request came,
    /// and the last intervention.
    pub(crate) engine: waf_core::Waf,
    conn: ConnectionInfo,
    now: SystemTime,
    last: Option<waf_core::Intervention>,
}

impl WafTx {
    pub(crate) fn conn(&self) -> &ConnectionInfo {
        &self.conn
    }

    pub(crate) fn now(&self) -> Option<SystemTime> {
        Some(self.now)
    }

    pub(crate) fn id(&self) -> &str {
        self.unique_id.to_str().unwrap_or("")
    }

    /// The native policy's effects; `None` once finished.
    pub(crate) fn effects(&self) -> Option<&waf_core::policy::PolicyEffects> {
        self.tx.as_ref().map(|t| t.policy_effects())
    }

    pub(crate) fn last_intervention(&self) -> Option<waf_core::Intervention> {
        self.last.clone()
    }
}

/// Parses an address given as text; unparsable text (a Unix socket, say) becomes the
/// unspecified address, so a transaction always starts.
fn socket_addr(text: &str, port: u16) -> SocketAddr {
    let ip = text
        .parse::<IpAddr>()
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    SocketAddr::new(ip, port)
}

/// Starts a transaction. `client_addr` and `server_addr` are NUL-terminated IP addresses
/// as text ("192.0.2.1", "::1"); text that is not an IP address (a Unix socket path) is
/// recorded as 0.0.0.0. `now_unix_ms` is when the request arrived (the library reads no
/// clock). `unique_id` (NUL-terminated UTF-8) may be NULL to let the engine make one up.
/// `user_data` is passed to the report callback and never dereferenced.
/// On success writes the transaction to `*tx`.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_new(
    engine: *const WafEngine,
    client_addr: *const c_char,
    client_port: u16,
    server_addr: *const c_char,
    server_port: u16,
    now_unix_ms: u64,
    unique_id: *const c_char,
    user_data: *mut c_void,
    tx: *mut *mut WafTx,
) -> WafStatus {
    ffi_guard!("waf_tx_new", WafStatus::Panic, {
        non_null!(engine, tx);
        // SAFETY: `tx` is non-null and writable per the contract.
        unsafe { *tx = std::ptr::null_mut() };
        // SAFETY: NUL-terminated per the contract.
        let client = match unsafe { utf8(client_addr, "client_addr") } {
            Ok(s) => s,
            Err(e) => return e,
        };
        // SAFETY: as above.
        let server = match unsafe { utf8(server_addr, "server_addr") } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let conn = ConnectionInfo::new(
            socket_addr(client, client_port),
            socket_addr(server, server_port),
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_millis(now_unix_ms);
        // SAFETY: non-null engine from waf_builder_build; engines are only read.
        let engine = unsafe { &*engine };
        if let Some(fleet) = &engine.fleet {
            // One atomic load and a read lock once started in this process.
            fleet.start();
        }
        let t = if unique_id.is_null() {
            engine.waf.transaction(&conn, now)
        } else {
            // SAFETY: non-null and NUL-terminated per the contract.
            let id = match unsafe { utf8(unique_id, "unique_id") } {
                Ok(s) => s,
                Err(e) => return e,
            };
            engine.waf.transaction_with_id(&conn, now, id)
        };
        let boxed = Box::new(WafTx {
            unique_id: c_string(t.unique_id()),
            tx: Some(t),
            callback: engine.callback,
            user_data,
            fail_open: engine.fail_open,
            poisoned: false,
            url: None,
            log: None,
            engine: engine.waf.clone(),
            conn,
            now,
            last: None,
        });
        // SAFETY: as above.
        unsafe { *tx = Box::into_raw(boxed) };
        WafStatus::Ok
    })
}

/// Frees a transaction (finished or not; an unfinished one gets no report). NULL is a
/// no-op. Strings it returned become invalid.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_free(tx: *mut WafTx) {
    ffi_guard!("waf_tx_free", (), {
        if !tx.is_null() {
            // SAFETY: non-null pointers come from waf_tx_new and are freed once.
            drop(unsafe { Box::from_raw(tx) });
        }
    })
}

/// The transaction's unique id (NUL-terminated), owned by the transaction and valid until
/// `waf_tx_free`. NULL if `tx` is NULL.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_unique_id(tx: *const WafTx) -> *const c_char {
    ffi_guard!("waf_tx_unique_id", std::ptr::null(), {
        if tx.is_null() {
            return std::ptr::null();
        }
        // SAFETY: non-null transaction from waf_tx_new, only read here.
        unsafe { (*tx).unique_id.as_ptr() }
    })
}

/// Seconds the client should wait before retrying, when the native policy refused the
/// request for a rate limit or a ban (send it as `Retry-After`); 0 when there is none or
/// `tx` is NULL or finished.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_retry_after(tx: *const WafTx) -> u64 {
    ffi_guard!("waf_tx_retry_after", 0, {
        if tx.is_null() {
            return 0;
        }
        // SAFETY: non-null transaction from waf_tx_new, only read here.
        let Some(t) = (unsafe { (*tx).tx.as_ref() }) else {
            return 0;
        };
        t.policy_effects()
            .response_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    })
}

/// What a phase call answers after a panic: the fail verdict, per the engine's setting.
///
/// # Safety
/// `tx` and `out` are the (possibly null) arguments of the phase call that panicked.
unsafe fn panic_verdict(tx: *mut WafTx, out: *mut WafIntervention) -> WafStatus {
    let fail_open = if tx.is_null() {
        false
    } else {
        // SAFETY: the transaction is still allocated; the panic ended every borrow of it.
        unsafe {
            (*tx).poisoned = true;
            (*tx).fail_open
        }
    };
    if !out.is_null() {
        let iv = if fail_open {
            WafIntervention::NONE
        } else {
            WafIntervention {
                status: 500,
                action: WafAction::Deny,
                ..WafIntervention::NONE
            }
        };
        // SAFETY: `out` is a writable caller-owned struct per the contract.
        unsafe { out.write(iv) };
    }
    WafStatus::Panic
}

/// Runs one phase on a live transaction and turns the verdict into a status and `*out`.
///
/// # Safety
/// `tx` is null or from `waf_tx_new`; `out` is null or writable.
unsafe fn phase(
    tx: *mut WafTx,
    out: *mut WafIntervention,
    f: impl FnOnce(&mut Transaction) -> Result<Verdict, WafStatus>,
) -> WafStatus {
    non_null!(tx);
    // SAFETY: non-null, from waf_tx_new, used by one thread at a time.
    let t = unsafe { &mut *tx };
    if t.poisoned {
        set_last_error("transaction poisoned by an earlier panic");
        // SAFETY: forwarded arguments.
        return unsafe { panic_verdict(tx, out) };
    }
    let Some(inner) = t.tx.as_mut() else {
        set_last_error("transaction already finished");
        return WafStatus::InvalidArgument;
    };
    let verdict = match f(inner) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let (status, iv) = match verdict {
        Verdict::Intervene(i) => {
            t.last = Some(i.clone());
            t.log = i.message.as_deref().map(c_string);
            let (action, url) = match &i.action {
                DisruptiveAction::Drop => (WafAction::Drop, None),
                DisruptiveAction::Redirect(u) => (WafAction::Redirect, Some(c_string(u))),
                _ => (WafAction::Deny, None),
            };
            t.url = url;
            let iv = WafIntervention {
                status: i.status,
                action,
                rule_id: i.rule_id,
                url: t.url.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                log: t.log.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            };
            (WafStatus::Intervene, iv)
        }
        _ => (WafStatus::Ok, WafIntervention::NONE),
    };
    if !out.is_null() {
        // SAFETY: `out` is a writable caller-owned struct per the contract.
        unsafe { out.write(iv) };
    }
    status
}

/// Phase 1: request line and headers. Buffers are borrowed for the call; `headers` may be
/// NULL when `n_headers` is 0. Returns WAF_STATUS_OK (go on) or WAF_STATUS_INTERVENE with
/// `*out` filled (`out` may be NULL if the caller only wants the status).
#[no_mangle]
pub unsafe extern "C" fn waf_tx_request_headers(
    tx: *mut WafTx,
    method: *const u8,
    method_len: usize,
    uri: *const u8,
    uri_len: usize,
    version: *const u8,
    version_len: usize,
    headers: *const crate::types::WafHeader,
    n_headers: usize,
    out: *mut WafIntervention,
) -> WafStatus {
    ffi_guard!("waf_tx_request_headers", panic_verdict(tx, out), {
        // SAFETY: arguments forwarded per the contract above.
        unsafe {
            phase(tx, out, |t| {
                let m = bytes(method, method_len, "method")?;
                let u = bytes(uri, uri_len, "uri")?;
                let v = bytes(version, version_len, "version")?;
                let hs = headers_arg(headers, n_headers)?;
                Ok(t.request_headers(&RequestHead::new(m, u, v, &hs)))
            })
        }
    })
}

/// `headers()` with the argument's name.
///
/// # Safety
/// As `types::headers`.
unsafe fn headers_arg<'a>(
    ptr: *const crate::types::WafHeader,
    n: usize,
) -> Result<crate::types::Fields<'a>, WafStatus> {
    // SAFETY: forwarded.
    unsafe { headers(ptr, n) }
}

/// Writes whether the engine inspects the request body. When false, send the body on
/// untouched and call `waf_tx_request_end` without chunks.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_wants_request_body(
    tx: *const WafTx,
    wants: *mut bool,
) -> WafStatus {
    ffi_guard!("waf_tx_wants_request_body", WafStatus::Panic, {
        non_null!(tx, wants);
        // SAFETY: non-null, from waf_tx_new; only read.
        let t = unsafe { &*tx };
        // SAFETY: `wants` is writable per the contract.
        unsafe { *wants = t.tx.as_ref().is_some_and(|t| t.wants_request_body()) };
        WafStatus::Ok
    })
}

/// A chunk of the request body (`len` bytes, borrowed; NULL allowed when `len` is 0).
/// Buffered up to the configured body limit; past it the answer is 413 or the rest is
/// ignored, per `SecRequestBodyLimitAction`.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_request_body(
    tx: *mut WafTx,
    data: *const u8,
    len: usize,
    out: *mut WafIntervention,
) -> WafStatus {
    ffi_guard!("waf_tx_request_body", panic_verdict(tx, out), {
        // SAFETY: arguments forwarded per the contract above.
        unsafe { phase(tx, out, |t| Ok(t.request_body(bytes(data, len, "data")?))) }
    })
}

/// Phase 2: the request body is complete (or absent). Always call it before the response.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_request_end(
    tx: *mut WafTx,
    out: *mut WafIntervention,
) -> WafStatus {
    ffi_guard!("waf_tx_request_end", panic_verdict(tx, out), {
        // SAFETY: arguments forwarded per the contract above.
        unsafe { phase(tx, out, |t| Ok(t.request_end())) }
    })
}

/// Phase 3: response status and headers (borrowed for the call).
#[no_mangle]
pub unsafe extern "C" fn waf_tx_response_headers(
    tx: *mut WafTx,
    status: u16,
    version: *const u8,
    version_len: usize,
    headers: *const crate::types::WafHeader,
    n_headers: usize,
    out: *mut WafIntervention,
) -> WafStatus {
    ffi_guard!("waf_tx_response_headers", panic_verdict(tx, out), {
        // SAFETY: arguments forwarded per the contract above.
        unsafe {
            phase(tx, out, |t| {
                let v = bytes(version, version_len, "version")?;
                let hs = headers_arg(headers, n_headers)?;
                Ok(t.response_headers(&ResponseHead::new(status, v, &hs)))
            })
        }
    })
}

/// Writes whether the engine inspects the response body (response body access on and
/// the MIME type listed). When false, pass the body through and call
/// `waf_tx_response_end` without chunks.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_wants_response_body(
    tx: *const WafTx,
    wants: *mut bool,
) -> WafStatus {
    ffi_guard!("waf_tx_wants_response_body", WafStatus::Panic, {
        non_null!(tx, wants);
        // SAFETY: non-null, from waf_tx_new; only read.
        let t = unsafe { &*tx };
        // SAFETY: `wants` is writable per the contract.
        unsafe { *wants = t.tx.as_ref().is_some_and(|t| t.wants_response_body()) };
        WafStatus::Ok
    })
}

/// A chunk of the response body (borrowed), buffered up to the response body limit.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_response_body(
    tx: *mut WafTx,
    data: *const u8,
    len: usize,
    out: *mut WafIntervention,
) -> WafStatus {
    ffi_guard!("waf_tx_response_body", panic_verdict(tx, out), {
        // SAFETY: arguments forwarded per the contract above.
        unsafe { phase(tx, out, |t| Ok(t.response_body(bytes(data, len, "data")?))) }
    })
}

/// Phase 4: the response body is complete (or absent).
#[no_mangle]
pub unsafe extern "C" fn waf_tx_response_end(
    tx: *mut WafTx,
    out: *mut WafIntervention,
) -> WafStatus {
    ffi_guard!("waf_tx_response_end", panic_verdict(tx, out), {
        // SAFETY: arguments forwarded per the contract above.
        unsafe { phase(tx, out, |t| Ok(t.response_end())) }
    })
}

/// Phase 5 (logging): finishes the transaction and calls the report callback, if any, on
/// this thread with the transaction's `user_data`. Later phase calls return
/// WAF_STATUS_INVALID_ARGUMENT; the transaction must still be freed with `waf_tx_free`.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_finish(tx: *mut WafTx) -> WafStatus {
    ffi_guard!("waf_tx_finish", WafStatus::Panic, {
        non_null!(tx);
        // SAFETY: non-null, from waf_tx_new, used by one thread at a time.
        let t = unsafe { &mut *tx };
        let Some(inner) = t.tx.take() else {
            set_last_error("transaction already finished");
            return WafStatus::InvalidArgument;
        };
        let report = inner.finish();
        if let Some(cb) = t.callback {
            let json = c_string(&audit_json(&report));
            let ids: Vec<u64> = report
                .matched_rules
                .iter()
                .filter(|m| m.log)
                .map(|m| m.id)
                .collect();
            let iv = report.intervention.as_ref();
            let r = WafReport {
                unique_id: t.unique_id.as_ptr(),
                intervention_status: iv.map_or(0, |i| i.status),
                intervention_rule_id: iv.map_or(0, |i| i.rule_id),
                inbound_anomaly_score: report.inbound_anomaly_score,
                outbound_anomaly_score: report.outbound_anomaly_score,
                matched_rules: report.matched_rules.len(),
                logged_rules: ids.len(),
                logged_rule_ids: if ids.is_empty() {
                    std::ptr::null()
                } else {
                    ids.as_ptr()
                },
                audit_json: json.as_ptr(),
                audit_json_len: json.as_bytes().len(),
            };
            // SAFETY: the callback's contract is in waf.h; every pointer in `r` lives until
            // after it returns.
            unsafe { cb(t.user_data, &r) };
        }
        WafStatus::Ok
    })
}

/// The report as one line of JSON.
fn audit_json(r: &waf_core::Report) -> String {
    let iv = |i: &waf_core::Intervention| serde_json::json!({ "status": i.status, "rule_id": i.rule_id, "message": i.message });
    let rules: Vec<_> = r
        .matched_rules
        .iter()
        .filter(|m| m.log)
        .map(|m| {
            serde_json::json!({
                "id": m.id,
                "phase": m.phase,
                "msg": m.message,
                "data": m.data,
                "severity": m.severity.map(|s| s.name()),
                "tags": m.tags,
                "var": m.matched_var_name,
                "matched": m.matched_data,
                "file": m.file,
                "line": m.line,
            })
        })
        .collect();
    serde_json::json!({
        "unique_id": r.unique_id,
        "intervention": r.intervention.as_ref().map(iv),
        "would_intervene": r.would_intervene.as_ref().map(iv),
        "inbound_anomaly_score": r.inbound_anomaly_score,
        "outbound_anomaly_score": r.outbound_anomaly_score,
        "matched_rules_total": r.matched_rules.len(),
        "matched_rules": rules,
    })
    .to_string()
}
