//! Behaviour scoring: each response adds points to its client's score by status (401 and
//! 404 bursts, 4xx streaks, WAF blocks); the score decays with a half-life; over the
//! threshold the client is banned ([`super::ban`]) and its score starts again from zero.
//!
//! The score is one [`Cell`] per client: `a` holds the points in thousandths (low 40 bits)
//! and the current streak of consecutive 4xx answers (high bits), `b` the time of the
//! last update. Each 4xx in a streak adds `streak` points more than the one before, so a
//! scanner's uninterrupted run of 404s crosses the threshold faster than a user's
//! occasional mistakes; any 1xx-3xx answer ends the streak. Scoring runs in
//! [`crate::Transaction::finish`], when the status is known.

use std::collections::HashMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::ban::Bans;
use super::error::{PolicyError, PolicyErrorKind};
use super::state::{Cell, Store};
use super::NANOS;

/// `[scoring]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScoringConfig {
    /// A client whose score reaches this is banned (default 20).
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// The score halves every this many seconds (default 60).
    #[serde(default = "default_half_life")]
    pub half_life_secs: f64,
    /// Points per response: keys are a status (`"404"`), a class (`"4xx"`, `"5xx"`) or
    /// `"waf_block"` (the WAF refused the request; added to the status's weight). A
    /// status's own weight replaces its class's. Default: `4xx` 1, `401` 3, `404` 2,
    /// `waf_block` 5.
    #[serde(default = "default_weights")]
    pub weights: HashMap<String, f64>,
    /// Extra points for each further 4xx in an uninterrupted streak (default 0.5).
    #[serde(default = "default_streak")]
    pub streak: f64,
}

fn default_threshold() -> f64 {
    20.0
}
fn default_half_life() -> f64 {
    60.0
}
fn default_streak() -> f64 {
    0.5
}
fn default_weights() -> HashMap<String, f64> {
    [("4xx", 1.0), ("401", 3.0), ("404", 2.0), ("waf_block", 5.0)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

impl Default for ScoringConfig {
    fn default() -> ScoringConfig {
        ScoringConfig {
            threshold: default_threshold(),
            half_life_secs: default_half_life(),
            weights: default_weights(),
            streak: default_streak(),
        }
    }
}

/// Compiled `[scoring]`.
#[derive(Debug)]
pub(crate) struct Scoring {
    threshold: f64,
    half_life: f64,
    /// Weight per status 100..=599 (index `status - 100`).
    by_status: Box<[f64]>,
    waf_block: f64,
    streak: f64,
}

pub(crate) const KIND: u8 = b's';
const POINTS_BITS: u32 = super::state::SCORE_POINTS_BITS;
const POINTS_MASK: u64 = (1 << POINTS_BITS) - 1;

impl Scoring {
    pub(crate) fn compile(c: &ScoringConfig) -> Result<Scoring, PolicyError> {
        let bad = |m: String| {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("[scoring]: {m}"),
            ))
        };
        if !(c.threshold > 0.0 && c.threshold < 1e9) {
            return bad(format!("threshold {} must be above 0", c.threshold));
        }
        if c.half_life_secs.is_nan() || c.half_life_secs <= 0.0 {
            return bad(format!(
                "half_life_secs {} must be above 0",
                c.half_life_secs
            ));
        }
        let mut by_status = vec![0.0; 500];
        let mut waf_block = 0.0;
        // Classes first, then single statuses override them.
        let mut keys: Vec<(&String, &f64)> = c.weights.iter().collect();
        keys.sort_by_key(|(k, _)| (!k.ends_with("xx"), k.to_string()));
        for (k, &w) in keys {
            if !(0.0..1e6).contains(&w) {
                return bad(format!("weight {w} for {k:?} must be 0 or more"));
            }
            if k == "waf_block" {
                waf_block = w;
            } else if let Some(class) = k.strip_suffix("xx") {
                match class.parse::<usize>() {
                    Ok(d @ 1..=5) => by_status[(d - 1) * 100..d * 100].fill(w),
                    _ => return bad(format!("unknown weight key {k:?} (a status such as \"404\", a class such as \"4xx\", or \"waf_block\")")),
                }
            } else {
                match k.parse::<usize>() {
                    Ok(s @ 100..=599) => by_status[s - 100] = w,
                    _ => return bad(format!("unknown weight key {k:?} (a status such as \"404\", a class such as \"4xx\", or \"waf_block\")")),
                }
            }
        }
        Ok(Scoring {
            threshold: c.threshold,
            half_life: c.half_life_secs * NANOS as f64,
            by_status: by_status.into(),
            waf_block,
            streak: c.streak,
        })
    }

    /// The half-life, in nanoseconds (for [`super::state::ValueKind::Score`]).
    pub(crate) fn half_life_ns(&self) -> u64 {
        self.half_life as u64
    }

    /// Scores one finished response; bans the client when it crosses the threshold.
    /// Returns the score after the update.
    pub(crate) fn record(
        &self,
        store: &dyn Store,
        bans: &Bans,
        ip: IpAddr,
        status: u16,
        waf_blocked: bool,
        now: u64,
    ) -> f64 {
        let base = usize::from(status)
            .checked_sub(100)
            .and_then(|i| self.by_status.get(i).copied())
            .unwrap_or(0.0);
        let is_4xx = (400..500).contains(&status);
        let mut key = bans.key(ip);
        key[0] = KIND;
        let mut banned = false;
        let mut score = 0.0;
        store.update(&key, now, &mut |c| {
            let (points, streak, last) = c.map_or((0.0, 0, now), |c| {
                ((c.a & POINTS_MASK) as f64 / 1000.0, c.a >> POINTS_BITS, c.b)
            });
            let age = now.saturating_sub(last) as f64;
            let decayed = points * (-age / self.half_life * std::f64::consts::LN_2).exp();
            let streak = if is_4xx { (streak + 1).min(1 << 20) } else { 0 };
            let mut add = base + if waf_blocked { self.waf_block } else { 0.0 };
            if is_4xx && streak > 1 {
                add += self.streak * (streak - 1) as f64;
            }
            score = decayed + add;
            if score >= self.threshold {
                banned = true;
                score = 0.0;
            }
            if score < 0.001 && streak == 0 {
                return None;
            }
            let milli = ((score * 1000.0) as u64).min(POINTS_MASK);
            Some(Cell {
                a: milli | (streak << POINTS_BITS),
                b: now,
                expires: now.saturating_add((self.half_life * 16.0) as u64),
            })
        });
        if banned {
            bans.ban(store, ip, now, None);
            return self.threshold;
        }
        score
    }
}

#[cfg(test)]
mod tests {
    use super::super::ban::BanConfig;
    use super::super::state::MemoryStore;
    use super::*;

    const S: u64 = NANOS;

    fn setup(c: ScoringConfig) -> (Scoring, Bans, MemoryStore) {
        (
            Scoring::compile(&c).unwrap(),
            Bans::compile(&BanConfig::default()).unwrap(),
            MemoryStore::new(1000),
        )
    }

    #[test]
    fn a_404_burst_gets_banned_and_normal_traffic_does_not() {
        let (s, bans, store) = setup(ScoringConfig {
            threshold: 9.0,
            streak: 0.0,
            ..ScoringConfig::default()
        });
        let scanner: IpAddr = "203.0.113.1".parse().unwrap();
        let user: IpAddr = "203.0.113.2".parse().unwrap();
        let t = 100 * S;
        for i in 0..4 {
            s.record(&store, &bans, scanner, 404, false, t + i);
        }
        assert!(bans.check(&store, scanner, t + 10).is_none(), "8 points");
        s.record(&store, &bans, scanner, 404, false, t + 10);
        assert!(
            bans.check(&store, scanner, t + 11).is_some(),
            "10 points (a hair less after decay): banned"
        );
        // A user with a 404 every half-life never gets there.
        for i in 0..100 {
            s.record(&store, &bans, user, 200, false, t + i * 60 * S);
            s.record(&store, &bans, user, 404, false, t + i * 60 * S + 1);
        }
        assert!(bans.check(&store, user, t + 6000 * S).is_none());
    }

    #[test]
    fn scores_decay_with_the_half_life() {
        let (s, bans, store) = setup(ScoringConfig::default());
        let ip: IpAddr = "203.0.113.3".parse().unwrap();
        assert_eq!(s.record(&store, &bans, ip, 401, false, 0), 3.0);
        let later = s.record(&store, &bans, ip, 200, false, 60 * S);
        assert!((later - 1.5).abs() < 0.01, "{later}");
    }

    #[test]
    fn waf_blocks_and_streaks_add_up() {
        let (s, bans, store) = setup(ScoringConfig::default());
        let ip: IpAddr = "203.0.113.4".parse().unwrap();
        assert_eq!(s.record(&store, &bans, ip, 403, true, 0), 6.0); // 4xx 1 + block 5
        assert_eq!(s.record(&store, &bans, ip, 403, false, 0), 7.5); // + 1 + streak 0.5
        assert_eq!(s.record(&store, &bans, ip, 200, false, 0), 7.5); // streak ends
        assert_eq!(s.record(&store, &bans, ip, 403, false, 0), 8.5);
    }

    #[test]
    fn unknown_weight_keys_fail_to_load() {
        for k in ["4x", "700", "6xx", "blocked"] {
            let mut c = ScoringConfig::default();
            c.weights.insert(k.to_string(), 1.0);
            assert!(Scoring::compile(&c).is_err(), "{k}");
        }
    }
}
