//! The tokenizer: libinjection's per-byte dispatch and its `parse_*` functions.
//!
//! Every byte of the input maps to a [`Class`] through a 256-entry table generated from
//! libinjection's character map; a `match` on the class is the C `char_parse_map` of
//! function pointers. Each parser reads from a position and returns the position after
//! what it consumed, filling the token when it recognised one (whitespace yields none:
//! the loop goes on).
//!
//! C string quirks kept on purpose, since they decide verdicts:
//! - `strlenspn` (span of accepted bytes) also accepts NUL and `strlencspn` (span of
//!   rejected bytes) also stops at NUL, because `strchr(set, 0)` finds the terminator;
//! - `char` is signed: a byte ≥ 0x80 is below 33 in the `q'…'` delimiter check.

use super::keywords::{lookup_buf, lookup_word};
use super::token::{kind, Token, VALUE_SIZE};

/// What a byte starts (libinjection's `CHAR_*` classes, merged where C calls the same
/// parser).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Class {
    /// Whitespace and control bytes: skipped.
    White,
    /// `% ^ + ~`: a one-byte operator.
    Op1,
    /// `! & * : < = > |`: a one- or two-byte operator.
    Op2,
    /// `( ) , ; { }`: a token whose type is the byte itself.
    Char,
    /// `'` and `"`.
    String,
    /// `#`: a comment in MySQL, an operator otherwise.
    Hash,
    /// `$`: money, `$$` or `$tag$` strings.
    Money,
    /// `-`: an operator or a `--` comment.
    Dash,
    /// Digits and `.`.
    Number,
    /// `/`: an operator or a `/* */` comment.
    Slash,
    /// `@`.
    Variable,
    /// Letters, `_` and bytes ≥ 0x80 (except 0xA0).
    Word,
    /// `b`, `B`: `b'0101'`.
    BString,
    /// `e`, `E`: `e'…'`.
    EString,
    /// `n`, `N`: `n'…'`, `nq'…'`.
    NqString,
    /// `q`, `Q`: `q'[…]'`.
    QString,
    /// `u`, `U`: `u&'…'`.
    UString,
    /// `x`, `X`: `x'4142'`.
    XString,
    /// `[`.
    BWord,
    /// `\`.
    Backslash,
    /// `` ` ``.
    Tick,
    /// `?` and `]`.
    Other,
}

/// The class of every byte.
static CHAR_CLASS: [Class; 256] = include!(concat!(env!("OUT_DIR"), "/sqli_char_class.rs"));

/// Bytes that end a word (`parse_word`'s `strlencspn` set, NUL included).
static WORD_END: [bool; 256] = byte_set(b" []{}<>:\\?=@!#~+-*/&|^%(),';\t\n\x0b\x0c\r\"\xa0\0");

/// `parse_word`'s view of a byte: part of the word, its end, or a `.`/`` ` `` inside it.
static WORD_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if WORD_END[i] {
            WORD_BYTE_END
        } else if i == b'.' as usize || i == b'`' as usize {
            WORD_BYTE_SPLIT
        } else {
            0
        };
        i += 1;
    }
    t
};
const WORD_BYTE_END: u8 = 1;
const WORD_BYTE_SPLIT: u8 = 2;

/// Bytes that end a variable name (`parse_var`'s `strlencspn` set, NUL included).
static VAR_END: [bool; 256] = byte_set(b" <>:\\?=@!#~+-*/&|^%(),';\t\n\x0b\x0c\r'`\"\0");

/// `char_is_white`: space, `\t \n \v \f \r`, 0xA0 and NUL.
static WHITE: [bool; 256] = byte_set(b" \t\n\x0b\x0c\r\xa0\0");

/// Binary digits for `strlenspn` (NUL included).
static BIN_DIGITS: [bool; 256] = byte_set(b"01\0");

/// Hex digits for `strlenspn` (NUL included).
static HEX_DIGITS: [bool; 256] = byte_set(b"0123456789ABCDEFabcdef\0");

/// `parse_money`'s amount bytes for `strlenspn` (NUL included).
static MONEY_DIGITS: [bool; 256] = byte_set(b"0123456789.,\0");

/// `parse_money`'s tag letters for `strlenspn` (NUL included).
static MONEY_TAG: [bool; 256] = byte_set(b"abcdefghjiklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\0");

const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        set[bytes[i] as usize] = true;
        i += 1;
    }
    set
}

/// How many bytes at the start of `s` are in `set`.
#[inline(always)]
fn span(s: &[u8], set: &[bool; 256]) -> usize {
    s.iter()
        .position(|&b| !set[usize::from(b)])
        .unwrap_or(s.len())
}

/// The position of the first `c0 c1` pair in `s` (`memchr2`).
#[inline]
fn find_pair(s: &[u8], c0: u8, c1: u8) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s.get(from..).and_then(|rest| memchr::memchr(c0, rest)) {
        let at = from + i;
        match s.get(at + 1) {
            Some(&b) if b == c1 => return Some(at),
            Some(_) => from = at + 1,
            None => return None,
        }
    }
    None
}

/// The tokenizer state of one pass over the input (one quote context and SQL dialect).
pub(crate) struct Tokenizer<'a> {
    s: &'a [u8],
    pos: usize,
    /// The quote the input is pretended to start inside (`'`, `"`), or 0.
    delim: u8,
    /// MySQL dialect (`#` comments, `[` words, `--x` is not a comment); ANSI otherwise.
    mysql: bool,
    /// Tokens returned so far (`stats_tokens`).
    pub(crate) stats_tokens: u32,
    /// `--x` comments seen in ANSI mode (`stats_comment_ddx`).
    pub(crate) stats_comment_ddx: u32,
    /// `#` seen (`stats_comment_hash`).
    pub(crate) stats_comment_hash: u32,
}

impl<'a> Tokenizer<'a> {
    /// A tokenizer at the start of `s`.
    #[inline]
    pub(crate) fn new(s: &'a [u8], delim: u8, mysql: bool) -> Tokenizer<'a> {
        Tokenizer {
            s,
            pos: 0,
            delim,
            mysql,
            stats_tokens: 0,
            stats_comment_ddx: 0,
            stats_comment_hash: 0,
        }
    }

    /// Reads the next token into `t`; false at the end of the input (`t` is then cleared).
    /// `libinjection_sqli_tokenize`.
    #[inline]
    pub(crate) fn next_token(&mut self, t: &mut Token) -> bool {
        let s = self.s;
        if s.is_empty() {
            return false;
        }
        t.clear();
        if self.pos == 0 && self.delim != 0 {
            self.pos = self.parse_string_core(t, 0, self.delim, 0);
            self.stats_tokens += 1;
            return true;
        }
        while let Some(&ch) = s.get(self.pos) {
            let pos = self.pos;
            self.pos = match CHAR_CLASS[usize::from(ch)] {
                Class::White => {
                    // Each white byte is its own no-token step in C; skip the run at once.
                    pos + 1 + span(&s[pos + 1..], &WHITE_CLASS)
                }
                Class::Op1 => self.parse_operator1(t, pos),
                Class::Op2 => self.parse_operator2(t, pos),
                Class::Char => {
                    t.assign_char(ch, ch);
                    pos + 1
                }
                Class::String => self.parse_string_core(t, pos, ch, 1),
                Class::Hash => self.parse_hash(t, pos),
                Class::Money => self.parse_money(t, pos),
                Class::Dash => self.parse_dash(t, pos),
                Class::Number => self.parse_number(t, pos),
                Class::Slash => self.parse_slash(t, pos),
                Class::Variable => self.parse_var(t, pos),
                Class::Word => self.parse_word(t, pos),
                Class::BString => self.parse_bstring(t, pos, &BIN_DIGITS),
                Class::XString => self.parse_bstring(t, pos, &HEX_DIGITS),
                Class::EString => self.parse_estring(t, pos),
                Class::NqString => self.parse_nqstring(t, pos),
                Class::QString => self.parse_qstring_core(t, pos, 0),
                Class::UString => self.parse_ustring(t, pos),
                Class::BWord => self.parse_bword(t, pos),
                Class::Backslash => self.parse_backslash(t, pos),
                Class::Tick => self.parse_tick(t, pos),
                Class::Other => {
                    t.assign_char(kind::UNKNOWN, ch);
                    pos + 1
                }
            };
            if t.kind != kind::NONE {
                self.stats_tokens += 1;
                return true;
            }
        }
        false
    }

    #[inline]
    fn parse_operator1(&self, t: &mut Token, pos: usize) -> usize {
        t.assign_char(kind::OPERATOR, self.s[pos]);
        pos + 1
    }

    fn parse_eol_comment(&self, t: &mut Token, pos: usize) -> usize {
        let rest = &self.s[pos..];
        match memchr::memchr(b'\n', rest) {
            None => {
                t.assign_input(kind::COMMENT, self.s, pos, self.s.len());
                self.s.len()
            }
            Some(nl) => {
                t.assign_input(kind::COMMENT, self.s, pos, pos + nl);
                pos + nl + 1
            }
        }
    }

    /// `#`: an end-of-line comment in MySQL, an operator in ANSI.
    fn parse_hash(&mut self, t: &mut Token, pos: usize) -> usize {
        self.stats_comment_hash += 1;
        if self.mysql {
            self.stats_comment_hash += 1;
            self.parse_eol_comment(t, pos)
        } else {
            t.assign_char(kind::OPERATOR, b'#');
            pos + 1
        }
    }

    /// `-`: `--` followed by white or the end is a comment; `--x` is one in ANSI only.
    fn parse_dash(&mut self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        let next = s.get(pos + 1).copied();
        if next == Some(b'-') {
            match s.get(pos + 2) {
                Some(&c) if WHITE[usize::from(c)] => return self.parse_eol_comment(t, pos),
                None => return self.parse_eol_comment(t, pos),
                Some(_) if !self.mysql => {
                    self.stats_comment_ddx += 1;
                    return self.parse_eol_comment(t, pos);
                }
                Some(_) => {}
            }
        }
        t.assign_char(kind::OPERATOR, b'-');
        pos + 1
    }

    /// `/`: an operator, or a `/* */` comment; nested `/*` and MySQL `/*!` are evil.
    fn parse_slash(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        if s.get(pos + 1) != Some(&b'*') {
            return self.parse_operator1(t, pos);
        }
        let body = &s[pos + 2..];
        let end = find_pair(body, b'*', b'/');
        let clen = match end {
            None => s.len() - pos,
            Some(e) => e + 4,
        };
        let nested = end.is_some_and(|e| find_pair(&body[..e + 1], b'/', b'*').is_some());
        let kind = if nested || body.first() == Some(&b'!') {
            kind::EVIL
        } else {
            kind::COMMENT
        };
        t.assign_input(kind, s, pos, pos + clen);
        pos + clen
    }

    /// `\`: MySQL's `\N` (NULL) is a number, else a backslash token.
    fn parse_backslash(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        if s.get(pos + 1) == Some(&b'N') {
            t.assign_input(kind::NUMBER, s, pos, pos + 2);
            pos + 2
        } else {
            t.assign_char(kind::BACKSLASH, b'\\');
            pos + 1
        }
    }

    /// `<=>`, a two-byte operator of the table, `:`, or a one-byte operator.
    fn parse_operator2(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        let Some(two) = s.get(pos..pos + 2) else {
            return self.parse_operator1(t, pos);
        };
        if two == b"<=" && s.get(pos + 2) == Some(&b'>') {
            t.assign_input(kind::OPERATOR, s, pos, pos + 3);
            return pos + 3;
        }
        if let Some(k) = lookup_word(two) {
            t.assign_input(k, s, pos, pos + 2);
            return pos + 2;
        }
        if two[0] == b':' {
            t.assign_char(kind::COLON, b':');
            pos + 1
        } else {
            self.parse_operator1(t, pos)
        }
    }

    /// A quoted string from `pos + offset` (offset 0: the input started inside the
    /// string), up to an unescaped `delim` (`\` escapes it, so does doubling it).
    /// `parse_string_core`.
    fn parse_string_core(&self, t: &mut Token, pos: usize, delim: u8, offset: usize) -> usize {
        let s = self.s;
        let start = pos + offset;
        t.str_open = if offset > 0 { delim } else { 0 };
        let mut from = start;
        loop {
            let found = s
                .get(from..)
                .and_then(|rest| memchr::memchr(delim, rest))
                .map(|i| from + i);
            let Some(q) = found else {
                t.assign_input(kind::STRING, s, start, s.len());
                t.str_close = 0;
                return s.len();
            };
            if backslash_escaped(s, q, start) {
                from = q + 1;
            } else if s.get(q + 1) == Some(&delim) {
                from = q + 2;
            } else {
                t.assign_input(kind::STRING, s, start, q);
                t.str_close = delim;
                return q + 1;
            }
        }
    }

    /// `e'…'` (and `n'…'`), else a word.
    fn parse_estring(&self, t: &mut Token, pos: usize) -> usize {
        if pos + 2 >= self.s.len() || self.s[pos + 1] != b'\'' {
            return self.parse_word(t, pos);
        }
        self.parse_string_core(t, pos, b'\'', 2)
    }

    /// `u&'…'`, else a word.
    fn parse_ustring(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        if pos + 2 < s.len() && s[pos + 1] == b'&' && s[pos + 2] == b'\'' {
            let end = self.parse_string_core(t, pos + 2, b'\'', 1);
            t.str_open = b'u';
            if t.str_close == b'\'' {
                t.str_close = b'u';
            }
            end
        } else {
            self.parse_word(t, pos)
        }
    }

    /// Oracle's `q'<…>'` (from `pos + offset`), else a word from `pos`.
    fn parse_qstring_core(&self, t: &mut Token, pos0: usize, offset: usize) -> usize {
        let s = self.s;
        let pos = pos0 + offset;
        if pos + 2 >= s.len() || !matches!(s[pos], b'q' | b'Q') || s[pos + 1] != b'\'' {
            return self.parse_word(t, pos0);
        }
        let open = s[pos + 2];
        // C compares a signed char: bytes >= 0x80 are negative.
        if (open as i8) < 33 {
            return self.parse_word(t, pos0);
        }
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            other => other,
        };
        let body = &s[pos + 3..];
        t.str_open = b'q';
        match find_pair(body, close, b'\'') {
            None => {
                t.assign_input(kind::STRING, s, pos + 3, s.len());
                t.str_close = 0;
                s.len()
            }
            Some(e) => {
                t.assign_input(kind::STRING, s, pos + 3, pos + 3 + e);
                t.str_close = b'q';
                pos + 3 + e + 2
            }
        }
    }

    /// `n'…'` (as `e'…'`) or `nq'…'`, else a word.
    fn parse_nqstring(&self, t: &mut Token, pos: usize) -> usize {
        if pos + 2 < self.s.len() && self.s[pos + 1] == b'\'' {
            return self.parse_estring(t, pos);
        }
        self.parse_qstring_core(t, pos, 1)
    }

    /// `b'0101'` and `x'4142'` (by `digits`): a number, else a word.
    fn parse_bstring(&self, t: &mut Token, pos: usize, digits: &[bool; 256]) -> usize {
        let s = self.s;
        if pos + 2 >= s.len() || s[pos + 1] != b'\'' {
            return self.parse_word(t, pos);
        }
        let wlen = span(&s[pos + 2..], digits);
        if s.get(pos + 2 + wlen) != Some(&b'\'') {
            return self.parse_word(t, pos);
        }
        t.assign_input(kind::NUMBER, s, pos, pos + wlen + 3);
        pos + wlen + 3
    }

    /// `[…]`: a SQL Server bracket word (a bareword up to `]`).
    fn parse_bword(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        match memchr::memchr(b']', &s[pos..]) {
            None => {
                t.assign_input(kind::BAREWORD, s, pos, s.len());
                s.len()
            }
            Some(e) => {
                t.assign_input(kind::BAREWORD, s, pos, pos + e + 1);
                pos + e + 1
            }
        }
    }

    /// A word: a keyword, function, … or bareword. A keyword before a `.` or `` ` `` ends
    /// the word there (`SELECT.1`, ``SELECT`a` ``).
    fn parse_word(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        let rest = &s[pos..];
        // One scan finds the end and whether a `.` or `` ` `` is inside; plain word bytes
        // cost one load and one compare (this loop was 10% of all instructions).
        let mut wlen = 0;
        let mut split = false;
        loop {
            while rest
                .get(wlen)
                .is_some_and(|&b| WORD_BYTE[usize::from(b)] == 0)
            {
                wlen += 1;
            }
            match rest.get(wlen) {
                Some(&b) if WORD_BYTE[usize::from(b)] == WORD_BYTE_SPLIT => {
                    split = true;
                    wlen += 1;
                }
                _ => break,
            }
        }
        t.assign_input(kind::BAREWORD, s, pos, pos + wlen);
        if split {
            // C scans the (truncated) copy.
            for i in 0..t.len() {
                let d = t.byte(i);
                if d == b'.' || d == b'`' {
                    if let Some(k) = lookup_buf(t.buf(), i) {
                        if k != kind::BAREWORD {
                            t.clear();
                            t.assign_input(k, s, pos, pos + i);
                            return pos + i;
                        }
                    }
                }
            }
        }
        if wlen < VALUE_SIZE {
            t.kind = lookup_buf(t.buf(), wlen).unwrap_or(kind::BAREWORD);
        }
        pos + wlen
    }

    /// `` `…` ``: a bareword, or a function when the quoted name is one.
    fn parse_tick(&self, t: &mut Token, pos: usize) -> usize {
        let end = self.parse_string_core(t, pos, b'`', 1);
        t.kind = if lookup_buf(t.buf(), t.len()) == Some(kind::FUNCTION) {
            kind::FUNCTION
        } else {
            kind::BAREWORD
        };
        end
    }

    /// `@name`, `@@name`, ``@`name` ``, `@'name'`.
    fn parse_var(&self, t: &mut Token, pos0: usize) -> usize {
        let s = self.s;
        let mut pos = pos0 + 1;
        if s.get(pos) == Some(&b'@') {
            pos += 1;
        }
        match s.get(pos) {
            Some(b'`') => {
                let end = self.parse_tick(t, pos);
                t.kind = kind::VARIABLE;
                return end;
            }
            Some(&q @ (b'\'' | b'"')) => {
                let end = self.parse_string_core(t, pos, q, 1);
                t.kind = kind::VARIABLE;
                return end;
            }
            _ => {}
        }
        let rest = s.get(pos..).unwrap_or_default();
        let xlen = rest
            .iter()
            .position(|&b| VAR_END[usize::from(b)])
            .unwrap_or(rest.len());
        t.assign_input(kind::VARIABLE, s, pos, pos + xlen);
        pos + xlen
    }

    /// `$1,000.00` (a number), `$$…$$` and `$tag$…$tag$` (strings), else `$`.
    fn parse_money(&self, t: &mut Token, pos: usize) -> usize {
        let s = self.s;
        let slen = s.len();
        if pos + 1 == slen {
            t.assign_char(kind::BAREWORD, b'$');
            return slen;
        }
        let xlen = span(&s[pos + 1..], &MONEY_DIGITS);
        if xlen == 0 {
            if s[pos + 1] == b'$' {
                let body = &s[pos + 2..];
                t.str_open = b'$';
                return match find_pair(body, b'$', b'$') {
                    None => {
                        t.assign_input(kind::STRING, s, pos + 2, slen);
                        t.str_close = 0;
                        slen
                    }
                    Some(e) => {
                        t.assign_input(kind::STRING, s, pos + 2, pos + 2 + e);
                        t.str_close = b'$';
                        pos + 2 + e + 2
                    }
                };
            }
            let xlen = span(&s[pos + 1..], &MONEY_TAG);
            if xlen == 0 || s.get(pos + xlen + 1) != Some(&b'$') {
                t.assign_char(kind::BAREWORD, b'$');
                return pos + 1;
            }
            let tag = &s[pos..pos + xlen + 2];
            let body = &s[pos + xlen + 2..];
            t.str_open = b'$';
            match memchr::memmem::find(body, tag) {
                None => {
                    t.assign_input(kind::STRING, s, pos + xlen + 2, slen);
                    t.str_close = 0;
                    slen
                }
                Some(e) => {
                    t.assign_input(kind::STRING, s, pos + xlen + 2, pos + xlen + 2 + e);
                    t.str_close = b'$';
                    pos + xlen + 2 + e + xlen + 2
                }
            }
        } else if xlen == 1 && s[pos + 1] == b'.' {
            self.parse_word(t, pos)
        } else {
            t.assign_input(kind::NUMBER, s, pos, pos + 1 + xlen);
            pos + 1 + xlen
        }
    }

    /// Numbers: `0x…`, `0b…`, decimals, `.5`, exponents, Oracle's `d`/`f` suffixes; a lone
    /// `.` is a dot; `1e` or `1.e` without exponent digits is a bareword.
    fn parse_number(&self, t: &mut Token, pos0: usize) -> usize {
        let s = self.s;
        let slen = s.len();
        if s[pos0] == b'0' && pos0 + 1 < slen {
            let digits = match s[pos0 + 1] {
                b'x' | b'X' => Some(&HEX_DIGITS),
                b'b' | b'B' => Some(&BIN_DIGITS),
                _ => None,
            };
            if let Some(digits) = digits {
                let xlen = span(&s[pos0 + 2..], digits);
                if xlen == 0 {
                    t.assign_input(kind::BAREWORD, s, pos0, pos0 + 2);
                    return pos0 + 2;
                }
                t.assign_input(kind::NUMBER, s, pos0, pos0 + 2 + xlen);
                return pos0 + 2 + xlen;
            }
        }
        let digit_at = |p: usize| s.get(p).is_some_and(u8::is_ascii_digit);
        let start = pos0;
        let mut pos = pos0;
        while digit_at(pos) {
            pos += 1;
        }
        if s.get(pos) == Some(&b'.') {
            pos += 1;
            while digit_at(pos) {
                pos += 1;
            }
            if pos - start == 1 {
                t.assign_char(kind::DOT, b'.');
                return pos;
            }
        }
        let mut have_e = false;
        let mut have_exp = false;
        if matches!(s.get(pos), Some(b'e' | b'E')) {
            have_e = true;
            pos += 1;
            if matches!(s.get(pos), Some(b'+' | b'-')) {
                pos += 1;
            }
            while digit_at(pos) {
                have_exp = true;
                pos += 1;
            }
        }
        if matches!(s.get(pos), Some(b'd' | b'D' | b'f' | b'F')) {
            match s.get(pos + 1) {
                None => pos += 1,
                Some(&c) if WHITE[usize::from(c)] || c == b';' => pos += 1,
                Some(b'u' | b'U') => pos += 1,
                Some(_) => {}
            }
        }
        // `1234.e`, `10.10E`: an exponent without digits makes a word (libinjection 3.9.2;
        // later versions drop the token instead).
        let kind = if have_e && !have_exp {
            kind::BAREWORD
        } else {
            kind::NUMBER
        };
        t.assign_input(kind, s, start, pos);
        pos
    }
}

/// The class table's white bytes, for skipping runs of them.
static WHITE_CLASS: [bool; 256] = {
    let mut set = [false; 256];
    let mut i = 0;
    while i < 256 {
        set[i] = matches!(CHAR_CLASS[i], Class::White);
        i += 1;
    }
    set
};

/// Whether the quote at `q` follows an odd run of backslashes that starts at or after
/// `start` (`is_backslash_escaped`).
#[inline]
fn backslash_escaped(s: &[u8], q: usize, start: usize) -> bool {
    let before = s.get(start..q).unwrap_or_default();
    let run = before.iter().rev().take_while(|&&b| b == b'\\').count();
    run & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: &[u8], delim: u8, mysql: bool) -> Vec<(u8, Vec<u8>)> {
        let mut tz = Tokenizer::new(input, delim, mysql);
        let mut t = Token::EMPTY;
        let mut out = Vec::new();
        while tz.next_token(&mut t) {
            out.push((t.kind, t.value().to_vec()));
        }
        out
    }

    #[test]
    fn basic() {
        let got = tokens(b"1' or '1'='1", b'\'', false);
        let kinds: Vec<u8> = got.iter().map(|t| t.0).collect();
        assert_eq!(kinds, b"s&sos");
        assert_eq!(tokens(b"1e", 0, false), vec![(b'n', b"1e".to_vec())]);
        assert_eq!(tokens(b"select.1", 0, false)[0], (b'E', b"select".to_vec()));
        assert_eq!(tokens(b"/*! x */", 0, false)[0].0, kind::EVIL);
        assert_eq!(tokens(b"# x", 0, true)[0].0, kind::COMMENT);
        assert_eq!(tokens(b"# x", 0, false)[0].0, kind::OPERATOR);
    }
}
