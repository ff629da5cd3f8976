//! Bans: a client over its behaviour score (or banned by the admin) is refused for a TTL,
//! and repeat offenders get longer TTLs. Checked first on every request.
//!
//! A ban is one [`Cell`] per client key: `a` is when the ban ends, `b` how many bans the
//! client has had within `forget_secs`; the entry lives `forget_secs` past the end of the
//! ban so the count survives the ban itself. The `n`-th ban lasts
//! `ttl_secs * escalation^(n-1)`, capped at `max_ttl_secs`. IPv6 clients are banned by
//! their `/ipv6_prefix` (default /64: one subscriber's prefix), IPv4 by address.

use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};
use super::list::canonical;
use super::state::{Cell, Store};
use super::NANOS;

/// `[bans]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BanConfig {
    /// Length of a first ban, in seconds (default 600).
    #[serde(default = "default_ttl")]
    pub ttl_secs: u64,
    /// Each further ban within `forget_secs` lasts this many times longer (default 2).
    #[serde(default = "default_escalation")]
    pub escalation: f64,
    /// Longest ban, in seconds (default 86,400).
    #[serde(default = "default_max_ttl")]
    pub max_ttl_secs: u64,
    /// How long past its end a ban still counts as a previous offence (default 86,400).
    #[serde(default = "default_max_ttl")]
    pub forget_secs: u64,
    /// Status answered to a banned client (default 403).
    #[serde(default = "default_status")]
    pub status: u16,
    /// Prefix length IPv6 clients are banned by (default 64).
    #[serde(default = "default_v6")]
    pub ipv6_prefix: u8,
    /// Count and report bans, never refuse a request.
    #[serde(default)]
    pub shadow: bool,
}

fn default_ttl() -> u64 {
    600
}
fn default_escalation() -> f64 {
    2.0
}
fn default_max_ttl() -> u64 {
    86_400
}
fn default_status() -> u16 {
    403
}
fn default_v6() -> u8 {
    64
}

impl Default for BanConfig {
    fn default() -> BanConfig {
        BanConfig {
            ttl_secs: default_ttl(),
            escalation: default_escalation(),
            max_ttl_secs: default_max_ttl(),
            forget_secs: default_max_ttl(),
            status: default_status(),
            ipv6_prefix: default_v6(),
            shadow: false,
        }
    }
}

/// A ban, as the admin listener shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BanEntry {
    /// The banned address (for IPv6, the first address of the banned prefix).
    pub ip: IpAddr,
    /// When the ban ends.
    pub until: SystemTime,
    /// How many bans this client has had, this one included.
    pub offences: u64,
}

/// Compiled `[bans]`.
#[derive(Debug)]
pub(crate) struct Bans {
    ttl: u64,
    escalation: f64,
    max_ttl: u64,
    forget: u64,
    pub(crate) status: u16,
    v6_prefix: u8,
    pub(crate) shadow: bool,
}

pub(crate) const KIND: u8 = b'b';

impl Bans {
    pub(crate) fn compile(c: &BanConfig) -> Result<Bans, PolicyError> {
        let bad = |m: String| {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("[bans]: {m}"),
            ))
        };
        if c.ttl_secs == 0 || c.max_ttl_secs < c.ttl_secs {
            return bad(format!(
                "ttl_secs must be at least 1 and at most max_ttl_secs ({} and {})",
                c.ttl_secs, c.max_ttl_secs
            ));
        }
        if !(c.escalation >= 1.0 && c.escalation <= 100.0) {
            return bad(format!("escalation {} is outside 1..=100", c.escalation));
        }
        if !(400..=599).contains(&c.status) {
            return bad(format!("status {} is not a 4xx or 5xx status", c.status));
        }
        if !(1..=128).contains(&c.ipv6_prefix) {
            return bad(format!("ipv6_prefix {} is outside 1..=128", c.ipv6_prefix));
        }
        Ok(Bans {
            ttl: c.ttl_secs.saturating_mul(NANOS),
            escalation: c.escalation,
            max_ttl: c.max_ttl_secs.saturating_mul(NANOS),
            forget: c.forget_secs.saturating_mul(NANOS),
            status: c.status,
            v6_prefix: c.ipv6_prefix,
            shadow: c.shadow,
        })
    }

    /// The store key of `ip`'s ban: the kind byte and 16 address bytes.
    pub(crate) fn key(&self, ip: IpAddr) -> [u8; 17] {
        let mut k = [0u8; 17];
        k[0] = KIND;
        let bits: u128 = match canonical(ip) {
            IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
            IpAddr::V6(v6) => {
                let keep = u32::from(self.v6_prefix);
                let mask = if keep >= 128 {
                    u128::MAX
                } else {
                    !(u128::MAX >> keep)
                };
                u128::from(v6) & mask
            }
        };
        k[1..].copy_from_slice(&bits.to_be_bytes());
        k
    }

    /// Nanoseconds left of `ip`'s ban, if it is banned at `now`.
    pub(crate) fn check(&self, store: &dyn Store, ip: IpAddr, now: u64) -> Option<u64> {
        let cell = store.update(&self.key(ip), now, &mut |c| c)?;
        (cell.a > now).then(|| cell.a - now)
    }

    /// Bans `ip` from `now`, escalating after previous bans; returns the end of the ban.
    pub(crate) fn ban(&self, store: &dyn Store, ip: IpAddr, now: u64, ttl: Option<u64>) -> u64 {
        let cell = store.update(&self.key(ip), now, &mut |c| {
            let previous = c.map_or(0, |c| c.b);
            let length = match ttl {
                Some(t) => t,
                None => {
                    let factor = self.escalation.powi(previous.min(64) as i32);
                    ((self.ttl as f64 * factor) as u64).min(self.max_ttl)
                }
            };
            let until = now.saturating_add(length);
            Some(Cell {
                a: c.map_or(until, |c| c.a.max(until)),
                b: previous + 1,
                expires: until.saturating_add(self.forget),
            })
        });
        cell.map_or(now, |c| c.a)
    }

    /// Every ban in force at `now`.
    pub(crate) fn list(&self, store: &dyn Store, now: u64) -> Vec<BanEntry> {
        let mut out = Vec::new();
        store.scan(&[KIND], now, &mut |key, cell| {
            if cell.a <= now || key.len() != 17 {
                return;
            }
            let mut b = [0u8; 16];
            b.copy_from_slice(&key[1..]);
            let v6 = Ipv6Addr::from(b);
            out.push(BanEntry {
                ip: canonical(IpAddr::V6(v6)),
                until: UNIX_EPOCH + Duration::from_nanos(cell.a),
                offences: cell.b,
            });
        });
        out.sort_by_key(|e| e.ip);
        out
    }

    /// Lifts `ip`'s ban and forgets its offences; whether there was one.
    pub(crate) fn unban(&self, store: &dyn Store, ip: IpAddr) -> bool {
        store.remove(&self.key(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::MemoryStore;
    use super::*;

    const S: u64 = NANOS;

    #[test]
    fn bans_expire_and_escalate() {
        let bans = Bans::compile(&BanConfig {
            ttl_secs: 10,
            escalation: 3.0,
            max_ttl_secs: 50,
            forget_secs: 1000,
            ..BanConfig::default()
        })
        .unwrap();
        let store = MemoryStore::new(1000);
        let ip: IpAddr = "192.0.2.9".parse().unwrap();
        let t0 = 1_000 * S;
        assert_eq!(bans.check(&store, ip, t0), None);
        assert_eq!(bans.ban(&store, ip, t0, None), t0 + 10 * S);
        assert_eq!(bans.check(&store, ip, t0 + 9 * S), Some(S));
        assert_eq!(bans.check(&store, ip, t0 + 10 * S), None, "expired");
        // Second offence: 30 s; third: 90 s capped at 50 s.
        let t1 = t0 + 100 * S;
        assert_eq!(bans.ban(&store, ip, t1, None), t1 + 30 * S);
        let t2 = t1 + 100 * S;
        assert_eq!(bans.ban(&store, ip, t2, None), t2 + 50 * S);
        assert_eq!(bans.list(&store, t2)[0].offences, 3);
        // After `forget_secs` the count starts again.
        let t3 = t2 + 50 * S + 1000 * S;
        assert_eq!(bans.ban(&store, ip, t3, None), t3 + 10 * S);
    }

    #[test]
    fn ipv6_bans_cover_the_prefix_and_v4_mapped_is_v4() {
        let bans = Bans::compile(&BanConfig::default()).unwrap();
        let store = MemoryStore::new(1000);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        bans.ban(&store, a, S, None);
        assert!(bans.check(&store, b, S).is_some());
        assert!(bans.check(&store, c, S).is_none());
        let v4: IpAddr = "198.51.100.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:198.51.100.1".parse().unwrap();
        bans.ban(&store, v4, S, None);
        assert!(bans.check(&store, mapped, S).is_some());
        let listed: Vec<IpAddr> = bans.list(&store, S).iter().map(|e| e.ip).collect();
        assert_eq!(
            listed,
            vec![v4, "2001:db8:1:2::".parse::<IpAddr>().unwrap()]
        );
        assert!(bans.unban(&store, v4));
        assert!(bans.check(&store, v4, S).is_none());
    }

    #[test]
    fn bad_settings_fail_to_load() {
        for c in [
            BanConfig {
                ttl_secs: 0,
                ..BanConfig::default()
            },
            BanConfig {
                escalation: 0.5,
                ..BanConfig::default()
            },
            BanConfig {
                status: 200,
                ..BanConfig::default()
            },
            BanConfig {
                ipv6_prefix: 0,
                ..BanConfig::default()
            },
        ] {
            assert!(Bans::compile(&c).is_err(), "{c:?}");
        }
    }
}
