//! What a body *is*, whatever its `Content-Type` says.
//!
//! Frameworks parse by content, not only by label: Express's `body-parser.json({type:
//! '*/*'})`, Spring with a lenient converter, PHP's `php://input` decoded by the
//! application, analytics collectors that read `text/plain` JSON (sent that way to avoid a
//! CORS preflight). A WAF that trusts the label and skips a `text/plain` body lets a JSON
//! payload through. So the engine also inspects:
//!
//! - a body that starts (after whitespace) with `{` or `[` and parses as JSON, as JSON,
//!   whatever its label (in addition to a declared form processor, which sees the whole
//!   text as one argument name);
//! - a body without a processor that has the shape of a URL-encoded form (one or more
//!   `name=value` pairs, no whitespace or control bytes), as a form;
//! - a body without a processor that starts with an XML declaration (`<?xml`) and parses
//!   as XML, as XML (SOAP endpoints parse whatever arrives).
//!
//! A body that merely starts with `{` but is not JSON is left to its label: sniffing only
//! adds inspection, it never turns a valid request into a parse error.

/// Whether `body` starts, after JSON whitespace, with `{` or `[`.
pub(crate) fn may_be_json(body: &[u8]) -> bool {
    body.iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .is_some_and(|&b| b == b'{' || b == b'[')
}

/// Whether `body` starts, after whitespace, with an XML declaration.
pub(crate) fn may_be_xml(body: &[u8]) -> bool {
    body.trim_ascii_start().starts_with(b"<?xml")
}

/// Whether `body` has the shape of `application/x-www-form-urlencoded` data: non-empty
/// pieces separated by `separator`, at least one with a non-empty name before `=`, and no
/// whitespace or control bytes (which a form encoder always escapes).
pub(crate) fn is_form(body: &[u8], separator: u8) -> bool {
    if body.is_empty() || body.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return false;
    }
    let mut named = false;
    for piece in body.split(|&b| b == separator) {
        match piece.iter().position(|&b| b == b'=') {
            Some(0) => return false,
            Some(_) => named = true,
            None if piece.is_empty() => {}
            None => return false,
        }
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shapes() {
        assert!(may_be_json(b" \r\n{\"a\":1}"));
        assert!(may_be_json(b"[1]"));
        assert!(!may_be_json(b"a={}"));
        assert!(!may_be_json(b""));
        assert!(may_be_xml(b"\n<?xml version=\"1.0\"?><a/>"));
        assert!(!may_be_xml(b"<a/>"));
    }

    #[test]
    fn form_shapes() {
        assert!(is_form(b"a=1&b=%3Cx%3E", b'&'));
        assert!(is_form(b"a=&b=2&", b'&'));
        assert!(!is_form(b"=1", b'&'));
        assert!(!is_form(b"hello world", b'&'));
        assert!(!is_form(b"just-text", b'&'));
        assert!(!is_form(b"a=1\r\nb=2", b'&'));
        assert!(!is_form(b"", b'&'));
    }
}
