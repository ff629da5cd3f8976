//! Tokens → a type-checked [`Expr`]: precedence `not` > `and` > `or`, fields resolved to
//! slots, literals checked against the field's type.

use memchr::memmem;
use regex::bytes::RegexBuilder;

use super::fields::{FieldRef, Type, FIELDS, INDEXED};
use super::lex::{lex, Tok, Token};
use super::{BytesTest, Cmp, Expr, ExprError, IntTest, IpTest};
use crate::limits::{
    DEFAULT_EXPRESSION_DEPTH, DEFAULT_EXPRESSION_LEN, DEFAULT_EXPRESSION_REGEX_SIZE,
};
use crate::policy::error::{PolicyError, PolicyErrorKind};
use crate::policy::list::{parse_net, IpList, ListKind, StringList};

/// What an expression may refer to.
pub(crate) struct Scope<'s> {
    /// Slots of the policy; new fields are appended, known ones reused.
    pub(crate) slots: &'s mut Vec<FieldRef>,
    /// The policy's lists, by index.
    pub(crate) lists: &'s [(String, ListKind)],
    /// Rate limits `rate["name"]` may name, by index (empty where rates are not allowed).
    pub(crate) rates: &'s [String],
}

/// Compiles `text`; errors name `source` and give the line and column.
pub(crate) fn compile(
    source: &str,
    text: &str,
    scope: &mut Scope<'_>,
) -> Result<Expr, PolicyError> {
    let located = |e: ExprError| {
        let before = &text[..e.at.min(text.len())];
        let line = before.matches('\n').count() as u32 + 1;
        let column = before
            .rsplit('\n')
            .next()
            .unwrap_or_default()
            .chars()
            .count() as u32
            + 1;
        let kind = if e.message.contains("type") || e.message.starts_with("unknown") {
            PolicyErrorKind::Invalid
        } else {
            PolicyErrorKind::Syntax
        };
        PolicyError::at(kind, source, text, line, column, e.message)
    };
    if text.len() > DEFAULT_EXPRESSION_LEN {
        return Err(located(ExprError::new(
            0,
            format!(
                "expression is {} bytes, more than the limit of {DEFAULT_EXPRESSION_LEN}",
                text.len()
            ),
        )));
    }
    let toks = lex(text).map_err(located)?;
    let mut p = Parser {
        toks,
        pos: 0,
        end: text.len(),
        scope,
        depth: 0,
    };
    let e = p.or().map_err(located)?;
    if let Some(t) = p.toks.get(p.pos) {
        return Err(located(ExprError::new(
            t.at,
            "expected `and`, `or` or the end of the expression",
        )));
    }
    Ok(e)
}

struct Parser<'s, 'x> {
    toks: Vec<Token>,
    pos: usize,
    end: usize,
    scope: &'x mut Scope<'s>,
    depth: usize,
}

type R<T> = Result<T, ExprError>;

impl Parser<'_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |t| t.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn is_word(&self, words: &[&str]) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if words.contains(&w.as_str()))
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn expect_punct(&mut self, p: &str) -> R<()> {
        if self.is_punct(p) {
            self.pos += 1;
            Ok(())
        } else {
            Err(ExprError::new(self.at(), format!("expected `{p}`")))
        }
    }

    fn or(&mut self) -> R<Expr> {
        let mut items = vec![self.and()?];
        while self.is_word(&["or"]) || self.is_punct("||") {
            self.pos += 1;
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Or(items.into())
        })
    }

    fn and(&mut self) -> R<Expr> {
        let mut items = vec![self.unary()?];
        while self.is_word(&["and"]) || self.is_punct("&&") {
            self.pos += 1;
            items.push(self.unary()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::And(items.into())
        })
    }

    fn unary(&mut self) -> R<Expr> {
        self.depth += 1;
        if self.depth > DEFAULT_EXPRESSION_DEPTH {
            return Err(ExprError::new(
                self.at(),
                format!("expression nests deeper than the limit of {DEFAULT_EXPRESSION_DEPTH}"),
            ));
        }
        let e = if self.is_word(&["not"]) || self.is_punct("!") {
            self.pos += 1;
            Expr::Not(Box::new(self.unary()?))
        } else if self.is_punct("(") {
            self.pos += 1;
            let e = self.or()?;
            self.expect_punct(")")?;
            e
        } else {
            self.comparison()?
        };
        self.depth -= 1;
        Ok(e)
    }

    fn field(&mut self) -> R<(FieldRef, usize)> {
        let at = self.at();
        let name = match self.next() {
            Some(Token {
                tok: Tok::Word(w), ..
            }) => w,
            _ => {
                return Err(ExprError::new(
                    at,
                    "expected a field such as `http.request.uri.path`",
                ))
            }
        };
        let field = if let Some(f) = FieldRef::plain(&name) {
            f
        } else if INDEXED.contains(&name.as_str()) {
            self.expect_punct("[")?;
            let arg_at = self.at();
            let arg = match self.next() {
                Some(Token {
                    tok: Tok::Str(s), ..
                }) => s,
                _ => {
                    return Err(ExprError::new(
                        arg_at,
                        format!("`{name}[..]` needs a quoted name"),
                    ))
                }
            };
            self.expect_punct("]")?;
            match name.as_str() {
                "http.request.uri.args" => FieldRef::Arg(arg.into()),
                "http.request.headers" => FieldRef::Header(arg.to_ascii_lowercase().into()),
                "http.request.cookies" => FieldRef::Cookie(arg.into()),
                _ => {
                    let wanted = String::from_utf8_lossy(&arg);
                    match self.scope.rates.iter().position(|r| *r == wanted) {
                        Some(i) => FieldRef::Rate(i),
                        None if self.scope.rates.is_empty() => {
                            return Err(ExprError::new(
                                arg_at,
                                format!(
                                    "unknown rate limit {wanted:?}: no rate limit can be read here"
                                ),
                            ))
                        }
                        None => {
                            return Err(ExprError::new(
                                arg_at,
                                format!(
                                    "unknown rate limit {wanted:?} (known: {})",
                                    self.scope.rates.join(", ")
                                ),
                            ))
                        }
                    }
                }
            }
        } else {
            let names: Vec<&str> = FIELDS
                .iter()
                .map(|f| f.0)
                .chain(INDEXED.iter().copied())
                .collect();
            return Err(ExprError::new(
                at,
                format!("unknown field `{name}` (fields: {})", names.join(", ")),
            ));
        };
        let slot = match self.scope.slots.iter().position(|s| *s == field) {
            Some(i) => i,
            None => {
                self.scope.slots.push(field.clone());
                self.scope.slots.len() - 1
            }
        };
        Ok((field, slot))
    }

    fn comparison(&mut self) -> R<Expr> {
        let field_at = self.at();
        let (field, slot) = self.field()?;
        let ty = field.ty();
        let op_at = self.at();
        let op = match self.next() {
            Some(Token {
                tok: Tok::Punct(p), ..
            }) => p.to_string(),
            Some(Token {
                tok: Tok::Word(w), ..
            }) => w,
            _ => {
                return Err(ExprError::new(
                    op_at,
                    "expected an operator after the field",
                ))
            }
        };
        let bad_type = |what: &str| {
            ExprError::new(
                op_at,
                format!(
                    "`{op}` does not apply to {}: the field at column {} is of type {}{what}",
                    ty.name(),
                    field_at + 1,
                    ty.name()
                ),
            )
        };
        let cmp = match op.as_str() {
            "==" | "eq" => Some(Cmp::Eq),
            "!=" | "ne" => Some(Cmp::Ne),
            "<" | "lt" => Some(Cmp::Lt),
            "<=" | "le" => Some(Cmp::Le),
            ">" | "gt" => Some(Cmp::Gt),
            ">=" | "ge" => Some(Cmp::Ge),
            _ => None,
        };
        match (ty, op.as_str(), cmp) {
            (_, "in", _) => self.in_set(ty, slot),
            (Type::Bytes, _, Some(c @ (Cmp::Eq | Cmp::Ne))) => {
                let s = self.string()?.into_boxed_slice();
                let test = if c == Cmp::Eq { BytesTest::Eq(s) } else { BytesTest::Ne(s) };
                Ok(Expr::Bytes {
                    slot,
                    test,
                })
            }
            (Type::Bytes, "contains", _) => {
                let s = self.string()?;
                Ok(Expr::Bytes {
                    slot,
                    test: BytesTest::Contains(Box::new(memmem::Finder::new(&s).into_owned())),
                })
            }
            (Type::Bytes, "starts_with", _) => Ok(Expr::Bytes {
                slot,
                test: BytesTest::StartsWith(self.string()?.into()),
            }),
            (Type::Bytes, "ends_with", _) => Ok(Expr::Bytes {
                slot,
                test: BytesTest::EndsWith(self.string()?.into()),
            }),
            (Type::Bytes, "matches", _) => {
                let at = self.at();
                let s = self.string()?;
                let pattern = String::from_utf8(s)
                    .map_err(|_| ExprError::new(at, "a regex must be valid UTF-8"))?;
                let re = RegexBuilder::new(&pattern)
                    .size_limit(DEFAULT_EXPRESSION_REGEX_SIZE)
                    .build()
                    .map_err(|e| ExprError::new(at, format!("invalid regex: {e}")))?;
                Ok(Expr::Bytes {
                    slot,
                    test: BytesTest::Matches(re),
                })
            }
            (Type::Bytes, "wildcard", _) => {
                let at = self.at();
                let s = self.string()?;
                let text = String::from_utf8(s)
                    .map_err(|_| ExprError::new(at, "a wildcard must be valid UTF-8"))?;
                let body: Vec<String> = text.split('*').map(regex::escape).collect();
                let re = RegexBuilder::new(&format!("(?is)^{}$", body.join(".*")))
                    .size_limit(DEFAULT_EXPRESSION_REGEX_SIZE)
                    .build()
                    .map_err(|e| ExprError::new(at, format!("invalid wildcard: {e}")))?;
                Ok(Expr::Bytes {
                    slot,
                    test: BytesTest::Matches(re),
                })
            }
            (Type::Int, _, Some(c)) => Ok(Expr::Int {
                slot,
                test: IntTest::Cmp(c, self.int()?),
            }),
            (Type::Ip, _, Some(c @ (Cmp::Eq | Cmp::Ne))) => {
                let list = IpList::from_nets([self.net()?]);
                let test = if c == Cmp::Eq { IpTest::In(list) } else { IpTest::NotIn(list) };
                Ok(Expr::Ip { slot, test })
            }
            (_, "==" | "!=" | "<" | "<=" | ">" | ">=" | "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "contains"
            | "starts_with" | "ends_with" | "matches" | "wildcard", _) => Err(bad_type("")),
            _ => Err(ExprError::new(
                op_at,
                format!(
                    "unknown operator `{op}` (operators: == != < <= > >= in contains starts_with ends_with matches wildcard)"
                ),
            )),
        }
    }

    fn string(&mut self) -> R<Vec<u8>> {
        let at = self.at();
        match self.next() {
            Some(Token {
                tok: Tok::Str(s), ..
            }) => Ok(s),
            _ => Err(ExprError::new(
                at,
                "expected a quoted string: the field has type string",
            )),
        }
    }

    fn int(&mut self) -> R<i64> {
        let at = self.at();
        match self.next() {
            Some(Token {
                tok: Tok::Word(w), ..
            }) => w.parse().map_err(|_| {
                ExprError::new(
                    at,
                    format!("expected an integer, found `{w}`: the field has type integer"),
                )
            }),
            _ => Err(ExprError::new(
                at,
                "expected an integer: the field has type integer",
            )),
        }
    }

    fn net(&mut self) -> R<ipnet::IpNet> {
        let at = self.at();
        match self.next() {
            Some(Token {
                tok: Tok::Word(w), ..
            }) => parse_net(&w)
                .map_err(|m| ExprError::new(at, format!("{m}: the field has type IP address"))),
            _ => Err(ExprError::new(
                at,
                "expected an IP address or CIDR: the field has type IP address",
            )),
        }
    }

    fn in_set(&mut self, ty: Type, slot: usize) -> R<Expr> {
        let at = self.at();
        if let Some(Tok::ListRef(name)) = self.peek().cloned() {
            self.pos += 1;
            let Some(i) = self.scope.lists.iter().position(|l| l.0 == name) else {
                let known: Vec<&str> = self.scope.lists.iter().map(|l| l.0.as_str()).collect();
                return Err(ExprError::new(
                    at,
                    format!("unknown list `${name}` (lists: {})", known.join(", ")),
                ));
            };
            let kind = self.scope.lists[i].1;
            return match (ty, kind) {
                (Type::Ip, ListKind::Ip) => Ok(Expr::Ip {
                    slot,
                    test: IpTest::InList(i),
                }),
                (Type::Bytes, ListKind::String) => Ok(Expr::Bytes {
                    slot,
                    test: BytesTest::InList(i),
                }),
                _ => Err(ExprError::new(
                    at,
                    format!(
                        "list `${name}` is a {} list, but the field has type {}",
                        if kind == ListKind::Ip { "ip" } else { "string" },
                        ty.name()
                    ),
                )),
            };
        }
        self.expect_punct("{")?;
        let mut strings = Vec::new();
        let mut ints = Vec::new();
        let mut nets = Vec::new();
        while !self.is_punct("}") {
            if self.peek().is_none() {
                return Err(ExprError::new(self.at(), "expected `}`"));
            }
            match ty {
                Type::Bytes => strings.push(self.string()?),
                Type::Int => ints.push(self.int()?),
                Type::Ip => nets.push(self.net()?),
            }
            if self.is_punct(",") {
                self.pos += 1;
            }
        }
        self.pos += 1;
        Ok(match ty {
            Type::Bytes => Expr::Bytes {
                slot,
                test: BytesTest::In(StringList::from_items(strings)),
            },
            Type::Int => Expr::Int {
                slot,
                test: IntTest::In(ints.into()),
            },
            Type::Ip => Expr::Ip {
                slot,
                test: IpTest::In(IpList::from_nets(nets)),
            },
        })
    }
}
