//! The backtracking engine behind `@rx` and key regexes, for patterns the `regex` crate
//! cannot compile.
//!
//! **Why.** ModSecurity compiles `@rx` with PCRE, a backtracking engine: a user's own rules
//! use look-ahead (`(?!ref)`), look-behind (`(?<=a)b`), backreferences (`(a)\1`), atomic
//! groups (`(?>a+)`) and possessive quantifiers (`a++`), which the linear-time `regex` crate
//! refuses. Such a pattern, and only such a pattern, is compiled here with
//! [`fancy_regex`], which runs the parts it can with `regex-automata` and backtracks only
//! over the parts that need it. CRS v4 is written for RE2 and never gets here (a test over
//! `../shared/crs` asserts it).
//!
//! **Bounds.** Backtracking can take exponential time (`(a+)+$` on `aaaa…b`). As in
//! ModSecurity (`SecPcreMatchLimit`), each evaluation is bounded: past
//! [`DEFAULT_PCRE_MATCH_LIMIT`] backtracking steps (or the `SecPcreMatchLimit` of the rule
//! set) the search gives up, the rule does not match, and the transaction gets
//! `TX:MSC_PCRE_LIMITS_EXCEEDED=1`, which a rule can test, as ModSecurity v2 and v3 set it
//! (`modsecurity.conf-recommended` blocks on `TX:/^MSC_/`). The search never recurses on the
//! call stack (fancy-regex keeps its own heap stack), so there is no separate recursion limit:
//! `SecPcreMatchLimitRecursion` is accepted and lowers the same bound when it is smaller.
//!
//! **Dialect.** The flags are `@rx`'s (see `rx.rs`): dot-all and multi-line, bytes not code
//! points (`BytesMode::Ascii`, retried with Unicode classes when the pattern needs them),
//! `\x{NN}` as the byte NN.

use fancy_regex::{BytesMode, Error as FancyError, Regex, RegexBuilder};

use crate::limits::{DEFAULT_PCRE_MATCH_LIMIT, DEFAULT_REGEX_SIZE_LIMIT};

/// A pattern compiled by the backtracking engine.
#[derive(Clone, Debug)]
pub(crate) struct Backtracking {
    regex: Regex,
}

/// The result of one bounded search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Search<T> {
    /// The search finished.
    Done(T),
    /// The match limit was hit: ModSecurity's "PCRE limits exceeded".
    LimitExceeded,
}

impl Backtracking {
    /// Compiles `pattern` (already rewritten for `\x{NN}`): with `@rx`'s flags, or, for a
    /// `key_selector` (`ARGS:/(?!ref)/`), case-insensitive as key regexes are. `match_limit`
    /// 0 means the default.
    pub(crate) fn compile(
        pattern: &str,
        key_selector: bool,
        match_limit: usize,
    ) -> Result<Backtracking, String> {
        let limit = if match_limit == 0 {
            DEFAULT_PCRE_MATCH_LIMIT
        } else {
            match_limit
        };
        let build = |mode: BytesMode| {
            let mut b = RegexBuilder::new(pattern);
            b.bytes_mode(mode)
                .dot_matches_new_line(!key_selector)
                .multi_line(!key_selector)
                .case_insensitive(key_selector)
                .backtrack_limit(limit)
                .delegate_size_limit(DEFAULT_REGEX_SIZE_LIMIT)
                .delegate_dfa_size_limit(DEFAULT_REGEX_SIZE_LIMIT);
            b.build()
        };
        match build(BytesMode::Ascii) {
            Ok(regex) => Ok(Backtracking { regex }),
            Err(ascii) => build(BytesMode::UnicodeBytes)
                .map(|regex| Backtracking { regex })
                .map_err(|_| describe(&ascii)),
        }
    }

    /// Whether the pattern matches somewhere in `input`.
    pub(crate) fn is_match(&self, input: &[u8]) -> Search<bool> {
        match self.regex.is_match(input) {
            Ok(m) => Search::Done(m),
            Err(_) => Search::LimitExceeded,
        }
    }

    /// The first match's groups as ranges (group 0 is the whole match; a group that did
    /// not take part is `None`), at most `max` of them.
    pub(crate) fn captures(
        &self,
        input: &[u8],
        max: usize,
    ) -> Search<Option<Vec<Option<std::ops::Range<usize>>>>> {
        match self.regex.captures(input) {
            Ok(None) => Search::Done(None),
            Ok(Some(c)) => Search::Done(Some(
                (0..c.len().min(max))
                    .map(|i| c.get(i).map(|m| m.range()))
                    .collect(),
            )),
            Err(_) => Search::LimitExceeded,
        }
    }
}

/// A compile error, lower-case.
fn describe(e: &FancyError) -> String {
    format!("invalid regular expression: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bt(p: &str) -> Backtracking {
        Backtracking::compile(p, false, 0).unwrap()
    }

    #[test]
    fn look_around_backreferences_atomic_possessive() {
        assert_eq!(bt("foo(?!bar)").is_match(b"foobaz"), Search::Done(true));
        assert_eq!(bt("foo(?!bar)").is_match(b"foobar"), Search::Done(false));
        assert_eq!(bt("(?<=a)b").is_match(b"ab"), Search::Done(true));
        assert_eq!(bt("(?<=a)b").is_match(b"cb"), Search::Done(false));
        assert_eq!(bt(r"(\w)\1").is_match(b"xyyz"), Search::Done(true));
        assert_eq!(bt(r"(\w)\1").is_match(b"xyz"), Search::Done(false));
        assert_eq!(bt("(?>a+)b").is_match(b"aab"), Search::Done(true));
        assert_eq!(bt("a++a").is_match(b"aaa"), Search::Done(false));
    }

    #[test]
    fn bytes_and_flags() {
        assert_eq!(bt(r"(?=\xff)\xff").is_match(b"\xff"), Search::Done(true));
        assert_eq!(bt("(?=a).b").is_match(b"a\nb"), Search::Done(false));
        assert_eq!(bt("(?=a)a.b").is_match(b"a\nb"), Search::Done(true));
        assert_eq!(bt("(?!x)^b").is_match(b"a\nb"), Search::Done(true));
    }

    #[test]
    fn limit_is_reported_not_hung() {
        let evil = Backtracking::compile(r"^(a|a)+(?!x)$", false, 10_000).unwrap();
        let mut input = vec![b'a'; 40];
        input.push(b'b');
        assert_eq!(evil.is_match(&input), Search::LimitExceeded);
    }

    #[test]
    fn captures_ranges() {
        let c = bt(r"(a)(?=b)(x)?").captures(b"zab", 10);
        assert_eq!(c, Search::Done(Some(vec![Some(1..2), Some(1..2), None])));
    }

    #[test]
    fn syntax_errors_stay_errors() {
        assert!(Backtracking::compile("(?!a", false, 0).is_err());
    }
}
