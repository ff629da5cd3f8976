//! Header work on the proxy path: hop-by-hop stripping (RFC 9110 §7.6.1), forwarding
//! headers for the upstream, and the `Set-Cookie` hardening rule. The client address behind
//! trusted proxies is `waf_core::host::client_addr`, shared with the other adapters.

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::config::HostConfig;

/// Headers that describe one hop, never forwarded (RFC 9110 §7.6.1, plus the legacy
/// `Proxy-Connection` and `Keep-Alive`).
static HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including every header that `Connection` names.
/// `Transfer-Encoding` is also removed: hyper frames the body for the next hop.
///
/// Most messages have none of them: one pass over the names decides whether anything
/// needs removing (ten `HeaderMap::remove` lookups cost more than the pass;
/// benches/PROFILE.md, "waf-proxy's own request path").
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Which fixed hop-by-hop names are present (a bit each), and whether `Connection`
    // names others.
    let mut present = 0u16;
    for k in h.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|n| n == k) {
            present |= 1 << i;
        } else if *k == header::TRANSFER_ENCODING {
            present |= 1 << HOP_BY_HOP.len();
        }
    }
    if present == 0 {
        return;
    }
    if present & 1 != 0 {
        // `Connection` (HOP_BY_HOP[0]) may name more; `keep-alive` and `close` name none.
        // Most messages say only `keep-alive` or `close`: nothing is collected then.
        let mut named: Vec<HeaderName> = Vec::new();
        for v in h.get_all(header::CONNECTION) {
            let v = v.as_bytes();
            if v.eq_ignore_ascii_case(b"keep-alive") || v.eq_ignore_ascii_case(b"close") {
                continue;
            }
            for n in v.split(|&b| b == b',') {
                let n = n.trim_ascii();
                if n.is_empty()
                    || n.eq_ignore_ascii_case(b"keep-alive")
                    || n.eq_ignore_ascii_case(b"close")
                {
                    continue;
                }
                if let Ok(n) = HeaderName::from_bytes(n) {
                    named.push(n);
                }
            }
        }
        for n in named {
            h.remove(n);
        }
    }
    for (i, n) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            h.remove(n);
        }
    }
    if present & (1 << HOP_BY_HOP.len()) != 0 {
        h.remove(header::TRANSFER_ENCODING);
    }
}

/// The `Upgrade` value of a message whose `Connection` has the `upgrade` token (RFC 9110
/// §7.8), else `None`.
pub fn upgrade_of(h: &HeaderMap) -> Option<HeaderValue> {
    let wants = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    if wants {
        h.get(header::UPGRADE).cloned()
    } else {
        None
    }
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// A peer address as the forwarding headers write it, formatted once per connection, and
/// the last requested host's `X-Forwarded-Host` and `Forwarded` values (a keep-alive
/// connection asks for the same host again and again; the values are then shared, not
/// rebuilt and validated per request).
#[derive(Debug)]
pub struct PeerText {
    /// The address: `X-Forwarded-For`'s element.
    pub addr: HeaderValue,
    /// `Forwarded`'s node: the address, or `"[v6]"` quoted.
    pub node: String,
    last: std::sync::Mutex<Option<HostValues>>,
}

/// The forwarding values of one requested host on one connection.
#[derive(Debug, Clone)]
struct HostValues {
    host: String,
    https: bool,
    x_forwarded_host: Option<HeaderValue>,
    forwarded: Option<HeaderValue>,
}

impl PeerText {
    /// Formats `peer`.
    pub fn new(peer: IpAddr) -> PeerText {
        let addr = peer.to_string();
        let node = match peer {
            IpAddr::V4(_) => addr.clone(),
            IpAddr::V6(_) => format!("\"[{addr}]\""),
        };
        PeerText {
            // An address's text is always a valid header value.
            addr: HeaderValue::from_str(&addr).unwrap_or(HeaderValue::from_static("unknown")),
            node,
            last: std::sync::Mutex::new(None),
        }
    }

    /// `X-Forwarded-Host` and this hop's `Forwarded` element for `host`, from the
    /// connection's last request when it named the same host.
    fn host_values(&self, host: &str, https: bool) -> HostValues {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = last.as_ref().filter(|v| v.https == https && v.host == host) {
            return v.clone();
        }
        let proto = if https { "https" } else { "http" };
        let mut me = String::with_capacity(32 + self.node.len() + host.len());
        me.push_str("for=");
        me.push_str(&self.node);
        me.push_str(";proto=");
        me.push_str(proto);
        if !host.is_empty() && host.bytes().all(|b| b.is_ascii_graphic() && b != b'"') {
            me.push_str(";host=\"");
            me.push_str(host);
            me.push('"');
        }
        let v = HostValues {
            host: host.to_string(),
            https,
            x_forwarded_host: HeaderValue::from_str(host).ok(),
            forwarded: HeaderValue::from_maybe_shared(bytes::Bytes::from(me)).ok(),
        };
        *last = Some(v.clone());
        v
    }
}

/// Sets the forwarding headers on the upstream request. From an untrusted peer, incoming
/// values are replaced (a client must not choose its own address); from a trusted one,
/// the peer is appended to the chain.
pub fn set_forwarding(
    h: &mut HeaderMap,
    host: &HostConfig,
    peer: &PeerText,
    trusted_peer: bool,
    https: bool,
    original_host: &str,
) {
    let proto = if https { "https" } else { "http" };
    let values =
        (host.x_forwarded || host.forwarded).then(|| peer.host_values(original_host, https));
    if host.x_forwarded {
        let prev = if trusted_peer {
            h.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok())
        } else {
            None
        };
        let xff = match prev {
            Some(prev) => HeaderValue::from_str(&format!("{prev}, {}", peer.node_addr())).ok(),
            None => Some(peer.addr.clone()),
        };
        if let Some(v) = xff {
            h.insert(X_FORWARDED_FOR, v);
        }
        if !(trusted_peer && h.contains_key(&X_FORWARDED_PROTO)) {
            h.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto));
        }
        if !(trusted_peer && h.contains_key(&X_FORWARDED_HOST)) {
            if let Some(v) = values.as_ref().and_then(|v| v.x_forwarded_host.clone()) {
                h.insert(X_FORWARDED_HOST, v);
            }
        }
    } else if !trusted_peer {
        h.remove(&X_FORWARDED_FOR);
    }
    if host.forwarded {
        let me = values.and_then(|v| v.forwarded);
        let prev = h
            .get(header::FORWARDED)
            .filter(|_| trusted_peer)
            .and_then(|v| v.to_str().ok());
        let value = match (prev, me) {
            (Some(prev), Some(me)) => {
                HeaderValue::from_str(&format!("{prev}, {}", me.to_str().unwrap_or(""))).ok()
            }
            (_, me) => me,
        };
        if let Some(v) = value {
            h.insert(header::FORWARDED, v);
        }
    } else if !trusted_peer {
        h.remove(header::FORWARDED);
    }
}

impl PeerText {
    fn node_addr(&self) -> &str {
        self.addr.to_str().unwrap_or("unknown")
    }
}

/// Adds the host's `Secure`/`HttpOnly`/`SameSite` attributes to each `Set-Cookie` that
/// lacks them. `Secure` is added on HTTPS responses only (browsers drop it otherwise).
pub fn harden_cookies(h: &mut HeaderMap, host: &HostConfig, https: bool) {
    if !hardens_cookies(host, https) {
        return;
    }
    let cookies: Vec<HeaderValue> = h.get_all(header::SET_COOKIE).iter().cloned().collect();
    if cookies.is_empty() {
        return;
    }
    h.remove(header::SET_COOKIE);
    for c in cookies {
        let hardened = harden_cookie(c.as_bytes(), host, https);
        match hardened.and_then(|s| HeaderValue::from_bytes(&s).ok()) {
            Some(v) => h.append(header::SET_COOKIE, v),
            None => h.append(header::SET_COOKIE, c),
        };
    }
}

/// Whether [`harden_cookie`] can change anything for `host`.
pub fn hardens_cookies(host: &HostConfig, https: bool) -> bool {
    (host.cookie_secure && https) || host.cookie_http_only || host.cookie_same_site.is_some()
}

/// One `Set-Cookie` value with the attributes [`harden_cookies`] adds; `None` when it
/// already has them all.
pub fn harden_cookie(c: &[u8], host: &HostConfig, https: bool) -> Option<Vec<u8>> {
    let secure = host.cookie_secure && https;
    let attrs: Vec<String> = c
        .split(|b| *b == b';')
        .skip(1)
        .map(|a| {
            let a = String::from_utf8_lossy(a);
            let name = a
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            name
        })
        .collect();
    let has = |n: &str| attrs.iter().any(|a| a == n);
    let mut s = c.to_vec();
    if secure && !has("secure") {
        s.extend_from_slice(b"; Secure");
    }
    if host.cookie_http_only && !has("httponly") {
        s.extend_from_slice(b"; HttpOnly");
    }
    if let Some(ss) = host.cookie_same_site {
        if !has("samesite") {
            s.extend_from_slice(b"; SameSite=");
            s.extend_from_slice(ss.as_str().as_bytes());
        }
    }
    (s.len() != c.len()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_removed() {
        let mut h = map(&[
            ("connection", "close, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("x-kept", "1"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn forwarding_values_follow_the_requested_host_on_one_connection() {
        let c = crate::config::Config::parse(
            std::path::Path::new("t.toml"),
            "[[upstream]]\nname='a'\nservers=['127.0.0.1:1']\n[[host]]\nnames=['*']\nupstream='a'\n",
        )
        .unwrap();
        let host = &c.hosts[0];
        let peer = PeerText::new("2001:db8::1".parse().unwrap());
        // The same connection asks for one host, another, then the first again (the
        // values are kept per connection for its last host only).
        for (name, https) in [("a.test", false), ("b.test", false), ("a.test", true)] {
            let mut h = map(&[("forwarded", "for=1.2.3.4"), ("x-forwarded-host", "evil")]);
            set_forwarding(&mut h, host, &peer, false, https, name);
            let proto = if https { "https" } else { "http" };
            assert_eq!(h["x-forwarded-host"], name);
            assert_eq!(h["x-forwarded-proto"], proto);
            assert_eq!(h["x-forwarded-for"], "2001:db8::1");
            let want = format!("for=\"[2001:db8::1]\";proto={proto};host=\"{name}\"");
            assert_eq!(h["forwarded"], want.as_str());
            // From a trusted proxy the chain is kept and this hop appended.
            let mut h = map(&[("forwarded", "for=1.2.3.4")]);
            set_forwarding(&mut h, host, &peer, true, https, name);
            assert_eq!(h["forwarded"], format!("for=1.2.3.4, {want}").as_str());
        }
    }
}
