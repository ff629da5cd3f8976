//! `Cookie:` header parsing for `REQUEST_COOKIES` / `REQUEST_COOKIES_NAMES`.
//!
//! Follows ModSecurity v3 `Transaction::addRequestHeader` (the `cookie` branch), which CRS
//! was tuned against:
//! - the value is split on `;` (a trailing empty piece after the last `;` is dropped);
//! - trailing whitespace after the final cookie pair is removed;
//! - empty pieces (`;;`) are skipped;
//! - each piece is split on its **first** `=` (`a=b=c` → `("a", "b=c")`); a piece without
//!   `=` is a cookie name with an empty value;
//! - leading whitespace of the name is trimmed (ModSecurity v2 compatible); nothing else is
//!   trimmed, so `a = b` gives the name `a ` and the value ` b`;
//! - a cookie whose name is empty after trimming (`=bar`) is skipped;
//! - no URL decoding: rules decode with `t:urlDecodeUni` themselves;
//! - a value wholly inside double quotes (`a="x y"`, RFC 6265 `cookie-value`) loses its
//!   quotes and its backslash escapes (`\"`, `\\`, and Python `http.cookies`' octal
//!   `\074`), as Python, Go and Java servlet containers read it. ModSecurity keeps the
//!   quotes; an escaped `\074script\076` would then reach the application as `<script>`
//!   unseen (issue 13).
//!
//! Several `Cookie:` headers are parsed one by one by the caller; pairs accumulate in order.

/// Parses one `Cookie:` header value and appends `(name, value)` pairs to `out`.
pub(crate) fn parse(header_value: &[u8], out: &mut Vec<(Vec<u8>, Vec<u8>)>) {
    let mut pieces: Vec<&[u8]> = header_value.split(|&b| b == b';').collect();
    // std::getline semantics: "a;" yields only "a".
    if pieces.len() > 1 && pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    if let Some(last) = pieces.last_mut() {
        let end = last
            .iter()
            .rposition(|b| !is_c_space(*b))
            .map_or(0, |i| i + 1);
        *last = &last[..end];
    }
    for piece in pieces {
        if piece.is_empty() {
            continue;
        }
        let (name, value) = match memchr::memchr(b'=', piece) {
            Some(i) => (&piece[..i], &piece[i + 1..]),
            None => (piece, &piece[piece.len()..]),
        };
        let start = name
            .iter()
            .position(|b| !is_c_space(*b))
            .unwrap_or(name.len());
        let name = &name[start..];
        if name.is_empty() {
            continue;
        }
        out.push((name.to_vec(), unquote(value)));
    }
}

/// A cookie value as frameworks read it: surrounding double quotes removed, backslash
/// escapes inside resolved (three octal digits are one byte).
fn unquote(value: &[u8]) -> Vec<u8> {
    let Some(inner) = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
    else {
        return value.to_vec();
    };
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        if inner[i] == b'\\' && i + 1 < inner.len() {
            let oct = inner
                .get(i + 1..i + 4)
                .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
            match oct {
                Some(d) => {
                    let v = u32::from(d[0] - b'0') * 64
                        + u32::from(d[1] - b'0') * 8
                        + u32::from(d[2] - b'0');
                    out.push(v as u8);
                    i += 4;
                }
                None => {
                    out.push(inner[i + 1]);
                    i += 2;
                }
            }
            continue;
        }
        out.push(inner[i]);
        i += 1;
    }
    out
}

/// C `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        parse(input, &mut out);
        out.into_iter()
            .map(|(a, b)| {
                (
                    String::from_utf8_lossy(&a).into_owned(),
                    String::from_utf8_lossy(&b).into_owned(),
                )
            })
            .collect()
    }

    fn s(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn basic() {
        assert_eq!(
            run(b"a=1; b=2;c=3"),
            s(&[("a", "1"), ("b", "2"), ("c", "3")])
        );
    }

    #[test]
    fn first_equals_and_no_equals() {
        assert_eq!(
            run(b"foo=bar=baz; flag; x="),
            s(&[("foo", "bar=baz"), ("flag", ""), ("x", "")])
        );
    }

    #[test]
    fn empty_and_nameless_skipped() {
        assert_eq!(run(b";;foo=bar;  =v; ;"), s(&[("foo", "bar")]));
        assert_eq!(run(b""), s(&[]));
        assert_eq!(run(b";"), s(&[]));
        assert_eq!(run(b"   "), s(&[]));
    }

    #[test]
    fn whitespace_rules() {
        // Only the name's leading whitespace and the header's trailing whitespace go.
        assert_eq!(run(b" a = b ;\tc=d  \t"), s(&[("a ", " b "), ("c", "d")]));
    }

    #[test]
    fn no_url_decoding_and_crs_version_cookie() {
        assert_eq!(
            run(b"$Version=1; c=%3Cscript%3E"),
            s(&[("$Version", "1"), ("c", "%3Cscript%3E")])
        );
    }

    #[test]
    fn quoted_values_are_unquoted() {
        assert_eq!(
            run(b"a=\"x y\"; b=\"\\074s\\076\\\"\""),
            s(&[("a", "x y"), ("b", "<s>\"")])
        );
        // Not wholly quoted: kept as sent.
        assert_eq!(run(b"a=\"x; b=y\""), s(&[("a", "\"x"), ("b", "y\"")]));
        assert_eq!(run(b"a=\""), s(&[("a", "\"")]));
    }

    #[test]
    fn invalid_utf8_and_many_pieces() {
        let mut out = Vec::new();
        parse(b"\xff=\xfe", &mut out);
        assert_eq!(out, vec![(vec![0xff], vec![0xfe])]);
        let big = b"a=1;".repeat(10_000);
        let mut out = Vec::new();
        parse(&big, &mut out);
        assert_eq!(out.len(), 10_000);
    }
}
