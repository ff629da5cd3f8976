//! `waf_answer` and the gates (challenges, waiting rooms, email-code sign-in) for C hosts.
//!
//! A C host that serves the gates calls `waf_builder_serve_gates` before loading a policy
//! with `[gates]` (without it such a policy is refused at load, so a host that does not
//! serve them never answers with a bare status), and then, per request:
//!
//! 1. after phase 1 went on, if `waf_engine_is_gate_path` says the path is a gate endpoint
//!    (`/.waf/` by default), reads the form body (at most `WAF_GATE_FORM_LEN` bytes) and calls
//!    `waf_tx_gate_request`, which answers it: send the `waf_answer` instead of passing the
//!    request on;
//! 2. on `WAF_STATUS_INTERVENE`, calls `waf_tx_answer` and sends that answer (the gate's page,
//!    JSON or redirect, or the block page): the same pages every host serves;
//! 3. adds `waf_tx_set_cookie` to a response that went through.
//!
//! The sign-in mail: `waf_answer_mail` gives the recipient, subject and body. Either the
//! library sends it (`waf_builder_smtp` set a relay: `waf_engine_send_mail` queues it for
//! the engine's mail thread without blocking, see `mail.rs`) or the host does (its own SMTP
//! client, or a queue); when that fails the host sends `waf_answer_mail_failed` instead.
//! The core does no I/O.

use std::ffi::{c_char, CString};
use std::time::SystemTime;

use waf_core::policy::gate::Mail;
use waf_core::RequestHead;

use crate::engine::{c_string, WafEngine};
use crate::error::set_last_error;
use crate::tx::WafTx;
use crate::types::{bytes, headers, WafHeader, WafStatus};

/// Most bytes of a gate form body a host must read (larger bodies: answer 413);
/// `waf_core::limits::DEFAULT_GATE_FORM_LEN`.
pub const WAF_GATE_FORM_LEN: usize = 8192;
const _: () = assert!(WAF_GATE_FORM_LEN == waf_core::limits::DEFAULT_GATE_FORM_LEN);

/// A whole answer to send (status, headers, body), from `waf_tx_answer` or
/// `waf_tx_gate_request`; may carry a sign-in mail. Owned by the caller, freed with
/// `waf_answer_free`; independent of the transaction (it may outlive it). Used by one
/// thread at a time.
pub struct WafAnswer {
    status: u16,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
    mail: Option<[CString; 3]>,
    /// The same mail, for `waf_engine_send_mail`.
    to_send: Option<Mail>,
    failed: Option<Box<WafAnswer>>,
}

impl WafAnswer {
    fn from_http(r: http::Response<Vec<u8>>) -> WafAnswer {
        let (parts, body) = r.into_parts();
        WafAnswer {
            status: parts.status.as_u16(),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            body,
            mail: None,
            to_send: None,
            failed: None,
        }
    }

    fn from_gate(r: &waf_core::policy::gate::GateResponse) -> WafAnswer {
        let mut a = WafAnswer::from_http(waf_core::host::gate_http_response(r));
        if let Some(m) = &r.mail {
            a.mail = Some([c_string(&m.to), c_string(&m.subject), c_string(&m.body)]);
            a.to_send = Some(m.clone());
        }
        a.failed = r
            .send_failed
            .as_deref()
            .map(|f| Box::new(WafAnswer::from_gate(f)));
        a
    }
}

fn give(a: WafAnswer, out: *mut *mut WafAnswer) {
    // SAFETY: callers checked `out` is non-null and writable.
    unsafe { *out = Box::into_raw(Box::new(a)) };
}

/// Whether `path` (the request path, without the query; `len` bytes) is under the gate
/// endpoints' prefix of `engine`'s policy. False when there are no gates or `engine` is
/// NULL.
#[no_mangle]
pub unsafe extern "C" fn waf_engine_is_gate_path(
    engine: *const WafEngine,
    path: *const u8,
    len: usize,
) -> bool {
    ffi_guard!("waf_engine_is_gate_path", false, {
        if engine.is_null() {
            return false;
        }
        // SAFETY: `len` readable bytes per the contract.
        let Ok(p) = (unsafe { bytes(path, len, "path") }) else {
            return false;
        };
        // SAFETY: non-null engine from waf_builder_build, only read.
        unsafe { (*engine).waf.is_gate_path(p) }
    })
}

/// Answers a gate endpoint request of `tx` (call it after phase 1 went on): the request
/// line and headers as for `waf_tx_request_headers`, and its form body (`body_len` bytes,
/// at most `WAF_GATE_FORM_LEN`). Writes a new answer to `*out`, or NULL when the path is
/// not a gate endpoint (then answer 404). Does not finish the transaction.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_gate_request(
    tx: *mut WafTx,
    method: *const u8,
    method_len: usize,
    uri: *const u8,
    uri_len: usize,
    version: *const u8,
    version_len: usize,
    headers_in: *const WafHeader,
    n_headers: usize,
    body: *const u8,
    body_len: usize,
    out: *mut *mut WafAnswer,
) -> WafStatus {
    ffi_guard!("waf_tx_gate_request", WafStatus::Panic, {
        non_null!(tx, out);
        // SAFETY: `out` is non-null and writable per the contract.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: non-null, from waf_tx_new, used by one thread at a time.
        let t = unsafe { &*tx };
        // SAFETY: the buffers are readable for their lengths per the contract.
        let parsed = unsafe {
            (|| {
                Ok::<_, WafStatus>((
                    bytes(method, method_len, "method")?,
                    bytes(uri, uri_len, "uri")?,
                    bytes(version, version_len, "version")?,
                    headers(headers_in, n_headers)?,
                    bytes(body, body_len, "body")?,
                ))
            })()
        };
        let (m, u, v, hs, b) = match parsed {
            Ok(x) => x,
            Err(e) => return e,
        };
        let head = RequestHead::new(m, u, v, &hs);
        let r = t.engine.gate_request(
            t.conn(),
            &head,
            b,
            t.now().unwrap_or_else(SystemTime::now),
            t.id(),
        );
        if let Some(r) = r {
            give(WafAnswer::from_gate(&r), out);
        }
        WafStatus::Ok
    })
}

/// After a phase returned WAF_STATUS_INTERVENE: the whole answer to send (the gate's
/// page, JSON or redirect when a gate intervened, else the block page, with `Retry-After`,
/// `Location` and `Cache-Control`), written to `*out`. `accept` is the request's `Accept`
/// header (`accept_len` bytes; NULL with 0 when absent).
#[no_mangle]
pub unsafe extern "C" fn waf_tx_answer(
    tx: *const WafTx,
    status: u16,
    accept: *const u8,
    accept_len: usize,
    out: *mut *mut WafAnswer,
) -> WafStatus {
    ffi_guard!("waf_tx_answer", WafStatus::Panic, {
        non_null!(tx, out);
        // SAFETY: `out` is non-null and writable per the contract.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: non-null, from waf_tx_new, only read here.
        let t = unsafe { &*tx };
        // SAFETY: `accept_len` readable bytes per the contract.
        let accept = match unsafe { bytes(accept, accept_len, "accept") } {
            Ok(a) if accept_len > 0 => Some(a),
            Ok(_) => None,
            Err(e) => return e,
        };
        let Some(effects) = t.effects() else {
            set_last_error("transaction already finished");
            return WafStatus::InvalidArgument;
        };
        let i = t.last_intervention().unwrap_or(waf_core::Intervention {
            status,
            action: waf_core::DisruptiveAction::Deny,
            rule_id: 0,
            message: None,
        });
        let r = waf_core::host::intervention_response(&t.engine, effects, &i, t.id(), accept);
        give(WafAnswer::from_http(r), out);
        WafStatus::Ok
    })
}

/// How many `Set-Cookie` values the gates add to a response that went through (0 when
/// none, or `tx` is NULL or finished).
#[no_mangle]
pub unsafe extern "C" fn waf_tx_set_cookie_count(tx: *const WafTx) -> usize {
    ffi_guard!("waf_tx_set_cookie_count", 0, {
        if tx.is_null() {
            return 0;
        }
        // SAFETY: non-null transaction from waf_tx_new, only read here.
        unsafe { (*tx).effects() }.map_or(0, |e| e.set_cookies.len())
    })
}

/// The `i`th `Set-Cookie` value (its length in `*len`), owned by the transaction and valid
/// until its next phase call or free; NULL when out of range.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_set_cookie(
    tx: *const WafTx,
    i: usize,
    len: *mut usize,
) -> *const u8 {
    ffi_guard!("waf_tx_set_cookie", std::ptr::null(), {
        if tx.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: non-null transaction from waf_tx_new, only read here.
        let Some(c) = unsafe { (*tx).effects() }.and_then(|e| e.set_cookies.get(i)) else {
            return std::ptr::null();
        };
        // SAFETY: `len` is non-null and writable per the contract.
        unsafe { *len = c.len() };
        c.as_ptr()
    })
}

/// The answer's status. 0 when `answer` is NULL.
#[no_mangle]
pub unsafe extern "C" fn waf_answer_status(answer: *const WafAnswer) -> u16 {
    ffi_guard!("waf_answer_status", 0, {
        if answer.is_null() {
            return 0;
        }
        // SAFETY: non-null answer, only read.
        let answer = unsafe { &*answer };
        answer.status
    })
}

/// How many headers the answer has (`Set-Cookie` may repeat; send each).
#[no_mangle]
pub unsafe extern "C" fn waf_answer_header_count(answer: *const WafAnswer) -> usize {
    ffi_guard!("waf_answer_header_count", 0, {
        if answer.is_null() {
            return 0;
        }
        // SAFETY: non-null answer, only read.
        let answer = unsafe { &*answer };
        answer.headers.len()
    })
}

/// Writes the `i`th header to `*out` (buffers owned by the answer, valid until
/// `waf_answer_free`). WAF_STATUS_INVALID_ARGUMENT when out of range.
#[no_mangle]
pub unsafe extern "C" fn waf_answer_header(
    answer: *const WafAnswer,
    i: usize,
    out: *mut WafHeader,
) -> WafStatus {
    ffi_guard!("waf_answer_header", WafStatus::Panic, {
        non_null!(answer, out);
        // SAFETY: non-null answer, only read.
        let answer = unsafe { &*answer };
        let Some((k, v)) = answer.headers.get(i) else {
            set_last_error(format!("header {i} is out of range"));
            return WafStatus::InvalidArgument;
        };
        let h = WafHeader {
            name: k.as_ptr(),
            name_len: k.len(),
            value: v.as_ptr(),
            value_len: v.len(),
        };
        // SAFETY: `out` is non-null and writable.
        unsafe { out.write(h) };
        WafStatus::Ok
    })
}

/// The answer's body (its length in `*len`), owned by the answer. NULL when `answer` or
/// `len` is NULL.
#[no_mangle]
pub unsafe extern "C" fn waf_answer_body(answer: *const WafAnswer, len: *mut usize) -> *const u8 {
    ffi_guard!("waf_answer_body", std::ptr::null(), {
        if answer.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: non-null answer, only read.
        let answer = unsafe { &*answer };
        // SAFETY: `len` is non-null and writable.
        unsafe { *len = answer.body.len() };
        answer.body.as_ptr()
    })
}

/// Whether the answer carries a sign-in mail to send first; if so writes its recipient,
/// subject and plain-text body (NUL-terminated UTF-8, owned by the answer). The body holds
/// the code: never log it.
#[no_mangle]
pub unsafe extern "C" fn waf_answer_mail(
    answer: *const WafAnswer,
    to: *mut *const c_char,
    subject: *mut *const c_char,
    body: *mut *const c_char,
) -> bool {
    ffi_guard!("waf_answer_mail", false, {
        if answer.is_null() || to.is_null() || subject.is_null() || body.is_null() {
            return false;
        }
        // SAFETY: non-null answer, only read.
        let answer = unsafe { &*answer };
        let Some([t, s, b]) = answer.mail.as_ref() else {
            return false;
        };
        // SAFETY: the out pointers are non-null and writable.
        unsafe {
            *to = t.as_ptr();
            *subject = s.as_ptr();
            *body = b.as_ptr();
        }
        true
    })
}

/// Consumes `answer` (do not use or free it afterwards) and returns the answer to send
/// instead when its mail could not be sent (NULL when it had no mail; `answer` is still
/// consumed).
#[no_mangle]
pub unsafe extern "C" fn waf_answer_mail_failed(answer: *mut WafAnswer) -> *mut WafAnswer {
    ffi_guard!("waf_answer_mail_failed", std::ptr::null_mut(), {
        if answer.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: non-null answers come from this module and are consumed once.
        let a = unsafe { Box::from_raw(answer) };
        a.failed.map_or(std::ptr::null_mut(), Box::into_raw)
    })
}

/// Frees an answer. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn waf_answer_free(answer: *mut WafAnswer) {
    ffi_guard!("waf_answer_free", (), {
        if !answer.is_null() {
            // SAFETY: non-null answers come from this module and are freed once.
            drop(unsafe { Box::from_raw(answer) });
        }
    })
}

/// Whether the last intervention of `tx` came from a gate (a challenge, the waiting room,
/// sign-in): its answer (`waf_tx_answer`) is a page, JSON or redirect the host must send
/// as it is, not an error status of its own. False when `tx` is NULL or finished.
#[no_mangle]
pub unsafe extern "C" fn waf_tx_gate_intervened(tx: *const WafTx) -> bool {
    ffi_guard!("waf_tx_gate_intervened", false, {
        if tx.is_null() {
            return false;
        }
        // SAFETY: non-null transaction from waf_tx_new, only read here.
        unsafe { (*tx).effects() }.is_some_and(|e| e.gate.is_some())
    })
}

/// Whether `engine`'s policy has email-code sign-in (`[gates.sign_in]`), whose codes the
/// host must send (`waf_answer_mail`). False when `engine` is NULL.
#[no_mangle]
pub unsafe extern "C" fn waf_engine_has_sign_in(engine: *const WafEngine) -> bool {
    ffi_guard!("waf_engine_has_sign_in", false, {
        if engine.is_null() {
            return false;
        }
        // SAFETY: non-null engine from waf_builder_build, only read.
        unsafe { (*engine).waf.has_sign_in() }
    })
}

/// Sends the sign-in mail `answer` carries (`waf_answer_mail`) through the SMTP relay of
/// `engine` (`waf_builder_smtp`), without blocking: the mail is queued for the engine's
/// mail thread, and `answer` is left as it was (send it; do not log the mail).
///
/// WAF_STATUS_OK when the mail was queued, or when `answer` carries none. A mail that the
/// relay then refuses is logged on standard error (without the code or the address) and
/// the visitor, who saw the ordinary page, can ask for a new code.
/// WAF_STATUS_UNAVAILABLE when the queue is full (`WAF_MAIL_QUEUE` mails waiting) or
/// the thread cannot start, and WAF_STATUS_INVALID_ARGUMENT when `engine` has no relay (or
/// no sign-in): then send `waf_answer_mail_failed(answer)` instead. `waf_last_error()`
/// says which.
#[no_mangle]
pub unsafe extern "C" fn waf_engine_send_mail(
    engine: *const WafEngine,
    answer: *const WafAnswer,
) -> WafStatus {
    ffi_guard!("waf_engine_send_mail", WafStatus::Panic, {
        non_null!(engine, answer);
        // SAFETY: non-null answer from this module, only read.
        let Some(mail) = (unsafe { &*answer }).to_send.clone() else {
            return WafStatus::Ok;
        };
        // SAFETY: non-null engine from waf_builder_build, only read (the sender locks).
        let Some(sender) = (unsafe { &*engine }).mail.as_ref() else {
            set_last_error("no SMTP relay is set for this engine (waf_builder_smtp)");
            return WafStatus::InvalidArgument;
        };
        match sender.send(mail) {
            Ok(()) => WafStatus::Ok,
            Err(e) => {
                set_last_error(format!("the sign-in mail was not queued: {e}"));
                WafStatus::Unavailable
            }
        }
    })
}
