//! The oracle: C libinjection 3.9.2 as Debian's `libmodsecurity.so.3` bundles and exports it,
//! loaded at test time with `libloading`. Never a dependency of the crate itself.

use std::ffi::{c_char, c_int};

use libloading::Library;

/// Where Debian's `libmodsecurity3` package puts the library; `WAF_INJECTION_ORACLE` overrides.
const DEFAULT_PATH: &str = "/usr/lib/x86_64-linux-gnu/libmodsecurity.so.3";

type SqliFn = unsafe extern "C" fn(*const c_char, usize, *mut c_char) -> c_int;
type XssFn = unsafe extern "C" fn(*const c_char, usize) -> c_int;
type H5InitFn = unsafe extern "C" fn(*mut H5State, *const c_char, usize, c_int);
type H5NextFn = unsafe extern "C" fn(*mut H5State) -> c_int;

/// `h5_state_t` of libinjection 3.9.2 (`libinjection_html5.h`).
#[repr(C)]
pub struct H5State {
    s: *const c_char,
    len: usize,
    pos: usize,
    is_close: c_int,
    state: *const (),
    token_start: *const c_char,
    token_len: usize,
    token_type: c_int,
}

/// One token of the oracle's HTML5 tokenizer: its type (the C enum value), and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H5Token {
    /// `enum html5_type` value: 0 DATA_TEXT, 1 TAG_NAME_OPEN, 2 TAG_NAME_CLOSE,
    /// 3 TAG_NAME_SELFCLOSE, 4 TAG_DATA, 5 TAG_CLOSE, 6 ATTR_NAME, 7 ATTR_VALUE,
    /// 8 TAG_COMMENT, 9 DOCTYPE.
    pub kind: i32,
    /// The token's bytes (a slice of the input in C).
    pub bytes: Vec<u8>,
}

/// The loaded oracle.
pub struct Oracle {
    sqli: SqliFn,
    xss: XssFn,
    h5_init: H5InitFn,
    h5_next: H5NextFn,
    _lib: Library,
}

impl Oracle {
    /// Loads the oracle, or explains how to get it.
    pub fn load() -> Oracle {
        let path = std::env::var("WAF_INJECTION_ORACLE").unwrap_or_else(|_| DEFAULT_PATH.into());
        // SAFETY: libmodsecurity's initialisers have no preconditions; the symbols below are
        // plain C functions with the signatures of libinjection 3.9.2's headers.
        unsafe {
            let lib = Library::new(&path).unwrap_or_else(|e| {
                panic!("cannot load the libinjection oracle {path}: {e}; install Debian's libmodsecurity3 or set WAF_INJECTION_ORACLE")
            });
            let sqli = *lib
                .get::<SqliFn>(b"libinjection_sqli\0")
                .expect("libinjection_sqli");
            let xss = *lib
                .get::<XssFn>(b"libinjection_xss\0")
                .expect("libinjection_xss");
            let h5_init = *lib
                .get::<H5InitFn>(b"libinjection_h5_init\0")
                .expect("libinjection_h5_init");
            let h5_next = *lib
                .get::<H5NextFn>(b"libinjection_h5_next\0")
                .expect("libinjection_h5_next");
            Oracle {
                sqli,
                xss,
                h5_init,
                h5_next,
                _lib: lib,
            }
        }
    }

    /// `libinjection_sqli`: the fingerprint when `input` is SQLi, else `None`.
    pub fn sqli(&self, input: &[u8]) -> Option<Vec<u8>> {
        let mut fingerprint = [0 as c_char; 8];
        // SAFETY: the input pointer and length describe a live slice; the fingerprint buffer
        // is 8 bytes, libinjection writes at most 5 letters and a NUL.
        let hit =
            unsafe { (self.sqli)(input.as_ptr().cast(), input.len(), fingerprint.as_mut_ptr()) };
        (hit != 0).then(|| {
            fingerprint
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect()
        })
    }

    /// `libinjection_sqli`'s fingerprint buffer after the call, whether or not it is SQLi
    /// (libinjection leaves the last context's fingerprint there).
    pub fn sqli_raw(&self, input: &[u8]) -> (bool, Vec<u8>) {
        let mut fingerprint = [0 as c_char; 8];
        // SAFETY: as in `sqli`.
        let hit =
            unsafe { (self.sqli)(input.as_ptr().cast(), input.len(), fingerprint.as_mut_ptr()) };
        let letters = fingerprint
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        (hit != 0, letters)
    }

    /// `libinjection_xss`.
    pub fn xss(&self, input: &[u8]) -> bool {
        // SAFETY: the pointer and length describe a live slice.
        unsafe { (self.xss)(input.as_ptr().cast(), input.len()) != 0 }
    }

    /// Every token `libinjection_h5_next` returns for `input` in the start state `flags`
    /// (0 DATA_STATE, 1 VALUE_NO_QUOTE, 2 VALUE_SINGLE_QUOTE, 3 VALUE_DOUBLE_QUOTE,
    /// 4 VALUE_BACK_QUOTE).
    pub fn h5_tokens(&self, input: &[u8], flags: i32) -> Vec<H5Token> {
        let mut state = std::mem::MaybeUninit::<H5State>::zeroed();
        let mut tokens = Vec::new();
        // SAFETY: `state` lives across the calls; the tokenizer only reads `input`, which
        // outlives the loop; token_start/token_len point into `input`.
        unsafe {
            (self.h5_init)(
                state.as_mut_ptr(),
                input.as_ptr().cast(),
                input.len(),
                flags,
            );
            while (self.h5_next)(state.as_mut_ptr()) != 0 {
                let st = &*state.as_ptr();
                let bytes =
                    std::slice::from_raw_parts(st.token_start.cast::<u8>(), st.token_len).to_vec();
                tokens.push(H5Token {
                    kind: st.token_type,
                    bytes,
                });
                if tokens.len() > 100_000 {
                    break;
                }
            }
        }
        tokens
    }
}
