//! XSS detection: libinjection's HTML5 tokenizer and its blacklists.
//!
//! `libinjection_xss` tokenizes the input five times, once per [`Context`] an attacker's
//! string may land in (between tags, or inside an unquoted, `'`, `"` or `` ` `` attribute
//! value), and reports XSS when any run meets a doctype, a dangerous tag, a dangerous
//! attribute with a value, or a comment trick. We do the same, with the same verdicts as
//! C libinjection 3.9.2 except where newer libinjection changed them (below).
//!
//! # Differences from libinjection 3.9.2
//!
//! We follow libinjection 4.x (libinjection/libinjection PR #14, from client9 PR #143) for
//! event-handler attributes: an attribute name is an event handler when it is `on`
//! followed by a known event name (`onload`, `onerror`, `onclick`, ... also as a prefix:
//! `onloadx`), not any name of 5 bytes or more starting with `on`. So `<a onxyzw=1>`,
//! `x onabcd=1` and `<a online=x>` (a classic false positive: `online` is not `ononline`)
//! are XSS for 3.9.2 and not for us, nor for 4.x. The price, also 4.x's: events missing
//! from 4.x's list are no longer flagged, e.g. `<a onauxclick=alert(1)>`,
//! `onbeforetoggle`, `onformdata`, `onpagereveal`, `onpointerrawupdate`, `onbeforematch`.
//! `tests/xss_differential.rs` checks that this is the only difference on its corpus
//! (running our code with 3.9.2's rule gives the oracle's verdict on every input).
//!
//! Both versions share the tokenizer's quirks, which we keep: NUL is whitespace between
//! attributes but ignored inside tag names, a 0xFF byte where an attribute name or value
//! may start reads as end of input (C's signed `char` equals `CHAR_EOF`), entity-decoded
//! code points are compared by their low byte (`&#x14A;` is `J`).
//!
//! # Performance
//!
//! Every run stops at the first hit, tokens are ranges of the input, names are compared
//! case-insensitively in stack buffers, and nothing allocates. Most benign input is
//! decided by one vectorized pass before any tokenizing: see [`detect_xss`].
//!
//! Rough timing against the C library (`tests/xss_timing.rs`: on-CPU ns per call, best of
//! 5 interleaved passes, release build, on a loaded 2-core VM, two runs at 40e2774):
//!
//! | inputs                         | ours    | C 3.9.2   | C / ours |
//! |--------------------------------|---------|-----------|----------|
//! | whole corpus (287,186)         | 152-160 | 477-479   | 3.0-3.1x |
//! | `benches/detect.rs` sample     | 147-214 | 539-758   | 3.5-3.7x |
//! | with `<` (67,869)              | 228-235 | 381-391   | 1.6-1.7x |
//! | without `<` (219,317)          | 61-97   | 334-454   | 4.7-5.5x |
//! | XSS per the oracle (17,305)    | 140-191 | 159-231   | 1.1-1.2x |
//! | 64 bytes or more (20,344)      | 393-398 | 1570-1580 | 4.0x     |
//!
//! Where the time goes (callgrind, inputs with `<`): about 1,200 instructions and 20
//! branch mispredictions per call, a third of them the tokenizer's state dispatch; the
//! verdict tokenizer ([`html5::Tokenizer::for_verdict`]) skips the tokens no verdict reads,
//! which cut XSS inputs from 999 to 733 instructions per call.

mod blacklist;
#[doc(hidden)]
pub mod html5;

use blacklist::{AttrKind, EventRule};
use html5::{Context, TokenKind, Tokenizer};

/// True when `input` is an XSS vector in any of the HTML contexts libinjection tries.
///
/// Every XSS verdict needs a tag (`<`) or an attribute value (`=`): in the data context
/// anything but text starts with `<`, and in the attribute contexts a value only follows
/// `=`. Input with neither byte is therefore benign without tokenizing; input without `<`
/// is benign in the data context, and input without `'` in the `'`-quoted context (same
/// for `"` and `` ` ``). `tests/xss_differential.rs` checks these shortcuts against the
/// full runs.
///
/// ```
/// assert!(waf_injection::detect_xss(b"<script>alert(1)</script>"));
/// assert!(waf_injection::detect_xss(b"\" onmouseover=\"alert(1)"));
/// assert!(!waf_injection::detect_xss(b"1 < 2 and a = b"));
/// ```
pub fn detect_xss(input: &[u8]) -> bool {
    detect(input, EventRule::Listed)
}

/// [`detect_xss`] with libinjection 3.9.2's event-handler rule (every `on*` attribute name
/// of 5 bytes or more), for the differential test. Not part of the API.
#[doc(hidden)]
pub fn detect_xss_3_9_2(input: &[u8]) -> bool {
    detect(input, EventRule::AnyOn)
}

/// One context's verdict without the shortcuts of [`detect_xss`] (C's
/// `libinjection_is_xss`), for the differential test. Not part of the API.
#[doc(hidden)]
pub fn is_xss_in(input: &[u8], context: Context) -> bool {
    is_xss(input, context, EventRule::Listed)
}

#[inline]
fn detect(input: &[u8], events: EventRule) -> bool {
    let marks = marks(input);
    if marks & (LT | EQ) == 0 {
        return false;
    }
    (marks & LT != 0 && is_xss(input, Context::Data, events))
        || is_xss(input, Context::ValueNoQuote, events)
        || (marks & SQ != 0 && is_xss(input, Context::ValueSingleQuote, events))
        || (marks & DQ != 0 && is_xss(input, Context::ValueDoubleQuote, events))
        || (marks & BQ != 0 && is_xss(input, Context::ValueBackQuote, events))
}

/// Marks of the bytes that decide which contexts can report XSS. Without `<` the data
/// context is text only; without `<` and `=` no context meets a tag or an attribute value.
/// Without its quote byte, a quoted-value context is one value with no attribute name
/// before it, which is harmless.
const LT: u8 = 1;
const EQ: u8 = 2;
const SQ: u8 = 4;
const DQ: u8 = 8;
const BQ: u8 = 16;

/// The marks present in `input`: byte comparisons over 32-byte blocks into a 32-lane
/// accumulator, which the compiler turns into vector compares with one reduction at the end
/// (a table lookup per byte was about 2x slower on the corpus). The last partial block is
/// read again as the last 32 bytes (OR does not mind overlap); shorter inputs are read as
/// two overlapping 16- or 8-byte blocks. Nothing is copied: a zero-padded copy of the tail
/// cost a `memset` and a `memcpy` call per input.
#[inline]
fn marks(input: &[u8]) -> u8 {
    let n = input.len();
    if n >= BLOCK {
        let mut acc = [0u8; BLOCK];
        let mut blocks = input.chunks_exact(BLOCK);
        for block in &mut blocks {
            mark_block(block, &mut acc);
        }
        if !blocks.remainder().is_empty() {
            mark_block(&input[n - BLOCK..], &mut acc);
        }
        return acc.iter().fold(0, |m, &a| m | a);
    }
    if n >= 16 {
        return fixed_marks::<16>(&input[..16]) | fixed_marks::<16>(&input[n - 16..]);
    }
    if n >= 8 {
        return fixed_marks::<8>(&input[..8]) | fixed_marks::<8>(&input[n - 8..]);
    }
    input.iter().fold(0, |m, &b| m | mark(b))
}

/// Bytes per block of [`marks`].
const BLOCK: usize = 32;

/// The mark of one byte.
#[inline(always)]
fn mark(b: u8) -> u8 {
    (u8::from(b == b'<') * LT)
        | (u8::from(b == b'=') * EQ)
        | (u8::from(b == b'\'') * SQ)
        | (u8::from(b == b'"') * DQ)
        | (u8::from(b == b'`') * BQ)
}

/// ORs into `acc[i]` the mark of `block[i]`.
#[inline(always)]
fn mark_block(block: &[u8], acc: &mut [u8; BLOCK]) {
    for (a, &b) in acc.iter_mut().zip(block) {
        *a |= mark(b);
    }
}

/// The marks of a block of exactly `N` bytes (`block.len() == N`), unrolled by the compiler.
#[inline(always)]
fn fixed_marks<const N: usize>(block: &[u8]) -> u8 {
    <&[u8; N]>::try_from(block).map_or(0, |b| b.iter().fold(0, |m, &x| m | mark(x)))
}

/// C's `libinjection_is_xss`: tokenize `input` from `context`, stop at the first dangerous
/// token.
fn is_xss(input: &[u8], context: Context, events: EventRule) -> bool {
    let mut tokens = Tokenizer::for_verdict(input, context);
    // The kind of the last attribute name, for the value right after it.
    let mut attr = AttrKind::None;
    while let Some(token) = tokens.next_token() {
        let bytes = input.get(token.start..token.end).unwrap_or_default();
        // An if-chain, most frequent kinds first: a `match` here compiles to a jump table
        // whose indirect branch mispredicts on most tokens.
        let kind = token.kind;
        if kind == TokenKind::AttrName {
            attr = blacklist::attr_name_kind(bytes, events);
            continue;
        }
        let hit = if kind == TokenKind::AttrValue {
            match attr {
                AttrKind::None => false,
                AttrKind::Black | AttrKind::Style => true,
                AttrKind::Url => blacklist::is_black_url(bytes),
                AttrKind::Indirect => blacklist::attr_kind(bytes, events) != AttrKind::None,
            }
        } else if kind == TokenKind::TagNameOpen {
            blacklist::is_black_tag(bytes)
        } else if kind == TokenKind::TagComment {
            blacklist::is_black_comment(bytes)
        } else {
            kind == TokenKind::Doctype
        };
        if hit {
            return true;
        }
        attr = AttrKind::None;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        assert!(detect_xss(b"<script>alert(1)</script>"));
        assert!(detect_xss(b"<img src=x onerror=alert(1)>"));
        assert!(detect_xss(b"<a href=\"&#106;avascript:\">"));
        assert!(detect_xss(b"' onfocus='x"));
        assert!(detect_xss(b"<!DOCTYPE html>"));
        assert!(detect_xss(b"<!--[if IE]>"));
        assert!(!detect_xss(b"hello"));
        assert!(!detect_xss(b"<b>bold</b>"));
        assert!(!detect_xss(b"<a onxyzw=1>"));
        assert!(detect_xss_3_9_2(b"<a onxyzw=1>"));
    }

    /// No input panics: every string of up to 3 bytes over the bytes that drive the
    /// tokenizer and the blacklists.
    #[test]
    fn never_panics_on_short_strings() {
        const ALPHABET: &[u8] = b"<>'\"`=/!?%-[]&#x;:\0 \tonsSvVaj1";
        let mut buf = [0u8; 3];
        let mut count = 0;
        for len in 0..=3 {
            let total = ALPHABET.len().pow(len as u32);
            for mut i in 0..total {
                for slot in buf.iter_mut().take(len) {
                    *slot = ALPHABET[i % ALPHABET.len()];
                    i /= ALPHABET.len();
                }
                let input = &buf[..len];
                let _ = detect_xss(input);
                let _ = detect_xss_3_9_2(input);
                for context in Context::ALL {
                    let mut t = Tokenizer::new(input, context);
                    while t.next_token().is_some() {}
                }
                count += 1;
            }
        }
        let n = ALPHABET.len();
        assert_eq!(count, 1 + n + n * n + n * n * n);
    }
}
