//! Bytes and allocations per `waf-core` transaction, counted by a global allocator that
//! wraps the system one. Prints a markdown table: request, PL, allocations, bytes
//! allocated, peak bytes live during the transaction, and the same peak for a transaction
//! that starts from empty containers (nothing recycled: what one more concurrent
//! transaction costs).
//!
//! `cargo bench -p waf-bench --bench alloc`. The counts are deterministic (no timing), so
//! one transaction per request is enough; [`WARM_UP`] transactions of the same request run
//! first and are not counted (one-time lazy initialisation, and the recycled buffers
//! growing to fit). Buffers recycled from earlier transactions are therefore not in the
//! peak live bytes: what the pool retains is bounded by `waf-core`'s reuse limits.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts every allocation made through it; the counters are process-wide.
struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn note_alloc(size: usize) {
    ALLOCS.fetch_add(1, Relaxed);
    BYTES.fetch_add(size, Relaxed);
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
}

// SAFETY: every method forwards to `System` with the same arguments; the counters do not
// affect the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from `System` through this allocator with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A realloc counts as one allocation of the new size (what a fresh Vec would cost).
        note_alloc(new_size);
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: as in `dealloc`; `new_size` is checked by the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Transactions of each request run before the counted one. A finished transaction leaves
/// its buffers to the next (`waf-core`'s `eval::pool`), and a buffer refilled with a
/// longer value than it held grows once: after three transactions of the same request
/// every buffer fits, which is the steady state of a server seeing similar requests.
/// The regex caches and other lazily built state are made in the first one.
const WARM_UP: usize = 3;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` asks every bench binary for its benchmarks.
    }
    let conn = waf_bench::connection();
    println!(
        "| request | PL | allocations | bytes allocated | peak live bytes | peak live bytes, from empty |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for pl in [1u8, 4] {
        let waf = waf_bench::build_waf(pl);
        for req in waf_bench::requests() {
            for _ in 0..WARM_UP {
                waf_bench::run_ours(&waf, &conn, &req);
            }
            let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
            let live0 = LIVE.load(Relaxed);
            PEAK.store(live0, Relaxed);
            std::hint::black_box(waf_bench::run_ours(&waf, &conn, &req));
            let allocs = ALLOCS.load(Relaxed) - a0;
            let bytes = BYTES.load(Relaxed) - b0;
            let peak = PEAK.load(Relaxed) - live0;
            // The same transaction with the pool's recycled sets dropped: it starts from
            // empty containers, so its peak includes every table it fills, also those a
            // server keeps between requests.
            waf.internal_empty_table_pool();
            let live1 = LIVE.load(Relaxed);
            PEAK.store(live1, Relaxed);
            std::hint::black_box(waf_bench::run_ours(&waf, &conn, &req));
            let peak_empty = PEAK.load(Relaxed) - live1;
            println!(
                "| {} ({} B body) | {pl} | {allocs} | {bytes} | {peak} | {peak_empty} |",
                req.name,
                req.body.len()
            );
        }
    }
}
