//! `application/x-www-form-urlencoded` parsing for `QUERY_STRING` (`ARGS_GET`) and form
//! bodies (`ARGS_POST`).
//!
//! Semantics follow ModSecurity v3 `Transaction::extractArguments` with the
//! `urldecode_nonstrict` decoder, and Coraza's `ParseQuery` where the two differ:
//! - parts are split on the configured separator (`SecArgumentSeparator`, `&` by default);
//!   empty parts (`a=1&&b=2`, a trailing `&`) are skipped, as Coraza does, so they do not
//!   inflate `&ARGS`;
//! - each part is split on its **first** `=`; a part without `=` is a name with an empty
//!   value, a leading `=` gives an empty name (`=v` → `("", "v")`), as in both engines;
//! - names and values are URL-decoded (`+` → space, `%XX` → byte). An invalid `%` sequence
//!   (`%` not followed by two hex digits) is kept byte for byte and reported as
//!   `invalid_encoding`, which the engine turns into `URLENCODED_ERROR`, like
//!   `urldecode_nonstrict`;
//! - at `max_args` pairs parsing stops and `args_limit_exceeded` is set (ModSecurity's
//!   `SecArgumentsLimit` skips the surplus; the engine raises `REQBODY_ERROR` for bodies).
//!
//! No UTF-8 validation happens here: names and values are bytes.

use std::borrow::Cow;

/// What [`parse`] noticed besides the pairs it produced.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UrlencodedOutcome {
    /// Some `%` was not followed by two hex digits (`URLENCODED_ERROR`).
    pub(crate) invalid_encoding: bool,
    /// Parsing stopped at `max_args`; later parts were ignored.
    pub(crate) args_limit_exceeded: bool,
}

/// Splits `input` on `separator` and `=`, URL-decodes each name and value and appends the
/// pairs to `out` in order. At most `max_args` pairs are appended by this call.
pub(crate) fn parse(
    input: &[u8],
    separator: u8,
    max_args: usize,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> UrlencodedOutcome {
    parse_each(input, separator, max_args, |name, value| {
        out.push((name.to_vec(), value.to_vec()))
    })
}

/// [`parse`], handing each decoded (name, value) to `emit` instead of collecting them:
/// a caller with buffers of its own copies into them, with no allocation for a pair
/// that needs no decoding.
pub(crate) fn parse_each(
    input: &[u8],
    separator: u8,
    max_args: usize,
    mut emit: impl FnMut(&[u8], &[u8]),
) -> UrlencodedOutcome {
    let mut outcome = UrlencodedOutcome::default();
    let mut added = 0usize;
    for part in input.split(|&b| b == separator) {
        if part.is_empty() {
            continue;
        }
        if added >= max_args {
            outcome.args_limit_exceeded = true;
            break;
        }
        let (name, value) = match memchr::memchr(b'=', part) {
            Some(i) => (&part[..i], &part[i + 1..]),
            None => (part, &part[part.len()..]),
        };
        let (name, bad_name) = decode_checked(name);
        let (value, bad_value) = decode_checked(value);
        outcome.invalid_encoding |= bad_name | bad_value;
        emit(&name, &value);
        added += 1;
    }
    outcome
}

/// URL-decodes `input` (`+` → space, `%XX` → byte, invalid `%` kept as-is).
/// Borrowed when there is nothing to decode.
#[cfg(test)]
pub(crate) fn decode(input: &[u8]) -> Cow<'_, [u8]> {
    decode_checked(input).0
}

/// [`decode`] that also reports whether an invalid `%` sequence was seen.
pub(crate) fn decode_checked(input: &[u8]) -> (Cow<'_, [u8]>, bool) {
    let first = match input.iter().position(|&b| b == b'%' || b == b'+') {
        Some(i) => i,
        None => return (Cow::Borrowed(input), false),
    };
    let mut invalid = false;
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        match input[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => match (
                input.get(i + 1).copied().and_then(hex_val),
                input.get(i + 2).copied().and_then(hex_val),
            ) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                }
                _ => {
                    invalid = true;
                    out.push(b'%');
                    i += 1;
                }
            },
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    (Cow::Owned(out), invalid)
}

/// Value of an ASCII hex digit.
pub(crate) fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn run(input: &[u8]) -> (Pairs, UrlencodedOutcome) {
        let mut out = Vec::new();
        let o = parse(input, b'&', 1000, &mut out);
        (out, o)
    }

    fn pairs(v: &[(&str, &str)]) -> Pairs {
        v.iter()
            .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn basic_pairs() {
        let (out, o) = run(b"a=b&c=d");
        assert_eq!(out, pairs(&[("a", "b"), ("c", "d")]));
        assert_eq!(o, UrlencodedOutcome::default());
    }

    #[test]
    fn decoding_plus_and_percent() {
        let (out, o) = run(b"na%6De=1+UNION%20SELECT&x%2By=%5Cu0061lert");
        assert_eq!(
            out,
            pairs(&[("name", "1 UNION SELECT"), ("x+y", "\\u0061lert")])
        );
        assert!(!o.invalid_encoding);
    }

    #[test]
    fn empty_parts_and_missing_equals() {
        let (out, _) = run(b"&a&&b=&=v&c=d=e&");
        assert_eq!(out, pairs(&[("a", ""), ("b", ""), ("", "v"), ("c", "d=e")]));
    }

    #[test]
    fn invalid_percent_kept() {
        let (out, o) = run(b"a=%zz%4&b=%");
        assert_eq!(out, pairs(&[("a", "%zz%4"), ("b", "%")]));
        assert!(o.invalid_encoding);
    }

    #[test]
    fn non_utf8_bytes() {
        let (out, o) = run(b"a=%ff%00\xfe");
        assert_eq!(out, vec![(b"a".to_vec(), vec![0xff, 0, 0xfe])]);
        assert!(!o.invalid_encoding);
    }

    #[test]
    fn max_args_stops() {
        let mut out = Vec::new();
        let o = parse(b"a=1&b=2&c=3", b'&', 2, &mut out);
        assert_eq!(out.len(), 2);
        assert!(o.args_limit_exceeded);
        let mut out = Vec::new();
        let o = parse(b"a=1&b=2", b'&', 2, &mut out);
        assert!(!o.args_limit_exceeded);
        let mut out = Vec::new();
        let o = parse(&b"a&".repeat(100_000), b'&', 1000, &mut out);
        assert_eq!(out.len(), 1000);
        assert!(o.args_limit_exceeded);
    }

    #[test]
    fn custom_separator() {
        let mut out = Vec::new();
        parse(b"a=1;b=2&c", b';', 10, &mut out);
        assert_eq!(out, pairs(&[("a", "1"), ("b", "2&c")]));
    }

    #[test]
    fn decode_borrows_when_clean() {
        assert!(matches!(decode(b"plain"), Cow::Borrowed(_)));
        assert_eq!(&*decode(b"a+b%41"), b"a bA");
        assert_eq!(&*decode(b"%"), b"%");
        assert_eq!(&*decode(b""), b"");
    }
}
