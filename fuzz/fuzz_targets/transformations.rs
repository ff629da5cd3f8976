//! The transformation pipeline. Input: one byte `n` (chain length, at most 8), `n` bytes
//! picking transformations, then the value. Never panics; `Cow::Owned` always differs from
//! its input (checked in `transform_chain`).
#![no_main]
use libfuzzer_sys::fuzz_target;

/// Longest chain tried: eight doubling transformations (`hexEncode`) turn 4 KiB into 1 MiB.
const MAX_CHAIN: usize = 8;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n) % (MAX_CHAIN + 1);
    if rest.len() < n || rest.len() - n > 4096 {
        return;
    }
    let (chain, value) = rest.split_at(n);
    let _ = waf_core::internal::transform_chain(chain, value);
});
