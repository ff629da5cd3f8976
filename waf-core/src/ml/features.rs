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
//! 2. Hashed character n-grams: every 1-, 2- and 3-gram of the normalised bytes goes to
//!    bucket `fnv1a32(n, gram) % NGRAM_BUCKETS`; the counts are L2-normalised. The vector is
//!    sparse (a value of `L` bytes hits at most `3L` buckets), and [`extract`] gives it as
//!    `(index, value)` pairs, which is also how the model takes it (`model.rs`).
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
pub const FEATURE_VERSION: u32 = 1;

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
    value
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'))
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
    counts: Vec<u32>,
}

/// The features of one window in sparse form: `(index, value)` pairs, zeros left out,
/// indices distinct and below [`DIM`]. `indices` and `values` are cleared first.
///
/// The n-gram entries come in the order their bucket was first hit, then the non-zero
/// structural features in order. The model sums `weight[index] * value`, so the order only
/// moves the last bits of the float sum.
pub fn extract(
    window: &[u8],
    scratch: &mut Scratch,
    indices: &mut Vec<i64>,
    values: &mut Vec<f32>,
) {
    indices.clear();
    values.clear();
    let had_escape = normalize(window, &mut scratch.normalized);
    let norm = &scratch.normalized;

    // 2. Hashed n-grams, counted sparsely then L2-normalised.
    if scratch.counts.len() != NGRAM_BUCKETS {
        scratch.counts = vec![0; NGRAM_BUCKETS];
    }
    for n in 1..=3usize {
        for gram in norm.windows(n) {
            let b = bucket(n, gram);
            if scratch.counts[b] == 0 {
                // b < NGRAM_BUCKETS, far below i64::MAX.
                indices.push(b as i64);
            }
            scratch.counts[b] += 1;
        }
    }
    let sumsq: f64 = indices
        .iter()
        .map(|&b| {
            let c = f64::from(scratch.counts[b as usize]);
            c * c
        })
        .sum();
    let l2 = sumsq.sqrt();
    for &b in indices.iter() {
        let c = &mut scratch.counts[b as usize];
        values.push((f64::from(*c) / l2) as f32);
        *c = 0;
    }

    // 3. Structure of the window as sent.
    let mut s = [0.0f64; STRUCT_FEATURES];
    let len = window.len() as f64;
    s[0] = len.min(1024.0) / 1024.0;
    if !window.is_empty() {
        let count = |f: &dyn Fn(u8) -> bool| window.iter().filter(|&&b| f(b)).count() as f64;
        s[1] = count(&|b| !(b.is_ascii_alphanumeric() || b == b' ')) / len;
        s[2] = count(&|b| INJECTION_PUNCT.contains(&b)) / len;
        s[3] = count(&|b| b >= 0x80) / len;
        let letters = count(&|b| b.is_ascii_alphabetic());
        if letters > 0.0 {
            s[6] = count(&|b| b.is_ascii_uppercase()) / letters;
        }
    }
    if std::str::from_utf8(window).is_err() {
        s[4] = 1.0;
    }
    let mut run = 0usize;
    let mut longest = 0usize;
    for &b in window {
        if b.is_ascii_punctuation() {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
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

/// Step 1 of the recipe into `out`; whether a `%XX` escape was decoded.
fn normalize(window: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let mut escaped = false;
    let mut i = 0;
    while i < window.len() {
        let mut b = window[i];
        i += 1;
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
        out.push(match b {
            b'A'..=b'Z' => b + 32,
            b'0'..=b'9' => b'0',
            _ => b,
        });
    }
    escaped
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// FNV-1a (32 bit) of the n-gram's length then its bytes, reduced to a bucket.
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
    }
}
