//! The differential corpus, the same for the tests and the benchmark: random strings of SQL
//! and HTML metacharacters from a fixed seed, every payload of the CRS regression tests and
//! of `../shared/datasets/dev.jsonl` (raw, percent-decoded, and split into parameter values),
//! every one- and two-byte string, and hand-written libinjection edge cases.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The shared folder beside the checkout (`../shared`).
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

/// Every input, deduplicated, in a fixed order.
pub fn all() -> Vec<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut push = |v: Vec<u8>| {
        if seen.insert(v.clone()) {
            out.push(v);
        }
    };
    for v in edge_cases() {
        push(v);
    }
    for v in short_strings() {
        push(v);
    }
    for v in crs_payloads() {
        push(v);
    }
    for v in dataset_payloads() {
        push(v);
    }
    for v in random_strings(0x5eed_1ec7_10b5_u64, 160_000) {
        push(v);
    }
    out
}

/// Every string of length 0, 1 and 2 bytes.
pub fn short_strings() -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for a in 0..=255u8 {
        out.push(vec![a]);
    }
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            out.push(vec![a, b]);
        }
    }
    out
}

/// Inputs that exercise libinjection's corners: unterminated strings and comments, MySQL
/// comment tricks, backslashes before quotes, `0x`/`0b`/`x''` literals, NUL bytes, long
/// words, many tokens, HTML comments and attribute contexts, entity-encoded schemes.
pub fn edge_cases() -> Vec<Vec<u8>> {
    let text: &[&str] = &[
        "1' or '1'='1",
        "1\" or \"1\"=\"1",
        "' or 1=1--",
        "1 union select 1,2,3",
        "1/*!union*/select",
        "1/*! union*/ select",
        "-1 or 1=1",
        "admin'--",
        "admin' #",
        "1;drop table x",
        "1 and sleep(5)",
        "x'",
        "x''",
        "x'4142'",
        "b'0101'",
        "0x41",
        "0b0101",
        "0X",
        "1e",
        "1e+",
        "1.e5",
        ".5",
        "1..2",
        "$$a$$",
        "$a$ b $a$",
        "$$",
        "@@version",
        "@",
        "@@",
        "@`x`",
        "`a`",
        "`",
        "[a]",
        "[",
        "{a b}",
        "{",
        "\\N",
        "\\",
        "'\\''",
        "'\\'",
        "\"\\\"\"",
        "--",
        "-- ",
        "--x",
        "#",
        "/*",
        "/**/",
        "/*/",
        "*/",
        "1--",
        "1-- -",
        "1#",
        "N'a'",
        "n'",
        "u&'a'",
        "e'a'",
        "q'[a]'",
        "q'",
        "Q'{a}'",
        "nq'<a>'",
        "1 union all select",
        "union distinct",
        "select * from users where id = 1 or 1=1",
        "1 and 1=1 -- -",
        "1) or (1=1",
        "1)) or ((1=1",
        "' || 1=1",
        "1 && 1",
        "1 div 1",
        "1 like 1",
        "1 not in (1)",
        "1 is not null",
        "a' like 'a",
        "select\x00 1",
        "1\x00' or 1=1",
        "1 or 1=1 into outfile 'x'",
        "sleep(1)",
        "benchmark(1,md5(1))",
        "1 order by 1",
        "1 group by 1 having 1=1",
        "';waitfor delay '0:0:5'--",
        "1;exec xp_cmdshell 'dir'",
        "select case when 1=1 then 1 else 0 end",
        "<script>alert(1)</script>",
        "<script",
        "<img src=x onerror=alert(1)>",
        "<a href=javascript:alert(1)>",
        "<a href=\"javascript:alert(1)\">",
        "<a href='jav&#x09;ascript:alert(1)'>",
        "<a href=\"&#106;avascript:\">",
        "<svg onload=alert(1)>",
        "<iframe src=data:text/html,x>",
        "<style>",
        "<!--",
        "<!-- x -->",
        "<!DOCTYPE html>",
        "<!-->",
        "<![CDATA[x]]>",
        "<?xml",
        "</script>",
        "<b>bold</b>",
        "<a title=x>",
        "a<b",
        "<",
        ">",
        "<>",
        "</",
        "<a",
        "<a ",
        "<a b",
        "<a b=",
        "<a b='",
        "<a b=\"",
        "<a b=`",
        "<a/b>",
        "<a//onclick=x>",
        "<x onclick=1",
        "\" onmouseover=\"alert(1)",
        "' onfocus='x",
        "` onload=`x",
        "x onerror=y",
        "vbscript:x",
        "<a href=vbscript:x>",
        "<object data=x>",
        "<embed src=x>",
        "<form action=x>",
        "<base href=x>",
        "<math><mi xlink:href=x>",
        "<div style=\"x:expression(1)\">",
        "<a href=\" javascript:x\">",
        "<a href=\"\x01javascript:x\">",
        "<a href=\"data:text/html;base64,x\">",
        "<img src=`x` onerror=`y`>",
        "<img\x00src=x onerror=y>",
        "<IMG SRC=JaVaScRiPt:alert(1)>",
        "<body onload!#$%&()*~+-_.,:;?@[/|\\]^`=alert(1)>",
        "<xss:script>",
        "<a href=&#0000106avascript:x>",
        "<a href=&#x6A;avascript:x>",
        "<a href=&#X6a;avascript:x>",
    ];
    let mut out: Vec<Vec<u8>> = text.iter().map(|s| s.as_bytes().to_vec()).collect();
    out.push(vec![b'a'; 100]);
    out.push(vec![b'\''; 100]);
    out.push(b"1 ".repeat(50));
    out.push(b"select ".repeat(40));
    out.push(b"<a ".repeat(40));
    out.push(b"(".repeat(60));
    out.push([b"a".repeat(40), b" union select 1".to_vec()].concat());
    out.push([b"1 union select ".to_vec(), b"x".repeat(64)].concat());
    out
}

/// Random strings of SQL and HTML pieces from a fixed seed (xorshift64*).
pub fn random_strings(seed: u64, count: usize) -> Vec<Vec<u8>> {
    const PIECES: &[&str] = &[
        "'",
        "\"",
        "`",
        ";",
        "(",
        ")",
        "-",
        "--",
        "#",
        "/*",
        "*/",
        "/*!",
        "=",
        "<",
        ">",
        "!",
        "&",
        "|",
        "+",
        ".",
        ",",
        "_",
        " ",
        " ",
        " ",
        "\t",
        "\n",
        "\\",
        "%",
        "@",
        "@@",
        "$",
        "$$",
        "{",
        "}",
        "[",
        "]",
        ":",
        "?",
        "^",
        "~",
        "*",
        "/",
        "0",
        "1",
        "2",
        "9",
        "0x",
        "0b",
        "1e5",
        "1.5",
        "a",
        "x",
        "n",
        "N",
        "b",
        "e",
        "q",
        "u&",
        "select",
        "SELECT",
        "union",
        "UNION ALL",
        "or",
        "OR",
        "and",
        "AND",
        "not",
        "null",
        "from",
        "where",
        "like",
        "in",
        "is",
        "into",
        "sleep",
        "char",
        "concat",
        "version",
        "order by",
        "group by",
        "having",
        "case",
        "when",
        "then",
        "end",
        "exec",
        "drop",
        "insert",
        "update",
        "delete",
        "table",
        "users",
        "admin",
        "information_schema",
        "waitfor delay",
        "benchmark",
        "ascii",
        "substring",
        "<script",
        "</script>",
        "<img",
        "<svg",
        "<a",
        "<iframe",
        "<!--",
        "-->",
        "<!",
        "<?",
        "</",
        "/>",
        "src=",
        "href=",
        "onerror=",
        "onload=",
        "onclick",
        "style=",
        "javascript:",
        "vbscript:",
        "data:",
        "&#",
        "&#x",
        "&lt;",
        "alert(1)",
        "x",
        "\x00",
        "\x0b",
        "\x7f",
        "\u{a0}",
        "\u{e9}",
    ];
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    (0..count)
        .map(|_| {
            let pieces = 1 + (next() % 12) as usize;
            let mut s = Vec::new();
            for _ in 0..pieces {
                let r = next();
                if r % 16 == 0 {
                    s.push((r >> 8) as u8);
                } else {
                    s.extend_from_slice(PIECES[(r >> 8) as usize % PIECES.len()].as_bytes());
                }
            }
            s
        })
        .collect()
}

/// Every string scalar in the CRS regression tests, with its decoded forms.
pub fn crs_payloads() -> Vec<Vec<u8>> {
    let root = shared_dir().join("crs/tests/regression");
    let mut files = Vec::new();
    collect_yaml(&root, &mut files);
    assert!(
        !files.is_empty(),
        "no CRS regression tests under {}",
        root.display()
    );
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read CRS test");
        let Ok(value) = yaml_serde::from_str::<yaml_serde::Value>(&text) else {
            continue;
        };
        let mut strings = Vec::new();
        collect_strings(&value, &mut strings);
        for s in strings {
            expand(s.as_bytes(), &mut out);
        }
    }
    out
}

/// The path, query, body and header values of every request in `dev.jsonl`, decoded.
pub fn dataset_payloads() -> Vec<Vec<u8>> {
    let path = shared_dir().join("datasets/dev.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        for key in ["path", "query", "body"] {
            if let Some(s) = v.get(key).and_then(|s| s.as_str()) {
                expand(s.as_bytes(), &mut out);
            }
        }
        if let Some(h) = v.get("headers").and_then(|h| h.as_object()) {
            for value in h.values().filter_map(|v| v.as_str()) {
                expand(value.as_bytes(), &mut out);
            }
        }
    }
    out
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_yaml(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

fn collect_strings(v: &yaml_serde::Value, out: &mut Vec<String>) {
    match v {
        yaml_serde::Value::String(s) => out.push(s.clone()),
        yaml_serde::Value::Sequence(seq) => seq.iter().for_each(|v| collect_strings(v, out)),
        yaml_serde::Value::Mapping(m) => m.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The raw value, its percent-decoded form, and each decoded `key=value` part of it.
fn expand(raw: &[u8], out: &mut Vec<Vec<u8>>) {
    if raw.is_empty() {
        return;
    }
    out.push(raw.to_vec());
    let decoded = percent_decode(raw);
    if decoded != raw {
        out.push(decoded);
    }
    let query = raw.splitn(2, |&b| b == b'?').last().unwrap_or(raw);
    for part in query.split(|&b| b == b'&' || b == b';') {
        let mut kv = part.splitn(2, |&b| b == b'=');
        let key = kv.next().unwrap_or_default();
        if let Some(value) = kv.next() {
            out.push(percent_decode(key));
            out.push(percent_decode(value));
        }
    }
}

fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < s.len() => match (hex(s[i + 1]), hex(s[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}
