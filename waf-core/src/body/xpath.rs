//! A subset of XPath 1.0 for `XML:` targets beyond `XML:/*` and `XML://@*`.
//!
//! ModSecurity evaluates `XML:/xpath` with libxml2 and takes each resulting node's content
//! (`xmlNodeGetContent`: an element's concatenated descendant text, an attribute's value).
//! No maintained Rust crate evaluates XPath 1.0 over a safe parser, so the document is
//! parsed with `roxmltree` (no external entities, internal ones bounded against billion
//! laughs) and this module evaluates location paths over it:
//!
//! - absolute paths of `/` (child) and `//` (descendant-or-self) steps;
//! - node tests: `name`, `prefix:name` (prefixes bound by the rule's `xmlns` actions),
//!   `*`, `prefix:*`, `text()`, `node()`, and `@name`, `@prefix:name`, `@*` as a last step;
//! - predicates: `[n]` (position among the step's matches for each context node), `[last()]`,
//!   `[@attr]`, `[@attr='v']`, `[name='v']` (a child element with that content),
//!   `[text()='v']`, several in a row.
//!
//! Anything else (functions, axes by name, unions, relative paths) is refused at load with
//! the expression and what is not supported. A body that is not well-formed XML or not
//! UTF-8 yields no values (the XML body processor has set `REQBODY_ERROR` already).
//!
//! Cost: the document is parsed once per rule evaluation that reads such a target, bounded
//! by [`MAX_NODES`]; only rule sets that use these expressions pay it.

use roxmltree::{Document, Node, ParsingOptions};

/// Most nodes parsed for XPath evaluation; a bigger document yields no values.
pub(crate) const MAX_NODES: u32 = 200_000;

/// A compiled expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct XPath {
    text: String,
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Step {
    /// `//` before the step.
    descendant: bool,
    test: Test,
    predicates: Vec<Predicate>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Test {
    /// An element name; `ns` is the namespace URI (None: no namespace), `local` None is `*`.
    Element {
        ns: Option<String>,
        any_ns: bool,
        local: Option<String>,
    },
    /// `any_ns`: `@*`, every attribute whatever its namespace (as libxml2).
    Attribute {
        ns: Option<String>,
        any_ns: bool,
        local: Option<String>,
    },
    Text,
    Node,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Predicate {
    Position(usize),
    Last,
    HasAttr(String),
    AttrEq(String, String),
    ChildEq(String, String),
    TextEq(String),
}

impl XPath {
    /// Compiles `text` with the `prefix -> URI` bindings of the rule's `xmlns` actions.
    pub(crate) fn compile(text: &str, namespaces: &[(String, String)]) -> Result<XPath, String> {
        let bad = |what: &str| format!("unsupported XPath expression {text:?}: {what}");
        let mut rest = text.trim();
        if !rest.starts_with('/') {
            return Err(bad("only absolute location paths are supported"));
        }
        let mut steps = Vec::new();
        while !rest.is_empty() {
            let descendant = if let Some(r) = rest.strip_prefix("//") {
                rest = r;
                true
            } else if let Some(r) = rest.strip_prefix('/') {
                rest = r;
                false
            } else {
                return Err(bad("expected '/'"));
            };
            // The step runs to the next '/' outside brackets and quotes.
            let mut end = rest.len();
            let (mut depth, mut quote) = (0usize, None);
            for (i, c) in rest.char_indices() {
                match (quote, c) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, '\'' | '"') => quote = Some(c),
                    (None, '[') => depth += 1,
                    (None, ']') => depth = depth.saturating_sub(1),
                    (None, '/') if depth == 0 => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            let (step_text, after) = rest.split_at(end);
            rest = after;
            let (test_text, mut preds_text) = match step_text.find('[') {
                Some(i) => step_text.split_at(i),
                None => (step_text, ""),
            };
            let test = parse_test(test_text.trim(), namespaces).map_err(|w| bad(&w))?;
            let mut predicates = Vec::new();
            while let Some(p) = preds_text.trim_start().strip_prefix('[') {
                let close = p.find(']').ok_or_else(|| bad("unclosed '['"))?;
                predicates.push(parse_predicate(p[..close].trim()).map_err(|w| bad(&w))?);
                preds_text = &p[close + 1..];
            }
            if !preds_text.trim().is_empty() {
                return Err(bad("unexpected text after a predicate"));
            }
            let last_only = matches!(test, Test::Attribute { .. } | Test::Text);
            if last_only && !rest.is_empty() {
                return Err(bad("attribute and text() steps must be last"));
            }
            steps.push(Step {
                descendant,
                test,
                predicates,
            });
        }
        if steps.is_empty() {
            return Err(bad("empty path"));
        }
        Ok(XPath {
            text: text.to_string(),
            steps,
        })
    }

    /// The expression as written.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Calls `f` with the content of each resulting node of `document`, in document order.
    pub(crate) fn evaluate(&self, document: &[u8], f: &mut dyn FnMut(&[u8])) {
        let Ok(text) = std::str::from_utf8(document) else {
            return;
        };
        let options = ParsingOptions {
            allow_dtd: true,
            nodes_limit: MAX_NODES,
            ..ParsingOptions::default()
        };
        let Ok(doc) = Document::parse_with_options(text, options) else {
            return;
        };
        let mut context = vec![doc.root()];
        for (i, step) in self.steps.iter().enumerate() {
            let last = i + 1 == self.steps.len();
            if let Test::Attribute { ns, any_ns, local } = &step.test {
                for node in expand(&context, step.descendant) {
                    for a in node.attributes() {
                        let ns_ok = *any_ns || a.namespace() == ns.as_deref();
                        if ns_ok && local.as_deref().is_none_or(|l| l == a.name()) {
                            f(a.value().as_bytes());
                        }
                    }
                }
                return;
            }
            let mut next = Vec::new();
            for node in expand(&context, step.descendant) {
                let matched: Vec<Node<'_, '_>> =
                    node.children().filter(|c| step.test.accepts(c)).collect();
                let count = matched.len();
                for (pos, c) in matched.into_iter().enumerate() {
                    if step.predicates.iter().all(|p| p.holds(&c, pos + 1, count)) {
                        next.push(c);
                    }
                }
            }
            next.sort_by_key(|n| n.id().get());
            next.dedup_by_key(|n| n.id().get());
            context = next;
            if last {
                break;
            }
        }
        for node in context {
            f(content(&node).as_bytes());
        }
    }
}

/// The nodes a step starts from: the context, or with `//` every descendant-or-self.
fn expand<'a, 'i>(context: &[Node<'a, 'i>], descendant: bool) -> Vec<Node<'a, 'i>> {
    if !descendant {
        return context.to_vec();
    }
    let mut out: Vec<Node<'a, 'i>> = context.iter().flat_map(|n| n.descendants()).collect();
    out.sort_by_key(|n| n.id().get());
    out.dedup_by_key(|n| n.id().get());
    out
}

/// `xmlNodeGetContent`: an element's descendant text, a text node's text.
fn content(node: &Node<'_, '_>) -> String {
    if node.is_text() {
        return node.text().unwrap_or_default().to_string();
    }
    node.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect()
}

impl Test {
    fn accepts(&self, node: &Node<'_, '_>) -> bool {
        match self {
            Test::Element { ns, any_ns, local } => {
                node.is_element()
                    && (*any_ns || node.tag_name().namespace() == ns.as_deref())
                    && local.as_deref().is_none_or(|l| l == node.tag_name().name())
            }
            Test::Text => node.is_text(),
            Test::Node => node.is_element() || node.is_text(),
            Test::Attribute { .. } => false,
        }
    }
}

impl Predicate {
    fn holds(&self, node: &Node<'_, '_>, position: usize, count: usize) -> bool {
        match self {
            Predicate::Position(n) => position == *n,
            Predicate::Last => position == count,
            Predicate::HasAttr(a) => node.attribute(a.as_str()).is_some(),
            Predicate::AttrEq(a, v) => node.attribute(a.as_str()) == Some(v.as_str()),
            Predicate::ChildEq(name, v) => node
                .children()
                .any(|c| c.is_element() && c.tag_name().name() == name && content(&c) == *v),
            Predicate::TextEq(v) => content(node) == *v,
        }
    }
}

fn parse_test(t: &str, namespaces: &[(String, String)]) -> Result<Test, String> {
    let resolve = |prefix: &str| -> Result<Option<String>, String> {
        namespaces
            .iter()
            .find(|(p, _)| p == prefix)
            .map(|(_, uri)| Some(uri.clone()))
            .ok_or_else(|| format!("prefix {prefix:?} is not bound by an xmlns action"))
    };
    let name_test = |n: &str| -> Result<(Option<String>, bool, Option<String>), String> {
        let (ns, any_ns, local) = match n.split_once(':') {
            Some((p, l)) => (resolve(p)?, false, l),
            None if n == "*" => (None, true, "*"),
            None => (None, false, n),
        };
        if local != "*" && !is_name(local) {
            return Err(format!("{n:?} is not a name test"));
        }
        Ok((ns, any_ns, (local != "*").then(|| local.to_string())))
    };
    Ok(match t {
        "text()" => Test::Text,
        "node()" => Test::Node,
        _ if t.starts_with('@') => {
            let (ns, any_ns, local) = name_test(&t[1..])?;
            Test::Attribute { ns, any_ns, local }
        }
        _ if t.contains('(') || t.contains("::") => {
            return Err(format!("{t:?}: functions and named axes are not supported"))
        }
        _ => {
            let (ns, any_ns, local) = name_test(t)?;
            Test::Element { ns, any_ns, local }
        }
    })
}

fn parse_predicate(p: &str) -> Result<Predicate, String> {
    if let Ok(n) = p.parse::<usize>() {
        return Ok(Predicate::Position(n));
    }
    if p == "last()" {
        return Ok(Predicate::Last);
    }
    let literal = |v: &str| -> Result<String, String> {
        let v = v.trim();
        let inner = v
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .or_else(|| v.strip_prefix('"').and_then(|r| r.strip_suffix('"')));
        inner
            .map(str::to_string)
            .ok_or_else(|| format!("expected a quoted literal, got {v:?}"))
    };
    match p.split_once('=') {
        Some((lhs, rhs)) => {
            let lhs = lhs.trim();
            let value = literal(rhs)?;
            if let Some(a) = lhs.strip_prefix('@') {
                Ok(Predicate::AttrEq(a.to_string(), value))
            } else if lhs == "text()" {
                Ok(Predicate::TextEq(value))
            } else if is_name(lhs) {
                Ok(Predicate::ChildEq(lhs.to_string(), value))
            } else {
                Err(format!("predicate [{p}] is not supported"))
            }
        }
        None => match p.strip_prefix('@') {
            Some(a) if is_name(a) => Ok(Predicate::HasAttr(a.to_string())),
            _ => Err(format!("predicate [{p}] is not supported")),
        },
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &[u8] = br#"<?xml version="1.0"?>
<order id="7" xmlns:p="urn:pay">
  <item sku="a1"><name>pen</name><qty>2</qty></item>
  <item sku="b2"><name>ink</name><qty>5</qty></item>
  <p:card type="visa">4111</p:card>
</order>"#;

    fn eval(x: &str) -> Vec<String> {
        let ns = vec![("pay".to_string(), "urn:pay".to_string())];
        let xp = XPath::compile(x, &ns).unwrap();
        let mut out = Vec::new();
        xp.evaluate(DOC, &mut |v| {
            out.push(String::from_utf8_lossy(v).into_owned())
        });
        out
    }

    #[test]
    fn paths_and_tests() {
        assert_eq!(eval("/order/item/name"), ["pen", "ink"]);
        assert_eq!(eval("//name"), ["pen", "ink"]);
        assert_eq!(eval("/order/item/@sku"), ["a1", "b2"]);
        assert_eq!(eval("//@type"), ["visa"]);
        assert_eq!(eval("/order/@id"), ["7"]);
        assert_eq!(eval("/order/item/@*"), ["a1", "b2"]);
        assert_eq!(eval("/order/item/name/text()"), ["pen", "ink"]);
        assert_eq!(eval("/*/item/qty"), ["2", "5"]);
        assert_eq!(eval("//pay:card"), ["4111"]);
        assert!(
            eval("//card").is_empty(),
            "a namespaced element needs its prefix"
        );
    }

    #[test]
    fn predicates() {
        assert_eq!(eval("/order/item[2]/name"), ["ink"]);
        assert_eq!(eval("/order/item[last()]/qty"), ["5"]);
        assert_eq!(eval("//item[@sku='a1']/qty"), ["2"]);
        assert_eq!(eval("//item[name='ink']/@sku"), ["b2"]);
        assert_eq!(eval("//item[@sku]/name[text()='pen']"), ["pen"]);
    }

    #[test]
    fn refused_expressions_say_why() {
        for (x, why) in [
            ("order/item", "absolute"),
            ("//x:card", "not bound"),
            ("//item/@sku/name", "must be last"),
            ("//item[position()>1]", "not supported"),
            ("count(//item)", "absolute"),
            ("//child::item", "named axes"),
        ] {
            let e = XPath::compile(x, &[]).unwrap_err();
            assert!(e.contains(why), "{x}: {e}");
        }
    }

    #[test]
    fn bad_documents_yield_nothing() {
        let xp = XPath::compile("//a", &[]).unwrap();
        let mut n = 0;
        xp.evaluate(b"<a>unclosed", &mut |_| n += 1);
        xp.evaluate(b"<a>\xff</a>", &mut |_| n += 1);
        assert_eq!(n, 0);
    }
}
