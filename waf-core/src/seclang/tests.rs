//! Parser tests: the whole CRS, quoting corner cases, and error locations.

use std::path::{Path, PathBuf};

use super::*;

const CRS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/crs");

fn crs_rule_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = glob::glob(&format!("{CRS}/rules/*.conf"))
        .expect("static pattern")
        .map(|p| p.expect("readable crs dir"))
        .collect();
    files.sort();
    files
}

fn crs_rules() -> Vec<Directive> {
    let files = crs_rule_files();
    assert_eq!(files.len(), 27, "crs rule files");
    let mut all = Vec::new();
    for f in &files {
        match parse_file(f) {
            Ok(d) => all.extend(d),
            Err(e) => panic!("{e}"),
        }
    }
    all
}

fn rules(ds: &[Directive]) -> impl Iterator<Item = &RuleAst> {
    ds.iter().filter_map(|d| match &d.kind {
        DirectiveKind::Rule(r) => Some(r),
        _ => None,
    })
}

fn action_value<'a>(actions: &'a [ActionAst], name: &str) -> Option<&'a str> {
    actions
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.value.as_deref())
}

fn rule_by_id(ds: &[Directive], id: &str) -> RuleAst {
    rules(ds)
        .find(|r| action_value(&r.actions, "id") == Some(id))
        .unwrap_or_else(|| panic!("rule {id} not found"))
        .clone()
}

fn one(text: &str) -> DirectiveKind {
    let mut ds = parse_str("t.conf", text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ds.len(), 1, "{ds:?}");
    ds.remove(0).kind
}

fn one_rule(text: &str) -> RuleAst {
    match one(text) {
        DirectiveKind::Rule(r) => r,
        k => panic!("not a rule: {k:?}"),
    }
}

fn err(text: &str) -> ParseError {
    match parse_str("t.conf", text) {
        Ok(d) => panic!("expected an error, got {d:?}"),
        Err(e) => e,
    }
}

// ---- CRS ----

#[test]
fn crs000_directive_counts() {
    let ds = crs_rules();
    let count = |f: fn(&DirectiveKind) -> bool| ds.iter().filter(|d| f(&d.kind)).count();
    assert_eq!(count(|k| matches!(k, DirectiveKind::Rule(_))), 695);
    assert_eq!(
        count(|k| matches!(k, DirectiveKind::UpdateTargetById { .. })),
        55
    );
    assert_eq!(count(|k| matches!(k, DirectiveKind::Marker(_))), 30);
    assert_eq!(count(|k| matches!(k, DirectiveKind::Action(_))), 7);
    assert_eq!(
        count(
            |k| matches!(k, DirectiveKind::Setting { name, .. } if name == "SecComponentSignature")
        ),
        1
    );
    assert_eq!(ds.len(), 695 + 55 + 30 + 7 + 1);
}

#[test]
fn crs010_operators_and_chains() {
    let ds = crs_rules();
    let rx = rules(&ds).filter(|r| r.operator.name == "rx").count();
    assert_eq!(rx, 318);
    let neg_rx = rules(&ds)
        .filter(|r| r.operator.name == "rx" && r.operator.negated)
        .count();
    assert_eq!(neg_rx, 21);
    let chains = rules(&ds)
        .filter(|r| r.actions.iter().any(|a| a.name == "chain"))
        .count();
    assert_eq!(chains, 73);
    let lt = rules(&ds).filter(|r| r.operator.name == "lt").count();
    assert_eq!(lt, 190);
    let ids = ds
        .iter()
        .filter_map(|d| match &d.kind {
            DirectiveKind::Rule(r) => action_value(&r.actions, "id"),
            DirectiveKind::Action(a) => action_value(a, "id"),
            _ => None,
        })
        .count();
    assert_eq!(ids, 629);
    let unconditional: Vec<_> = rules(&ds)
        .filter(|r| r.operator.name == "unconditionalMatch")
        .collect();
    assert_eq!(unconditional.len(), 1);
    assert_eq!(unconditional[0].operator.argument, "");
}

#[test]
fn crs020_spans_point_into_files() {
    let files = crs_rule_files();
    let f = files
        .iter()
        .find(|f| f.to_string_lossy().contains("REQUEST-942"))
        .expect("942 file");
    let text = std::fs::read_to_string(f).expect("readable");
    let lines: Vec<&str> = text.lines().collect();
    for d in parse_file(f).expect("parses") {
        let line = lines[d.span.line as usize - 1];
        let rest = &line[d.span.column as usize - 1..];
        assert!(rest.starts_with("Sec"), "{:?}: {line}", d.span);
        if let DirectiveKind::Rule(r) = &d.kind {
            for a in &r.actions {
                let line = lines[a.span.line as usize - 1];
                let rest = &line[a.span.column as usize - 1..];
                assert!(rest.starts_with(&a.name), "{:?} {}: {line}", a.span, a.name);
            }
            for v in &r.variables {
                let line = lines[v.span.line as usize - 1];
                let rest = &line[v.span.column as usize - 1..];
                let rest = rest.trim_start_matches(['!', '&']);
                assert!(rest.starts_with(&v.name), "{:?} {}: {line}", v.span, v.name);
            }
            let line = lines[r.operator.span.line as usize - 1];
            assert!(line[r.operator.span.column as usize - 1..].starts_with('"'));
        }
    }
}

#[test]
fn crs030_spot_checks() {
    let ds = crs_rules();

    // Regex keys with escapes and `|` inside, from REQUEST-999 and 942/921 rules.
    let update_targets: Vec<&VariableAst> = ds
        .iter()
        .filter_map(|d| match &d.kind {
            DirectiveKind::UpdateTargetById { targets, .. } => Some(targets),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(update_targets.len(), 55);
    assert!(update_targets.iter().all(|v| v.exclusion));
    assert!(update_targets.iter().all(|v| v.selector.is_some()));
    let cookie_regexes = update_targets
        .iter()
        .filter(|v| matches!(v.selector, Some(SelectorAst::Regex(_))))
        .count();
    let file = std::fs::read_to_string(format!(
        "{CRS}/rules/REQUEST-999-COMMON-EXCEPTIONS-AFTER.conf"
    ))
    .expect("readable");
    assert_eq!(cookie_regexes, file.matches(":/").count());
    assert_eq!(
        update_targets
            .iter()
            .filter(|v| v.name == "REQUEST_COOKIES")
            .count(),
        54
    );

    let all_vars: Vec<&VariableAst> = rules(&ds).flat_map(|r| &r.variables).collect();
    assert!(all_vars.iter().any(|v| v.name == "REQUEST_COOKIES"
        && v.selector == Some(SelectorAst::Regex(r"\x22?\x24Version".into()))));
    assert!(all_vars.iter().any(|v| v.name == "ARGS_NAMES"
        && v.exclusion
        && v.selector == Some(SelectorAst::Regex(r"^[\w]+\[[\w\-]+\]\[[\w\-]*?\]$".into()))));
    assert!(all_vars.iter().any(|v| v.name == "TX"
        && v.selector
            == Some(SelectorAst::Regex(
                "MULTIPART_HEADERS_CONTENT_TYPES_*".into()
            ))));
    let xml_star = all_vars
        .iter()
        .filter(|v| v.name == "XML" && v.selector == Some(SelectorAst::Key("/*".into())))
        .count();
    let xml_attr = all_vars
        .iter()
        .filter(|v| v.name == "XML" && v.selector == Some(SelectorAst::Key("//@*".into())))
        .count();
    assert_eq!((xml_star, xml_attr), (176, 175));
    let counts = all_vars.iter().filter(|v| v.count).count();
    assert_eq!(counts, 30 + 1 + 17 + 2);

    // ctl:ruleRemoveTargetByTag with `;` and `=` in the value (once in CRS 4.28, rule 941010;
    // crs-inventory.md counts 1).
    let ctl: Vec<&str> = rules(&ds)
        .flat_map(|r| &r.actions)
        .filter(|a| a.name == "ctl")
        .filter_map(|a| a.value.as_deref())
        .filter(|v| v.starts_with("ruleRemoveTargetByTag="))
        .collect();
    assert_eq!(ctl.len(), 1);
    assert!(ctl
        .iter()
        .all(|v| *v == "ruleRemoveTargetByTag=xss-perf-disable;REQUEST_FILENAME"));

    // setvar with macros and quotes removed.
    let setvars: Vec<&str> = rules(&ds)
        .flat_map(|r| &r.actions)
        .filter(|a| a.name == "setvar")
        .filter_map(|a| a.value.as_deref())
        .collect();
    assert!(setvars.contains(&"tx.inbound_anomaly_score_pl1=+%{tx.critical_anomaly_score}"));
    assert!(setvars.iter().all(|v| !v.starts_with('\'')));

    // msg with commas inside quotes, logdata with macros.
    let r = rule_by_id(&ds, "942100");
    assert_eq!(r.operator.name, "detectSQLi");
    assert_eq!(
        action_value(&r.actions, "msg"),
        Some("SQL Injection Attack Detected via libinjection")
    );
    assert_eq!(
        action_value(&r.actions, "logdata"),
        Some("Matched Data: %{TX.0} found within %{MATCHED_VAR_NAME}: %{MATCHED_VAR}")
    );
    let commas = rules(&ds)
        .flat_map(|r| &r.actions)
        .filter(|a| a.name == "msg" && a.value.as_deref().is_some_and(|v| v.contains(',')))
        .count();
    assert!(commas > 0, "some msg has a comma inside quotes");

    // A long 932 regex: no quotes left, no line breaks, ends as in the file.
    let r = rule_by_id(&ds, "932230");
    assert_eq!(r.operator.name, "rx");
    assert!(
        r.operator.argument.len() > 1000,
        "{}",
        r.operator.argument.len()
    );
    assert!(!r.operator.argument.contains('\n'));
    let r = rule_by_id(&ds, "920100");
    assert!(r.operator.negated);
    assert!(r
        .operator
        .argument
        .starts_with("(?i)^(?:connect (?:(?:[0-9]{1,3}"));
    assert!(r.operator.argument.ends_with(r"[\s\x0b]+[\.-9A-Z_a-z]+$"));

    // Every rx argument containing a `"` came from a `\"` in the file.
    let with_quote = rules(&ds)
        .filter(|r| r.operator.argument.contains('"'))
        .count();
    let raw_quote = crs_rule_files()
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("readable"))
        .flat_map(|t| {
            t.lines()
                .filter(|l| {
                    let l = l.trim_start();
                    (l.starts_with("SecRule") || l.starts_with('"'))
                        && l.contains("@")
                        && l.contains("\\\"")
                })
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .count();
    assert!(with_quote > 0);
    assert!(raw_quote >= with_quote, "{raw_quote} >= {with_quote}");
}

#[test]
fn crs040_setup_and_base_config() {
    let ds = parse_file(Path::new(&format!("{CRS}/crs-setup.conf.example"))).expect("parses");
    let defaults = ds
        .iter()
        .filter(|d| matches!(d.kind, DirectiveKind::DefaultAction(_)))
        .count();
    assert_eq!(defaults, 5);
    let actions: Vec<_> = ds
        .iter()
        .filter_map(|d| match &d.kind {
            DirectiveKind::Action(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(actions.len(), 1);
    assert_eq!(action_value(actions[0], "id"), Some("900990"));
    assert_eq!(
        action_value(actions[0], "setvar"),
        Some("tx.crs_setup_version=4280")
    );

    let ds = parse_file(Path::new(&format!(
        "{CRS}/reference/coraza/coraza.conf-recommended"
    )))
    .expect("parses");
    assert!(ds.iter().any(|d| matches!(&d.kind,
        DirectiveKind::Setting { name, args } if name == "SecRuleEngine" && args == &["DetectionOnly"])));
    let ids: Vec<&str> = rules(&ds)
        .filter_map(|r| action_value(&r.actions, "id"))
        .collect();
    for id in ["200000", "200001", "200002", "200003"] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
}
