//! Feature extraction: one inspected value (or one window of it) → [`DIM`] floats.
//!
//! tract cannot run scikit-learn's text pipelines (`StringNormalizer`, `Tokenizer`,
//! `TfIdfVectorizer` are unimplemented; `shared/notes/feasibility.md` §3), so the model takes
//! a float tensor and the text → numbers step is this file. The training script
//! (`waf-core/models/train.py`, function `features`) computes exactly the same numbers; the
//! golden test (`waf-core/models/golden.json`, test `golden_features_match_the_script`) holds
//! the two together. **Change both or neither**, and bump [`FEATURE_VERSION`].
//!
//! # The recipe
//!
//! 1. Normalise the window's bytes: one pass of `%XX` decoding (a second level of URL
//!    encoding, or `%`-encoding in a header, looks the same as the plain text; an invalid
//!    escape stays as sent), ASCII letters lower-cased, ASCII digits all mapped to `0` (a
//!    number is a number). Other bytes, UTF-8 or not, stay as they are.
//! 2. Hashed character 3-grams of the normalised bytes framed by [`FRAME_START`] and
//!    [`FRAME_END`] (so a value of `L` bytes has exactly `L` grams, the first and last mark
//!    its edges, and a one-byte value such as `'` still has one): every gram goes to bucket
//!    `fnv1a32(3, gram) % NGRAM_BUCKETS`; the counts are L2-normalised. The vector is sparse
//!    (at most `L` buckets), and [`extract`] gives it as `(index, value)` pairs, which is
//!    also how the model takes it (`model.rs`).
//!
//!    Version 1 hashed every 1-, 2- and 3-gram unframed (~2.4 entries per byte). Framed
//!    3-grams alone are ~1 entry per byte, and every entry costs the model run ~68
//!    instructions and the extraction ~25 (callgrind), so version 2 is ~2.3 times cheaper
//!    per value; on the validation split it also detected more (89.5 % of attack requests
//!    at 1 % false positives, against 85.6 %: `waf-core/models/REPORT.md`).
//! 3. [`STRUCT_FEATURES`] structural numbers of the window as sent, each in `[0, 1]`: length,
//!    share of bytes that are not ASCII letters/digits/space, share of ASCII punctuation that
//!    matters to injections, share of bytes ≥ 0x80, whether it is invalid UTF-8, the longest
//!    run of punctuation, share of upper-case letters among letters, whether the window had
//!    any `%XX` escape.
//!
//! All arithmetic is done in `f64` and rounded to `f32` once at the end; the only function
//! used is `sqrt` (correctly rounded in IEEE 754, in Python as in Rust), so both sides get the
//! same bits.
//!
//! # Untrusted input
//!
//! Every input has defined features: the empty value is all zeros but for its structure,
//! invalid UTF-8 is hashed byte by byte like anything else (and flagged), and a value longer
//! than [`crate::limits::DEFAULT_ML_WINDOW`] is cut into windows ([`windows`]), each scored on
//! its own, so padding a value cannot push an attack out of sight. No indexing depends on
//! the input except through bounds-checked slices; the fuzz target `ml_features` runs this.

/// Number of hashed n-gram buckets (a power of two).
pub const NGRAM_BUCKETS: usize = 16384;

/// Number of structural features after the n-gram buckets.
pub const STRUCT_FEATURES: usize = 8;

/// Length of a feature vector: the model's input width.
pub const DIM: usize = NGRAM_BUCKETS + STRUCT_FEATURES;

/// Version of the recipe above; the training script writes it into the golden file.
pub const FEATURE_VERSION: u32 = 2;

/// The byte a window's 3-grams start with (step 2): `0x02`, ASCII "start of text".
pub const FRAME_START: u8 = 0x02;

/// The byte a window's 3-grams end with (step 2): `0x03`, ASCII "end of text".
pub const FRAME_END: u8 = 0x03;

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// Punctuation that injections are made of (quotes, brackets, operators, separators).
const INJECTION_PUNCT: &[u8] = b"'\"`<>(){}[];|&$=*%\\#!^~";

/// Whether a value is trivially benign and skipped without running the model (its score is
/// defined as 0): empty, or only ASCII letters, digits, `_`, `-`, `.` and `@` (ids, numbers,
/// tokens, hashes, e-mail addresses, host names). None of the attack classes the model knows
/// can be written in those bytes alone: every one needs a quote, bracket, slash, space,
/// operator or separator.
pub fn is_trivial(value: &[u8]) -> bool {
    // A table lookup per byte: most of a JSON body's values are trivial, and every value
    // of the request is asked.
    value
        .iter()
        .all(|&b| CLASS[usize::from(b)] & C_TRIVIAL != 0)
}

/// The windows a value is scored in: consecutive slices of at most `window` bytes (one
/// empty slice for an empty value). A value's score is the highest of its windows'.
pub fn windows(value: &[u8], window: usize) -> impl Iterator<Item = &[u8]> {
    let window = window.max(1);
    let empty = value.is_empty().then_some(&value[..0]);
    empty.into_iter().chain(value.chunks(window))
}

/// Scratch space for [`extract`], reused across values (no allocation per value once warm).
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    normalized: Vec<u8>,
    /// Count per n-gram bucket, all zero between calls. A window of
    /// [`DEFAULT_ML_WINDOW`](crate::limits::DEFAULT_ML_WINDOW) bytes has at most 3,069
    /// grams, so a count fits 16 bits for any window below 21 KiB; past that it saturates
    /// (defined, but no longer the script's features: callers cut values with [`windows`]).
    counts: Vec<u16>,
}

/// The features of one window in sparse form: `(index, value)` pairs, zeros left out,
/// indices distinct and below [`DIM`]. `indices` and `values` are cleared first.
///
/// The n-gram entries come in the order their bucket was first hit (left to right), then
/// the non-zero structural features in order. The model sums
/// `weight[index] * value`, so the order only moves the last bits of the float sum.
///
/// # Performance
///
/// Three passes over the window (callgrind, `benches/src/bin/ml-profile.rs`): one that
/// normalises through a byte table, one over the 3-grams with the FNV-1a steps unrolled
/// (the length byte folded into a constant), and one over a 256-entry class table for all
/// the structural counts. The first version (a closure per structural count, a generic
/// hash loop per gram, a 64 KiB `u32` count table, 1-3-grams) took ~170 instructions per
/// byte.
pub fn extract(
    window: &[u8],
    scratch: &mut Scratch,
    indices: &mut Vec<i64>,
    values: &mut Vec<f32>,
) {
    indices.clear();
    values.clear();
    extract_append(window, scratch, indices, values);
}

/// [`extract`] without clearing: the window's entries are appended to `indices` and
/// `values` (which must have the same length), so a request's rows go straight into one
/// batch buffer.
pub(crate) fn extract_append(
    window: &[u8],
    scratch: &mut Scratch,
    indices: &mut Vec<i64>,
    values: &mut Vec<f32>,
) {
    let first = indices.len();
    let had_escape = normalize(window, &mut scratch.normalized);
    let norm = &scratch.normalized[..];

    // 2. Hashed n-grams, counted sparsely then L2-normalised.
    if scratch.counts.len() != NGRAM_BUCKETS {
        scratch.counts = vec![0; NGRAM_BUCKETS];
    }
    let counts = &mut scratch.counts[..];
    let mut hit = |h: u32| {
        // Masked: below NGRAM_BUCKETS (a power of two), far below i64::MAX.
        let b = h as usize & (NGRAM_BUCKETS - 1);
        let c = &mut counts[b];
        if *c == 0 {
            indices.push(b as i64);
        }
        *c = c.saturating_add(1);
    };
    for g in norm.windows(3) {
        let h = (FNV_3 ^ u32::from(g[0])).wrapping_mul(FNV_PRIME);
        let h = (h ^ u32::from(g[1])).wrapping_mul(FNV_PRIME);
        hit((h ^ u32::from(g[2])).wrapping_mul(FNV_PRIME));
    }
    let mut sumsq = 0u64;
    for &b in &indices[first..] {
        let c = u64::from(counts[b as usize]);
        sumsq += c * c;
    }
    // Integers below 2^53: the f64 sum is exact, as Python's.
    let l2 = (sumsq as f64).sqrt();
    for &b in &indices[first..] {
        let c = &mut counts[b as usize];
        values.push((f64::from(*c) / l2) as f32);
        *c = 0;
    }

    // 3. Structure of the window as sent, in one pass over a class table.
    let mut n = [0usize; 5];
    let mut run = 0usize;
    let mut longest = 0usize;
    for &b in window {
        let c = CLASS[usize::from(b)];
        n[0] += usize::from(c & C_NOT_ALNUM_SPACE != 0);
        n[1] += usize::from(c & C_INJECTION != 0);
        n[2] += usize::from(c & C_HIGH != 0);
        n[3] += usize::from(c & C_LETTER != 0);
        n[4] += usize::from(c & C_UPPER != 0);
        if c & C_PUNCT != 0 {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let mut s = [0.0f64; STRUCT_FEATURES];
    let len = window.len() as f64;
    s[0] = len.min(1024.0) / 1024.0;
    if !window.is_empty() {
        s[1] = n[0] as f64 / len;
        s[2] = n[1] as f64 / len;
        s[3] = n[2] as f64 / len;
        if n[3] > 0 {
            s[6] = n[4] as f64 / n[3] as f64;
        }
    }
    if std::str::from_utf8(window).is_err() {
        s[4] = 1.0;
    }
    s[5] = longest.min(16) as f64 / 16.0;
    if had_escape {
        s[7] = 1.0;
    }
    for (j, &v) in s.iter().enumerate() {
        if v != 0.0 {
            indices.push((NGRAM_BUCKETS + j) as i64);
            values.push(v as f32);
        }
    }
}

/// The features of one window as a dense vector of [`DIM`] floats (tests, tools).
pub fn extract_dense(window: &[u8]) -> Vec<f32> {
    let (mut i, mut v) = (Vec::new(), Vec::new());
    extract(window, &mut Scratch::default(), &mut i, &mut v);
    let mut out = vec![0.0; DIM];
    for (&i, &v) in i.iter().zip(&v) {
        out[i as usize] = v;
    }
    out
}

/// Step 1 of the recipe into `out`, framed for step 2 ([`FRAME_START`], the normalised
/// bytes, [`FRAME_END`]); whether a `%XX` escape was decoded.
fn normalize(window: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    out.reserve(window.len() + 2);
    out.push(FRAME_START);
    let mut escaped = false;
    let mut i = 0;
    while let Some(&b) = window.get(i) {
        i += 1;
        let mut b = b;
        if b == b'%' {
            if let (Some(h), Some(l)) = (
                window.get(i).copied().and_then(hex),
                window.get(i + 1).copied().and_then(hex),
            ) {
                b = h << 4 | l;
                i += 2;
                escaped = true;
            }
        }
        out.push(FOLD[usize::from(b)]);
    }
    out.push(FRAME_END);
    escaped
}

/// Step 1's byte map: ASCII letters lower-cased, ASCII digits to `0`, the rest unchanged.
const FOLD: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match b {
            b'A'..=b'Z' => b + 32,
            b'0'..=b'9' => b'0',
            _ => b,
        };
        i += 1;
    }
    t
};

const C_NOT_ALNUM_SPACE: u8 = 1;
const C_INJECTION: u8 = 2;
const C_HIGH: u8 = 4;
const C_LETTER: u8 = 8;
const C_UPPER: u8 = 16;
const C_PUNCT: u8 = 32;
const C_TRIVIAL: u8 = 64;

/// The classes of a byte the structural features count (step 3).
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let mut c = 0;
        if !(b.is_ascii_alphanumeric() || b == b' ') {
            c |= C_NOT_ALNUM_SPACE;
        }
        let mut j = 0;
        while j < INJECTION_PUNCT.len() {
            if INJECTION_PUNCT[j] == b {
                c |= C_INJECTION;
            }
            j += 1;
        }
        if b >= 0x80 {
            c |= C_HIGH;
        }
        if b.is_ascii_alphabetic() {
            c |= C_LETTER;
        }
        if b.is_ascii_uppercase() {
            c |= C_UPPER;
        }
        if b.is_ascii_punctuation() {
            c |= C_PUNCT;
        }
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@') {
            c |= C_TRIVIAL;
        }
        t[i] = c;
        i += 1;
    }
    t
};

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// FNV-1a (32 bit) state after the gram length 3, the first step of every gram's hash
/// (`fnv1a32(3, gram)`: the length byte, then the gram's bytes).
const FNV_3: u32 = (FNV_OFFSET ^ 3).wrapping_mul(FNV_PRIME);

/// FNV-1a (32 bit) of the n-gram's length then its bytes, reduced to a bucket (the
/// reference the unrolled hashes in [`extract`] are tested against).
#[cfg(test)]
fn bucket(n: usize, gram: &[u8]) -> usize {
    let mut h = FNV_OFFSET;
    // n is 1..=3.
    h ^= n as u32;
    h = h.wrapping_mul(FNV_PRIME);
    for &b in gram {
        h ^= u32::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h as usize % NGRAM_BUCKETS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(v: &[u8]) -> Vec<f32> {
        extract_dense(v)
    }

    #[test]
    fn empty_value_has_defined_features() {
        let f = features(b"");
        assert!(f.iter().all(|&x| x == 0.0));
        assert_eq!(windows(b"", 1024).count(), 1);
    }

    #[test]
    fn ngram_part_is_unit_length_and_structure_bounded() {
        for v in [
            &b"' or 1=1--"[..],
            b"\xff\xfe\x00<script>",
            b"%27%20union",
            b"a",
        ] {
            let f = features(v);
            let norm: f64 = f[..NGRAM_BUCKETS]
                .iter()
                .map(|&x| f64::from(x) * f64::from(x))
                .sum();
            assert!((norm - 1.0).abs() < 1e-5, "{norm}");
            assert!(f[NGRAM_BUCKETS..].iter().all(|&x| (0.0..=1.0).contains(&x)));
        }
        assert_eq!(features(b"\xff")[NGRAM_BUCKETS + 4], 1.0);
        assert_eq!(features(b"ok")[NGRAM_BUCKETS + 4], 0.0);
    }

    #[test]
    fn normalisation_folds_case_digits_and_one_level_of_escapes() {
        let grams = |v: &[u8]| features(v)[..NGRAM_BUCKETS].to_vec();
        assert_eq!(grams(b"UNION Select 12"), grams(b"union select 99"));
        assert_eq!(grams(b"%27%20OR"), grams(b"' or"));
        assert_ne!(grams(b"%2"), grams(b"%20"));
    }

    #[test]
    fn scratch_reuse_gives_the_same_features() {
        let mut scratch = Scratch::default();
        let (mut i1, mut v1, mut i2, mut v2) = (vec![], vec![], vec![], vec![]);
        extract(
            b"<img src=x onerror=alert(1)>",
            &mut scratch,
            &mut i1,
            &mut v1,
        );
        extract(b"something else entirely", &mut scratch, &mut i2, &mut v2);
        extract(
            b"<img src=x onerror=alert(1)>",
            &mut scratch,
            &mut i2,
            &mut v2,
        );
        assert_eq!((i1, v1), (i2, v2));
    }

    /// The unrolled hashes and the class table give what the recipe says: the framed
    /// 3-gram buckets of [`bucket`] with their counts, on every byte value.
    #[test]
    fn unrolled_hashes_equal_the_reference() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for v in [&b"' OR 1=1 -- %27%3c"[..], &all, b"aaaaaaaaaaaaaaaa", b"x"] {
            let mut norm = Vec::new();
            normalize(v, &mut norm);
            assert_eq!(norm.first(), Some(&FRAME_START));
            assert_eq!(norm.last(), Some(&FRAME_END));
            let mut want = std::collections::BTreeMap::<usize, u32>::new();
            for g in norm.windows(3) {
                *want.entry(bucket(3, g)).or_default() += 1;
            }
            let l2 = want.values().map(|&c| f64::from(c * c)).sum::<f64>().sqrt();
            let f = features(v);
            for (i, &x) in f[..NGRAM_BUCKETS].iter().enumerate() {
                let w = want.get(&i).map_or(0.0, |&c| (f64::from(c) / l2) as f32);
                assert_eq!(x.to_bits(), w.to_bits(), "bucket {i} of {v:?}");
            }
        }
        // A ' b < space 0xff: 3 bytes not letter/digit/space, 2 injection punctuation,
        // 1 high, 1 upper-case of 2 letters, longest punctuation run 1, invalid UTF-8.
        let s = features(b"A'b< \xff")[NGRAM_BUCKETS..].to_vec();
        let r = |a: f64, b: f64| (a / b) as f32;
        assert_eq!(
            s,
            [
                r(6.0, 1024.0),
                r(3.0, 6.0),
                r(2.0, 6.0),
                r(1.0, 6.0),
                1.0,
                r(1.0, 16.0),
                0.5,
                0.0
            ]
        );
        assert_eq!(features(b"%41")[NGRAM_BUCKETS + 7], 1.0);
    }

    #[test]
    fn long_values_are_cut_into_windows() {
        let v = vec![b'a'; 2500];
        let w: Vec<usize> = windows(&v, 1024).map(<[u8]>::len).collect();
        assert_eq!(w, [1024, 1024, 452]);
    }

    #[test]
    fn trivial_values() {
        assert!(is_trivial(b""));
        assert!(is_trivial(b"user5@example.com"));
        assert!(is_trivial(b"3f2a-9c_x.y"));
        assert!(!is_trivial(b"a b"));
        assert!(!is_trivial(b"../etc"));
        assert!(!is_trivial(b"\xff"));
        for b in 0..=255u8 {
            let want = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@');
            assert_eq!(is_trivial(&[b]), want, "{b:#x}");
        }
    }
}
