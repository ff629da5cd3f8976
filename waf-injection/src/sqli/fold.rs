//! Folding: libinjection's `libinjection_sqli_fold`, which reads tokens and collapses
//! sequences that mean "one value" (`1+1`, `a.b`, `'a' 'b'`, `UNION` `ALL`, unary
//! operators, …) until at most five tokens remain, the fingerprint's letters.
//!
//! Tokens are read lazily: folding stops as soon as five tokens are settled, so a long
//! input is only tokenized as far as its first few SQL-looking tokens.

use super::keywords::{lookup_buf, may_start_phrase};
use super::token::{kind, Token, VALUE_SIZE};
use super::tokenizer::Tokenizer;

/// Tokens in a fingerprint (`LIBINJECTION_SQLI_MAX_TOKENS`).
pub(crate) const MAX_TOKENS: usize = 5;

/// The token slots folding works in (C has `MAX_TOKENS + 3`).
///
/// Why no index below can panic: a token is read into slot `pos` only while
/// `pos <= MAX_TOKENS`, so `pos <= 6`; rules read slots `left`, `left + 1` and `left + 2`
/// only once `pos - left` is at least 2 or 3; `left <= pos` throughout. Every index is
/// at most 6.
pub(crate) type TokenVec = [Token; 8];

/// Folds the tokens of `tz` into `tokens` and returns how many make the fingerprint.
// One branch per C rule, in C's order, so each can be checked against libinjection even
// where two rules do the same thing.
#[allow(clippy::if_same_then_else)]
pub(crate) fn fold(tz: &mut Tokenizer<'_>, tokens: &mut TokenVec) -> usize {
    let mut last_comment = Token::EMPTY;
    // Where the next token goes.
    let mut pos: usize = 0;
    // How many tokens are settled.
    let mut left: usize = 0;
    let mut more;

    // Skip leading comments, `(`, SQL types and unary operators.
    loop {
        more = tz.next_token(&mut tokens[0]);
        let t = &tokens[0];
        if !(t.kind == kind::COMMENT
            || t.kind == kind::LEFTPARENS
            || t.kind == kind::SQLTYPE
            || t.is_unary_op())
        {
            break;
        }
        if !more {
            break;
        }
    }
    if !more {
        return 0;
    }
    pos += 1;

    loop {
        // With five tokens, a few shapes restart folding from the start.
        if pos >= MAX_TOKENS && five_token_restart(tokens) {
            if pos > MAX_TOKENS {
                tokens[1] = tokens[MAX_TOKENS];
                pos = 2;
            } else {
                pos = 1;
            }
            left = 0;
        }

        if !more || left >= MAX_TOKENS {
            left = pos;
            break;
        }

        // Get up to two tokens.
        while more && pos <= MAX_TOKENS && pos - left < 2 {
            more = tz.next_token(&mut tokens[pos]);
            if more {
                if tokens[pos].kind == kind::COMMENT {
                    last_comment = tokens[pos];
                } else {
                    last_comment.kind = kind::NONE;
                    pos += 1;
                }
            }
        }
        if pos - left < 2 {
            left = pos;
            continue;
        }

        let a = tokens[left].kind;
        let b = tokens[left + 1].kind;
        if a == kind::STRING && b == kind::STRING {
            // "ss" -> "s": 'foo' 'bar' is valid SQL.
            pos -= 1;
            continue;
        } else if a == kind::SEMICOLON && b == kind::SEMICOLON {
            pos -= 1;
            continue;
        } else if (a == kind::OPERATOR || a == kind::LOGIC_OPERATOR)
            && (tokens[left + 1].is_unary_op() || b == kind::SQLTYPE)
        {
            pos -= 1;
            left = 0;
            continue;
        } else if a == kind::LEFTPARENS && tokens[left + 1].is_unary_op() {
            pos -= 1;
            left = left.saturating_sub(1);
            continue;
        } else if merge_words(tokens, left) {
            pos -= 1;
            left = left.saturating_sub(1);
            continue;
        } else if a == kind::SEMICOLON
            && b == kind::FUNCTION
            && matches!(tokens[left + 1].byte(0), b'I' | b'i')
            && matches!(tokens[left + 1].byte(1), b'F' | b'f')
        {
            // `; IF` starts a Transact-SQL statement.
            tokens[left + 1].kind = kind::TSQL;
            continue;
        } else if (a == kind::BAREWORD || a == kind::VARIABLE)
            && b == kind::LEFTPARENS
            && is_function_like_word(&tokens[left])
        {
            tokens[left].kind = kind::FUNCTION;
            continue;
        } else if a == kind::KEYWORD && (tokens[left].is(b"IN") || tokens[left].is(b"NOT IN")) {
            tokens[left].kind = if b == kind::LEFTPARENS {
                kind::OPERATOR
            } else {
                kind::BAREWORD
            };
            continue;
        } else if a == kind::OPERATOR && (tokens[left].is(b"LIKE") || tokens[left].is(b"NOT LIKE"))
        {
            if b == kind::LEFTPARENS {
                // SELECT LIKE(...: a function.
                tokens[left].kind = kind::FUNCTION;
            }
        } else if a == kind::SQLTYPE
            && matches!(
                b,
                kind::BAREWORD
                    | kind::NUMBER
                    | kind::SQLTYPE
                    | kind::LEFTPARENS
                    | kind::FUNCTION
                    | kind::VARIABLE
                    | kind::STRING
            )
        {
            tokens[left] = tokens[left + 1];
            pos -= 1;
            left = 0;
            continue;
        } else if a == kind::COLLATE && b == kind::BAREWORD {
            // Too many collations: one with `_` is a type.
            if tokens[left + 1].c_str_contains(b'_') {
                tokens[left + 1].kind = kind::SQLTYPE;
                left = 0;
            }
        } else if a == kind::BACKSLASH {
            if tokens[left + 1].is_arithmetic_op() {
                // T-SQL reads `\%1` as `0 % 1`.
                tokens[left].kind = kind::NUMBER;
            } else {
                // … and `\1` as `1`.
                tokens[left] = tokens[left + 1];
                pos -= 1;
            }
            left = 0;
            continue;
        } else if (a == kind::LEFTPARENS && b == kind::LEFTPARENS)
            || (a == kind::RIGHTPARENS && b == kind::RIGHTPARENS)
        {
            pos -= 1;
            left = 0;
            continue;
        } else if a == kind::LEFTBRACE && b == kind::BAREWORD {
            // MySQL's `{ ``.``.id }`: too rare to parse, blacklisted.
            if tokens[left + 1].len() == 0 {
                tokens[left + 1].kind = kind::EVIL;
                return left + 2;
            }
            // ODBC `{foo expr}` is `expr`: drop `{ foo`.
            left = 0;
            pos -= 2;
            continue;
        } else if b == kind::RIGHTBRACE {
            pos -= 1;
            left = 0;
            continue;
        }

        // No two-token fold: get a third token.
        while more && pos <= MAX_TOKENS && pos - left < 3 {
            more = tz.next_token(&mut tokens[pos]);
            if more {
                if tokens[pos].kind == kind::COMMENT {
                    last_comment = tokens[pos];
                } else {
                    last_comment.kind = kind::NONE;
                    pos += 1;
                }
            }
        }
        if pos - left < 3 {
            left = pos;
            continue;
        }

        let a = tokens[left].kind;
        let b = &tokens[left + 1];
        let c = tokens[left + 2].kind;
        if a == kind::NUMBER && b.kind == kind::OPERATOR && c == kind::NUMBER {
            pos -= 2;
            left = 0;
            continue;
        } else if a == kind::OPERATOR && b.kind != kind::LEFTPARENS && c == kind::OPERATOR {
            left = 0;
            pos -= 2;
            continue;
        } else if a == kind::LOGIC_OPERATOR && c == kind::LOGIC_OPERATOR {
            pos -= 2;
            left = 0;
            continue;
        } else if a == kind::VARIABLE
            && b.kind == kind::OPERATOR
            && matches!(c, kind::VARIABLE | kind::NUMBER | kind::BAREWORD)
        {
            pos -= 2;
            left = 0;
            continue;
        } else if matches!(a, kind::BAREWORD | kind::NUMBER)
            && b.kind == kind::OPERATOR
            && matches!(c, kind::NUMBER | kind::BAREWORD)
        {
            pos -= 2;
            left = 0;
            continue;
        } else if matches!(
            a,
            kind::BAREWORD | kind::NUMBER | kind::VARIABLE | kind::STRING
        ) && b.kind == kind::OPERATOR
            && b.value() == b"::"
            && c == kind::SQLTYPE
        {
            pos -= 2;
            left = 0;
            continue;
        } else if matches!(
            a,
            kind::BAREWORD | kind::NUMBER | kind::STRING | kind::VARIABLE
        ) && b.kind == kind::COMMA
            && matches!(
                c,
                kind::NUMBER | kind::BAREWORD | kind::STRING | kind::VARIABLE
            )
        {
            pos -= 2;
            left = 0;
            continue;
        } else if matches!(a, kind::EXPRESSION | kind::GROUP | kind::COMMA)
            && b.is_unary_op()
            && c == kind::LEFTPARENS
        {
            // SELECT + (, LIMIT + (: drop the unary operator.
            tokens[left + 1] = tokens[left + 2];
            pos -= 1;
            left = 0;
            continue;
        } else if matches!(a, kind::KEYWORD | kind::EXPRESSION | kind::GROUP)
            && b.is_unary_op()
            && matches!(
                c,
                kind::NUMBER | kind::BAREWORD | kind::VARIABLE | kind::STRING | kind::FUNCTION
            )
        {
            // select - 1
            tokens[left + 1] = tokens[left + 2];
            pos -= 1;
            left = 0;
            continue;
        } else if a == kind::COMMA
            && b.is_unary_op()
            && matches!(
                c,
                kind::NUMBER | kind::BAREWORD | kind::VARIABLE | kind::STRING
            )
        {
            // ", -1" -> ",1", and back up: "1,-1" -> "1".
            tokens[left + 1] = tokens[left + 2];
            left = 0;
            pos -= 3;
            continue;
        } else if a == kind::COMMA && b.is_unary_op() && c == kind::FUNCTION {
            // 1,-sin(1) -> 1,sin(1)
            tokens[left + 1] = tokens[left + 2];
            pos -= 1;
            left = 0;
            continue;
        } else if a == kind::BAREWORD && b.kind == kind::DOT && c == kind::BAREWORD {
            // database.table
            pos -= 2;
            left = 0;
            continue;
        } else if a == kind::EXPRESSION && b.kind == kind::DOT && c == kind::BAREWORD {
            // select . `foo` -> select `foo`
            tokens[left + 1] = tokens[left + 2];
            pos -= 1;
            left = 0;
            continue;
        } else if a == kind::FUNCTION && b.kind == kind::LEFTPARENS && c != kind::RIGHTPARENS {
            // USER() takes no arguments: USER(foo) is not the function.
            if tokens[left].is(b"USER") {
                tokens[left].kind = kind::BAREWORD;
            }
        }

        // Nothing folded: the leftmost token is settled.
        left += 1;
    }

    // With room left, a trailing comment goes back in.
    if left < MAX_TOKENS && last_comment.kind == kind::COMMENT {
        tokens[left] = last_comment;
        left += 1;
    }
    // A sixth token may have been read to decide on the fifth.
    left.min(MAX_TOKENS)
}

/// The five-token shapes after which C folding starts over from the first token.
#[inline]
fn five_token_restart(t: &TokenVec) -> bool {
    let k = |i: usize| t[i].kind;
    (k(0) == kind::NUMBER
        && (k(1) == kind::OPERATOR || k(1) == kind::COMMA)
        && k(2) == kind::LEFTPARENS
        && k(3) == kind::NUMBER
        && k(4) == kind::RIGHTPARENS)
        || (k(0) == kind::BAREWORD
            && k(1) == kind::OPERATOR
            && k(2) == kind::LEFTPARENS
            && (k(3) == kind::BAREWORD || k(3) == kind::NUMBER)
            && k(4) == kind::RIGHTPARENS)
        || (k(0) == kind::NUMBER
            && k(1) == kind::RIGHTPARENS
            && k(2) == kind::COMMA
            && k(3) == kind::LEFTPARENS
            && k(4) == kind::NUMBER)
        || (k(0) == kind::BAREWORD
            && k(1) == kind::RIGHTPARENS
            && k(2) == kind::OPERATOR
            && k(3) == kind::LEFTPARENS
            && k(4) == kind::BAREWORD)
}

/// Words that are functions when `(` follows (T-SQL and MySQL functions common enough as
/// column names to be barewords otherwise).
#[inline]
fn is_function_like_word(t: &Token) -> bool {
    const WORDS: [&[u8]; 11] = [
        b"USER_ID",
        b"USER_NAME",
        b"DATABASE",
        b"PASSWORD",
        b"USER",
        b"CURRENT_USER",
        b"CURRENT_DATE",
        b"CURRENT_TIME",
        b"CURRENT_TIMESTAMP",
        b"LOCALTIME",
        b"LOCALTIMESTAMP",
    ];
    let len = t.len();
    (4..=17).contains(&len) && WORDS.iter().any(|w| t.is(w))
}

/// Merges `tokens[left]` and `tokens[left + 1]` into one token when `"a b"` is in the
/// word table (`UNION ALL`, `NOT IN`, `ORDER BY`, …): `syntax_merge_words`.
#[inline]
fn merge_words(tokens: &mut TokenVec, left: usize) -> bool {
    let a = &tokens[left];
    let b = &tokens[left + 1];
    if !matches!(
        a.kind,
        kind::KEYWORD
            | kind::BAREWORD
            | kind::OPERATOR
            | kind::UNION
            | kind::FUNCTION
            | kind::EXPRESSION
            | kind::TSQL
            | kind::SQLTYPE
    ) {
        return false;
    }
    if !matches!(
        b.kind,
        kind::KEYWORD
            | kind::BAREWORD
            | kind::OPERATOR
            | kind::UNION
            | kind::FUNCTION
            | kind::EXPRESSION
            | kind::TSQL
            | kind::SQLTYPE
            | kind::LOGIC_OPERATOR
    ) {
        return false;
    }
    if !may_start_phrase(a.value()) {
        return false;
    }
    let (n1, n2) = (a.len(), b.len());
    let n3 = n1 + n2 + 1;
    if n3 >= VALUE_SIZE {
        return false;
    }
    let mut buf = [0u8; VALUE_SIZE];
    buf[..n1].copy_from_slice(a.value());
    buf[n1] = b' ';
    buf[n1 + 1..n3].copy_from_slice(b.value());
    match lookup_buf(&buf, n3) {
        Some(k) => {
            tokens[left].assign(k, &buf[..n3]);
            true
        }
        None => false,
    }
}
