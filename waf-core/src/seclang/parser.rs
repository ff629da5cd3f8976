//! Directives: the shape of each known directive, and `Include`.
//!
//! Quoting follows Coraza (`internal/seclang/rule_parser.go`) and libmodsecurity
//! (`src/parser/seclang-scanner.ll`): each `SecRule` argument is double-quoted or a bare word;
//! inside double quotes only `\"` is unescaped (`\\` and every other escape reach the operator
//! untouched, so regular expressions keep their backslashes); the operator string is cut at the
//! first `"` preceded by an even number of backslashes. Actions are split on commas outside
//! single quotes, a backslash protecting the next byte.
//!
//! Unlike Coraza, every error carries the file, line and column of the offending piece, and an
//! unclosed single quote in an action list is an error rather than a warning.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ast::*;
use super::error::ParseError;
use super::lexer::{Bare, Lines, Locator, LogicalLine, Token, Tokenizer};
use crate::limits::DEFAULT_INCLUDE_DEPTH;

pub(super) fn parse_str(name: &str, text: &str) -> Result<Vec<Directive>, ParseError> {
    let mut parser = Parser::default();
    parser.parse_text(Arc::from(name), None, text, 0)?;
    Ok(parser.out)
}

pub(super) fn parse_file(path: &Path) -> Result<Vec<Directive>, ParseError> {
    let mut parser = Parser::default();
    let file: Arc<str> = Arc::from(path.display().to_string());
    let bytes = std::fs::read(path).map_err(|e| ParseError {
        span: Span {
            file: Arc::clone(&file),
            line: 0,
            column: 0,
        },
        message: format!("cannot read {}: {e}", path.display()),
        line_text: String::new(),
    })?;
    let text = decode(&file, bytes)?;
    parser.stack.push(canonical(path));
    parser.parse_text(file, path.parent().map(Path::to_path_buf), &text, 0)?;
    Ok(parser.out)
}

/// Rule text as UTF-8. Comment lines may hold any bytes (older rule sets have Latin-1 in
/// comments; they are skipped anyway); elsewhere a byte that is not UTF-8 is an error at its
/// place, since the syntax tree holds text.
fn decode(file: &Arc<str>, bytes: Vec<u8>) -> Result<String, ParseError> {
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(e) => e.into_bytes(),
    };
    let mut out = String::with_capacity(bytes.len());
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        match std::str::from_utf8(line) {
            Ok(l) => out.push_str(l),
            Err(_) if line.trim_ascii_start().starts_with(b"#") => {
                out.push_str(&String::from_utf8_lossy(line));
            }
            Err(e) => {
                let at = e.valid_up_to();
                let byte = line.get(at).copied().unwrap_or(0);
                return Err(ParseError {
                    span: Span {
                        file: Arc::clone(file),
                        line: u32::try_from(i + 1).unwrap_or(u32::MAX),
                        column: u32::try_from(at + 1).unwrap_or(u32::MAX),
                    },
                    message: format!("unsupported byte 0x{byte:02x}: rule text must be UTF-8"),
                    line_text: String::from_utf8_lossy(line).trim_end().to_owned(),
                });
            }
        }
    }
    Ok(out)
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[derive(Default)]
struct Parser {
    out: Vec<Directive>,
    /// Files being read, outermost first (canonical paths), to report include cycles.
    stack: Vec<PathBuf>,
}

impl Parser {
    fn parse_text(
        &mut self,
        file: Arc<str>,
        dir: Option<PathBuf>,
        text: &str,
        depth: usize,
    ) -> Result<(), ParseError> {
        let mut lines = Lines::new(text);
        let mut line = LogicalLine::default();
        while lines.next_into(&mut line) {
            let loc = Locator::new(&file, text, &line);
            self.directive(&loc, &line.text, dir.as_deref(), depth)?;
        }
        Ok(())
    }

    fn directive(
        &mut self,
        loc: &Locator<'_>,
        text: &str,
        dir: Option<&Path>,
        depth: usize,
    ) -> Result<(), ParseError> {
        let mut tok = Tokenizer::new(text, 0);
        let start = tok.skip_space();
        let Some(name_tok) = tok.next_token(loc, Bare::Plain, false)? else {
            return Ok(());
        };
        if name_tok.quoted {
            return Err(loc.error(start, "expected a directive name, found a quoted string"));
        }
        if text.ends_with('`') {
            // Coraza reads a line ending in a backtick as the start of a multi-line block
            // (`SecDataset name \``); we do not support those.
            return Err(loc.error(
                text.len().saturating_sub(1),
                "unsupported multi-line backtick block",
            ));
        }
        let name = name_tok.text;
        let span = loc.span(start);
        let lower = name.to_ascii_lowercase();
        let kind = match lower.as_str() {
            "secrule" => DirectiveKind::Rule(rule(loc, &mut tok, &name)?),
            "secaction" => DirectiveKind::Action(single_action_list(loc, &mut tok, &name)?),
            "secdefaultaction" => {
                DirectiveKind::DefaultAction(single_action_list(loc, &mut tok, &name)?)
            }
            "secmarker" => DirectiveKind::Marker(one_arg(loc, &mut tok, &name)?.text),
            "secruleremovebyid" => DirectiveKind::RemoveById(id_list(loc, &mut tok, &name)?),
            "secruleremovebytag" => DirectiveKind::RemoveByTag(one_arg(loc, &mut tok, &name)?.text),
            "secruleremovebymsg" => DirectiveKind::RemoveByMsg(one_arg(loc, &mut tok, &name)?.text),
            "secruleupdatetargetbyid" => {
                let ids_tok = required(loc, &mut tok, &name, "rule id")?;
                let ids = ids(loc, &ids_tok)?;
                let (targets, replaced) = update_targets(loc, &mut tok, &name)?;
                DirectiveKind::UpdateTargetById {
                    ids,
                    targets,
                    replaced,
                }
            }
            "secruleupdatetargetbytag" => {
                let tag = required(loc, &mut tok, &name, "tag")?.text;
                let (targets, replaced) = update_targets(loc, &mut tok, &name)?;
                DirectiveKind::UpdateTargetByTag {
                    tag,
                    targets,
                    replaced,
                }
            }
            "secruleupdatetargetbymsg" => {
                let msg = required(loc, &mut tok, &name, "message")?.text;
                let (targets, replaced) = update_targets(loc, &mut tok, &name)?;
                DirectiveKind::UpdateTargetByMsg {
                    msg,
                    targets,
                    replaced,
                }
            }
            "secruleupdateactionbyid" => {
                let id_tok = required(loc, &mut tok, &name, "rule id")?;
                if id_tok.text.contains(':') {
                    return Err(loc.error(
                        id_tok.start,
                        format!("unsupported chain offset in {name}: {}", id_tok.text),
                    ));
                }
                let id = parse_id(loc, &id_tok, &id_tok.text, 0)?;
                let actions = single_action_list(loc, &mut tok, &name)?;
                DirectiveKind::UpdateActionById { id, actions }
            }
            "include" | "includeoptional" => {
                let path_tok = one_arg(loc, &mut tok, &name)?;
                let optional = lower == "includeoptional";
                return self.include(loc, &path_tok, dir, depth, optional);
            }
            _ => {
                let mut args = Vec::new();
                while let Some(t) = tok.next_token(loc, Bare::Plain, true)? {
                    args.push(t.text);
                }
                DirectiveKind::Setting { name, args }
            }
        };
        let note = tok.unclosed.then(|| {
            "the action list has no closing quote; read to the end of the line".to_string()
        });
        self.out.push(Directive { span, kind, note });
        Ok(())
    }

    fn include(
        &mut self,
        loc: &Locator<'_>,
        path_tok: &Token,
        dir: Option<&Path>,
        depth: usize,
        optional: bool,
    ) -> Result<(), ParseError> {
        if depth + 1 > DEFAULT_INCLUDE_DEPTH {
            return Err(loc.error(
                path_tok.start,
                format!("include depth limit of {DEFAULT_INCLUDE_DEPTH} exceeded"),
            ));
        }
        let written = Path::new(&path_tok.text);
        let full = match dir {
            Some(d) if written.is_relative() => d.join(written),
            _ => written.to_path_buf(),
        };
        let full_str = full.to_string_lossy().into_owned();
        let paths: Vec<PathBuf> = if full_str.contains(['*', '?', '[']) {
            let entries = glob::glob(&full_str).map_err(|e| {
                loc.error(
                    path_tok.start,
                    format!("invalid include pattern {full_str}: {e}"),
                )
            })?;
            let mut paths = Vec::new();
            for entry in entries {
                match entry {
                    Ok(p) => paths.push(p),
                    Err(e) => {
                        return Err(loc.error(
                            path_tok.start,
                            format!("cannot read {}: {}", e.path().display(), e.error()),
                        ))
                    }
                }
            }
            if paths.is_empty() {
                if optional {
                    return Ok(());
                }
                return Err(loc.error(path_tok.start, format!("no file matches {full_str}")));
            }
            paths
        } else {
            if optional && !full.exists() {
                return Ok(());
            }
            vec![full]
        };
        for path in paths {
            let bytes = std::fs::read(&path).map_err(|e| {
                loc.error(
                    path_tok.start,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            let canon = canonical(&path);
            if self.stack.contains(&canon) {
                return Err(loc.error(
                    path_tok.start,
                    format!(
                        "include cycle: {} is already being included",
                        path.display()
                    ),
                ));
            }
            self.stack.push(canon);
            let file: Arc<str> = Arc::from(path.display().to_string());
            let text = decode(&file, bytes)?;
            self.parse_text(file, path.parent().map(Path::to_path_buf), &text, depth + 1)?;
            self.stack.pop();
        }
        Ok(())
    }
}

/// The next argument, or an error naming what is missing.
fn required(
    loc: &Locator<'_>,
    tok: &mut Tokenizer<'_>,
    directive: &str,
    what: &str,
) -> Result<Token, ParseError> {
    let at = tok.skip_space();
    match tok.next_token(loc, Bare::SingleQuoteAware, true)? {
        Some(t) => Ok(t),
        None => Err(loc.error(at, format!("missing {what} in {directive}"))),
    }
}

/// Exactly one argument.
fn one_arg(
    loc: &Locator<'_>,
    tok: &mut Tokenizer<'_>,
    directive: &str,
) -> Result<Token, ParseError> {
    let t = required(loc, tok, directive, "argument")?;
    no_more(loc, tok, directive)?;
    Ok(t)
}

fn no_more(loc: &Locator<'_>, tok: &mut Tokenizer<'_>, directive: &str) -> Result<(), ParseError> {
    let at = tok.skip_space();
    if !tok.at_end() {
        return Err(loc.error(at, format!("unexpected argument in {directive}")));
    }
    Ok(())
}

/// `SecRule VARIABLES OPERATOR [ACTIONS]`.
fn rule(
    loc: &Locator<'_>,
    tok: &mut Tokenizer<'_>,
    directive: &str,
) -> Result<RuleAst, ParseError> {
    let at = tok.skip_space();
    let vars_tok = match tok.next_token(loc, Bare::SingleQuoteAware, false)? {
        Some(t) => t,
        None => return Err(loc.error(at, format!("missing variables in {directive}"))),
    };
    reject_single_quote(loc, &vars_tok)?;
    let variables = variables(loc, &vars_tok)?;
    let at = tok.skip_space();
    let op_tok = match tok.next_token(loc, Bare::Plain, false)? {
        Some(t) => t,
        None => return Err(loc.error(at, format!("missing operator in {directive}"))),
    };
    reject_single_quote(loc, &op_tok)?;
    let operator = operator(loc, &op_tok)?;
    tok.lenient_close = true;
    let actions = match tok.next_token(loc, Bare::SingleQuoteAware, false)? {
        Some(t) => {
            reject_single_quote(loc, &t)?;
            actions(loc, &t)?
        }
        None => Vec::new(),
    };
    no_more(loc, tok, directive)?;
    Ok(RuleAst {
        variables,
        operator,
        actions,
    })
}

fn reject_single_quote(loc: &Locator<'_>, t: &Token) -> Result<(), ParseError> {
    if !t.quoted && t.text.starts_with(['\'', '`']) {
        return Err(loc.error(
            t.start,
            "unsupported quoting: quote directive arguments with double quotes",
        ));
    }
    Ok(())
}

/// `SecAction`, `SecDefaultAction`, the last argument of `SecRuleUpdateActionById`.
fn single_action_list(
    loc: &Locator<'_>,
    tok: &mut Tokenizer<'_>,
    directive: &str,
) -> Result<Vec<ActionAst>, ParseError> {
    let at = tok.skip_space();
    tok.lenient_close = true;
    let t = match tok.next_token(loc, Bare::SingleQuoteAware, false)? {
        Some(t) => t,
        None => return Err(loc.error(at, format!("missing actions in {directive}"))),
    };
    reject_single_quote(loc, &t)?;
    let list = actions(loc, &t)?;
    no_more(loc, tok, directive)?;
    Ok(list)
}

/// `"TARGETS" ["REPLACED"]` of the `SecRuleUpdateTarget*` directives.
fn update_targets(
    loc: &Locator<'_>,
    tok: &mut Tokenizer<'_>,
    directive: &str,
) -> Result<(Vec<VariableAst>, Option<Vec<VariableAst>>), ParseError> {
    let t = required(loc, tok, directive, "targets")?;
    let targets = variables(loc, &t)?;
    let replaced = match tok.next_token(loc, Bare::SingleQuoteAware, true)? {
        Some(r) => Some(variables(loc, &r)?),
        None => None,
    };
    no_more(loc, tok, directive)?;
    Ok((targets, replaced))
}

/// `SecRuleRemoveById 1 2 100-200` (commas accepted as separators too).
fn id_list(
    loc: &Locator<'_>,
    tok: &mut Tokenizer<'_>,
    directive: &str,
) -> Result<Vec<IdRange>, ParseError> {
    let mut out = Vec::new();
    let at = tok.skip_space();
    while let Some(t) = tok.next_token(loc, Bare::Plain, true)? {
        out.extend(ids(loc, &t)?);
    }
    if out.is_empty() {
        return Err(loc.error(at, format!("missing rule id in {directive}")));
    }
    Ok(out)
}

/// `1,2,100-200`.
fn ids(loc: &Locator<'_>, t: &Token) -> Result<Vec<IdRange>, ParseError> {
    let mut out = Vec::new();
    let mut offset = 0;
    for part in t.text.split(',') {
        let here = offset;
        offset += part.len() + 1;
        let trimmed = part.trim();
        if trimmed.is_empty() {
            continue;
        }
        let lead = part.len() - part.trim_start().len();
        let range = match trimmed.split_once('-') {
            Some((a, b)) => {
                let start = parse_id(loc, t, a.trim(), here + lead)?;
                let end = parse_id(loc, t, b.trim(), here + lead)?;
                if start > end {
                    return Err(loc.error(
                        t.raw_offset(here + lead),
                        format!("invalid id range {trimmed}: start is after end"),
                    ));
                }
                IdRange { start, end }
            }
            None => {
                let id = parse_id(loc, t, trimmed, here + lead)?;
                IdRange { start: id, end: id }
            }
        };
        out.push(range);
    }
    if out.is_empty() {
        return Err(loc.error(t.start, "missing rule id"));
    }
    Ok(out)
}

fn parse_id(loc: &Locator<'_>, t: &Token, s: &str, offset: usize) -> Result<u64, ParseError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(loc.error(t.raw_offset(offset), format!("invalid rule id {s:?}")));
    }
    s.parse::<u64>()
        .map_err(|_| loc.error(t.raw_offset(offset), format!("invalid rule id {s:?}")))
}

/// Splits a target list on `|` outside `/regex/` and single quotes.
fn variables(loc: &Locator<'_>, t: &Token) -> Result<Vec<VariableAst>, ParseError> {
    let s = t.text.as_str();
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        // Skip whitespace around `|` (ModSecurity allows `ARGS | ARGS_NAMES` when quoted).
        while b.get(i).is_some_and(|&c| super::lexer::is_space(c)) {
            i += 1;
        }
        let start = i;
        let mut exclusion = false;
        let mut count = false;
        while let Some(&c) = b.get(i) {
            match c {
                b'!' if !exclusion => exclusion = true,
                b'&' if !count => count = true,
                _ => break,
            }
            i += 1;
        }
        let name_start = i;
        while b.get(i).is_some_and(|&c| c != b'|' && c != b':') {
            i += 1;
        }
        let name = s.get(name_start..i).unwrap_or("").trim_end();
        if name.is_empty() {
            let msg = if b.get(i).is_none() && start == i && out.is_empty() {
                "missing variables"
            } else {
                "missing variable name"
            };
            return Err(loc.error(t.raw_offset(name_start), msg));
        }
        let mut selector = None;
        if b.get(i) == Some(&b':') {
            i += 1;
            let sel_start = i;
            match b.get(i) {
                Some(b'\'') => {
                    // Quoted key: up to the closing quote, `\'` is a quote.
                    i += 1;
                    let mut key = String::new();
                    let mut run = i;
                    loop {
                        match b.get(i) {
                            None => {
                                return Err(loc.error(t.raw_offset(sel_start), "unclosed quote"))
                            }
                            Some(b'\\') if b.get(i + 1) == Some(&b'\'') => {
                                key.push_str(s.get(run..i).unwrap_or(""));
                                i += 1;
                                run = i;
                                i += 1;
                            }
                            Some(b'\'') => {
                                key.push_str(s.get(run..i).unwrap_or(""));
                                i += 1;
                                break;
                            }
                            Some(_) => i += 1,
                        }
                    }
                    // `ARGS:'/^a|b$/'` is a quoted regex (Coraza, ModSecurity).
                    let regex = key
                        .strip_prefix('/')
                        .and_then(|k| k.strip_suffix('/'))
                        .filter(|_| key.len() >= 2)
                        .map(str::to_owned);
                    selector = Some(match regex {
                        Some(r) => SelectorAst::Regex(r),
                        None => SelectorAst::Key(key),
                    });
                }
                Some(b'/') => {
                    // A regex if a closing unescaped `/` is followed by `|` or the end.
                    let mut j = i + 1;
                    let mut close = None;
                    while let Some(&c) = b.get(j) {
                        if c == b'\\' {
                            j += 2;
                            continue;
                        }
                        if c == b'/' {
                            close = Some(j);
                            break;
                        }
                        j += 1;
                    }
                    let ends_here = |k: usize| {
                        let mut k = k + 1;
                        while b.get(k).is_some_and(|&c| super::lexer::is_space(c)) {
                            k += 1;
                        }
                        matches!(b.get(k), None | Some(b'|'))
                    };
                    match close {
                        Some(c) if ends_here(c) => {
                            selector =
                                Some(SelectorAst::Regex(s.get(i + 1..c).unwrap_or("").to_owned()));
                            i = c + 1;
                        }
                        _ => {
                            while b.get(i).is_some_and(|&c| c != b'|') {
                                i += 1;
                            }
                            let key = s.get(sel_start..i).unwrap_or("").trim_end();
                            selector = Some(SelectorAst::Key(key.to_owned()));
                        }
                    }
                }
                _ => {
                    while b.get(i).is_some_and(|&c| c != b'|') {
                        i += 1;
                    }
                    let key = s.get(sel_start..i).unwrap_or("").trim_end();
                    if key.is_empty() {
                        return Err(loc.error(t.raw_offset(sel_start - 1), "missing key after ':'"));
                    }
                    selector = Some(SelectorAst::Key(key.to_owned()));
                }
            }
        }
        while b.get(i).is_some_and(|&c| super::lexer::is_space(c)) {
            i += 1;
        }
        out.push(VariableAst {
            span: loc.span(t.raw_offset(start)),
            exclusion,
            count,
            name: name.to_owned(),
            selector,
        });
        match b.get(i) {
            None => break,
            Some(b'|') => {
                i += 1;
                if b.get(i).is_none() {
                    return Err(loc.error(t.raw_offset(i), "missing variable after '|'"));
                }
            }
            Some(_) => {
                return Err(loc.error(
                    t.raw_offset(i),
                    "unexpected character after variable, expected '|'",
                ))
            }
        }
    }
    Ok(out)
}

/// `@op argument`, `!@op argument`, or a bare pattern (an implicit `@rx`).
fn operator(loc: &Locator<'_>, t: &Token) -> Result<OperatorAst, ParseError> {
    let s = t.text.as_str();
    let (negated, rest, rest_off) = match s.strip_prefix('!') {
        Some(r) => (true, r, 1),
        None => (false, s, 0),
    };
    let span = loc.span(t.start);
    let Some(after_at) = rest.strip_prefix('@') else {
        return Ok(OperatorAst {
            span,
            negated,
            name: "rx".to_owned(),
            argument: rest.trim().to_owned(),
        });
    };
    let name_end = after_at
        .bytes()
        .position(super::lexer::is_space)
        .unwrap_or(after_at.len());
    let name = after_at.get(..name_end).unwrap_or("");
    if name.is_empty() {
        return Err(loc.error(t.raw_offset(rest_off), "missing operator name after '@'"));
    }
    let argument = after_at.get(name_end..).unwrap_or("").trim();
    Ok(OperatorAst {
        span,
        negated,
        name: name.to_owned(),
        argument: argument.to_owned(),
    })
}

/// Splits an action list on commas outside single quotes.
fn actions(loc: &Locator<'_>, t: &Token) -> Result<Vec<ActionAst>, ParseError> {
    let s = t.text.as_str();
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut piece_start = 0;
    let mut quote_at: Option<usize> = None;
    let mut i = 0;
    while i <= b.len() {
        match b.get(i) {
            Some(b'\\') => {
                // The escaped byte never splits or quotes; stop at the end either way so
                // the last piece is still read.
                i = (i + 2).min(b.len());
                continue;
            }
            Some(b'\'') => {
                quote_at = match quote_at {
                    Some(_) => None,
                    // A quote opens only where a value starts (`msg:'a, b'`,
                    // `setvar:tx.x='a, b'`), so `msg:it's` keeps its apostrophe, as in
                    // ModSecurity; Coraza toggles on every quote.
                    None if opens_value(b.get(piece_start..i).unwrap_or(&[])) => Some(i),
                    None => None,
                };
            }
            Some(b',') if quote_at.is_none() => {
                action(loc, t, piece_start, i, &mut out)?;
                piece_start = i + 1;
            }
            None => {
                if let Some(q) = quote_at {
                    return Err(loc.error(t.raw_offset(q), "unclosed quote"));
                }
                action(loc, t, piece_start, b.len(), &mut out)?;
            }
            Some(_) => {}
        }
        i += 1;
    }
    Ok(out)
}

/// Whether a `'` after `before` (the action text so far) starts a quoted value.
fn opens_value(before: &[u8]) -> bool {
    matches!(before.trim_ascii_end().last(), Some(b':' | b'='))
}

/// One `name[:value]` piece of an action list, `start..end` in the token text.
fn action(
    loc: &Locator<'_>,
    t: &Token,
    start: usize,
    end: usize,
    out: &mut Vec<ActionAst>,
) -> Result<(), ParseError> {
    let piece = t.text.get(start..end).unwrap_or("");
    let trimmed = piece.trim_start();
    let name_off = start + (piece.len() - trimmed.len());
    let trimmed = trimmed.trim_end();
    if trimmed.is_empty() {
        // Tolerate empty pieces (`"id:1,"`, `"deny,,log"`) as ModSecurity does.
        return Ok(());
    }
    let (name, value) = match trimmed.split_once(':') {
        Some((n, v)) => (n.trim_end(), Some(unquote_value(v.trim()))),
        None => (trimmed, None),
    };
    if name.is_empty() {
        return Err(loc.error(t.raw_offset(name_off), "missing action name before ':'"));
    }
    out.push(ActionAst {
        span: loc.span(t.raw_offset(name_off)),
        name: name.to_owned(),
        value,
    });
    Ok(())
}

/// Removes surrounding single quotes; inside them `\'` is a quote.
fn unquote_value(v: &str) -> String {
    match v.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        Some(inner) if v.len() >= 2 => inner.replace("\\'", "'"),
        _ => v.to_owned(),
    }
}
