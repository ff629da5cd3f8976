//! A token: its type letter, its value (a copy of at most 31 bytes, as C's `stoken_t`
//! keeps it) and how a string token was opened and closed.
//!
//! The value is an inline buffer rather than a range of the input because folding builds
//! values that are not in the input (`UNION` + `ALL` → `UNION ALL`), and because
//! libinjection truncates values to 31 bytes before every lookup and comparison: copying
//! them the same way keeps those truncations exact. A token is 36 bytes and lives on the
//! stack; nothing is allocated.

/// The capacity of a token value in C (`stoken_t::val`), including its terminating NUL.
pub(crate) const VALUE_SIZE: usize = 32;

/// The longest value a token keeps; longer input is truncated.
pub(crate) const VALUE_MAX: usize = VALUE_SIZE - 1;

/// Token types: the letters of the fingerprint (`sqli_token_types` in libinjection).
pub(crate) mod kind {
    /// No token (a cleared slot).
    pub(crate) const NONE: u8 = 0;
    /// A keyword (`SELECT`, `FROM`, …).
    pub(crate) const KEYWORD: u8 = b'k';
    /// `UNION` and its variants.
    pub(crate) const UNION: u8 = b'U';
    /// `GROUP BY`, `ORDER BY`, …
    pub(crate) const GROUP: u8 = b'B';
    /// Expression starters (`SELECT`, `CASE`, …).
    pub(crate) const EXPRESSION: u8 = b'E';
    /// A SQL type (`INT`, `CHAR`, …).
    pub(crate) const SQLTYPE: u8 = b't';
    /// A function.
    pub(crate) const FUNCTION: u8 = b'f';
    /// Any other word.
    pub(crate) const BAREWORD: u8 = b'n';
    /// A number.
    pub(crate) const NUMBER: u8 = b'1';
    /// `@var`, `@@var`.
    pub(crate) const VARIABLE: u8 = b'v';
    /// A string literal.
    pub(crate) const STRING: u8 = b's';
    /// An operator.
    pub(crate) const OPERATOR: u8 = b'o';
    /// `AND`, `OR`, `&&`, `||`.
    pub(crate) const LOGIC_OPERATOR: u8 = b'&';
    /// A comment.
    pub(crate) const COMMENT: u8 = b'c';
    /// `COLLATE`.
    pub(crate) const COLLATE: u8 = b'A';
    /// `(`.
    pub(crate) const LEFTPARENS: u8 = b'(';
    /// `)`.
    pub(crate) const RIGHTPARENS: u8 = b')';
    /// `{`.
    pub(crate) const LEFTBRACE: u8 = b'{';
    /// `}`.
    pub(crate) const RIGHTBRACE: u8 = b'}';
    /// `.`.
    pub(crate) const DOT: u8 = b'.';
    /// `,`.
    pub(crate) const COMMA: u8 = b',';
    /// `:`.
    pub(crate) const COLON: u8 = b':';
    /// `;`.
    pub(crate) const SEMICOLON: u8 = b';';
    /// A Transact-SQL statement start.
    pub(crate) const TSQL: u8 = b'T';
    /// `?` and `]`.
    pub(crate) const UNKNOWN: u8 = b'?';
    /// Unparsable input (nested or MySQL `/*!` comments): always SQLi.
    pub(crate) const EVIL: u8 = b'X';
    /// `\`.
    pub(crate) const BACKSLASH: u8 = b'\\';
}

/// One token.
#[derive(Clone, Copy)]
pub(crate) struct Token {
    /// Its type, one of [`kind`].
    pub(crate) kind: u8,
    /// The opening quote of a string token, or 0 when the string started at the input's
    /// start in a quote context.
    pub(crate) str_open: u8,
    /// The closing quote of a string token, or 0 when the input ended inside it.
    pub(crate) str_close: u8,
    len: u8,
    val: [u8; VALUE_SIZE],
}

impl Token {
    /// A cleared token.
    pub(crate) const EMPTY: Token = Token {
        kind: kind::NONE,
        str_open: 0,
        str_close: 0,
        len: 0,
        val: [0; VALUE_SIZE],
    };

    /// Clears the type, quotes and value (`st_clear`).
    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        self.kind = kind::NONE;
        self.str_open = 0;
        self.str_close = 0;
        self.len = 0;
    }

    /// Sets the type and the value, truncated to [`VALUE_MAX`] bytes (`st_assign`).
    #[inline(always)]
    pub(crate) fn assign(&mut self, kind: u8, value: &[u8]) {
        let n = value.len().min(VALUE_MAX);
        if let (Some(dst), Some(src)) = (self.val.get_mut(..n), value.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.kind = kind;
        self.len = n as u8;
    }

    /// Sets the type and the value `s[start..end]`, truncated to [`VALUE_MAX`] bytes.
    ///
    /// Copies a fixed 32 bytes when the input has them (two vector moves instead of a
    /// `memcpy` call; the bytes past the value are never read).
    #[inline(always)]
    pub(crate) fn assign_input(&mut self, kind: u8, s: &[u8], start: usize, end: usize) {
        let n = end.saturating_sub(start).min(VALUE_MAX);
        if let Some(src) = s.get(start..start + VALUE_SIZE) {
            self.val.copy_from_slice(src);
        } else if let (Some(dst), Some(src)) = (self.val.get_mut(..n), s.get(start..start + n)) {
            dst.copy_from_slice(src);
        }
        self.kind = kind;
        self.len = n as u8;
    }

    /// The value buffer; only the first [`len`](Self::len) bytes are the value.
    #[inline(always)]
    pub(crate) fn buf(&self) -> &[u8; VALUE_SIZE] {
        &self.val
    }

    /// Sets the type and a one-byte value (`st_assign_char`).
    #[inline(always)]
    pub(crate) fn assign_char(&mut self, kind: u8, value: u8) {
        self.kind = kind;
        self.val[0] = value;
        self.len = 1;
    }

    /// The value.
    #[inline(always)]
    pub(crate) fn value(&self) -> &[u8] {
        &self.val[..usize::from(self.len)]
    }

    /// The value's length.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Byte `i` of the value, 0 past its end (C reads the terminating NUL there).
    #[inline(always)]
    pub(crate) fn byte(&self, i: usize) -> u8 {
        if i < self.len() {
            self.val[i]
        } else {
            0
        }
    }

    /// Whether the value equals `upper` ignoring ASCII case (`cstrcasecmp(upper, val, len)
    /// == 0`).
    #[inline]
    pub(crate) fn is(&self, upper: &[u8]) -> bool {
        self.value().eq_ignore_ascii_case(upper)
    }

    /// `+ - * / %` as an operator (`st_is_arithmetic_op`).
    #[inline]
    pub(crate) fn is_arithmetic_op(&self) -> bool {
        self.kind == kind::OPERATOR
            && self.len == 1
            && matches!(self.val[0], b'*' | b'/' | b'-' | b'+' | b'%')
    }

    /// `+ - ! ~ !! NOT` as an operator (`st_is_unary_op`).
    #[inline]
    pub(crate) fn is_unary_op(&self) -> bool {
        if self.kind != kind::OPERATOR {
            return false;
        }
        match self.value() {
            [b] => matches!(b, b'+' | b'-' | b'!' | b'~'),
            v @ [_, _] => v == b"!!",
            v @ [_, _, _] => v.eq_ignore_ascii_case(b"NOT"),
            _ => false,
        }
    }

    /// Whether the value, read as a C string (up to its first NUL), contains `b`
    /// (`strchr(val, b)`).
    #[inline]
    pub(crate) fn c_str_contains(&self, b: u8) -> bool {
        self.value()
            .iter()
            .take_while(|&&c| c != 0)
            .any(|&c| c == b)
    }
}
