//! Runs every vector of Coraza's transformation test data (ModSecurity's
//! `secrules-language-tests` format) against [`Transformation::apply`].
//!
//! The vectors live outside the repository, in the shared CRS checkout; each file is named
//! after the transformation it tests (a few vectors carry other names, such as `md5-test1`
//! or `invalidLen`, so the file name decides). Strings are unescaped as ModSecurity's own
//! runner does (`json2bin` in `test/unit/unit_test.cc`), see [`json2bin`].

use std::path::Path;

use super::{Transformation, ALL};

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/crs/reference/coraza/testdata/transformations"
);

/// Vectors we deliberately do not pass: `(file stem, index in file, reason)`. Empty.
const SKIP: &[(&str, usize, &str)] = &[];

/// Reads `\xHH` and `\uHHHH` escapes the way ModSecurity's test runner does, after JSON
/// decoding: `\x` followed by two ASCII alphanumerics becomes the byte `sscanf("%x")` reads
/// from them, then `\u` followed by four alphanumerics becomes the low byte of
/// `sscanf("%4x")`. When `sscanf` reads no digit (`\xga`) the runner reuses the previous
/// value of its variable; we do the same, starting from 0. The escapes are text in the JSON
/// (`"\\x00"`), so a JSON `"\u0000"` is already a NUL byte and is left alone.
fn json2bin(s: &str) -> Vec<u8> {
    let mut last = 0u32;
    let pass = |input: Vec<u8>, marker: u8, width: usize, last: &mut u32| -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len());
        let mut i = 0;
        while i < input.len() {
            let escape = input[i] == b'\\'
                && input.get(i + 1) == Some(&marker)
                && input.len() >= i + 2 + width
                && input[i + 2..i + 2 + width]
                    .iter()
                    .all(u8::is_ascii_alphanumeric);
            if escape {
                let digits: Vec<u32> = input[i + 2..i + 2 + width]
                    .iter()
                    .map_while(|&b| (b as char).to_digit(16))
                    .collect();
                if !digits.is_empty() {
                    *last = digits.iter().fold(0, |acc, d| acc * 16 + d);
                }
                out.push(*last as u8);
                i += 2 + width;
            } else {
                out.push(input[i]);
                i += 1;
            }
        }
        out
    };
    let bytes = pass(s.as_bytes().to_vec(), b'x', 2, &mut last);
    pass(bytes, b'u', 4, &mut last)
}

#[test]
fn json2bin_reads_escapes_like_modsecurity() {
    assert_eq!(json2bin(r"a\x41\x4a\u0042"), b"aAJB");
    assert_eq!(json2bin(r"\xag\xga\x0a"), b"\x0a\x0a\x0a");
    assert_eq!(json2bin(r"\x4"), br"\x4");
    assert_eq!(json2bin("\u{e9}\0"), "\u{e9}\0".as_bytes());
}

#[test]
fn coraza_vectors() {
    let mut files: Vec<_> = std::fs::read_dir(VECTORS)
        .unwrap_or_else(|e| panic!("reading {VECTORS}: {e}"))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 35, "one file per transformation");

    let (mut passed, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for path in &files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("file name");
        let t = Transformation::from_name(stem)
            .unwrap_or_else(|| panic!("no transformation named {stem}"));
        for (n, case) in read_cases(path).iter().enumerate() {
            if SKIP.iter().any(|&(f, i, _)| f == stem && i == n) {
                skipped += 1;
                continue;
            }
            let input = json2bin(&case.input);
            let expected = json2bin(&case.output);
            let got = t.apply(&input);
            if got.as_ref() == expected.as_slice() {
                passed += 1;
            } else {
                failures.push(format!(
                    "{stem}[{n}] ({}): input {:?}\n   expected {:?}\n   got      {:?}",
                    case.name,
                    String::from_utf8_lossy(&input),
                    String::from_utf8_lossy(&expected),
                    String::from_utf8_lossy(&got),
                ));
            }
        }
    }
    eprintln!(
        "transformation vectors: {passed} passed, {} failed, {skipped} skipped",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(passed + skipped, 358);
}

struct Case {
    name: String,
    input: String,
    output: String,
}

fn read_cases(path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path).expect("readable vector file");
    let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let field = |case: &serde_json::Value, key: &str| {
        case[key].as_str().map(str::to_owned).unwrap_or_default()
    };
    value
        .as_array()
        .expect("an array of cases")
        .iter()
        .map(|case| Case {
            name: field(case, "name"),
            input: field(case, "input"),
            output: field(case, "output"),
        })
        .collect()
}

#[test]
fn names_round_trip() {
    for t in ALL {
        assert_eq!(Transformation::from_name(t.name()), Some(t.clone()));
        assert_eq!(Transformation::from_name(&t.name().to_uppercase()), Some(t));
    }
    assert_eq!(
        Transformation::from_name("normalisePath"),
        Some(Transformation::NormalizePath)
    );
    assert_eq!(
        Transformation::from_name("NORMALISEPATHWIN"),
        Some(Transformation::NormalizePathWin)
    );
    assert_eq!(Transformation::from_name("none"), None);
    assert_eq!(Transformation::from_name("nope"), None);
}

#[test]
fn owned_always_differs_from_input() {
    let inputs: [&[u8]; 8] = [
        b"",
        b"plain",
        b"%zz",
        b"&#;",
        b"\\",
        b"..",
        b"0x",
        b"\xff\xfe\x00",
    ];
    for t in ALL {
        for input in inputs {
            if let std::borrow::Cow::Owned(out) = t.apply(input) {
                assert_ne!(out.as_slice(), input, "{} on {input:?}", t.name());
            }
        }
    }
}

/// Request bytes must never make a transformation panic: run every transformation over
/// pseudo-random strings built from the bytes the decoders care about, including truncated
/// escapes and invalid UTF-8, and check the `Cow` contract on each.
#[test]
fn random_inputs_never_panic() {
    const ALPHABET: &[u8] = b"%uUxX+&#;\\/.*-<!>0123456789abcdefgABFz \t\n\r\x00\x0b\x0c\xa0\xc2\xc3\xe2\xf0\x80\xbf\xff";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64*: deterministic, no dependency.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..3000 {
        let len = (next() % 24) as usize;
        let input: Vec<u8> = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        for t in ALL {
            match t.apply(&input) {
                std::borrow::Cow::Borrowed(out) => assert_eq!(out, input.as_slice()),
                std::borrow::Cow::Owned(out) => assert_ne!(out, input, "{}", t.name()),
            }
        }
    }
}

/// Every byte a step outputs has a class [`Transformation::output_classes`] gives for its
/// input (the plan's class summaries rely on it), on values made of every byte class.
#[test]
fn output_classes_hold_every_output_byte() {
    let alphabet: &[u8] =
        b"aZz09%+&\\ \t\n\x0b\x0c\r/.\"'^,;*-#<>!()=x\x00\xa0\xc2\xef\xbc\xa1\xe2\x80\xa8&#;lt/*_|`{}$:?@[]~\x01\x7f";
    for v in super::features::generated_values(alphabet, 0x9e37_79b9_7f4a_7c15).take(20_000) {
        let f = super::features::of(&v);
        for t in ALL {
            let out = super::features::of(&t.apply(&v));
            assert_eq!(
                out & !t.output_classes(f),
                0,
                "{} of {v:?} has classes its output classes leave out",
                t.name()
            );
        }
    }
}

/// A step that [`Transformation::may_change`] says cannot change a value really returns
/// it unchanged, on values made of every byte class and plain bytes (the skip in
/// `eval::cache` relies on it).
#[test]
fn features_never_skip_a_change() {
    let alphabet: &[u8] =
        b"aZz09%+&\\ \t\n\x0b\x0c\r/.\"'^,;*-#<>!()=x\x00\xa0\xc2\xef\xbc\xa1\xe2\x80\xa8&#;lt";
    let mut checked = 0;
    for v in super::features::generated_values(alphabet, 0x2545_f491_4f6c_dd1d).take(20_000) {
        let f = super::features::of(&v);
        for t in ALL {
            if !t.may_change(f) {
                checked += 1;
                assert!(
                    matches!(t.apply(&v), std::borrow::Cow::Borrowed(_)),
                    "{} changed {v:?} though its features say it cannot",
                    t.name()
                );
            }
        }
    }
    assert!(checked > 20_000, "only {checked} skips checked");
}

/// [`Transformation::apply_into`] gives what [`Transformation::apply`] gives (changed or
/// not, and the same bytes), into a buffer that held an earlier value.
#[test]
fn apply_into_matches_apply() {
    let alphabet: &[u8] = b"aZz09%+&\\ \t\n\r/.\"'^,;*=x\x00\xa0\xc2\xe2\x80\xa8&#;ltQUJD";
    let mut out = b"left over".to_vec();
    for v in super::features::generated_values(alphabet, 0x5851_f42d_4c95_7f2d).take(20_000) {
        for t in ALL {
            match t.apply(&v) {
                std::borrow::Cow::Borrowed(_) => {
                    assert!(!t.apply_into(&v, &mut out), "{} of {v:?}", t.name())
                }
                std::borrow::Cow::Owned(want) => {
                    assert!(t.apply_into(&v, &mut out), "{} of {v:?}", t.name());
                    assert_eq!(out, want, "{} of {v:?}", t.name());
                }
            }
        }
    }
}
