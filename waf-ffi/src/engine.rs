//! `waf_builder` and `waf_engine`: load SecLang rules once, share the compiled engine.

use std::ffi::{c_char, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use waf_core::Waf;

use crate::error::set_last_error;
use crate::mail::{MailSender, WafSmtp};
use crate::types::{bytes, utf8, WafReportCallback, WafStatus};

/// Collects rule sources and options; becomes a `waf_engine` with `waf_builder_build`.
/// Created by `waf_builder_new`; owned by the caller until `waf_builder_build` (which always
/// consumes it) or `waf_builder_free`. Used by one thread at a time.
pub struct WafBuilder {
    inner: waf_core::WafBuilder,
    callback: WafReportCallback,
    fail_open: bool,
    serves_gates: bool,
    smtp: Option<waf_tower::SmtpMailer>,
    fleet: Option<(waf_redis::FleetConfig, String)>,
    /// A policy file has state a fleet shares (rate limits, bans, scoring, waiting rooms).
    shares_state: bool,
}

/// A compiled rule set, created by `waf_builder_build` and freed with `waf_engine_free`.
/// Immutable and thread-safe: any number of threads (and forked worker processes) may use
/// one engine at the same time. Transactions keep the rules alive on their own, so an engine
/// may be freed while its transactions are still running.
pub struct WafEngine {
    pub(crate) waf: Waf,
    pub(crate) callback: WafReportCallback,
    pub(crate) fail_open: bool,
    /// The sign-in mail's sender, when the builder had SMTP settings and the policy has
    /// sign-in.
    pub(crate) mail: Option<MailSender>,
    /// Built with a fleet and a policy with state the fleet shares.
    pub(crate) uses_fleet: bool,
    /// The fleet store, started by each process's first transaction (so that a worker
    /// mirrors the fleet's sign-in records before a code is posted to it).
    pub(crate) fleet: Option<std::sync::Arc<crate::fleet::LazyFleetStore>>,
}

/// A new, empty builder. Returns NULL only if the library panicked (out of memory).
#[no_mangle]
pub unsafe extern "C" fn waf_builder_new() -> *mut WafBuilder {
    ffi_guard!("waf_builder_new", std::ptr::null_mut(), {
        Box::into_raw(Box::new(WafBuilder {
            inner: Waf::builder(),
            callback: None,
            fail_open: false,
            serves_gates: false,
            smtp: None,
            fleet: None,
            shares_state: false,
        }))
    })
}

/// Frees a builder that was not built. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_free(builder: *mut WafBuilder) {
    ffi_guard!("waf_builder_free", (), {
        if !builder.is_null() {
            // SAFETY: non-null pointers come from waf_builder_new and are freed once.
            drop(unsafe { Box::from_raw(builder) });
        }
    })
}

/// Replaces the inner builder with `f(inner)`.
fn update(b: &mut WafBuilder, f: impl FnOnce(waf_core::WafBuilder) -> waf_core::WafBuilder) {
    let inner = std::mem::take(&mut b.inner);
    b.inner = f(inner);
}

/// Adds SecLang rule text. `name` (NUL-terminated UTF-8) names the source in error
/// messages; `text` is `len` bytes of UTF-8, copied. Errors in the text are reported by
/// `waf_builder_build`. `Include` paths in the text resolve against the working directory.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_rules(
    builder: *mut WafBuilder,
    name: *const c_char,
    text: *const c_char,
    len: usize,
) -> WafStatus {
    ffi_guard!("waf_builder_rules", WafStatus::Panic, {
        non_null!(builder);
        // SAFETY: the caller passes a NUL-terminated name.
        let name = match unsafe { utf8(name, "name") } {
            Ok(n) => n,
            Err(e) => return e,
        };
        // SAFETY: the caller passes `len` readable bytes.
        let text = match unsafe { bytes(text.cast(), len, "text") } {
            Ok(t) => t,
            Err(e) => return e,
        };
        let Ok(text) = std::str::from_utf8(text) else {
            set_last_error("rule text is not UTF-8");
            return WafStatus::InvalidArgument;
        };
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        let b = unsafe { &mut *builder };
        update(b, |i| i.seclang(name, text));
        WafStatus::Ok
    })
}

/// Adds a rule file (NUL-terminated path, any bytes); read by `waf_builder_build`.
/// `Include` paths inside it resolve against the file's directory.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_rules_file(
    builder: *mut WafBuilder,
    path: *const c_char,
) -> WafStatus {
    ffi_guard!("waf_builder_rules_file", WafStatus::Panic, {
        non_null!(builder, path);
        // SAFETY: non-null and NUL-terminated per the contract.
        let path = unsafe { std::ffi::CStr::from_ptr(path) };
        let path = PathBuf::from(OsStr::from_bytes(path.to_bytes()));
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        let b = unsafe { &mut *builder };
        update(b, |i| i.seclang_file(path));
        WafStatus::Ok
    })
}

/// Adds every file matching a glob pattern (NUL-terminated UTF-8), in sorted order.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_rules_glob(
    builder: *mut WafBuilder,
    pattern: *const c_char,
) -> WafStatus {
    ffi_guard!("waf_builder_rules_glob", WafStatus::Panic, {
        non_null!(builder);
        // SAFETY: NUL-terminated per the contract.
        let pattern = match unsafe { utf8(pattern, "pattern") } {
            Ok(p) => p,
            Err(e) => return e,
        };
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        let b = unsafe { &mut *builder };
        update(b, |i| i.seclang_glob(pattern));
        WafStatus::Ok
    })
}

/// Adds the native policy (rules with conditions, lists, rate limits, bans, IP
/// intelligence) from a TOML file (NUL-terminated path, any bytes), read now: the same
/// format as `waf_core::policy::PolicyConfig` (`[[list]]`, `[[rules]]`, `[[rate_limit]]`,
/// `[bans]`, `[scoring]`, `[geo]`, `[[reputation]]`); relative paths inside it resolve
/// against the file's directory. A file that cannot be read or is not valid TOML returns
/// WAF_STATUS_RULES_ERROR with `waf_last_error()` naming file, line and column; errors in
/// expressions are reported by `waf_builder_build`, with the rule, line and column.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_policy_file(
    builder: *mut WafBuilder,
    path: *const c_char,
) -> WafStatus {
    ffi_guard!("waf_builder_policy_file", WafStatus::Panic, {
        non_null!(builder, path);
        // SAFETY: non-null and NUL-terminated per the contract.
        let path = unsafe { std::ffi::CStr::from_ptr(path) };
        let path = PathBuf::from(OsStr::from_bytes(path.to_bytes()));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                set_last_error(format!("{}: cannot read: {e}", path.display()));
                return WafStatus::RulesError;
            }
        };
        let mut config: waf_core::policy::PolicyConfig = match toml::from_str(&text) {
            Ok(c) => c,
            Err(e) => {
                let at = e.span().map_or(String::new(), |s| {
                    let before = &text[..s.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                    format!(":{line}:{col}")
                });
                set_last_error(format!("{}{at}: {}", path.display(), e.message()));
                return WafStatus::RulesError;
            }
        };
        config.resolve_paths(path.parent().unwrap_or(std::path::Path::new(".")));
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        let serves = unsafe { (*builder).serves_gates };
        if let Err(e) = waf_core::policy::check_gates_served(&config, "this C host").or_else(|e| {
            if serves {
                Ok(())
            } else {
                Err(e)
            }
        }) {
            set_last_error(format!("{}: {e}", path.display()));
            return WafStatus::RulesError;
        }
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        let b = unsafe { &mut *builder };
        b.shares_state |= !config.rate_limits.is_empty()
            || config.bans.is_some()
            || config.scoring.is_some()
            || config
                .gates
                .as_ref()
                .is_some_and(|g| !g.waiting_rooms.is_empty() || g.sign_in.is_some());
        update(b, |i| i.policy(config));
        WafStatus::Ok
    })
}

/// Declares that the host serves the gates (`[gates]`: challenges, waiting rooms,
/// sign-in) as the `waf_answer` functions describe: their endpoints, their answers and
/// their cookies (and sends the sign-in mail). Without it (the default), a policy with
/// `[gates]` is refused by `waf_builder_policy_file`, so a host that does not serve them
/// never answers a gate with a bare status. Call it before `waf_builder_policy_file`.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_serve_gates(
    builder: *mut WafBuilder,
    serves: bool,
) -> WafStatus {
    ffi_guard!("waf_builder_serve_gates", WafStatus::Panic, {
        non_null!(builder);
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        unsafe { (*builder).serves_gates = serves };
        WafStatus::Ok
    })
}

/// Sets the SMTP relay through which the library sends the sign-in codes itself (see
/// `waf_engine_send_mail`): checked now (WAF_STATUS_INVALID_ARGUMENT with
/// `waf_last_error()` for a NULL or empty host, port 0, an unknown `security`, a `from`
/// that is not an address, a user name without a password); nothing connects until the
/// first mail. The strings are copied. Without it the host sends the mail itself
/// (`waf_answer_mail`).
#[no_mangle]
pub unsafe extern "C" fn waf_builder_smtp(
    builder: *mut WafBuilder,
    smtp: *const WafSmtp,
) -> WafStatus {
    ffi_guard!("waf_builder_smtp", WafStatus::Panic, {
        non_null!(builder, smtp);
        // SAFETY: non-null and readable per the contract; its strings are NULL or
        // NUL-terminated.
        let m = match unsafe { crate::mail::mailer(&*smtp) } {
            Ok(m) => m,
            Err(e) => return e,
        };
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        unsafe { (*builder).smtp = Some(m) };
        WafStatus::Ok
    })
}

/// Shares the native policy's state (rate limits, bans, behaviour scores, waiting rooms)
/// through Redis with every process and host that uses the same Redis and namespace (see
/// `waf_fleet`). Checked now (WAF_STATUS_INVALID_ARGUMENT with `waf_last_error()` for no
/// server, a URL that is not a Redis URL, several URLs without `cluster`, an empty
/// namespace or prefix, an interval, timeout, `cut_off` or `nodes` out of bounds); nothing
/// connects and no thread starts until the engine's first request in each process (so an
/// engine may be built before the host forks). Requests never wait on Redis: decisions are
/// taken on a local mirror that one thread per process reconciles every interval. Not
/// shared: sign-in codes, attempt counts and sign-out revocations (per process). The
/// strings are copied.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_fleet(
    builder: *mut WafBuilder,
    fleet: *const crate::fleet::WafFleet,
) -> WafStatus {
    ffi_guard!("waf_builder_fleet", WafStatus::Panic, {
        non_null!(builder, fleet);
        // SAFETY: non-null and readable per the contract; its pointers as its fields say.
        let c = match unsafe { crate::fleet::config(&*fleet) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        crate::fleet::watch_forks();
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        unsafe { (*builder).fleet = Some(c) };
        WafStatus::Ok
    })
}

/// Sets the report callback that `waf_tx_finish` calls (NULL: none, the default).
#[no_mangle]
pub unsafe extern "C" fn waf_builder_report_callback(
    builder: *mut WafBuilder,
    callback: WafReportCallback,
) -> WafStatus {
    ffi_guard!("waf_builder_report_callback", WafStatus::Panic, {
        non_null!(builder);
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        unsafe { (*builder).callback = callback };
        WafStatus::Ok
    })
}

/// What a phase call answers after a caught panic: fail-closed (false, the default)
/// intervenes with status 500, fail-open (true) lets the transaction go on.
#[no_mangle]
pub unsafe extern "C" fn waf_builder_fail_open(
    builder: *mut WafBuilder,
    fail_open: bool,
) -> WafStatus {
    ffi_guard!("waf_builder_fail_open", WafStatus::Panic, {
        non_null!(builder);
        // SAFETY: non-null, from waf_builder_new, used by one thread at a time.
        unsafe { (*builder).fail_open = fail_open };
        WafStatus::Ok
    })
}

/// Compiles the rules. Always consumes `builder` (do not use or free it afterwards, even
/// on failure). On success writes a new engine to `*engine` and returns WAF_STATUS_OK; on
/// a rule error returns WAF_STATUS_RULES_ERROR, writes NULL, and `waf_last_error()` says
/// what and where (file:line:column).
#[no_mangle]
pub unsafe extern "C" fn waf_builder_build(
    builder: *mut WafBuilder,
    engine: *mut *mut WafEngine,
) -> WafStatus {
    ffi_guard!("waf_builder_build", WafStatus::Panic, {
        non_null!(builder, engine);
        // SAFETY: non-null, from waf_builder_new; ownership passes to us here.
        let b = unsafe { Box::from_raw(builder) };
        // SAFETY: `engine` is a non-null writable pointer per the contract.
        unsafe { *engine = std::ptr::null_mut() };
        let uses_fleet = b.fleet.is_some() && b.shares_state;
        let fleet = b.fleet.map(|(config, namespace)| {
            std::sync::Arc::new(crate::fleet::LazyFleetStore::new(config, namespace))
        });
        let inner = match &fleet {
            Some(store) => b.inner.policy_store(store.clone()),
            None => b.inner,
        };
        match inner.build() {
            Ok(waf) => {
                let e = Box::new(WafEngine {
                    callback: b.callback,
                    fail_open: b.fail_open,
                    mail: b.smtp.filter(|_| waf.has_sign_in()).map(MailSender::new),
                    uses_fleet,
                    fleet: fleet.filter(|_| uses_fleet),
                    waf,
                });
                // SAFETY: as above.
                unsafe { *engine = Box::into_raw(e) };
                WafStatus::Ok
            }
            Err(err) => {
                set_last_error(err.to_string());
                WafStatus::RulesError
            }
        }
    })
}

/// Whether `engine` keeps policy state in a fleet: it was built with `waf_builder_fleet`
/// and a policy file with rate limits, bans, scoring, a waiting room or sign-in (otherwise the
/// fleet has nothing to share; a host should say so at load). False when `engine` is
/// NULL.
#[no_mangle]
pub unsafe extern "C" fn waf_engine_uses_fleet(engine: *const WafEngine) -> bool {
    ffi_guard!("waf_engine_uses_fleet", false, {
        if engine.is_null() {
            return false;
        }
        // SAFETY: non-null engine from waf_builder_build, only read.
        unsafe { (*engine).uses_fleet }
    })
}

/// Frees an engine. NULL is a no-op. Transactions started from it stay valid.
#[no_mangle]
pub unsafe extern "C" fn waf_engine_free(engine: *mut WafEngine) {
    ffi_guard!("waf_engine_free", (), {
        if !engine.is_null() {
            // SAFETY: non-null pointers come from waf_builder_build and are freed once.
            drop(unsafe { Box::from_raw(engine) });
        }
    })
}

/// Writes the number of compiled rules to `*count`.
#[no_mangle]
pub unsafe extern "C" fn waf_engine_rule_count(
    engine: *const WafEngine,
    count: *mut usize,
) -> WafStatus {
    ffi_guard!("waf_engine_rule_count", WafStatus::Panic, {
        non_null!(engine, count);
        // SAFETY: both non-null and valid per the contract; the engine is only read.
        unsafe { *count = (*engine).waf.rule_count() };
        WafStatus::Ok
    })
}

/// Turns a string into a C string, replacing interior NULs (which rule text may contain).
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}
