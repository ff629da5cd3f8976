//! The one guard every `extern "C"` function goes through (STYLE rule 24, after hyper's
//! `ffi/macros.rs`).

/// Runs the body of an exported `extern "C"` function inside `catch_unwind`.
///
/// Every `extern "C"` function in this crate is `fn name(..) -> T { ffi_guard!("name",
/// on_panic, { body }) }` (checked by `tests/header.rs`). `on_panic` is what the function
/// returns when the body panics; it is evaluated after the unwind has stopped, may read the
/// (raw pointer) arguments, and must not panic itself. The macro sits inside the body rather
/// than around the function so that cbindgen, which does not expand macros, sees every
/// signature.
///
/// Panics unwind only because the crate is built with `panic = "unwind"` (the default of
/// every profile in this workspace); under `panic = "abort"` a panic would abort the host
/// process instead, which is why the workspace must never set it.
macro_rules! ffi_guard {
    ($name:literal, $on_panic:expr, $body:block) => {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || $body)) {
            Ok(v) => v,
            Err(_) => {
                $crate::error::set_last_error(concat!("panic in ", $name));
                $on_panic
            }
        }
    };
}

/// Returns `WAF_STATUS_INVALID_ARGUMENT` (after recording which argument) when a pointer is
/// null (hyper's `non_null!`).
macro_rules! non_null {
    ($($p:ident),+) => {
        $(
            if $p.is_null() {
                $crate::error::set_last_error(concat!("argument `", stringify!($p), "` is NULL"));
                return $crate::WafStatus::InvalidArgument;
            }
        )+
    };
}
