//! The literal back-end: one Aho-Corasick automaton per group over the literals that every
//! match of a rule must contain (`operators::rx_literals`, `@pm` phrases).

use std::collections::HashMap;

use super::automaton::LiteralAutomaton;
use super::{set_bit, ScanScratch, Scanner};

/// Groups with more literals than this get a contiguous NFA instead of a DFA. CRS's two
/// groups of 456 and 493 literals took 3.5 MB as DFAs and 0.2 MB as NFAs (CRS heap peak
/// 34.2 MB -> 30.4 MB at 400), for +0.3 % instructions per GET: they are read by few
/// values.
pub(super) const DFA_MAX_LITERALS: usize = 400;

/// The automaton of one group.
#[derive(Debug)]
pub(crate) struct LiteralScanner {
    automaton: LiteralAutomaton,
    /// For each automaton pattern, the bits (rules) it enables.
    pattern_bits: Vec<Vec<u32>>,
    /// With an NFA: where a literal may start, checked before the NFA is walked.
    grams: Option<Grams>,
}

/// Bits in [`Grams::starts`]: 8 KB per NFA group.
const GRAM_BITS: usize = 1 << 16;

/// The most literals a group's filter leaves to its automaton of short literals (those
/// shorter than its grams); a group with more short literals keeps the plain NFA.
const SHORT_MAX: usize = 400;

/// The most a group's DFA of short literals may take (see [`Grams::build`]).
const SHORT_DFA_BYTES: usize = 128 * 1024;

/// A filter in front of a group's NFA, in the manner of Hyperscan's FDR and Rabin-Karp:
/// one bit per hash of the first [`Grams::len`] bytes of each literal that long
/// ([`gram8`], [`gram4`]), and a small automaton (a DFA where it stays small) for the
/// shorter ones.
///
/// The NFA follows failure transitions and costs about 48 instructions a byte on text (a
/// 365-byte HTML page through CRS's 2,369 response literals: 17,500). With the filter, the
/// DFA of the short literals scans the value, then at each position whose gram hashes to
/// a set bit the NFA is walked anchored there, reporting the literals that start there
/// (and, harmlessly, some that end inside them, which also occur). Every literal as long
/// as the grams is found: it starts at a position whose gram is its own. Grams of 8 bytes
/// where a group has few literals shorter than that (CRS's response literals are mostly
/// long, and HTML is full of their 4-byte prefixes such as `<tit`), else of 4.
#[derive(Debug)]
struct Grams {
    /// 8 or 4.
    len: usize,
    starts: Box<[u64; GRAM_BITS / 64]>,
    /// The literals shorter than `len`, and each one's pattern in the group.
    short: Option<(LiteralAutomaton, Vec<u32>)>,
}

/// The 8 bytes at the start of `w` hashed to 16 bits, ASCII letters (and a few other
/// bytes: the filter only needs the same answer for a literal and any case of it) folded.
#[inline(always)]
fn gram8(w: [u8; 8]) -> usize {
    let folded = u64::from_le_bytes(w) | 0x2020_2020_2020_2020;
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize
}

/// [`gram8`] for 4 bytes.
#[inline(always)]
fn gram4(w: [u8; 4]) -> usize {
    let folded = u32::from_le_bytes(w) | 0x2020_2020;
    (folded.wrapping_mul(0x9E37_79B1) >> 16) as usize
}

impl Grams {
    /// The filter of `lits`, or `None` when too many are short for either length.
    ///
    /// Grams of 8 where the DFA of the literals shorter than 8 stays within
    /// [`SHORT_DFA_BYTES`], else of 4 (CRS's groups of 700-1,200 SQL and PHP literals have
    /// none shorter than 4 but a hundred or more shorter than 8: their DFAs took 1.9 MB in
    /// all); a short DFA still too big becomes an NFA.
    fn build(lits: &[(Vec<u8>, Vec<u32>)]) -> Option<Grams> {
        let shorter = |n: usize| -> Vec<(usize, &[u8])> {
            let short = lits.iter().enumerate().filter(|(_, (l, _))| l.len() < n);
            short.map(|(i, (l, _))| (i, &l[..])).collect()
        };
        let automaton = |short: &[(usize, &[u8])], dfa: bool| {
            LiteralAutomaton::build(short.iter().map(|&(_, l)| l), dfa).ok()
        };
        let mut chosen = None;
        for len in [8, 4] {
            let short = shorter(len);
            if short.len() > SHORT_MAX {
                continue;
            }
            let dfa = match short.is_empty() {
                true => None,
                false => Some(automaton(&short, true)?),
            };
            if dfa
                .as_ref()
                .is_none_or(|d| d.memory_usage() <= SHORT_DFA_BYTES)
            {
                chosen = Some((len, short, dfa));
                break;
            }
            if len == 4 {
                chosen = Some((len, short.clone(), Some(automaton(&short, false)?)));
            }
        }
        let (len, short, short_automaton) = chosen?;
        let mut starts = Box::new([0u64; GRAM_BITS / 64]);
        for (lit, _) in lits.iter().filter(|(l, _)| l.len() >= len) {
            let g = match <[u8; 8]>::try_from(lit.get(..8).unwrap_or_default()) {
                Ok(w) if len == 8 => gram8(w),
                _ => gram4([lit[0], lit[1], lit[2], lit[3]]),
            };
            starts[g / 64] |= 1 << (g % 64);
        }
        let short = short_automaton.map(|a| (a, short.iter().map(|&(i, _)| i as u32).collect()));
        Some(Grams { len, starts, short })
    }

    /// Whether a literal of the group may start at each position of `input`: calls `walk`
    /// with the positions whose gram is set.
    #[inline(always)]
    fn candidates(&self, input: &[u8], mut walk: impl FnMut(usize)) {
        let set = |g: usize| self.starts[g / 64] & (1 << (g % 64)) != 0;
        if self.len == 8 {
            for (at, w) in input.windows(8).enumerate() {
                let w: [u8; 8] = w.try_into().unwrap_or_default();
                if set(gram8(w)) {
                    walk(at);
                }
            }
        } else {
            for (at, w) in input.windows(4).enumerate() {
                let w: [u8; 4] = w.try_into().unwrap_or_default();
                if set(gram4(w)) {
                    walk(at);
                }
            }
        }
    }
}

impl LiteralScanner {
    /// Builds the automaton of `literals` (literal → rule bits); `None` when there are none.
    pub(super) fn build(literals: HashMap<Vec<u8>, Vec<u32>>) -> Option<LiteralScanner> {
        let dfa = literals.len() <= DFA_MAX_LITERALS;
        LiteralScanner::build_as(literals, dfa)
    }

    /// [`LiteralScanner::build`] with the kind of automaton given.
    fn build_as(literals: HashMap<Vec<u8>, Vec<u32>>, dfa: bool) -> Option<LiteralScanner> {
        if literals.is_empty() {
            return None;
        }
        let mut lits: Vec<(Vec<u8>, Vec<u32>)> = literals.into_iter().collect();
        lits.sort();
        // A DFA where it stays small: overlapping search on it follows no failure
        // transitions (the contiguous NFA was the top function of a CRS GET). Beyond
        // DFA_MAX_LITERALS the DFA grows to tens of MB (CRS: 75 MB in all, for 3-4 % fewer
        // instructions per request), so big groups get the compact NFA (8 MB in all).
        let automaton = LiteralAutomaton::build(lits.iter().map(|(l, _)| &l[..]), dfa)
            .expect("literal sets are bounded (MAX_LITERALS per rule), so the automaton fits");
        let grams = (!dfa).then(|| Grams::build(&lits)).flatten();
        Some(LiteralScanner {
            automaton,
            pattern_bits: lits.into_iter().map(|(_, b)| b).collect(),
            grams,
        })
    }
}

impl Scanner for LiteralScanner {
    fn scan(&self, input: &[u8], bits: &mut [u64], _: &mut ScanScratch) {
        let mut enable = |p: u32| {
            for &bit in &self.pattern_bits[p as usize] {
                set_bit(bits, bit);
            }
        };
        let Some(grams) = &self.grams else {
            return self.automaton.for_each(input, enable);
        };
        if let Some((short, patterns)) = &grams.short {
            short.for_each(input, |p| enable(patterns[p as usize]));
        }
        grams.candidates(input, |at| {
            self.automaton.for_each_at(input, at, &mut enable)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the filter in front of the NFA, a scan sets the bits the DFA and the plain NFA
    /// set: literals of every length (short ones, ones that share grams, ones in others),
    /// in any case, on generated values and on values made of literal pieces; with grams
    /// of 8 bytes (few short literals) and of 4 (more than [`SHORT_MAX`] under 8 bytes).
    #[test]
    fn the_filtered_nfa_sets_what_the_automata_set() {
        let words: Vec<Vec<u8>> = [
            &b"at"[..],
            b"br",
            b"#!",
            b"<?",
            b"404",
            b"union",
            b"UNION select",
            b"select",
            b"<title>punkholicshell</title>",
            b"<title>",
            b"etc/passwd",
            b"/etc/",
            b"sql syntax",
            b"..",
            b"../",
            b"ora-0",
            b"warning",
            b"warn",
            b"xp_cmdshell",
            b"shell",
        ]
        .iter()
        .map(|w| w.to_vec())
        .collect();
        // 500 more of 4 to 7 bytes: too many short ones for grams of 8.
        let many: Vec<Vec<u8>> = words
            .iter()
            .cloned()
            .chain(
                crate::transformations::features::generated_values(b"abcSEL/.<", 3)
                    .filter(|v| (4..8).contains(&v.len()))
                    .take(500),
            )
            .collect();
        // 390 of 2-3 bytes over a wide alphabet: their DFA is too big, they get an NFA.
        let wide: Vec<u8> = (b'!'..=b'~').collect();
        let short_many: Vec<Vec<u8>> = many
            .iter()
            .cloned()
            .chain(
                crate::transformations::features::generated_values(&wide, 5)
                    .filter(|v| (2..4).contains(&v.len()))
                    .take(390),
            )
            .collect();
        for (set, gram_len, short_nfa) in
            [(words, 8, false), (many, 4, false), (short_many, 4, true)]
        {
            let literals: HashMap<Vec<u8>, Vec<u32>> = set
                .iter()
                .enumerate()
                .map(|(i, w)| (w.clone(), vec![i as u32 % 64, (i as u32 + 3) % 64]))
                .collect();
            let filtered = LiteralScanner::build_as(literals.clone(), false).unwrap();
            let grams = filtered.grams.as_ref().unwrap();
            assert_eq!((grams.len, grams.short.is_some()), (gram_len, true));
            let short = &grams.short.as_ref().unwrap().0;
            assert_eq!(
                matches!(short, LiteralAutomaton::Nfa(_)),
                short_nfa,
                "{gram_len}"
            );
            let dfa = LiteralScanner::build_as(literals.clone(), true).unwrap();
            let mut plain = LiteralScanner::build_as(literals, false).unwrap();
            plain.grams = None;
            let alphabet = b"aTbr#!<?4UNIOselct/.-0Wh ";
            let pieces = set.iter().take(40).flat_map(|w| {
                (0..w.len()).map(move |cut| [&w[..cut], b"x", w, &w[cut..]].concat())
            });
            let values: Vec<Vec<u8>> =
                crate::transformations::features::generated_values(alphabet, 6)
                    .take(20_000)
                    .chain(pieces)
                    .chain([b"<HTML><Title>PunkHolicShell</TITLE> at 404 ../etc/passwd".to_vec()])
                    .collect();
            let mut scratch = ScanScratch::default();
            let mut hits = 0;
            for value in &values {
                let bits = |s: &LiteralScanner, scratch: &mut ScanScratch| {
                    let mut b = [0u64; 1];
                    s.scan(value, &mut b, scratch);
                    b[0]
                };
                let want = bits(&dfa, &mut scratch);
                assert_eq!(bits(&plain, &mut scratch), want, "{value:?}");
                assert_eq!(bits(&filtered, &mut scratch), want, "{value:?}");
                hits += usize::from(want != 0);
            }
            assert!(hits > 500, "{hits}");
        }
    }
}
