//! Gates: a request must show something before it goes through. A solved challenge
//! ([`challenge`]), a place let in from a waiting room ([`queue`]), or a signed-in session
//! ([`signin`]). Each leaves a signed cookie ([`token`]), so a visitor who passed once is
//! let through on every later request by one MAC check, with no state read for a pass, one
//! state update for an admission and one state read for a session.
//!
//! # Shape
//!
//! Like the rest of the core this does no I/O. On a request, the policy step
//! ([`super::TxPolicy::request_headers`]) asks the gates; when one wants something, the
//! request gets an intervention and [`super::PolicyEffects::gate_response`] renders what to
//! answer instead of the block page (the challenge page, the waiting room, a redirect to
//! sign-in; or JSON for API clients). The forms post to endpoints under `path_prefix`
//! (`/.waf/` by default), which the host recognises with
//! [`crate::Waf::is_gate_path`] and hands, with the form body, to
//! [`crate::Waf::gate_request`]. The answer may carry a [`Mail`] (the sign-in code): the
//! host sends it; the core only says what to send.
//!
//! ```toml
//! [gates]
//! keys = ["a random secret of at least 32 bytes", "the previous key, still verifying"]
//! bind = { ip_v4_prefix = 24, ip_v6_prefix = 64, user_agent = true }
//! pages = { block = "blocked.html" }       # replace a page's template
//! strings = { brand = "Example Inc." }     # replace a sentence
//! [gates.challenge]
//! pass_ttl_secs = 3600
//! difficulty = 16
//! [[gates.waiting_room]]
//! name = "sale"
//! match = 'http.request.uri.path starts_with "/sale"'
//! capacity = 500
//! per_minute = 100
//! [gates.sign_in]
//! allowed = ["alice@example.com", "@example.org"]
//! ```
//!
//! # Cookies
//!
//! All gate cookies are `HttpOnly; SameSite=Lax; Path=/`, `Secure` over TLS, and signed
//! with the [`token`] key list, bound to the client's IP prefix and User-Agent as `bind`
//! says. Forms carry a token derived from the `__waf_form` cookie (double-submit, signed),
//! so another site cannot post them for a visitor (CSRF).

pub(crate) mod challenge;
mod form;
pub(crate) mod queue;
pub(crate) mod signin;
pub(crate) mod token;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http::StatusCode;
use serde::Deserialize;

use super::error::{PolicyError, PolicyErrorKind};
use super::expr::fields::Context;
use super::state::Store;
use super::Request;
use crate::host::pages::{PageFiles, PageKind, Pages};
use crate::verdict::{DisruptiveAction, Intervention};

pub use challenge::{ChallengeConfig, ChallengeKind};
pub use queue::WaitingRoomConfig;
pub use signin::SignInConfig;
pub use token::{Binding, KeyError, MIN_KEY_LEN};

/// Default prefix of the gate endpoints.
pub const DEFAULT_PATH_PREFIX: &str = "/.waf/";

/// How long a form token (`__waf_form` cookie) lives: an hour.
const FORM_TTL_SECS: u64 = 3600;

/// `[gates]`: keys, bindings, pages, and the challenge, waiting rooms and sign-in.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Signing keys, each at least [`MIN_KEY_LEN`] bytes; the first signs, all verify.
    pub keys: Vec<String>,
    /// Where the gate endpoints live (default `/.waf/`); must start and end with `/`.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// What every gate cookie is bound to.
    #[serde(default)]
    pub bind: Binding,
    /// Page templates to use instead of the built-in ones.
    #[serde(default)]
    pub pages: PageFiles,
    /// Strings to use instead of the built-in English ones.
    #[serde(default)]
    pub strings: BTreeMap<String, String>,
    /// The `challenge` action's settings.
    #[serde(default)]
    pub challenge: ChallengeConfig,
    /// Waiting rooms (`[[gates.waiting_room]]`), the first that matches a request applies.
    #[serde(default, rename = "waiting_room")]
    pub waiting_rooms: Vec<WaitingRoomConfig>,
    /// Email-code sign-in in front of the host or some paths.
    #[serde(default)]
    pub sign_in: Option<SignInConfig>,
}

/// A mail the host must send (the sign-in code). Its `Debug` hides the body, which holds
/// the code: codes are never logged in clear.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mail {
    /// The recipient.
    pub to: String,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub body: String,
}

impl fmt::Debug for Mail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mail")
            .field("to", &"<redacted>")
            .field("subject", &"<redacted>")
            .field("body", &"<redacted>")
            .finish()
    }
}

/// What to send for a gate: the status, headers (`Set-Cookie`, `Location`, `Retry-After`,
/// `Content-Type`), the body, and for sign-in, a mail to send first.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GateResponse {
    /// The status.
    pub status: StatusCode,
    /// Headers, in order (`Set-Cookie` may repeat).
    pub headers: Vec<(&'static str, String)>,
    /// The body (HTML or JSON, as `Content-Type` says; empty for a redirect).
    pub body: String,
    /// A mail to send before answering; when sending fails, answer
    /// [`GateResponse::send_failed`] instead.
    pub mail: Option<Mail>,
    /// For a mail: the answer when it could not be sent.
    pub send_failed: Option<Box<GateResponse>>,
}

impl GateResponse {
    /// Writes the headers into an `http` header map (`Set-Cookie` appended, others set).
    pub fn write_headers(&self, headers: &mut http::HeaderMap) {
        for (k, v) in &self.headers {
            let Ok(v) = http::HeaderValue::from_str(v) else {
                continue;
            };
            let name = http::HeaderName::from_static(k);
            if *k == "set-cookie" {
                headers.append(name, v);
            } else {
                headers.insert(name, v);
            }
        }
    }
}

/// A gate's answer decided during the policy step, rendered by the host with its request id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateAnswer {
    status: StatusCode,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Body {
    Empty,
    Page {
        pages: Arc<PagesEq>,
        kind: PageKind,
        vars: Vec<(&'static str, String)>,
    },
    /// JSON members after `"status"` and before `"request_id"`, already escaped.
    Json(String),
}

/// [`Pages`] compared by identity, so answers holding them can derive `PartialEq`.
#[derive(Debug)]
pub(crate) struct PagesEq(pub(crate) Pages);

impl PartialEq for PagesEq {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for PagesEq {}

impl GateAnswer {
    /// Renders the answer for a request whose id is `request_id`.
    pub fn render(&self, request_id: &str) -> GateResponse {
        let mut headers = self.headers.clone();
        let body = match &self.body {
            Body::Empty => String::new(),
            Body::Page { pages, kind, vars } => {
                headers.push(("content-type", "text/html; charset=utf-8".into()));
                headers.push((
                    "content-security-policy",
                    crate::host::pages::PAGE_CSP.into(),
                ));
                let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
                pages.0.render(*kind, self.status, request_id, &vars)
            }
            Body::Json(members) => {
                headers.push(("content-type", "application/json".into()));
                let mut s = format!(
                    "{{\"status\":{},{members}\"request_id\":",
                    self.status.as_u16()
                );
                json_str(request_id, &mut s);
                s.push_str("}\n");
                s
            }
        };
        headers.push(("cache-control", "no-store".into()));
        GateResponse {
            status: self.status,
            headers,
            body,
            mail: None,
            send_failed: None,
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }
}

/// The compiled gates of a policy.
#[derive(Debug)]
pub(crate) struct Gates {
    pub(crate) keys: token::Keys,
    pub(crate) bind: Binding,
    pub(crate) prefix: String,
    pub(crate) pages: Arc<PagesEq>,
    pub(crate) challenge: challenge::Challenge,
    pub(crate) rooms: Vec<queue::Room>,
    pub(crate) sign_in: Option<signin::SignIn>,
    counter: AtomicU64,
}

impl Gates {
    /// Compiles `c`; expressions go through `compile_expr` (the policy's scope).
    pub(crate) fn compile(
        c: &GateConfig,
        compile_expr: &mut dyn FnMut(&str, &str) -> Result<super::expr::Expr, PolicyError>,
    ) -> Result<Gates, PolicyError> {
        let keys = token::Keys::new(&c.keys).map_err(|e| invalid(format!("[gates] keys: {e}")))?;
        c.bind
            .validate()
            .map_err(|e| invalid(format!("[gates] bind: {e}")))?;
        let prefix = c
            .path_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_PATH_PREFIX.to_string());
        if !prefix.starts_with('/')
            || !prefix.ends_with('/')
            || prefix.len() < 2
            || !prefix.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(invalid(format!(
                "[gates] path_prefix {prefix:?} must start and end with `/`, and hold no space"
            )));
        }
        let pages = Pages::new(&c.pages, &c.strings)
            .map_err(|e| PolicyError::new(PolicyErrorKind::Io, format!("[gates] {e}")))?;
        let challenge = challenge::Challenge::compile(&c.challenge)?;
        let mut rooms = Vec::new();
        for r in &c.waiting_rooms {
            if rooms.iter().any(|x: &queue::Room| x.name == r.name) {
                return Err(invalid(format!(
                    "waiting room {:?} is defined twice",
                    r.name
                )));
            }
            rooms.push(queue::Room::compile(r, compile_expr)?);
        }
        let sign_in = c
            .sign_in
            .as_ref()
            .map(|s| signin::SignIn::compile(s, compile_expr))
            .transpose()?;
        Ok(Gates {
            keys,
            bind: c.bind,
            prefix,
            pages: Arc::new(PagesEq(pages)),
            challenge,
            rooms,
            sign_in,
            counter: AtomicU64::new(0),
        })
    }

    /// Tells the store what the gates keep in it ([`Store::declare`]): the sign-in's
    /// records and counters (the waiting rooms go through [`Store::line`]).
    pub(crate) fn declare(&self, store: &dyn Store) {
        if self.sign_in.is_some() {
            signin::SignIn::declare(store);
        }
    }

    /// Whether `path` (raw, without query) is one of the gate endpoints' prefix.
    pub(crate) fn is_gate_path(&self, path: &[u8]) -> bool {
        path.starts_with(self.prefix.as_bytes())
    }

    /// Unpredictable bytes for a nonce (see [`token::Keys::derive`]).
    pub(crate) fn fresh(&self, label: &[u8], req: &Request<'_>) -> [u8; 32] {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let ip = match req.client {
            std::net::IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
            std::net::IpAddr::V6(v) => v.octets(),
        };
        // The process id too: nginx forks its workers from one engine, so each starts
        // with the same counter, and two workers must never derive the same nonce.
        let pid = std::process::id();
        self.keys.derive(
            label,
            &[
                &n.to_be_bytes(),
                &pid.to_be_bytes(),
                &req.now.to_be_bytes(),
                &ip,
            ],
        )
    }

    pub(crate) fn client<'a>(&self, req: &Request<'a>) -> token::Client<'a> {
        token::Client {
            ip: req.client,
            user_agent: req.header(b"user-agent").unwrap_or(b""),
        }
    }

    /// A signed token for `req`'s client.
    pub(crate) fn sign(
        &self,
        purpose: token::Purpose,
        req: &Request<'_>,
        ttl_secs: u64,
        data: &[u8],
    ) -> String {
        let mut s = String::with_capacity(64 + data.len() * 2);
        let exp = secs(req.now).saturating_add(ttl_secs);
        self.keys
            .sign(purpose, &self.bind, self.client(req), exp, data, &mut s);
        s
    }

    /// Verifies `token` as a `purpose` token of `req`'s client.
    pub(crate) fn verify(
        &self,
        purpose: token::Purpose,
        req: &Request<'_>,
        token: &[u8],
    ) -> Result<Vec<u8>, token::TokenError> {
        self.keys
            .verify(purpose, &self.bind, self.client(req), secs(req.now), token)
    }

    /// A `Set-Cookie` value for one of our cookies.
    pub(crate) fn cookie(
        &self,
        req: &Request<'_>,
        name: &str,
        value: &str,
        max_age: u64,
    ) -> String {
        let mut s = format!("{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax");
        if req.tls {
            s.push_str("; Secure");
        }
        s
    }

    /// Answer with page `kind` (browsers) or `json` members (API clients).
    pub(crate) fn answer(
        &self,
        req: &Request<'_>,
        status: StatusCode,
        kind: PageKind,
        vars: Vec<(&'static str, String)>,
        json: &[(&str, &str)],
    ) -> GateAnswer {
        let body = if wants_html(req) {
            Body::Page {
                pages: Arc::clone(&self.pages),
                kind,
                vars,
            }
        } else {
            let mut m = String::new();
            for (k, v) in json {
                json_str(k, &mut m);
                m.push(':');
                json_str(v, &mut m);
                m.push(',');
            }
            Body::Json(m)
        };
        GateAnswer {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// A redirect to `location` (a same-host path).
    pub(crate) fn redirect(&self, status: StatusCode, location: &str) -> GateAnswer {
        GateAnswer {
            status,
            headers: vec![("location", location.to_string())],
            body: Body::Empty,
        }
    }

    /// The `__waf_form` nonce of `req`, or a new one with the cookie to set.
    pub(crate) fn form_nonce(&self, req: &Request<'_>) -> ([u8; 16], Option<String>) {
        if let Some(v) = cookie(req, FORM_COOKIE) {
            if let Ok(d) = self.verify(token::Purpose::Form, req, v) {
                if let Ok(n) = <[u8; 16]>::try_from(d.as_slice()) {
                    return (n, None);
                }
            }
        }
        let mut n = [0u8; 16];
        n.copy_from_slice(&self.fresh(b"form", req)[..16]);
        let value = self.sign(token::Purpose::Form, req, FORM_TTL_SECS, &n);
        (
            n,
            Some(self.cookie(req, FORM_COOKIE, &value, FORM_TTL_SECS)),
        )
    }

    /// The form token for a form about `subject`: ties the post to the `__waf_form`
    /// cookie (which another site can neither read nor set) and to what the form is for.
    pub(crate) fn form_token(&self, nonce: &[u8; 16], subject: &[u8]) -> String {
        let t = self.keys.derive(b"form-token", &[nonce, subject]);
        base64_url(&t)
    }

    /// Whether the posted `token` matches `req`'s `__waf_form` cookie for `subject`.
    pub(crate) fn check_form(&self, req: &Request<'_>, subject: &[u8], token: &[u8]) -> bool {
        let Some(v) = cookie(req, FORM_COOKIE) else {
            return false;
        };
        let Ok(d) = self.verify(token::Purpose::Form, req, v) else {
            return false;
        };
        let Ok(n) = <[u8; 16]>::try_from(d.as_slice()) else {
            return false;
        };
        let want = self.form_token(&n, subject);
        constant_time_eq(want.as_bytes(), token)
    }

    /// Steps after the rules: sign-in, then the first waiting room that applies. `None`:
    /// go on.
    pub(crate) fn access(
        &self,
        req: &Request<'_>,
        cx: &mut Context<'_>,
        store: &dyn Store,
        effects: &mut super::PolicyEffects,
    ) -> Option<Intervention> {
        if self.is_gate_path(req.raw_path()) {
            return None;
        }
        if let Some(s) = &self.sign_in {
            if let Some(i) = s.check(self, req, cx, store, effects) {
                return Some(i);
            }
        }
        for room in &self.rooms {
            if room.when.as_ref().is_none_or(|e| e.eval(cx)) {
                return room.check(self, req, cx, store, effects);
            }
        }
        None
    }

    /// A gate endpoint: the challenge answer, the cookie check, sign-in and sign-out.
    pub(crate) fn endpoint(
        &self,
        req: &Request<'_>,
        body: &[u8],
        store: &dyn Store,
    ) -> GateAnswerOut {
        let path = &req.raw_path()[self.prefix.len().min(req.raw_path().len())..];
        let post = req.head.method == b"POST";
        match (path, post) {
            (b"challenge", true) => GateAnswerOut::plain(challenge::answer(self, req, body)),
            (b"cookie", false) => GateAnswerOut::plain(challenge::cookie_check(self, req)),
            (b"sign-in", _) | (b"sign-in/code", true) | (b"sign-out", false) => {
                match &self.sign_in {
                    Some(s) => s.endpoint(self, req, path, body, store),
                    None => GateAnswerOut::plain(self.not_found(req)),
                }
            }
            _ => GateAnswerOut::plain(self.not_found(req)),
        }
    }

    fn not_found(&self, req: &Request<'_>) -> GateAnswer {
        let mut a = self.answer(
            req,
            StatusCode::NOT_FOUND,
            PageKind::Block,
            vec![("reason", "Not Found".into())],
            &[("error", "not_found")],
        );
        a.status = StatusCode::NOT_FOUND;
        a
    }
}

/// An endpoint's answer and the mail to send first (with the answer if sending fails).
#[derive(Debug)]
pub(crate) struct GateAnswerOut {
    pub(crate) answer: GateAnswer,
    pub(crate) mail: Option<(Mail, GateAnswer)>,
}

impl GateAnswerOut {
    fn plain(answer: GateAnswer) -> GateAnswerOut {
        GateAnswerOut { answer, mail: None }
    }

    pub(crate) fn render(&self, request_id: &str) -> GateResponse {
        let mut r = self.answer.render(request_id);
        if let Some((mail, failed)) = &self.mail {
            r.mail = Some(mail.clone());
            r.send_failed = Some(Box::new(failed.render(request_id)));
        }
        r
    }
}

const FORM_COOKIE: &str = "__waf_form";

/// A gate cookie that the rules need not inspect once its gate verified it: it is our own
/// signed token, its bytes checked by its MAC, and inspecting it costs CRS about 264,000
/// instructions per request (a 161-byte cookie through every `REQUEST_COOKIES` rule,
/// `benches/results/profiles-20261201T165845Z.md`, ladder level L3).
///
/// A gate that verified its cookie on a request marks it in [`super::PolicyEffects`]
/// ([`super::PolicyEffects::verified_cookies`]); the rule engine then leaves that one pair
/// (the first with the name and exactly the bytes the gate verified) out of
/// `REQUEST_COOKIES` and `REQUEST_COOKIES_NAMES`. A forged, expired or moved cookie, a
/// second cookie of the same name, or one on a path the gate does not cover is not
/// verified, so it is inspected as any cookie. The engine's copy of the `Cookie` header
/// (`REQUEST_HEADERS:Cookie`) loses the same pair, edited in place (a header left with no
/// cookie is dropped), so the rules see the request as if the verified cookie had not been
/// sent (`FULL_REQUEST_LENGTH` and the ML detector's values included); the host forwards
/// the header as it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VerifiedCookie {
    /// `__waf_pass`, met by a challenge rule in the first policy step.
    Pass = 1,
    /// `__waf_admit`, an admitted visitor of a waiting room.
    Admission = 2,
    /// `__waf_session`, a valid, unrevoked sign-in session.
    Session = 4,
}

impl VerifiedCookie {
    /// Every kind, in bit order.
    pub(crate) const ALL: [VerifiedCookie; 3] = [
        VerifiedCookie::Pass,
        VerifiedCookie::Admission,
        VerifiedCookie::Session,
    ];

    /// The cookie's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            VerifiedCookie::Pass => challenge::PASS_COOKIE,
            VerifiedCookie::Admission => queue::ADMIT_COOKIE,
            VerifiedCookie::Session => signin::SESSION_COOKIE,
        }
    }
}

/// The intervention that carries a gate answer.
pub(crate) fn intervention(status: StatusCode, message: &str) -> Intervention {
    Intervention {
        status: status.as_u16(),
        action: DisruptiveAction::Deny,
        rule_id: 0,
        message: Some(message.to_string()),
    }
}

/// Whether `req` came from a browser that wants a page: its `Accept` names HTML and does
/// not prefer JSON. API clients (JSON first, `*/*` only, or no `Accept`) get JSON.
pub(crate) fn wants_html(req: &Request<'_>) -> bool {
    let accept = req.header(b"accept").unwrap_or(b"");
    let html = memchr::memmem::find(&accept.to_ascii_lowercase(), b"text/html").is_some();
    html && !crate::host::block_page::prefers_json(accept)
}

/// The value of cookie `name` in `req` (the first one).
pub(crate) fn cookie<'a>(req: &Request<'a>, name: &str) -> Option<&'a [u8]> {
    cookie_in(req.head.headers, name)
}

/// The value of cookie `name` in `headers` (the first one, trimmed): what every gate reads
/// and verifies.
pub(crate) fn cookie_in<'a>(headers: &[(&'a [u8], &'a [u8])], name: &str) -> Option<&'a [u8]> {
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        if let Some((_, value)) = cookie_span(v, name) {
            return Some(&v[value]);
        }
    }
    None
}

/// Where cookie `name` is in one `Cookie` header value `v` (the first, as [`cookie_in`]
/// reads it): the whole piece between `;`s, and its value, trimmed.
pub(crate) fn cookie_span(v: &[u8], name: &str) -> Option<(Range<usize>, Range<usize>)> {
    let mut start = 0;
    loop {
        let end = memchr::memchr(b';', &v[start..]).map_or(v.len(), |i| start + i);
        let piece = &v[start..end];
        let lead = piece.len() - piece.trim_ascii_start().len();
        if let Some(rest) = piece.trim_ascii().strip_prefix(name.as_bytes()) {
            if let Some(value) = rest.strip_prefix(b"=") {
                let at =
                    start + lead + name.len() + 1 + (value.len() - value.trim_ascii_start().len());
                return Some((start..end, at..at + value.trim_ascii().len()));
            }
        }
        if end == v.len() {
            return None;
        }
        start = end + 1;
    }
}
/// A same-host path to send the visitor back to: it must start with one `/` (not `//` or
/// `/\`, which browsers read as another host), hold only visible ASCII, and not point into
/// the gate endpoints; anything else becomes `/`. This is the open-redirect defence of the
/// post-sign-in and post-challenge redirects.
pub(crate) fn safe_return(gates: &Gates, target: &[u8]) -> String {
    let ok = target.len() <= 2048
        && target.first() == Some(&b'/')
        && !matches!(target.get(1), Some(b'/' | b'\\'))
        && target.iter().all(|&b| b.is_ascii_graphic() && b != b'\\')
        && !target.starts_with(gates.prefix.as_bytes());
    if ok {
        // Visible ASCII, checked above.
        String::from_utf8_lossy(target).into_owned()
    } else {
        "/".to_string()
    }
}

/// The request's own target, as a return path.
pub(crate) fn here(gates: &Gates, req: &Request<'_>) -> String {
    let (t, _) = req.target();
    safe_return(gates, t)
}

fn invalid(m: String) -> PolicyError {
    PolicyError::new(PolicyErrorKind::Invalid, m)
}

/// Nanoseconds to whole seconds.
pub(crate) fn secs(ns: u64) -> u64 {
    ns / super::NANOS
}

pub(crate) fn base64_url(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Appends `s` as a JSON string.
pub(crate) fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
