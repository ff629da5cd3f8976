//! `@pm`: phrase match.
//!
//! **What.** Matches when any of the phrases occurs in the value, ignoring ASCII case. With
//! `capture`, `TX.0` gets the matched text as it appears in the value.
//!
//! **Argument.** Phrases separated by spaces. As in ModSecurity's `parse_pm_content`, an
//! argument wrapped in double quotes loses them, and `|..|` holds hex bytes
//! (`|0d 0a|`). Backslashes are literal (ModSecurity v3 doubles them before parsing).
//! An argument without any phrase is a load error.
//!
//! ```text
//! SecRule REQUEST_HEADERS:Accept-Encoding "@pm gzip compress deflate br zstd" "id:1,phase:1,pass"
//! ```
//!
//! # Performance
//!
//! One Aho-Corasick automaton per rule, built at load time (`@pmFromFile` lists reach a few
//! thousand phrases). A no-match search allocates nothing; we stop at the first match
//! (ModSecurity's `acmp_process_quick` does the same).

use aho_corasick::AhoCorasick;

use super::Captures;

/// Phrase lists longer than this keep their own automaton only (CRS's longest list has
/// about 1,500 phrases).
const MAX_PREFILTER_PHRASES: usize = 5000;

/// A compiled `@pm` (also `@pmFromFile`).
#[derive(Debug)]
pub(crate) struct Pm {
    automaton: AhoCorasick,
    /// The phrases, lower-cased: a value matches only if one of them occurs in it, so they
    /// join the rule's prefilter (`compile/prefilter.rs`) like a regex's literals.
    phrases: Vec<Vec<u8>>,
}

impl Pm {
    /// Parses the space-separated phrases of `argument`.
    pub(crate) fn new(argument: &str) -> Result<Pm, String> {
        let content = parse_content(argument)?;
        let phrases: Vec<&[u8]> = content
            .split(|b| b.is_ascii_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        if phrases.is_empty() {
            return Err("@pm needs at least one phrase".to_owned());
        }
        Pm::from_phrases(&phrases)
    }

    /// Builds the automaton over `phrases` (each used as is; empty ones are dropped). No
    /// phrase at all gives a matcher that never matches.
    pub(crate) fn from_phrases<P: AsRef<[u8]>>(phrases: &[P]) -> Result<Pm, String> {
        // Always the compact (contiguous) NFA: the phrases also join the rule's prefilter,
        // so this automaton runs only on values holding a phrase, where its speed hardly
        // shows. The crate's own pick (a DFA for lists of up to 100 phrases) took 5.3 MB of
        // heap for CRS's short lists; a DFA over its `@pmFromFile` lists would take 46 MB
        // (`benches/PROFILE.md`, "Eighth session").
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .build(phrases.iter().map(AsRef::as_ref).filter(|p| !p.is_empty()))
            .map_err(|e| format!("cannot build phrase matcher: {e}"))?;
        let phrases = phrases
            .iter()
            .map(|p| p.as_ref().to_ascii_lowercase())
            .filter(|p| !p.is_empty())
            .collect();
        Ok(Pm { automaton, phrases })
    }

    /// Lower-cased phrases such that every match contains one of them (none for a matcher
    /// without phrases, which never matches).
    pub(crate) fn required_literals(&self) -> Option<&[Vec<u8>]> {
        (!self.phrases.is_empty() && self.phrases.len() <= MAX_PREFILTER_PHRASES)
            .then_some(&self.phrases[..])
    }

    /// Searches `input`; on a match fills `captures` with the matched text.
    pub(crate) fn evaluate(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        match captures {
            None => self.automaton.is_match(input),
            Some(captures) => match self.automaton.find(input) {
                Some(m) => {
                    captures.fill([&input[m.start()..m.end()]]);
                    true
                }
                None => false,
            },
        }
    }
}

/// Strips surrounding double quotes and decodes `|hex|` sections.
fn parse_content(argument: &str) -> Result<Vec<u8>, String> {
    let trimmed = argument.trim_start_matches([' ', '\t']);
    let inner = match trimmed.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => inner,
        None => trimmed,
    };
    let mut out = Vec::with_capacity(inner.len());
    let mut in_hex = false;
    let mut pending: Option<u8> = None;
    for &b in inner.as_bytes() {
        if b == b'|' {
            if pending.is_some() {
                return Err(format!("odd number of hex digits in {argument:?}"));
            }
            in_hex = !in_hex;
        } else if in_hex {
            if b == b' ' {
                continue;
            }
            let digit = (b as char)
                .to_digit(16)
                .ok_or_else(|| format!("invalid hex digit {:?} in {argument:?}", b as char))?
                as u8;
            match pending.take() {
                Some(high) => out.push(high << 4 | digit),
                None => pending = Some(digit),
            }
        } else {
            out.push(b);
        }
    }
    if in_hex {
        return Err(format!("unclosed |hex| section in {argument:?}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm(a: &str) -> Pm {
        Pm::new(a).unwrap()
    }

    #[test]
    fn rejects_empty_and_bad_hex() {
        assert!(Pm::new("").is_err());
        assert!(Pm::new("   ").is_err());
        assert!(Pm::new("|4|").is_err());
        assert!(Pm::new("|zz|").is_err());
        assert!(Pm::new("|41").is_err());
    }

    #[test]
    fn phrases_case_insensitive() {
        let op = pm("gzip compress deflate");
        assert!(op.evaluate(b"x-DEFLATE-y", None));
        assert!(!op.evaluate(b"br", None));
        assert!(!op.evaluate(b"", None));
    }

    #[test]
    fn quotes_and_hex() {
        assert!(pm("\"abc def\"").evaluate(b"xdefx", None));
        assert!(pm("|41 42|c").evaluate(b"xabcx", None));
        assert!(pm("a|0d0a|b").evaluate(b"a\r\nb", None));
        assert!(pm(r"a\b").evaluate(br"a\b", None));
    }

    #[test]
    fn capture_is_input_text() {
        let mut c = Captures::default();
        assert!(pm("( ?>").evaluate(b"x?>y", Some(&mut c)));
        assert_eq!(c.groups, vec![b"?>".to_vec()]);
        assert!(pm("select").evaluate(b"SeLeCT", Some(&mut c)));
        assert_eq!(c.groups, vec![b"SeLeCT".to_vec()]);
    }
}
