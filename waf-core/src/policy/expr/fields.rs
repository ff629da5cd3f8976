//! The scheme: every field an expression can read, its type, and how a request fills it.
//!
//! As in wirefilter's `scheme.rs` and `execution_context.rs`: a field name is resolved at
//! load to a [`FieldRef`], and every distinct field (with its argument, for
//! `http.request.headers["x"]`) gets a slot index. Per request a [`Context`] computes each
//! slot at most once, on first use, so 30 rules that read the path split the URI once and
//! a rule that never reaches `ip.src.country` never looks it up.

use std::borrow::Cow;
use std::net::IpAddr;

use super::super::{Policy, Request};

/// The type of a field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    /// Bytes (strings).
    Bytes,
    /// A signed integer.
    Int,
    /// An IP address.
    Ip,
}

impl Type {
    pub(super) fn name(self) -> &'static str {
        match self {
            Type::Bytes => "string",
            Type::Int => "integer",
            Type::Ip => "IP address",
        }
    }
}

/// A field, with its argument resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldRef {
    Method,
    Host,
    Scheme,
    Path,
    Query,
    Uri,
    /// A query argument by (decoded) name.
    Arg(Box<[u8]>),
    /// A request header by lower-cased name.
    Header(Box<[u8]>),
    /// A cookie by name.
    Cookie(Box<[u8]>),
    UserAgent,
    Referer,
    ClientIp,
    Country,
    Asn,
    Reputation,
    Category,
    /// The CRS inbound anomaly score (known after the request body phase).
    AnomalyScore,
    /// The ML detector's score in per mille (known after the request body phase; 0 without
    /// the `ml` feature or a model).
    MlScore,
    /// The level of a rate limit's bucket for this request's key, by rate-limit index.
    Rate(usize),
}

/// Names of the fields that take no argument, with their meaning, for docs and errors.
pub(crate) const FIELDS: &[(&str, Type)] = &[
    ("http.request.method", Type::Bytes),
    ("http.host", Type::Bytes),
    ("http.request.scheme", Type::Bytes),
    ("http.request.uri", Type::Bytes),
    ("http.request.uri.path", Type::Bytes),
    ("http.request.uri.query", Type::Bytes),
    ("http.user_agent", Type::Bytes),
    ("http.referer", Type::Bytes),
    ("ip.src", Type::Ip),
    ("ip.src.country", Type::Bytes),
    ("ip.src.asnum", Type::Int),
    ("ip.src.reputation", Type::Int),
    ("ip.src.category", Type::Bytes),
    ("waf.score", Type::Int),
    ("ml.score", Type::Int),
];

/// Fields written `name["argument"]`.
pub(crate) const INDEXED: &[&str] = &[
    "http.request.uri.args",
    "http.request.headers",
    "http.request.cookies",
    "rate",
];

impl FieldRef {
    /// The field called `name` (no argument), if there is one.
    pub(super) fn plain(name: &str) -> Option<FieldRef> {
        Some(match name {
            "http.request.method" => FieldRef::Method,
            "http.host" => FieldRef::Host,
            "http.request.scheme" => FieldRef::Scheme,
            "http.request.uri" => FieldRef::Uri,
            "http.request.uri.path" => FieldRef::Path,
            "http.request.uri.query" => FieldRef::Query,
            "http.user_agent" => FieldRef::UserAgent,
            "http.referer" => FieldRef::Referer,
            "ip.src" => FieldRef::ClientIp,
            "ip.src.country" => FieldRef::Country,
            "ip.src.asnum" => FieldRef::Asn,
            "ip.src.reputation" => FieldRef::Reputation,
            "ip.src.category" => FieldRef::Category,
            "waf.score" => FieldRef::AnomalyScore,
            "ml.score" => FieldRef::MlScore,
            _ => return None,
        })
    }

    pub(crate) fn ty(&self) -> Type {
        match self {
            FieldRef::ClientIp => Type::Ip,
            FieldRef::Asn
            | FieldRef::Reputation
            | FieldRef::AnomalyScore
            | FieldRef::MlScore
            | FieldRef::Rate(_) => Type::Int,
            _ => Type::Bytes,
        }
    }
}

/// A field's value in one request.
#[derive(Clone, Debug)]
pub(crate) enum Value<'a> {
    Bytes(Cow<'a, [u8]>),
    Int(i64),
    Ip(IpAddr),
}

/// Per-request slot values, filled on first use.
pub(crate) struct Context<'a> {
    pub(crate) req: &'a Request<'a>,
    pub(crate) policy: &'a Policy,
    slots: Vec<Option<Value<'a>>>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(req: &'a Request<'a>, policy: &'a Policy) -> Context<'a> {
        Context {
            req,
            policy,
            slots: vec![None; policy.slots.len()],
        }
    }

    /// The value of slot `i`, computed now if not yet.
    pub(crate) fn value(&mut self, i: usize) -> &Value<'a> {
        if self.slots[i].is_none() {
            let v = self.compute(&self.policy.slots[i]);
            self.slots[i] = Some(v);
        }
        // Just filled above.
        self.slots[i].as_ref().unwrap_or(&Value::Int(0))
    }

    fn compute(&self, field: &FieldRef) -> Value<'a> {
        let req = self.req;
        let bytes = |b: &'a [u8]| Value::Bytes(Cow::Borrowed(b));
        match field {
            FieldRef::Method => bytes(req.head.method),
            FieldRef::Host => Value::Bytes(req.host()),
            FieldRef::Scheme => bytes(if req.tls { b"https" } else { b"http" }),
            FieldRef::Uri => bytes(req.head.uri),
            FieldRef::Path => Value::Bytes(normalized_path(req.raw_path())),
            FieldRef::Query => bytes(req.query()),
            FieldRef::Arg(name) => Value::Bytes(query_arg(req.query(), name).unwrap_or_default()),
            FieldRef::Header(name) => bytes(req.header(name).unwrap_or_default()),
            FieldRef::Cookie(name) => bytes(req.cookie(name).unwrap_or_default()),
            FieldRef::UserAgent => bytes(req.header(b"user-agent").unwrap_or_default()),
            FieldRef::Referer => bytes(req.header(b"referer").unwrap_or_default()),
            FieldRef::ClientIp => Value::Ip(req.client),
            FieldRef::Country => match self.policy.intel.country(req.client) {
                Some(c) => Value::Bytes(Cow::Owned(c)),
                None => bytes(b""),
            },
            FieldRef::Asn => Value::Int(self.policy.intel.asn(req.client).map_or(0, i64::from)),
            FieldRef::Reputation => Value::Int(self.policy.intel.reputation(req.client).0),
            FieldRef::Category => match self.policy.intel.reputation(req.client).1 {
                Some(c) => Value::Bytes(Cow::Owned(c.as_bytes().to_vec())),
                None => bytes(b""),
            },
            FieldRef::AnomalyScore => Value::Int(req.anomaly_score),
            FieldRef::MlScore => Value::Int(req.ml_score),
            FieldRef::Rate(i) => Value::Int(self.policy.rate_level(*i, req)),
        }
    }
}

/// The path as rules compare it: `%`-decoded, then `//` collapsed and `.` and `..` segments
/// removed (RFC 3986 §5.2.4), so `/%61dmin`, `//admin` and `/x/../admin` are all `/admin`.
/// Borrowed when nothing changes. A `..` above the root stays at the root.
pub(crate) fn normalized_path(raw: &[u8]) -> Cow<'_, [u8]> {
    let decoded = percent_decode(raw, false);
    let needs = decoded.windows(2).any(|w| w == b"//" || w == b"/.") || decoded.starts_with(b".");
    if !needs {
        return decoded;
    }
    let mut out: Vec<u8> = Vec::with_capacity(decoded.len());
    let trailing = decoded.ends_with(b"/") || decoded.ends_with(b"/.") || decoded.ends_with(b"/..");
    for seg in decoded.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                let cut = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(cut);
            }
            s => {
                out.push(b'/');
                out.extend_from_slice(s);
            }
        }
    }
    if out.is_empty() || trailing {
        out.push(b'/');
    }
    Cow::Owned(out)
}

/// `%XX` decoding (and `+` as space when `plus`); borrowed when nothing changes. Invalid
/// escapes are kept as sent.
pub(crate) fn percent_decode(input: &[u8], plus: bool) -> Cow<'_, [u8]> {
    if !input.iter().any(|&b| b == b'%' || (plus && b == b'+')) {
        return Cow::Borrowed(input);
    }
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'%' && i + 2 < input.len() {
            if let (Some(h), Some(l)) = (hex(input[i + 1]), hex(input[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(if plus && b == b'+' { b' ' } else { b });
        i += 1;
    }
    Cow::Owned(out)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The first query argument called `name` (names and values `%`- and `+`-decoded).
pub(crate) fn query_arg<'a>(query: &'a [u8], name: &[u8]) -> Option<Cow<'a, [u8]>> {
    for pair in query.split(|&b| b == b'&') {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        if percent_decode(k, true).as_ref() == name {
            return Some(percent_decode(v, true));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert!(matches!(percent_decode(b"/a/b", false), Cow::Borrowed(_)));
        assert_eq!(percent_decode(b"/%61dmin%2", false).as_ref(), b"/admin%2");
        assert_eq!(percent_decode(b"a+b%20c", true).as_ref(), b"a b c");
        assert_eq!(percent_decode(b"%zz%4", false).as_ref(), b"%zz%4");
        assert_eq!(percent_decode(b"%41", false).as_ref(), b"A");
    }

    #[test]
    fn paths_are_normalised() {
        for (raw, want) in [
            (&b"/a/b"[..], &b"/a/b"[..]),
            (b"//admin", b"/admin"),
            (b"/x/../admin", b"/admin"),
            (b"/./admin/./", b"/admin/"),
            (b"/%2e%2e/%2e/admin", b"/admin"),
            (b"/../../etc/passwd", b"/etc/passwd"),
            (b"/a/b/..", b"/a/"),
            (b"/", b"/"),
            (b"/a/.hidden", b"/a/.hidden"),
        ] {
            assert_eq!(
                normalized_path(raw).as_ref(),
                want,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        assert!(matches!(normalized_path(b"/products/42"), Cow::Borrowed(_)));
    }

    #[test]
    fn query_arguments() {
        let q = b"a=1&user%5Bname%5D=x+y&flag&a=2";
        assert_eq!(query_arg(q, b"a").unwrap().as_ref(), b"1");
        assert_eq!(query_arg(q, b"user[name]").unwrap().as_ref(), b"x y");
        assert_eq!(query_arg(q, b"flag").unwrap().as_ref(), b"");
        assert!(query_arg(q, b"b").is_none());
    }
}
