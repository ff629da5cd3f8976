//! Email-code sign-in in front of a host or some of its paths.
//!
//! ```toml
//! [gates.sign_in]
//! match = 'http.request.uri.path starts_with "/admin"'   # default: every request
//! allowed = ["alice@example.com", "@example.org"]        # addresses, or "@domain"
//! code_ttl_secs = 600          # a code is good this long
//! max_attempts = 5             # wrong codes per address before the lockout
//! lockout_secs = 900           # how long a locked address (or IP) stays locked
//! codes_per_address = 5        # codes sent per address per `rate_window_secs`
//! codes_per_ip = 20            # codes asked for per client IP per `rate_window_secs`
//! attempts_per_ip = 20         # wrong codes per client IP per `lockout_secs`
//! rate_window_secs = 3600
//! session_ttl_secs = 86400     # sliding: renewed while used
//! ```
//!
//! Flow: a request without a session is sent (303, or `401` JSON for API clients) to
//! `/.waf/sign-in?return_to=PATH`. The page asks for an address; the post (with its form
//! token) answers with the code page whatever the address, so the page does not tell which
//! addresses may sign in, and only for an allowed address, within the rate limits, the
//! answer carries a [`super::Mail`] with a fresh six-digit code for the host to send. The
//! code page posts the code with a signed *pending* token naming the address. A right code
//! sets `__waf_session` (a [`Purpose::Session`] token: a session id and the address,
//! bound like every gate cookie) and redirects to the return path, which must be a
//! same-host path ([`super::safe_return`]).
//!
//! State, in the policy's [`Store`], keyed by a keyed hash of the address (the store never
//! holds an address or a code in clear, so neither does a Redis dump):
//! `si\0code` (the code's keyed hash, wrong attempts), `si\0lock` (locked until),
//! `si\0sent`/`si\0ipsent` (codes sent per address/IP in the window), `si\0ipfail`
//! (wrong codes per IP), `si\0rev` + session id (signed out: refused until the session
//! would have expired). Checking a session is one MAC and one store read (the revocation).
//! Messages and logs name neither the code nor the cookie.
//!
//! # Fleets
//!
//! [`SignIn::declare`] tells the store that the code, the lockout and the revocations are
//! [`ValueKind::Shared`] records and the rate counters [`ValueKind::Count`]s. The in-memory
//! store ignores it: on one process nothing changes. A store shared by a fleet (`waf-redis`:
//! every nginx worker and server with `waf_fleet`, every proxy with `[state]`) publishes every
//! change to every node, so a code asked for through one node signs in through any other,
//! a sign-out holds everywhere, and attempts and rate counts add up over the nodes. No
//! request waits on Redis: each node decides on its mirror, and the mirrors agree within one
//! window (`≤ 2 × (interval + round trip)`, ≈ 0.2 s by default). How a race within the
//! window ends is decided on purpose (`waf_redis::record` has the details):
//!
//! - wrong attempts on one code are added up atomically in Redis (only while the fleet's
//!   code is that code); a guesser spreading over `n` nodes faster than the window gets at
//!   most `n × max_attempts` guesses on a code (the limit exceeded by at most
//!   `(n − 1) × max_attempts`, once), then the shared lockout holds everywhere; slower than
//!   the window, exactly `max_attempts`. The same holds for the per-IP and per-address
//!   limits;
//! - a right code is consumed where it is accepted, and the removal (of that code only, a
//!   newer one survives) reaches every node within the window: the same right code posted to
//!   two nodes within it signs in on both, which only its holder can do;
//! - a code is unknown to the other nodes for up to one window after it was sent, and a
//!   revoked session still passes there for up to one window.

use http::StatusCode;
use serde::Deserialize;

use super::challenge::percent;
use super::token::{Keys, Purpose};
use super::{cookie, form, intervention, safe_return, GateAnswer, GateAnswerOut, Gates, Mail};
use crate::host::pages::PageKind;
use crate::policy::error::{PolicyError, PolicyErrorKind};
use crate::policy::expr::fields::Context;
use crate::policy::expr::Expr;
use crate::policy::state::{Cell, Store, ValueKind};
use crate::policy::{PolicyEffects, Request, NANOS};
use crate::verdict::Intervention;

pub(crate) const SESSION_COOKIE: &str = "__waf_session";

/// Store key prefixes (each followed by the address's keyed hash, the client IP's bytes or
/// the session id), and what they hold ([`SignIn::declare`]).
const CODE: &[u8] = b"si\0code";
const LOCK: &[u8] = b"si\0lock";
const SENT: &[u8] = b"si\0sent";
const IP_SENT: &[u8] = b"si\0ipsent";
const IP_FAIL: &[u8] = b"si\0ipfail";
const REVOKED: &[u8] = b"si\0rev";

/// `[gates.sign_in]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SignInConfig {
    /// Which requests need a session (default: all).
    #[serde(default, rename = "match")]
    pub when: Option<String>,
    /// Who may sign in: addresses (`alice@example.com`) or domains (`@example.org`).
    pub allowed: Vec<String>,
    /// Seconds a code is valid (default 600).
    #[serde(default = "d_code_ttl")]
    pub code_ttl_secs: u64,
    /// Wrong codes per address before it is locked (default 5).
    #[serde(default = "d_attempts")]
    pub max_attempts: u32,
    /// Seconds a locked address or IP stays locked (default 900).
    #[serde(default = "d_lockout")]
    pub lockout_secs: u64,
    /// Codes sent per address per window (default 5).
    #[serde(default = "d_per_address")]
    pub codes_per_address: u32,
    /// Codes asked for per client IP per window (default 20).
    #[serde(default = "d_per_ip")]
    pub codes_per_ip: u32,
    /// Wrong codes per client IP before it is locked out (default 20).
    #[serde(default = "d_per_ip")]
    pub attempts_per_ip: u32,
    /// The rate limits' window in seconds (default 3600).
    #[serde(default = "d_window")]
    pub rate_window_secs: u64,
    /// Session life in seconds, renewed while used (default 86400).
    #[serde(default = "d_session")]
    pub session_ttl_secs: u64,
}

fn d_code_ttl() -> u64 {
    600
}
fn d_attempts() -> u32 {
    5
}
fn d_lockout() -> u64 {
    900
}
fn d_per_address() -> u32 {
    5
}
fn d_per_ip() -> u32 {
    20
}
fn d_window() -> u64 {
    3600
}
fn d_session() -> u64 {
    86400
}

/// Compiled `[gates.sign_in]`.
#[derive(Debug)]
pub(crate) struct SignIn {
    when: Option<Expr>,
    addresses: Vec<String>,
    domains: Vec<String>,
    code_ttl: u64,
    max_attempts: u32,
    lockout: u64,
    per_address: u32,
    per_ip: u32,
    attempts_per_ip: u32,
    window: u64,
    session_ttl: u64,
}

/// Why a sign-in step failed, for the page's error line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    FormExpired,
    InvalidEmail,
    RateLimited,
    Wrong,
    Expired,
    Locked,
}

impl Refusal {
    fn string(self) -> &'static str {
        match self {
            Refusal::FormExpired => "form_expired",
            Refusal::InvalidEmail => "sign_in_invalid_email",
            Refusal::RateLimited => "sign_in_rate_limited",
            Refusal::Wrong => "code_wrong",
            Refusal::Expired => "code_expired",
            Refusal::Locked => "code_locked",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Refusal::FormExpired => "form_expired",
            Refusal::InvalidEmail => "invalid_email",
            Refusal::RateLimited => "rate_limited",
            Refusal::Wrong => "wrong_code",
            Refusal::Expired => "code_expired",
            Refusal::Locked => "locked",
        }
    }
}

impl SignIn {
    pub(crate) fn compile(
        c: &SignInConfig,
        compile_expr: &mut dyn FnMut(&str, &str) -> Result<Expr, PolicyError>,
    ) -> Result<SignIn, PolicyError> {
        let bad = |m: String| {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("[gates.sign_in] {m}"),
            ))
        };
        if c.allowed.is_empty() {
            return bad("`allowed` is empty: nobody could sign in".into());
        }
        let (mut addresses, mut domains) = (Vec::new(), Vec::new());
        for a in &c.allowed {
            let a = a.trim().to_ascii_lowercase();
            if let Some(d) = a.strip_prefix('@') {
                if d.is_empty() || !d.contains('.') {
                    return bad(format!("{a:?} is not a domain (write \"@example.com\")"));
                }
                domains.push(d.to_string());
            } else if valid_email(a.as_bytes()) {
                addresses.push(a);
            } else {
                return bad(format!("{a:?} is not an address or \"@domain\""));
            }
        }
        for (name, v) in [
            ("code_ttl_secs", c.code_ttl_secs),
            ("max_attempts", u64::from(c.max_attempts)),
            ("lockout_secs", c.lockout_secs),
            ("codes_per_address", u64::from(c.codes_per_address)),
            ("codes_per_ip", u64::from(c.codes_per_ip)),
            ("attempts_per_ip", u64::from(c.attempts_per_ip)),
            ("rate_window_secs", c.rate_window_secs),
            ("session_ttl_secs", c.session_ttl_secs),
        ] {
            if v == 0 {
                return bad(format!("{name} must be > 0"));
            }
        }
        let when = c
            .when
            .as_deref()
            .map(|t| compile_expr("sign_in match", t))
            .transpose()?;
        Ok(SignIn {
            when,
            addresses,
            domains,
            code_ttl: c.code_ttl_secs,
            max_attempts: c.max_attempts,
            lockout: c.lockout_secs,
            per_address: c.codes_per_address,
            per_ip: c.codes_per_ip,
            attempts_per_ip: c.attempts_per_ip,
            window: c.rate_window_secs,
            session_ttl: c.session_ttl_secs,
        })
    }

    /// Tells the store what the sign-in keeps: codes, lockouts and revocations are
    /// [`ValueKind::Shared`] records, the rate counters [`ValueKind::Count`]s, so that a
    /// store shared by a fleet (every nginx worker, every node) publishes them to every
    /// node (see the module docs, "Fleets").
    pub(crate) fn declare(store: &dyn Store) {
        for p in [CODE, LOCK, REVOKED] {
            store.declare(p, ValueKind::Shared);
        }
        for p in [SENT, IP_SENT, IP_FAIL] {
            store.declare(p, ValueKind::Count);
        }
    }

    fn allowed(&self, email: &str) -> bool {
        let domain = email.rsplit_once('@').map_or("", |(_, d)| d);
        self.addresses.iter().any(|a| a == email) || self.domains.iter().any(|d| d == domain)
    }

    /// Every request the sign-in guards: a valid, unrevoked session, or to sign-in.
    pub(crate) fn check(
        &self,
        g: &Gates,
        req: &Request<'_>,
        cx: &mut Context<'_>,
        store: &dyn Store,
        effects: &mut PolicyEffects,
    ) -> Option<Intervention> {
        if !self.when.as_ref().is_none_or(|e| e.eval(cx)) {
            return None;
        }
        if let Some(v) = cookie(req, SESSION_COOKIE) {
            if let Ok(d) = g.verify(Purpose::Session, req, v) {
                if d.len() >= 16 && !self.revoked(store, &d[..16], req.now) {
                    if Keys::expiry_of(v) < super::secs(req.now) + self.session_ttl / 2 {
                        let fresh = g.sign(Purpose::Session, req, self.session_ttl, &d);
                        effects.set_cookies.push(g.cookie(
                            req,
                            SESSION_COOKIE,
                            &fresh,
                            self.session_ttl,
                        ));
                    }
                    effects.verified(super::VerifiedCookie::Session);
                    return None;
                }
            }
        }
        let here = super::here(g, req);
        let location = format!("{}sign-in?return_to={}", g.prefix, percent(here.as_bytes()));
        let answer = if super::wants_html(req) {
            g.redirect(StatusCode::SEE_OTHER, &location)
        } else {
            let mut a = g.answer(
                req,
                StatusCode::UNAUTHORIZED,
                PageKind::SignIn,
                Vec::new(),
                &[("error", "sign_in_required"), ("sign_in", &location)],
            );
            a.headers.push(("location", location.clone()));
            a
        };
        let status = answer.status();
        effects.gate = Some(answer);
        Some(intervention(status, "sign-in required"))
    }

    fn revoked(&self, store: &dyn Store, sid: &[u8], now: u64) -> bool {
        let mut k = REVOKED.to_vec();
        k.extend_from_slice(sid);
        store.update(&k, now, &mut |c| c).is_some()
    }

    /// `/.waf/sign-in` (GET: the form; POST: send a code), `/.waf/sign-in/code` (POST),
    /// `/.waf/sign-out`.
    pub(crate) fn endpoint(
        &self,
        g: &Gates,
        req: &Request<'_>,
        path: &[u8],
        body: &[u8],
        store: &dyn Store,
    ) -> GateAnswerOut {
        let plain = |answer| GateAnswerOut { answer, mail: None };
        match path {
            b"sign-in" if req.head.method != b"POST" => {
                let back = form::query(req.query(), "return_to").unwrap_or_default();
                plain(self.form_page(g, req, &safe_return(g, &back), "", None, StatusCode::OK))
            }
            b"sign-in" => self.send_code(g, req, body, store),
            b"sign-in/code" => plain(self.check_code(g, req, body, store)),
            _ => plain(self.sign_out(g, req, store)),
        }
    }

    fn form_page(
        &self,
        g: &Gates,
        req: &Request<'_>,
        return_to: &str,
        email: &str,
        error: Option<Refusal>,
        status: StatusCode,
    ) -> GateAnswer {
        let (nonce, set) = g.form_nonce(req);
        let token = g.form_token(&nonce, b"sign-in");
        let error_text = error.map_or(String::new(), |e| g.pages.0.string(e.string()).to_string());
        let mut a = g.answer(
            req,
            status,
            PageKind::SignIn,
            vec![
                ("action", format!("{}sign-in", g.prefix)),
                ("form_token", token),
                ("return_to", return_to.to_string()),
                ("email", email.to_string()),
                ("error", error_text),
            ],
            &[
                ("error", error.map_or("sign_in_required", Refusal::code)),
                ("sign_in", &format!("{}sign-in", g.prefix)),
            ],
        );
        if let Some(c) = set {
            a.headers.push(("set-cookie", c));
        }
        a
    }

    fn code_page(
        &self,
        g: &Gates,
        req: &Request<'_>,
        (pending, email): (&str, &str),
        return_to: &str,
        error: Option<Refusal>,
        status: StatusCode,
    ) -> GateAnswer {
        let (nonce, set) = g.form_nonce(req);
        let token = g.form_token(&nonce, b"sign-in/code");
        let error_text = error.map_or(String::new(), |e| g.pages.0.string(e.string()).to_string());
        let mut a = g.answer(
            req,
            status,
            PageKind::Code,
            vec![
                ("action", format!("{}sign-in/code", g.prefix)),
                ("form_token", token),
                ("pending", pending.to_string()),
                ("email", email.to_string()),
                ("return_to", return_to.to_string()),
                ("error", error_text),
                ("code_minutes", self.code_ttl.div_ceil(60).to_string()),
            ],
            &[("error", error.map_or("code_sent", Refusal::code))],
        );
        if let Some(c) = set {
            a.headers.push(("set-cookie", c));
        }
        a
    }

    /// `POST /.waf/sign-in`: `email`, `form_token`, `return_to`.
    fn send_code(
        &self,
        g: &Gates,
        req: &Request<'_>,
        body: &[u8],
        store: &dyn Store,
    ) -> GateAnswerOut {
        let plain = |answer| GateAnswerOut { answer, mail: None };
        let return_to = safe_return(g, &form::field(body, "return_to").unwrap_or_default());
        let token = form::field(body, "form_token").unwrap_or_default();
        if !g.check_form(req, b"sign-in", &token) {
            return plain(self.form_page(
                g,
                req,
                &return_to,
                "",
                Some(Refusal::FormExpired),
                StatusCode::FORBIDDEN,
            ));
        }
        let raw = form::field(body, "email").unwrap_or_default();
        let email = String::from_utf8_lossy(raw.trim_ascii()).to_ascii_lowercase();
        if !valid_email(email.as_bytes()) {
            return plain(self.form_page(
                g,
                req,
                &return_to,
                &email,
                Some(Refusal::InvalidEmail),
                StatusCode::BAD_REQUEST,
            ));
        }
        let now = req.now;
        let window = self.window * NANOS;
        let ip_key = ip_key(IP_SENT, req.client);
        let addr = self.address_key(g, &email);
        if !bump(store, &ip_key, now, window, self.per_ip)
            || !bump(
                store,
                &[SENT, &addr].concat(),
                now,
                window,
                self.per_address,
            )
        {
            return plain(self.form_page(
                g,
                req,
                &return_to,
                &email,
                Some(Refusal::RateLimited),
                StatusCode::TOO_MANY_REQUESTS,
            ));
        }
        let pending = g.sign(Purpose::Pending, req, self.code_ttl, email.as_bytes());
        let answer = self.code_page(g, req, (&pending, &email), &return_to, None, StatusCode::OK);
        if !self.allowed(&email) || self.locked(store, &addr, now) {
            // Same page, no mail: the answer does not tell who may sign in.
            return plain(answer);
        }
        let fresh = g.fresh(b"code", req);
        let n = u32::from_be_bytes([fresh[0], fresh[1], fresh[2], fresh[3]]) % 1_000_000;
        let code = format!("{n:06}");
        let hash = self.code_hash(g, &email, &code);
        let expires = now + self.code_ttl * NANOS;
        store.update(&[CODE, &addr].concat(), now, &mut |_| {
            Some(Cell {
                a: hash,
                b: 0,
                expires,
            })
        });
        let minutes = self.code_ttl.div_ceil(60).to_string();
        let vars = [("code", code.as_str()), ("code_minutes", minutes.as_str())];
        let mail = Mail {
            to: email.clone(),
            subject: g.pages.0.text("mail_subject", &vars),
            body: g.pages.0.text("mail_body", &vars),
        };
        let failed = self.form_page(
            g,
            req,
            &return_to,
            &email,
            Some(Refusal::RateLimited),
            StatusCode::SERVICE_UNAVAILABLE,
        );
        let mut failed = failed;
        if let super::Body::Page { vars, .. } = &mut failed.body {
            if let Some(e) = vars.iter_mut().find(|(k, _)| *k == "error") {
                e.1 = g.pages.0.string("sign_in_send_failed").to_string();
            }
        } else {
            failed.body = super::Body::Json("\"error\":\"send_failed\",".into());
        }
        GateAnswerOut {
            answer,
            mail: Some((mail, failed)),
        }
    }

    /// `POST /.waf/sign-in/code`: `pending`, `code`, `form_token`, `return_to`.
    fn check_code(
        &self,
        g: &Gates,
        req: &Request<'_>,
        body: &[u8],
        store: &dyn Store,
    ) -> GateAnswer {
        let return_to = safe_return(g, &form::field(body, "return_to").unwrap_or_default());
        let pending = form::field(body, "pending").unwrap_or_default();
        let token = form::field(body, "form_token").unwrap_or_default();
        let pending_text = String::from_utf8_lossy(&pending).into_owned();
        let email = match g.verify(Purpose::Pending, req, &pending) {
            Ok(e) => String::from_utf8_lossy(&e).into_owned(),
            Err(_) => {
                return self.form_page(
                    g,
                    req,
                    &return_to,
                    "",
                    Some(Refusal::Expired),
                    StatusCode::FORBIDDEN,
                )
            }
        };
        let page = |e: Refusal, status| {
            self.code_page(g, req, (&pending_text, &email), &return_to, Some(e), status)
        };
        if !g.check_form(req, b"sign-in/code", &token) {
            return page(Refusal::FormExpired, StatusCode::FORBIDDEN);
        }
        let now = req.now;
        let addr = self.address_key(g, &email);
        let ip_fail = ip_key(IP_FAIL, req.client);
        if self.locked(store, &addr, now) || over(store, &ip_fail, now, self.attempts_per_ip) {
            return page(Refusal::Locked, StatusCode::TOO_MANY_REQUESTS);
        }
        let code = form::field(body, "code").unwrap_or_default();
        let code = String::from_utf8_lossy(code.trim_ascii()).into_owned();
        let hash = self.code_hash(g, &email, &code);
        let code_key = [CODE, &addr].concat();
        let max = u64::from(self.max_attempts);
        let mut outcome = Refusal::Expired;
        let mut right = false;
        store.update(&code_key, now, &mut |c| match c {
            None => None,
            Some(c) if c.a == hash && code.len() == 6 => {
                right = true;
                None
            }
            Some(c) => {
                outcome = if c.b + 1 >= max {
                    Refusal::Locked
                } else {
                    Refusal::Wrong
                };
                (c.b + 1 < max).then_some(Cell { b: c.b + 1, ..c })
            }
        });
        if !right {
            if outcome != Refusal::Expired {
                bump(store, &ip_fail, now, self.lockout * NANOS, u32::MAX);
            }
            if outcome == Refusal::Locked {
                let until = now + self.lockout * NANOS;
                store.update(&[LOCK, &addr].concat(), now, &mut |_| {
                    Some(Cell {
                        a: 1,
                        b: 0,
                        expires: until,
                    })
                });
                return page(Refusal::Locked, StatusCode::TOO_MANY_REQUESTS);
            }
            return page(outcome, StatusCode::FORBIDDEN);
        }
        let sid = g.fresh(b"session", req);
        let mut data = sid[..16].to_vec();
        data.extend_from_slice(email.as_bytes());
        let value = g.sign(Purpose::Session, req, self.session_ttl, &data);
        let mut a = g.redirect(StatusCode::SEE_OTHER, &return_to);
        a.headers.push((
            "set-cookie",
            g.cookie(req, SESSION_COOKIE, &value, self.session_ttl),
        ));
        a
    }

    /// `GET /.waf/sign-out`: revoke the session and clear the cookie.
    fn sign_out(&self, g: &Gates, req: &Request<'_>, store: &dyn Store) -> GateAnswer {
        if let Some(v) = cookie(req, SESSION_COOKIE) {
            if let Ok(d) = g.verify(Purpose::Session, req, v) {
                if d.len() >= 16 {
                    let mut k = REVOKED.to_vec();
                    k.extend_from_slice(&d[..16]);
                    let until = req.now + self.session_ttl * NANOS;
                    store.update(&k, req.now, &mut |_| {
                        Some(Cell {
                            a: 1,
                            b: 0,
                            expires: until,
                        })
                    });
                }
            }
        }
        let mut a = g.answer(
            req,
            StatusCode::OK,
            PageKind::SignedOut,
            vec![("return_to", format!("{}sign-in", g.prefix))],
            &[("error", "signed_out")],
        );
        a.headers.push((
            "set-cookie",
            format!("{SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"),
        ));
        a
    }

    fn locked(&self, store: &dyn Store, addr: &[u8], now: u64) -> bool {
        store
            .update(&[LOCK, addr].concat(), now, &mut |c| c)
            .is_some()
    }

    /// A keyed hash of the address: the store never holds it in clear.
    fn address_key(&self, g: &Gates, email: &str) -> [u8; 16] {
        let mut k = [0u8; 16];
        k.copy_from_slice(&g.keys.derive(b"address", &[email.as_bytes()])[..16]);
        k
    }

    fn code_hash(&self, g: &Gates, email: &str, code: &str) -> u64 {
        let h = g
            .keys
            .derive(b"code-hash", &[email.as_bytes(), code.as_bytes()]);
        u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
    }
}

fn ip_key(prefix: &[u8], ip: std::net::IpAddr) -> Vec<u8> {
    let mut k = prefix.to_vec();
    match ip {
        std::net::IpAddr::V4(v) => k.extend_from_slice(&v.octets()),
        std::net::IpAddr::V6(v) => k.extend_from_slice(&v.octets()),
    }
    k
}

/// Counts one in a fixed window; false when that goes over `max`.
fn bump(store: &dyn Store, key: &[u8], now: u64, window: u64, max: u32) -> bool {
    let cell = store.update(key, now, &mut |c| {
        Some(match c {
            Some(c) => Cell { a: c.a + 1, ..c },
            None => Cell {
                a: 1,
                b: 0,
                expires: now + window,
            },
        })
    });
    cell.is_some_and(|c| c.a <= u64::from(max))
}

fn over(store: &dyn Store, key: &[u8], now: u64, max: u32) -> bool {
    store
        .update(key, now, &mut |c| c)
        .is_some_and(|c| c.a >= u64::from(max))
}

/// A plausible address: one `@`, a non-empty local part, a dotted domain, visible ASCII
/// only, at most 254 bytes. (Deliverability is the mail server's business.)
pub(crate) fn valid_email(e: &[u8]) -> bool {
    let Some(at) = memchr::memchr(b'@', e) else {
        return false;
    };
    let (local, domain) = (&e[..at], &e[at + 1..]);
    e.len() <= 254
        && !local.is_empty()
        && domain.len() >= 3
        && memchr::memchr(b'@', domain).is_none()
        && domain.contains(&b'.')
        && !domain.starts_with(b".")
        && !domain.ends_with(b".")
        && e.iter()
            .all(|&b| b.is_ascii_graphic() && !b"<>()[]\\,;:\"".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for ok in [&b"a@b.example"[..], b"first.last+tag@sub.example.org"] {
            assert!(valid_email(ok), "{ok:?}");
        }
        for bad in [
            &b""[..],
            b"a",
            b"@b.example",
            b"a@b",
            b"a@@b.example",
            b"a b@c.example",
            b"a@.example",
            b"a@example.",
            b"<a@b.example>",
            b"a@b.example\r\nBcc: x@y.example",
        ] {
            assert!(!valid_email(bad), "{bad:?}");
        }
    }
}
