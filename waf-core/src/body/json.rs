//! JSON request bodies → `ARGS_POST` pairs with flattened names.
//!
//! # Naming
//!
//! Every scalar becomes one argument whose name is its path from the root, prefixed with
//! `json` and joined with `.`, as Coraza (`internal/bodyprocessors/json.go`) names them:
//!
//! | body                      | arguments                                   |
//! |---------------------------|---------------------------------------------|
//! | `{"a":{"b":1}}`           | `json.a.b` = `1`                            |
//! | `{"items":[1,"x"]}`       | `json.items.0` = `1`, `json.items.1` = `x`  |
//! | `[{"a":true}]`            | `json.0.a` = `true`                         |
//! | `"text"` (top-level)      | `json` = `text`                             |
//! | `{"":null}`               | `json.` = `` (empty)                        |
//!
//! ModSecurity v3 (`json.cc`) differs in two spellings: array elements are `array_0`,
//! `array_1` (`json.items.array_0`) and an empty key is `empty-key`. We use Coraza's index
//! names because they are what CRS exclusions written for Coraza match. Like Coraza, we also
//! add an argument per array, named by the array's path and holding its length
//! (`json.items` = `2`): ModSecurity 2 named every element by the array's path, and CRS
//! rules that look for a key at the end of an argument name (934210 `__contained_by$`)
//! need that name to exist. Arguments keep document order, and duplicate keys are all kept (ModSecurity),
//! where Coraza's map keeps only the last.
//!
//! # Values
//!
//! Strings are unescaped (`\uXXXX` and surrogate pairs → UTF-8; a lone surrogate → U+FFFD).
//! Numbers are kept exactly as written, `true`/`false` as text, `null` as the empty value
//! (both engines agree). Empty objects and arrays produce nothing.
//!
//! # Errors
//!
//! The grammar is strict RFC 8259 as yajl (ModSecurity) enforces it: no comments, no
//! trailing commas, no trailing garbage, strict number syntax, no raw control characters in
//! strings. Invalid UTF-8 inside strings is accepted and passed through as bytes (Coraza
//! does the same; yajl would reject it), so bytes reach the rules instead of being hidden
//! behind an error. On error the arguments parsed so far are kept, as with yajl's
//! callbacks, and the returned text is the whole `REQBODY_ERROR_MSG`
//! (`JSON parsing error: ...`). An empty body is not an error (ModSecurity skips it).
//!
//! # Limits
//!
//! The parser is iterative: an explicit stack bounded by `max_depth` replaces recursion, so
//! `[[[[...` cannot exhaust the Rust stack. At most `max_args` arguments are produced;
//! reaching the limit stops parsing with an error (`SecArgumentsLimit`). Because names
//! repeat their parents' keys, the total size of names is also capped (8× the body plus
//! 64 KiB; see `name_budget`), so a long key over a large array cannot multiply memory;
//! values are copies of distinct input ranges, so they total less than the input.

/// Parses a JSON body and appends flattened `(name, value)` pairs to `out`.
pub(crate) fn parse(
    input: &[u8],
    max_depth: usize,
    max_args: usize,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<(), super::BodyError> {
    if input.is_empty() {
        return Ok(());
    }
    let mut p = Parser {
        input,
        pos: 0,
        path: b"json".to_vec(),
        stack: Vec::new(),
        max_depth,
        max_args,
        emitted: 0,
        name_bytes: 0,
        scratch: Vec::new(),
        limit_hit: false,
    };
    p.run(out).map_err(|e| super::BodyError {
        kind: if p.limit_hit {
            super::BodyErrorKind::Limit
        } else {
            super::BodyErrorKind::Malformed
        },
        message: format!("JSON parsing error: {} at offset {}", e, p.pos),
    })
}

/// One open container: where the path is cut back to after each member, and for arrays
/// the index of the current element.
enum Frame {
    Object { restore: usize },
    Array { restore: usize, index: usize },
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    /// Name of the value being parsed (`json.a.0`).
    path: Vec<u8>,
    stack: Vec<Frame>,
    max_depth: usize,
    max_args: usize,
    emitted: usize,
    /// Bytes of argument names produced so far, checked against [`name_budget`].
    name_bytes: usize,
    /// Reused buffer for object keys.
    scratch: Vec<u8>,
    /// The error being returned is a limit (depth, arguments, name bytes), not bad JSON.
    limit_hit: bool,
}

impl Parser<'_> {
    fn run(&mut self, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Result<(), &'static str> {
        'value: loop {
            self.skip_ws();
            match self.peek() {
                None => return Err("parse error: premature EOF"),
                Some(b'{') => {
                    self.pos += 1;
                    self.open(Frame::Object {
                        restore: self.path.len(),
                    })?;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        self.stack.pop();
                    } else {
                        self.member_key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.pos += 1;
                    let restore = self.path.len();
                    self.open(Frame::Array { restore, index: 0 })?;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        self.stack.pop();
                        self.emit(out, b"0".to_vec())?;
                    } else {
                        push_index(&mut self.path, 0);
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    let mut value = Vec::new();
                    self.string(&mut value)?;
                    self.emit(out, value)?;
                }
                Some(b't') => {
                    self.literal(b"true")?;
                    self.emit(out, b"true".to_vec())?;
                }
                Some(b'f') => {
                    self.literal(b"false")?;
                    self.emit(out, b"false".to_vec())?;
                }
                Some(b'n') => {
                    self.literal(b"null")?;
                    self.emit(out, Vec::new())?;
                }
                Some(b'-' | b'0'..=b'9') => {
                    let start = self.pos;
                    self.number()?;
                    let raw = self.input[start..self.pos].to_vec();
                    self.emit(out, raw)?;
                }
                Some(_) => return Err("lexical error: invalid char in json text"),
            }
            // A value is complete: close containers until one wants another value.
            loop {
                self.skip_ws();
                match self.stack.last_mut() {
                    None => {
                        if self.pos < self.input.len() {
                            return Err("parse error: trailing garbage");
                        }
                        return Ok(());
                    }
                    Some(Frame::Object { restore }) => {
                        let restore = *restore;
                        self.path.truncate(restore);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                self.member_key()?;
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                self.stack.pop();
                            }
                            None => return Err("parse error: premature EOF"),
                            Some(_) => return Err(
                                "parse error: after key and value, inside map, I expect ',' or '}'",
                            ),
                        }
                    }
                    Some(Frame::Array { restore, index }) => {
                        let restore = *restore;
                        match self.input.get(self.pos) {
                            Some(b',') => {
                                *index += 1;
                                let index = *index;
                                self.pos += 1;
                                self.path.truncate(restore);
                                push_index(&mut self.path, index);
                                continue 'value;
                            }
                            Some(b']') => {
                                let len = *index + 1;
                                self.pos += 1;
                                self.path.truncate(restore);
                                self.stack.pop();
                                // Coraza's array argument: the array's own name holds its length.
                                self.emit(out, len.to_string().into_bytes())?;
                            }
                            None => return Err("parse error: premature EOF"),
                            Some(_) => {
                                return Err("parse error: after array element, I expect ',' or ']'")
                            }
                        }
                    }
                }
            }
        }
    }

    fn open(&mut self, frame: Frame) -> Result<(), &'static str> {
        if self.stack.len() >= self.max_depth {
            self.limit_hit = true;
            return Err("JSON depth limit exceeded");
        }
        self.stack.push(frame);
        Ok(())
    }

    /// Parses `"key" :` and extends the path with `.key`.
    fn member_key(&mut self) -> Result<(), &'static str> {
        if self.peek() != Some(b'"') {
            return Err("parse error: invalid object key (must be a string)");
        }
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        let r = self.string(&mut key);
        self.path.push(b'.');
        self.path.extend_from_slice(&key);
        self.scratch = key;
        r?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err("parse error: object key and value must be separated by a colon (':')");
        }
        self.pos += 1;
        Ok(())
    }

    fn emit(
        &mut self,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
        value: Vec<u8>,
    ) -> Result<(), &'static str> {
        if self.emitted >= self.max_args {
            self.limit_hit = true;
            return Err("too many arguments");
        }
        self.name_bytes = self.name_bytes.saturating_add(self.path.len());
        if self.name_bytes > name_budget(self.input.len()) {
            self.limit_hit = true;
            return Err("argument names too long");
        }
        self.emitted += 1;
        out.push((self.path.clone(), value));
        Ok(())
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), &'static str> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else if word.starts_with(&self.input[self.pos..]) {
            Err("parse error: premature EOF")
        } else {
            Err("lexical error: invalid string in json text")
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<(), &'static str> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => {
                return Err(
                    "lexical error: malformed number, a digit is required after the minus sign",
                )
            }
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(
                    "lexical error: malformed number, a digit is required after the decimal point",
                );
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(
                    "lexical error: malformed number, a digit is required after the exponent",
                );
            }
            self.digits();
        }
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// Parses a string starting at `"` and appends its unescaped bytes to `buf`.
    fn string(&mut self, buf: &mut Vec<u8>) -> Result<(), &'static str> {
        self.pos += 1; // opening quote
        loop {
            let rest = &self.input[self.pos..];
            let Some(i) = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            else {
                self.pos = self.input.len();
                return Err("parse error: premature EOF");
            };
            buf.extend_from_slice(&rest[..i]);
            self.pos += i;
            match self.input[self.pos] {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(c) = self.peek() else {
                        return Err("parse error: premature EOF");
                    };
                    self.pos += 1;
                    match c {
                        b'"' => buf.push(b'"'),
                        b'\\' => buf.push(b'\\'),
                        b'/' => buf.push(b'/'),
                        b'b' => buf.push(0x08),
                        b'f' => buf.push(0x0c),
                        b'n' => buf.push(b'\n'),
                        b'r' => buf.push(b'\r'),
                        b't' => buf.push(b'\t'),
                        b'u' => {
                            let cp = self.unicode_escape()?;
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut tmp = [0u8; 4];
                            buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                        }
                        _ => return Err("lexical error: inside a string, '\\' occurs before a character which it may not"),
                    }
                }
                _ => return Err("lexical error: invalid character inside string"),
            }
        }
    }

    /// After `\u`: reads 4 hex digits and, for a high surrogate followed by `\uDC00..`,
    /// the low half. Returns the code point (a lone surrogate is returned as-is and
    /// becomes U+FFFD).
    fn unicode_escape(&mut self) -> Result<u32, &'static str> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.input[self.pos..].starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                return Ok(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
            }
            // Not a low surrogate: emit the lone high half, reparse the escape.
            self.pos = save;
        }
        Ok(hi)
    }

    fn hex4(&mut self) -> Result<u32, &'static str> {
        let Some(digits) = self.input.get(self.pos..self.pos + 4) else {
            self.pos = self.input.len();
            return Err(
                "lexical error: invalid (non-hex) character occurs after '\\u' inside string",
            );
        };
        let mut v = 0u32;
        for &d in digits {
            let Some(h) = super::urlencoded::hex_val(d) else {
                return Err(
                    "lexical error: invalid (non-hex) character occurs after '\\u' inside string",
                );
            };
            v = v << 4 | u32::from(h);
        }
        self.pos += 4;
        Ok(v)
    }
}

/// Most bytes of flattened names one body may produce: names repeat their parents' keys,
/// so `{"<1 MB key>":[1,1,...]}` would otherwise cost `max_args` × 1 MB. Real documents stay
/// far below 8× their size (a name is at most a few keys longer than the value it labels).
fn name_budget(input_len: usize) -> usize {
    input_len.saturating_mul(8).saturating_add(64 * 1024)
}

/// Appends `.index` to the path.
fn push_index(path: &mut Vec<u8>, index: usize) {
    path.push(b'.');
    path.extend_from_slice(index.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str) -> (Vec<(String, String)>, Result<(), String>) {
        run_bytes(input.as_bytes(), 1024, 1000)
    }

    fn run_bytes(
        input: &[u8],
        depth: usize,
        args: usize,
    ) -> (Vec<(String, String)>, Result<(), String>) {
        let mut out = Vec::new();
        let r = parse(input, depth, args, &mut out).map_err(|e| e.message);
        let out = out
            .into_iter()
            .map(|(a, b)| {
                (
                    String::from_utf8_lossy(&a).into_owned(),
                    String::from_utf8_lossy(&b).into_owned(),
                )
            })
            .collect();
        (out, r)
    }

    fn s(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn flat_object() {
        let (out, r) = run(r#"{"foo":"bar","mod":"sec"}"#);
        assert_eq!(r, Ok(()));
        assert_eq!(out, s(&[("json.foo", "bar"), ("json.mod", "sec")]));
    }

    #[test]
    fn nested_and_arrays() {
        let (out, r) = run(
            r#" { "data": {"name": "John", "age": 30}, "items": [1, 2.5e3, -0, [true, null]], "e": {}, "f": [] } "#,
        );
        assert_eq!(r, Ok(()));
        assert_eq!(
            out,
            s(&[
                ("json.data.name", "John"),
                ("json.data.age", "30"),
                ("json.items.0", "1"),
                ("json.items.1", "2.5e3"),
                ("json.items.2", "-0"),
                ("json.items.3.0", "true"),
                ("json.items.3.1", ""),
                ("json.items.3", "2"),
                ("json.items", "4"),
                ("json.f", "0"),
            ])
        );
    }

    #[test]
    fn top_level_array_and_scalar() {
        let (out, r) = run(r#"[{"a":false},"x"]"#);
        assert_eq!(r, Ok(()));
        assert_eq!(
            out,
            s(&[("json.0.a", "false"), ("json.1", "x"), ("json", "2")])
        );
        let (out, r) = run(r#""just text""#);
        assert_eq!(r, Ok(()));
        assert_eq!(out, s(&[("json", "just text")]));
        let (out, r) = run("42");
        assert_eq!(r, Ok(()));
        assert_eq!(out, s(&[("json", "42")]));
    }

    #[test]
    fn escapes() {
        // CRS 920540-3 sends {"testarg": "\\u0065val"}: one backslash survives.
        let (out, r) = run(
            r#"{"testarg": "\\u0065val", "u": "\u0061\u00e9\ud83d\ude00\n\/", "lone": "\ud800x"}"#,
        );
        assert_eq!(r, Ok(()));
        assert_eq!(
            out,
            s(&[
                ("json.testarg", "\\u0065val"),
                ("json.u", "aé😀\n/"),
                ("json.lone", "\u{FFFD}x"),
            ])
        );
    }

    #[test]
    fn escaped_keys_and_empty_key_and_duplicates() {
        let (out, r) = run(r#"{"a\"b":1,"":2,"a\"b":3}"#);
        assert_eq!(r, Ok(()));
        assert_eq!(
            out,
            s(&[("json.a\"b", "1"), ("json.", "2"), ("json.a\"b", "3")])
        );
    }

    #[test]
    fn errors_keep_parsed_args() {
        let (out, r) = run(r#"{"a":"1","b":<script>}"#);
        assert_eq!(out, s(&[("json.a", "1")]));
        let e = r.unwrap_err();
        assert!(e.starts_with("JSON parsing error: "), "{e}");
        for bad in [
            "{",
            "{\"a\"",
            "{\"a\":",
            "[1,]",
            "{\"a\":1,}",
            "[1 2]",
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            "nul",
            "{\"a\":1}}",
            "{a:1}",
            "\"abc",
            "\"a\u{1}\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[1]//c",
            " ",
            "a=b&c=d",
        ] {
            let (_, r) = run(bad);
            assert!(r.is_err(), "{bad:?} should fail");
        }
        assert_eq!(run("").1, Ok(()));
    }

    #[test]
    fn invalid_utf8_passes_through() {
        let (out, r) = run_bytes(b"{\"k\xff\":\"v\xfe\"}", 8, 8);
        assert_eq!(r, Ok(()));
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn depth_limit() {
        let deep = "[".repeat(100_000);
        let (_, r) = run(&deep);
        assert!(r.unwrap_err().contains("depth"));
        let ok = format!("{}1{}", "[".repeat(3), "]".repeat(3));
        let (out, r) = run_bytes(ok.as_bytes(), 3, 10);
        assert_eq!(r, Ok(()));
        assert_eq!(
            out,
            s(&[
                ("json.0.0.0", "1"),
                ("json.0.0", "1"),
                ("json.0", "1"),
                ("json", "1")
            ])
        );
        let (_, r) = run_bytes(ok.as_bytes(), 2, 10);
        assert!(r.is_err());
        let objs = "{\"a\":".repeat(50_000);
        assert!(run(&objs).1.is_err());
    }

    #[test]
    fn args_limit() {
        let big = format!("[{}0]", "0,".repeat(100_000));
        let (out, r) = run(&big);
        assert_eq!(out.len(), 1000);
        assert!(r.unwrap_err().contains("too many arguments"));
    }

    /// Limits are reported as limits (the engine refuses the body), syntax errors as
    /// malformed bodies.
    #[test]
    fn error_kinds() {
        use crate::body::BodyErrorKind::{Limit, Malformed};
        let kind = |doc: &str, depth, args| {
            parse(doc.as_bytes(), depth, args, &mut Vec::new())
                .unwrap_err()
                .kind
        };
        assert_eq!(kind("[[[1]]]", 2, 10), Limit);
        assert_eq!(kind("[1,2,3]", 10, 2), Limit);
        let key = "k".repeat(100_000);
        assert_eq!(
            kind(&format!("{{\"{key}\":[{}1]}}", "1,".repeat(999)), 10, 1000),
            Limit
        );
        assert_eq!(kind("[1,", 10, 10), Malformed);
        assert_eq!(kind("{\"a\" 1}", 10, 10), Malformed);
    }

    #[test]
    fn name_amplification_is_capped() {
        let key = "k".repeat(100_000);
        let doc = format!("{{\"{key}\":[{}1]}}", "1,".repeat(999));
        let (out, r) = run(&doc);
        assert!(r.unwrap_err().contains("argument names too long"));
        let total: usize = out.iter().map(|(n, _)| n.len()).sum();
        assert!(total <= doc.len() * 8 + 64 * 1024);
        // An ordinary nested document is far from the cap.
        let doc = format!(
            "{{\"data\":{{\"items\":[{}]}}}}",
            vec!["{\"id\":1,\"n\":\"x\"}"; 499].join(",")
        );
        let (out, r) = run(&doc);
        assert_eq!(r, Ok(()));
        assert_eq!(out.len(), 999); // 998 values and the array's length
    }

    #[test]
    fn truncations_never_panic() {
        let doc = r#"{"a":[1,{"b":"\ud83d\ude00x\"y"},-1.5E+3,true,false,null],"c":{"":""}}"#;
        let (full, r) = run(doc);
        assert_eq!(r, Ok(()));
        assert_eq!(full.len(), 8);
        for i in 0..doc.len() {
            let _ = run_bytes(&doc.as_bytes()[..i], 16, 100);
        }
    }
}
