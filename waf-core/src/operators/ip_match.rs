//! `@ipMatch`: the value is an IP address inside one of the listed networks.
//!
//! **What.** The value is parsed as a textual IPv4 or IPv6 address (`REMOTE_ADDR`); it matches
//! when it falls in any listed network. A value that is not an address never matches. An
//! IPv4-mapped IPv6 value (`::ffff:10.0.0.1`) is compared as the IPv4 address, as Coraza (Go's
//! `net.IP`) and ModSecurity do, so it does not match an IPv6 network such as `::/80`;
//! likewise a mapped network (`::ffff:192.0.2.0/120`) is the IPv4 network it maps.
//!
//! **Argument.** Comma-separated addresses and CIDR networks, IPv4 and IPv6 mixed:
//! `127.0.0.1,::1`, `192.168.0.0/16, fe80::/10`. Host bits in a network are ignored
//! (`10.10.10.10/8` is `10.0.0.0/8`). An entry that is not an address or network (including a
//! prefix longer than the family allows, `10.0.0.0/100`) is a load error: Coraza skips such
//! entries silently, which hides typos in allow-lists.
//!
//! ```text
//! SecRule REMOTE_ADDR "@ipMatch 127.0.0.1,::1" "id:1,phase:1,pass,nolog,ctl:ruleEngine=Off"
//! ```
//!
//! # Performance
//!
//! Networks become sorted, merged ranges of integers per family, searched by binary search:
//! `O(log n)` per value whatever the list size (`@ipMatchFromFile` lists can be long), and no
//! allocation.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net};

/// A compiled `@ipMatch` (also `@ipMatchFromFile`).
#[derive(Debug)]
pub(crate) struct IpMatch {
    /// Disjoint, sorted, inclusive IPv4 ranges.
    v4: Vec<(u32, u32)>,
    /// Disjoint, sorted, inclusive IPv6 ranges.
    v6: Vec<(u128, u128)>,
}

impl IpMatch {
    /// Parses a comma-separated list.
    pub(crate) fn new(argument: &str) -> Result<IpMatch, String> {
        let entries: Vec<&str> = argument
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.is_empty() {
            return Err("@ipMatch needs at least one address or network".to_owned());
        }
        IpMatch::from_entries(&entries)
    }

    /// Builds the matcher from single entries (addresses or CIDR networks). An empty list
    /// never matches.
    pub(crate) fn from_entries<S: AsRef<str>>(entries: &[S]) -> Result<IpMatch, String> {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for entry in entries {
            match parse_network(entry.as_ref())? {
                IpNet::V4(net) => v4.push((u32::from(net.network()), u32::from(net.broadcast()))),
                IpNet::V6(net) => v6.push((u128::from(net.network()), u128::from(net.broadcast()))),
            }
        }
        Ok(IpMatch {
            v4: merge(v4),
            v6: merge(v6),
        })
    }

    /// True when `input` is an address inside one of the networks.
    pub(crate) fn evaluate(&self, input: &[u8]) -> bool {
        let Some(address) = parse_address(input) else {
            return false;
        };
        match address {
            IpAddr::V4(a) => contains(&self.v4, u32::from(a)),
            IpAddr::V6(a) => contains(&self.v6, u128::from(a)),
        }
    }
}

/// Parses `a.b.c.d`, `a.b.c.d/n`, an IPv6 address, or an IPv6 network. An IPv4-mapped
/// IPv6 network (`::ffff:192.0.2.128/127`, prefix 96 or more) becomes the IPv4 network it
/// maps (`192.0.2.128/31`), as Go's `net.IPNet` reads it, so it matches the values that
/// [`parse_address`] reads as IPv4.
fn parse_network(entry: &str) -> Result<IpNet, String> {
    let net = if entry.contains('/') {
        entry
            .parse::<IpNet>()
            .map(|net| net.trunc())
            .map_err(|_| format!("invalid network {entry:?}"))?
    } else {
        entry
            .parse::<IpAddr>()
            .map(IpNet::from)
            .map_err(|_| format!("invalid IP address {entry:?}"))?
    };
    if let IpNet::V6(v6) = net {
        if let (Some(v4), Some(prefix)) = (
            v6.network().to_ipv4_mapped(),
            v6.prefix_len().checked_sub(96),
        ) {
            let mapped =
                Ipv4Net::new(v4, prefix).map_err(|_| format!("invalid network {entry:?}"))?;
            return Ok(IpNet::V4(mapped));
        }
    }
    Ok(net)
}

/// Parses the value as an address, with IPv4-mapped IPv6 addresses read as IPv4.
fn parse_address(input: &[u8]) -> Option<IpAddr> {
    // Longest textual IPv6 address with an embedded IPv4 is 45 bytes; a longer value is not an
    // address, and checking first keeps `from_utf8` cheap on large values.
    if input.is_empty() || input.len() > 45 {
        return None;
    }
    let text = std::str::from_utf8(input).ok()?;
    Some(match text.parse::<IpAddr>().ok()? {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(a),
        },
        v4 => v4,
    })
}

/// Sorts and merges overlapping or adjacent inclusive ranges.
fn merge<T: Ord + Copy + Successor>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut merged: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1.successor_saturating() => {
                last.1 = last.1.max(end);
            }
            _ => merged.push((start, end)),
        }
    }
    merged.shrink_to_fit();
    merged
}

/// Binary search in disjoint sorted ranges.
fn contains<T: Ord + Copy>(ranges: &[(T, T)], value: T) -> bool {
    // Index of the first range starting after `value`; the one before it may hold `value`.
    let after = ranges.partition_point(|&(start, _)| start <= value);
    after > 0 && value <= ranges[after - 1].1
}

/// `x + 1`, saturating, for merging adjacent ranges.
trait Successor {
    fn successor_saturating(self) -> Self;
}

impl Successor for u32 {
    fn successor_saturating(self) -> Self {
        self.saturating_add(1)
    }
}

impl Successor for u128 {
    fn successor_saturating(self) -> Self {
        self.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(argument: &str, input: &str) -> bool {
        IpMatch::new(argument).unwrap().evaluate(input.as_bytes())
    }

    #[test]
    fn rejects_bad_arguments() {
        for bad in [
            "",
            " , ",
            "10.0.0.0/100",
            "::/129",
            "1.2.3",
            "example.com",
            "1.2.3.4/x",
        ] {
            assert!(IpMatch::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn v4_and_v6() {
        let list = "127.0.0.1, ::1,192.168.0.0/24,10.10.10.10/8";
        assert!(t(list, "127.0.0.1"));
        assert!(!t(list, "127.0.0.2"));
        assert!(t(list, "::1"));
        assert!(t(list, "0:0:0:0:0:0:0:1"));
        assert!(t(list, "192.168.0.255"));
        assert!(!t(list, "192.168.1.0"));
        assert!(t(list, "10.255.0.1"));
        assert!(!t(list, "not an ip"));
        assert!(!t(list, ""));
        assert!(!t(list, "127.0.0.1 "));
    }

    #[test]
    fn mapped_v6_is_v4() {
        assert!(t("10.0.0.0/8", "::ffff:10.1.2.3"));
        assert!(!t("0:0::/80", "0000:0000:0000:0000:0000:ffff:ffff:ffff"));
        assert!(t("0:0::/80", "::9"));
        // Mapped networks are IPv4 networks.
        assert!(t("::ffff:192.0.2.128/127", "192.0.2.129"));
        assert!(t("::ffff:192.0.2.128/127", "::ffff:c000:281"));
        assert!(!t("::ffff:192.0.2.128/127", "192.0.2.130"));
        assert!(t("::ffff:0:0/96", "1.2.3.4"));
    }

    #[test]
    fn merges_ranges() {
        let m = IpMatch::new("10.0.0.0/9,10.128.0.0/9,10.1.0.0/16,0.0.0.0/0").unwrap();
        assert_eq!(m.v4, vec![(0, u32::MAX)]);
        assert!(m.evaluate(b"255.255.255.255"));
        let m = IpMatch::new("1.0.0.5,1.0.0.1,1.0.0.2,1.0.0.3").unwrap();
        assert_eq!(m.v4.len(), 2);
        assert!(m.evaluate(b"1.0.0.3") && !m.evaluate(b"1.0.0.4") && m.evaluate(b"1.0.0.5"));
        assert!(IpMatch::new("::/0").unwrap().evaluate(b"ffff::"));
    }
}
