//! libmodsecurity 3 (Debian's `libmodsecurity3`), loaded at run time with `libloading`.
//!
//! Only the benchmarks use this: no crate of the product links libmodsecurity. The calls
//! are the ones a host such as ModSecurity-nginx makes, in the same order
//! ([`ModSecurity::run`]): connection, URI, request headers, request body, response
//! headers, response body, logging, checking `msc_intervention` after each phase and
//! stopping at the first disruptive one, as the nginx connector does.

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::ptr;

use libloading::Library;

use crate::{Request, RESPONSE_BODY, RESPONSE_HEADERS};

/// The soname Debian's `libmodsecurity3` installs.
pub const LIBRARY: &str = "libmodsecurity.so.3";

#[repr(C)]
struct Intervention {
    status: c_int,
    pause: c_int,
    url: *mut c_char,
    log: *mut c_char,
    disruptive: c_int,
}

type Opaque = c_void;

/// `ModSecLogCb`: `void (*)(void *data, const void *message)`.
type LogCallback = unsafe extern "C" fn(*mut c_void, *const c_void);

/// Drops rule messages. Without a callback libmodsecurity prints every match to stdout
/// ("Server log callback is not set"), which would charge it for terminal I/O; waf-core
/// writes no log either (it builds a `Report`).
unsafe extern "C" fn discard_log(_data: *mut c_void, _message: *const c_void) {}

extern "C" {
    /// libc's `free`, for the strings `msc_intervention` allocates.
    fn free(p: *mut c_void);
}

/// The libmodsecurity entry points the benchmark uses. The pointers stay valid while
/// `_lib` is loaded, and `_lib` lives as long as this struct.
struct Api {
    init: unsafe extern "C" fn() -> *mut Opaque,
    set_connector_info: unsafe extern "C" fn(*mut Opaque, *const c_char),
    set_log_cb: unsafe extern "C" fn(*mut Opaque, LogCallback),
    cleanup: unsafe extern "C" fn(*mut Opaque),
    create_rules_set: unsafe extern "C" fn() -> *mut Opaque,
    rules_add: unsafe extern "C" fn(*mut Opaque, *const c_char, *mut *const c_char) -> c_int,
    rules_add_file: unsafe extern "C" fn(*mut Opaque, *const c_char, *mut *const c_char) -> c_int,
    rules_cleanup: unsafe extern "C" fn(*mut Opaque) -> c_int,
    new_transaction: unsafe extern "C" fn(*mut Opaque, *mut Opaque, *mut c_void) -> *mut Opaque,
    process_connection:
        unsafe extern "C" fn(*mut Opaque, *const c_char, c_int, *const c_char, c_int) -> c_int,
    process_uri:
        unsafe extern "C" fn(*mut Opaque, *const c_char, *const c_char, *const c_char) -> c_int,
    add_n_request_header:
        unsafe extern "C" fn(*mut Opaque, *const c_uchar, usize, *const c_uchar, usize) -> c_int,
    process_request_headers: unsafe extern "C" fn(*mut Opaque) -> c_int,
    append_request_body: unsafe extern "C" fn(*mut Opaque, *const c_uchar, usize) -> c_int,
    process_request_body: unsafe extern "C" fn(*mut Opaque) -> c_int,
    add_n_response_header:
        unsafe extern "C" fn(*mut Opaque, *const c_uchar, usize, *const c_uchar, usize) -> c_int,
    process_response_headers: unsafe extern "C" fn(*mut Opaque, c_int, *const c_char) -> c_int,
    append_response_body: unsafe extern "C" fn(*mut Opaque, *const c_uchar, usize) -> c_int,
    process_response_body: unsafe extern "C" fn(*mut Opaque) -> c_int,
    process_logging: unsafe extern "C" fn(*mut Opaque) -> c_int,
    intervention: unsafe extern "C" fn(*mut Opaque, *mut Intervention) -> c_int,
    transaction_cleanup: unsafe extern "C" fn(*mut Opaque),
    _lib: Library,
}

impl Api {
    fn load() -> Result<Api, String> {
        // SAFETY: loading libmodsecurity runs its static constructors, which only
        // initialise its own globals; the library is a system package built for this libc.
        let lib = unsafe { Library::new(LIBRARY) }.map_err(|e| {
            format!("{LIBRARY}: {e} (apt-get install libmodsecurity3 to run this benchmark)")
        })?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the Rust type the symbol is read as matches its C prototype in
                // modsecurity/{modsecurity,rules_set,transaction}.h (3.0.9); the fn
                // pointer is only used while `lib` is loaded (it is moved into `Api`).
                let s = unsafe { lib.get($name) }
                    .map_err(|e| format!("{}: {e}", String::from_utf8_lossy($name)))?;
                *s
            }};
        }
        Ok(Api {
            init: sym!(b"msc_init"),
            set_connector_info: sym!(b"msc_set_connector_info"),
            set_log_cb: sym!(b"msc_set_log_cb"),
            cleanup: sym!(b"msc_cleanup"),
            create_rules_set: sym!(b"msc_create_rules_set"),
            rules_add: sym!(b"msc_rules_add"),
            rules_add_file: sym!(b"msc_rules_add_file"),
            rules_cleanup: sym!(b"msc_rules_cleanup"),
            new_transaction: sym!(b"msc_new_transaction"),
            process_connection: sym!(b"msc_process_connection"),
            process_uri: sym!(b"msc_process_uri"),
            add_n_request_header: sym!(b"msc_add_n_request_header"),
            process_request_headers: sym!(b"msc_process_request_headers"),
            append_request_body: sym!(b"msc_append_request_body"),
            process_request_body: sym!(b"msc_process_request_body"),
            add_n_response_header: sym!(b"msc_add_n_response_header"),
            process_response_headers: sym!(b"msc_process_response_headers"),
            append_response_body: sym!(b"msc_append_response_body"),
            process_response_body: sym!(b"msc_process_response_body"),
            process_logging: sym!(b"msc_process_logging"),
            intervention: sym!(b"msc_intervention"),
            transaction_cleanup: sym!(b"msc_transaction_cleanup"),
            _lib: lib,
        })
    }
}

/// A libmodsecurity instance with one rule set loaded.
pub struct ModSecurity {
    api: Api,
    msc: *mut Opaque,
    rules: *mut Opaque,
}

/// A request converted once to the C strings libmodsecurity wants, so the benchmark loop
/// measures the engine, not the conversion.
pub struct PreparedRequest {
    method: CString,
    uri: CString,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

impl PreparedRequest {
    /// Converts `req`.
    pub fn new(req: &Request) -> PreparedRequest {
        PreparedRequest {
            method: CString::new(req.method).expect("method has no NUL"),
            uri: CString::new(req.uri.as_str()).expect("uri has no NUL"),
            headers: req
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
            body: req.body.clone(),
        }
    }
}

impl ModSecurity {
    /// Loads the library and the rules in `config` (SecLang text; `Include` paths absolute).
    pub fn new(config: &str) -> Result<ModSecurity, String> {
        let api = Api::load()?;
        let text = CString::new(config).map_err(|e| e.to_string())?;
        // SAFETY: prototypes as declared in `Api`; `msc` and `rules` are checked for null
        // and owned by the returned value, which frees them in `Drop`.
        unsafe {
            let msc = (api.init)();
            if msc.is_null() {
                return Err("msc_init returned null".into());
            }
            (api.set_connector_info)(msc, c"waf-bench".as_ptr());
            (api.set_log_cb)(msc, discard_log);
            let rules = (api.create_rules_set)();
            if rules.is_null() {
                (api.cleanup)(msc);
                return Err("msc_create_rules_set returned null".into());
            }
            let this = ModSecurity { api, msc, rules };
            let mut error: *const c_char = ptr::null();
            let n = (this.api.rules_add)(this.rules, text.as_ptr(), &mut error);
            if n < 0 {
                let msg = if error.is_null() {
                    "unknown error".to_string()
                } else {
                    CStr::from_ptr(error).to_string_lossy().into_owned()
                };
                return Err(format!("msc_rules_add: {msg}"));
            }
            Ok(this)
        }
    }

    /// Loads one rule file with `msc_rules_add_file` (for the load-time comparison).
    pub fn add_file(&mut self, path: &str) -> Result<i32, String> {
        let path = CString::new(path).map_err(|e| e.to_string())?;
        let mut error: *const c_char = ptr::null();
        // SAFETY: `self.rules` is a live rule set; `path` outlives the call.
        let n = unsafe { (self.api.rules_add_file)(self.rules, path.as_ptr(), &mut error) };
        if n < 0 {
            // SAFETY: on failure libmodsecurity sets `error` to a NUL-terminated string.
            let msg = unsafe { CStr::from_ptr(error) }
                .to_string_lossy()
                .into_owned();
            return Err(msg);
        }
        Ok(n)
    }

    /// Runs one whole transaction, stopping at the first disruptive intervention, then
    /// logging. Returns the intervention's status, if any.
    pub fn run(&self, req: &PreparedRequest) -> Option<u16> {
        let a = &self.api;
        // SAFETY: every call gets the live transaction made here and pointers to buffers
        // that outlive the call; the transaction is cleaned up before returning.
        unsafe {
            let tx = (a.new_transaction)(self.msc, self.rules, ptr::null_mut());
            assert!(!tx.is_null(), "msc_new_transaction returned null");
            let status = (|| {
                (a.process_connection)(
                    tx,
                    c"192.0.2.10".as_ptr(),
                    50000,
                    c"127.0.0.1".as_ptr(),
                    80,
                );
                (a.process_uri)(tx, req.uri.as_ptr(), req.method.as_ptr(), c"1.1".as_ptr());
                if let Some(s) = self.intervened(tx) {
                    return Some(s);
                }
                for (k, v) in &req.headers {
                    (a.add_n_request_header)(tx, k.as_ptr(), k.len(), v.as_ptr(), v.len());
                }
                (a.process_request_headers)(tx);
                if let Some(s) = self.intervened(tx) {
                    return Some(s);
                }
                if !req.body.is_empty() {
                    (a.append_request_body)(tx, req.body.as_ptr(), req.body.len());
                }
                (a.process_request_body)(tx);
                if let Some(s) = self.intervened(tx) {
                    return Some(s);
                }
                for (k, v) in RESPONSE_HEADERS {
                    (a.add_n_response_header)(tx, k.as_ptr(), k.len(), v.as_ptr(), v.len());
                }
                (a.process_response_headers)(tx, 200, c"HTTP 1.1".as_ptr());
                if let Some(s) = self.intervened(tx) {
                    return Some(s);
                }
                (a.append_response_body)(tx, RESPONSE_BODY.as_ptr(), RESPONSE_BODY.len());
                (a.process_response_body)(tx);
                self.intervened(tx)
            })();
            (a.process_logging)(tx);
            (a.transaction_cleanup)(tx);
            status
        }
    }

    /// `msc_intervention`: the status if a disruptive action fired.
    ///
    /// # Safety
    /// `tx` must be a live transaction of this instance.
    unsafe fn intervened(&self, tx: *mut Opaque) -> Option<u16> {
        let mut it = Intervention {
            status: 200,
            pause: 0,
            url: ptr::null_mut(),
            log: ptr::null_mut(),
            disruptive: 0,
        };
        // SAFETY: the caller guarantees `tx`; `it` is a valid out-parameter.
        let disruptive = unsafe { (self.api.intervention)(tx, &mut it) };
        // SAFETY: libmodsecurity strdup()s `url` and `log`; the caller frees them.
        unsafe {
            if !it.url.is_null() {
                free(it.url.cast());
            }
            if !it.log.is_null() {
                free(it.log.cast());
            }
        }
        (disruptive != 0 || it.disruptive != 0).then_some(it.status as u16)
    }
}

impl Drop for ModSecurity {
    fn drop(&mut self) {
        // SAFETY: both pointers were made in `new` and are freed once, here.
        unsafe {
            (self.api.rules_cleanup)(self.rules);
            (self.api.cleanup)(self.msc);
        }
    }
}
