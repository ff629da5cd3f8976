//! The linear-time engine behind `@rx`: `regex-automata`'s engines, forward only.
//!
//! `regex_automata::meta::Regex` (the `regex` crate's engine) compiles every pattern
//! twice: a forward NFA, and a reverse NFA for a reverse lazy DFA that finds where a
//! match starts. `@rx` seldom needs the start: without `capture` it asks only whether
//! the value matches, and a forward DFA answers that. So this engine compiles the
//! forward NFA only (and a reverse one only for a small pattern, dropped once its DFA is
//! built), and:
//!
//! - **whether it matches**: the forward DFA, stopping at the first match state: a full
//!   DFA for a small pattern ([`Small`], as `meta` builds them), else the lazy DFA;
//! - **where it matches** (`capture`): a small pattern's full DFAs find the match's end
//!   and then, in reverse, its start, as `meta` does; for another pattern the lazy DFA
//!   finds where the leftmost-first match ends, and the start comes from the bounded
//!   backtracker run on the value up to that end (the PikeVM when the span is too long
//!   for it), or, when span x NFA states is past [`BACKTRACK_BUDGET`], from a reverse
//!   lazy DFA built the first time the regex needs it. That match is the same one: no
//!   match starts before the leftmost one, and cutting the value after the match's end
//!   removes only matches the engine prefers less. Look-around still sees the whole value
//!   (the search range is cut, not the value);
//! - **its groups**: when the span is known, a one-pass DFA or the backtracker anchored
//!   on the match; otherwise the backtracking pass above fills them;
//! - when a DFA gives up (the lazy DFA's cache thrashes on a pathological pattern and
//!   value), quits (a Unicode word boundary next to a non-ASCII byte), or was not built
//!   (its 2 MB cache cannot hold the few states a search needs), the NFA engines answer.
//!
//! Each engine is configured as `meta` configures it, so the answers are the `regex`
//! crate's (`operators::tests::every_crs_pattern_matches_as_the_regex_crate_does`).
//! Loading CRS holds about 4.6 MB less heap without the reverse automata, and 0.03 s less
//! CPU (`benches/PROFILE.md`); a CRS transaction costs about as many instructions as
//! with `meta`. Searches stay linear in the value's length.
use regex_automata::dfa::{dense, onepass, Automaton, StartKind};
use regex_automata::hybrid::dfa::{self as hybrid, DFA};
use regex_automata::nfa::thompson::{self, backtrack, pikevm};
use regex_automata::util::captures::{Captures, GroupInfo};
use regex_automata::util::look::LookMatcher;
use regex_automata::util::pool::Pool;
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::{Anchored, Input, MatchKind, PatternID};
use regex_syntax::hir::Hir;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::limits::DEFAULT_REGEX_SIZE_LIMIT;

/// Past this many (bytes between where a search starts and where its match ends) times
/// (NFA states), a capturing search finds the match's start with the reverse lazy DFA
/// (built on first need) instead of the backtracker: the backtracker's work grows with
/// the span times the pattern's size, and the PikeVM it falls back to on long spans is
/// slower still, so a big pattern, or a long value with a match near its end, would
/// otherwise cost far more than with `meta`. Small spans of small patterns keep the
/// backtracker, and a benign request seldom builds a reverse DFA.
const BACKTRACK_BUDGET: usize = 256;

/// The lazy DFA's cache, per regex and thread (as `regex` sizes it).
const DFA_CACHE_CAPACITY: usize = 2 * (1 << 20);

/// Makes a regex's per-thread working memory.
type CacheFn =
    Box<dyn Fn() -> Cache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// A compiled pattern (see the module docs).
#[derive(Debug)]
pub(crate) struct LinearRegex {
    /// The compiled engines, shared with the function that makes their caches.
    engines: Arc<Engines>,
    caches: Pool<Cache, CacheFn>,
}

/// The engines of a [`LinearRegex`].
#[derive(Debug)]
struct Engines {
    /// Full DFAs, for a small pattern (see [`Small`]).
    small: Option<Box<Small>>,
    /// The groups of a match whose span is known, for a small pattern with groups that is
    /// one-pass (`meta` builds one for every such pattern: for CRS's bigger ones it held
    /// 1.1 MB and saved no instructions).
    onepass: Option<onepass::DFA>,
    /// The forward lazy DFA (see [`LinearRegex::new`] for when it is missing).
    dfa: Option<DFA>,
    /// The reverse lazy DFA, built on first need from [`Engines::source`] (see
    /// [`BACKTRACK_BUDGET`]); `None` inside when it cannot be built.
    reverse: OnceLock<Option<DFA>>,
    /// The pattern, for the reverse DFA.
    source: Source,
    backtrack: backtrack::BoundedBacktracker,
    pikevm: pikevm::PikeVM,
}

/// A small pattern's full DFAs, as `meta` builds them: a forward one that finds where a
/// match ends, and a reverse one that finds where it starts. Both beat the lazy DFA on
/// short values (no cache to consult, no start state to compute), and the reverse one
/// spares a capturing search the backtracking pass over the value: it then runs on the
/// match only. Small means at most [`SMALL_STATES`] NFA states, and each DFA within
/// [`SMALL_DFA_BYTES`]; the reverse NFA is dropped once its DFA is built.
#[derive(Debug)]
struct Small {
    fwd: dense::DFA<Vec<u32>>,
    rev: dense::DFA<Vec<u32>>,
}

/// The NFA size up to which a pattern gets full DFAs (`meta`'s `dfa_state_limit`).
const SMALL_STATES: usize = 30;

/// The most each full DFA, and its construction, may take (`meta`'s `dfa_size_limit`
/// split as it splits it).
const SMALL_DFA_BYTES: usize = 40 * (1 << 10) / 4;

/// The working memory of one search: one per engine.
#[derive(Debug)]
struct Cache {
    dfa: Option<hybrid::Cache>,
    /// Made on the first reverse search.
    reverse: Option<hybrid::Cache>,
    onepass: Option<onepass::Cache>,
    backtrack: backtrack::Cache,
    pikevm: pikevm::Cache,
}

/// Why a pattern did not compile.
#[derive(Debug)]
pub(crate) enum LinearError {
    /// The NFA would exceed this many bytes.
    SizeLimit(usize),
    /// Anything else the compiler refused, in its words.
    Other(String),
}

impl std::fmt::Display for LinearError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinearError::SizeLimit(limit) => {
                write!(f, "compiled regex exceeds size limit of {limit} bytes")
            }
            LinearError::Other(message) => f.write_str(message),
        }
    }
}

impl LinearRegex {
    /// Compiles a pattern parsed (into `hir`) as `source` says.
    pub(crate) fn new(hir: &Hir, source: Source) -> Result<LinearRegex, LinearError> {
        let nfa = thompson::Compiler::new()
            .configure(nfa_config())
            .build_from_hir(hir)
            .map_err(|e| match e.size_limit() {
                Some(limit) => LinearError::SizeLimit(limit),
                None => LinearError::Other(e.to_string()),
            })?;
        let other = |e: &dyn std::fmt::Display| LinearError::Other(e.to_string());
        // `None` when the cache could not hold the few states a search needs (a huge
        // pattern): the NFA engines then answer, as with `meta`.
        let dfa = DFA::builder()
            .configure(lazy_config())
            .build_from_nfa(nfa.clone())
            .ok();
        let small = Small::new(hir, &nfa).map(Box::new);
        let backtrack =
            backtrack::BoundedBacktracker::new_from_nfa(nfa.clone()).map_err(|e| other(&e))?;
        let pikevm = pikevm::PikeVM::new_from_nfa(nfa.clone()).map_err(|e| other(&e))?;
        let onepass = (small.is_some() && hir.properties().explicit_captures_len() > 0)
            .then(|| {
                onepass::Builder::new()
                    .configure(onepass::Config::new().match_kind(MatchKind::LeftmostFirst))
                    .build_from_nfa(nfa.clone())
                    .ok()
            })
            .flatten();
        let engines = Arc::new(Engines {
            small,
            onepass,
            dfa,
            reverse: OnceLock::new(),
            source,
            backtrack,
            pikevm,
        });
        let e = Arc::clone(&engines);
        let make: CacheFn = Box::new(move || Cache {
            dfa: e.dfa.as_ref().map(DFA::create_cache),
            reverse: None,
            onepass: e.onepass.as_ref().map(onepass::Cache::new),
            backtrack: e.backtrack.create_cache(),
            pikevm: e.pikevm.create_cache(),
        });
        Ok(LinearRegex {
            engines,
            caches: Pool::new(make),
        })
    }

    /// An identity for the regex while it lives (the address of its engines, which do not
    /// move): a transaction keeps capture slots under it.
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.engines) as usize
    }

    /// Whether `haystack` holds a match.
    pub(crate) fn is_match(&self, haystack: &[u8]) -> bool {
        let input = Input::new(haystack).earliest(true);
        if let Some(found) = self
            .engines
            .small
            .as_ref()
            .and_then(|s| s.fwd.try_search_fwd(&input).ok())
        {
            return found.is_some();
        }
        let mut cache = self.caches.get();
        match self.forward(&mut cache, &input) {
            Some(found) => found.is_some(),
            None => self.engines.pikevm.is_match(&mut cache.pikevm, input),
        }
    }

    /// The capture groups of the regex (group 0 is the whole match).
    pub(crate) fn group_info(&self) -> &GroupInfo {
        self.engines.pikevm.get_nfa().group_info()
    }

    /// Slots for [`LinearRegex::captures`].
    pub(crate) fn create_captures(&self) -> Captures {
        self.engines.pikevm.create_captures()
    }

    /// The number of groups, the whole match included.
    pub(crate) fn captures_len(&self) -> usize {
        self.group_info().group_len(PatternID::ZERO)
    }

    /// The leftmost-first match and its groups, into `caps` (no match: `caps` says so).
    pub(crate) fn captures(&self, haystack: &[u8], caps: &mut Captures) {
        let pid = self.search_slots(haystack, 0, caps.slots_mut());
        caps.set_pattern(pid);
    }

    /// The span of the leftmost-first match.
    pub(crate) fn find(&self, haystack: &[u8]) -> Option<Range<usize>> {
        self.find_from(haystack, 0)
    }

    /// The span of the leftmost-first match that starts at `from` or later; look-around
    /// (`^`, `\b`) still reads what comes before `from`.
    pub(crate) fn find_from(&self, haystack: &[u8], from: usize) -> Option<Range<usize>> {
        let mut slots = [None; 2];
        self.search_slots(haystack, from, &mut slots)?;
        match slots {
            [Some(start), Some(end)] => Some(start.get()..end.get()),
            _ => None,
        }
    }

    /// Fills `slots` (the first of the regex's slots: two per group) for the leftmost-first
    /// match that starts at `from` or later, if any (see the module docs).
    fn search_slots(
        &self,
        haystack: &[u8],
        from: usize,
        slots: &mut [Option<NonMaxUsize>],
    ) -> Option<PatternID> {
        let input = Input::new(haystack).range(from..);
        let mut cache = self.caches.get();
        let cache = &mut *cache;
        let span = match self.engines.small.as_ref().and_then(|s| s.find(&input)) {
            Some(span) => span?,
            None => {
                let end = match self.forward(cache, &input) {
                    Some(None) => return None,
                    Some(Some(end)) => end,
                    // No end known: the NFA engines search the whole value.
                    None => return self.groups(cache, &input, slots),
                };
                match self.start(cache, haystack, from, end) {
                    Some(start) => start..end,
                    None => return self.groups(cache, &input.range(from..end), slots),
                }
            }
        };
        if let [start, end, ..] = slots {
            (*start, *end) = (NonMaxUsize::new(span.start), NonMaxUsize::new(span.end));
        }
        if slots.len() <= 2 {
            return Some(PatternID::ZERO);
        }
        // The match is known: the groups come from an anchored pass over it.
        let input = input.range(span).anchored(Anchored::Yes);
        if let (Some(onepass), Some(c)) = (&self.engines.onepass, cache.onepass.as_mut()) {
            if let Ok(pid) = onepass.try_search_slots(c, &input, slots) {
                return pid;
            }
        }
        self.groups(cache, &input, slots)
    }

    /// Where the leftmost-first match that ends at `end` (and starts at `from` or later)
    /// starts, from the reverse lazy DFA, when the span is too long to leave to the
    /// backtracker (see [`BACKTRACK_BUDGET`]); `None` otherwise, or when the DFA cannot say.
    fn start(&self, cache: &mut Cache, haystack: &[u8], from: usize, end: usize) -> Option<usize> {
        let states = self.engines.pikevm.get_nfa().states().len();
        if (end - from).saturating_mul(states) <= BACKTRACK_BUDGET {
            return None;
        }
        let rev = self
            .engines
            .reverse
            .get_or_init(|| self.engines.source.reverse_dfa())
            .as_ref()?;
        let rev_cache = cache.reverse.get_or_insert_with(|| rev.create_cache());
        let back = Input::new(haystack)
            .range(from..end)
            .anchored(Anchored::Yes);
        Some(rev.try_search_rev(rev_cache, &back).ok()??.offset())
    }

    /// Where the leftmost-first match ends, from the forward lazy DFA (`Some(None)`: no
    /// match); `None` when it has no answer (missing, given up, or quit).
    fn forward(&self, cache: &mut Cache, input: &Input<'_>) -> Option<Option<usize>> {
        let (dfa, dfa_cache) = (self.engines.dfa.as_ref()?, cache.dfa.as_mut()?);
        let found = dfa.try_search_fwd(dfa_cache, input).ok()?;
        Some(found.map(|half| half.offset()))
    }

    /// The leftmost-first match within `input`'s span and its groups, into `slots`.
    fn groups(
        &self,
        cache: &mut Cache,
        input: &Input<'_>,
        slots: &mut [Option<NonMaxUsize>],
    ) -> Option<PatternID> {
        // The backtracker refuses a span too long for its visited set; the PikeVM does not.
        match self
            .engines
            .backtrack
            .try_search_slots(&mut cache.backtrack, input, slots)
        {
            Ok(pid) => pid,
            Err(_) => self
                .engines
                .pikevm
                .search_slots(&mut cache.pikevm, input, slots),
        }
    }
}

/// The NFA configuration `meta` uses, with our size limit.
fn nfa_config() -> thompson::Config {
    thompson::Config::new()
        .utf8(false)
        .nfa_size_limit(Some(DEFAULT_REGEX_SIZE_LIMIT))
        .shrink(false)
        .look_matcher(LookMatcher::new())
}

impl Small {
    /// The full DFAs of a pattern whose forward NFA is `nfa`, if it is small enough.
    fn new(hir: &Hir, nfa: &thompson::NFA) -> Option<Small> {
        if nfa.states().len() > SMALL_STATES {
            return None;
        }
        let config = dense::Config::new()
            .match_kind(MatchKind::LeftmostFirst)
            .unicode_word_boundary(true)
            .determinize_size_limit(Some(SMALL_DFA_BYTES))
            .dfa_size_limit(Some(SMALL_DFA_BYTES));
        let fwd = dense::Builder::new()
            .configure(config.clone())
            .build_from_nfa(nfa)
            .ok()?;
        let nfarev = thompson::Compiler::new()
            .configure(
                nfa_config()
                    .which_captures(thompson::WhichCaptures::None)
                    .reverse(true),
            )
            .build_from_hir(hir)
            .ok()?;
        let rev = dense::Builder::new()
            .configure(
                config
                    .start_kind(StartKind::Anchored)
                    .match_kind(MatchKind::All),
            )
            .build_from_nfa(&nfarev)
            .ok()?;
        Some(Small { fwd, rev })
    }

    /// The span of the leftmost-first match in `input`'s span: `Some(None)` for no match,
    /// `None` when a DFA quit (a Unicode word boundary next to a non-ASCII byte).
    fn find(&self, input: &Input<'_>) -> Option<Option<Range<usize>>> {
        let Some(end) = self.fwd.try_search_fwd(input).ok()? else {
            return Some(None);
        };
        let back = input
            .clone()
            .range(input.start()..end.offset())
            .anchored(Anchored::Yes);
        let start = self.rev.try_search_rev(&back).ok()??;
        Some(Some(start.offset()..end.offset()))
    }
}

/// A pattern as [`LinearRegex`] keeps it, to build its reverse DFA when first needed.
#[derive(Debug)]
pub(crate) struct Source {
    /// The pattern, as parsed (after `rx`'s rewriting).
    pub(crate) pattern: Box<str>,
    /// Whether it was parsed with Unicode on.
    pub(crate) unicode: bool,
}

impl Source {
    /// The reverse lazy DFA `meta` builds (it finds a match's start from its end); `None`
    /// if the pattern no longer parses or compiles, which it did when loaded.
    fn reverse_dfa(&self) -> Option<DFA> {
        let hir = super::rx_literals::parse_result(&self.pattern, self.unicode).ok()?;
        let nfarev = thompson::Compiler::new()
            .configure(
                nfa_config()
                    .which_captures(thompson::WhichCaptures::None)
                    .reverse(true),
            )
            .build_from_hir(&hir)
            .ok()?;
        DFA::builder()
            .configure(lazy_config().match_kind(MatchKind::All))
            .build_from_nfa(nfarev)
            .ok()
    }
}

/// The lazy DFA configuration `meta` uses.
fn lazy_config() -> hybrid::Config {
    DFA::config()
        .match_kind(MatchKind::LeftmostFirst)
        .unicode_word_boundary(true)
        .cache_capacity(DFA_CACHE_CAPACITY)
        .skip_cache_capacity_check(false)
        .minimum_cache_clear_count(Some(3))
        .minimum_bytes_per_state(Some(10))
}
