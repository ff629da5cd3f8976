//! The thread-local "last error" string behind `waf_last_error()` (wirefilter's model).

use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Records `msg` as this thread's last error. Interior NUL bytes are replaced, so the
/// message always survives.
pub(crate) fn set_last_error(msg: impl Into<Vec<u8>>) {
    let mut bytes = msg.into();
    bytes
        .iter_mut()
        .filter(|b| **b == 0)
        .for_each(|b| *b = b'?');
    let c = CString::new(bytes).unwrap_or_default();
    // `try_with`: during thread teardown the slot may be gone; losing the message is fine.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = Some(c);
        }
    });
}

/// This thread's last error, or null.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| match slot.try_borrow() {
            Ok(slot) => slot.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            Err(_) => std::ptr::null(),
        })
        .unwrap_or(std::ptr::null())
}
