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
        let named: Vec<HeaderName> = h
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|n| !n.eq_ignore_ascii_case("keep-alive") && !n.eq_ignore_ascii_case("close"))
            .filter_map(|n| HeaderName::from_bytes(n.as_bytes()).ok())
            .collect();
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

/// A peer address as the forwarding headers write it, formatted once per connection.
#[derive(Clone, Debug)]
pub struct PeerText {
    /// The address: `X-Forwarded-For`'s element.
    pub addr: HeaderValue,
    /// `Forwarded`'s node: the address, or `"[v6]"` quoted.
    pub node: String,
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
        }
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
            if let Ok(v) = HeaderValue::from_str(original_host) {
                h.insert(X_FORWARDED_HOST, v);
            }
        }
    } else if !trusted_peer {
        h.remove(&X_FORWARDED_FOR);
    }
    if host.forwarded {
        let mut me = String::with_capacity(32 + peer.node.len() + original_host.len());
        me.push_str("for=");
        me.push_str(&peer.node);
        me.push_str(";proto=");
        me.push_str(proto);
        if !original_host.is_empty()
            && original_host
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"')
        {
            me.push_str(";host=\"");
            me.push_str(original_host);
            me.push('"');
        }
        let value = match h.get(header::FORWARDED).and_then(|v| v.to_str().ok()) {
            Some(prev) if trusted_peer => format!("{prev}, {me}"),
            _ => me,
        };
        if let Ok(v) = HeaderValue::from_str(&value) {
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
    let secure = host.cookie_secure && https;
    if !secure && !host.cookie_http_only && host.cookie_same_site.is_none() {
        return;
    }
    let cookies: Vec<HeaderValue> = h.get_all(header::SET_COOKIE).iter().cloned().collect();
    if cookies.is_empty() {
        return;
    }
    h.remove(header::SET_COOKIE);
    for c in cookies {
        let mut s = c.as_bytes().to_vec();
        let attrs: Vec<String> = c
            .as_bytes()
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
        match HeaderValue::from_bytes(&s) {
            Ok(v) => h.append(header::SET_COOKIE, v),
            Err(_) => h.append(header::SET_COOKIE, c),
        };
    }
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
}
