//! `t:urlDecode`: decodes `%XX` escapes and turns `+` into a space.
//!
//! ```text
//! SecRule REQUEST_BODY "@contains <script" "id:1,t:urlDecode,deny"
//! ```
//!
//! Non-strict, like ModSecurity's `urldecode_nonstrict_inplace`: a `%` not followed by two
//! hex digits (`%`, `%4`, `%zz`) is kept literally and decoding goes on after it.
//! `%uXXXX` is not decoded here (see `urlDecodeUni`).

use std::borrow::Cow;

use super::hex;

pub(super) fn apply(input: &[u8]) -> Cow<'_, [u8]> {
    let first = memchr::memchr2_iter(b'%', b'+', input)
        .find(|&i| input[i] == b'+' || hex::pair(input, i + 1).is_some());
    let Some(first) = first else {
        return Cow::Borrowed(input);
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        // Copy the run up to the next `%` or `+` in one go.
        let Some(run) = memchr::memchr2(b'%', b'+', &input[i..]) else {
            out.extend_from_slice(&input[i..]);
            break;
        };
        out.extend_from_slice(&input[i..i + run]);
        i += run;
        match input[i] {
            b'%' => match hex::pair(input, i + 1) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        assert_eq!(
            apply(b"Test+Case%20%41%4a%4B%00%ff").as_ref(),
            b"Test Case AJK\x00\xff"
        );
        assert_eq!(apply(b"%u0041").as_ref(), b"%u0041");
    }

    #[test]
    fn keeps_invalid_escapes() {
        assert_eq!(apply(b"%+").as_ref(), b"% ");
        assert_eq!(apply(b"%%20").as_ref(), b"% ");
        assert_eq!(apply(b"%0g%20").as_ref(), b"%0g ");
        assert_eq!(apply(b"%0%20").as_ref(), b"%0 ");
    }

    #[test]
    fn borrowed_when_unchanged() {
        for s in [
            &b""[..],
            b"TestCase",
            b"%",
            b"%0",
            b"%%",
            b"%0g",
            b"%gg",
            b"a%",
        ] {
            assert!(matches!(apply(s), Cow::Borrowed(_)), "{s:?}");
        }
    }
}
