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
