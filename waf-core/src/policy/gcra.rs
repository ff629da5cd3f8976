//! The generic cell rate algorithm (GCRA), the arithmetic behind [`super::rate_limit`].
//!
//! As in governor's `gcra.rs`: a limit of `rate` requests per `period` has an emission
//! interval `T = period / rate`; a key's only state is its theoretical arrival time (TAT),
//! the time at which its bucket would be empty again. A request at `now` conforms when
//! `max(TAT, now) + T - now <= burst * T`, and then moves TAT to `max(TAT, now) + T`. So
//! from an empty bucket exactly `burst` requests arriving at once get through, and after
//! that one more every `T`. A denied request does not move TAT; it is told to retry at
//! `TAT + T - burst * T`.
//!
//! One `u64` per key, no window boundaries (no double bursts at a window edge as with fixed
//! windows), and the state is read and replaced in one [`super::state::Store::update`].

/// A compiled rate: emission interval and burst tolerance, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// `period / rate`.
    pub(crate) interval: u64,
    /// `burst * interval`.
    pub(crate) tolerance: u64,
}

/// The answer for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conformance {
    /// Within the limit; the new TAT.
    Allow(u64),
    /// Over the limit; nanoseconds until a request would conform.
    Deny(u64),
}

impl Gcra {
    /// `rate` requests per `period_ns`, `burst` of them at once (both at least 1).
    pub(crate) fn new(rate: u64, period_ns: u64, burst: u64) -> Gcra {
        let interval = (period_ns / rate.max(1)).max(1);
        Gcra {
            interval,
            tolerance: interval.saturating_mul(burst.max(1)),
        }
    }

    /// Whether one more request at `now` conforms, given the stored TAT (0 when none).
    pub(crate) fn check(&self, tat: u64, now: u64) -> Conformance {
        let start = tat.max(now);
        let new_tat = start.saturating_add(self.interval);
        let ahead = new_tat - now;
        if ahead <= self.tolerance {
            Conformance::Allow(new_tat)
        } else {
            Conformance::Deny(ahead - self.tolerance)
        }
    }

    /// How many requests the bucket holds at `now`: the key's current rate over the
    /// burst window, rounded up (what `rate["name"]` reads in expressions).
    pub(crate) fn level(&self, tat: u64, now: u64) -> u64 {
        tat.saturating_sub(now).div_ceil(self.interval)
    }

    /// When a key whose TAT is `tat` may be forgotten: once its bucket is empty.
    pub(crate) fn expiry(&self, tat: u64) -> u64 {
        tat.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn run(g: &Gcra, tat: &mut u64, now: u64) -> bool {
        match g.check(*tat, now) {
            Conformance::Allow(t) => {
                *tat = t;
                true
            }
            Conformance::Deny(_) => false,
        }
    }

    #[test]
    fn a_burst_gets_exactly_burst_requests_through() {
        for burst in [1, 2, 5, 10, 100] {
            let g = Gcra::new(10, SEC, burst);
            let mut tat = 0;
            let passed = (0..1000).filter(|_| run(&g, &mut tat, 5 * SEC)).count();
            assert_eq!(passed as u64, burst);
        }
    }

    #[test]
    fn one_more_request_conforms_every_interval() {
        let g = Gcra::new(10, SEC, 3);
        let mut tat = 0;
        let t0 = 100 * SEC;
        assert_eq!((0..10).filter(|_| run(&g, &mut tat, t0)).count(), 3);
        assert!(!run(&g, &mut tat, t0 + SEC / 10 - 1));
        assert!(run(&g, &mut tat, t0 + SEC / 10));
        assert!(!run(&g, &mut tat, t0 + SEC / 10));
    }

    #[test]
    fn retry_after_is_the_time_until_conformance() {
        let g = Gcra::new(1, 60 * SEC, 1);
        let mut tat = 0;
        assert!(run(&g, &mut tat, SEC));
        match g.check(tat, SEC) {
            Conformance::Deny(wait) => assert_eq!(wait, 60 * SEC),
            other => panic!("{other:?}"),
        }
        match g.check(tat, 31 * SEC) {
            Conformance::Deny(wait) => assert_eq!(wait, 30 * SEC),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn steady_traffic_under_the_rate_never_trips() {
        let g = Gcra::new(100_000, SEC, 100);
        let mut tat = 0;
        let step = SEC / 50_000;
        assert!((0..100_000u64).all(|i| run(&g, &mut tat, SEC + i * step)));
    }

    #[test]
    fn level_counts_what_is_in_the_bucket() {
        let g = Gcra::new(10, SEC, 10);
        let mut tat = 0;
        for _ in 0..4 {
            run(&g, &mut tat, SEC);
        }
        assert_eq!(g.level(tat, SEC), 4);
        assert_eq!(g.level(tat, 2 * SEC), 0);
    }
}
