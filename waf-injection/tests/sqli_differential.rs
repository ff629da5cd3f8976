//! `detect_sqli` against C libinjection 3.9.2 (the oracle, loaded at test time) on every
//! input of the differential corpus: same verdict, same fingerprint.

mod common;

use common::corpus;
use common::oracle::Oracle;

/// Inputs where we knowingly differ from the oracle, each with the reason. Empty: there
/// are none.
const KNOWN_DIFFERENCES: &[(&[u8], &str)] = &[];

#[test]
fn sqli_matches_libinjection() {
    let oracle = Oracle::load();
    let inputs = corpus::all();
    let mut compared = 0usize;
    let mut hits = 0usize;
    let mut differences = Vec::new();
    for input in &inputs {
        let ours = waf_injection::detect_sqli(input).map(|fp| fp.as_bytes().to_vec());
        let theirs = oracle.sqli(input);
        compared += 1;
        hits += usize::from(theirs.is_some());
        if ours != theirs && !KNOWN_DIFFERENCES.iter().any(|(k, _)| k == input) {
            differences.push((input, ours, theirs));
        }
    }
    eprintln!(
        "sqli differential: {compared} inputs compared, {hits} SQLi by the oracle, {} differences",
        differences.len()
    );
    for (input, ours, theirs) in differences.iter().take(20) {
        eprintln!(
            "  {:?}: ours {:?}, oracle {:?}",
            escape(input),
            ours.as_deref().map(escape),
            theirs.as_deref().map(escape)
        );
    }
    assert!(compared >= 200_000, "corpus too small: {compared}");
    assert!(differences.is_empty(), "{} differences", differences.len());
}

fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Beyond the shared corpus: random byte strings built from pieces that reach the
/// tokenizer's corners (31/32-byte values, NUL and high bytes inside words and strings,
/// every quote form, `$tag$`, `q'[`, unterminated comments), from a fixed seed.
#[test]
fn sqli_matches_libinjection_on_random_pieces() {
    const PIECES: &[&[u8]] = &[
        b"'",
        b"\"",
        b"`",
        b"\\",
        b"\\'",
        b"''",
        b"#",
        b"--",
        b"-- ",
        b"--x",
        b"/*",
        b"*/",
        b"/*!",
        b"/*/",
        b"(",
        b")",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b";",
        b".",
        b":",
        b"::",
        b"=",
        b"<=>",
        b"!",
        b"!!",
        b"||",
        b"&&",
        b"@",
        b"@@",
        b"$",
        b"$$",
        b"$a$",
        b"$1.0",
        b" ",
        b"\t",
        b"\n",
        b"\0",
        b"\xa0",
        b"\xff",
        b"\x80",
        b"0x",
        b"0xAF",
        b"0b1",
        b"1e",
        b"1.e",
        b"1e5",
        b"1.5f",
        b"1d ",
        b".5",
        b"x'",
        b"b'01'",
        b"n'",
        b"nq'[",
        b"q'<",
        b"q'\x90",
        b"u&'",
        b"e'",
        b"\\N",
        b"1",
        b"99",
        b"union",
        b"UNION ALL",
        b"select",
        b"or",
        b"and",
        b"not",
        b"in",
        b"like",
        b"is",
        b"null",
        b"sleep",
        b"user",
        b"if",
        b"collate",
        b"utf8_bin",
        b"into",
        b"outfile",
        b"sp_password",
        b"char",
        b"int",
        b"lock in share mode",
        b"order by",
        b"a",
        b"abcdefghijklmnopqrstuvwxyz01234",
        b"abcdefghijklmnopqrstuvwxyz012345",
        b"select.x",
        b"select`x`",
        b"`select`",
        b"current_user",
        b"waitfor delay",
        b"begin try",
        b"not similar to",
    ];
    let oracle = Oracle::load();
    let mut state = 0x0dd_ba11_u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut differences = Vec::new();
    let mut hits = 0usize;
    // `SQLI_RANDOM_INPUTS=5000000` for a longer run.
    let count: usize = std::env::var("SQLI_RANDOM_INPUTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    for _ in 0..count {
        let mut input = Vec::new();
        for _ in 0..1 + next() % 20 {
            let r = next();
            if r % 8 == 0 {
                input.push((r >> 8) as u8);
            } else {
                input.extend_from_slice(PIECES[(r >> 8) as usize % PIECES.len()]);
            }
        }
        let ours = waf_injection::detect_sqli(&input).map(|fp| fp.as_bytes().to_vec());
        let theirs = oracle.sqli(&input);
        hits += usize::from(theirs.is_some());
        if ours != theirs {
            differences.push((input, ours, theirs));
        }
    }
    eprintln!(
        "sqli random pieces: {count} inputs compared, {hits} SQLi by the oracle, {} differences",
        differences.len()
    );
    for (input, ours, theirs) in differences.iter().take(20) {
        eprintln!(
            "  {:?}: ours {:?}, oracle {:?}",
            escape(input),
            ours.as_deref().map(escape),
            theirs.as_deref().map(escape)
        );
    }
    assert!(differences.is_empty(), "{} differences", differences.len());
}
