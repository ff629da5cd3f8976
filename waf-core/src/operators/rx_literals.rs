//! Literals that every match of an `@rx` pattern starts with, for the engine's prefilter.
//!
//! The engine runs one Aho-Corasick scan per (value, transformation chain) over the
//! literals of every `@rx` rule that shares that chain, and runs a rule's regex only when
//! one of its literals occurs. That is sound only if the literal set never misses a match
//! (aho-corasick's "a prefilter never reports a false negative"), so this module returns
//! `None` whenever it cannot promise that:
//!
//! - regex-syntax's prefix extractor gives, for a *finite* sequence, literals such that
//!   every match begins with one of them; an infinite sequence or an empty literal means
//!   no promise;
//! - the scan is ASCII case-insensitive, so `(?i)` letters (`[Aa]` classes after
//!   translation) are folded back to one lower-case literal before extraction, which keeps
//!   the sequence small; folding only widens what the scan accepts, never narrows it.

use regex_syntax::hir::literal::{ExtractKind, Extractor, Literal, Seq};
use regex_syntax::hir::{Capture, Class, Hir, HirKind, Repetition};

/// Most literals kept for one pattern (past this the pattern gets no prefilter).
const MAX_LITERALS: usize = 3000;

/// The lower-cased literals every match starts with, or `None` when there is no such
/// finite set.
#[cfg(test)]
pub(crate) fn required_literals(pattern: &str, unicode: bool) -> Option<Vec<Vec<u8>>> {
    literals_of(&parse(pattern, unicode)?)
}

/// `pattern` read the way `@rx` compiles it (dot-all, multi-line, bytes), or `None` when it
/// does not parse so.
#[cfg(test)]
pub(crate) fn parse(pattern: &str, unicode: bool) -> Option<Hir> {
    parse_result(pattern, unicode).ok()
}

/// `pattern` read the way `@rx` compiles it (dot-all, multi-line, bytes), or the parser's
/// error message.
pub(crate) fn parse_result(pattern: &str, unicode: bool) -> Result<Hir, String> {
    regex_automata::util::syntax::parse_with(pattern, &super::rx::syntax_config(unicode))
        .map_err(|e| e.to_string())
}

/// [`required_literals`] of a parsed pattern (one parse serves this and `rx::Rx::new`'s
/// other questions: a parse of every CRS pattern is about 13 % of loading CRS).
pub(crate) fn literals_of(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let folded = fold_case(hir);
    let mut extractor = Extractor::new();
    extractor
        .kind(ExtractKind::Prefix)
        .limit_class(4)
        .limit_repeat(16)
        .limit_literal_len(MAX_LITERAL_LEN)
        .limit_total(MAX_LITERALS);
    let mut best = seq_literals(&extractor.extract(&folded));
    let consider = |best: &mut Option<Vec<Vec<u8>>>, candidate: Option<Vec<Vec<u8>>>| {
        if let Some(c) = candidate {
            if best.as_ref().is_none_or(|b| score(&c) > score(b)) {
                *best = Some(c);
            }
        }
    };
    // Patterns that start with a class or an optional part have no finite prefix set, but
    // most still require some literal somewhere (`[\s(]+select\b`): use that instead.
    consider(&mut best, required_factors(&folded));
    // Every match of a concatenation holds a match of each of its tails, so a tail's
    // prefixes are required too. CRS 930100 (`[/\\]` or an encoding, then `\.`-like parts
    // two or three times, then a slash again) has a prefix set cut down to `/` by the
    // extractor's limits and factors `.`, `%`, `?`, which nearly every header holds; its
    // tail from the repetition on requires two of those parts, `..` or `.%2e`. A tail's
    // prefixes are its first part's crossed with the next tail's, built from the end
    // (what the extractor does for the whole concatenation), and tried only while the set
    // is weak (a shortest literal under [`STRONG_LEN`] bytes).
    let mut top = &folded;
    while let HirKind::Capture(cap) = top.kind() {
        top = &cap.sub;
    }
    let weak = best.as_ref().is_none_or(|b| score(b).0 < STRONG_LEN);
    if let (HirKind::Concat(subs), true) = (top.kind(), weak) {
        let mut tail = Seq::singleton(Literal::exact(Vec::new()));
        for sub in subs[1..].iter().rev() {
            let mut next = std::mem::replace(&mut tail, extractor.extract(sub));
            if tail.max_cross_len(&next).is_some_and(|n| n > MAX_LITERALS) {
                // As the extractor does: too many to cross, so the tail's literals are
                // prefixes only.
                next.make_infinite();
            }
            tail.cross_forward(&mut next);
            tail.keep_first_bytes(MAX_LITERAL_LEN);
            // A cross product can hold thousands of literals (930100's: 2,111), each a few
            // hundred bytes of automaton; their first bytes do nearly as well.
            let mut candidate = tail.clone();
            if candidate.len().is_some_and(|n| n > TAIL_MAX_LITERALS) {
                candidate.keep_first_bytes(STRONG_LEN);
                candidate.dedup();
            }
            if candidate.len().is_some_and(|n| n <= TAIL_MAX_LITERALS) {
                consider(&mut best, seq_literals(&candidate));
            }
        }
    }
    let best = best?;
    let mut out: Vec<Vec<u8>> = best.iter().map(|l| l.to_ascii_lowercase()).collect();
    out.sort();
    out.dedup();
    (!out.is_empty() && out.len() <= MAX_LITERALS && out.iter().all(|l| !l.is_empty()))
        .then_some(out)
}

/// The literals every match starts with, from an extracted sequence, if it is a finite set
/// of non-empty ones.
fn seq_literals(seq: &Seq) -> Option<Vec<Vec<u8>>> {
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    Some(literals.iter().map(|l| l.as_bytes().to_vec()).collect())
}

/// Longest literal kept (longer ones are cut to their first bytes).
const MAX_LITERAL_LEN: usize = 64;

/// Most literals a tail's set may bring (see [`literals_of`]).
const TAIL_MAX_LITERALS: usize = 256;

/// A literal set whose shortest literal is this long is selective enough (see
/// [`literals_of`]).
const STRONG_LEN: usize = 3;

/// How selective a literal set is: its shortest literal, then fewer literals.
fn score(set: &[Vec<u8>]) -> (usize, std::cmp::Reverse<usize>) {
    (
        set.iter().map(Vec::len).min().unwrap_or(0),
        std::cmp::Reverse(set.len()),
    )
}

/// A set of literals at least one of which occurs in every match (anywhere, not only at
/// the start), or `None`. Sound by construction: a concatenation needs every part, so any
/// part's set will do; an alternation needs one branch, so it needs the union; a
/// repetition needs its body only when it must occur at least once.
fn required_factors(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    match hir.kind() {
        HirKind::Literal(lit) => (!lit.0.is_empty()).then(|| vec![lit.0.to_vec()]),
        HirKind::Capture(cap) => required_factors(&cap.sub),
        HirKind::Repetition(rep) if rep.min >= 1 => required_factors(&rep.sub),
        HirKind::Concat(subs) => subs
            .iter()
            .filter_map(required_factors)
            .max_by_key(|set| score(set)),
        HirKind::Alternation(subs) => {
            let mut all = Vec::new();
            for sub in subs {
                all.extend(required_factors(sub)?);
                if all.len() > MAX_LITERALS {
                    return None;
                }
            }
            Some(all)
        }
        _ => None,
    }
}

/// Replaces every class that is exactly `{x, X}` for one ASCII letter by the literal `x`.
fn fold_case(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Class(class) => match ascii_case_pair(class) {
            Some(b) => Hir::literal([b]),
            None => hir.clone(),
        },
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(fold_case).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(fold_case).collect()),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(fold_case(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Capture(cap) => Hir::capture(Capture {
            sub: Box::new(fold_case(&cap.sub)),
            ..cap.clone()
        }),
        _ => hir.clone(),
    }
}

fn ascii_case_pair(class: &Class) -> Option<u8> {
    let ranges: Vec<(u32, u32)> = match class {
        Class::Bytes(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        Class::Unicode(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
    };
    match ranges.as_slice() {
        [(a, a2), (b, b2)] if a == a2 && b == b2 => {
            let (a, b) = (u8::try_from(*a).ok()?, u8::try_from(*b).ok()?);
            (a.is_ascii_uppercase() && b == a.to_ascii_lowercase()).then_some(b)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(p: &str) -> Option<Vec<String>> {
        required_literals(p, false).map(|v| {
            v.into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn alternations_and_case() {
        assert_eq!(lits("(?i)union\\s+select"), Some(vec!["select".into()]));
        assert_eq!(
            lits("(?i)Union[ab]"),
            Some(vec!["uniona".into(), "unionb".into()])
        );
        let l = lits("(?i:<script|javascript:)").unwrap();
        assert!(l.contains(&"<script".to_string()) && l.contains(&"javascript:".to_string()));
    }

    #[test]
    fn inner_literals_when_there_is_no_prefix() {
        assert_eq!(lits("(?i)[\\s(]+select\\b"), Some(vec!["select".into()]));
        assert_eq!(
            lits("(?:^|[^a-z])(?:cat|ls)\\s"),
            Some(vec!["cat".into(), "ls".into()])
        );
        assert_eq!(lits("[a-z]*x?"), None);
    }

    #[test]
    fn no_promise_without_a_finite_set() {
        assert_eq!(lits(".*"), None);
        assert_eq!(lits("a*"), None);
        assert_eq!(lits("^$"), None);
        assert_eq!(lits("[^a]"), None);
    }

    #[test]
    fn every_match_contains_a_literal() {
        let cases = [
            (
                "(?i)(?:\\bselect\\b|\\bunion\\b)",
                &["SELECT x", "x Union y"][..],
            ),
            ("(?i)on(?:error|load)\\s*=", &["ONLOAD =", "onerror="]),
            ("\\x22?\\x24Version", &["$Version", "\"$Version"]),
            ("(?i)[\\s(]+(?:select|union)\\b", &[" SELECT", "((union"]),
            ("(?:^|;)\\s*(?:cat|ls)\\b", &["cat", ";  ls"]),
        ];
        for (p, inputs) in cases {
            let l = required_literals(p, false).unwrap();
            let re = regex::bytes::RegexBuilder::new(p)
                .unicode(false)
                .build()
                .unwrap();
            for input in inputs {
                assert!(re.is_match(input.as_bytes()));
                let lower = input.to_ascii_lowercase();
                assert!(
                    l.iter()
                        .any(|lit| lower.as_bytes().windows(lit.len()).any(|w| w == &lit[..])),
                    "{p} on {input}: {l:?}"
                );
            }
        }
    }

    /// A pattern whose prefixes and factors are single bytes gets a tail's prefixes
    /// instead (CRS 930100 and 930110 in small), and they are still in every match.
    #[test]
    fn tails_of_a_concatenation() {
        assert_eq!(
            lits(r"(?:^|[/;\x5c])\.{2,3}[/;\x5c]"),
            Some(vec!["..".into()])
        );
        let p = r"(?i)(?:[/\x5c]|%2f|0x2f)(?:\.|%2e|\?\.?){2,3}(?:[/\x5c]|%2f)";
        let l = lits(p).unwrap();
        assert!(l.iter().all(|x| x.len() >= 2), "{l:?}");
        let re = regex::bytes::RegexBuilder::new(p)
            .unicode(false)
            .build()
            .unwrap();
        for input in ["/../", "a\\.%2E/b", "%2F?.?./", "0x2f%2e%2e%2e\\"] {
            assert!(re.is_match(input.as_bytes()), "{input}");
            let lower = input.to_ascii_lowercase();
            assert!(
                l.iter().any(|lit| lower.contains(lit.as_str())),
                "{input}: {l:?}"
            );
        }
    }
}
