//! The `#[repr(C)]` types of the ABI and the helpers that turn C arguments into Rust slices.

use std::ffi::{c_char, c_void, CStr};

/// What a call did. Every function that can fail returns one.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WafStatus {
    /// Done; for a phase call: go on with the transaction.
    Ok = 0,
    /// A phase call decided to intervene; the `waf_intervention` says how.
    Intervene = 1,
    /// A NULL pointer, a length above `isize::MAX`, non-UTF-8 where text is required, or a
    /// call on a finished transaction. Nothing was changed; see `waf_last_error()`.
    InvalidArgument = 2,
    /// The rules did not load (`waf_builder_build`); `waf_last_error()` has file:line:column.
    RulesError = 3,
    /// A bug: the library panicked and caught it. In a phase call the intervention holds the
    /// fail-closed verdict (status 500) unless the engine is fail-open, and the transaction
    /// answers every later phase the same way.
    Panic = 4,
    /// Not possible now, nothing was changed: `waf_engine_send_mail` could not queue the
    /// mail (its queue is full or its thread cannot start); see `waf_last_error()`.
    Unavailable = 5,
}

/// How an intervention ends the transaction.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WafAction {
    /// No intervention: go on.
    None = 0,
    /// Answer with `status` (deny, block).
    Deny = 1,
    /// Close the connection without an answer (drop).
    Drop = 2,
    /// Answer with `status` (a 3xx) and `Location: url` (redirect).
    Redirect = 3,
}

/// The answer to a phase call, written by the library into a caller-owned struct.
///
/// `url` and `log` point into the transaction: valid until the next phase call on the same
/// transaction or `waf_tx_free`, whichever comes first. Never free them.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WafIntervention {
    /// HTTP status to answer with; 0 when `action` is `WAF_ACTION_NONE`.
    pub status: u16,
    /// What to do.
    pub action: WafAction,
    /// Id of the rule that decided; 0 for engine limits and panics.
    pub rule_id: u64,
    /// Redirect target (NUL-terminated) for `WAF_ACTION_REDIRECT`, else NULL.
    pub url: *const c_char,
    /// The rule's message (NUL-terminated), or NULL when it has none.
    pub log: *const c_char,
}

impl WafIntervention {
    /// "Go on".
    pub(crate) const NONE: WafIntervention = WafIntervention {
        status: 0,
        action: WafAction::None,
        rule_id: 0,
        url: std::ptr::null(),
        log: std::ptr::null(),
    };
}

/// One header field; name and value are byte strings, not NUL-terminated, borrowed for the
/// call. A pointer may be NULL only when its length is 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WafHeader {
    /// Field name as sent.
    pub name: *const u8,
    /// Length of `name` in bytes.
    pub name_len: usize,
    /// Field value as sent.
    pub value: *const u8,
    /// Length of `value` in bytes.
    pub value_len: usize,
}

/// The report of a finished transaction, passed to the report callback. Every pointer in it
/// is owned by the library and valid only during the callback.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WafReport {
    /// The transaction's unique id (NUL-terminated).
    pub unique_id: *const c_char,
    /// Status of the intervention carried out, or 0 when there was none.
    pub intervention_status: u16,
    /// Rule id of that intervention, or 0.
    pub intervention_rule_id: u64,
    /// CRS `TX.inbound_anomaly_score`.
    pub inbound_anomaly_score: i64,
    /// CRS `TX.outbound_anomaly_score`.
    pub outbound_anomaly_score: i64,
    /// How many rules matched.
    pub matched_rules: usize,
    /// How many of them log (not `nolog`); hosts usually write the record only when > 0.
    pub logged_rules: usize,
    /// The ids of those `logged_rules` rules, in match order (NULL when there are none).
    pub logged_rule_ids: *const u64,
    /// The audit record: one line of JSON (NUL-terminated) with the fields above and every
    /// matched rule that logs (id, phase, msg, data, severity, tags, variable, matched data,
    /// file, line); `nolog` rules are counted in `matched_rules` but not listed.
    pub audit_json: *const c_char,
    /// Length of `audit_json` in bytes, without the NUL.
    pub audit_json_len: usize,
}

/// Called by `waf_tx_finish` on the calling thread with the transaction's `user_data` and its
/// report. It must not unwind or `longjmp` out, and must not call `waf_tx_*` on the same
/// transaction.
pub type WafReportCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, report: *const WafReport)>;

/// Borrows `len` bytes at `ptr`; `ptr` may be NULL only when `len` is 0.
///
/// # Safety
/// When `len > 0`, `ptr` must point to `len` readable bytes that outlive `'a`.
pub(crate) unsafe fn bytes<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<&'a [u8], WafStatus> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        crate::error::set_last_error(format!("argument `{what}` is NULL with length {len}"));
        return Err(WafStatus::InvalidArgument);
    }
    if len > isize::MAX as usize {
        crate::error::set_last_error(format!("argument `{what}` has length {len} > isize::MAX"));
        return Err(WafStatus::InvalidArgument);
    }
    // SAFETY: non-null, len <= isize::MAX, and the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a NUL-terminated string as UTF-8.
///
/// # Safety
/// `ptr` must be NULL or point to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn utf8<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, WafStatus> {
    if ptr.is_null() {
        crate::error::set_last_error(format!("argument `{what}` is NULL"));
        return Err(WafStatus::InvalidArgument);
    }
    // SAFETY: non-null and NUL-terminated, per the caller's promise.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str().map_err(|_| {
        crate::error::set_last_error(format!("argument `{what}` is not UTF-8"));
        WafStatus::InvalidArgument
    })
}

/// Header fields borrowed from the caller, as `waf-core` takes them.
pub(crate) type Fields<'a> = Vec<(&'a [u8], &'a [u8])>;

/// Borrows a header array as `(name, value)` pairs.
///
/// # Safety
/// When `n > 0`, `ptr` must point to `n` `WafHeader`s whose buffers outlive `'a`.
pub(crate) unsafe fn headers<'a>(ptr: *const WafHeader, n: usize) -> Result<Fields<'a>, WafStatus> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        crate::error::set_last_error("argument `headers` is NULL with a non-zero count");
        return Err(WafStatus::InvalidArgument);
    }
    if n > isize::MAX as usize / std::mem::size_of::<WafHeader>() {
        crate::error::set_last_error(format!("header count {n} is too large"));
        return Err(WafStatus::InvalidArgument);
    }
    // SAFETY: non-null, the size fits isize, and the caller promises `n` headers.
    let hs = unsafe { std::slice::from_raw_parts(ptr, n) };
    hs.iter()
        .map(|h| {
            // SAFETY: each header's buffers are covered by the caller's promise.
            let name = unsafe { bytes(h.name, h.name_len, "header name") }?;
            // SAFETY: as above.
            let value = unsafe { bytes(h.value, h.value_len, "header value") }?;
            Ok((name, value))
        })
        .collect()
}
