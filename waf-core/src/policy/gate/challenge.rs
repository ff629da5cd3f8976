//! The `challenge` action of the policy rules: a cookie challenge or a JavaScript
//! proof of work, then a pass cookie.
//!
//! ```toml
//! [[rules]]
//! name = "bots-on-search"
//! expression = 'http.request.uri.path starts_with "/search"'
//! action = "challenge"
//! challenge = "pow"          # or "cookie" (default "pow")
//! difficulty = 18            # leading zero bits (default: [gates.challenge] difficulty)
//! ```
//!
//! - **Cookie**: the answer sets the pass cookie and redirects to `/.waf/cookie`, which
//!   sends the visitor back where it was going when the cookie came back (a client that
//!   keeps cookies passes), or shows the "cookies required" page when it did not.
//! - **Proof of work**: the page carries a signed challenge (difficulty, nonce, return
//!   path, expiry; bound to the client). Its script finds a number `n` such that
//!   `SHA-256(challenge ":" n)` starts with `difficulty` zero bits, with WebCrypto (or,
//!   where `crypto.subtle` is missing, plain HTTP on a name other than `localhost`, with a
//!   SHA-256 of its own, checked against a known digest first), and posts it to
//!   `/.waf/challenge` with the form token. The expected work is `2^difficulty` hashes;
//!   checking it is one hash.
//! - **API clients** (JSON preferred, or no HTML in `Accept`) get
//!   `{"status":403,"error":"challenge_required","challenge":"pow",...}` instead of a page.
//!
//! A challenged `POST` (or any method but `GET`) loses its body: both challenges end with
//! a redirect the browser follows with `GET` to the same path, and the visitor submits the
//! form again with the pass. So challenges belong on the pages that lead to a form rather
//! than on its target (the README says so too).
//!
//! A solved challenge sets `__waf_pass`, a [`Purpose::Pass`] token holding the kind and
//! difficulty solved, for `pass_ttl_secs`. A rule's challenge is met by a pass of the same
//! or a stronger kind (a proof of work of at least its difficulty meets a cookie rule).

use http::StatusCode;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::token::Purpose;
use super::{cookie, form, here, safe_return, GateAnswer, Gates};
use crate::host::pages::PageKind;
use crate::limits::DEFAULT_MAX_POW_DIFFICULTY;
use crate::policy::error::{PolicyError, PolicyErrorKind};
use crate::policy::Request;

/// The pass cookie.
pub(crate) const PASS_COOKIE: &str = "__waf_pass";

/// Which challenge a rule asks for.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChallengeKind {
    /// JavaScript proof of work (SHA-256).
    #[default]
    Pow,
    /// Set a cookie and redirect.
    Cookie,
}

/// `[gates.challenge]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ChallengeConfig {
    /// How long a pass cookie is good for, in seconds (default 3600).
    pub pass_ttl_secs: u64,
    /// Default proof-of-work difficulty in leading zero bits (default 16, at most 24).
    pub difficulty: u8,
    /// How long a challenge page may take to be solved, in seconds (default 300).
    pub challenge_ttl_secs: u64,
}

impl Default for ChallengeConfig {
    fn default() -> Self {
        ChallengeConfig {
            pass_ttl_secs: 3600,
            difficulty: 16,
            challenge_ttl_secs: 300,
        }
    }
}

/// Compiled `[gates.challenge]`.
#[derive(Debug)]
pub(crate) struct Challenge {
    pass_ttl: u64,
    pub(crate) difficulty: u8,
    challenge_ttl: u64,
}

impl Challenge {
    pub(crate) fn compile(c: &ChallengeConfig) -> Result<Challenge, PolicyError> {
        check_difficulty(c.difficulty)?;
        if c.pass_ttl_secs == 0 || c.challenge_ttl_secs == 0 {
            return Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                "[gates.challenge] pass_ttl_secs and challenge_ttl_secs must be > 0".to_string(),
            ));
        }
        Ok(Challenge {
            pass_ttl: c.pass_ttl_secs,
            difficulty: c.difficulty,
            challenge_ttl: c.challenge_ttl_secs,
        })
    }
}

/// A difficulty must be 1..=[`DEFAULT_MAX_POW_DIFFICULTY`].
pub(crate) fn check_difficulty(d: u8) -> Result<(), PolicyError> {
    if d == 0 || d > DEFAULT_MAX_POW_DIFFICULTY {
        return Err(PolicyError::new(
            PolicyErrorKind::Invalid,
            format!("difficulty {d} is not 1..={DEFAULT_MAX_POW_DIFFICULTY}"),
        ));
    }
    Ok(())
}

fn kind_byte(k: ChallengeKind) -> u8 {
    match k {
        ChallengeKind::Cookie => 1,
        ChallengeKind::Pow => 2,
    }
}

/// Whether `req` carries a pass that meets a `kind` challenge of `difficulty`.
pub(crate) fn has_pass(g: &Gates, req: &Request<'_>, kind: ChallengeKind, difficulty: u8) -> bool {
    let Some(v) = cookie(req, PASS_COOKIE) else {
        return false;
    };
    match g.verify(Purpose::Pass, req, v).as_deref() {
        Ok([k, d]) => match kind {
            ChallengeKind::Cookie => true,
            ChallengeKind::Pow => *k == kind_byte(ChallengeKind::Pow) && *d >= difficulty,
        },
        _ => false,
    }
}

/// The answer to a request a rule challenges.
pub(crate) fn challenge(
    g: &Gates,
    req: &Request<'_>,
    kind: ChallengeKind,
    difficulty: u8,
    status: StatusCode,
) -> GateAnswer {
    match kind {
        ChallengeKind::Cookie => {
            let pass = g.sign(
                Purpose::Pass,
                req,
                g.challenge.pass_ttl,
                &[kind_byte(kind), 0],
            );
            let location = format!(
                "{}cookie?return_to={}",
                g.prefix,
                percent(here(g, req).as_bytes())
            );
            let mut a = g.redirect(StatusCode::FOUND, &location);
            a.headers.push((
                "set-cookie",
                g.cookie(req, PASS_COOKIE, &pass, g.challenge.pass_ttl),
            ));
            a
        }
        ChallengeKind::Pow => pow_page(g, req, difficulty, status, &here(g, req)),
    }
}

/// A fresh proof-of-work page for `req`.
fn pow_page(
    g: &Gates,
    req: &Request<'_>,
    difficulty: u8,
    status: StatusCode,
    return_to: &str,
) -> GateAnswer {
    let fresh = g.fresh(b"challenge", req);
    let mut data = Vec::with_capacity(13 + return_to.len());
    data.push(difficulty);
    data.extend_from_slice(&fresh[..12]);
    data.extend_from_slice(return_to.as_bytes());
    let token = g.sign(Purpose::Challenge, req, g.challenge.challenge_ttl, &data);
    let (nonce, set_form) = g.form_nonce(req);
    let form_token = g.form_token(&nonce, &fresh[..12]);
    let mut a = g.answer(
        req,
        status,
        PageKind::Challenge,
        vec![
            ("action", format!("{}challenge", g.prefix)),
            ("challenge", token),
            ("form_token", form_token),
            ("difficulty", difficulty.to_string()),
        ],
        &[
            ("error", "challenge_required"),
            ("challenge", "pow"),
            ("reason", "a rule asks this client to solve a challenge"),
        ],
    );
    if let Some(c) = set_form {
        a.headers.push(("set-cookie", c));
    }
    a
}

/// `POST /.waf/challenge`: check the proof of work; a pass cookie and a redirect back, or
/// a new challenge.
pub(crate) fn answer(g: &Gates, req: &Request<'_>, body: &[u8]) -> GateAnswer {
    let token = form::field(body, "challenge").unwrap_or_default();
    let answer = form::field(body, "answer").unwrap_or_default();
    let form_token = form::field(body, "form_token").unwrap_or_default();
    let data = match g.verify(Purpose::Challenge, req, &token) {
        Ok(d) if d.len() >= 13 => d,
        // Forged, expired or moved: start again with a new challenge.
        _ => return pow_page(g, req, g.challenge.difficulty, StatusCode::FORBIDDEN, "/"),
    };
    let difficulty = data[0];
    let nonce = &data[1..13];
    let return_to = safe_return(g, &data[13..]);
    if !g.check_form(req, nonce, &form_token) {
        return pow_page(g, req, difficulty, StatusCode::FORBIDDEN, &return_to);
    }
    if !solves(&token, &answer, difficulty) {
        return pow_page(g, req, difficulty, StatusCode::FORBIDDEN, &return_to);
    }
    let pass = g.sign(
        Purpose::Pass,
        req,
        g.challenge.pass_ttl,
        &[kind_byte(ChallengeKind::Pow), difficulty],
    );
    let mut a = g.redirect(StatusCode::SEE_OTHER, &return_to);
    a.headers.push((
        "set-cookie",
        g.cookie(req, PASS_COOKIE, &pass, g.challenge.pass_ttl),
    ));
    a
}

/// `GET /.waf/cookie?return_to=`: the cookie challenge's second step.
pub(crate) fn cookie_check(g: &Gates, req: &Request<'_>) -> GateAnswer {
    let back = form::query(req.query(), "return_to").unwrap_or_default();
    let back = safe_return(g, &back);
    if has_pass(g, req, ChallengeKind::Cookie, 0) {
        return g.redirect(StatusCode::SEE_OTHER, &back);
    }
    g.answer(
        req,
        StatusCode::FORBIDDEN,
        PageKind::Cookie,
        vec![("return_to", back)],
        &[
            ("error", "cookies_required"),
            ("challenge", "cookie"),
            ("reason", "the client did not send the cookie back"),
        ],
    )
}

/// Whether `SHA-256(token ":" answer)` has `difficulty` leading zero bits. The answer is
/// 1 to 20 decimal digits.
pub(crate) fn solves(token: &[u8], answer: &[u8], difficulty: u8) -> bool {
    if answer.is_empty() || answer.len() > 20 || !answer.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let mut h = Sha256::new();
    h.update(token);
    h.update(b":");
    h.update(answer);
    leading_zero_bits(&h.finalize()) >= u32::from(difficulty)
}

fn leading_zero_bits(h: &[u8]) -> u32 {
    let mut n = 0;
    for &b in h {
        if b == 0 {
            n += 8;
        } else {
            return n + b.leading_zeros();
        }
    }
    n
}

/// Percent-encodes `s` for a query value.
pub(crate) fn percent(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Solves a challenge the way the page's script does (tests and benches).
#[cfg(test)]
pub(crate) fn solve(token: &[u8], difficulty: u8) -> String {
    (0u64..)
        .map(|n| n.to_string())
        .find(|n| solves(token, n.as_bytes(), difficulty))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proof_of_work_check() {
        let t = b"token";
        let n = solve(t, 8);
        assert!(solves(t, n.as_bytes(), 8));
        assert!(
            leading_zero_bits(&Sha256::digest(
                b"token:"
                    .iter()
                    .chain(n.as_bytes())
                    .copied()
                    .collect::<Vec<u8>>()
            )) >= 8
        );
        for bad in [&b""[..], b"-1", b"1.0", b"123456789012345678901", b"12a"] {
            assert!(!solves(t, bad, 1), "{bad:?}");
        }
        assert_eq!(leading_zero_bits(&[0, 0x10]), 11);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
        assert_eq!(percent(b"/a b?c=d&e"), "/a%20b%3Fc%3Dd%26e");
    }
}
