//! `@rx`: regular expression match.
//!
//! **What.** Matches when the regular expression finds a match anywhere in the value. With
//! `capture`, `TX.0` gets the whole match and `TX.1`..`TX.9` the groups (a group that did not
//! take part is empty).
//!
//! **Argument.** A regular expression, compiled once when the rule is loaded.
//!
//! ```text
//! SecRule ARGS "@rx (?i)union\s+select" "id:1,phase:2,deny,capture"
//! ```
//!
//! # Dialect and flags
//!
//! We compile with the `regex` crate's engines (`regex-automata`, see `rx_linear.rs`) on
//! bytes (request data need not be UTF-8), which run in linear time (no ReDoS from a
//! pattern or an input). CRS v4 is written for RE2, so every
//! CRS pattern compiles unmodified. The flags copy both reference engines:
//!
//! - **dot-all + multi-line** (`(?sm)`): ModSecurity v3 compiles with `PCRE_DOTALL |
//!   PCRE_MULTILINE` and Coraza prepends `(?sm)`. So `.` matches `\n`, and `^`/`$` match at
//!   line boundaries, which matters for multi-line values (headers folded by
//!   transformations, bodies): `^` anchors in CRS fire on any line of a value in both engines.
//! - **Unicode off**: `\xNN` means the byte NN (PCRE without `UTF`), `.` and `[^..]` match any
//!   byte, and `\w`, `\d`, `\s`, `\b` and `(?i)` are ASCII-only, as in PCRE without `UCP` and
//!   RE2. (`\s` also matches `\x0b`, as PCRE2 does; CRS writes `[\s\x0b]` anyway.) It also
//!   halves the automata: all 318 CRS patterns take 10.2 MB of heap after compiling with
//!   Unicode off against 20.1 MB with it on (`/work/shared/notes/crs-inventory.md` §8). A pattern that needs Unicode (a class with a non-ASCII
//!   literal, `\x{100}`, `\p{..}`) is retried with Unicode on, where those mean UTF-8.
//! - `\x{NN}` with NN <= FF is rewritten to `\xNN` first: PCRE reads both as the byte NN, but
//!   `regex` with Unicode off reads the braced form as a code point. CRS 941310 relies on it
//!   (the bytes 0xBC/0xBE of US-ASCII `¼script¾`); Coraza fixed the same bug in #1584.
//! - A compiled size limit of [`crate::limits::DEFAULT_REGEX_SIZE_LIMIT`] turns a huge pattern into a load
//!   error instead of a memory blow-up.
//!
//! # Performance
//!
//! Without `capture` an evaluation is one `is_match`, which allocates nothing. With
//! `capture` (most CRS `@rx` rules) a pattern without groups is one `find`; with groups,
//! one `captures` search into slots the transaction keeps per regex, so a capturing match
//! allocates nothing once the same regex has captured before.
//!
//! The engines run forward only, with no literal prefilter of their own (`rx_linear.rs`
//! says how a match's start is found without reverse automata). The engine mostly runs a
//! pattern on values where its prefilter (`compile::prefilter`) has already found one of
//! the pattern's literals, and a pattern without a finite literal set gives a regex's own
//! prefilter little to skip with; extracting those literals again was a third of the
//! instructions of loading CRS (2.73 G -> 1.81 G with the single parse of [`Rx::new`]).
//! Searches stay linear in the value's length.
use regex_automata::util::syntax;
use regex_syntax::hir::Hir;

use super::rx_backtrack::{Backtracking, Search};
use super::rx_linear::{LinearRegex, Source};
use super::{Captures, MAX_CAPTURES};
use crate::macros::MacroExpander;
use crate::transformations::features::Features;

/// Which engine runs a pattern.
#[derive(Debug)]
enum Engine {
    /// The linear-time engine, built from the tree of [`super::rx_literals::parse_result`]
    /// (see [`Rx::new`] and `rx_linear.rs`).
    Linear(LinearRegex),
    /// The backtracking engine, for a pattern the linear one cannot compile (see
    /// `rx_backtrack.rs`).
    Backtracking(Box<Backtracking>),
}

/// A compiled `@rx`.
#[derive(Debug)]
pub(crate) struct Rx {
    /// The engine that runs the pattern.
    engine: Engine,
    /// Literals every match starts with (lower-cased), for the engine's prefilter.
    literals: Option<Vec<Vec<u8>>>,
    /// The pattern as compiled, for a multi-pattern scanner that reads it the same way:
    /// set when it compiled with Unicode off and every match is at least one byte long.
    scan_pattern: Option<String>,
    /// Byte classes every match holds one of (see [`super::rx_classes`]); 0: no gate.
    required_classes: Features,
    /// Every value matches, whole ([`matches_whole_value`]: `^.*$`, which CRS uses to
    /// capture a value): no engine runs.
    whole: bool,
}

impl Rx {
    /// Compiles `pattern` with the linear-time engine only.
    ///
    /// One parse (Unicode off) gives the tree the regex is built from and the literal
    /// set, class gate and empty-match test read: `regex::bytes::Regex` would parse the
    /// pattern again, which was 5 % of loading CRS. The regex runs on `regex`'s own
    /// engines, forward only (`rx_linear.rs`).
    pub(crate) fn new(pattern: &str) -> Result<Rx, String> {
        let rewritten = rewrite_braced_hex(pattern);
        let (hir, ascii) = parse(&rewritten)?;
        let regex = linear(&hir, &rewritten, ascii)?;
        // A pattern that needed Unicode has no tree for the analyses: they read bytes.
        let hir = ascii.then_some(hir);
        let literals = hir.as_ref().and_then(super::rx_literals::literals_of);
        let required_classes = hir.as_ref().map_or(0, super::rx_classes::required_classes);
        let scan_pattern = hir
            .as_ref()
            .is_some_and(never_empty)
            .then(|| rewritten.into_owned());
        Ok(Rx {
            engine: Engine::Linear(regex),
            literals,
            scan_pattern,
            required_classes,
            whole: hir.as_ref().is_some_and(matches_whole_value),
        })
    }

    /// The pattern for a multi-pattern scanner (see the field), if it qualifies.
    pub(crate) fn scan_pattern(&self) -> Option<&str> {
        self.scan_pattern.as_deref()
    }

    /// Compiles `pattern`, falling back to the backtracking engine (bounded by
    /// `match_limit` steps, 0: the default) when the linear-time engine cannot compile it
    /// for want of a feature (look-around, backreferences, atomic groups, possessive
    /// quantifiers). A pattern that is too big, or wrong for both, is an error.
    pub(crate) fn with_fallback(pattern: &str, match_limit: usize) -> Result<Rx, String> {
        let linear_error = match Rx::new(pattern) {
            Ok(rx) => return Ok(rx),
            Err(e) => e,
        };
        if linear_error.contains("exceeds size limit") {
            return Err(linear_error);
        }
        let rewritten = rewrite_braced_hex(pattern);
        let backtracking = Backtracking::compile(&rewritten, false, match_limit).map_err(|e| {
            // The linear engine's message is the better one for plain syntax errors; for a
            // feature it lacks ("look-around ... is not supported") the backtracking
            // engine's says what is really wrong.
            if linear_error.contains("not supported") {
                e
            } else {
                linear_error
            }
        })?;
        Ok(Rx {
            engine: Engine::Backtracking(Box::new(backtracking)),
            // The literal analysis reads `regex-syntax`'s tree, which this pattern has not.
            literals: None,
            // Nor may a scanner read it as a linear-engine pattern.
            scan_pattern: None,
            required_classes: 0,
            whole: false,
        })
    }

    /// Whether the pattern runs on the backtracking engine.
    pub(crate) fn is_backtracking(&self) -> bool {
        matches!(self.engine, Engine::Backtracking(_))
    }

    /// Byte classes ([`crate::transformations::features`]) every match holds one of, or
    /// 0 when unknown: a value with none of them does not match.
    pub(crate) fn required_classes(&self) -> Features {
        self.required_classes
    }

    /// Lower-cased literals such that every match starts with one of them, if known.
    pub(crate) fn required_literals(&self) -> Option<&[Vec<u8>]> {
        self.literals.as_deref()
    }

    /// Matches `input`; fills `captures` on a match when asked. A backtracking search that
    /// hits its limit does not match and is reported to `expander`.
    pub(crate) fn evaluate(
        &self,
        input: &[u8],
        captures: Option<&mut Captures>,
        expander: &dyn MacroExpander,
    ) -> bool {
        if self.whole {
            if let Some(captures) = captures {
                captures.fill([input]);
            }
            return true;
        }
        let regex: &LinearRegex = match &self.engine {
            Engine::Linear(regex) => regex,
            Engine::Backtracking(bt) => {
                return evaluate_backtracking(bt, input, captures, expander)
            }
        };
        let Some(captures) = captures else {
            return regex.is_match(input);
        };
        if regex.captures_len() == 1 {
            let Some(found) = regex.find(input) else {
                return false;
            };
            captures.fill([&input[found]]);
            return true;
        }
        let key = regex.id();
        // Slots kept under this address are this regex's, unless a regex of an earlier
        // program lived there: then their groups may differ, and fresh ones are made.
        let info = regex.group_info();
        let mut slots = captures
            .take_locations(key)
            .filter(|c| c.group_info().all_group_len() == info.all_group_len())
            .unwrap_or_else(|| regex.create_captures());
        regex.captures(input, &mut slots);
        if !slots.is_match() {
            captures.keep_locations(key, slots);
            return false;
        }
        let groups = slots.group_len().min(MAX_CAPTURES);
        captures.fill((0..groups).map(|i| match slots.get_group(i) {
            Some(span) => &input[span.range()],
            None => &[][..],
        }));
        captures.keep_locations(key, slots);
        true
    }
}

fn evaluate_backtracking(
    bt: &Backtracking,
    input: &[u8],
    captures: Option<&mut Captures>,
    expander: &dyn MacroExpander,
) -> bool {
    let Some(captures) = captures else {
        return match bt.is_match(input) {
            Search::Done(m) => m,
            Search::LimitExceeded => {
                expander.note_match_limit_exceeded();
                false
            }
        };
    };
    match bt.captures(input, MAX_CAPTURES) {
        Search::Done(None) => false,
        Search::Done(Some(groups)) => {
            captures.fill(
                groups
                    .into_iter()
                    .map(|g| g.and_then(|r| input.get(r)).unwrap_or(&[])),
            );
            true
        }
        Search::LimitExceeded => {
            expander.note_match_limit_exceeded();
            false
        }
    }
}

/// The syntax of the module docs: bytes, dot-all, multi-line, Unicode as asked.
pub(super) fn syntax_config(unicode: bool) -> syntax::Config {
    syntax::Config::new()
        .unicode(unicode)
        .utf8(false)
        .dot_matches_new_line(true)
        .multi_line(true)
}

/// Compiles a SecLang regular expression with the flags described in the module docs, for
/// `@verifyCC`, `@verifyCPF`, `@verifySSN` and `@verifySVNR`.
pub(crate) fn compile_pattern(pattern: &str) -> Result<LinearRegex, String> {
    let rewritten = rewrite_braced_hex(pattern);
    let (hir, ascii) = parse(&rewritten)?;
    linear(&hir, &rewritten, ascii)
}

/// Compiles the tree `hir` of `rewritten` (parsed with Unicode off when `ascii`).
fn linear(hir: &Hir, rewritten: &str, ascii: bool) -> Result<LinearRegex, String> {
    let source = Source {
        pattern: rewritten.into(),
        unicode: !ascii,
    };
    LinearRegex::new(hir, source).map_err(|e| format!("invalid regular expression: {e}"))
}

/// Parses a pattern (already rewritten) with Unicode off, or, when it needs Unicode, with
/// it on; the tree, and whether it was read with Unicode off.
fn parse(rewritten: &str) -> Result<(Hir, bool), String> {
    match super::rx_literals::parse_result(rewritten, false) {
        Ok(hir) => Ok((hir, true)),
        Err(ascii_error) => super::rx_literals::parse_result(rewritten, true)
            .map(|hir| (hir, false))
            .map_err(|_| format!("invalid regular expression: {ascii_error}")),
    }
}

/// Whether every match of a pattern (already rewritten, read with Unicode off by
/// [`super::rx_literals::parse_result`]) is at least one byte long. `false` when unsure.
/// Whether the leftmost-first match of `hir` (parsed as [`syntax_config`] says: `.`
/// matches every byte, `^` and `$` at line ends too) is every value, whole: `.*` (greedy,
/// any byte), perhaps after `^` and before `$`. It starts at 0 (`^` holds there), takes
/// every byte, and `$` holds at the end.
fn matches_whole_value(hir: &Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind, Look};
    let any = |h: &Hir| match h.kind() {
        HirKind::Repetition(r) => {
            r.min == 0
                && r.max.is_none()
                && r.greedy
                && matches!(r.sub.kind(), HirKind::Class(Class::Bytes(c))
                    if c.ranges().len() == 1 && c.ranges()[0].start() == 0 && c.ranges()[0].end() == 255)
        }
        _ => false,
    };
    let parts: &[Hir] = match hir.kind() {
        HirKind::Concat(parts) => parts,
        _ => std::slice::from_ref(hir),
    };
    let parts = match parts {
        [first, rest @ ..]
            if matches!(first.kind(), HirKind::Look(Look::Start | Look::StartLF)) =>
        {
            rest
        }
        _ => parts,
    };
    let parts = match parts {
        [rest @ .., last] if matches!(last.kind(), HirKind::Look(Look::End | Look::EndLF)) => rest,
        _ => parts,
    };
    matches!(parts, [one] if any(one))
}

fn never_empty(hir: &Hir) -> bool {
    hir.properties().minimum_len().is_some_and(|n| n > 0)
}

/// Finds the first match of `regex` in `input` that `verify` accepts, trying the leftmost
/// match from every start offset in turn, as ModSecurity's `@verifyCC` loop does
/// (`pcre_exec` with a growing start offset). A rejected match moves the search one byte
/// past its start, so a number hidden inside a longer rejected one is still found. Search
/// context is kept (`^` means the start of the value, not of the search).
pub(crate) fn find_verified<'i>(
    regex: &LinearRegex,
    input: &'i [u8],
    verify: impl Fn(&[u8]) -> bool,
) -> Option<&'i [u8]> {
    let mut from = 0;
    while from <= input.len() {
        let found = regex.find_from(input, from)?;
        let start = found.start;
        let bytes = &input[found];
        if verify(bytes) {
            return Some(bytes);
        }
        from = start + 1;
    }
    None
}

/// Rewrites `\x{NN}` (one or two hex digits) to `\xNN`, leaving every other escape alone
/// (`\\x{41}` stays a backslash followed by `x{41}`). Borrows when there is nothing to do.
pub(super) fn rewrite_braced_hex(pattern: &str) -> std::borrow::Cow<'_, str> {
    if !pattern.contains("\\x{") {
        return std::borrow::Cow::Borrowed(pattern);
    }
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        // `\x{` + 1..=2 hex digits + `}`.
        if bytes.get(i + 1) == Some(&b'x') && bytes.get(i + 2) == Some(&b'{') {
            let digits_start = i + 3;
            let digits = bytes[digits_start..]
                .iter()
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            if (1..=2).contains(&digits) && bytes.get(digits_start + digits) == Some(&b'}') {
                out.push_str(&pattern[copied..i]);
                out.push_str("\\x");
                if digits == 1 {
                    out.push('0');
                }
                out.push_str(&pattern[digits_start..digits_start + digits]);
                i = digits_start + digits + 1;
                copied = i;
                continue;
            }
        }
        // Skip the escaped character, whatever it is (it may be a backslash).
        i += 2;
    }
    out.push_str(&pattern[copied.min(pattern.len())..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::test_support::NO_MACROS;

    fn rx(p: &str) -> Rx {
        Rx::new(p).unwrap()
    }

    fn groups(p: &str, input: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut c = Captures::default();
        rx(p)
            .evaluate(input, Some(&mut c), &NO_MACROS)
            .then_some(c.groups)
    }

    #[test]
    fn rejects_bad_patterns() {
        assert!(Rx::new("(").is_err());
        assert!(Rx::new("a{2,1}").is_err());
        assert!(Rx::new("(?<=a)b").is_err());
    }

    #[test]
    fn falls_back_only_for_missing_features() {
        let look = Rx::with_fallback("(?<=a)b", 0).unwrap();
        assert!(look.is_backtracking());
        assert!(look.evaluate(b"ab", None, &NO_MACROS));
        assert!(!look.evaluate(b"cb", None, &NO_MACROS));
        assert!(!Rx::with_fallback("a+b", 0).unwrap().is_backtracking());
        let err = Rx::with_fallback("(", 0).unwrap_err();
        assert!(err.contains("regex parse error"), "{err}");
        // Too big for the linear engine is not a reason to backtrack.
        let err = Rx::with_fallback(r"\w{1000}{1000}", 0).unwrap_err();
        assert!(err.contains("size limit"), "{err}");
    }

    /// `^.*$` and its kin take the shortcut, with the engine's answer; patterns that only
    /// look like them do not.
    #[test]
    fn whole_value_patterns_match_as_the_engine_does() {
        let values: [&[u8]; 6] = [b"", b"a", b"a\nb", b"\n", b"x\r\n\xff\x00y", b"Host"];
        for p in ["^.*$", ".*", "^.*", ".*$", "(?:^.*$)"] {
            assert!(rx(p).whole, "{p}");
            let Engine::Linear(engine) = &rx(p).engine else {
                panic!("{p}")
            };
            for v in values {
                let span = engine.find(v).unwrap();
                assert_eq!(groups(p, v), Some(vec![v[span].to_vec()]), "{p} {v:?}");
            }
        }
        for p in [
            "^.+$",
            "^.*?$",
            "^(.*)$",
            "^.*a$",
            "a.*",
            "^[^x]*$",
            "(?-s)^.*$",
        ] {
            assert!(!rx(p).whole, "{p}");
        }
    }

    #[test]
    fn dot_all_and_multi_line() {
        assert!(rx("a.b").evaluate(b"a\nb", None, &NO_MACROS));
        assert!(rx("^b").evaluate(b"a\nb", None, &NO_MACROS));
        assert!(rx("a$").evaluate(b"a\nb", None, &NO_MACROS));
        assert!(!rx("^b").evaluate(b"ab", None, &NO_MACROS));
    }

    #[test]
    fn bytes_not_code_points() {
        assert!(rx(r"\xbc").evaluate(b"\xbc", None, &NO_MACROS));
        assert!(rx(r"\x{bc}script\x{BE}").evaluate(b"\xbcscript\xbe", None, &NO_MACROS));
        assert!(rx(r"[\x{bc}\x{be}]").evaluate(b"\xbe", None, &NO_MACROS));
        assert!(rx(r"\x{9}").evaluate(b"\t", None, &NO_MACROS));
        assert!(!rx(r"^\x{bc}$").evaluate("\u{bc}".as_bytes(), None, &NO_MACROS));
        assert!(rx(".").evaluate(b"\xff", None, &NO_MACROS));
        assert!(rx("[^a]").evaluate(b"\xff", None, &NO_MACROS));
    }

    #[test]
    fn escaped_backslash_is_not_rewritten() {
        assert_eq!(rewrite_braced_hex(r"\\x{41}"), r"\\x{41}");
        assert_eq!(rewrite_braced_hex(r"a\x{41}b\x{100}"), r"a\x41b\x{100}");
        assert_eq!(rewrite_braced_hex(r"\x{4"), r"\x{4");
        assert!(rx(r"\\x{2}").evaluate(br"\xx", None, &NO_MACROS));
    }

    #[test]
    fn ascii_classes_and_case() {
        assert!(rx("(?i)select").evaluate(b"SeLeCt", None, &NO_MACROS));
        assert!(!rx(r"\w").evaluate("é".as_bytes(), None, &NO_MACROS));
        assert!(rx(r"\s").evaluate(b"\x0b", None, &NO_MACROS));
        assert!(rx(r"\bor\b").evaluate(b"1 or 1", None, &NO_MACROS));
    }

    #[test]
    fn unicode_fallback() {
        assert!(rx("[é]").evaluate("é".as_bytes(), None, &NO_MACROS));
        assert!(rx(r"\p{Greek}").evaluate("α".as_bytes(), None, &NO_MACROS));
        assert!(rx("é").evaluate("café".as_bytes(), None, &NO_MACROS));
    }

    #[test]
    fn captures() {
        assert_eq!(groups("def", b"abcdefghi"), Some(vec![b"def".to_vec()]));
        assert_eq!(
            groups("(a)(b?)(c)", b"ac"),
            Some(vec![b"ac".to_vec(), b"a".to_vec(), vec![], b"c".to_vec()])
        );
        assert_eq!(
            groups("(a)|(b)", b"b"),
            Some(vec![b"b".to_vec(), vec![], b"b".to_vec()])
        );
        assert_eq!(groups("x", b"abc"), None);
        // At most TX.0..TX.9.
        let many = groups("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)", b"abcdefghijk").unwrap();
        assert_eq!(many.len(), 10);
        assert_eq!(many[9], b"i");
    }

    #[test]
    fn captures_reuse_and_shrink() {
        let mut c = Captures::with_groups(vec![b"old".to_vec(); 5]);
        assert!(rx("(b)").evaluate(b"abc", Some(&mut c), &NO_MACROS));
        assert_eq!(c.groups, vec![b"b".to_vec(), b"b".to_vec()]);
        // The same regex again reuses its capture slots; another regex gets its own.
        let two = rx("(a)(b)(c)");
        assert!(two.evaluate(b"xabc", Some(&mut c), &NO_MACROS));
        assert!(two.evaluate(b"abc", Some(&mut c), &NO_MACROS));
        assert_eq!(c.groups.len(), 4);
        assert!(rx("(b)").evaluate(b"abc", Some(&mut c), &NO_MACROS));
        assert_eq!(c.groups, vec![b"b".to_vec(), b"b".to_vec()]);
    }

    /// Slots kept under a regex's address but made for another regex (one of an earlier
    /// program that lived there) are not used.
    #[test]
    fn slots_of_another_regex_are_replaced() {
        let linear = |rx: &Rx| match &rx.engine {
            Engine::Linear(regex) => regex.create_captures(),
            Engine::Backtracking(_) => unreachable!("a linear-engine pattern"),
        };
        let two = rx("(a)(b)");
        let mut c = Captures::default();
        let key = match &two.engine {
            Engine::Linear(regex) => regex.id(),
            Engine::Backtracking(_) => unreachable!("a linear-engine pattern"),
        };
        c.keep_locations(key, linear(&rx("(x)")));
        assert!(two.evaluate(b"zab", Some(&mut c), &NO_MACROS));
        assert_eq!(c.groups, vec![b"ab".to_vec(), b"a".to_vec(), b"b".to_vec()]);
    }

    /// A Unicode word boundary next to a non-ASCII byte makes the DFAs quit; the answer
    /// then comes from the NFA engines, and is the `regex` crate's.
    #[test]
    fn unicode_word_boundary_falls_back_to_the_nfa() {
        // `\p{..}` needs Unicode, so `\b` is Unicode's here.
        let pattern = r"(\p{Greek})\b";
        let theirs = regex::bytes::Regex::new(pattern).unwrap();
        for input in ["xα y".as_bytes(), "αβ".as_bytes(), "α".as_bytes(), b"abc"] {
            let expected = theirs.captures(input).map(|c| {
                c.iter()
                    .map(|g| g.map_or(Vec::new(), |m| m.as_bytes().to_vec()))
                    .collect::<Vec<_>>()
            });
            assert_eq!(groups(pattern, input), expected, "{input:?}");
            assert_eq!(
                rx(pattern).evaluate(input, None, &NO_MACROS),
                expected.is_some()
            );
        }
        assert!(groups(pattern, "xα y".as_bytes()).is_some());
    }

    /// A capturing match far into a long value: its start comes from the reverse DFA, and
    /// the groups are the `regex` crate's.
    #[test]
    fn long_value_match_near_its_end() {
        let pattern = r"(?i)\b(union)[\s/*]+(all\s+)?(select|insert|update|delete)\b\s*(\w+)";
        let theirs = regex::bytes::Regex::new(pattern).unwrap();
        let mut input = b"lorem ipsum, ".repeat(100);
        input.extend_from_slice(b"1 UNION ALL select password from users");
        let expected: Vec<Vec<u8>> = theirs
            .captures(&input)
            .unwrap()
            .iter()
            .map(|g| g.map_or(Vec::new(), |m| m.as_bytes().to_vec()))
            .collect();
        assert_eq!(groups(pattern, &input), Some(expected));
        let whole = groups(r"(?i)union[\s/*]+(?:all\s+)?select\b", &input).unwrap();
        assert_eq!(whole, vec![b"UNION ALL select".to_vec()]);
    }

    #[test]
    fn capture_pass_keeps_context() {
        // `\b` before the match depends on the byte before it.
        assert_eq!(
            groups(r"\b(or)\b", b"for or"),
            Some(vec![b"or".to_vec(), b"or".to_vec()])
        );
    }
}
