//! The byte classes every match of an `@rx` pattern must contain: a gate in front of the
//! regex that costs one `AND` instead of a regex call.
//!
//! The literal prefilter ([`super::rx_literals`]) helps only patterns with selective
//! literals. Many CRS patterns have none: the command-injection family (932125, 932370,
//! 932380: `(?:[\n\r;`\{]|\|\|?|&&?)...`) starts with a separator, 932171 with `\(`, and
//! `multiMatch` rules get no prefilter at all. Each of them ran its regex on every value:
//! on a 10 KB JSON body, 1,200 values times a few hundred instructions per call.
//!
//! But every match of such a pattern contains one of a few punctuation bytes, and the
//! engine already knows which [byte classes](crate::transformations::features) a value
//! holds (one table lookup per byte, computed once per value). So at load each pattern gets
//! a class mask ([`required_classes`]) such that every match holds a byte of one of those
//! classes; at run time a value whose classes miss the mask cannot match, and the regex is
//! not run.
//!
//! # Soundness
//!
//! The gate answers exactly what the regex would on the values it rules out, so results
//! never change. It is built like [`super::rx_literals::literals_of`]'s required factors:
//! a literal needs any one of its bytes; a class needs one of its bytes; a concatenation
//! needs what any one of its parts needs; an alternation needs the union of what each
//! branch needs (and nothing when one branch needs nothing); a repetition needs its body's
//! bytes only when it must occur; look-arounds and the empty pattern need nothing. A set
//! is usable only when every byte in it has a class (lower-case letters have none, so a
//! pattern whose requirement includes a letter gets no gate). The analysis works on class
//! masks, not byte sets: one pass over the pattern's tree at load. The tree is the one the
//! regex is compiled from (dot-all, multi-line, Unicode off, bytes), and only patterns
//! compiled with Unicode off get a gate. `tests::gate_never_rules_out_a_match` checks the
//! gate against the regex on generated values.

use regex_syntax::hir::{Class, Hir, HirKind};

use crate::transformations::features::{self, Features};

/// The byte classes at least one of which every match of `hir` contains, or 0 when no
/// such set of classes is known (then the gate lets every value through).
pub(crate) fn required_classes(hir: &Hir) -> Features {
    required(hir).unwrap_or(0)
}

/// The classes of the bytes `start..=end`, or `None` when one of them has no class
/// (`a`-`z`).
fn range_classes(start: u32, end: u32) -> Option<Features> {
    if start <= u32::from(b'z') && end >= u32::from(b'a') {
        return None;
    }
    // Past ASCII every byte is `HIGH` (in a Unicode class, a character past ASCII is one
    // or more bytes 0x80-0xFF).
    let high = if end >= 0x80 { features::HIGH } else { 0 };
    let ascii = (start..=end.min(0x7f)).fold(0, |m, b| m | features::class_of(b as u8));
    Some(ascii | high)
}

/// A set of classes at least one of which every match of `hir` contains (a byte of each
/// class in it would do), or `None`.
fn required(hir: &Hir) -> Option<Features> {
    match hir.kind() {
        // Any byte of the literal will do; take the rarest that has a class.
        HirKind::Literal(lit) => lit
            .0
            .iter()
            .map(|&b| features::class_of(b))
            .filter(|&c| c != 0)
            .min_by_key(|&c| features::commonness(c)),
        HirKind::Class(Class::Bytes(c)) => c.ranges().iter().try_fold(0, |m, r| {
            Some(m | range_classes(u32::from(r.start()), u32::from(r.end()))?)
        }),
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().try_fold(0, |m, r| {
            Some(m | range_classes(u32::from(r.start()), u32::from(r.end()))?)
        }),
        HirKind::Capture(cap) => required(&cap.sub),
        HirKind::Repetition(rep) if rep.min >= 1 => required(&rep.sub),
        HirKind::Concat(subs) => subs
            .iter()
            .filter_map(required)
            .min_by_key(|&c| features::commonness(c)),
        HirKind::Alternation(subs) => subs
            .iter()
            .try_fold(0, |all, sub| Some(all | required(sub)?)),
        HirKind::Empty | HirKind::Look(_) | HirKind::Repetition(_) => None,
    }
    .filter(|&c| c != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::rx_literals::parse;
    use crate::transformations::features::*;

    fn classes(pattern: &str) -> Features {
        required_classes(&parse(pattern, false).expect("test patterns parse"))
    }

    #[test]
    fn separators_and_punctuation_give_a_gate() {
        assert_eq!(classes(r"[\n\r]"), OTHER_SPACE);
        // `{` is rarer than `(` in ordinary values.
        assert_eq!(classes(r"^\(\s*\)\s+\{"), BRACE);
        assert_eq!(classes(r"^\(\s*x"), LPAREN);
        assert_eq!(classes(r"(?i)\x5cu[0-9a-f]{4}"), BACKSLASH);
        assert_eq!(
            classes(r"(?:[\n\r;`\{]|\|\|?|&&?)[\s\x0b]*x"),
            OTHER_SPACE | SHELL | BACKTICK | BRACE | PIPE | AMP
        );
        // The rarest part of a concatenation.
        assert_eq!(classes(r"a b<c"), LT);
    }

    #[test]
    fn no_gate_without_a_required_classified_byte() {
        // Letters have no class; optional parts and look-arounds require nothing.
        assert_eq!(classes("(?i)select"), 0);
        assert_eq!(classes(r"x(?:<)?"), 0);
        assert_eq!(classes(r"^$"), 0);
        assert_eq!(classes(r"<|select"), 0);
        assert_eq!(classes(r"(?:<)*"), 0);
        assert_eq!(classes(r"[^a]"), 0);
    }

    /// Every value the gate rules out is one the regex does not match, on values made of
    /// the bytes that matter to CRS's patterns.
    #[test]
    fn gate_never_rules_out_a_match() {
        let patterns = [
            r"[\n\r]",
            r"^\(\s*\)\s+\{",
            r"(?i)(?:[\n\r;`\{]|\|\|?|&&?)[\s\x0b]*[\s\x0b\x22'\(,@]*(?:[\x22'\.-9A-Z_a-z]+/|(?:[\x22'\x5c\^]*[0-9A-Z_a-z][\x22'\x5c\^]*)+)",
            r"(?i)<script[^>]*>[\s\S]*?",
            r"(?:^|[/;\x5c])\.{2,3}[/;\x5c]",
            r"(?i)%uff[0-9a-f]{2}",
            r"\.[^.~]+~(?:/.*|)$",
            r"unix:[^|]*\|",
            r"a{2,}[$!]b",
        ];
        let alphabet = b"ab(){}<>|&;`\n\r %./\\~$!uU0\"'@:=?[]_\x80\x0b";
        let mut values = generated_values(alphabet, 0x9e37_79b9_7f4a_7c15);
        for p in patterns {
            let gate = classes(p);
            assert_ne!(gate, 0, "{p} has a gate");
            let regex = regex::bytes::RegexBuilder::new(p)
                .unicode(false)
                .dot_matches_new_line(true)
                .multi_line(true)
                .build()
                .expect("test patterns compile");
            let mut ruled_out = 0;
            for value in values.by_ref().take(20_000) {
                if of(&value) & gate == 0 {
                    ruled_out += 1;
                    assert!(!regex.is_match(&value), "{p} matches {value:?}");
                }
            }
            assert!(ruled_out > 100, "{p}: the test rules out values");
        }
    }
}
