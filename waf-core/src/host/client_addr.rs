//! The client's address: the peer, or what trusted proxies say the client was.
//!
//! `X-Forwarded-For` and `Forwarded` are request headers, so any client can send them. They
//! are believed only when the peer is a trusted proxy, and then walked right to left: each
//! entry was appended by the hop to its right, so an entry is believed only while the hop
//! that wrote it is trusted. The first address that is not a trusted proxy is the client.
//! A malformed entry (`unknown`, an obfuscated `_node`, garbage) stops the walk: the last
//! address believed so far is the answer.
//!
//! When both headers are present, `Forwarded` (RFC 7239) wins; the two are not merged,
//! because no proxy chain writes both consistently.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use http::HeaderMap;
use ipnet::IpNet;

/// At most this many forwarding entries are read (right to left). A longer chain stops the
/// walk at the last address believed so far. It bounds the work an attacker who sits behind
/// a trusted proxy can cause with a long header.
pub const MAX_FORWARDED_HOPS: usize = 32;

/// A list of trusted proxy networks (IPv4 and IPv6 CIDRs, or bare addresses).
///
/// Empty by default: nothing is trusted and forwarding headers are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
}

/// A trusted proxy entry that is neither a CIDR nor an IP address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid trusted proxy {value:?}: expected an IP address or a CIDR such as 10.0.0.0/8")]
pub struct InvalidCidr {
    /// The entry as given.
    pub value: String,
}

impl TrustedProxies {
    /// No trusted proxy.
    pub fn none() -> TrustedProxies {
        TrustedProxies::default()
    }

    /// Parses a list separated by commas and/or whitespace, such as
    /// `"10.0.0.0/8, 192.168.1.1 ::1 fd00::/8"`. A bare address is a /32 or /128.
    pub fn parse(list: &str) -> Result<TrustedProxies, InvalidCidr> {
        Self::from_entries(
            list.split(|c: char| c == ',' || c.is_ascii_whitespace())
                .filter(|s| !s.is_empty()),
        )
    }

    /// Parses each entry as a CIDR or a bare address.
    pub fn from_entries<I, S>(entries: I) -> Result<TrustedProxies, InvalidCidr>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut nets = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            let net = IpNet::from_str(entry)
                .map(|n| n.trunc())
                .or_else(|_| IpAddr::from_str(entry).map(IpNet::from))
                .map_err(|_| InvalidCidr {
                    value: entry.to_string(),
                })?;
            nets.push(net);
        }
        Ok(TrustedProxies { nets })
    }

    /// Whether `ip` is in one of the networks. IPv4-mapped IPv6 addresses
    /// (`::ffff:10.0.0.1`) match IPv4 networks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|n| n.contains(&ip))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }
}

impl FromStr for TrustedProxies {
    type Err = InvalidCidr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TrustedProxies::parse(s)
    }
}

impl fmt::Display for TrustedProxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, n) in self.nets.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}")?;
        }
        Ok(())
    }
}

/// The client address for a request that arrived from `peer`.
///
/// Returns `peer` unless it is in `trusted`; then walks `Forwarded` `for=` (or, without a
/// `Forwarded` header, `X-Forwarded-For`) right to left past trusted hops, as the module
/// docs describe. Never fails: malformed values are ignored.
pub fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    if !trusted.contains(peer) {
        return peer;
    }
    let hops = if headers.contains_key(http::header::FORWARDED) {
        hops(headers, http::header::FORWARDED, forwarded_for)
    } else {
        hops(headers, "x-forwarded-for", parse_addr)
    };
    let mut client = peer;
    for hop in hops.into_iter().rev().take(MAX_FORWARDED_HOPS) {
        if !trusted.contains(client) {
            break;
        }
        match hop {
            Some(ip) => client = ip,
            None => break,
        }
    }
    client
}

/// Every comma-separated entry of every field `name`, in order, parsed with `parse`
/// (`None` for an entry that is malformed).
fn hops(
    headers: &HeaderMap,
    name: impl http::header::AsHeaderName,
    parse: fn(&str) -> Option<IpAddr>,
) -> Vec<Option<IpAddr>> {
    let mut out = Vec::new();
    for value in headers.get_all(name) {
        match value.to_str() {
            Ok(s) => out.extend(s.split(',').map(|e| parse(e.trim()))),
            Err(_) => out.push(None),
        }
    }
    out
}

/// The `for=` parameter of one `Forwarded` element (RFC 7239 §4, §6).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.trim().eq_ignore_ascii_case("for").then_some(v.trim())
    })?;
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    parse_addr(value)
}

/// `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`, `[2001:db8::1]` or `[2001:db8::1]:8080`.
fn parse_addr(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = IpAddr::from_str(s) {
        return Some(ip);
    }
    if let Ok(sa) = SocketAddr::from_str(s) {
        return Some(sa.ip());
    }
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    inner.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn parse_and_contains() {
        let t = TrustedProxies::parse("10.0.0.0/8, 192.168.1.1 ::1\tfd00::/8").unwrap();
        assert!(t.contains(ip("10.1.2.3")));
        assert!(t.contains(ip("192.168.1.1")));
        assert!(!t.contains(ip("192.168.1.2")));
        assert!(t.contains(ip("::1")));
        assert!(t.contains(ip("fd12::1")));
        assert!(!t.contains(ip("fe80::1")));
        assert!(t.contains(ip("::ffff:10.9.9.9")), "mapped IPv4");
        assert!(!t.contains(ip("11.0.0.1")));
        assert_eq!(
            t.to_string(),
            "10.0.0.0/8, 192.168.1.1/32, ::1/128, fd00::/8"
        );
    }

    #[test]
    fn host_bits_are_truncated() {
        let t = TrustedProxies::parse("10.1.2.3/8").unwrap();
        assert!(t.contains(ip("10.200.0.1")));
    }

    #[test]
    fn parse_errors() {
        for bad in ["10.0.0.0/33", "nope", "10.0.0", "::1/129", "10.0.0.1/"] {
            let err = TrustedProxies::parse(bad).unwrap_err();
            assert_eq!(err.value, bad);
        }
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        assert!(TrustedProxies::none().is_empty());
    }

    #[test]
    fn untrusted_peer_is_the_client() {
        let t = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(client_addr(ip("203.0.113.9"), &h, &t), ip("203.0.113.9"));
        let h = headers(&[("forwarded", "for=1.2.3.4")]);
        assert_eq!(
            client_addr(ip("203.0.113.9"), &h, &TrustedProxies::none()),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn x_forwarded_for_walks_past_trusted_hops() {
        let t = TrustedProxies::parse("10.0.0.0/8").unwrap();
        // The client forged "6.6.6.6"; 198.51.100.7 is the first untrusted hop.
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.2")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("198.51.100.7"));
        // Several fields are one list.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.7,10.0.0.2"),
        ]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("198.51.100.7"));
        // All hops trusted: the leftmost.
        let h = headers(&[("x-forwarded-for", "10.0.0.5, 10.0.0.2")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.5"));
        // Ports and IPv6.
        let h = headers(&[("x-forwarded-for", "[2001:db8::1]:4711")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("2001:db8::1"));
        let h = headers(&[("x-forwarded-for", "192.0.2.1:80")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("192.0.2.1"));
        let h = headers(&[("x-forwarded-for", "2001:db8::2")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("2001:db8::2"));
    }

    #[test]
    fn malformed_entries_stop_the_walk() {
        let t = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let h = headers(&[("x-forwarded-for", "1.2.3.4, garbage")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.1"));
        let h = headers(&[("x-forwarded-for", "garbage, 10.0.0.3")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.3"));
        let h = headers(&[("x-forwarded-for", "")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.1"));
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"1.2.3.4\xff").unwrap(),
        );
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.1"));
        // No header at all.
        assert_eq!(
            client_addr(ip("10.0.0.1"), &HeaderMap::new(), &t),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn long_chains_are_bounded() {
        let t = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let chain = vec!["10.0.0.9"; 1000].join(",");
        let h = headers(&[("x-forwarded-for", &format!("1.2.3.4,{chain}"))]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.9"));
    }

    #[test]
    fn forwarded_header() {
        let t = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let h = headers(&[(
            "forwarded",
            r#"for=6.6.6.6, For="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2;by=10.0.0.1"#,
        )]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("2001:db8:cafe::17"));
        let h = headers(&[("forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("192.0.2.60"));
        // Obfuscated and unknown identifiers stop the walk.
        let h = headers(&[("forwarded", "for=1.2.3.4, for=unknown")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.1"));
        let h = headers(&[("forwarded", "for=_hidden")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.1"));
        let h = headers(&[("forwarded", "proto=https")]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("10.0.0.1"));
        // Forwarded wins over X-Forwarded-For.
        let h = headers(&[
            ("forwarded", "for=192.0.2.60"),
            ("x-forwarded-for", "6.6.6.6"),
        ]);
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &t), ip("192.0.2.60"));
    }
}
