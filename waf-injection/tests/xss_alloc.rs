//! `detect_xss` allocates nothing: a counting global allocator watches a few thousand calls
//! on corpus inputs, XSS and benign.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Allocations made by this thread while counting; `None` when not counting.
    static COUNT: Cell<Option<usize>> = const { Cell::new(None) };
}

struct Counting;

// SAFETY: every call is forwarded unchanged to `System`; the counter is a const-initialised
// thread-local `Cell`, which neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: `ptr` and `layout` come from this allocator, that is from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn bump() {
    let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn detect_xss_does_not_allocate() {
    let corpus = common::corpus::all();
    // Every edge case (they hold most of the XSS vectors) and every 97th input.
    let mut inputs: Vec<&[u8]> = corpus.iter().take(200).map(Vec::as_slice).collect();
    inputs.extend(corpus.iter().step_by(97).map(Vec::as_slice));
    let mut hits = 0usize;
    COUNT.with(|c| c.set(Some(0)));
    for input in &inputs {
        hits += usize::from(waf_injection::detect_xss(std::hint::black_box(input)));
    }
    let allocations = COUNT.with(|c| c.replace(None)).unwrap_or(0);
    eprintln!(
        "detect_xss: {} calls ({hits} XSS), {allocations} allocations",
        inputs.len()
    );
    assert!(inputs.len() > 3_000 && hits > 50);
    assert_eq!(allocations, 0);
}
