//! `@detectSqlFragment`: the value reads as the tail of a SQL query, cut where an injection
//! is cut.
//!
//! **What.** An injected value is a piece of a query that the application completes: it
//! starts in the middle of an expression (after the literal the application put before it)
//! and it ends where the application's own text resumes, or in a comment that swallows it.
//! A complete statement someone pastes into a SQL console or a forum post starts with a
//! statement keyword and ends cleanly; prose has words SQL does not explain. This operator
//! tokenizes the value as SQL (strings, numbers, keywords, SQL functions, variables,
//! operators, comments, punctuation; anything else is "other") and matches on one of three
//! shapes, each needing several independent signals at once:
//!
//! - **cut at the left**: the value (after at most one leading literal) starts with a
//!   continuation token: a boolean or clause keyword (`xor`, `union`, `having`, `when`,
//!   `except` ...), a comparison operator, `)`, `,` or `;`, and what follows is a SQL
//!   fragment (below). Also tried as if the value started inside a `'`, `"` or `` ` ``
//!   string whose opening quote the application wrote: the text before the first quote must
//!   then be a plain literal (letters, digits, `_.@$-`, at most 40 bytes), as an id or a user
//!   name is. Also tried after a dotted path that starts the value (`json.` in
//!   `json.in (0,1)`: the JSON body processor names a key after its path, and the key is
//!   what the application may paste into a query);
//! - **cut at the right**: a SQL fragment followed by a bare comment (`--`, `#`, `/*`, with
//!   at most two other bytes) that hides the rest of the query;
//! - **tautology**: a literal compared equal to the same literal (`1=1`, `'a'='a'`) after a
//!   boolean keyword, an operator, a comma, a parenthesis or a string.
//!
//! A *SQL fragment* has no "other" token, at most one bare word in the whole value (a column
//! or table name; prose has many; a word with `_`, `$` or a digit in it, `user_id`, `t2`,
//! is a name in code and not counted), at least one keyword or SQL function, at least two
//! syntax tokens (keywords, SQL functions, comparison or logic operators, bare comments,
//! punctuation) of which one is not `and`/`or`/`not`, and at least one literal, comparison
//! or logic operator, bare comment, `;` or SQL function call (so a word in
//! parentheses after `in` is prose). So `xor 'b' >`, `) when 234 then`, `except values(1,2)`,
//! `' notnull --` and `b,1=1` match, and "or best offer", `"wood" and "sign"`, "limit offset
//! pagination", `select * from t`, "fix typo in 'union' label" and "what is --force" do not.
//!
//! A word, `=` and one keyword (`active=true`, `tab=all`) is a setting written as text (a
//! cookie or a parameter that nests `key=value`), not a cut query.
//!
//! `#` opens a comment (MySQL) when the end, a space or SQL punctuation (`;-/*)`) follows
//! it; before a letter or a digit it is a hashtag or a number (`#45699`).
//!
//! Matching is ASCII case-insensitive, so the rule need not lower-case first. The value is
//! read once per context (as is, then inside each quote it contains, then after a leading
//! dotted path if a continuation follows it: at most six passes);
//! at most [`MAX_TOKENS`] tokens are kept, and a longer value is not a fragment (fragments
//! are short; long injections meet the other SQL rules and libinjection). Allocates nothing.
//!
//! **Cost.** Measured with callgrind over `waf-proxy replay` (release, 800 requests once
//! and twice, the difference divided by 800): rule 190180 of the default profile adds about
//! 48 k instructions per request of the real-traffic suite (991 k -> 1,038 k, +4.8 %; about
//! 24 values per request, 1,150 instructions per value) and 17.5 k on `dev.jsonl` (472 k ->
//! 489 k). Three things keep it there: a value without a letter is decided at once; keyword
//! lookups are one `match` on the lower-cased word; and when the value has no `=` (which
//! only the tautology needs) a pass stops at its second bare word, where most text ends.
//! Before those, the same rule cost 155 k per request.
//!
//! **Argument.** None (anything given is an error, so that a typo is not silently ignored).
//!
//! ```text
//! SecRule ARGS "@detectSqlFragment" "id:190180,phase:2,t:none,t:urlDecodeUni,block"
//! ```

/// Tokens kept per pass; a value with more is not a fragment.
pub(crate) const MAX_TOKENS: usize = 64;

/// Longest literal allowed before the quote of a quote context.
const MAX_PREFIX: usize = 40;

/// A compiled `@detectSqlFragment`.
#[derive(Debug)]
pub(crate) struct DetectSqlFragment;

impl DetectSqlFragment {
    /// Rejects any argument.
    pub(crate) fn new(argument: &str) -> Result<DetectSqlFragment, String> {
        if argument.trim().is_empty() {
            Ok(DetectSqlFragment)
        } else {
            Err(format!(
                "@detectSqlFragment takes no argument, got {argument:?}"
            ))
        }
    }

    /// Whether `input` reads as a cut SQL fragment in some quote context.
    pub(crate) fn evaluate(&self, input: &[u8]) -> bool {
        is_fragment(input)
    }
}

/// The kind of a SQL token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A closed string; the span is its content.
    Str,
    /// A string left open at the end of the value.
    OpenStr,
    /// A number (decimal, exponent, hex).
    Num,
    /// A keyword that is SQL and rarely prose (`union`, `xor`, `having`).
    Strong,
    /// A keyword that is also an English word (`and`, `from`, `like`).
    Weak,
    /// A SQL function name followed by `(`.
    Func,
    /// `@x` or `@@x`.
    Var,
    /// Any other word.
    Bare,
    /// A word with `_`, `$` or a digit in it (`user_id`, `tablevar2`): a name in code, not
    /// a word of prose, so not counted with the bare words.
    Ident,
    /// An operator.
    Op,
    /// A comment, up to its end.
    Comment,
    /// `(`.
    LParen,
    /// `)`.
    RParen,
    /// `,`.
    Comma,
    /// `;`.
    Semi,
    /// `.`.
    Dot,
    /// A byte SQL has no use for here (`{`, `?`, `\`, non-ASCII).
    Other,
}

/// One token: its kind and its span in the input.
#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

/// Keywords that are SQL and seldom prose. This list and the two below are what [`lookup`]
/// encodes (kept for the test that checks the two agree).
#[cfg(test)]
const STRONG: &[&[u8]] = &[
    b"union",
    b"select",
    b"insert",
    b"update",
    b"delete",
    b"drop",
    b"alter",
    b"truncate",
    b"exec",
    b"execute",
    b"declare",
    b"having",
    b"rlike",
    b"regexp",
    b"xor",
    b"notnull",
    b"waitfor",
    b"procedure",
    b"analyse",
    b"information_schema",
    b"sysobjects",
    b"syscolumns",
    b"nvarchar",
    b"varchar",
    b"char_length",
    b"benchmark",
    b"sleep",
    b"pg_sleep",
    b"unhex",
    b"concat",
    b"concat_ws",
    b"group_concat",
    b"substring",
    b"substr",
    b"ascii",
    b"load_file",
    b"outfile",
    b"dumpfile",
    b"into",
    b"except",
    b"intersect",
    b"limit",
    b"offset",
];

/// Keywords that are also English words.
#[cfg(test)]
const WEAK: &[&[u8]] = &[
    b"and",
    b"or",
    b"not",
    b"like",
    b"in",
    b"is",
    b"null",
    b"from",
    b"where",
    b"as",
    b"by",
    b"order",
    b"group",
    b"case",
    b"when",
    b"then",
    b"else",
    b"end",
    b"if",
    b"values",
    b"table",
    b"set",
    b"between",
    b"all",
    b"distinct",
    b"exists",
    b"top",
    b"div",
    b"mod",
    b"true",
    b"false",
];

/// SQL functions: a word from here (or from `STRONG`) followed by `(` is a call.
#[cfg(test)]
const FUNCS: &[&[u8]] = &[
    b"sleep",
    b"benchmark",
    b"pg_sleep",
    b"concat",
    b"concat_ws",
    b"group_concat",
    b"substring",
    b"substr",
    b"ascii",
    b"char",
    b"chr",
    b"unhex",
    b"hex",
    b"md5",
    b"sha1",
    b"version",
    b"database",
    b"user",
    b"current_user",
    b"schema",
    b"length",
    b"count",
    b"lo_import",
    b"lo_get",
    b"extractvalue",
    b"updatexml",
    b"load_file",
    b"if",
    b"ifnull",
    b"isnull",
    b"coalesce",
    b"cast",
    b"convert",
    b"floor",
    b"rand",
    b"mid",
    b"ord",
    b"strcmp",
    b"div",
];

/// PostgreSQL type names: a word right after `::` from here is a cast, a keyword
/// (`password::int`; `std::string` stays a word).
const CAST_TYPES: &[&[u8]] = &[
    b"int",
    b"integer",
    b"bigint",
    b"smallint",
    b"text",
    b"varchar",
    b"numeric",
    b"regclass",
    b"oid",
    b"bool",
    b"boolean",
    b"json",
    b"jsonb",
    b"bytea",
    b"inet",
];

/// The word is in `STRONG`.
const STRONG_WORD: u8 = 1;
/// The word is in `WEAK`.
const WEAK_WORD: u8 = 2;
/// The word is in `FUNCS`.
const FUNC_WORD: u8 = 4;
/// The longest word in the three lists.
const LONGEST_WORD: usize = 18;

/// Which of `STRONG`, `WEAK` and `FUNCS` hold `word` (ASCII case ignored), as bits:
/// one `match` on the lower-cased word instead of a scan of each list (the tokenizer asks
/// this for every word of every value). `lookup_agrees_with_the_lists` checks it against
/// the lists.
fn lookup(word: &[u8]) -> u8 {
    if word.len() > LONGEST_WORD {
        return 0;
    }
    let mut buf = [0u8; LONGEST_WORD];
    let lower = &mut buf[..word.len()];
    lower.copy_from_slice(word);
    lower.make_ascii_lowercase();
    match &*lower {
        b"all" => WEAK_WORD,
        b"alter" => STRONG_WORD,
        b"analyse" => STRONG_WORD,
        b"and" => WEAK_WORD,
        b"as" => WEAK_WORD,
        b"ascii" => STRONG_WORD | FUNC_WORD,
        b"benchmark" => STRONG_WORD | FUNC_WORD,
        b"between" => WEAK_WORD,
        b"by" => WEAK_WORD,
        b"case" => WEAK_WORD,
        b"cast" => FUNC_WORD,
        b"char" => FUNC_WORD,
        b"char_length" => STRONG_WORD,
        b"chr" => FUNC_WORD,
        b"coalesce" => FUNC_WORD,
        b"concat" => STRONG_WORD | FUNC_WORD,
        b"concat_ws" => STRONG_WORD | FUNC_WORD,
        b"convert" => FUNC_WORD,
        b"count" => FUNC_WORD,
        b"current_user" => FUNC_WORD,
        b"database" => FUNC_WORD,
        b"declare" => STRONG_WORD,
        b"delete" => STRONG_WORD,
        b"distinct" => WEAK_WORD,
        b"div" => WEAK_WORD | FUNC_WORD,
        b"drop" => STRONG_WORD,
        b"dumpfile" => STRONG_WORD,
        b"else" => WEAK_WORD,
        b"end" => WEAK_WORD,
        b"except" => STRONG_WORD,
        b"exec" => STRONG_WORD,
        b"execute" => STRONG_WORD,
        b"exists" => WEAK_WORD,
        b"extractvalue" => FUNC_WORD,
        b"false" => WEAK_WORD,
        b"floor" => FUNC_WORD,
        b"from" => WEAK_WORD,
        b"group" => WEAK_WORD,
        b"group_concat" => STRONG_WORD | FUNC_WORD,
        b"having" => STRONG_WORD,
        b"hex" => FUNC_WORD,
        b"if" => WEAK_WORD | FUNC_WORD,
        b"ifnull" => FUNC_WORD,
        b"in" => WEAK_WORD,
        b"information_schema" => STRONG_WORD,
        b"insert" => STRONG_WORD,
        b"intersect" => STRONG_WORD,
        b"into" => STRONG_WORD,
        b"is" => WEAK_WORD,
        b"isnull" => FUNC_WORD,
        b"length" => FUNC_WORD,
        b"like" => WEAK_WORD,
        b"limit" => STRONG_WORD,
        b"lo_get" => FUNC_WORD,
        b"lo_import" => FUNC_WORD,
        b"load_file" => STRONG_WORD | FUNC_WORD,
        b"md5" => FUNC_WORD,
        b"mid" => FUNC_WORD,
        b"mod" => WEAK_WORD,
        b"not" => WEAK_WORD,
        b"notnull" => STRONG_WORD,
        b"null" => WEAK_WORD,
        b"nvarchar" => STRONG_WORD,
        b"offset" => STRONG_WORD,
        b"or" => WEAK_WORD,
        b"ord" => FUNC_WORD,
        b"order" => WEAK_WORD,
        b"outfile" => STRONG_WORD,
        b"pg_sleep" => STRONG_WORD | FUNC_WORD,
        b"procedure" => STRONG_WORD,
        b"rand" => FUNC_WORD,
        b"regexp" => STRONG_WORD,
        b"rlike" => STRONG_WORD,
        b"schema" => FUNC_WORD,
        b"select" => STRONG_WORD,
        b"set" => WEAK_WORD,
        b"sha1" => FUNC_WORD,
        b"sleep" => STRONG_WORD | FUNC_WORD,
        b"strcmp" => FUNC_WORD,
        b"substr" => STRONG_WORD | FUNC_WORD,
        b"substring" => STRONG_WORD | FUNC_WORD,
        b"syscolumns" => STRONG_WORD,
        b"sysobjects" => STRONG_WORD,
        b"table" => WEAK_WORD,
        b"then" => WEAK_WORD,
        b"top" => WEAK_WORD,
        b"true" => WEAK_WORD,
        b"truncate" => STRONG_WORD,
        b"unhex" => STRONG_WORD | FUNC_WORD,
        b"union" => STRONG_WORD,
        b"update" => STRONG_WORD,
        b"updatexml" => FUNC_WORD,
        b"user" => FUNC_WORD,
        b"values" => WEAK_WORD,
        b"varchar" => STRONG_WORD,
        b"version" => FUNC_WORD,
        b"waitfor" => STRONG_WORD,
        b"when" => WEAK_WORD,
        b"where" => WEAK_WORD,
        b"xor" => STRONG_WORD,
        _ => 0,
    }
}

/// Keywords that continue an expression or a query: a value that starts with one was cut
/// out of a query at the left.
const CONTINUATIONS: &[&[u8]] = &[
    b"and",
    b"or",
    b"xor",
    b"union",
    b"having",
    b"group",
    b"order",
    b"limit",
    b"procedure",
    b"into",
    b"where",
    b"rlike",
    b"regexp",
    b"like",
    b"between",
    b"is",
    b"notnull",
    b"isnull",
    b"div",
    b"except",
    b"intersect",
    b"when",
    b"then",
    b"else",
    b"end",
    b"from",
    b"as",
    b"in",
    b"collate",
    b"offset",
    b"not",
];

/// Comparison and logic operators that continue an expression.
const CONTINUATION_OPS: &[&[u8]] = &[
    b"=", b"<>", b"!=", b"<=>", b"||", b"&&", b"<", b">", b"<=", b">=", b"::", b"->", b"->>",
];

/// Two- and three-byte operators, longest first.
const LONG_OPS: &[&[u8]] = &[
    b"<=>", b"->>", b"<>", b"!=", b"<=", b">=", b"||", b"&&", b"::", b"->", b":=", b"==",
];

/// Whether `input` is a cut SQL fragment as is or inside one of its quotes.
fn is_fragment(input: &[u8]) -> bool {
    // Every shape needs a keyword: a value without a letter is decided without tokens.
    if !input.iter().any(u8::is_ascii_alphabetic) {
        return false;
    }
    let mut tokens = [Token {
        kind: Kind::Other,
        start: 0,
        end: 0,
    }; MAX_TOKENS];
    // Every shape but the tautology needs at most one bare word, and the tautology needs
    // `=`: without one, a pass stops at the second bare word (most text ends there).
    let max_bare = if memchr::memchr(b'=', input).is_some() {
        usize::MAX
    } else {
        1
    };
    let contexts = [
        None,
        Some(b'\''),
        Some(b'"'),
        Some(b'`'),
        Some(TYPOGRAPHIC),
        Some(PATH),
    ];
    for context in contexts {
        let len = match context {
            None => tokenize(input, 0, &mut tokens[..], max_bare),
            Some(quote) => {
                let found = if quote == TYPOGRAPHIC {
                    memchr::memchr2_iter(0xc2, 0xe2, input)
                        .find_map(|k| typographic_quote(input, k).map(|w| (k, w)))
                } else if quote == PATH {
                    path_end(input).map(|k| (k, 1))
                } else {
                    memchr::memchr(quote, input).map(|k| (k, 1))
                };
                let Some((at, width)) = found else {
                    continue;
                };
                let prefix = &input[..at];
                if prefix.len() > MAX_PREFIX || !prefix.iter().all(|&b| is_literal_byte(b)) {
                    continue;
                }
                tokens[0] = Token {
                    kind: Kind::Str,
                    start: 0,
                    end: at,
                };
                tokenize(input, at + width, &mut tokens[1..], max_bare).map(|n| n + 1)
            }
        };
        let Some(len) = len else {
            continue;
        };
        if shape_matches(input, &tokens[..len], context.is_some()) {
            return true;
        }
    }
    false
}

/// Stands for the typographic quotes in the list of quote contexts.
const TYPOGRAPHIC: u8 = 0;

/// Stands for the end of a leading dotted path in the list of quote contexts.
const PATH: u8 = 1;

/// The last `.` of a dotted path that starts the value (`json.` in `json.in (0,1)`, the
/// name a JSON key gets): what follows it is read as a value of its own, as the key was
/// before the body processor put its path in front of it. Only when what follows starts
/// with a continuation (a word in [`CONTINUATIONS`] or a byte that may start one), since
/// only the cut-at-the-left shape can differ from the reading of the whole value.
fn path_end(input: &[u8]) -> Option<usize> {
    let run = input
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'$')))
        .unwrap_or(input.len());
    let dot = memchr::memrchr(b'.', &input[..run])?;
    let rest = trim_start(&input[dot + 1..], b" \t\r\n");
    let word = &rest[..scan(rest, 0, |b| b.is_ascii_alphabetic())];
    let starts = if word.is_empty() {
        rest.first()
            .is_some_and(|b| matches!(b, b';' | b')' | b',') || is_op_byte(*b))
    } else {
        in_list(CONTINUATIONS, word)
    };
    starts.then_some(dot)
}

/// The width of a typographic quote at `i` (´ U+00B4, ‘ U+2018, ’ U+2019 in UTF-8), which
/// some back-ends and ORMs fold to an apostrophe; any of them closes a string any opened.
fn typographic_quote(input: &[u8], i: usize) -> Option<usize> {
    let rest = input.get(i..)?;
    if rest.starts_with(b"\xc2\xb4") {
        Some(2)
    } else if rest.starts_with(b"\xe2\x80\x98") || rest.starts_with(b"\xe2\x80\x99") {
        Some(3)
    } else {
        None
    }
}

/// A byte of a plain literal before a quote context: an id, a number, a user name.
fn is_literal_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'$' | b'-') || b >= 0x80
}

/// The three shapes, on the tokens of one context (`quoted`: `tokens[0]` is the text before
/// the quote).
fn shape_matches(input: &[u8], t: &[Token], quoted: bool) -> bool {
    let skip = usize::from(quoted);
    // Cut at the left: (literal) continuation fragment.
    let leading_literal =
        t.len() > 1 && matches!(t[0].kind, Kind::Num | Kind::Str | Kind::Bare | Kind::Ident);
    let first = usize::from(quoted || leading_literal);
    if let Some(tok) = t.get(first) {
        // `name=true`, `tab=all`: a word, `=` and one keyword is a setting written as
        // text (a cookie or a parameter that nests `key=value`), not a cut query.
        let setting = !quoted
            && matches!(t[0].kind, Kind::Bare | Kind::Ident)
            && tok.kind == Kind::Op
            && text(input, tok) == b"="
            && t.len() == 3;
        if !setting
            && is_continuation(input, tok)
            && follows_grammar(input, tok, t.get(first + 1))
            && fragment(input, &t[first..], &t[skip..])
        {
            return true;
        }
    }
    // Cut at the right: fragment, then a bare comment.
    if let Some((last, body)) = t.split_last() {
        if t.len() >= 3
            && last.kind == Kind::Comment
            && trim(text(input, last), b"-#/*+ ;").len() <= 2
            && fragment(input, body, body.get(skip..).unwrap_or(&[]))
        {
            return true;
        }
    }
    // A comment closed that the value never opened (`x*/ union select`, `select*/ 1,2`):
    // the value breaks out of a comment the query had open, and all of it is SQL.
    let close = t
        .iter()
        .position(|tok| tok.kind == Kind::Comment && text(input, tok) == b"*/");
    if let Some(close) = close {
        let opened = t[..close]
            .iter()
            .any(|tok| tok.kind == Kind::Comment && text(input, tok).starts_with(b"/*"));
        if !opened && fragment(input, &t[skip..], &t[skip..]) {
            return true;
        }
    }
    // Tautology: x = x after a boolean keyword, an operator, a comma, a parenthesis or a
    // string.
    for j in 2..t.len().saturating_sub(1) {
        let (before, left, op, right) = (t[j - 2], t[j - 1], t[j], t[j + 1]);
        if op.kind == Kind::Op
            && text(input, &op) == b"="
            && matches!(left.kind, Kind::Num | Kind::Str)
            && left.kind == right.kind
            && text(input, &left).eq_ignore_ascii_case(text(input, &right))
            && matches!(
                before.kind,
                Kind::Str | Kind::Comma | Kind::LParen | Kind::Op | Kind::Strong | Kind::Weak
            )
        {
            return true;
        }
    }
    false
}

/// Whether the token after a leading `is` or `in` is what SQL puts there: `is` takes
/// `null`, `not`, `true` or `false` ("is 1+1=2 or 3" is a question), `in` takes `(`.
fn follows_grammar(input: &[u8], tok: &Token, next: Option<&Token>) -> bool {
    let word = text(input, tok);
    if word.eq_ignore_ascii_case(b"is") {
        next.is_some_and(|n| {
            in_list(
                &[b"null", b"not", b"true", b"false", b"notnull"],
                text(input, n),
            )
        })
    } else if word.eq_ignore_ascii_case(b"in") {
        next.is_some_and(|n| n.kind == Kind::LParen)
    } else {
        true
    }
}

/// Whether a token continues an expression or a query.
fn is_continuation(input: &[u8], tok: &Token) -> bool {
    match tok.kind {
        Kind::Strong | Kind::Weak => in_list(CONTINUATIONS, text(input, tok)),
        Kind::RParen | Kind::Semi | Kind::Comma => true,
        Kind::Op => in_list(CONTINUATION_OPS, text(input, tok)),
        _ => false,
    }
}

/// Whether `toks` is a SQL fragment; `whole` is every token of the value (bare words are
/// counted there).
fn fragment(input: &[u8], toks: &[Token], whole: &[Token]) -> bool {
    if toks.len() < 2 || toks.iter().any(|t| t.kind == Kind::Other) {
        return false;
    }
    if whole.iter().filter(|t| t.kind == Kind::Bare).count() > 1 {
        return false;
    }
    let mut keywords = 0;
    let mut syntax = 0;
    let mut strong = 0;
    let mut marks = 0;
    for tok in toks {
        if matches!(tok.kind, Kind::Strong | Kind::Weak | Kind::Func) {
            keywords += 1;
        }
        if matches!(tok.kind, Kind::Num | Kind::Str | Kind::OpenStr) {
            marks += 1;
        }
        if !is_syntax(input, tok) {
            continue;
        }
        syntax += 1;
        let boolean = tok.kind == Kind::Weak && in_list(&[b"and", b"or", b"not"], text(input, tok));
        if !boolean {
            strong += 1;
        }
        if matches!(tok.kind, Kind::Op | Kind::Comment | Kind::Semi | Kind::Func) {
            marks += 1;
        }
    }
    keywords >= 1 && syntax >= 2 && strong >= 1 && marks >= 1
}

/// Keywords, SQL functions, comparison/logic operators, bare comments and punctuation.
fn is_syntax(input: &[u8], tok: &Token) -> bool {
    match tok.kind {
        Kind::Op => {
            let op = text(input, tok);
            in_list(CONTINUATION_OPS, op) || in_list(&[b"|", b"&", b"^", b":="], op)
        }
        Kind::Comment => {
            let body = text(input, tok);
            let body = trim_start(body, b"-#/* ");
            trim_end(body, b"*/ ").len() <= 4
        }
        Kind::Strong
        | Kind::Weak
        | Kind::Func
        | Kind::LParen
        | Kind::RParen
        | Kind::Comma
        | Kind::Semi => true,
        _ => false,
    }
}

/// Tokenizes `input[from..]` into `out`; `None` when there are more tokens than `out`
/// holds or more than `max_bare` bare words.
fn tokenize(input: &[u8], from: usize, out: &mut [Token], max_bare: usize) -> Option<usize> {
    let n = input.len();
    let mut i = from;
    let mut len = 0;
    let mut bare = 0;
    let mut push = |kind: Kind, start: usize, end: usize, len: &mut usize| -> Option<()> {
        let slot = out.get_mut(*len)?;
        *slot = Token { kind, start, end };
        *len += 1;
        Some(())
    };
    while i < n {
        let c = input[i];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            i += 1;
            continue;
        }
        if let Some(open) = typographic_quote(input, i) {
            let mut j = i + open;
            let close = loop {
                if j >= n {
                    break None;
                }
                if let Some(k) = typographic_quote(input, j) {
                    break Some(k);
                }
                j += 1;
            };
            match close {
                Some(k) => {
                    push(Kind::Str, i + open, j, &mut len)?;
                    i = j + k;
                    continue;
                }
                None => {
                    push(Kind::OpenStr, i + open, n, &mut len)?;
                    break;
                }
            }
        }
        if matches!(c, b'\'' | b'"' | b'`') {
            let mut j = i + 1;
            while j < n && input[j] != c {
                if input[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            if j >= n {
                push(Kind::OpenStr, i + 1, n, &mut len)?;
                break;
            }
            push(Kind::Str, i + 1, j, &mut len)?;
            i = j + 1;
            continue;
        }
        let next = input.get(i + 1).copied();
        let dash_comment = c == b'-'
            && next == Some(b'-')
            && input
                .get(i + 2)
                .is_none_or(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'+' | b'-'));
        // `#` opens a comment in MySQL whatever follows; a word or a digit after it is a
        // hashtag or a number (`#45699`), so only space and SQL punctuation count.
        let hash_comment = c == b'#'
            && next.is_none_or(|b| {
                matches!(
                    b,
                    b' ' | b'\t' | b'\r' | b'\n' | b';' | b'-' | b'/' | b'*' | b')'
                )
            });
        if dash_comment || hash_comment {
            push(Kind::Comment, i, n, &mut len)?;
            break;
        }
        if c == b'/' && next == Some(b'*') {
            let end = memchr::memmem::find(&input[i + 2..], b"*/").map_or(n, |k| i + 2 + k + 2);
            push(Kind::Comment, i, end, &mut len)?;
            i = end;
            continue;
        }
        if c == b'*' && next == Some(b'/') {
            push(Kind::Comment, i, i + 2, &mut len)?;
            i += 2;
            continue;
        }
        let after_word = i > 0 && is_word_byte(input[i - 1]);
        if !after_word {
            if let Some(end) = number_end(input, i) {
                push(Kind::Num, i, end, &mut len)?;
                i = end;
                continue;
            }
        }
        if c == b'@' {
            let name = i + if next == Some(b'@') { 2 } else { 1 };
            if input
                .get(name)
                .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
            {
                let end = scan(input, name + 1, |b| b.is_ascii_alphanumeric() || b == b'_');
                push(Kind::Var, i, end, &mut len)?;
                i = end;
                continue;
            }
        }
        if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let end = scan(input, i + 1, |b| {
                b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
            });
            let word = &input[i..end];
            let paren = input[end..]
                .iter()
                .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
                == Some(&b'(');
            let cast = input[from..i]
                .iter()
                .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
                .is_some_and(|k| input[from..from + k + 1].ends_with(b"::"));
            let flags = lookup(word);
            let kind = if paren && flags & (FUNC_WORD | STRONG_WORD) != 0 {
                Kind::Func
            } else if cast && in_list(CAST_TYPES, word) {
                Kind::Weak
            } else if flags & STRONG_WORD != 0 {
                Kind::Strong
            } else if flags & WEAK_WORD != 0 {
                Kind::Weak
            } else if word
                .iter()
                .any(|&b| b == b'_' || b == b'$' || b.is_ascii_digit())
            {
                Kind::Ident
            } else {
                bare += 1;
                if bare > max_bare {
                    return None;
                }
                Kind::Bare
            };
            push(kind, i, end, &mut len)?;
            i = end;
            continue;
        }
        // A run of three or more operator bytes is not a SQL operator (`>>>`, `-->`),
        // except `<=>` and `->>`.
        let run = scan(input, i, is_op_byte) - i;
        if run >= 3 && !(run == 3 && matches!(&input[i..i + 3], b"<=>" | b"->>")) {
            push(Kind::Op, i, i + run, &mut len)?;
            i += run;
            continue;
        }
        if let Some(op) = LONG_OPS.iter().find(|op| input[i..].starts_with(op)) {
            push(Kind::Op, i, i + op.len(), &mut len)?;
            i += op.len();
            continue;
        }
        let kind = match c {
            b'=' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'|' | b'&' | b'~'
            | b'!' => Kind::Op,
            b'(' => Kind::LParen,
            b')' => Kind::RParen,
            b',' => Kind::Comma,
            b';' => Kind::Semi,
            b'.' => Kind::Dot,
            _ => Kind::Other,
        };
        push(kind, i, i + 1, &mut len)?;
        i += 1;
    }
    Some(len)
}

/// Where a number starting at `i` ends: `0x` and hex digits, digits with an optional
/// fraction and exponent, or `.` and digits.
fn number_end(input: &[u8], i: usize) -> Option<usize> {
    let digit = |k: usize| input.get(k).is_some_and(u8::is_ascii_digit);
    let c = input[i];
    if c == b'0'
        && input.get(i + 1).is_some_and(|b| *b == b'x' || *b == b'X')
        && input.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        return Some(scan(input, i + 2, |b| b.is_ascii_hexdigit()));
    }
    if c.is_ascii_digit() {
        let mut end = scan(input, i, |b| b.is_ascii_digit());
        if input.get(end) == Some(&b'.') {
            end = scan(input, end + 1, |b| b.is_ascii_digit());
        }
        if input.get(end).is_some_and(|b| *b == b'e' || *b == b'E') {
            let sign = usize::from(input.get(end + 1).is_some_and(|b| *b == b'+' || *b == b'-'));
            if digit(end + 1 + sign) {
                end = scan(input, end + 1 + sign, |b| b.is_ascii_digit());
            }
        }
        return Some(end);
    }
    if c == b'.' && digit(i + 1) {
        return Some(scan(input, i + 1, |b| b.is_ascii_digit()));
    }
    None
}

/// A byte that continues a word (a number glued to one is not a number).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// A byte that operators are made of.
fn is_op_byte(b: u8) -> bool {
    matches!(
        b,
        b'=' | b'<'
            | b'>'
            | b'!'
            | b'|'
            | b'&'
            | b':'
            | b'~'
            | b'^'
            | b'%'
            | b'*'
            | b'/'
            | b'+'
            | b'-'
    )
}

/// The first index at or after `from` whose byte is not `keep`.
fn scan(input: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
    input
        .get(from..)
        .and_then(|rest| rest.iter().position(|&b| !keep(b)))
        .map_or(input.len(), |k| from + k)
}

/// The bytes of a token.
fn text<'a>(input: &'a [u8], tok: &Token) -> &'a [u8] {
    input.get(tok.start..tok.end).unwrap_or_default()
}

/// Whether `word` is in `list`, ignoring ASCII case.
fn in_list(list: &[&[u8]], word: &[u8]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
}

/// `bytes` without leading and trailing bytes from `set`.
fn trim<'a>(bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    trim_end(trim_start(bytes, set), set)
}

/// `bytes` without leading bytes from `set`.
fn trim_start<'a>(bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    let k = bytes
        .iter()
        .position(|b| !set.contains(b))
        .unwrap_or(bytes.len());
    &bytes[k..]
}

/// `bytes` without trailing bytes from `set`.
fn trim_end<'a>(bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    let k = bytes
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(0, |k| k + 1);
    &bytes[..k]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(value: &str) -> bool {
        DetectSqlFragment::new("")
            .unwrap()
            .evaluate(value.as_bytes())
    }

    /// Asserts that every value reads as a cut fragment.
    fn all_match(values: &[&str]) {
        for v in values {
            assert!(hit(v), "{v:?} should match");
        }
    }

    /// Asserts that no value reads as a cut fragment.
    fn all_pass(values: &[&str]) {
        for v in values {
            assert!(!hit(v), "{v:?} should pass");
        }
    }

    #[test]
    fn lookup_agrees_with_the_lists() {
        for (list, bit) in [(STRONG, STRONG_WORD), (WEAK, WEAK_WORD), (FUNCS, FUNC_WORD)] {
            for word in list {
                assert_ne!(lookup(word) & bit, 0, "{:?}", String::from_utf8_lossy(word));
                assert_ne!(lookup(&word.to_ascii_uppercase()) & bit, 0);
            }
        }
        for word in [&b"selects"[..], b"", b"orr", b"information_schemas", b"x"] {
            let expected = [STRONG, WEAK, FUNCS].iter().any(|list| in_list(list, word));
            assert_eq!(lookup(word) != 0, expected);
        }
        assert_eq!(lookup(b"sleep"), STRONG_WORD | FUNC_WORD);
        assert_eq!(lookup(b"Div"), WEAK_WORD | FUNC_WORD);
    }

    #[test]
    fn argument_is_refused() {
        assert!(DetectSqlFragment::new("x").is_err());
        assert!(DetectSqlFragment::new(" ").is_ok());
    }

    #[test]
    fn cut_at_the_left() {
        all_match(&[
            "xor 'b' >",
            "XOR 7 <",
            ") when 234 then",
            "except values(1,2)",
            "; select",
            "in (0,1)",
            "procedure analyse (",
            "1.union select.2alias",
            "' notnull --",
            "is not null --",
            "abc' HAVING 1>0 #",
            "42) intersect (select 1",
            "Admin' ORDER BY 3 -- ",
            "7' rlike (select 1) -- x",
            "1\u{b4} or \u{b4}1\u{b4}=\u{b4}1",
            "x\u{2019} union select 1 -- ",
            "password::int",
            "nick::text = 'a'",
            "from log_2024 where id_x=\"a\";",
            "abc' or 'x'='y'#;--",
        ]);
    }

    #[test]
    fn json_key_after_its_path() {
        all_match(&[
            "json.in (3,4)",
            "json.sort.; delete",
            "json.data.0.) union select 2",
            "json. xor 1 <",
        ]);
        all_pass(&[
            "json.a.b",
            "json.order",
            "json.orders.in_stock",
            "www.example.com",
            "v1.2.3",
            "e.g. or so",
            "no. 5 in (the) list",
        ]);
    }

    #[test]
    fn cut_at_the_right() {
        all_match(&[
            "drop sampletable;--",
            "TRUNCATE logs;#",
            "delete from t where 2>1 /*",
        ]);
    }

    #[test]
    fn comment_closed_but_never_opened() {
        all_match(&["select*/ 1,2,3,user(", "x*/ union select 1", "5 */ or 1 /*"]);
        all_pass(&[
            "/* note */ select 1",
            "end of the block */",
            "a comment like this */ ends here",
        ]);
    }

    #[test]
    fn tautologies() {
        all_match(&[
            "b,1=1",
            "x' or 'k'='k",
            "9 and (5=5",
            "select q where 31=31;",
        ]);
    }

    #[test]
    fn text_and_whole_statements_pass() {
        all_pass(&[
            "",
            "or best offer",
            "and 7 oranges",
            "\"wood\" and \"sign\" and \"polka dots\"",
            "limit offset pagination",
            "having vs where",
            "is null sql",
            "not like operator",
            "select * from meme",
            "SELECT 1 / 1 FROM test",
            "fix typo in 'union' label",
            "what is --force",
            "order #45699",
            "div.cart > select#qty",
            "into/long",
            "1=1 meaning",
            "2+2=4 and 3+3=6",
            "just in case (abc)",
            "forgive and forget.\n\t\t-- cervantes",
            ">>> is_line_junk('\\n')\ntrue",
            "l;in table runner",
            "/tags/-",
            "refs/heads/feature/select-union",
            "pin \"as is\"",
            "O'Brien & sons",
            "rock 'n' roll",
            "it's in the box, or so",
            "in (brackets)",
            "is 1+1=2 or 3",
            "is it 1 = 1?",
            "as (see above)",
            "it\u{2019}s in the box, or so",
            "\u{2018}union\u{2019} by robert f",
            "std::string",
            "foo::date",
            "user_id and order_id",
            "windows10 or macos11 is fine",
            "top_10 in stock (3)",
            "C#; F# and Rust",
            "## install\n\nrun it",
            "see #- below",
            "active=true",
            "remember_me=false",
            "tab=all",
            "sort=top",
        ]);
    }

    #[test]
    fn long_values_and_odd_bytes() {
        let long = "or 1 ".repeat(MAX_TOKENS);
        assert!(!hit(&long));
        for v in [
            &b"\xff'\xfe--"[..],
            b"'",
            b"\"",
            b"`",
            b"/*",
            b"*/",
            b"@@",
            b"0x",
            b"1e+",
        ] {
            let _ = DetectSqlFragment::new("").unwrap().evaluate(v);
        }
    }
}
