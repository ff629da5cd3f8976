//! Request and response headers and cookies, their values and names.

use super::{Emit, Pair, Source, TxData, Visit};
use crate::variables::Variable;

impl TxData {
    /// [`TxData::visit`] for this family.
    pub(super) fn visit_headers(&self, e: Emit<'_>, f: &mut Visit<'_>) {
        use Variable as V;
        let Emit { variable, .. } = e;
        match variable {
            V::RequestHeaders => e.pairs(&self.request_headers, Source::HeaderValue, f),
            V::RequestHeadersNames => e.names(&self.request_headers, Source::HeaderName, f),
            V::RequestCookies => e.pairs(&self.cookies, Source::CookieValue, f),
            V::RequestCookiesNames => e.names(&self.cookies, Source::CookieName, f),
            V::ResponseHeaders => e.pairs(&self.response_headers, Source::RespHeaderValue, f),
            V::ResponseHeadersNames => e.names(&self.response_headers, Source::RespHeaderName, f),
            _ => {}
        }
    }
}

/// Leaves out of the parsed `Cookie` pairs (`REQUEST_COOKIES`) and out of the engine's copy
/// of the `Cookie` headers (`REQUEST_HEADERS`) each gate cookie the policy verified on this
/// request: the first cookie with its name and exactly the bytes the gate verified (see
/// `policy::gate::VerifiedCookie` for why, and what stays inspected). Nothing to do, and no
/// scan, when no gate verified a cookie.
pub(crate) fn drop_verified_cookies(
    pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
    headers: &mut Vec<Pair>,
    effects: &crate::policy::PolicyEffects,
) {
    for name in effects.verified_cookies() {
        // The one the gate read: the first Cookie header that has it.
        let Some((i, (piece, value))) = headers.iter().enumerate().find_map(|(i, h)| {
            if !h.key.eq_ignore_ascii_case(b"cookie") {
                return None;
            }
            crate::policy::gate::cookie_span(&h.value, name).map(|s| (i, s))
        }) else {
            continue;
        };
        let verified = &headers[i].value[value];
        if let Some(p) = pairs
            .iter()
            .position(|(k, v)| k == name.as_bytes() && v == verified)
        {
            pairs.remove(p);
        }
        let h = &mut headers[i].value;
        if piece.end < h.len() {
            h.drain(piece.start..piece.end + 1);
        } else {
            h.truncate(piece.start.saturating_sub(1));
        }
        if h.trim_ascii().is_empty() {
            headers.remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::gate::VerifiedCookie;
    use crate::policy::PolicyEffects;

    fn run(cookie_headers: &[&str], verified: &[VerifiedCookie]) -> (Vec<String>, Vec<String>) {
        let mut headers: Vec<Pair> = cookie_headers
            .iter()
            .map(|v| Pair::new(&b"Cookie"[..], v.as_bytes()))
            .collect();
        headers.insert(0, Pair::new(&b"Host"[..], &b"a"[..]));
        let mut pairs = Vec::new();
        for h in &headers[1..] {
            crate::body::cookie::parse(&h.value, &mut pairs);
        }
        let mut e = PolicyEffects::default();
        for v in verified {
            e.verified(*v);
        }
        drop_verified_cookies(&mut pairs, &mut headers, &e);
        let show = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        (
            pairs
                .iter()
                .map(|(k, v)| format!("{}={}", show(k), show(v)))
                .collect(),
            headers[1..].iter().map(|h| show(&h.value)).collect(),
        )
    }

    #[test]
    fn verified_cookies_leave_the_collection_and_the_header() {
        use VerifiedCookie::{Pass, Session};
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // First, middle, last, alone; a second header; nothing verified.
        assert_eq!(
            run(&["__waf_session=T; a=1"], &[Session]),
            (s(&["a=1"]), s(&[" a=1"]))
        );
        assert_eq!(
            run(&["a=1; __waf_session=T; b=2"], &[Session]),
            (s(&["a=1", "b=2"]), s(&["a=1; b=2"]))
        );
        assert_eq!(
            run(&["a=1; __waf_session=T"], &[Session]),
            (s(&["a=1"]), s(&["a=1"]))
        );
        assert_eq!(run(&["__waf_session=T"], &[Session]), (s(&[]), s(&[])));
        assert_eq!(
            run(&["a=1", "__waf_pass=P; __waf_session=T"], &[Pass, Session]),
            (s(&["a=1"]), s(&["a=1"]))
        );
        assert_eq!(
            run(&["__waf_session=T"], &[]),
            (s(&["__waf_session=T"]), s(&["__waf_session=T"]))
        );
        // A second cookie of the same name stays, in both.
        assert_eq!(
            run(&["__waf_session=T; __waf_session=X"], &[Session]),
            (s(&["__waf_session=X"]), s(&[" __waf_session=X"]))
        );
        // Quoted: the gate read other bytes than the parser; the parsed pair stays.
        assert_eq!(
            run(&["__waf_session=\"T\""], &[Session]).0,
            s(&["__waf_session=T"])
        );
    }
}
