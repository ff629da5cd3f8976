//! Which request id a transaction gets.
//!
//! A request id ties a block page to a log line. An id set by a proxy in front of us keeps
//! one id across the whole chain, but a client can send the same header, and an id ends up
//! in HTML pages, JSON, response headers and logs. So an incoming id is reused only from a
//! trusted peer, and only when it is short and made of characters that need no escaping
//! anywhere: ASCII letters, digits and `-_.:+/=@`. Otherwise the caller lets the engine make
//! one up ([`Waf::transaction`](crate::Waf::transaction)).

use http::header::AsHeaderName;
use http::HeaderMap;

/// The longest incoming request id that is reused, in bytes. Longer ids are ignored (a new
/// one is made up); it keeps ids out of logs and pages at a bounded size.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// The incoming request id to reuse, if any.
///
/// `Some` only when `peer_trusted` (the peer is a trusted proxy), the header `name` appears
/// exactly once, and its value is 1 to [`MAX_REQUEST_ID_LEN`] bytes of letters, digits and
/// `-_.:+/=@`. Pass the result to [`Waf::transaction_with_id`](crate::Waf::transaction_with_id).
pub fn request_id<K: AsHeaderName>(
    headers: &HeaderMap,
    peer_trusted: bool,
    name: K,
) -> Option<String> {
    if !peer_trusted {
        return None;
    }
    let mut values = headers.get_all(name).iter();
    let value = values.next()?.as_bytes();
    if values.next().is_some() || !is_valid_id(value) {
        return None;
    }
    // Every byte is ASCII, checked just above.
    std::str::from_utf8(value).ok().map(str::to_owned)
}

fn is_valid_id(id: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID_LEN).contains(&id.len())
        && id
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-_.:+/=@".contains(&b))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn map(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-request-id", HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn reused_from_trusted_peer_only() {
        let h = map(&[b"3f2a-11ef.9c:0b"]);
        assert_eq!(
            request_id(&h, true, "x-request-id").as_deref(),
            Some("3f2a-11ef.9c:0b")
        );
        assert_eq!(request_id(&h, false, "x-request-id"), None);
        assert_eq!(request_id(&h, true, "x-other-id"), None);
    }

    #[test]
    fn unsafe_or_ambiguous_ids_are_ignored() {
        for bad in [
            &b""[..],
            b"<script>",
            b"a b",
            b"a\"b",
            b"caf\xc3\xa9",
            b"a;b",
            b"a\\b",
            b"a'b",
            b"a&b",
        ] {
            assert_eq!(
                request_id(&map(&[bad]), true, "x-request-id"),
                None,
                "{bad:?}"
            );
        }
        let long = vec![b'a'; MAX_REQUEST_ID_LEN + 1];
        assert_eq!(request_id(&map(&[&long]), true, "x-request-id"), None);
        let max = vec![b'a'; MAX_REQUEST_ID_LEN];
        assert!(request_id(&map(&[&max]), true, "x-request-id").is_some());
        assert_eq!(request_id(&map(&[b"a", b"b"]), true, "x-request-id"), None);
    }
}
