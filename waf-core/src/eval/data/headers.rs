//! Request and response headers and cookies, their values and names.

use super::{Emit, Source, TxData, Visit};
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

/// Leaves out of the parsed `Cookie` pairs (`REQUEST_COOKIES`) each gate cookie the policy
/// verified on this request: the first pair with its name and exactly the bytes the gate
/// verified (see `policy::gate::VerifiedCookie` for why, and what stays inspected). Nothing
/// to do, and no scan, when no gate verified a cookie.
pub(crate) fn drop_verified_cookies(
    pairs: &mut Vec<(Vec<u8>, Vec<u8>)>,
    headers: &[(&[u8], &[u8])],
    effects: &crate::policy::PolicyEffects,
) {
    for name in effects.verified_cookies() {
        let Some(value) = crate::policy::gate::cookie_in(headers, name) else {
            continue;
        };
        if let Some(i) = pairs
            .iter()
            .position(|(k, v)| k == name.as_bytes() && v == value)
        {
            pairs.remove(i);
        }
    }
}
