//! Coarse per-worker deadlines: a timeout that costs a slot in a thread-local list instead
//! of a timer in tokio's wheel.
//!
//! `tokio::time::timeout` around every upstream request registered a timer entry, polled
//! it beside the request and cancelled it at the end (about 1 k instructions per GET,
//! callgrind; benches/PROFILE.md, "Sixth session"). A request's timeout is seconds long and
//! does not need millisecond precision, so each worker keeps its pending deadlines in a list
//! and its periodic tick ([`sweep`], every `WORKER_TICK` in `server.rs`) wakes those that
//! have passed. A deadline fires up to one tick late, never early.
//!
//! On a thread whose tick does not sweep (anything but a worker), [`within`] falls back to
//! `tokio::time::timeout`, so a deadline always fires.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The deadline passed before the future finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

struct Slot {
    deadline: Instant,
    waker: Option<Waker>,
    fired: bool,
}

#[derive(Default)]
struct Slots {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
}

thread_local! {
    static SLOTS: RefCell<Slots> = RefCell::new(Slots::default());
    /// This thread's tick calls [`sweep`].
    static SWEPT: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as one whose tick calls [`sweep`] at least every `tick`.
pub fn enable_sweep() {
    SWEPT.with(|s| s.set(true));
}

/// Wakes every deadline of this thread that has passed by `now`. Called by the worker's
/// tick.
pub fn sweep(now: Instant) {
    let mut due: Vec<Waker> = Vec::new();
    SLOTS.with(|s| {
        let mut s = s.borrow_mut();
        for slot in s.slots.iter_mut().flatten() {
            if !slot.fired && slot.deadline <= now {
                slot.fired = true;
                if let Some(w) = slot.waker.take() {
                    due.push(w);
                }
            }
        }
    });
    // Woken outside the borrow: a waker may poll at once on some executors.
    for w in due {
        w.wake();
    }
}

/// A slot held for one future; freed when dropped.
struct Registration(usize);

impl Registration {
    fn new(deadline: Instant) -> Registration {
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            let slot = Some(Slot {
                deadline,
                waker: None,
                fired: false,
            });
            match s.free.pop() {
                Some(i) => {
                    s.slots[i] = slot;
                    Registration(i)
                }
                None => {
                    s.slots.push(slot);
                    Registration(s.slots.len() - 1)
                }
            }
        })
    }

    /// Whether the deadline has passed; if not, `waker` is the one the sweep wakes.
    fn fired(&self, waker: &Waker) -> bool {
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            let Some(slot) = s.slots[self.0].as_mut() else {
                return true;
            };
            if slot.fired {
                return true;
            }
            match &slot.waker {
                Some(w) if w.will_wake(waker) => {}
                _ => slot.waker = Some(waker.clone()),
            }
            false
        })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            s.slots[self.0] = None;
            s.free.push(self.0);
        });
    }
}

/// Runs `fut` until it finishes or `after` has passed (up to one worker tick later).
pub fn within<F: Future>(after: Duration, fut: F) -> Within<F> {
    let reg = SWEPT
        .with(Cell::get)
        .then(|| Registration::new(Instant::now() + after));
    let fallback = reg.is_none().then(|| Box::pin(tokio::time::sleep(after)));
    Within { fut, reg, fallback }
}

pin_project_lite::pin_project! {
    /// The future of [`within`]: the inner future polled in place (an `async fn` moved it
    /// once more, a copy of the whole upstream request future per request).
    pub struct Within<F> {
        #[pin]
        fut: F,
        reg: Option<Registration>,
        // Off the workers: tokio's timer.
        fallback: Option<Pin<Box<tokio::time::Sleep>>>,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if let Some(reg) = this.reg.as_ref() {
            if reg.fired(cx.waker()) {
                return Poll::Ready(Err(Elapsed));
            }
        }
        if let Some(sleep) = this.fallback.as_mut() {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(Elapsed));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A current-thread runtime whose tick sweeps every 20 ms, as a worker's does.
    fn worker_rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_deadline_fires_after_its_time_and_within_a_tick() {
        worker_rt().block_on(async {
            enable_sweep();
            tokio::spawn(async {
                let mut tick = tokio::time::interval(Duration::from_millis(20));
                loop {
                    tick.tick().await;
                    sweep(Instant::now());
                }
            });
            let t = Instant::now();
            let r = within(Duration::from_millis(100), std::future::pending::<()>()).await;
            let took = t.elapsed();
            assert_eq!(r, Err(Elapsed));
            assert!(took >= Duration::from_millis(100), "fired early: {took:?}");
            assert!(took < Duration::from_millis(1000), "fired late: {took:?}");
            // A future that finishes first is not cut, and its slot is freed for the next.
            let r = within(Duration::from_millis(100), async { 7 }).await;
            assert_eq!(r, Ok(7));
            let r = within(Duration::from_secs(5), async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                8
            })
            .await;
            assert_eq!(r, Ok(8));
            SLOTS.with(|s| {
                let s = s.borrow();
                assert!(s.slots.iter().all(Option::is_none));
                assert!(s.slots.len() <= 2, "{} slots", s.slots.len());
            });
        });
    }

    #[test]
    fn without_a_sweep_the_tokio_timer_is_used() {
        // A fresh thread: no sweep enabled.
        std::thread::spawn(|| {
            worker_rt().block_on(async {
                let t = Instant::now();
                let r = within(Duration::from_millis(50), std::future::pending::<()>()).await;
                assert_eq!(r, Err(Elapsed));
                assert!(t.elapsed() >= Duration::from_millis(50));
            })
        })
        .join()
        .unwrap();
    }
}
