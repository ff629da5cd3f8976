//! Which classes of bytes a value holds, so that the steps of a chain that cannot change
//! it are passed by without reading it again.
//!
//! On ordinary values most steps of a chain change nothing: `urlDecodeUni` needs a `%` or
//! `+`, `htmlEntityDecode` an `&`, `jsDecode` a backslash. Each step finds that out by
//! reading the whole value; CRS reads each value through about 40 chains of up to eight
//! steps. One pass over the value gives a [`Features`] mask (a table lookup per byte), and
//! [`super::Transformation::may_change`] answers from the mask alone for the steps CRS
//! uses. A step is skipped only when the mask proves it returns its input unchanged
//! (the classes are supersets of each step's trigger bytes), so results never differ;
//! `tests::features_never_skip_a_change` checks this against `apply` on generated values.
//!
//! The same mask gates operators: every byte but `a`-`z` has a class, so a pattern whose
//! every match needs, say, a `|` or a `;` cannot match a value whose mask lacks both
//! ([`crate::operators::rx_classes`]).

/// A set of the byte classes below, or 0 for "not known".
pub(crate) type Features = u32;

/// `%` or `+` (URL decoders).
pub(crate) const PERCENT_PLUS: Features = 1 << 0;
/// `&` (HTML entities).
pub(crate) const AMP: Features = 1 << 1;
/// `\` (JavaScript and CSS escapes, Windows paths, `cmdLine`).
pub(crate) const BACKSLASH: Features = 1 << 2;
/// `A`-`Z`.
pub(crate) const UPPER: Features = 1 << 3;
/// Bytes 0x80-0xFF (UTF-8, NFKC folding, the no-break space).
pub(crate) const HIGH: Features = 1 << 4;
/// NUL.
pub(crate) const NUL: Features = 1 << 5;
/// The space.
pub(crate) const SPACE: Features = 1 << 6;
/// `\t`, `\n`, `\v`, `\f`, `\r`.
pub(crate) const OTHER_SPACE: Features = 1 << 7;
/// `/`.
pub(crate) const SLASH: Features = 1 << 8;
/// `.`.
pub(crate) const DOT: Features = 1 << 9;
/// `"`, `'`, `^`, `,`, `;` (`cmdLine`).
pub(crate) const SHELL: Features = 1 << 10;
/// `*`, `-`, `#` (comment markers).
pub(crate) const COMMENT: Features = 1 << 11;
/// `0`-`9`.
pub(crate) const DIGIT: Features = 1 << 12;
/// `(`.
pub(crate) const LPAREN: Features = 1 << 13;
/// `)`.
pub(crate) const RPAREN: Features = 1 << 14;
/// `<`.
pub(crate) const LT: Features = 1 << 15;
/// `>`.
pub(crate) const GT: Features = 1 << 16;
/// `|`.
pub(crate) const PIPE: Features = 1 << 17;
/// `` ` ``.
pub(crate) const BACKTICK: Features = 1 << 18;
/// `{`, `}`.
pub(crate) const BRACE: Features = 1 << 19;
/// `$`.
pub(crate) const DOLLAR: Features = 1 << 20;
/// `=`.
pub(crate) const EQUALS: Features = 1 << 21;
/// `:`.
pub(crate) const COLON: Features = 1 << 22;
/// `!`.
pub(crate) const BANG: Features = 1 << 23;
/// `?`.
pub(crate) const QUESTION: Features = 1 << 24;
/// `@`.
pub(crate) const AT: Features = 1 << 25;
/// `[`, `]`.
pub(crate) const BRACKET: Features = 1 << 26;
/// `~`.
pub(crate) const TILDE: Features = 1 << 27;
/// `_`.
pub(crate) const UNDERSCORE: Features = 1 << 28;
/// The other control bytes: 0x01-0x08, 0x0e-0x1f, 0x7f.
pub(crate) const CONTROL: Features = 1 << 29;
/// Set in every computed mask, so that a computed mask is never 0.
pub(crate) const KNOWN: Features = 1 << 31;

/// The class of each byte.
static CLASS: [Features; 256] = {
    let mut t = [0; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'%' | b'+' => PERCENT_PLUS,
            b'&' => AMP,
            b'\\' => BACKSLASH,
            b'A'..=b'Z' => UPPER,
            0x80..=0xff => HIGH,
            0 => NUL,
            b' ' => SPACE,
            b'\t' | b'\n' | 0x0b | 0x0c | b'\r' => OTHER_SPACE,
            b'/' => SLASH,
            b'.' => DOT,
            b'"' | b'\'' | b'^' | b',' | b';' => SHELL,
            b'*' | b'-' | b'#' => COMMENT,
            b'0'..=b'9' => DIGIT,
            b'(' => LPAREN,
            b')' => RPAREN,
            b'<' => LT,
            b'>' => GT,
            b'|' => PIPE,
            b'`' => BACKTICK,
            b'{' | b'}' => BRACE,
            b'$' => DOLLAR,
            b'=' => EQUALS,
            b':' => COLON,
            b'!' => BANG,
            b'?' => QUESTION,
            b'@' => AT,
            b'[' | b']' => BRACKET,
            b'~' => TILDE,
            b'_' => UNDERSCORE,
            0x01..=0x08 | 0x0e..=0x1f | 0x7f => CONTROL,
            // `a`-`z`: too common in ordinary values to tell anything.
            _ => 0,
        };
        b += 1;
    }
    t
};

/// The classes of the bytes of `value`.
pub(crate) fn of(value: &[u8]) -> Features {
    value.iter().fold(KNOWN, |f, &b| f | CLASS[usize::from(b)])
}

/// Pseudo-random values of up to 11 bytes drawn from `alphabet` (xorshift64 from `seed`:
/// deterministic, no dependency), for the tests that check a claim about byte classes
/// on every kind of value (`transformations::tests`, `operators::rx_classes`).
#[cfg(test)]
pub(crate) fn generated_values(alphabet: &[u8], seed: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut state = seed;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    std::iter::from_fn(move || {
        let len = (next() % 12) as usize;
        Some(
            (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect(),
        )
    })
}

/// The class of one byte; 0 for `a`-`z`, the only bytes without one.
pub(crate) fn class_of(b: u8) -> Features {
    CLASS[usize::from(b)]
}

/// A rough measure of how often values hold a byte of one of `classes`, for choosing
/// between gates ([`crate::operators::rx_classes`]): the sum of a weight per class, higher
/// for the classes of ordinary text (letters, digits, spaces, `.`, `/`), lower for the
/// punctuation of code and injections. Only a choice between sound gates depends on it.
pub(crate) fn commonness(classes: Features) -> u32 {
    const WEIGHTS: [(Features, u32); 30] = [
        (UPPER, 8),
        (DIGIT, 8),
        (SPACE, 8),
        (DOT, 6),
        (SLASH, 6),
        (COMMENT, 5),
        (SHELL, 5),
        (PERCENT_PLUS, 4),
        (EQUALS, 4),
        (COLON, 4),
        (UNDERSCORE, 4),
        (HIGH, 3),
        (AMP, 3),
        (OTHER_SPACE, 2),
        (LPAREN, 2),
        (RPAREN, 2),
        (AT, 2),
        (QUESTION, 2),
        (BRACKET, 2),
        (LT, 1),
        (GT, 1),
        (PIPE, 1),
        (BACKTICK, 1),
        (BRACE, 1),
        (DOLLAR, 1),
        (BANG, 1),
        (TILDE, 1),
        (BACKSLASH, 1),
        (NUL, 1),
        (CONTROL, 1),
    ];
    WEIGHTS
        .iter()
        .filter(|(c, _)| classes & c != 0)
        .map(|(_, w)| w)
        .sum()
}
