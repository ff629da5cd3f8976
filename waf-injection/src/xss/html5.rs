//! libinjection's HTML5 tokenizer: a small subset of the WHATWG tokenizer state machine
//! (`libinjection_html5.c`), good enough to find tags, attributes and comments in input that
//! may start inside an attribute value.
//!
//! It is not a conforming HTML parser and must not become one: the XSS verdicts depend on its
//! exact token boundaries, including its quirks (NUL counts as whitespace between attributes,
//! NULs are kept inside tag names, `<%` opens an IE comment that ends at `%>`, a comment also
//! ends at `-!>`, the first quote is not skipped when the input starts inside a quoted value).
//! `tests/xss_differential.rs` compares every token with the C tokenizer.
//!
//! Tokens are ranges of the input; the tokenizer never allocates and never indexes outside
//! the input (every read is bounds-checked, through `get` or slice methods).
//!
//! [`Tokenizer::new`] returns every token, as C does; [`Tokenizer::for_verdict`] returns
//! only the tokens a verdict reads and runs on through the others, which saves a return to
//! the state dispatch (a mispredicted indirect branch) for each of them.

/// The state the input starts in: where an attacker's string lands in the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Context {
    /// Between tags (`DATA_STATE`).
    Data = 0,
    /// Inside a tag, where an unquoted attribute value ended (`VALUE_NO_QUOTE`).
    ValueNoQuote = 1,
    /// Inside a `'`-quoted attribute value (`VALUE_SINGLE_QUOTE`).
    ValueSingleQuote = 2,
    /// Inside a `"`-quoted attribute value (`VALUE_DOUBLE_QUOTE`).
    ValueDoubleQuote = 3,
    /// Inside a `` ` ``-quoted attribute value, an IE extension (`VALUE_BACK_QUOTE`).
    ValueBackQuote = 4,
}

impl Context {
    /// The five contexts in the order `libinjection_xss` tries them.
    pub const ALL: [Context; 5] = [
        Context::Data,
        Context::ValueNoQuote,
        Context::ValueSingleQuote,
        Context::ValueDoubleQuote,
        Context::ValueBackQuote,
    ];
}

/// What a token is; the discriminants are C's `enum html5_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TokenKind {
    /// Text between tags, or a CDATA section's content.
    DataText = 0,
    /// The name of an opening tag (may contain NULs).
    TagNameOpen = 1,
    /// The `>` that ends an opening tag.
    TagNameClose = 2,
    /// The `/>` that ends a self-closing tag.
    TagNameSelfClose = 3,
    /// Unused by the tokenizer; kept so the discriminants match C.
    TagData = 4,
    /// The name of a closing tag (`</name>`).
    TagClose = 5,
    /// An attribute name.
    AttrName = 6,
    /// An attribute value, without its quotes.
    AttrValue = 7,
    /// The body of a comment, bogus comment (`<?..>`, `<!..>`, `</ ..>`) or `<%..%>`.
    TagComment = 8,
    /// A doctype, from `DOCTYPE` (any case) to before `>`.
    Doctype = 9,
}

/// One token: its kind and its byte range in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// What the token is.
    pub kind: TokenKind,
    /// Offset of the first byte.
    pub start: usize,
    /// Offset after the last byte.
    pub end: usize,
}

/// The tokenizer states that survive between two tokens. The other C states only run
/// inside one step and are plain function calls here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Data,
    TagOpen,
    TagNameClose,
    BeforeAttributeName,
    AfterAttributeName,
    BeforeAttributeValue,
    AttributeValueQuoted(u8),
    AfterAttributeValueQuoted,
    SelfClosingStartTag,
    Eof,
}

/// Byte classes for the scanning loops: one table load per byte instead of a chain of
/// comparisons.
const WHITE: u8 = 1; // space, \t, \n, \v, \f, \r
const NUL: u8 = 2; // whitespace to `h5_is_white` (C's strchr matches the terminator)
const SLASH: u8 = 4;
const EQUALS: u8 = 8;
const GT: u8 = 16;

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b' ' as usize] = WHITE;
    t[b'\t' as usize] = WHITE;
    t[b'\n' as usize] = WHITE;
    t[0x0b] = WHITE;
    t[0x0c] = WHITE;
    t[b'\r' as usize] = WHITE;
    t[0] = NUL;
    t[b'/' as usize] = SLASH;
    t[b'=' as usize] = EQUALS;
    t[b'>' as usize] = GT;
    t
};

/// `h5_is_white`: C's `strchr(" \t\n\v\f\r", ch)`, which also matches NUL (the terminator).
#[inline]
fn is_white(b: u8) -> bool {
    CLASS[usize::from(b)] & (WHITE | NUL) != 0
}

/// Position of the first `needle` in `hay[from..]`, as an offset in `hay`.
#[inline]
fn find(hay: &[u8], from: usize, needle: u8) -> Option<usize> {
    memchr::memchr(needle, hay.get(from..)?).map(|i| i + from)
}

/// Position of the first byte of `hay[from..]` in one of the classes `mask`, and its class.
#[inline]
fn scan(hay: &[u8], from: usize, mask: u8) -> Option<(usize, u8)> {
    let rest = hay.get(from..)?;
    rest.iter().enumerate().find_map(|(i, &b)| {
        let class = CLASS[usize::from(b)] & mask;
        (class != 0).then_some((i + from, class))
    })
}

/// libinjection's HTML5 tokenizer over one input, started in one [`Context`].
///
/// ```
/// use waf_injection::xss::html5::{Context, TokenKind, Tokenizer};
/// let mut t = Tokenizer::new(b"<a href=x>", Context::Data);
/// let kinds: Vec<TokenKind> = std::iter::from_fn(|| t.next_token()).map(|t| t.kind).collect();
/// assert_eq!(kinds, [TokenKind::TagNameOpen, TokenKind::AttrName, TokenKind::AttrValue, TokenKind::TagNameClose]);
/// ```
#[derive(Debug, Clone)]
pub struct Tokenizer<'a> {
    s: &'a [u8],
    pos: usize,
    is_close: bool,
    state: State,
    /// Skip the tokens no verdict looks at (text, `>`, `/>`, closing tags): the caller
    /// then sees only tag names, attribute names and values, comments and doctypes, and
    /// the tokenizer goes straight on instead of returning to its dispatch.
    skip_text: bool,
}

/// What the tag-open states found after `<`.
enum AfterLt {
    /// A token.
    Token(Token),
    /// Not a tag: the `<` is text, data goes on at `pos`.
    LtIsText,
    /// `</>`: data goes on at the `>`.
    Data,
    /// The end of the input.
    End,
}

impl<'a> Tokenizer<'a> {
    /// A tokenizer at the start of `input`, in `context`.
    pub fn new(input: &'a [u8], context: Context) -> Tokenizer<'a> {
        let state = match context {
            Context::Data => State::Data,
            Context::ValueNoQuote => State::BeforeAttributeName,
            Context::ValueSingleQuote => State::AttributeValueQuoted(b'\''),
            Context::ValueDoubleQuote => State::AttributeValueQuoted(b'"'),
            Context::ValueBackQuote => State::AttributeValueQuoted(b'`'),
        };
        Tokenizer {
            s: input,
            pos: 0,
            is_close: false,
            state,
            skip_text: false,
        }
    }

    /// [`Tokenizer::new`] that skips the tokens no verdict depends on: text, `>`, `/>` and
    /// closing tags. The verdict stays the same: the only state a skipped token carries is
    /// "the previous token was not an attribute name", and an attribute value always comes
    /// right after its attribute name (the value states are only entered from the name
    /// states), so no skipped token can sit between the two.
    pub fn for_verdict(input: &'a [u8], context: Context) -> Tokenizer<'a> {
        Tokenizer {
            skip_text: true,
            ..Tokenizer::new(input, context)
        }
    }

    /// The input the token ranges refer to.
    pub fn input(&self) -> &'a [u8] {
        self.s
    }

    /// The next token, or `None` at the end (C's `libinjection_h5_next` returning 0).
    #[inline(always)]
    pub fn next_token(&mut self) -> Option<Token> {
        let token = match self.state {
            State::Data => self.data(),
            State::TagOpen => match self.tag_open() {
                AfterLt::Token(token) => Some(token),
                AfterLt::LtIsText => self.lt_is_text(),
                AfterLt::Data => self.data(),
                AfterLt::End => None,
            },
            State::TagNameClose => self.tag_name_close(),
            State::BeforeAttributeName => self.before_attribute_name(),
            State::AfterAttributeName => self.after_attribute_name(),
            State::BeforeAttributeValue => self.before_attribute_value(),
            State::AttributeValueQuoted(q) => Some(self.attribute_value_quoted(q)),
            State::AfterAttributeValueQuoted => self.after_attribute_value_quoted(),
            State::SelfClosingStartTag => self.self_closing_start_tag(),
            State::Eof => None,
        };
        if token.is_none() {
            self.state = State::Eof;
        }
        token
    }

    /// The byte at `i`, if inside the input.
    #[inline]
    fn byte(&self, i: usize) -> Option<u8> {
        self.s.get(i).copied()
    }

    #[inline]
    fn emit(&mut self, kind: TokenKind, start: usize, end: usize, next: State) -> Option<Token> {
        self.state = next;
        Some(Token { kind, start, end })
    }

    /// `h5_skip_white`: skips whitespace and NULs, returns the byte there. C returns that
    /// byte as a signed `char` widened to `int`, so 0xFF reads as -1, `CHAR_EOF`: the
    /// callers stop there as at the end of the input.
    #[inline]
    fn skip_white(&mut self) -> Option<u8> {
        while let Some(b) = self.byte(self.pos) {
            if !is_white(b) {
                return (b != 0xff).then_some(b);
            }
            self.pos += 1;
        }
        None
    }

    #[inline(always)]
    fn data(&mut self) -> Option<Token> {
        loop {
            let start = self.pos;
            let Some(lt) = find(self.s, start, b'<') else {
                let end = self.s.len();
                if start >= end || self.skip_text {
                    return None;
                }
                self.pos = end;
                return self.emit(TokenKind::DataText, start, end, State::Eof);
            };
            self.pos = lt + 1;
            if lt > start && !self.skip_text {
                return self.emit(TokenKind::DataText, start, lt, State::TagOpen);
            }
            match self.tag_open() {
                AfterLt::Token(token) => return Some(token),
                AfterLt::End => return None,
                AfterLt::LtIsText if !self.skip_text => return self.lt_is_text(),
                AfterLt::LtIsText | AfterLt::Data => continue,
            }
        }
    }

    /// The `<` before `pos` opens no tag: it is a one-byte data text (`pos >= 1` here).
    #[inline(always)]
    fn lt_is_text(&mut self) -> Option<Token> {
        let start = self.pos.saturating_sub(1);
        self.emit(TokenKind::DataText, start, self.pos, State::Data)
    }

    /// Emits `token` and continues in the data state, or in skip mode goes straight on
    /// to the next token worth returning.
    #[inline(always)]
    fn then_data(&mut self, token: Token) -> Option<Token> {
        if self.skip_text {
            self.data()
        } else {
            self.state = State::Data;
            Some(token)
        }
    }

    #[inline(always)]
    fn tag_open(&mut self) -> AfterLt {
        let Some(ch) = self.byte(self.pos) else {
            return AfterLt::End;
        };
        let token = match ch {
            b'!' => {
                self.pos += 1;
                return self.markup_declaration_open();
            }
            b'/' => {
                self.pos += 1;
                self.is_close = true;
                return self.end_tag_open();
            }
            b'?' => {
                self.pos += 1;
                self.bogus_comment()
            }
            b'%' => {
                self.pos += 1;
                self.bogus_comment_percent()
            }
            // NUL: an IE-ism, ignored inside tag names.
            b'a'..=b'z' | b'A'..=b'Z' | 0 => return self.tag_name(),
            // C re-enters the data state when `pos == 0`, which cannot happen after a `<`.
            _ => return AfterLt::LtIsText,
        };
        AfterLt::Token(token)
    }

    #[inline(always)]
    fn end_tag_open(&mut self) -> AfterLt {
        match self.byte(self.pos) {
            None => AfterLt::End,
            Some(b'>') => AfterLt::Data,
            Some(b'a'..=b'z' | b'A'..=b'Z') => self.tag_name(),
            Some(_) => {
                self.is_close = false;
                AfterLt::Token(self.bogus_comment())
            }
        }
    }

    #[inline(always)]
    fn tag_name_close(&mut self) -> Option<Token> {
        self.is_close = false;
        let start = self.pos;
        self.pos += 1;
        let token = self.token(TokenKind::TagNameClose, start, start + 1);
        if self.pos < self.s.len() {
            return self.then_data(token);
        }
        self.state = State::Eof;
        (!self.skip_text).then_some(token)
    }

    #[inline(always)]
    fn tag_name(&mut self) -> AfterLt {
        let start = self.pos;
        // NULs stay inside the name (old browsers ignore them), so only real whitespace ends it.
        let token = match scan(self.s, start, WHITE | SLASH | GT) {
            Some((pos, WHITE)) => {
                self.pos = pos + 1;
                self.state = State::BeforeAttributeName;
                self.token(TokenKind::TagNameOpen, start, pos)
            }
            Some((pos, SLASH)) => {
                self.pos = pos + 1;
                self.state = State::SelfClosingStartTag;
                self.token(TokenKind::TagNameOpen, start, pos)
            }
            Some((pos, _)) if self.is_close => {
                self.pos = pos + 1;
                self.is_close = false;
                if self.skip_text {
                    return AfterLt::Data;
                }
                self.state = State::Data;
                self.token(TokenKind::TagClose, start, pos)
            }
            Some((pos, _)) => {
                self.pos = pos;
                self.state = State::TagNameClose;
                self.token(TokenKind::TagNameOpen, start, pos)
            }
            None => {
                self.state = State::Eof;
                self.token(TokenKind::TagNameOpen, start, self.s.len())
            }
        };
        AfterLt::Token(token)
    }

    #[inline]
    fn token(&self, kind: TokenKind, start: usize, end: usize) -> Token {
        Token { kind, start, end }
    }

    #[inline(always)]
    fn before_attribute_name(&mut self) -> Option<Token> {
        match self.skip_white()? {
            b'/' => {
                self.pos += 1;
                self.self_closing_start_tag()
            }
            b'>' => {
                let start = self.pos;
                self.pos += 1;
                let token = self.token(TokenKind::TagNameClose, start, start + 1);
                self.then_data(token)
            }
            _ => Some(self.attribute_name()),
        }
    }

    /// Starts at a byte that is not whitespace; that first byte is part of the name even
    /// when it is `=` (C scans from `pos + 1`).
    #[inline(always)]
    fn attribute_name(&mut self) -> Token {
        let start = self.pos;
        let found = scan(self.s, start + 1, WHITE | NUL | SLASH | EQUALS | GT);
        let (end, after, next) = match found {
            Some((pos, SLASH)) => (pos, pos + 1, State::SelfClosingStartTag),
            Some((pos, EQUALS)) => (pos, pos + 1, State::BeforeAttributeValue),
            Some((pos, GT)) => (pos, pos, State::TagNameClose),
            Some((pos, _)) => (pos, pos + 1, State::AfterAttributeName),
            None => {
                let end = self.s.len().max(start);
                (end, end, State::Eof)
            }
        };
        self.state = next;
        self.pos = after;
        self.token(TokenKind::AttrName, start, end)
    }

    #[inline(always)]
    fn after_attribute_name(&mut self) -> Option<Token> {
        match self.skip_white()? {
            b'/' => {
                self.pos += 1;
                self.self_closing_start_tag()
            }
            b'=' => {
                self.pos += 1;
                self.before_attribute_value()
            }
            b'>' => self.tag_name_close(),
            _ => Some(self.attribute_name()),
        }
    }

    #[inline(always)]
    fn before_attribute_value(&mut self) -> Option<Token> {
        let token = match self.skip_white()? {
            q @ (b'"' | b'\'' | b'`') => self.attribute_value_quoted(q),
            _ => self.attribute_value_unquoted(),
        };
        Some(token)
    }

    /// The value up to the closing `quote`. The opening quote is at `pos`, except at the
    /// very start of the input, where the context says we are already inside the value.
    #[inline(always)]
    fn attribute_value_quoted(&mut self, quote: u8) -> Token {
        if self.pos > 0 {
            self.pos += 1;
        }
        let start = self.pos;
        match find(self.s, start, quote) {
            None => {
                let end = self.s.len();
                self.state = State::Eof;
                self.token(TokenKind::AttrValue, start, end.max(start))
            }
            Some(q) => {
                self.pos = q + 1;
                self.state = State::AfterAttributeValueQuoted;
                self.token(TokenKind::AttrValue, start, q)
            }
        }
    }

    #[inline(always)]
    fn attribute_value_unquoted(&mut self) -> Token {
        let start = self.pos;
        match scan(self.s, start, WHITE | NUL | GT) {
            Some((pos, GT)) => {
                self.pos = pos;
                self.state = State::TagNameClose;
                self.token(TokenKind::AttrValue, start, pos)
            }
            Some((pos, _)) => {
                self.pos = pos + 1;
                self.state = State::BeforeAttributeName;
                self.token(TokenKind::AttrValue, start, pos)
            }
            None => {
                self.state = State::Eof;
                self.token(TokenKind::AttrValue, start, self.s.len())
            }
        }
    }

    #[inline(always)]
    fn after_attribute_value_quoted(&mut self) -> Option<Token> {
        let ch = self.byte(self.pos)?;
        if is_white(ch) {
            self.pos += 1;
            self.before_attribute_name()
        } else if ch == b'/' {
            self.pos += 1;
            self.self_closing_start_tag()
        } else if ch == b'>' {
            let start = self.pos;
            self.pos += 1;
            let token = self.token(TokenKind::TagNameClose, start, start + 1);
            self.then_data(token)
        } else {
            self.before_attribute_name()
        }
    }

    #[inline(always)]
    fn self_closing_start_tag(&mut self) -> Option<Token> {
        let ch = self.byte(self.pos)?;
        // `pos >= 1`: every path here has just stepped over a `/`.
        if ch == b'>' && self.pos > 0 {
            let start = self.pos - 1;
            self.pos += 1;
            let token = self.token(TokenKind::TagNameSelfClose, start, start + 2);
            self.then_data(token)
        } else {
            self.before_attribute_name()
        }
    }

    /// Everything up to the next `>` (or the end) is a comment.
    #[inline(always)]
    fn bogus_comment(&mut self) -> Token {
        let start = self.pos;
        match find(self.s, start, b'>') {
            None => {
                let end = self.s.len();
                self.pos = end;
                self.state = State::Eof;
                self.token(TokenKind::TagComment, start, end)
            }
            Some(gt) => {
                self.pos = gt + 1;
                self.state = State::Data;
                self.token(TokenKind::TagComment, start, gt)
            }
        }
    }

    /// `<% ... %>`: not in the spec, but IE <= 9 and old Safari treat it as a comment.
    #[inline(always)]
    fn bogus_comment_percent(&mut self) -> Token {
        let start = self.pos;
        let mut from = start;
        loop {
            match find(self.s, from, b'%') {
                Some(p) if self.byte(p + 1) == Some(b'>') => {
                    self.pos = p + 2;
                    self.state = State::Data;
                    return self.token(TokenKind::TagComment, start, p);
                }
                Some(p) if p + 1 < self.s.len() => from = p + 1,
                _ => {
                    let end = self.s.len();
                    self.pos = end;
                    self.state = State::Eof;
                    return self.token(TokenKind::TagComment, start, end);
                }
            }
        }
    }

    /// After `<!`: a doctype, CDATA, a comment, or a bogus comment.
    #[inline(always)]
    fn markup_declaration_open(&mut self) -> AfterLt {
        let rest = self.s.get(self.pos..).unwrap_or_default();
        let token = if rest.len() >= 7 && rest[..7].eq_ignore_ascii_case(b"DOCTYPE") {
            self.doctype()
        } else if rest.starts_with(b"[CDATA[") {
            self.pos += 7;
            let text = self.cdata();
            if self.skip_text {
                return AfterLt::Data;
            }
            text
        } else if rest.starts_with(b"--") {
            self.pos += 2;
            self.comment()
        } else {
            self.bogus_comment()
        };
        AfterLt::Token(token)
    }

    /// A comment ends at `-->`, at `-!>`, or at the end; NULs between the first `-` and the
    /// second `-`/`!` are ignored (IE).
    #[inline(always)]
    fn comment(&mut self) -> Token {
        let start = self.pos;
        let len = self.s.len();
        let mut from = start;
        loop {
            let dash = match find(self.s, from, b'-') {
                Some(d) if d + 3 <= len => d,
                _ => break,
            };
            let mut off = dash + 1;
            while self.byte(off) == Some(0) {
                off += 1;
            }
            match self.byte(off) {
                None => break,
                Some(b'-' | b'!') => {}
                Some(_) => {
                    from = dash + 1;
                    continue;
                }
            }
            match self.byte(off + 1) {
                None => break,
                Some(b'>') => {
                    self.pos = off + 2;
                    self.state = State::Data;
                    return self.token(TokenKind::TagComment, start, dash);
                }
                Some(_) => from = dash + 1,
            }
        }
        self.state = State::Eof;
        self.token(TokenKind::TagComment, start, len)
    }

    /// `<![CDATA[ ... ]]>`: the content is data text.
    #[inline(always)]
    fn cdata(&mut self) -> Token {
        let start = self.pos;
        let len = self.s.len();
        let mut from = start;
        loop {
            match find(self.s, from, b']') {
                Some(rb) if rb + 3 <= len => {
                    if self.s.get(rb + 1..rb + 3) == Some(b"]>") {
                        self.pos = rb + 3;
                        self.state = State::Data;
                        return self.token(TokenKind::DataText, start, rb);
                    }
                    from = rb + 1;
                }
                _ => {
                    self.pos = len;
                    self.state = State::Eof;
                    return self.token(TokenKind::DataText, start, len);
                }
            }
        }
    }

    /// `<!DOCTYPE ...>`: the token starts at `DOCTYPE` and ends before `>`.
    #[inline(always)]
    fn doctype(&mut self) -> Token {
        let start = self.pos;
        match find(self.s, start, b'>') {
            None => {
                self.state = State::Eof;
                self.token(TokenKind::Doctype, start, self.s.len())
            }
            Some(gt) => {
                self.pos = gt + 1;
                self.state = State::Data;
                self.token(TokenKind::Doctype, start, gt)
            }
        }
    }
}
