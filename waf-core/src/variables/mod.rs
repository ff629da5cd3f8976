//! The variables a rule can inspect (`ARGS`, `REQUEST_HEADERS`, `TX`, ...).
//!
//! Names are resolved to [`Variable`] once, at compile time; evaluation only sees the enum.

macro_rules! variables {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// A SecLang variable (a collection or a single value).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub(crate) enum Variable {
            $( $(#[$doc])* $variant, )*
        }

        impl Variable {
            /// All variables, in declaration order.
            #[allow(dead_code)]
            pub(crate) const ALL: &'static [Variable] = &[$(Variable::$variant,)*];

            /// Looks a name up, ignoring ASCII case.
            pub(crate) fn from_name(name: &str) -> Option<Variable> {
                $( if name.eq_ignore_ascii_case($name) { return Some(Variable::$variant); } )*
                None
            }

            /// Whether the variable holds keyed values (`ARGS:name`) rather than one value.
            pub(crate) fn is_collection(self) -> bool {
                use Variable::*;
                matches!(self,
                    Args | ArgsGet | ArgsPost | ArgsNames | ArgsGetNames | ArgsPostNames
                    | RequestHeaders | RequestHeadersNames | RequestCookies | RequestCookiesNames
                    | ResponseHeaders | ResponseHeadersNames | Files | FilesNames | FilesSizes
                    | FilesTmpNames | FilesTmpContent | MultipartPartHeaders | MultipartFilename
                    | MultipartName | Tx | Ip | Global | Session | User | Resource | Env | Geo
                    | Rule | MatchedVars | MatchedVarsNames | Xml)
            }

            /// The canonical (upper-case) name.
            pub(crate) fn name(self) -> &'static str {
                match self { $( Variable::$variant => $name, )* }
            }
        }
    };
}

variables! {
    Args => "ARGS",
    ArgsCombinedSize => "ARGS_COMBINED_SIZE",
    ArgsGet => "ARGS_GET",
    ArgsGetNames => "ARGS_GET_NAMES",
    ArgsNames => "ARGS_NAMES",
    ArgsPost => "ARGS_POST",
    ArgsPostNames => "ARGS_POST_NAMES",
    AuthType => "AUTH_TYPE",
    Duration => "DURATION",
    Env => "ENV",
    Files => "FILES",
    FilesCombinedSize => "FILES_COMBINED_SIZE",
    FilesNames => "FILES_NAMES",
    FilesSizes => "FILES_SIZES",
    FilesTmpNames => "FILES_TMPNAMES",
    FilesTmpContent => "FILES_TMP_CONTENT",
    FullRequest => "FULL_REQUEST",
    FullRequestLength => "FULL_REQUEST_LENGTH",
    Geo => "GEO",
    Global => "GLOBAL",
    HighestSeverity => "HIGHEST_SEVERITY",
    InboundDataError => "INBOUND_DATA_ERROR",
    Ip => "IP",
    MatchedVar => "MATCHED_VAR",
    MatchedVarName => "MATCHED_VAR_NAME",
    MatchedVars => "MATCHED_VARS",
    MatchedVarsNames => "MATCHED_VARS_NAMES",
    ModsecBuild => "MODSEC_BUILD",
    MultipartBoundaryQuoted => "MULTIPART_BOUNDARY_QUOTED",
    MultipartBoundaryWhitespace => "MULTIPART_BOUNDARY_WHITESPACE",
    MultipartCrlfLfLines => "MULTIPART_CRLF_LF_LINES",
    MultipartDataAfter => "MULTIPART_DATA_AFTER",
    MultipartDataBefore => "MULTIPART_DATA_BEFORE",
    MultipartFileLimitExceeded => "MULTIPART_FILE_LIMIT_EXCEEDED",
    MultipartFilename => "MULTIPART_FILENAME",
    MultipartHeaderFolding => "MULTIPART_HEADER_FOLDING",
    MultipartInvalidHeaderFolding => "MULTIPART_INVALID_HEADER_FOLDING",
    MultipartInvalidPart => "MULTIPART_INVALID_PART",
    MultipartInvalidQuoting => "MULTIPART_INVALID_QUOTING",
    MultipartLfLine => "MULTIPART_LF_LINE",
    MultipartMissingSemicolon => "MULTIPART_MISSING_SEMICOLON",
    MultipartName => "MULTIPART_NAME",
    MultipartPartHeaders => "MULTIPART_PART_HEADERS",
    MultipartStrictError => "MULTIPART_STRICT_ERROR",
    MultipartUnmatchedBoundary => "MULTIPART_UNMATCHED_BOUNDARY",
    OutboundDataError => "OUTBOUND_DATA_ERROR",
    PathInfo => "PATH_INFO",
    QueryString => "QUERY_STRING",
    RemoteAddr => "REMOTE_ADDR",
    RemoteHost => "REMOTE_HOST",
    RemotePort => "REMOTE_PORT",
    RemoteUser => "REMOTE_USER",
    ReqbodyError => "REQBODY_ERROR",
    ReqbodyErrorMsg => "REQBODY_ERROR_MSG",
    ReqbodyProcessor => "REQBODY_PROCESSOR",
    ReqbodyProcessorError => "REQBODY_PROCESSOR_ERROR",
    ReqbodyProcessorErrorMsg => "REQBODY_PROCESSOR_ERROR_MSG",
    RequestBasename => "REQUEST_BASENAME",
    RequestBody => "REQUEST_BODY",
    RequestBodyLength => "REQUEST_BODY_LENGTH",
    RequestCookies => "REQUEST_COOKIES",
    RequestCookiesNames => "REQUEST_COOKIES_NAMES",
    RequestFilename => "REQUEST_FILENAME",
    RequestHeaders => "REQUEST_HEADERS",
    RequestHeadersNames => "REQUEST_HEADERS_NAMES",
    RequestLine => "REQUEST_LINE",
    RequestMethod => "REQUEST_METHOD",
    RequestProtocol => "REQUEST_PROTOCOL",
    RequestUri => "REQUEST_URI",
    RequestUriRaw => "REQUEST_URI_RAW",
    Resource => "RESOURCE",
    ResponseBody => "RESPONSE_BODY",
    ResponseContentLength => "RESPONSE_CONTENT_LENGTH",
    ResponseContentType => "RESPONSE_CONTENT_TYPE",
    ResponseHeaders => "RESPONSE_HEADERS",
    ResponseHeadersNames => "RESPONSE_HEADERS_NAMES",
    ResponseProtocol => "RESPONSE_PROTOCOL",
    ResponseStatus => "RESPONSE_STATUS",
    Rule => "RULE",
    ServerAddr => "SERVER_ADDR",
    ServerName => "SERVER_NAME",
    ServerPort => "SERVER_PORT",
    Session => "SESSION",
    SessionId => "SESSIONID",
    StatusLine => "STATUS_LINE",
    Time => "TIME",
    TimeDay => "TIME_DAY",
    TimeEpoch => "TIME_EPOCH",
    TimeHour => "TIME_HOUR",
    TimeMin => "TIME_MIN",
    TimeMon => "TIME_MON",
    TimeSec => "TIME_SEC",
    TimeWday => "TIME_WDAY",
    TimeYear => "TIME_YEAR",
    Tx => "TX",
    UniqueId => "UNIQUE_ID",
    UrlencodedError => "URLENCODED_ERROR",
    User => "USER",
    UserId => "USERID",
    WebAppId => "WEBAPPID",
    Xml => "XML",
}

/// Which keys of a collection a target or exclusion selects.
#[derive(Clone, Debug)]
pub(crate) enum Selector {
    /// Every key.
    All,
    /// One key, compared ignoring ASCII case (stored lower-cased).
    Key(Vec<u8>),
    /// Keys matching a regular expression (`/.../`), matched ignoring case.
    Regex(regex::bytes::Regex),
    /// A key regex that is only an anchored literal (`TX:/^header_name_920450_/`): keys
    /// starting with it, ignoring ASCII case (stored lower-cased). The same answer as the
    /// regex without a regex call for each of the collection's keys.
    Prefix(Vec<u8>),
    /// A key regex only the backtracking engine compiles (`ARGS:/^(?!ref)/`); a search
    /// that hits the match limit selects nothing.
    Backtracking(Box<crate::operators::rx_backtrack::Backtracking>),
    /// `XML:/order/item[2]/@sku`: an XPath expression beyond `XML:/*` and `XML://@*`
    /// (`body/xpath.rs`); it selects values, not keys.
    XPath(Box<crate::body::xpath::XPath>),
}

impl Selector {
    /// Builds a key selector from `NAME:key` text: `/re/` is a regex, anything else a key.
    pub(crate) fn parse(key: &str) -> Result<Selector, String> {
        if key.len() >= 2 && key.starts_with('/') && key.ends_with('/') {
            Selector::regex(&key[1..key.len() - 1])
        } else {
            Ok(Selector::Key(key.as_bytes().to_ascii_lowercase()))
        }
    }

    /// A regex selector.
    pub(crate) fn regex(pattern: &str) -> Result<Selector, String> {
        if let Some(lit) = pattern.strip_prefix('^').filter(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }) {
            return Ok(Selector::Prefix(lit.as_bytes().to_ascii_lowercase()));
        }
        regex::bytes::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .unicode(false)
            .build()
            .map(Selector::Regex)
            .or_else(|e| {
                if e.to_string().contains("exceeds size limit") {
                    return Err(e.to_string());
                }
                crate::operators::rx_backtrack::Backtracking::compile(pattern, true, 0)
                    .map(|b| Selector::Backtracking(Box::new(b)))
                    .map_err(|_| e.to_string())
            })
            .map_err(|e| format!("invalid key regex /{pattern}/: {e}"))
    }

    /// Whether this is a key regex on the backtracking engine (named in a load warning).
    pub(crate) fn uses_backtracking(&self) -> bool {
        matches!(self, Selector::Backtracking(_))
    }

    /// Whether `key` is selected. Inlined: the visit loops ask it of every key (a GET's
    /// dozen headers for each rule that names one).
    #[inline]
    pub(crate) fn matches(&self, key: &[u8]) -> bool {
        match self {
            Selector::All => true,
            Selector::Key(k) => k.eq_ignore_ascii_case(key),
            Selector::Regex(re) => regex_matches(re, key),
            Selector::Prefix(p) => key
                .get(..p.len())
                .is_some_and(|k| k.eq_ignore_ascii_case(p)),
            Selector::XPath(_) => false,
            Selector::Backtracking(re) => matches!(
                re.is_match(key),
                crate::operators::rx_backtrack::Search::Done(true)
            ),
        }
    }
}

/// [`Selector::matches`] for a regex selector, kept out of line: inlined, the regex
/// search made every key comparison dearer (a bigger frame to set up for each call).
#[inline(never)]
fn regex_matches(re: &regex::bytes::Regex, key: &[u8]) -> bool {
    re.is_match(key)
}

#[cfg(test)]
mod tests {
    use super::Selector;

    /// An anchored literal key regex selects exactly the keys its regex selects.
    #[test]
    fn anchored_literal_selectors_agree_with_their_regex() {
        let keys: &[&[u8]] = &[
            b"header_name_920450_accept",
            b"HEADER_NAME_920450_x",
            b"header_name_920450_",
            b"header_name_92045",
            b"xheader_name_920450_a",
            b"",
        ];
        for pattern in ["^header_name_920450_", "^a-b", "^X"] {
            let fast = Selector::regex(pattern).unwrap();
            assert!(matches!(fast, Selector::Prefix(_)), "{pattern}");
            let re = regex::bytes::RegexBuilder::new(pattern)
                .case_insensitive(true)
                .unicode(false)
                .build()
                .unwrap();
            for k in keys.iter().copied().chain([&b"a-bc"[..], b"x1"]) {
                assert_eq!(fast.matches(k), re.is_match(k), "{pattern} on {k:?}");
            }
        }
        assert!(matches!(
            Selector::regex("^a.b").unwrap(),
            Selector::Regex(_)
        ));
        assert!(matches!(
            Selector::regex("abc").unwrap(),
            Selector::Regex(_)
        ));
    }
}
