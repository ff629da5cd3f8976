//! `ctl`: change the engine's configuration for the rest of one transaction.
//!
//! ```text
//! ctl:ruleEngine=DetectionOnly
//! ctl:ruleRemoveById=920540            ctl:ruleRemoveById=1-999999
//! ctl:ruleRemoveByTag=OWASP_CRS
//! ctl:ruleRemoveTargetById=942100;ARGS:password
//! ctl:ruleRemoveTargetByTag=xss-perf-disable;REQUEST_FILENAME
//! ctl:requestBodyProcessor=JSON        ctl:forceRequestBodyVariable=On
//! ctl:requestBodyAccess=Off            ctl:auditEngine=Off
//! ```

use crate::seclang::IdRange;
use crate::variables::{Selector, Variable};
use crate::waf::EngineMode;

/// A request body processor (`ctl:requestBodyProcessor`, `REQBODY_PROCESSOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyProcessor {
    Urlencoded,
    Multipart,
    Json,
    Xml,
}

impl BodyProcessor {
    pub(crate) fn parse(name: &str) -> Option<BodyProcessor> {
        Some(match name.to_ascii_uppercase().as_str() {
            "URLENCODED" => BodyProcessor::Urlencoded,
            "MULTIPART" => BodyProcessor::Multipart,
            "JSON" => BodyProcessor::Json,
            "XML" => BodyProcessor::Xml,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            BodyProcessor::Urlencoded => "URLENCODED",
            BodyProcessor::Multipart => "MULTIPART",
            BodyProcessor::Json => "JSON",
            BodyProcessor::Xml => "XML",
        }
    }
}

/// A target named by `ctl:ruleRemoveTarget*`: `ARGS:foo`, `REQUEST_FILENAME`.
#[derive(Clone, Debug)]
pub(crate) struct TargetRef {
    pub(crate) variable: Variable,
    pub(crate) selector: Selector,
}

/// Which rules a `ctl` removal applies to. Shared, not copied: a transaction records the
/// removals its `ctl`s make by cloning these, with no allocation.
#[derive(Clone, Debug)]
pub(crate) enum RuleSelector {
    Ids(std::sync::Arc<[IdRange]>),
    Tag(std::sync::Arc<str>),
    Msg(std::sync::Arc<str>),
}

impl std::fmt::Display for RuleSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleSelector::Ids(ranges) => {
                f.write_str("rule id ")?;
                for (i, r) in ranges.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if r.start == r.end {
                        write!(f, "{}", r.start)?;
                    } else {
                        write!(f, "{}-{}", r.start, r.end)?;
                    }
                }
                Ok(())
            }
            RuleSelector::Tag(t) => write!(f, "tag {t:?}"),
            RuleSelector::Msg(m) => write!(f, "msg {m:?}"),
        }
    }
}

/// A compiled `ctl` option.
#[derive(Clone, Debug)]
pub(crate) enum Ctl {
    RuleEngine(EngineMode),
    RuleRemove(RuleSelector),
    RuleRemoveTarget(RuleSelector, TargetRef),
    RequestBodyProcessor(BodyProcessor),
    ForceRequestBodyVariable(bool),
    RequestBodyAccess(bool),
    RequestBodyLimit(usize),
    ResponseBodyAccess(bool),
    ResponseBodyLimit(usize),
    /// `auditEngine`: recorded in the report; this engine writes no audit log itself.
    AuditEngine(bool),
    /// `auditLogParts=+E`: checked and accepted; the core writes no audit log, so the parts
    /// are for the host's log (not carried in the report yet).
    AuditLogParts,
}

impl Ctl {
    pub(crate) fn parse(text: &str) -> Result<Ctl, String> {
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| format!("ctl needs option=value, got {text:?}"))?;
        let name = name.trim();
        let value = value.trim();
        let on_off = || -> Result<bool, String> {
            match value.to_ascii_lowercase().as_str() {
                "on" => Ok(true),
                "off" => Ok(false),
                _ => Err(format!("ctl:{name} needs On or Off, got {value:?}")),
            }
        };
        let size = || -> Result<usize, String> {
            value
                .parse()
                .map_err(|_| format!("ctl:{name} needs a size in bytes, got {value:?}"))
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "ruleengine" => Ctl::RuleEngine(parse_engine_mode(value)?),
            "ruleremovebyid" => Ctl::RuleRemove(RuleSelector::Ids(parse_id_ranges(value)?.into())),
            "ruleremovebytag" => Ctl::RuleRemove(RuleSelector::Tag(value.into())),
            "ruleremovebymsg" => Ctl::RuleRemove(RuleSelector::Msg(value.into())),
            "ruleremovetargetbyid" | "ruleremovetargetbytag" | "ruleremovetargetbymsg" => {
                let (which, target) = value
                    .split_once(';')
                    .ok_or_else(|| format!("ctl:{name} needs WHICH;TARGET, got {value:?}"))?;
                let rules = match name.to_ascii_lowercase().as_str() {
                    "ruleremovetargetbyid" => RuleSelector::Ids(parse_id_ranges(which)?.into()),
                    "ruleremovetargetbytag" => RuleSelector::Tag(which.trim().into()),
                    _ => RuleSelector::Msg(which.trim().into()),
                };
                Ctl::RuleRemoveTarget(rules, parse_target(target)?)
            }
            "requestbodyprocessor" => Ctl::RequestBodyProcessor(
                BodyProcessor::parse(value)
                    .ok_or_else(|| format!("unsupported body processor {value:?}"))?,
            ),
            "forcerequestbodyvariable" => Ctl::ForceRequestBodyVariable(on_off()?),
            "requestbodyaccess" => Ctl::RequestBodyAccess(on_off()?),
            "requestbodylimit" => Ctl::RequestBodyLimit(size()?),
            "responsebodyaccess" => Ctl::ResponseBodyAccess(on_off()?),
            "responsebodylimit" => Ctl::ResponseBodyLimit(size()?),
            "auditengine" => Ctl::AuditEngine(match value.to_ascii_lowercase().as_str() {
                "on" | "relevantonly" => true,
                "off" => false,
                _ => {
                    return Err(format!(
                        "ctl:auditEngine needs On, Off or RelevantOnly, got {value:?}"
                    ))
                }
            }),
            "auditlogparts" => {
                let parts = value.strip_prefix(['+', '-']).unwrap_or(value);
                if parts.is_empty()
                    || !parts
                        .bytes()
                        .all(|b| matches!(b.to_ascii_uppercase(), b'A'..=b'K' | b'Z'))
                {
                    return Err(format!(
                        "ctl:auditLogParts needs audit log part letters (A-K, Z), got {value:?}"
                    ));
                }
                Ctl::AuditLogParts
            }
            _ => return Err(format!("unsupported ctl option {name}")),
        })
    }
}

/// `On`, `Off`, `DetectionOnly`, any case.
pub(crate) fn parse_engine_mode(value: &str) -> Result<EngineMode, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" => Ok(EngineMode::On),
        "off" => Ok(EngineMode::Off),
        "detectiononly" => Ok(EngineMode::DetectionOnly),
        _ => Err(format!(
            "rule engine mode must be On, Off or DetectionOnly, got {value:?}"
        )),
    }
}

/// `942100`, `1-999999`, several separated by spaces or commas.
pub(crate) fn parse_id_ranges(text: &str) -> Result<Vec<IdRange>, String> {
    let mut out = Vec::new();
    for part in text.split([' ', ',']).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let start: u64 = a
            .trim()
            .parse()
            .map_err(|_| format!("bad rule id {part:?}"))?;
        let end: u64 = b
            .trim()
            .parse()
            .map_err(|_| format!("bad rule id {part:?}"))?;
        if end < start {
            return Err(format!("empty rule id range {part:?}"));
        }
        out.push(IdRange { start, end });
    }
    if out.is_empty() {
        return Err("missing rule id".into());
    }
    Ok(out)
}

/// Parses `VARIABLE[:key|:/regex/]`, as written in `ctl:ruleRemoveTargetById=ID;TARGET`.
pub(crate) fn parse_target(text: &str) -> Result<TargetRef, String> {
    let text = text.trim();
    let (name, key) = match text.split_once(':') {
        Some((n, k)) => (n, Some(k)),
        None => (text, None),
    };
    let variable =
        Variable::from_name(name.trim()).ok_or_else(|| format!("unknown variable {name:?}"))?;
    let selector = match key {
        Some(k) => Selector::parse(k.trim())?,
        None => Selector::All,
    };
    Ok(TargetRef { variable, selector })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_crs_ctls() {
        assert!(matches!(
            Ctl::parse("ruleEngine=DetectionOnly"),
            Ok(Ctl::RuleEngine(EngineMode::DetectionOnly))
        ));
        match Ctl::parse("ruleRemoveById=1-999999").unwrap() {
            Ctl::RuleRemove(RuleSelector::Ids(r)) => assert_eq!(
                r.to_vec(),
                vec![IdRange {
                    start: 1,
                    end: 999_999
                }]
            ),
            other => panic!("{other:?}"),
        }
        match Ctl::parse("ruleRemoveTargetByTag=xss-perf-disable;REQUEST_FILENAME").unwrap() {
            Ctl::RuleRemoveTarget(RuleSelector::Tag(t), target) => {
                assert_eq!(&*t, "xss-perf-disable");
                assert_eq!(target.variable, Variable::RequestFilename);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Ctl::parse("requestBodyProcessor=JSON"),
            Ok(Ctl::RequestBodyProcessor(BodyProcessor::Json))
        ));
        assert!(Ctl::parse("hashEngine=On")
            .unwrap_err()
            .starts_with("unsupported"));
        assert!(Ctl::parse("ruleRemoveById=abc").is_err());
    }
}
