//! XML request bodies → the `XML` collection (`XML:/*`, `XML://@*`).
//!
//! CRS reads XML only through two XPath expressions, so this is not a DOM and has no XPath
//! engine: one pass collects exactly what those two expressions return.
//!
//! - `XML://@*`: every attribute value, unescaped, in document order ([`Xml::attr_values`]).
//!   ModSecurity (libxml2) and Coraza agree.
//! - `XML:/*`: here the engines differ. ModSecurity evaluates the XPath and takes
//!   `xmlNodeGetContent` of the root element: **one** value, the concatenation of all
//!   descendant text and CDATA, whitespace included ([`Xml::root_text`]). Coraza
//!   (`internal/bodyprocessors/xml.go`) returns **one value per text node**, trimmed, empty
//!   ones dropped ([`Xml::text_nodes`]). Both are produced; the evaluator picks. In the CRS
//!   v4.28 regression suite the two forms never differ: of the 475 well-formed XML bodies,
//!   311 have text and each has exactly one text node with no surrounding whitespace (the
//!   rest carry their payload in attributes). ModSecurity's form catches payloads split
//!   across elements; Coraza's makes anchored patterns and `MATCHED_VAR` precise.
//!
//! # Safety (XXE) and strictness
//!
//! Nothing is fetched: external entities (`SYSTEM`, `PUBLIC`) and parameter entities are
//! never resolved, and a reference to one stays in the text verbatim, so `&xxe;` payloads
//! remain visible to rules. Internal general entities (`<!ENTITY x "...">` in the internal
//! subset) are expanded, because the application's parser expands them: a payload carried
//! in an entity's definition must reach the rules (issue 13). Expansion is bounded: at most
//! [`crate::limits::DEFAULT_XML_ENTITY_LIMIT`] declarations, nesting [`crate::limits::DEFAULT_XML_ENTITY_DEPTH`] deep, and
//! [`crate::limits::DEFAULT_XML_EXPANSION_LIMIT`] bytes of expanded text per document; past any of them the document is
//! refused ("entity expansion limit exceeded"), never half-expanded (billion laughs). Structure is checked as libxml2 would: one root element, matching
//! end tags, well-formed tags and attributes, nothing but whitespace, comments and
//! processing instructions outside the root. Unlike libxml2 we accept a bare `&` and
//! undeclared entities (kept as text, as Go's non-strict decoder does), do not normalise
//! whitespace in attribute values and do not reject duplicate attributes. Bytes are not
//! required to be UTF-8. On error nothing is returned (as in both engines) and the text is
//! `REQBODY_ERROR_MSG`.
//!
//! # Limits
//!
//! Nesting deeper than `max_depth` is an error (libxml2 stops at 256 without
//! `XML_PARSE_HUGE`). The parser does not recurse; output is at most twice the input size.

/// What the `XML` collection exposes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Xml {
    /// `XML:/*` as ModSecurity: all text inside the root element, concatenated.
    pub(crate) root_text: Vec<u8>,
    /// `XML:/*` as Coraza: each text or CDATA node inside the root, trimmed, non-empty.
    pub(crate) text_nodes: Vec<Vec<u8>>,
    /// `XML://@*`: every attribute value in document order.
    pub(crate) attr_values: Vec<Vec<u8>>,
}

/// Parses an XML document; see the module docs for what is kept.
pub(crate) fn parse(input: &[u8], max_depth: usize) -> Result<Xml, super::BodyError> {
    let mut p = Parser {
        input,
        pos: 0,
        stack: Vec::new(),
        max_depth,
        xml: Xml::default(),
        seen_root: false,
        text: Vec::new(),
        entities: Entities::default(),
        limit_hit: false,
    };
    match p.run() {
        Ok(()) => Ok(p.xml),
        Err(e) => Err(super::BodyError {
            kind: if p.limit_hit {
                super::BodyErrorKind::Limit
            } else {
                super::BodyErrorKind::Malformed
            },
            message: format!(
                "XML parsing error: XML: Failed parsing document. ({e} at offset {})",
                p.pos
            ),
        }),
    }
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    /// Open elements, as ranges of their names in `input`.
    stack: Vec<(usize, usize)>,
    max_depth: usize,
    xml: Xml,
    seen_root: bool,
    /// The text node being accumulated (decoded).
    text: Vec<u8>,
    /// Internal general entities of the DTD.
    entities: Entities,
    /// The error being returned is a limit (depth, entity expansion), not bad XML.
    limit_hit: bool,
}

/// Internal general entities: name → replacement text (raw), and the expansion budget.
#[derive(Default)]
struct Entities {
    defs: Vec<(Vec<u8>, Vec<u8>)>,
    expanded: usize,
    over_limit: bool,
}

type Res = Result<(), &'static str>;

impl Parser<'_> {
    fn run(&mut self) -> Res {
        if self.input.starts_with(b"\xEF\xBB\xBF") {
            self.pos = 3;
        }
        while self.pos < self.input.len() {
            if self.input[self.pos] == b'<' {
                let rest = &self.input[self.pos..];
                if rest.starts_with(b"<!--") {
                    self.flush_text();
                    self.skip_past(4, b"-->", "unterminated comment")?;
                } else if rest.starts_with(b"<![CDATA[") {
                    if self.stack.is_empty() {
                        return Err("CDATA outside the root element");
                    }
                    self.flush_text();
                    let start = self.pos + 9;
                    let end = memchr::memmem::find(&self.input[start..], b"]]>")
                        .map(|i| start + i)
                        .ok_or("unterminated CDATA section")?;
                    let data = &self.input[start..end];
                    self.xml.root_text.extend_from_slice(data);
                    push_trimmed(&mut self.xml.text_nodes, data);
                    self.pos = end + 3;
                } else if rest.starts_with(b"<?") {
                    self.flush_text();
                    self.skip_past(2, b"?>", "unterminated processing instruction")?;
                } else if rest.starts_with(b"<!DOCTYPE") {
                    if self.seen_root {
                        return Err("DOCTYPE after the root element");
                    }
                    self.doctype()?;
                } else if rest.starts_with(b"</") {
                    self.flush_text();
                    self.end_tag()?;
                } else {
                    self.flush_text();
                    self.start_tag()?;
                }
            } else {
                let end = memchr::memchr(b'<', &self.input[self.pos..])
                    .map_or(self.input.len(), |i| self.pos + i);
                let raw = &self.input[self.pos..end];
                if self.stack.is_empty() {
                    if !raw.iter().all(|b| is_ws(*b)) {
                        return Err("text outside the root element");
                    }
                } else {
                    decode_text(raw, &mut self.text, &mut self.entities, 0);
                    if self.entities.over_limit {
                        self.limit_hit = true;
                        return Err("entity expansion limit exceeded");
                    }
                }
                self.pos = end;
            }
        }
        if !self.stack.is_empty() {
            return Err("premature end of data, unclosed element");
        }
        if !self.seen_root {
            return Err("no root element");
        }
        Ok(())
    }

    /// Ends the current text node.
    fn flush_text(&mut self) {
        if self.text.is_empty() {
            return;
        }
        self.xml.root_text.extend_from_slice(&self.text);
        push_trimmed(&mut self.xml.text_nodes, &self.text);
        self.text.clear();
    }

    /// Moves past the first `end` found `skip` bytes after the current position.
    fn skip_past(&mut self, skip: usize, end: &[u8], err: &'static str) -> Res {
        let from = self.pos + skip;
        let i = memchr::memmem::find(&self.input[from..], end).ok_or(err)?;
        self.pos = from + i + end.len();
        Ok(())
    }

    /// Skips `<!DOCTYPE ...>` including an internal subset, without interpreting it.
    fn doctype(&mut self) -> Res {
        let mut i = self.pos + 9;
        let mut in_subset = false;
        while let Some(&c) = self.input.get(i) {
            match c {
                b'"' | b'\'' => {
                    let close = memchr::memchr(c, &self.input[i + 1..])
                        .ok_or("unterminated literal in DOCTYPE")?;
                    i += close + 2;
                    continue;
                }
                b'<' if self.input[i..].starts_with(b"<!--") => {
                    let close = memchr::memmem::find(&self.input[i + 4..], b"-->")
                        .ok_or("unterminated comment in DOCTYPE")?;
                    i += 4 + close + 3;
                    continue;
                }
                b'<' if in_subset && self.input[i..].starts_with(b"<!ENTITY") => {
                    i = self.entity_decl(i)?;
                    continue;
                }
                b'[' => in_subset = true,
                b']' => in_subset = false,
                b'>' if !in_subset => {
                    self.pos = i + 1;
                    return Ok(());
                }
                _ => {}
            }
            i += 1;
        }
        Err("unterminated DOCTYPE")
    }

    /// `<!ENTITY name "value">` at `i`: records an internal general entity; returns the
    /// index after the declaration. Parameter (`%`) and external (`SYSTEM`/`PUBLIC`)
    /// entities are skipped, not recorded.
    fn entity_decl(&mut self, i: usize) -> Result<usize, &'static str> {
        let input = self.input;
        let mut j = i + b"<!ENTITY".len();
        let ws = |j: &mut usize| {
            while input.get(*j).is_some_and(|&c| is_ws(c)) {
                *j += 1;
            }
        };
        ws(&mut j);
        let parameter = input.get(j) == Some(&b'%');
        if parameter {
            j += 1;
            ws(&mut j);
        }
        let name_start = j;
        while input
            .get(j)
            .is_some_and(|&c| !is_ws(c) && c != b'"' && c != b'\'' && c != b'>')
        {
            j += 1;
        }
        let name = &input[name_start..j];
        ws(&mut j);
        let mut value = None;
        if let Some(&q) = input.get(j).filter(|&&c| c == b'"' || c == b'\'') {
            let close =
                memchr::memchr(q, &input[j + 1..]).ok_or("unterminated literal in DOCTYPE")?;
            value = Some(&input[j + 1..j + 1 + close]);
            j += close + 2;
        }
        // The rest of the declaration (SYSTEM "uri", NDATA ...), quoted literals skipped.
        while let Some(&c) = input.get(j) {
            match c {
                b'"' | b'\'' => {
                    let close = memchr::memchr(c, &input[j + 1..])
                        .ok_or("unterminated literal in DOCTYPE")?;
                    j += close + 2;
                }
                b'>' => {
                    j += 1;
                    break;
                }
                _ => j += 1,
            }
        }
        if let (false, Some(v), false) = (parameter, value, name.is_empty()) {
            if self.entities.defs.len() >= crate::limits::DEFAULT_XML_ENTITY_LIMIT {
                self.limit_hit = true;
                return Err("entity expansion limit exceeded (declarations)");
            }
            self.entities.defs.push((name.to_vec(), v.to_vec()));
        }
        Ok(j)
    }

    fn start_tag(&mut self) -> Res {
        if self.stack.is_empty() && self.seen_root {
            return Err("extra content at the end of the document");
        }
        self.pos += 1;
        let (ns, ne) = self.name()?;
        loop {
            let had_ws = self.skip_ws();
            match self.input.get(self.pos) {
                None => return Err("unterminated start tag"),
                Some(b'>') => {
                    self.pos += 1;
                    if self.stack.len() >= self.max_depth {
                        self.limit_hit = true;
                        return Err("depth limit exceeded");
                    }
                    self.stack.push((ns, ne));
                    self.seen_root = true;
                    return Ok(());
                }
                Some(b'/') => {
                    if self.input.get(self.pos + 1) != Some(&b'>') {
                        return Err("expected '>' after '/'");
                    }
                    self.pos += 2;
                    if self.stack.len() >= self.max_depth {
                        self.limit_hit = true;
                        return Err("depth limit exceeded");
                    }
                    self.seen_root = true;
                    return Ok(());
                }
                Some(_) => {
                    if !had_ws {
                        return Err("attributes must be separated by whitespace");
                    }
                    self.attribute()?;
                }
            }
        }
    }

    fn attribute(&mut self) -> Res {
        self.name()?;
        self.skip_ws();
        if self.input.get(self.pos) != Some(&b'=') {
            return Err("expected '=' after attribute name");
        }
        self.pos += 1;
        self.skip_ws();
        let quote = match self.input.get(self.pos) {
            Some(&q @ (b'"' | b'\'')) => q,
            _ => return Err("attribute value must be quoted"),
        };
        let start = self.pos + 1;
        let end = memchr::memchr(quote, &self.input[start..])
            .map(|i| start + i)
            .ok_or("unterminated attribute value")?;
        let raw = &self.input[start..end];
        if raw.contains(&b'<') {
            return Err("'<' in attribute value");
        }
        let mut value = Vec::with_capacity(raw.len());
        decode_text(raw, &mut value, &mut self.entities, 0);
        if self.entities.over_limit {
            self.limit_hit = true;
            return Err("entity expansion limit exceeded");
        }
        self.xml.attr_values.push(value);
        self.pos = end + 1;
        Ok(())
    }

    fn end_tag(&mut self) -> Res {
        self.pos += 2;
        let (ns, ne) = self.name()?;
        self.skip_ws();
        if self.input.get(self.pos) != Some(&b'>') {
            return Err("expected '>' in end tag");
        }
        self.pos += 1;
        let Some((os, oe)) = self.stack.pop() else {
            return Err("end tag without start tag");
        };
        if self.input[os..oe] != self.input[ns..ne] {
            return Err("mismatched end tag");
        }
        Ok(())
    }

    /// Reads an XML name; returns its range.
    fn name(&mut self) -> Result<(usize, usize), &'static str> {
        let start = self.pos;
        match self.input.get(start) {
            Some(&c) if c.is_ascii_alphabetic() || c == b'_' || c == b':' || c >= 0x80 => {}
            _ => return Err("invalid element or attribute name"),
        }
        let len = self.input[start..]
            .iter()
            .take_while(|&&c| {
                c.is_ascii_alphanumeric() || matches!(c, b'_' | b':' | b'-' | b'.') || c >= 0x80
            })
            .count();
        self.pos = start + len;
        Ok((start, start + len))
    }

    /// Skips XML whitespace; returns whether there was any.
    fn skip_ws(&mut self) -> bool {
        let start = self.pos;
        while self.input.get(self.pos).is_some_and(|&c| is_ws(c)) {
            self.pos += 1;
        }
        self.pos > start
    }
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Appends `data` without surrounding whitespace to `nodes` unless it is blank.
fn push_trimmed(nodes: &mut Vec<Vec<u8>>, data: &[u8]) {
    let start = data.iter().position(|&c| !is_ws(c));
    let end = data.iter().rposition(|&c| !is_ws(c));
    if let (Some(s), Some(e)) = (start, end) {
        nodes.push(data[s..=e].to_vec());
    }
}

/// Appends `raw` to `out`, expanding the predefined entities, character references and
/// declared internal entities (recursively, within the budget of `entities`; past it,
/// `entities.over_limit` is set). Anything else after `&` is copied verbatim.
fn decode_text(raw: &[u8], out: &mut Vec<u8>, entities: &mut Entities, depth: usize) {
    let mut i = 0;
    while i < raw.len() {
        let Some(amp) = memchr::memchr(b'&', &raw[i..]).map(|a| i + a) else {
            out.extend_from_slice(&raw[i..]);
            return;
        };
        out.extend_from_slice(&raw[i..amp]);
        let semi = raw[amp..]
            .iter()
            .take(12)
            .position(|&c| c == b';')
            .map(|s| amp + s);
        let decoded = semi.and_then(|s| entity(&raw[amp + 1..s]));
        if let (Some(s), None) = (semi, decoded) {
            let name = &raw[amp + 1..s];
            if let Some(k) = entities.defs.iter().position(|(n, _)| n == name) {
                let value = entities.defs[k].1.clone();
                entities.expanded += value.len();
                if depth >= crate::limits::DEFAULT_XML_ENTITY_DEPTH
                    || entities.expanded > crate::limits::DEFAULT_XML_EXPANSION_LIMIT
                {
                    entities.over_limit = true;
                    return;
                }
                decode_text(&value, out, entities, depth + 1);
                if entities.over_limit {
                    return;
                }
                i = s + 1;
                continue;
            }
        }
        match (semi, decoded) {
            (Some(s), Some(ch)) => {
                let mut tmp = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                i = s + 1;
            }
            _ => {
                out.push(b'&');
                i = amp + 1;
            }
        }
    }
}

/// The character an entity name (between `&` and `;`) stands for, if predefined or a
/// character reference.
fn entity(name: &[u8]) -> Option<char> {
    match name {
        b"lt" => Some('<'),
        b"gt" => Some('>'),
        b"amp" => Some('&'),
        b"quot" => Some('"'),
        b"apos" => Some('\''),
        _ => {
            let digits = name.strip_prefix(b"#")?;
            let (digits, radix) = match digits.strip_prefix(b"x") {
                Some(hex) => (hex, 16),
                None => (digits, 10),
            };
            if digits.is_empty() {
                return None;
            }
            let s = std::str::from_utf8(digits).ok()?;
            char::from_u32(u32::from_str_radix(s, radix).ok()?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[Vec<u8>]) -> Vec<String> {
        v.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    #[test]
    fn crs_attribute_probe() {
        // The shape of most CRS XML tests (921110-12, 941100-7).
        let x = parse(
            br#"<?xml version="1.0"?><root><a probe="&#10;POST / HTTP/1.1"></a><b x='&lt;script xmlns=&quot;h&quot;&gt;'/></root>"#,
            64,
        )
        .unwrap();
        assert_eq!(
            strs(&x.attr_values),
            vec!["\nPOST / HTTP/1.1", "<script xmlns=\"h\">"]
        );
        assert!(x.root_text.is_empty());
        assert!(x.text_nodes.is_empty());
    }

    #[test]
    fn text_both_forms() {
        let x = parse(
            b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<catalog>\n  <tag>ftp%3A%2F%2F1.1.1.1</tag>\n  <t>a &amp; <![CDATA[<b>]]> c</t><!-- no --></catalog>\n",
            64,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&x.root_text),
            "\n  ftp%3A%2F%2F1.1.1.1\n  a & <b> c"
        );
        assert_eq!(
            strs(&x.text_nodes),
            vec!["ftp%3A%2F%2F1.1.1.1", "a &", "<b>", "c"]
        );
    }

    #[test]
    fn no_entity_expansion() {
        let doc = br#"<?xml version="1.0"?>
<!DOCTYPE foo [ <!ELEMENT foo ANY > <!ENTITY xxe SYSTEM "file:///etc/passwd" > <!-- ] > -->]>
<foo>&xxe;&unknown &#x41;&#65;&#xZZ;</foo>"#;
        let x = parse(doc, 64).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&x.root_text),
            "&xxe;&unknown AA&#xZZ;"
        );
    }

    #[test]
    fn soap_namespaces() {
        let doc = br#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><m:q xmlns:m="urn:x">1' or '1'='1</m:q></soapenv:Body></soapenv:Envelope>"#;
        let x = parse(doc, 64).unwrap();
        assert_eq!(strs(&x.text_nodes), vec!["1' or '1'='1"]);
        assert_eq!(x.attr_values.len(), 2);
    }

    #[test]
    fn malformed() {
        for bad in [
            &b""[..],
            b"test",
            b"<a>",
            b"<a></b>",
            b"<a></a><b/>",
            b"<a></a>junk",
            b"<a x=1/>",
            b"<a x=\"<\"/>",
            b"<a x=\"1\"y=\"2\"/>",
            b"<a x/>",
            b"</a>",
            b"<1a/>",
            b"<a><!-- x</a>",
            b"<a><![CDATA[x</a>",
            b"<a/ >",
            b"<a x=\"1",
            b"<!DOCTYPE a [",
            b"<a><?pi</a>",
        ] {
            let r = parse(bad, 64);
            let e = r.expect_err(&String::from_utf8_lossy(bad));
            assert!(e
                .message
                .starts_with("XML parsing error: XML: Failed parsing document."));
            assert_eq!(e.kind, crate::body::BodyErrorKind::Malformed);
        }
        // CRS 920240-4 sends attribute quotes escaped with backslashes.
        assert!(parse(br#"<a xmlns:x=\"u\"/>"#, 64).is_err());
    }

    #[test]
    fn depth_and_size() {
        let deep = b"<a>".repeat(100_000);
        let e = parse(&deep, 1024).unwrap_err();
        assert!(e.message.contains("depth limit"));
        assert_eq!(e.kind, crate::body::BodyErrorKind::Limit);
        let ok = format!("{}{}", "<a>".repeat(3), "</a>".repeat(3));
        assert!(parse(ok.as_bytes(), 3).is_ok());
        assert!(parse(ok.as_bytes(), 2).is_err());
        let wide = format!("<r>{}</r>", "<a x=\"1\">t</a>".repeat(10_000));
        let x = parse(wide.as_bytes(), 8).unwrap();
        assert_eq!(x.attr_values.len(), 10_000);
        assert_eq!(x.text_nodes.len(), 10_000);
    }

    #[test]
    fn invalid_utf8_and_truncation_never_panic() {
        let x = parse(b"\xEF\xBB\xBF<r a=\"\xff\">\xfe</r>", 8).unwrap();
        assert_eq!(x.attr_values, vec![vec![0xff]]);
        assert_eq!(x.root_text, vec![0xfe]);
        let doc = br#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e "v">]><r a="&amp;1"><b>t&#x1F600;</b><![CDATA[c]]><!--k--><?p?></r>"#;
        assert!(parse(doc, 8).is_ok());
        for i in 0..doc.len() {
            let _ = parse(&doc[..i], 8);
        }
        let _ = parse(b"<r>&#xFFFFFFFFFF;&#;&#x;&;</r>", 8).unwrap();
    }
}
