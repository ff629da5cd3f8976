//! What a blocked client sees.
//!
//! The HTML is the block page of [`super::pages`] (styled, self-contained, replaceable by
//! the deployment through [`Pages`]).
//!
//! The page states the status and the request id, so a user can quote it to support and an
//! operator can find the log entry. It deliberately says nothing else: no rule id, rule
//! message, matched data or anomaly score, which would tell an attacker which rule to evade.
//! HTML by default; JSON when `Accept` prefers `application/json` (or any `+json` type).
//!
//! `redirect:URL` becomes a redirect (302 unless the rule set 301, 302, 303, 307 or 308)
//! with a `Location`. `drop` cannot be carried out by every host; those that cannot close
//! the connection answer with the block page instead.

use std::fmt::Write as _;

use http::StatusCode;

use super::pages::{PageKind, Pages};
use crate::verdict::{DisruptiveAction, Intervention};

/// A rendered answer to an [`Intervention`]: what to send instead of the real response.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockPage {
    /// The status: the rule's `status:N` (403 by default), or a redirect status.
    pub status: StatusCode,
    /// `text/html; charset=utf-8` or `application/json`.
    pub content_type: &'static str,
    /// The page.
    pub body: String,
    /// For `redirect:URL`, the `Location` to send. Always a valid header value (visible
    /// ASCII); a rule whose URL is not gets the plain block page instead.
    pub location: Option<String>,
}

/// Renders the answer to `intervention` for a request whose id is `request_id`, in the
/// format `accept` (the request's `Accept` header) prefers.
///
/// The request id is escaped for HTML and JSON whatever its source. A status outside
/// 100..=999 becomes 403.
pub fn block_response(
    intervention: &Intervention,
    request_id: &str,
    accept: Option<&[u8]>,
) -> BlockPage {
    block_response_with(&Pages::default(), intervention, request_id, accept)
}

/// [`block_response`] with the deployment's pages ([`Pages::block`]).
pub(crate) fn block_response_with(
    pages: &Pages,
    intervention: &Intervention,
    request_id: &str,
    accept: Option<&[u8]>,
) -> BlockPage {
    let mut status = StatusCode::from_u16(intervention.status).unwrap_or(StatusCode::FORBIDDEN);
    let mut location = None;
    if let DisruptiveAction::Redirect(url) = &intervention.action {
        if !url.is_empty() && url.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            location = Some(url.clone());
            if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                status = StatusCode::FOUND;
            }
        } else if status.is_redirection() {
            status = StatusCode::FORBIDDEN;
        }
    }
    let (content_type, body) = if prefers_json(accept.unwrap_or(b"")) {
        ("application/json", json_page(status, request_id))
    } else {
        (
            "text/html; charset=utf-8",
            html_page(pages, status, request_id),
        )
    };
    BlockPage {
        status,
        content_type,
        body,
        location,
    }
}

fn html_page(pages: &Pages, status: StatusCode, request_id: &str) -> String {
    let reason = status.canonical_reason().unwrap_or("Blocked");
    pages.render(PageKind::Block, status, request_id, &[("reason", reason)])
}

fn json_page(status: StatusCode, request_id: &str) -> String {
    let mut id = String::with_capacity(request_id.len());
    for c in request_id.chars() {
        match c {
            '"' => id.push_str("\\\""),
            '\\' => id.push_str("\\\\"),
            '<' | '>' | '&' => {
                let _ = write!(id, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(id, "\\u{:04x}", c as u32);
            }
            c => id.push(c),
        }
    }
    format!(
        "{{\"error\":\"request blocked\",\"status\":{},\"request_id\":\"{id}\"}}\n",
        status.as_u16()
    )
}

/// Whether `accept` ranks a JSON type above HTML. Media ranges are compared without
/// parameters other than `q`; `*/*` and `text/*` count for HTML, so only a client that asks
/// for JSON more than for anything else gets JSON.
pub(crate) fn prefers_json(accept: &[u8]) -> bool {
    let Ok(accept) = std::str::from_utf8(accept) else {
        return false;
    };
    let (mut json, mut html) = (0u16, 0u16);
    for range in accept.split(',').take(64) {
        let mut params = range.split(';');
        let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = params
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1000, |(_, v)| parse_q(v.trim()));
        if media == "application/json" || media.ends_with("+json") {
            json = json.max(q);
        } else if matches!(
            media.as_str(),
            "text/html" | "application/xhtml+xml" | "text/*" | "*/*"
        ) {
            html = html.max(q);
        }
    }
    json > html
}

/// A quality value (`0.8`) in thousandths; malformed values count as 0.
fn parse_q(v: &str) -> u16 {
    match v.parse::<f32>() {
        Ok(q) if (0.0..=1.0).contains(&q) => (q * 1000.0).round() as u16,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(status: u16) -> Intervention {
        Intervention {
            status,
            action: DisruptiveAction::Deny,
            rule_id: 942100,
            message: Some("SQL Injection Attack Detected via libinjection".into()),
        }
    }

    #[test]
    fn html_by_default_and_nothing_useful_to_an_attacker() {
        let page = block_response(&deny(403), "abc-123", None);
        assert_eq!(page.status, StatusCode::FORBIDDEN);
        assert_eq!(page.content_type, "text/html; charset=utf-8");
        assert!(page.body.contains(">abc-123</code>"), "{}", page.body);
        assert!(page.body.contains("403 Forbidden"));
        assert!(!page.body.contains("942100"));
        assert!(!page.body.contains("SQL"));
        assert_eq!(page.location, None);
    }

    #[test]
    fn json_when_preferred() {
        let page = block_response(&deny(403), "abc-123", Some(b"application/json"));
        assert_eq!(page.content_type, "application/json");
        assert_eq!(
            page.body,
            "{\"error\":\"request blocked\",\"status\":403,\"request_id\":\"abc-123\"}\n"
        );
        for (accept, json) in [
            (&b"text/html,application/json;q=0.9"[..], false),
            (b"application/json;q=0.9, text/html;q=0.5", true),
            (b"application/problem+json", true),
            (b"*/*", false),
            (b"", false),
            (b"application/json, */*", false),
            (b"application/json;q=bogus", false),
            (b"APPLICATION/JSON", true),
            (b"\xff", false),
        ] {
            assert_eq!(
                prefers_json(accept),
                json,
                "{:?}",
                String::from_utf8_lossy(accept)
            );
        }
    }

    #[test]
    fn request_id_is_escaped() {
        let page = block_response(&deny(403), "<b>\"x\"&'", None);
        assert!(
            page.body.contains("&lt;b&gt;&quot;x&quot;&amp;&#39;"),
            "{}",
            page.body
        );
        let page = block_response(&deny(403), "\"\\<\n", Some(b"application/json"));
        assert!(
            page.body.contains(r#""request_id":"\"\\\u003c\u000a""#),
            "{}",
            page.body
        );
    }

    #[test]
    fn statuses() {
        assert_eq!(block_response(&deny(406), "x", None).status.as_u16(), 406);
        assert_eq!(
            block_response(&deny(0), "x", None).status,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            block_response(&deny(1000), "x", None).status,
            StatusCode::FORBIDDEN
        );
        let page = block_response(&deny(413), "x", None);
        assert!(page.body.contains("413 Payload Too Large"), "{}", page.body);
    }

    #[test]
    fn redirects() {
        let mut i = deny(403);
        i.action = DisruptiveAction::Redirect("https://example.com/blocked".into());
        let page = block_response(&i, "x", None);
        assert_eq!(page.status, StatusCode::FOUND);
        assert_eq!(
            page.location.as_deref(),
            Some("https://example.com/blocked")
        );
        i.status = 301;
        assert_eq!(block_response(&i, "x", None).status.as_u16(), 301);
        i.status = 307;
        assert_eq!(block_response(&i, "x", None).status.as_u16(), 307);
        // A URL that is not a valid header value: the block page, not a redirect.
        i.action = DisruptiveAction::Redirect("https://e.com/\r\nSet-Cookie: x".into());
        let page = block_response(&i, "x", None);
        assert_eq!(page.location, None);
        assert_eq!(page.status, StatusCode::FORBIDDEN);
    }
}
