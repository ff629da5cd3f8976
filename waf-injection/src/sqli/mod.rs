//! SQL injection detection: libinjection's tokenizer, folding and fingerprint check.
//!
//! [`detect_sqli`] gives the verdict and fingerprint of C libinjection 3.9.2's
//! `libinjection_sqli` (`tests/sqli_differential.rs` compares the two on the whole
//! differential corpus). The algorithm, per context:
//!
//! 1. [`tokenizer`]: bytes to tokens (type letter + value), in one quote context (none, or
//!    pretending the input starts inside `'` or `"`) and one dialect (ANSI or MySQL);
//! 2. [`fold`]: tokens folded to at most five, whose type letters are the fingerprint;
//! 3. [`check`]: the fingerprint must be in libinjection's blacklist ([`keywords`]) and
//!    pass the false-positive rules of `libinjection_sqli_not_whitelist`.
//!
//! The contexts, in C's order, stop at the first hit: as is (ANSI, then MySQL when the
//! ANSI pass saw `#` or `--x`), then inside `'` if the input has one (ANSI, then MySQL
//! likewise), then inside `"` if it has one (MySQL).
//!
//! Everything lives on the stack (eight 36-byte token slots); nothing is allocated and no
//! input can panic (indices stay within the slots, reads of the input are checked).

mod check;
mod fold;
mod hash;
mod keywords;
mod token;
mod tokenizer;

use fold::{fold, TokenVec};
use token::{kind, Token};
use tokenizer::Tokenizer;

/// A SQL injection fingerprint: up to 8 token-type letters (`s&sos`, `1UE`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Fingerprint {
    bytes: [u8; 8],
    len: u8,
}

impl Fingerprint {
    /// The letters.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The letters as text (they are always ASCII).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// The fingerprint of the first `len` folded tokens.
    #[inline]
    fn of(tokens: &TokenVec, len: usize) -> Fingerprint {
        let mut fp = Fingerprint::default();
        for (dst, t) in fp.bytes.iter_mut().zip(tokens.iter().take(len)) {
            *dst = t.kind;
        }
        fp.len = len.min(8) as u8;
        fp
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fingerprint({:?})", self.as_str())
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fingerprint of `input` when it is a SQL injection, `None` otherwise.
///
/// Same verdict and fingerprint as C libinjection 3.9.2's `libinjection_sqli`. Allocates
/// nothing; any input is accepted.
pub fn detect_sqli(input: &[u8]) -> Option<Fingerprint> {
    if input.is_empty() {
        return None;
    }
    let mut tokens: TokenVec = [Token::EMPTY; 8];
    if let Some(fp) = try_context(input, 0, &mut tokens) {
        return Some(fp);
    }
    if memchr::memchr(b'\'', input).is_some() {
        if let Some(fp) = try_context(input, b'\'', &mut tokens) {
            return Some(fp);
        }
    }
    if memchr::memchr(b'"', input).is_some() {
        let (fp, _) = pass(input, b'"', true, &mut tokens);
        if check::is_sqli(&fp, &tokens, input) {
            return Some(fp.fingerprint);
        }
    }
    None
}

/// One quote context: ANSI, then MySQL when the ANSI pass saw comment syntax that MySQL
/// reads differently (`reparse_as_mysql`).
#[inline]
fn try_context(input: &[u8], delim: u8, tokens: &mut TokenVec) -> Option<Fingerprint> {
    let (fp, reparse) = pass(input, delim, false, tokens);
    if check::is_sqli(&fp, tokens, input) {
        return Some(fp.fingerprint);
    }
    if reparse {
        let (fp, _) = pass(input, delim, true, tokens);
        if check::is_sqli(&fp, tokens, input) {
            return Some(fp.fingerprint);
        }
    }
    None
}

/// The outcome of one pass (`libinjection_sqli_fingerprint`).
pub(crate) struct Pass {
    /// The type letters of the folded tokens, or `X` when any is evil.
    pub(crate) fingerprint: Fingerprint,
    /// How many tokens the tokenizer returned (`stats_tokens`).
    pub(crate) stats_tokens: u32,
}

/// Tokenizes and folds `input` in one context; also says whether the MySQL dialect
/// should be tried next.
#[inline]
fn pass(input: &[u8], delim: u8, mysql: bool, tokens: &mut TokenVec) -> (Pass, bool) {
    let mut tz = Tokenizer::new(input, delim, mysql);
    let len = fold(&mut tz, tokens);
    // PHP's backtick comment: an empty, unclosed `` ` `` last token is a comment.
    if len > 2 {
        let last = &mut tokens[len - 1];
        if last.kind == kind::BAREWORD
            && last.str_open == b'`'
            && last.len() == 0
            && last.str_close == 0
        {
            last.kind = kind::COMMENT;
        }
    }
    let mut fingerprint = Fingerprint::of(tokens, len);
    if fingerprint.as_bytes().contains(&kind::EVIL) {
        fingerprint = Fingerprint::default();
        fingerprint.bytes[0] = kind::EVIL;
        fingerprint.len = 1;
        tokens[0].assign_char(kind::EVIL, kind::EVIL);
        tokens[1].kind = kind::NONE;
    }
    let reparse = tz.stats_comment_ddx > 0 || tz.stats_comment_hash > 0;
    (
        Pass {
            fingerprint,
            stats_tokens: tz.stats_tokens,
        },
        reparse,
    )
}
