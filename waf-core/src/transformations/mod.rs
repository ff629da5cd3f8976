//! Transformations (`t:lowercase`, `t:urlDecodeUni`, ...): one file each.
//!
//! A transformation rewrites a variable's value before the operator sees it. Values are bytes
//! (request data is often not UTF-8), and every transformation returns `Cow::Borrowed` when
//! it leaves the value unchanged: most values in a benign request contain nothing to decode,
//! so the common path does not allocate. Each file scans for the first byte it would change
//! and only then allocates the output and copies the untouched prefix.
//!
//! # Semantics
//!
//! We copy ModSecurity v3 (`src/actions/transformations/*.cc`) byte for byte, because the
//! Core Rule Set's regular expressions were written against its output. Where Coraza's
//! test vectors (`testdata/transformations/*.json`, the ones our tests run) expect something
//! else, the vectors win and the file's doc comment says so (`cssDecode`, `urlDecodeUni`'s
//! best-fit map, `hexDecode`'s error handling). Decisions that no vector covers are written
//! down in each file.
//!
//! # Performance
//!
//! Every transformation is a single pass over the input with no regex and no heap use
//! beyond the output buffer. [`Transformation::apply`] additionally guarantees that an
//! `Owned` result differs from the input: a decoder that started writing because it saw a
//! `%` or `\` and then found nothing valid to decode hands back the input borrowed.

use std::borrow::Cow;

mod base64_decode;
mod base64_decode_ext;
mod base64_encode;
mod cmd_line;
mod compress_whitespace;
mod css_decode;
mod escape_seq_decode;
pub(crate) mod features;
mod hex;
mod hex_decode;
mod hex_encode;
mod html_entity_decode;
mod js_decode;
mod length;
mod lowercase;
mod md5;
mod nfkc;
mod normalize_path;
mod normalize_path_win;
mod parity_even_7bit;
mod parity_odd_7bit;
mod parity_zero_7bit;
mod remove_comments;
mod remove_comments_char;
mod remove_nulls;
mod remove_whitespace;
mod replace_comments;
mod replace_nulls;
mod sha1;
mod sql_hex_decode;
mod trim;
mod trim_left;
mod trim_right;
pub(crate) mod unicode_map;
mod uppercase;
mod url_decode;
mod url_decode_uni;
mod url_encode;
mod utf8_to_unicode;

#[cfg(test)]
mod tests;

/// A transformation function (`t:name` in SecLang).
///
/// The variants are those of ModSecurity v3's reference manual; `t:none` is not one of them
/// (the rule compiler handles it by clearing the chain).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Transformation {
    /// `t:base64Decode`.
    Base64Decode,
    /// `t:base64DecodeExt`.
    Base64DecodeExt,
    /// `t:base64Encode`.
    Base64Encode,
    /// `t:cmdLine`.
    CmdLine,
    /// `t:compressWhitespace`.
    CompressWhitespace,
    /// `t:cssDecode`.
    CssDecode,
    /// `t:escapeSeqDecode`.
    EscapeSeqDecode,
    /// `t:hexDecode`.
    HexDecode,
    /// `t:hexEncode`.
    HexEncode,
    /// `t:htmlEntityDecode`.
    HtmlEntityDecode,
    /// `t:jsDecode`.
    JsDecode,
    /// `t:length`.
    Length,
    /// `t:lowercase`.
    Lowercase,
    /// `t:md5`.
    Md5,
    /// `t:normalizePath` (also spelt `t:normalisePath`).
    NormalizePath,
    /// `t:normalizePathWin` (also spelt `t:normalisePathWin`).
    NormalizePathWin,
    /// `t:parityEven7bit`.
    ParityEven7bit,
    /// `t:parityOdd7bit`.
    ParityOdd7bit,
    /// `t:parityZero7bit`.
    ParityZero7bit,
    /// `t:removeComments`.
    RemoveComments,
    /// `t:removeCommentsChar`.
    RemoveCommentsChar,
    /// `t:removeNulls`.
    RemoveNulls,
    /// `t:removeWhitespace`.
    RemoveWhitespace,
    /// `t:replaceComments`.
    ReplaceComments,
    /// `t:replaceNulls`.
    ReplaceNulls,
    /// `t:sha1`.
    Sha1,
    /// `t:sqlHexDecode`.
    SqlHexDecode,
    /// `t:trim`.
    Trim,
    /// `t:trimLeft`.
    TrimLeft,
    /// `t:trimRight`.
    TrimRight,
    /// `t:uppercase`.
    Uppercase,
    /// `t:urlDecode`.
    UrlDecode,
    /// `t:urlDecodeUni`.
    UrlDecodeUni,
    /// `t:urlDecodeUni` with the table of `SecUnicodeMapFile` (the compiler puts it in
    /// place of [`Transformation::UrlDecodeUni`] when the directive is given).
    UrlDecodeUniMapped(std::sync::Arc<unicode_map::UnicodeMap>),
    /// `t:urlEncode`.
    UrlEncode,
    /// `t:utf8toUnicode`.
    Utf8ToUnicode,
}

/// Every transformation, in the order of ModSecurity's reference manual.
pub(crate) const ALL: [Transformation; 35] = [
    Transformation::Base64Decode,
    Transformation::Base64DecodeExt,
    Transformation::Base64Encode,
    Transformation::CmdLine,
    Transformation::CompressWhitespace,
    Transformation::CssDecode,
    Transformation::EscapeSeqDecode,
    Transformation::HexDecode,
    Transformation::HexEncode,
    Transformation::HtmlEntityDecode,
    Transformation::JsDecode,
    Transformation::Length,
    Transformation::Lowercase,
    Transformation::Md5,
    Transformation::NormalizePath,
    Transformation::NormalizePathWin,
    Transformation::ParityEven7bit,
    Transformation::ParityOdd7bit,
    Transformation::ParityZero7bit,
    Transformation::RemoveComments,
    Transformation::RemoveCommentsChar,
    Transformation::RemoveNulls,
    Transformation::RemoveWhitespace,
    Transformation::ReplaceComments,
    Transformation::ReplaceNulls,
    Transformation::Sha1,
    Transformation::SqlHexDecode,
    Transformation::Trim,
    Transformation::TrimLeft,
    Transformation::TrimRight,
    Transformation::Uppercase,
    Transformation::UrlDecode,
    Transformation::UrlDecodeUni,
    Transformation::UrlEncode,
    Transformation::Utf8ToUnicode,
];

impl Transformation {
    /// Looks a name up, ignoring ASCII case (`none` is not a transformation: the compiler
    /// handles it). Both the British and the American spelling of the path normalisers are
    /// accepted, as in ModSecurity.
    pub(crate) fn from_name(name: &str) -> Option<Transformation> {
        if name.eq_ignore_ascii_case("normalisePath") {
            return Some(Transformation::NormalizePath);
        }
        if name.eq_ignore_ascii_case("normalisePathWin") {
            return Some(Transformation::NormalizePathWin);
        }
        ALL.into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// The canonical ModSecurity spelling, as written after `t:`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Transformation::Base64Decode => "base64Decode",
            Transformation::Base64DecodeExt => "base64DecodeExt",
            Transformation::Base64Encode => "base64Encode",
            Transformation::CmdLine => "cmdLine",
            Transformation::CompressWhitespace => "compressWhitespace",
            Transformation::CssDecode => "cssDecode",
            Transformation::EscapeSeqDecode => "escapeSeqDecode",
            Transformation::HexDecode => "hexDecode",
            Transformation::HexEncode => "hexEncode",
            Transformation::HtmlEntityDecode => "htmlEntityDecode",
            Transformation::JsDecode => "jsDecode",
            Transformation::Length => "length",
            Transformation::Lowercase => "lowercase",
            Transformation::Md5 => "md5",
            Transformation::NormalizePath => "normalizePath",
            Transformation::NormalizePathWin => "normalizePathWin",
            Transformation::ParityEven7bit => "parityEven7bit",
            Transformation::ParityOdd7bit => "parityOdd7bit",
            Transformation::ParityZero7bit => "parityZero7bit",
            Transformation::RemoveComments => "removeComments",
            Transformation::RemoveCommentsChar => "removeCommentsChar",
            Transformation::RemoveNulls => "removeNulls",
            Transformation::RemoveWhitespace => "removeWhitespace",
            Transformation::ReplaceComments => "replaceComments",
            Transformation::ReplaceNulls => "replaceNulls",
            Transformation::Sha1 => "sha1",
            Transformation::SqlHexDecode => "sqlHexDecode",
            Transformation::Trim => "trim",
            Transformation::TrimLeft => "trimLeft",
            Transformation::TrimRight => "trimRight",
            Transformation::Uppercase => "uppercase",
            Transformation::UrlDecode => "urlDecode",
            Transformation::UrlDecodeUni | Transformation::UrlDecodeUniMapped(_) => "urlDecodeUni",
            Transformation::UrlEncode => "urlEncode",
            Transformation::Utf8ToUnicode => "utf8toUnicode",
        }
    }

    /// Whether this step can change a value whose bytes have the classes `f` (see
    /// [`features`]): false only when it certainly returns the value unchanged. Steps
    /// without a rule here answer true and run.
    pub(crate) fn may_change(&self, f: features::Features) -> bool {
        f & self.triggers() != 0
    }

    /// The byte classes that can make this step change a value ([`features`]): a value
    /// holding none of them comes back unchanged. Every class (so "may change anything")
    /// for steps without a rule.
    pub(crate) fn triggers(&self) -> features::Features {
        use features::*;
        match self {
            Transformation::Lowercase => UPPER,
            Transformation::UrlDecode => PERCENT_PLUS,
            // The decoder, then NFKC folding of non-ASCII text.
            Transformation::UrlDecodeUni | Transformation::UrlDecodeUniMapped(_) => {
                PERCENT_PLUS | HIGH
            }
            Transformation::HtmlEntityDecode => AMP,
            Transformation::JsDecode | Transformation::CssDecode => BACKSLASH,
            Transformation::RemoveNulls | Transformation::ReplaceNulls => NUL,
            Transformation::Utf8ToUnicode => HIGH,
            Transformation::RemoveWhitespace | Transformation::CompressWhitespace => {
                SPACE | OTHER_SPACE | HIGH
            }
            Transformation::Trim | Transformation::TrimLeft | Transformation::TrimRight => {
                SPACE | OTHER_SPACE
            }
            Transformation::NormalizePath => SLASH | DOT,
            Transformation::NormalizePathWin => SLASH | DOT | BACKSLASH,
            Transformation::CmdLine => SHELL | BACKSLASH | SPACE | OTHER_SPACE | UPPER,
            Transformation::RemoveCommentsChar => COMMENT | SLASH,
            _ => Features::MAX,
        }
    }

    /// A superset of the byte classes ([`features`]) of this step's output for an input
    /// whose classes are `input`: the input's own when the step cannot change it, what the
    /// step can leave or add for the steps that only remove, move or replace bytes by
    /// spaces (so `t:removeWhitespace` never adds a class, `t:cmdLine` only a space), and
    /// every class for the decoders. Monotone: a larger input set never gives a smaller
    /// one, so it may be applied to the classes of several values ORed.
    /// `tests::output_classes_hold_every_output_byte` checks it against `apply`.
    pub(crate) fn output_classes(&self, input: features::Features) -> features::Features {
        use features::*;
        if input & self.triggers() == 0 {
            return input;
        }
        match self {
            // ASCII capitals become small letters, which have no class.
            Transformation::Lowercase => input & !UPPER,
            Transformation::RemoveWhitespace
            | Transformation::Trim
            | Transformation::TrimLeft
            | Transformation::TrimRight
            | Transformation::RemoveNulls
            | Transformation::RemoveCommentsChar => input,
            Transformation::CompressWhitespace
            | Transformation::ReplaceNulls
            | Transformation::ReplaceComments => input | SPACE,
            // Segments are removed or kept; `\` becomes `/`.
            Transformation::NormalizePath | Transformation::NormalizePathWin => input | SLASH | DOT,
            // Quotes, `\` and `^` removed, separators made one space, letters lowered.
            Transformation::CmdLine => (input | SPACE) & !UPPER,
            _ => Features::MAX,
        }
    }

    /// [`Transformation::apply`] into a caller's buffer: true when the value changed, and
    /// then `out` holds it (`out` is cleared first; its contents are unspecified on false).
    /// The steps a CRS request runs most write straight into `out`; the others make a new
    /// buffer, which replaces `out`.
    pub(crate) fn apply_into(&self, input: &[u8], out: &mut Vec<u8>) -> bool {
        out.clear();
        let changed = match self {
            Transformation::Lowercase => lowercase::apply_into(input, out),
            Transformation::CmdLine => cmd_line::apply_into(input, out),
            Transformation::Base64Decode => base64_decode::apply_into(input, out),
            Transformation::Length => length::apply_into(input, out),
            Transformation::RemoveWhitespace => remove_whitespace::apply_into(input, out),
            Transformation::UrlDecodeUni => url_decode_uni::apply_into(input, out),
            // The new buffer takes `out`'s place: no copy.
            other => match other.apply(input) {
                Cow::Borrowed(_) => return false,
                Cow::Owned(v) => {
                    *out = v;
                    return true;
                }
            },
        };
        // As in `apply`: a decoder that found nothing to change reports no change.
        changed && out.as_slice() != input
    }

    /// Applies the transformation; `Cow::Borrowed` means the input was left unchanged, and
    /// an `Owned` value always differs from the input.
    pub(crate) fn apply<'a>(&self, input: &'a [u8]) -> Cow<'a, [u8]> {
        let out = match self {
            Transformation::Base64Decode => base64_decode::apply(input),
            Transformation::Base64DecodeExt => base64_decode_ext::apply(input),
            Transformation::Base64Encode => base64_encode::apply(input),
            Transformation::CmdLine => cmd_line::apply(input),
            Transformation::CompressWhitespace => compress_whitespace::apply(input),
            Transformation::CssDecode => css_decode::apply(input),
            Transformation::EscapeSeqDecode => escape_seq_decode::apply(input),
            Transformation::HexDecode => hex_decode::apply(input),
            Transformation::HexEncode => hex_encode::apply(input),
            Transformation::HtmlEntityDecode => html_entity_decode::apply(input),
            Transformation::JsDecode => js_decode::apply(input),
            Transformation::Length => length::apply(input),
            Transformation::Lowercase => lowercase::apply(input),
            Transformation::Md5 => md5::apply(input),
            Transformation::NormalizePath => normalize_path::apply(input),
            Transformation::NormalizePathWin => normalize_path_win::apply(input),
            Transformation::ParityEven7bit => parity_even_7bit::apply(input),
            Transformation::ParityOdd7bit => parity_odd_7bit::apply(input),
            Transformation::ParityZero7bit => parity_zero_7bit::apply(input),
            Transformation::RemoveComments => remove_comments::apply(input),
            Transformation::RemoveCommentsChar => remove_comments_char::apply(input),
            Transformation::RemoveNulls => remove_nulls::apply(input),
            Transformation::RemoveWhitespace => remove_whitespace::apply(input),
            Transformation::ReplaceComments => replace_comments::apply(input),
            Transformation::ReplaceNulls => replace_nulls::apply(input),
            Transformation::Sha1 => sha1::apply(input),
            Transformation::SqlHexDecode => sql_hex_decode::apply(input),
            Transformation::Trim => trim::apply(input),
            Transformation::TrimLeft => trim_left::apply(input),
            Transformation::TrimRight => trim_right::apply(input),
            Transformation::Uppercase => uppercase::apply(input),
            Transformation::UrlDecode => url_decode::apply(input),
            Transformation::UrlDecodeUni => url_decode_uni::apply(input),
            Transformation::UrlDecodeUniMapped(map) => url_decode_uni::apply_mapped(input, map),
            Transformation::UrlEncode => url_encode::apply(input),
            Transformation::Utf8ToUnicode => utf8_to_unicode::apply(input),
        };
        match out {
            // A decoder may start writing at a trigger byte and then find nothing valid to
            // decode; report that as unchanged. Costs one comparison, only on that path.
            Cow::Owned(v) if v.as_slice() == input => Cow::Borrowed(input),
            out => out,
        }
    }
}

/// `Cow::Owned` with what `into` writes when it reports a change, else `input` borrowed:
/// `apply` for a step written as `apply_into`.
fn owned_if(input: &[u8], into: fn(&[u8], &mut Vec<u8>) -> bool) -> Cow<'_, [u8]> {
    let mut out = Vec::new();
    if into(input, &mut out) {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(input)
    }
}

/// C's `isspace` in the "C" locale: space, `\t`, `\n`, `\v`, `\f`, `\r`.
const fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}
