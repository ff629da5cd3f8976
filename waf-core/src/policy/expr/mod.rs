//! The condition language: a small typed filter language after Cloudflare's rules
//! language (wirefilter).
//!
//! ```text
//! http.request.uri.path starts_with "/admin" and not ip.src in $office
//! http.request.method in {"PUT" "DELETE"} or ip.src.country in {"XX" "YY"}
//! http.user_agent matches "(?i)sqlmap|nikto" || http.request.headers["x-api-key"] == ""
//! http.request.uri.path matches r"\.(bak|old)$"      # raw string: no escapes
//! rate["login"] > 5 and ip.src.asnum in {64500 64501}
//! ```
//!
//! Three stages, as for SecLang: [`lex`] (text → tokens with offsets), [`parse`] (tokens →
//! a type-checked [`Expr`], fields resolved to slot indices, regexes and needles compiled,
//! lists resolved to indices), and evaluation here against a
//! [`Context`](fields::Context). Every error carries the line and column inside the
//! expression. Types: strings (bytes), integers, IP addresses; an operator that does not fit
//! its field's type, or a literal of the wrong type, is a load error, not a false at run
//! time. Strings are `"..."` with the escapes `\"`, `\\`, `\n`, `\r`, `\t`, `\xHH`, or raw
//! `r"..."` / `r#"..."#` (for regexes). A header, argument or cookie that is absent reads as `""`; a number that is
//! unknown (no ASN) reads as `0`. `==` and the string operators are case-sensitive except
//! `wildcard`, which is case-insensitive like Cloudflare's; `http.host` is lower-cased and
//! has no port; `http.request.uri.path` is `%`-decoded with `//`, `.` and `..` resolved
//! (`//admin` and `/x/../admin` are `/admin`); `http.request.uri` is the target as sent.
//!
//! Limits: an expression is at most [`DEFAULT_EXPRESSION_LEN`](crate::limits::DEFAULT_EXPRESSION_LEN)
//! bytes and nests at most [`DEFAULT_EXPRESSION_DEPTH`](crate::limits::DEFAULT_EXPRESSION_DEPTH)
//! deep; a regex is compiled with a size limit of
//! [`DEFAULT_EXPRESSION_REGEX_SIZE`](crate::limits::DEFAULT_EXPRESSION_REGEX_SIZE) bytes.

pub(crate) mod fields;
mod lex;
mod parse;

use std::net::IpAddr;

use memchr::memmem;
use regex::bytes::Regex;

use super::list::{IpList, ListData, StringList};
use fields::{Context, Value};

pub(crate) use parse::{compile, Scope};

/// An error at a byte offset of the expression text.
#[derive(Debug)]
pub(crate) struct ExprError {
    pub(crate) at: usize,
    pub(crate) message: String,
}

impl ExprError {
    fn new(at: usize, message: impl Into<String>) -> ExprError {
        ExprError {
            at,
            message: message.into(),
        }
    }
}

/// A compiled condition.
#[derive(Debug)]
pub(crate) enum Expr {
    And(Box<[Expr]>),
    Or(Box<[Expr]>),
    Not(Box<Expr>),
    Bytes { slot: usize, test: BytesTest },
    Int { slot: usize, test: IntTest },
    Ip { slot: usize, test: IpTest },
}

/// A test on a string field.
#[derive(Debug)]
pub(crate) enum BytesTest {
    Eq(Box<[u8]>),
    Ne(Box<[u8]>),
    Contains(Box<memmem::Finder<'static>>),
    StartsWith(Box<[u8]>),
    EndsWith(Box<[u8]>),
    Matches(Regex),
    In(StringList),
    InList(usize),
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A test on an integer field.
#[derive(Debug)]
pub(crate) enum IntTest {
    Cmp(Cmp, i64),
    In(Box<[i64]>),
}

/// A test on an IP field.
#[derive(Debug)]
pub(crate) enum IpTest {
    In(IpList),
    NotIn(IpList),
    InList(usize),
}

impl Expr {
    /// Whether the condition holds for the request behind `cx`.
    pub(crate) fn eval(&self, cx: &mut Context<'_>) -> bool {
        match self {
            Expr::And(all) => all.iter().all(|e| e.eval(cx)),
            Expr::Or(any) => any.iter().any(|e| e.eval(cx)),
            Expr::Not(e) => !e.eval(cx),
            Expr::Bytes { slot, test } => {
                let policy = cx.policy;
                let Value::Bytes(v) = cx.value(*slot) else {
                    return false;
                };
                let v: &[u8] = v;
                match test {
                    BytesTest::Eq(x) => v == &**x,
                    BytesTest::Ne(x) => v != &**x,
                    BytesTest::Contains(f) => f.find(v).is_some(),
                    BytesTest::StartsWith(x) => v.starts_with(x),
                    BytesTest::EndsWith(x) => v.ends_with(x),
                    BytesTest::Matches(re) => re.is_match(v),
                    BytesTest::In(set) => set.contains(v),
                    BytesTest::InList(i) => match &**policy.lists[*i].data.load() {
                        ListData::Str(set) => set.contains(v),
                        ListData::Ip(_) => false,
                    },
                }
            }
            Expr::Int { slot, test } => {
                let &Value::Int(v) = cx.value(*slot) else {
                    return false;
                };
                match test {
                    IntTest::Cmp(op, x) => match op {
                        Cmp::Eq => v == *x,
                        Cmp::Ne => v != *x,
                        Cmp::Lt => v < *x,
                        Cmp::Le => v <= *x,
                        Cmp::Gt => v > *x,
                        Cmp::Ge => v >= *x,
                    },
                    IntTest::In(set) => set.contains(&v),
                }
            }
            Expr::Ip { slot, test } => {
                let policy = cx.policy;
                let &Value::Ip(ip) = cx.value(*slot) else {
                    return false;
                };
                ip_test(policy, test, ip)
            }
        }
    }

    /// Calls `f` on every slot the condition reads.
    pub(crate) fn visit_slots(&self, f: &mut dyn FnMut(usize)) {
        match self {
            Expr::And(all) | Expr::Or(all) => all.iter().for_each(|e| e.visit_slots(f)),
            Expr::Not(e) => e.visit_slots(f),
            Expr::Bytes { slot, .. } | Expr::Int { slot, .. } | Expr::Ip { slot, .. } => f(*slot),
        }
    }
}

fn ip_test(policy: &super::Policy, test: &IpTest, ip: IpAddr) -> bool {
    match test {
        IpTest::In(l) => l.contains(ip),
        IpTest::NotIn(l) => !l.contains(ip),
        IpTest::InList(i) => match &**policy.lists[*i].data.load() {
            ListData::Ip(l) => l.contains(ip),
            ListData::Str(_) => false,
        },
    }
}
