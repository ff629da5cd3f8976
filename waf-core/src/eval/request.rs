//! Turning the request line into `REQUEST_URI`, `REQUEST_FILENAME`, `QUERY_STRING`, ...
//!
//! Follows libmodsecurity 3: a `#fragment` is kept only in `REQUEST_URI_RAW` and
//! `REQUEST_LINE`; `REQUEST_URI` and `REQUEST_FILENAME` are percent-decoded (but `+` is
//! not a space in a path); an absolute URI (`http://host/path`) loses its scheme and
//! authority, as in Coraza; `REQUEST_BASENAME` is what follows the last `/` or `\`.

use super::data::{refill, TxData};
use crate::body::urlencoded::hex_val;

/// Replaces `out` with `input` percent-decoded (`%XX`); invalid sequences are kept as they
/// are.
fn percent_decode_into(input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if !input.contains(&b'%') {
        out.extend_from_slice(input);
        return;
    }
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' && i + 2 < input.len() {
            if let (Some(h), Some(l)) = (hex_val(input[i + 1]), hex_val(input[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(input[i]);
        i += 1;
    }
}

/// Fills the request-line variables of `data`.
pub(crate) fn set_request_line(data: &mut TxData, method: &[u8], uri: &[u8], version: &[u8]) {
    refill(&mut data.method, method);
    refill(&mut data.protocol, version);
    refill(&mut data.uri_raw, uri);
    let line = &mut data.request_line;
    line.clear();
    line.extend_from_slice(method);
    line.push(b' ');
    line.extend_from_slice(uri);
    line.push(b' ');
    line.extend_from_slice(version);

    let without_fragment = match uri.iter().position(|&b| b == b'#') {
        Some(i) => &uri[..i],
        None => uri,
    };
    // Strip scheme and authority of an absolute URI.
    let mut target = without_fragment;
    if !target.starts_with(b"/") {
        if let Some(colon) = target.iter().position(|&b| b == b':') {
            let rest = &target[colon + 1..];
            if rest.starts_with(b"//")
                && target[..colon]
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
            {
                let after = &rest[2..];
                target = match after.iter().position(|&b| b == b'/' || b == b'?') {
                    Some(p) => &after[p..],
                    None => b"",
                };
            }
        }
    }
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    };
    refill(&mut data.query_string, query.unwrap_or_default());
    percent_decode_into(target, &mut data.uri);
    percent_decode_into(path, &mut data.filename);
    let base = match data.filename.iter().rposition(|&b| b == b'/' || b == b'\\') {
        Some(i) => i + 1,
        None => 0,
    };
    refill(&mut data.basename, &data.filename[base..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_splits() {
        let mut d = TxData::default();
        set_request_line(&mut d, b"GET", b"/a%20b/c.php?x=%27#frag", b"HTTP/1.1");
        assert_eq!(d.filename, b"/a b/c.php");
        assert_eq!(d.basename, b"c.php");
        assert_eq!(d.query_string, b"x=%27");
        assert_eq!(d.uri, b"/a b/c.php?x='");
        assert_eq!(d.uri_raw, b"/a%20b/c.php?x=%27#frag");
        assert_eq!(d.request_line, b"GET /a%20b/c.php?x=%27#frag HTTP/1.1");
    }

    #[test]
    fn absolute_uri_and_bad_escapes() {
        let mut d = TxData::default();
        set_request_line(&mut d, b"GET", b"http://example.com/p%zz?q", b"HTTP/1.1");
        assert_eq!(d.filename, b"/p%zz");
        assert_eq!(d.query_string, b"q");
        let mut out = b"old".to_vec();
        percent_decode_into(b"%4", &mut out);
        assert_eq!(out, b"%4");
        percent_decode_into(b"%41%", &mut out);
        assert_eq!(out, b"A%");
        // A second request line replaces every variable of the first.
        set_request_line(&mut d, b"POST", b"/x", b"HTTP/1.0");
        assert_eq!(
            (
                &d.filename[..],
                &d.basename[..],
                &d.query_string[..],
                &d.uri[..]
            ),
            (&b"/x"[..], &b"x"[..], &b""[..], &b"/x"[..])
        );
        assert_eq!(d.request_line, b"POST /x HTTP/1.0");
    }
}
