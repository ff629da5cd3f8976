//! Actions: what a rule does besides matching (`id`, `msg`, `setvar`, `deny`, `ctl`, ...).
//!
//! Each [`ActionAst`] is turned into an [`Action`] once, at compile time, with its argument
//! checked; the compiler then folds metadata into the rule and keeps only the actions that
//! run per match (`setvar`, `ctl`, `initcol`, `setenv`, `expirevar`) in their written order.
//! Actions are grouped by kind as ModSecurity does: metadata, disruptive, flow, data
//! (`setvar` and friends) and `ctl`.

pub(crate) mod ctl;
pub(crate) mod setvar;

use crate::macros::MacroString;
use crate::report::Severity;
use crate::seclang::ActionAst;
use crate::transformations::Transformation;

pub(crate) use ctl::Ctl;
pub(crate) use setvar::{CollectionName, SetVar};

/// A parsed action.
#[derive(Debug)]
pub(crate) enum Action {
    // Metadata.
    Id(u64),
    Phase(u8),
    Msg(MacroString),
    LogData(MacroString),
    Tag(String),
    Severity(Severity),
    Ver(String),
    Rev(String),
    Maturity(u8),
    Accuracy(u8),
    // Disruptive.
    Disruptive(Disruptive),
    Status(u16),
    // Flow.
    Chain,
    SkipAfter(String),
    Skip(u32),
    // Logging.
    Log(bool),
    AuditLog(bool),
    // Transformations and matching.
    Transform(Option<Transformation>),
    Capture,
    MultiMatch,
    // Per-match effects.
    Effect(Effect),
    /// `xmlns:prefix=URI`: a namespace prefix for the rule's XPath targets.
    Xmlns(String, String),
}

/// The disruptive action of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Disruptive {
    /// `pass`: go on.
    Pass,
    /// `block`: do what `SecDefaultAction` says.
    Block,
    /// `deny`.
    Deny,
    /// `drop`.
    Drop,
    /// `allow`, `allow:phase`, `allow:request`.
    Allow(AllowScope),
    /// `redirect:URL`, macros expanded when it fires (`redirect:/blocked?id=%{RULE.id}`).
    Redirect(MacroString),
}

/// How far `allow` reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllowScope {
    /// Stop all rule processing for the transaction (except logging).
    All,
    /// Stop the current phase.
    Phase,
    /// Stop the request phases.
    Request,
}

/// Actions that change transaction state, run once per match in written order.
#[derive(Debug)]
pub(crate) enum Effect {
    /// `setvar`.
    SetVar(SetVar),
    /// `ctl`.
    Ctl(Ctl),
    /// `initcol:ip=%{remote_addr}`.
    InitCol(CollectionName, MacroString),
    /// `setenv:NAME=VALUE`.
    SetEnv(MacroString, MacroString),
    /// `expirevar:ip.key=SECONDS`.
    ExpireVar(CollectionName, MacroString, MacroString),
}

/// Parses one action. The message is lower-case, without location.
pub(crate) fn parse(ast: &ActionAst) -> Result<Action, String> {
    let name = ast.name.to_ascii_lowercase();
    let value = ast.value.as_deref();
    let need = |what: &str| value.ok_or_else(|| format!("action {} needs {what}", ast.name));
    let macro_value =
        |what: &str| -> Result<MacroString, String> { MacroString::parse(need(what)?) };
    let number = |what: &str| -> Result<u64, String> {
        let v = need(what)?.trim();
        v.parse::<u64>()
            .map_err(|_| format!("action {} needs {what}, got {v:?}", ast.name))
    };
    Ok(match name.as_str() {
        "id" => match number("a rule id")? {
            0 => return Err("rule id 0 is not allowed".into()),
            id => Action::Id(id),
        },
        "phase" => Action::Phase(
            match need("a phase")?.trim().to_ascii_lowercase().as_str() {
                "1" | "request_headers" => 1,
                "2" | "request" | "request_body" => 2,
                "3" | "response_headers" => 3,
                "4" | "response" | "response_body" => 4,
                "5" | "logging" => 5,
                other => return Err(format!("unknown phase {other:?}")),
            },
        ),
        "msg" => Action::Msg(macro_value("a message")?),
        "logdata" => Action::LogData(macro_value("data")?),
        "tag" => Action::Tag(need("a tag")?.to_string()),
        "severity" => {
            let v = need("a severity")?;
            Action::Severity(
                Severity::parse(v.trim()).ok_or_else(|| format!("unknown severity {v:?}"))?,
            )
        }
        "ver" => Action::Ver(need("a version")?.to_string()),
        "rev" => Action::Rev(need("a revision")?.to_string()),
        "maturity" => Action::Maturity(small(number("a level 1-9")?)?),
        "accuracy" => Action::Accuracy(small(number("a level 1-9")?)?),
        "pass" => Action::Disruptive(Disruptive::Pass),
        "block" => Action::Disruptive(Disruptive::Block),
        "deny" => Action::Disruptive(Disruptive::Deny),
        "drop" => Action::Disruptive(Disruptive::Drop),
        "allow" => Action::Disruptive(Disruptive::Allow(
            match value.map(str::to_ascii_lowercase).as_deref() {
                None | Some("") => AllowScope::All,
                Some("phase") => AllowScope::Phase,
                Some("request") => AllowScope::Request,
                Some(other) => return Err(format!("unknown allow scope {other:?}")),
            },
        )),
        "redirect" => Action::Disruptive(Disruptive::Redirect(macro_value("a URL")?)),
        "status" => {
            let n = number("an HTTP status")?;
            if !(100..=999).contains(&n) {
                return Err(format!("status {n} is not an HTTP status"));
            }
            Action::Status(n as u16)
        }
        "chain" => Action::Chain,
        "skipafter" => Action::SkipAfter(need("a marker")?.trim().to_string()),
        "skip" => Action::Skip(
            u32::try_from(number("a count")?).map_err(|_| "skip count too large".to_string())?,
        ),
        "log" => Action::Log(true),
        "nolog" => Action::Log(false),
        "auditlog" => Action::AuditLog(true),
        "noauditlog" => Action::AuditLog(false),
        "t" => {
            let v = need("a transformation")?.trim();
            if v.eq_ignore_ascii_case("none") {
                Action::Transform(None)
            } else {
                Action::Transform(Some(
                    Transformation::from_name(v)
                        .ok_or_else(|| format!("unsupported transformation t:{v}"))?,
                ))
            }
        }
        "xmlns" => {
            let v = need("prefix=URI")?;
            let (prefix, uri) = v
                .split_once('=')
                .ok_or_else(|| format!("xmlns needs prefix=URI, got {v:?}"))?;
            Action::Xmlns(prefix.trim().to_string(), uri.trim().to_string())
        }
        "capture" => Action::Capture,
        "multimatch" => Action::MultiMatch,
        "setvar" => Action::Effect(Effect::SetVar(SetVar::parse(need("an assignment")?)?)),
        "ctl" => Action::Effect(Effect::Ctl(Ctl::parse(need("an option")?)?)),
        "initcol" => {
            let v = need("collection=key")?;
            let (col, key) = v
                .split_once('=')
                .ok_or_else(|| format!("initcol needs collection=key, got {v:?}"))?;
            let col = CollectionName::parse(col.trim())?;
            if col == CollectionName::Tx {
                return Err("initcol cannot initialise TX".into());
            }
            Action::Effect(Effect::InitCol(col, MacroString::parse(key.trim())?))
        }
        "setenv" => {
            let v = need("NAME=VALUE")?;
            let (n, val) = v.split_once('=').unwrap_or((v, "1"));
            Action::Effect(Effect::SetEnv(
                MacroString::parse(n.trim())?,
                MacroString::parse(val)?,
            ))
        }
        "expirevar" => {
            let v = need("collection.key=SECONDS")?;
            let (target, secs) = v.split_once('=').unwrap_or((v, "0"));
            let (col, key) = target
                .split_once('.')
                .ok_or_else(|| format!("expirevar needs collection.key, got {target:?}"))?;
            Action::Effect(Effect::ExpireVar(
                CollectionName::parse(col.trim())?,
                MacroString::parse(key.trim())?,
                MacroString::parse(secs.trim())?,
            ))
        }
        _ => {
            return Err(match refused(&name) {
                Some(why) => format!("unsupported action {}: {why}", ast.name),
                None => format!("unsupported action {}: not a ModSecurity action", ast.name),
            })
        }
    })
}

/// Why a ModSecurity action is refused (the table in `docs/COMPATIBILITY.md` lists the same).
pub(crate) fn refused(lower_name: &str) -> Option<&'static str> {
    Some(match lower_name {
        "exec" => "it runs an external program or Lua script, which waf-core never does",
        "append" | "prepend" => "changing the response body is not supported",
        "proxy" => "forwarding a request is the host's I/O, not the engine's",
        "pause" => "it would hold a worker; waf-core never blocks",
        "sanitisearg"
        | "sanitisematched"
        | "sanitisematchedbytes"
        | "sanitiserequestheader"
        | "sanitiseresponseheader" => {
            "the core writes no audit log to mask; mask data in the host's log"
        }
        "setuid" | "setsid" | "setrsc" => {
            "USER, SESSION and RESOURCE records keyed by these actions are not kept"
        }
        "deprecatevar" => "collection values that decay over time are not kept",
        _ => return None,
    })
}

fn small(n: u64) -> Result<u8, String> {
    u8::try_from(n).map_err(|_| format!("{n} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seclang::Span;

    fn act(name: &str, value: Option<&str>) -> Result<Action, String> {
        parse(&ActionAst {
            span: Span {
                file: "t".into(),
                line: 1,
                column: 1,
            },
            name: name.into(),
            value: value.map(Into::into),
        })
    }

    #[test]
    fn parses_common_actions() {
        assert!(matches!(act("id", Some("942100")), Ok(Action::Id(942100))));
        assert!(matches!(
            act("phase", Some("request")),
            Ok(Action::Phase(2))
        ));
        assert!(matches!(act("Phase", Some("1")), Ok(Action::Phase(1))));
        assert!(matches!(
            act("severity", Some("CRITICAL")),
            Ok(Action::Severity(Severity::Critical))
        ));
        assert!(matches!(
            act("t", Some("none")),
            Ok(Action::Transform(None))
        ));
        assert!(matches!(
            act("status", Some("403")),
            Ok(Action::Status(403))
        ));
    }

    #[test]
    fn rejects_unknown_and_bad_values() {
        assert!(act("exec", Some("/bin/sh"))
            .unwrap_err()
            .starts_with("unsupported"));
        assert!(act("id", Some("abc")).is_err());
        assert!(act("id", Some("0")).is_err());
        assert!(act("phase", Some("9")).is_err());
        assert!(act("status", Some("12")).is_err());
        assert!(act("t", Some("nosuch"))
            .unwrap_err()
            .starts_with("unsupported"));
    }
}
