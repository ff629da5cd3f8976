//! `detect_sqli` allocates nothing: a counting global allocator sees no allocation during
//! thousands of calls on corpus inputs.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts the allocations of threads that armed it; delegates to the system allocator.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn note() {
    if ARMED.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn detect_sqli_does_not_allocate() {
    let all = common::corpus::all();
    // Every edge case, and every 40th input of the rest (about 7,000 inputs).
    let mut inputs = common::corpus::edge_cases();
    inputs.extend(all.iter().step_by(40).cloned());
    // The counter works: an allocation while armed is seen.
    ARMED.with(|a| a.set(true));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    ARMED.with(|a| a.set(false));
    assert_eq!(ALLOCATIONS.swap(0, Ordering::Relaxed), 1);

    let mut hits = 0usize;
    ARMED.with(|a| a.set(true));
    for input in &inputs {
        hits += usize::from(waf_injection::detect_sqli(input).is_some());
    }
    ARMED.with(|a| a.set(false));
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    eprintln!(
        "sqli alloc: {} calls ({hits} SQLi), {allocations} allocations",
        inputs.len()
    );
    assert!(hits > 0, "the sample should hold some SQLi");
    assert_eq!(allocations, 0);
}
