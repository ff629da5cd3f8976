//! Signed tokens: the value of every pass, admission and session cookie, and of the hidden
//! fields of the gate forms.
//!
//! Modelled on cookie-rs' `secure/signed.rs`: a token is a payload and an HMAC-SHA256 tag,
//! and the tag is checked, in constant time, before anything reads the payload. Written
//! out it is `base64url(payload) "." base64url(tag)`, about 60 bytes for a pass cookie.
//!
//! What the MAC covers (STYLE 32): the token's *purpose* (a pass cookie cannot be replayed
//! as a session cookie or a form token), the *bindings* in force and the client's values
//! for them (its IP prefix, `/24` and `/64` by default, and its `User-Agent`), and the
//! payload text, which starts with the expiry. The bound values are not written in the
//! token: the verifier recomputes the MAC with the request's own values, so a cookie moved
//! to another network or browser simply does not verify. Because the MAC is over the
//! payload's base64 text, the tag is checked before the payload is even decoded.
//!
//! Keys rotate: [`Keys`] is a list, the first key signs, every key verifies, so a new key
//! can be put in front and the old one dropped once the longest-lived token it signed has
//! expired. A key must be at least [`MIN_KEY_LEN`] bytes. Each key's HMAC state is
//! computed once (the inner and outer padded blocks), so a verification is a clone of that
//! state and two or three SHA-256 blocks.
//!
//! Tokens longer than [`DEFAULT_MAX_TOKEN_LEN`](crate::limits::DEFAULT_MAX_TOKEN_LEN) are
//! refused unread. Verifying never panics and never allocates before the tag is good.

use std::fmt;
use std::net::IpAddr;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::limits::DEFAULT_MAX_TOKEN_LEN;

/// Shortest signing key accepted, in bytes (HMAC-SHA256's output size: a shorter key is
/// easier to guess than the tag).
pub const MIN_KEY_LEN: usize = 32;

/// Format version, the payload's first byte.
const VERSION: u8 = 1;

/// Length of an HMAC-SHA256 tag.
const TAG_LEN: usize = 32;

/// What a token is for; part of the MAC, so a token for one purpose is worthless for any
/// other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Purpose {
    /// A solved challenge (`__waf_pass`).
    Pass = 1,
    /// A challenge handed out, carried by the challenge page's form.
    Challenge = 2,
    /// The anti-CSRF cookie of the gate forms (`__waf_form`).
    Form = 3,
    /// A place in a waiting room's queue (`__waf_ticket`).
    Ticket = 4,
    /// Admission past a waiting room (`__waf_admit`).
    Admission = 5,
    /// A sign-in session (`__waf_session`).
    Session = 6,
    /// A pending sign-in: the address a code was sent to.
    Pending = 7,
}

/// Which client properties a token is bound to (`bind = { .. }` in the gate config).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Binding {
    /// Prefix length of the client's IPv4 address inside the MAC (default 24; 0 = not
    /// bound, 32 = the exact address).
    pub ip_v4_prefix: u8,
    /// Prefix length of the client's IPv6 address inside the MAC (default 64; 0 = not
    /// bound).
    pub ip_v6_prefix: u8,
    /// Whether the `User-Agent` is inside the MAC (default true).
    pub user_agent: bool,
}

impl Default for Binding {
    fn default() -> Self {
        Binding {
            ip_v4_prefix: 24,
            ip_v6_prefix: 64,
            user_agent: true,
        }
    }
}

impl Binding {
    /// Checks the prefix lengths (at most 32 and 128).
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.ip_v4_prefix > 32 {
            return Err(format!("ip_v4_prefix {} is over 32", self.ip_v4_prefix));
        }
        if self.ip_v6_prefix > 128 {
            return Err(format!("ip_v6_prefix {} is over 128", self.ip_v6_prefix));
        }
        Ok(())
    }
}

/// The client values a token may be bound to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client<'a> {
    /// The client address (already resolved through trusted proxies).
    pub(crate) ip: IpAddr,
    /// The `User-Agent` header, empty when absent.
    pub(crate) user_agent: &'a [u8],
}

/// Why a token was refused. Deliberately coarse: a wrong key, a flipped byte and a moved
/// cookie all read as [`TokenError::Invalid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenError {
    /// Not a token, a bad tag, or bound to another client.
    Invalid,
    /// Genuine, but its expiry has passed.
    Expired,
}

/// A configured key is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("signing key {index} is {len} bytes, shorter than {MIN_KEY_LEN}")]
pub struct KeyError {
    /// Position of the key in the list.
    pub index: usize,
    /// Its length.
    pub len: usize,
}

/// The signing keys: the first signs, all verify.
#[derive(Clone)]
pub(crate) struct Keys {
    macs: Vec<Hmac<Sha256>>,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key material.
        f.debug_struct("Keys")
            .field("count", &self.macs.len())
            .finish()
    }
}

impl Keys {
    /// Keys from their bytes; at least one, each at least [`MIN_KEY_LEN`] bytes.
    pub(crate) fn new<K: AsRef<[u8]>>(keys: &[K]) -> Result<Keys, KeyError> {
        if keys.is_empty() {
            return Err(KeyError { index: 0, len: 0 });
        }
        let mut macs = Vec::with_capacity(keys.len());
        for (index, k) in keys.iter().enumerate() {
            let k = k.as_ref();
            if k.len() < MIN_KEY_LEN {
                return Err(KeyError {
                    index,
                    len: k.len(),
                });
            }
            // HMAC takes keys of any length; the length was checked just above.
            macs.push(Hmac::<Sha256>::new_from_slice(k).map_err(|_| KeyError {
                index,
                len: k.len(),
            })?);
        }
        Ok(Keys { macs })
    }

    /// A token for `purpose`, bound to `client` as `binding` says, expiring at
    /// `expires_secs` (Unix seconds), carrying `data`. Appended to `out`.
    pub(crate) fn sign(
        &self,
        purpose: Purpose,
        binding: &Binding,
        client: Client<'_>,
        expires_secs: u64,
        data: &[u8],
        out: &mut String,
    ) {
        let mut payload = Vec::with_capacity(9 + data.len());
        payload.push(VERSION);
        payload.extend_from_slice(&expires_secs.to_be_bytes());
        payload.extend_from_slice(data);
        let start = out.len();
        URL_SAFE_NO_PAD.encode_string(&payload, out);
        let mut mac = self.macs[0].clone();
        feed(&mut mac, purpose, binding, client, &out.as_bytes()[start..]);
        let tag = mac.finalize().into_bytes();
        out.push('.');
        URL_SAFE_NO_PAD.encode_string(tag, out);
    }

    /// Verifies `token` for `purpose` and `client` at `now_secs`; its data when genuine,
    /// bound to this client and not expired.
    pub(crate) fn verify(
        &self,
        purpose: Purpose,
        binding: &Binding,
        client: Client<'_>,
        now_secs: u64,
        token: &[u8],
    ) -> Result<Vec<u8>, TokenError> {
        if token.len() > DEFAULT_MAX_TOKEN_LEN {
            return Err(TokenError::Invalid);
        }
        let dot = memchr::memrchr(b'.', token).ok_or(TokenError::Invalid)?;
        let (text, tag_text) = (&token[..dot], &token[dot + 1..]);
        let mut tag = [0u8; TAG_LEN + 3];
        match URL_SAFE_NO_PAD.decode_slice(tag_text, &mut tag) {
            Ok(TAG_LEN) => {}
            _ => return Err(TokenError::Invalid),
        }
        let tag = &tag[..TAG_LEN];
        let genuine = self.macs.iter().any(|key| {
            let mut mac = key.clone();
            feed(&mut mac, purpose, binding, client, text);
            // Constant time in the tag (hmac's `verify_slice` uses `subtle`).
            mac.verify_slice(tag).is_ok()
        });
        if !genuine {
            return Err(TokenError::Invalid);
        }
        // From here the payload is ours: it was made by `sign`.
        let payload = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| TokenError::Invalid)?;
        if payload.len() < 9 || payload[0] != VERSION {
            return Err(TokenError::Invalid);
        }
        let mut exp = [0u8; 8];
        exp.copy_from_slice(&payload[1..9]);
        if u64::from_be_bytes(exp) <= now_secs {
            return Err(TokenError::Expired);
        }
        Ok(payload[9..].to_vec())
    }

    /// The expiry written in a token that verified (for renewal decisions), without
    /// checking anything: call only on a token [`verify`](Self::verify) accepted.
    pub(crate) fn expiry_of(token: &[u8]) -> u64 {
        let dot = memchr::memrchr(b'.', token).unwrap_or(0);
        let mut buf = [0u8; 12];
        // The first 12 base64 characters are 9 bytes: the version and the expiry.
        match token
            .get(..12.min(dot))
            .map(|t| URL_SAFE_NO_PAD.decode_slice(t, &mut buf))
        {
            Some(Ok(9..)) => {
                let mut exp = [0u8; 8];
                exp.copy_from_slice(&buf[1..9]);
                u64::from_be_bytes(exp)
            }
            _ => 0,
        }
    }

    /// 32 unpredictable bytes derived from the first key and `parts` (a PRF: HMAC with a
    /// label). Gate nonces, session ids and sign-in codes come from here, so the core needs
    /// no random number generator; callers include the time and a counter in `parts`.
    pub(crate) fn derive(&self, label: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.macs[0].clone();
        mac.update(b"derive\0");
        mac.update(label);
        for p in parts {
            mac.update(&(p.len() as u32).to_be_bytes());
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }
}

/// The MAC input: purpose, bindings and bound values, payload text.
fn feed(mac: &mut Hmac<Sha256>, purpose: Purpose, b: &Binding, client: Client<'_>, text: &[u8]) {
    let mut head = [0u8; 5 + 16];
    head[0] = purpose as u8;
    head[1] = b.ip_v4_prefix;
    head[2] = b.ip_v6_prefix;
    head[3] = u8::from(b.user_agent);
    // The address family, then the prefix shifted down (its low bits).
    let prefix: [u8; 16] = match client.ip {
        IpAddr::V4(v4) => {
            head[4] = 4;
            let bits = u32::from(v4)
                .checked_shr(32 - u32::from(b.ip_v4_prefix.min(32)))
                .unwrap_or(0);
            u128::from(bits).to_be_bytes()
        }
        IpAddr::V6(v6) => {
            head[4] = 6;
            u128::from(v6)
                .checked_shr(128 - u32::from(b.ip_v6_prefix.min(128)))
                .unwrap_or(0)
                .to_be_bytes()
        }
    };
    head[5..].copy_from_slice(&prefix);
    mac.update(&head);
    if b.user_agent {
        mac.update(&(client.user_agent.len() as u32).to_be_bytes());
        mac.update(client.user_agent);
    }
    mac.update(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &[u8] = b"0123456789abcdef0123456789abcdef";
    const K2: &[u8] = b"fedcba9876543210fedcba9876543210";

    fn client(ip: &str, ua: &'static [u8]) -> Client<'static> {
        Client {
            ip: ip.parse().unwrap(),
            user_agent: ua,
        }
    }

    fn sign(keys: &Keys, b: &Binding, c: Client<'_>, exp: u64) -> String {
        let mut s = String::new();
        keys.sign(Purpose::Pass, b, c, exp, b"data", &mut s);
        s
    }

    #[test]
    fn a_token_verifies_for_its_client_until_it_expires() {
        let keys = Keys::new(&[K1]).unwrap();
        let b = Binding::default();
        let c = client("192.0.2.10", b"Mozilla/5.0");
        let t = sign(&keys, &b, c, 1_000);
        assert!(t.len() < 80, "{t}");
        assert_eq!(
            keys.verify(Purpose::Pass, &b, c, 999, t.as_bytes()),
            Ok(b"data".to_vec())
        );
        assert_eq!(Keys::expiry_of(t.as_bytes()), 1_000);
        assert_eq!(
            keys.verify(Purpose::Pass, &b, c, 1_000, t.as_bytes()),
            Err(TokenError::Expired)
        );
        // Another purpose: refused.
        assert_eq!(
            keys.verify(Purpose::Session, &b, c, 0, t.as_bytes()),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn every_byte_flipped_is_refused() {
        let keys = Keys::new(&[K1]).unwrap();
        let b = Binding::default();
        let c = client("192.0.2.10", b"Mozilla/5.0");
        let t = sign(&keys, &b, c, u64::MAX).into_bytes();
        for i in 0..t.len() {
            for bit in 0..8 {
                let mut bad = t.clone();
                bad[i] ^= 1 << bit;
                let r = keys.verify(Purpose::Pass, &b, c, 0, &bad);
                // A flip in the tag's last character can land on base64 padding bits that
                // decode to the same bytes; that token *is* the same token.
                let same = URL_SAFE_NO_PAD.decode(&bad[bad.len() - 43..]).ok()
                    == URL_SAFE_NO_PAD.decode(&t[t.len() - 43..]).ok()
                    && bad[..bad.len() - 43] == t[..t.len() - 43];
                if !same {
                    assert_eq!(r, Err(TokenError::Invalid), "byte {i} bit {bit}");
                }
            }
        }
        // Truncations, extensions and junk.
        for n in 0..t.len() {
            assert!(keys.verify(Purpose::Pass, &b, c, 0, &t[..n]).is_err());
        }
        let mut long = t.clone();
        long.push(b'A');
        assert!(keys.verify(Purpose::Pass, &b, c, 0, &long).is_err());
        for junk in [&b""[..], b".", b"..", b"\xff.\xff", &[b'a'; 5000]] {
            assert!(keys.verify(Purpose::Pass, &b, c, 0, junk).is_err());
        }
    }

    #[test]
    fn a_moved_token_is_refused() {
        let keys = Keys::new(&[K1]).unwrap();
        let b = Binding::default();
        let c = client("192.0.2.10", b"Mozilla/5.0");
        let t = sign(&keys, &b, c, u64::MAX);
        let ok = |c: Client<'_>| keys.verify(Purpose::Pass, &b, c, 0, t.as_bytes()).is_ok();
        assert!(ok(client("192.0.2.200", b"Mozilla/5.0")), "same /24");
        assert!(!ok(client("192.0.3.10", b"Mozilla/5.0")), "other /24");
        assert!(!ok(client("192.0.2.10", b"curl/8")), "other UA");
        assert!(!ok(client("::ffff:c000:20a", b"Mozilla/5.0")), "IPv6");

        let c6 = client("2001:db8:1:2::1", b"UA");
        let t6 = sign(&keys, &b, c6, u64::MAX);
        let ok6 = |c: Client<'_>| keys.verify(Purpose::Pass, &b, c, 0, t6.as_bytes()).is_ok();
        assert!(ok6(client("2001:db8:1:2:ffff::9", b"UA")), "same /64");
        assert!(!ok6(client("2001:db8:1:3::1", b"UA")), "other /64");

        // Bindings switched off: anywhere, any UA. Exact address: only that one.
        let loose = Binding {
            ip_v4_prefix: 0,
            ip_v6_prefix: 0,
            user_agent: false,
        };
        let t = sign(&keys, &loose, c, u64::MAX);
        assert!(keys
            .verify(
                Purpose::Pass,
                &loose,
                client("203.0.113.1", b"x"),
                0,
                t.as_bytes()
            )
            .is_ok());
        let exact = Binding {
            ip_v4_prefix: 32,
            ..Binding::default()
        };
        let t = sign(&keys, &exact, c, u64::MAX);
        let v = |ip| {
            keys.verify(
                Purpose::Pass,
                &exact,
                client(ip, b"Mozilla/5.0"),
                0,
                t.as_bytes(),
            )
        };
        assert!(v("192.0.2.10").is_ok());
        assert!(v("192.0.2.11").is_err());
        // A token made under one binding does not verify under another.
        assert!(keys.verify(Purpose::Pass, &b, c, 0, t.as_bytes()).is_err());
    }

    #[test]
    fn keys_rotate() {
        let old = Keys::new(&[K1]).unwrap();
        let rotated = Keys::new(&[K2, K1]).unwrap();
        let b = Binding::default();
        let c = client("192.0.2.10", b"UA");
        let by_old = sign(&old, &b, c, u64::MAX);
        let by_new = sign(&rotated, &b, c, u64::MAX);
        assert!(rotated
            .verify(Purpose::Pass, &b, c, 0, by_old.as_bytes())
            .is_ok());
        assert!(rotated
            .verify(Purpose::Pass, &b, c, 0, by_new.as_bytes())
            .is_ok());
        assert!(old
            .verify(Purpose::Pass, &b, c, 0, by_new.as_bytes())
            .is_err());
        let dropped = Keys::new(&[K2]).unwrap();
        assert!(dropped
            .verify(Purpose::Pass, &b, c, 0, by_old.as_bytes())
            .is_err());
    }

    #[test]
    fn short_keys_are_refused() {
        assert_eq!(
            Keys::new(&[K1, b"short"]).unwrap_err(),
            KeyError { index: 1, len: 5 }
        );
        assert!(Keys::new::<&[u8]>(&[]).is_err());
        assert!(!format!("{:?}", Keys::new(&[K1]).unwrap()).contains("0123"));
    }

    #[test]
    fn derive_depends_on_every_part() {
        let keys = Keys::new(&[K1]).unwrap();
        let a = keys.derive(b"code", &[b"a", b"bc"]);
        assert_ne!(a, keys.derive(b"code", &[b"ab", b"c"]));
        assert_ne!(a, keys.derive(b"nonce", &[b"a", b"bc"]));
        assert_eq!(a, keys.derive(b"code", &[b"a", b"bc"]));
    }
}
