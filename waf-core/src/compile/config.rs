//! Engine settings from `Sec*` directives.

use crate::actions::ctl::parse_engine_mode;
use crate::error::{Error, ErrorKind, Warning};
use crate::limits;
use crate::seclang::Span;
use crate::waf::EngineMode;

/// What the engine does with a body over its limit (`SecRequestBodyLimitAction`,
/// `SecResponseBodyLimitAction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitAction {
    /// Answer 403, as libmodsecurity 3 does for both bodies.
    Reject,
    /// Inspect the prefix, pass the rest.
    ProcessPartial,
}

/// Engine settings, with ModSecurity's defaults.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) engine_mode: EngineMode,
    pub(crate) request_body_access: bool,
    pub(crate) request_body_limit: usize,
    pub(crate) request_body_no_files_limit: usize,
    pub(crate) request_body_limit_action: LimitAction,
    pub(crate) response_body_access: bool,
    pub(crate) response_body_limit: usize,
    pub(crate) response_body_limit_action: LimitAction,
    /// Lower-cased MIME types whose responses are inspected.
    pub(crate) response_body_mime_types: Vec<Vec<u8>>,
    pub(crate) json_depth_limit: usize,
    /// Deepest XML nesting ([`limits::DEFAULT_XML_DEPTH_LIMIT`], `WafBuilder::xml_depth_limit`).
    pub(crate) xml_depth_limit: usize,
    /// Most multipart parts ([`limits::DEFAULT_MULTIPART_PART_LIMIT`],
    /// `WafBuilder::multipart_part_limit`).
    pub(crate) multipart_part_limit: usize,
    pub(crate) arguments_limit: usize,
    pub(crate) argument_separator: u8,
    pub(crate) component_signatures: Vec<String>,
    pub(crate) web_app_id: String,
    pub(crate) collection_timeout_secs: u64,
    /// `SecPcreMatchLimit` (0: [`limits::DEFAULT_PCRE_MATCH_LIMIT`]).
    pub(crate) pcre_match_limit: usize,
    /// `SecPcreMatchLimitRecursion` (0: unset); lowers the same bound when smaller.
    pub(crate) pcre_match_limit_recursion: usize,
    /// `SecUnicodeMapFile`: the code page section `t:urlDecodeUni` maps `%uXXXX` with.
    pub(crate) unicode_map: Option<std::sync::Arc<crate::transformations::unicode_map::UnicodeMap>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            engine_mode: EngineMode::Off,
            // libmodsecurity 3 processes the body unless SecRequestBodyAccess is Off.
            request_body_access: true,
            request_body_limit: limits::DEFAULT_REQUEST_BODY_LIMIT,
            request_body_no_files_limit: limits::DEFAULT_REQUEST_BODY_NO_FILES_LIMIT,
            request_body_limit_action: LimitAction::Reject,
            response_body_access: false,
            response_body_limit: limits::DEFAULT_RESPONSE_BODY_LIMIT,
            response_body_limit_action: LimitAction::ProcessPartial,
            response_body_mime_types: vec![b"text/plain".to_vec(), b"text/html".to_vec()],
            json_depth_limit: limits::DEFAULT_JSON_DEPTH_LIMIT,
            xml_depth_limit: limits::DEFAULT_XML_DEPTH_LIMIT,
            multipart_part_limit: limits::DEFAULT_MULTIPART_PART_LIMIT,
            arguments_limit: limits::DEFAULT_ARGUMENTS_LIMIT,
            argument_separator: b'&',
            component_signatures: Vec::new(),
            web_app_id: "default".to_string(),
            collection_timeout_secs: 3600,
            pcre_match_limit: 0,
            pcre_match_limit_recursion: 0,
            unicode_map: None,
        }
    }
}

/// Directives accepted for compatibility that change nothing in a sans-IO core; each gives
/// a load warning saying so.
const NO_EFFECT: &[&str] = &[
    "secrequestbodyinmemorylimit",
    "secdatadir",
    "sectmpdir",
    "secuploaddir",
    "secuploadkeepfiles",
    "secuploadfilemode",
    "secauditengine",
    "secauditlog",
    "secauditlog2",
    "secauditlogparts",
    "secauditlogrelevantstatus",
    "secauditlogtype",
    "secauditlogformat",
    "secauditlogstoragedir",
    "secauditlogdirmode",
    "secauditlogfilemode",
    "secdebuglog",
    "secdebugloglevel",
    "secrxprefilter",
    "secstatusengine",
    "secserversignature",
    "sectmpsaveuploadedfiles",
    "secxmlexternalentity",
    "seccookieformat",
];

/// Why a ModSecurity directive is refused (the table in `docs/COMPATIBILITY.md` lists the
/// same).
pub(crate) fn refused_directive(lower_name: &str) -> Option<&'static str> {
    Some(match lower_name {
        "secrulescript" => {
            "Lua scripts are not run: waf-core embeds no script interpreter (a script could do \
             I/O and block a worker)"
        }
        "secremoterules" | "secremoterulesfailaction" => {
            "fetching rules over the network is I/O, which waf-core does not do"
        }
        "secgeolookupdb" => {
            "@geoLookup is not supported; GeoIP is the native policy's (ip.src.country)"
        }
        "secgsblookupdb" => "Google Safe Browsing lookups are network I/O",
        "sechttpblkey" => "@rbl DNS lookups are network I/O",
        "secchrootdir" => "a web server process setting, not an engine's",
        "secconnengine"
        | "secconnreadstatelimit"
        | "secconnwritestatelimit"
        | "secreadstatelimit"
        | "secwritestatelimit" => {
            "connection state limits are Apache-only; use the native rate limits"
        }
        "seccontentinjection" | "secstreaminbodyinspection" | "secstreamoutbodyinspection" => {
            "changing or streaming bodies (append, prepend, STREAM_*_BODY) is not supported"
        }
        "secdisablebackendcompression" => "upstream compression is the host's business",
        "sechashengine" | "sechashkey" | "sechashparam" | "sechashmethodrx" | "sechashmethodpm" => {
            "the HMAC hash engine is not supported (nor by libmodsecurity 3)"
        }
        "secguardianlog" => "piping to an external log program is not supported",
        "secinterceptonerror" => "the engine always answers with a verdict; errors never pass",
        "secruleperftime" => "per-rule timing (PERF_*) is not kept",
        "secsensorid" => "audit log identification is the host's",
        "secuploadfilelimit" => "the multipart part limit is fixed (DEFAULT_MULTIPART_PART_LIMIT)",
        "seccookiev0separator" => "version 0 cookies are split on ';' only",
        "secunicodecodepage" => "deprecated in ModSecurity 2.6, replaced by SecUnicodeMapFile",
        "seccachetransformations" => {
            "removed in ModSecurity 2.7; transformed values are always cached here"
        }
        "secpdfprotect"
        | "secpdfprotectmethod"
        | "secpdfprotectsecret"
        | "secpdfprotecttimeout"
        | "secpdfprotecttokenname" => "removed in ModSecurity 2.6",
        "secruleinheritance" => {
            "configuration contexts (Apache <Location>) do not exist: one Waf is one context"
        }
        _ => return None,
    })
}

impl Config {
    /// The step bound of one backtracking search: the smaller of `SecPcreMatchLimit` and
    /// `SecPcreMatchLimitRecursion` where set (0: the default).
    pub(crate) fn backtrack_limit(&self) -> usize {
        match (self.pcre_match_limit, self.pcre_match_limit_recursion) {
            (0, r) => r,
            (m, 0) => m,
            (m, r) => m.min(r),
        }
    }

    /// Applies one `Setting` directive. Unknown directives are errors.
    pub(crate) fn apply(
        &mut self,
        name: &str,
        args: &[String],
        span: &Span,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), Error> {
        let invalid = |msg: String| Error::new(ErrorKind::Invalid, Some(span), msg);
        let one = || -> Result<&str, Error> {
            match args {
                [a] => Ok(a.as_str()),
                _ => Err(invalid(format!(
                    "{name} takes one argument, got {}",
                    args.len()
                ))),
            }
        };
        let on_off = || -> Result<bool, Error> {
            match one()?.to_ascii_lowercase().as_str() {
                "on" => Ok(true),
                "off" => Ok(false),
                other => Err(invalid(format!("{name} must be On or Off, got {other:?}"))),
            }
        };
        let size = || -> Result<usize, Error> {
            let a = one()?;
            a.parse()
                .map_err(|_| invalid(format!("{name} needs a size in bytes, got {a:?}")))
        };
        let limit_action = || -> Result<LimitAction, Error> {
            match one()?.to_ascii_lowercase().as_str() {
                "reject" => Ok(LimitAction::Reject),
                "processpartial" => Ok(LimitAction::ProcessPartial),
                other => Err(invalid(format!(
                    "{name} must be Reject or ProcessPartial, got {other:?}"
                ))),
            }
        };
        let positive = |n: usize| -> Result<usize, Error> {
            if n == 0 {
                return Err(invalid(format!("{name} must be at least 1")));
            }
            Ok(n)
        };
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "secruleengine" => {
                self.engine_mode = parse_engine_mode(one()?).map_err(invalid)?;
            }
            "secrequestbodyaccess" => self.request_body_access = on_off()?,
            "secrequestbodylimit" => self.request_body_limit = size()?,
            "secrequestbodynofileslimit" => self.request_body_no_files_limit = size()?,
            "secrequestbodylimitaction" => self.request_body_limit_action = limit_action()?,
            "secresponsebodyaccess" => self.response_body_access = on_off()?,
            "secresponsebodylimit" => self.response_body_limit = size()?,
            "secresponsebodylimitaction" => self.response_body_limit_action = limit_action()?,
            "secresponsebodymimetype" => {
                self.response_body_mime_types = args
                    .iter()
                    .flat_map(|a| a.split_whitespace())
                    .map(|a| a.as_bytes().to_ascii_lowercase())
                    .collect();
            }
            "secresponsebodymimetypesclear" => self.response_body_mime_types.clear(),
            "secrequestbodyjsondepthlimit" => self.json_depth_limit = size()?,
            "secargumentslimit" => self.arguments_limit = size()?,
            "secargumentseparator" => {
                let a = one()?;
                match a.as_bytes() {
                    [c] => self.argument_separator = *c,
                    _ => return Err(invalid(format!("{name} takes one character, got {a:?}"))),
                }
            }
            "secpcrematchlimit" => self.pcre_match_limit = positive(size()?)?,
            "secpcrematchlimitrecursion" => self.pcre_match_limit_recursion = positive(size()?)?,
            "secunicodemapfile" => {
                let [file, code_page] = args else {
                    return Err(invalid(format!(
                        "{name} takes a file and a code page, got {} arguments",
                        args.len()
                    )));
                };
                let code_page: u32 = code_page.parse().map_err(|_| {
                    invalid(format!(
                        "{name} needs a code page number, got {code_page:?}"
                    ))
                })?;
                let path = std::path::Path::new(file.as_str());
                let path = match std::path::Path::new(&*span.file).parent() {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path.to_path_buf(),
                };
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        Some(span),
                        format!("cannot read unicode map file {}: {e}", path.display()),
                    )
                })?;
                let map = crate::transformations::unicode_map::UnicodeMap::parse(&text, code_page)
                    .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
                self.unicode_map = Some(std::sync::Arc::new(map));
            }
            "seccomponentsignature" => self.component_signatures.push(args.join(" ")),
            "secwebappid" => self.web_app_id = one()?.to_string(),
            "seccollectiontimeout" => {
                let a = one()?;
                self.collection_timeout_secs = a
                    .parse()
                    .map_err(|_| invalid(format!("{name} needs seconds, got {a:?}")))?;
            }
            _ if NO_EFFECT.contains(&lower.as_str()) => {
                warnings.push(Warning {
                    location: Some(crate::error::Location::from_span(span)),
                    message: format!("{name} has no effect in this engine and is ignored"),
                });
            }
            _ => {
                let message = match refused_directive(&lower) {
                    Some(why) => format!("unsupported directive {name}: {why}"),
                    None => format!("unknown or unsupported directive {name}"),
                };
                return Err(Error::new(ErrorKind::Unsupported, Some(span), message));
            }
        }
        Ok(())
    }
}
