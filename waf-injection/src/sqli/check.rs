//! Is a fingerprint SQLi: libinjection's blacklist, then the rules of
//! `libinjection_sqli_not_whitelist` that clear short fingerprints common in benign text.

use super::fold::TokenVec;
use super::keywords::is_blacklisted;
use super::token::kind;
use super::Pass;

/// `libinjection_sqli_check_fingerprint`: blacklisted and not whitelisted.
#[inline]
pub(crate) fn is_sqli(pass: &Pass, tokens: &TokenVec, input: &[u8]) -> bool {
    let fp = pass.fingerprint.as_bytes();
    is_blacklisted(fp) && !is_whitelisted(fp, pass.stats_tokens, tokens, input)
}

/// True when the rules call a blacklisted fingerprint benign (C's
/// `libinjection_sqli_not_whitelist` returning false).
fn is_whitelisted(fp: &[u8], stats_tokens: u32, tokens: &TokenVec, input: &[u8]) -> bool {
    let tlen = fp.len();
    // An ending comment with `sp_password` (hidden from MS SQL audit logs) is SQLi.
    if tlen > 1
        && fp[tlen - 1] == kind::COMMENT
        && memchr::memmem::find(input, b"sp_password").is_some()
    {
        return false;
    }
    match tlen {
        2 => {
            if fp[1] == kind::UNION {
                // "1 union" alone is common text; with folding or comments it is not.
                return stats_tokens == 2;
            }
            let (t0, t1) = (&tokens[0], &tokens[1]);
            // A `#` comment: too many false positives.
            if t1.byte(0) == b'#' {
                return true;
            }
            // `nc`: only `/*` comments count.
            if t0.kind == kind::BAREWORD && t1.kind == kind::COMMENT && t1.byte(0) != b'/' {
                return true;
            }
            if t0.kind == kind::NUMBER && t1.kind == kind::COMMENT {
                if t1.byte(0) == b'/' {
                    return false;
                }
                if stats_tokens > 2 {
                    return false;
                }
                // `1234 --`, `1234/*`, `1234--` are SQLi; base64-ish `1234-ABC--` is not.
                // C reads the input at the number's length, a signed char.
                let at = |i: usize| input.get(i).copied().unwrap_or(0);
                let ch = at(t0.len());
                if (ch as i8) <= 32 {
                    return false;
                }
                if ch == b'/' && at(t0.len() + 1) == b'*' {
                    return false;
                }
                if ch == b'-' && at(t0.len() + 1) == b'-' {
                    return false;
                }
                return true;
            }
            // `--` followed by text is common prose; only a bare trailing `--` counts.
            if t1.len() > 2 && t1.byte(0) == b'-' {
                return true;
            }
            false
        }
        3 => {
            if fp == b"sos" || fp == b"s&s" {
                // ...foo' + 'bar...: no opening nor closing quote, same quote between.
                let (t0, t2) = (&tokens[0], &tokens[2]);
                return !(t0.str_open == 0 && t2.str_close == 0 && t0.str_close == t2.str_open);
            }
            if matches!(fp, b"s&n" | b"n&1" | b"1&1" | b"1&v" | b"1&s") {
                // 'sexy and 17' is not SQLi, 'sexy and 17<18' is.
                return stats_tokens == 3;
            }
            let t1 = &tokens[1];
            if t1.kind == kind::KEYWORD {
                // Only INTO OUTFILE / INTO DUMPFILE count.
                return t1.len() < 5 || !t1.value()[..4].eq_ignore_ascii_case(b"INTO");
            }
            false
        }
        _ => false,
    }
}
