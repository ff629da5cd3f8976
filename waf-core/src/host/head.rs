//! An `http` crate request or response head as the engine takes it.
//!
//! Every host built on the `http` crate (tower, actix-web, the proxy) hands the engine the
//! same view: the headers as byte pairs, a `Host` taken from the URI authority when there
//! is no header (HTTP/2 carries it in `:authority`), and the target in origin form (an
//! HTTP/2 or absolute-form URI loses its scheme and authority).

use http::header::HOST;

use crate::transaction::{RequestHead, ResponseHead};

/// The header pairs of a request, plus `host` from the URI authority when the request has
/// no `Host` header. Pass them to [`request_head`].
pub fn request_headers(parts: &http::request::Parts) -> Vec<(&[u8], &[u8])> {
    let mut headers: Vec<(&[u8], &[u8])> = Vec::with_capacity(parts.headers.len() + 1);
    headers.extend(
        parts
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes())),
    );
    if !parts.headers.contains_key(HOST) {
        if let Some(authority) = parts.uri.authority() {
            headers.push((b"host", authority.as_str().as_bytes()));
        }
    }
    headers
}

/// The request head of `parts` with `headers` (from [`request_headers`]). The target is
/// the path and query; a host that has the target as the client sent it (before an HTTP
/// library normalised it) sets [`RequestHead::uri`] to that instead.
pub fn request_head<'a>(
    parts: &'a http::request::Parts,
    headers: &'a [(&'a [u8], &'a [u8])],
) -> RequestHead<'a> {
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    RequestHead::new(
        parts.method.as_str().as_bytes(),
        target.as_bytes(),
        super::http_version(parts.version),
        headers,
    )
}

/// The header pairs of a response. Pass them to [`response_head`].
pub fn response_headers(headers: &http::HeaderMap) -> Vec<(&[u8], &[u8])> {
    headers
        .iter()
        .map(|(k, v)| (k.as_str().as_bytes(), v.as_bytes()))
        .collect()
}

/// The response head of `status` and `version` with `headers` (from
/// [`response_headers`]).
pub fn response_head<'a>(
    status: http::StatusCode,
    version: http::Version,
    headers: &'a [(&'a [u8], &'a [u8])],
) -> ResponseHead<'a> {
    ResponseHead::new(status.as_u16(), super::http_version(version), headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http2_authority_becomes_host_and_the_target_is_origin_form() {
        let (parts, ()) = http::Request::get("https://example.com:8443/a/b?x=1")
            .version(http::Version::HTTP_2)
            .header("accept", "*/*")
            .body(())
            .unwrap()
            .into_parts();
        let headers = request_headers(&parts);
        assert_eq!(
            headers,
            vec![
                (&b"accept"[..], &b"*/*"[..]),
                (&b"host"[..], &b"example.com:8443"[..])
            ]
        );
        let head = request_head(&parts, &headers);
        assert_eq!(head.uri, b"/a/b?x=1");
        assert_eq!(head.method, b"GET");
        assert_eq!(head.version, b"HTTP/2.0");
    }

    #[test]
    fn a_host_header_is_not_doubled() {
        let (parts, ()) = http::Request::get("http://a.test/")
            .header("host", "b.test")
            .body(())
            .unwrap()
            .into_parts();
        let headers = request_headers(&parts);
        assert_eq!(headers, vec![(&b"host"[..], &b"b.test"[..])]);
    }

    #[test]
    fn responses() {
        let mut h = http::HeaderMap::new();
        h.insert("content-type", "text/html".parse().unwrap());
        let pairs = response_headers(&h);
        let head = response_head(http::StatusCode::NOT_FOUND, http::Version::HTTP_11, &pairs);
        assert_eq!(head.status, 404);
        assert_eq!(head.version, b"HTTP/1.1");
        assert_eq!(
            head.headers,
            &[(&b"content-type"[..], &b"text/html"[..])][..]
        );
    }
}
