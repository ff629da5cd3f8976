//! Tokens of the expression language, each with its byte offset.

use super::ExprError;

/// One token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tok {
    /// A bare word: a field name, keyword, number, address or CIDR.
    Word(String),
    /// A quoted string, unescaped (may hold any bytes through `\xHH`).
    Str(Vec<u8>),
    /// `$name`.
    ListRef(String),
    /// Punctuation: `( ) { } [ ] == != < <= > >= && || ! ,`.
    Punct(&'static str),
}

/// A token and where it starts.
#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) at: usize,
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'/' | b'-')
}

const PUNCT: [&str; 16] = [
    "==", "!=", "<=", ">=", "&&", "||", "(", ")", "{", "}", "[", "]", "<", ">", "!", ",",
];

/// Splits `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<Token>, ExprError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' {
            // A comment runs to the end of the line.
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let at = i;
        if c == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#')) {
            let (s, end) = raw_string(b, i)?;
            out.push(Token {
                tok: Tok::Str(s),
                at,
            });
            i = end;
            continue;
        }
        if c == b'"' {
            let (s, end) = string(b, i)?;
            out.push(Token {
                tok: Tok::Str(s),
                at,
            });
            i = end;
            continue;
        }
        if c == b'$' {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'-')) {
                j += 1;
            }
            if j == start {
                return Err(ExprError::new(at, "`$` must be followed by a list name"));
            }
            out.push(Token {
                tok: Tok::ListRef(text[start..j].to_string()),
                at,
            });
            i = j;
            continue;
        }
        if is_word(c) {
            let mut j = i;
            while j < b.len() && is_word(b[j]) {
                j += 1;
            }
            out.push(Token {
                tok: Tok::Word(text[i..j].to_string()),
                at,
            });
            i = j;
            continue;
        }
        match PUNCT.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            Some(p) => {
                out.push(Token {
                    tok: Tok::Punct(p),
                    at,
                });
                i += p.len();
            }
            None => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(ExprError::new(at, format!("unexpected character {ch:?}")));
            }
        }
    }
    Ok(out)
}

/// A raw string `r"..."` or `r#"..."#` (any number of `#`) starting at `start`: no
/// escapes, so regexes keep their backslashes.
fn raw_string(b: &[u8], start: usize) -> Result<(Vec<u8>, usize), ExprError> {
    let mut i = start + 1;
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    i += hashes;
    if b.get(i) != Some(&b'"') {
        return Err(ExprError::new(
            start,
            "a raw string is written r\"...\" or r#\"...\"#",
        ));
    }
    let body = i + 1;
    let mut j = body;
    while j < b.len() {
        if b[j] == b'"'
            && b[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return Ok((b[body..j].to_vec(), j + 1 + hashes));
        }
        j += 1;
    }
    Err(ExprError::new(start, "string is not closed"))
}

/// A `"..."` string starting at `start`: its bytes and the offset after the closing quote.
/// Escapes: `\"`, `\\`, `\n`, `\r`, `\t`, `\xHH`.
fn string(b: &[u8], start: usize) -> Result<(Vec<u8>, usize), ExprError> {
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((out, i + 1)),
            b'\\' => {
                let Some(&e) = b.get(i + 1) else { break };
                match e {
                    b'"' | b'\\' => out.push(e),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'x' => {
                        let hex = b
                            .get(i + 2..i + 4)
                            .and_then(|h| std::str::from_utf8(h).ok());
                        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                            Some(v) => {
                                out.push(v);
                                i += 2;
                            }
                            None => return Err(ExprError::new(i, "`\\x` needs two hex digits")),
                        }
                    }
                    _ => {
                        return Err(ExprError::new(
                            i,
                            format!("unknown escape `\\{}`", char::from(e)),
                        ))
                    }
                }
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err(ExprError::new(start, "string is not closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn words_strings_lists_and_punctuation() {
        assert_eq!(
            toks(r#"ip.src in $office && http.request.headers["x-a"]=="b\x41\"" # c"#),
            vec![
                Tok::Word("ip.src".into()),
                Tok::Word("in".into()),
                Tok::ListRef("office".into()),
                Tok::Punct("&&"),
                Tok::Word("http.request.headers".into()),
                Tok::Punct("["),
                Tok::Str(b"x-a".to_vec()),
                Tok::Punct("]"),
                Tok::Punct("=="),
                Tok::Str(b"bA\"".to_vec()),
            ]
        );
        assert_eq!(
            toks("{10.0.0.0/8 2001:db8::/32}"),
            vec![
                Tok::Punct("{"),
                Tok::Word("10.0.0.0/8".into()),
                Tok::Word("2001:db8::/32".into()),
                Tok::Punct("}"),
            ]
        );
    }

    #[test]
    fn raw_strings_keep_backslashes() {
        assert_eq!(toks(r#"r"\.php$""#), vec![Tok::Str(br"\.php$".to_vec())]);
        assert_eq!(toks(r###"r#"a"b"#"###), vec![Tok::Str(br#"a"b"#.to_vec())]);
        assert_eq!(toks(r#"rate"#), vec![Tok::Word("rate".into())]);
        assert!(lex(r#"r#"open"#).is_err());
    }

    #[test]
    fn errors_carry_offsets() {
        assert_eq!(lex("a == \"x").unwrap_err().at, 5);
        assert_eq!(lex("a ~ b").unwrap_err().at, 2);
        assert_eq!(lex("a == \"\\q\"").unwrap_err().at, 6);
    }
}
