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
