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

// ---- lines and quoting ----

#[test]
fn line000_comments_blank_and_continuations() {
    let text = "# comment\n\n   SecRule ARGS \"@rx a\\\"b\" \\\n      \"id:1,\\\n  # inner comment\n\n      deny\"\nSecMarker END\n";
    let ds = parse_str("t.conf", text).expect("parses");
    assert_eq!(ds.len(), 2);
    assert_eq!((ds[0].span.line, ds[0].span.column), (3, 4));
    let DirectiveKind::Rule(r) = &ds[0].kind else {
        panic!("rule")
    };
    assert_eq!(r.operator.argument, "a\"b");
    assert_eq!((r.operator.span.line, r.operator.span.column), (3, 17));
    assert_eq!(r.actions.len(), 2);
    assert_eq!((r.actions[0].span.line, r.actions[0].span.column), (4, 8));
    assert_eq!((r.actions[1].span.line, r.actions[1].span.column), (7, 7));
    assert_eq!(ds[1].kind, DirectiveKind::Marker("END".into()));
    assert_eq!(ds[1].span.line, 8);
}

#[test]
fn line005_bom_and_continuation_at_eof() {
    let ds = parse_str("t.conf", "\u{feff}SecMarker A\nSecAction \"id:1\" \\").expect("parses");
    assert_eq!(ds[0].kind, DirectiveKind::Marker("A".into()));
    assert_eq!((ds[0].span.line, ds[0].span.column), (1, 4));
    assert!(matches!(ds[1].kind, DirectiveKind::Action(_)));
}

#[test]
fn line007_non_utf8_bytes() {
    let t = TempDir::new("latin1");
    let p = t.0.join("l1.conf");
    std::fs::write(&p, b"# caf\xe9 comment\nSecMarker A\n").expect("write");
    assert_eq!(parse_file(&p).expect("comment bytes are fine").len(), 1);
    std::fs::write(&p, b"SecMarker A\n  SecMarker caf\xe9\n").expect("write");
    let e = parse_file(&p).expect_err("latin-1 in a directive");
    assert_eq!(e.message, "unsupported byte 0xe9: rule text must be UTF-8");
    assert_eq!(at(&e), (2, 16));
    let inc = t.write("inc.conf", "Include l1.conf\n");
    let e = parse_file(&inc).expect_err("through include");
    assert!(e.span.file.ends_with("l1.conf"));
}

#[test]
fn line010_crlf_and_no_final_newline() {
    let ds = parse_str("t.conf", "SecRuleEngine On\r\nSecMarker \"x y\"").expect("parses");
    assert_eq!(
        ds[0].kind,
        DirectiveKind::Setting {
            name: "SecRuleEngine".into(),
            args: vec!["On".into()]
        }
    );
    assert_eq!(ds[1].kind, DirectiveKind::Marker("x y".into()));
}

#[test]
fn line020_directive_names_case_insensitive() {
    assert!(matches!(
        one("secrule ARGS \"@rx x\" \"id:1\""),
        DirectiveKind::Rule(_)
    ));
    assert!(matches!(
        one("SECACTION \"id:1\""),
        DirectiveKind::Action(_)
    ));
    assert!(matches!(
        one("secdefaultaction \"phase:1,log,pass\""),
        DirectiveKind::DefaultAction(_)
    ));
    assert_eq!(
        one("secRuleEngine DetectionOnly"),
        DirectiveKind::Setting {
            name: "secRuleEngine".into(),
            args: vec!["DetectionOnly".into()]
        }
    );
}

#[test]
fn quote000_backslashes_kept_except_before_quote() {
    let r = one_rule(r#"SecRule ARGS "@rx a\\b\"c\\\"d\x22" "id:1""#);
    assert_eq!(r.operator.argument, r#"a\\b"c\\"d\x22"#);
    // An even number of backslashes before `"` closes the string.
    let r = one_rule(r#"SecRule ARGS "@rx a\\" "id:1""#);
    assert_eq!(r.operator.argument, r"a\\");
    assert_eq!(action_value(&r.actions, "id"), Some("1"));
}

#[test]
fn quote010_bare_words() {
    let r = one_rule("SecRule REQUEST_URI @unconditionalMatch id:1,pass");
    assert_eq!(r.operator.name, "unconditionalMatch");
    assert_eq!(r.operator.argument, "");
    assert_eq!(r.actions.len(), 2);
    let r = one_rule("SecRule ARGS foo");
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("rx", "foo")
    );
    assert!(r.actions.is_empty());
}

// ---- operators ----

#[test]
fn op000_shapes() {
    let r = one_rule(r#"SecRule ARGS "!@rx ^a b$" "id:1""#);
    assert!(r.operator.negated);
    assert_eq!(r.operator.name, "rx");
    assert_eq!(r.operator.argument, "^a b$");
    let r = one_rule(r#"SecRule ARGS "foo bar" "id:1""#);
    assert!(!r.operator.negated);
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("rx", "foo bar")
    );
    let r = one_rule(r#"SecRule ARGS "!foo" "id:1""#);
    assert!(r.operator.negated);
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("rx", "foo")
    );
    let r = one_rule(r#"SecRule ARGS "@pm ( ) ?>" "id:1""#);
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("pm", "( ) ?>")
    );
    let r = one_rule(r#"SecRule &TX:x "@eq 0" "id:1""#);
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("eq", "0")
    );
    let r = one_rule(r#"SecRule ARGS "" "id:1""#);
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("rx", "")
    );
    let r = one_rule(r#"SecRule ARGS "@detectSQLi" "id:1""#);
    assert_eq!(
        (r.operator.name.as_str(), r.operator.argument.as_str()),
        ("detectSQLi", "")
    );
}

// ---- variables ----

fn vars(list: &str) -> Vec<VariableAst> {
    one_rule(&format!("SecRule {list} \"@rx x\" \"id:1\"")).variables
}

fn key(k: &str) -> Option<SelectorAst> {
    Some(SelectorAst::Key(k.into()))
}

fn re(k: &str) -> Option<SelectorAst> {
    Some(SelectorAst::Regex(k.into()))
}

#[test]
fn var000_lists() {
    let v = vars("REQUEST_HEADERS|!REQUEST_HEADERS:User-Agent|&ARGS|&TX:score|args_names");
    assert_eq!(v.len(), 5);
    assert_eq!(
        (v[0].name.as_str(), &v[0].selector),
        ("REQUEST_HEADERS", &None)
    );
    assert!(v[1].exclusion && !v[1].count);
    assert_eq!(v[1].selector, key("User-Agent"));
    assert!(v[2].count && !v[2].exclusion);
    assert_eq!((v[3].name.as_str(), &v[3].selector), ("TX", &key("score")));
    assert_eq!(v[4].name, "args_names");
    let cols: Vec<u32> = v.iter().map(|v| v.span.column).collect();
    assert_eq!(cols, vec![9, 25, 53, 59, 69]);
}

#[test]
fn var010_regex_and_xpath_selectors() {
    let v =
        vars(r"REQUEST_COOKIES:/\x22?\x24Version/|!ARGS_NAMES:/^[\w]+\[[\w\-]+\]\[[\w\-]*?\]$/");
    assert_eq!(v[0].selector, re(r"\x22?\x24Version"));
    assert!(v[1].exclusion);
    assert_eq!(v[1].selector, re(r"^[\w]+\[[\w\-]+\]\[[\w\-]*?\]$"));
    let v = vars("TX:/MULTIPART_HEADERS_CONTENT_TYPES_*/|XML:/*|XML://@*|ARGS:/a|b/");
    assert_eq!(v.len(), 4);
    assert_eq!(v[0].selector, re("MULTIPART_HEADERS_CONTENT_TYPES_*"));
    assert_eq!(v[1].selector, key("/*"));
    assert_eq!(v[2].selector, key("//@*"));
    assert_eq!(v[3].selector, re("a|b"));
    let v = vars(r"ARGS:/a\/b/");
    assert_eq!(v[0].selector, re(r"a\/b"));
    let v = vars("XML:/");
    assert_eq!(v[0].selector, key("/"));
}

#[test]
fn var020_quoted_keys() {
    let v = vars("ARGS:'foo bar'|REQUEST_HEADERS:'it\\'s'");
    assert_eq!(v[0].selector, key("foo bar"));
    assert_eq!(v[1].selector, key("it's"));
    // Coraza's rule_parser_test.go cases: a quoted selector between slashes is a regex.
    let v = vars("&REQUEST_COOKIES_NAMES:'/^(?:phpMyAdminphp|MyAdmin_https)$/'|ARGS:test");
    assert!(v[0].count);
    assert_eq!(v[0].selector, re("^(?:phpMyAdminphp|MyAdmin_https)$"));
    assert_eq!(v[1].selector, key("test"));
    let v = vars("&REQUEST_COOKIES_NAMES:'/.*/'|ARGS:/a|b/|XML:/*|ARGS|REQUEST_HEADERS");
    assert_eq!(v.len(), 5);
    assert_eq!(v[1].selector, re("a|b"));
    let v = vars("ARGS:'/'");
    assert_eq!(v[0].selector, key("/"));
    let v = vars(r#""ARGS | ARGS_NAMES |REQUEST_HEADERS:x""#);
    assert_eq!(v.len(), 3);
    assert_eq!(v[1].name, "ARGS_NAMES");
    assert_eq!(v[2].selector, key("x"));
    assert_eq!(v[1].span.column, 17);
    let v = vars(r#""ARGS:'a|b'|ARGS_NAMES""#);
    assert_eq!(v[0].selector, key("a|b"));
    assert_eq!(v[1].name, "ARGS_NAMES");
}

// ---- actions ----

fn acts(list: &str) -> Vec<ActionAst> {
    match one(&format!("SecAction \"{list}\"")) {
        DirectiveKind::Action(a) => a,
        k => panic!("{k:?}"),
    }
}

#[test]
fn act000_values() {
    let a = acts(
        "id:1, phase:2 ,t:none,msg:'a, b: c',setvar:'tx.x=+%{tx.y}',\
         ctl:ruleRemoveTargetByTag=xss-perf-disable;REQUEST_FILENAME,logdata:'it\\'s',nolog",
    );
    let pairs: Vec<(&str, Option<&str>)> = a
        .iter()
        .map(|a| (a.name.as_str(), a.value.as_deref()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("id", Some("1")),
            ("phase", Some("2")),
            ("t", Some("none")),
            ("msg", Some("a, b: c")),
            ("setvar", Some("tx.x=+%{tx.y}")),
            (
                "ctl",
                Some("ruleRemoveTargetByTag=xss-perf-disable;REQUEST_FILENAME")
            ),
            ("logdata", Some("it's")),
            ("nolog", None),
        ]
    );
    assert_eq!(a[1].span.column, 18);
}

#[test]
fn act005_apostrophes_and_quotes_after_equals() {
    let a = acts("msg:it's fine,deny");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].value.as_deref(), Some("it's fine"));
    let a = acts("setvar:tx.x='a, b',pass");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].value.as_deref(), Some("tx.x='a, b'"));
    let a = acts("msg: 'a, b' ,pass");
    assert_eq!(a[0].value.as_deref(), Some("a, b"));
}

#[test]
fn act010_empty_and_trailing_commas() {
    assert!(acts("").is_empty());
    assert_eq!(acts("id:1,,deny,").len(), 2);
    assert_eq!(acts("msg:''")[0].value.as_deref(), Some(""));
}

// ---- other directives ----

#[test]
fn dir000_remove_and_update() {
    assert_eq!(
        one("SecRuleRemoveById 1 100-200 5,6"),
        DirectiveKind::RemoveById(vec![
            IdRange { start: 1, end: 1 },
            IdRange {
                start: 100,
                end: 200
            },
            IdRange { start: 5, end: 5 },
            IdRange { start: 6, end: 6 },
        ])
    );
    assert_eq!(
        one("SecRuleRemoveByTag \"attack-sqli\""),
        DirectiveKind::RemoveByTag("attack-sqli".into())
    );
    assert_eq!(
        one("SecRuleRemoveByMsg 'SQL Injection'"),
        DirectiveKind::RemoveByMsg("SQL Injection".into())
    );
    let DirectiveKind::UpdateTargetById {
        ids,
        targets,
        replaced,
    } = one("SecRuleUpdateTargetById 942100,942200-942210 \"!ARGS:foo|!REQUEST_COOKIES:/^_ga/\" \"ARGS\"")
    else {
        panic!("update")
    };
    assert_eq!(
        ids,
        vec![
            IdRange {
                start: 942100,
                end: 942100
            },
            IdRange {
                start: 942200,
                end: 942210
            }
        ]
    );
    assert_eq!(targets.len(), 2);
    assert_eq!(targets[1].selector, re("^_ga"));
    assert_eq!(replaced.map(|r| r.len()), Some(1));
    assert!(matches!(
        one("SecRuleUpdateTargetByTag attack-xss !ARGS:x"),
        DirectiveKind::UpdateTargetByTag { tag, replaced: None, .. } if tag == "attack-xss"
    ));
    assert!(matches!(
        one("SecRuleUpdateTargetByMsg \"a b\" \"!ARGS:x\""),
        DirectiveKind::UpdateTargetByMsg { msg, .. } if msg == "a b"
    ));
    let DirectiveKind::UpdateActionById { id, actions } =
        one("SecRuleUpdateActionById 900000 \"pass,setvar:tx.x=1\"")
    else {
        panic!("update action")
    };
    assert_eq!((id, actions.len()), (900000, 2));
    assert_eq!(
        one("SecResponseBodyMimeType text/plain \"text/html\""),
        DirectiveKind::Setting {
            name: "SecResponseBodyMimeType".into(),
            args: vec!["text/plain".into(), "text/html".into()]
        }
    );
}

// ---- errors ----

fn at(e: &ParseError) -> (u32, u32) {
    (e.span.line, e.span.column)
}

#[test]
fn err000_missing_operator() {
    let e = err("SecMarker A\n  SecRule ARGS\n");
    assert_eq!(e.message, "missing operator in SecRule");
    assert_eq!(at(&e), (2, 15));
    assert_eq!(e.line_text, "  SecRule ARGS");
    assert_eq!(
        e.to_string(),
        "t.conf:2:15: missing operator in SecRule\n  |   SecRule ARGS\n  |               ^^^"
    );
    let e = err("SecRule\n");
    assert_eq!(e.message, "missing variables in SecRule");
    assert_eq!(at(&e), (1, 8));
}

#[test]
fn err010_unclosed_quotes() {
    let e = err("SecRule ARGS \"@rx foo \\\n   bar \"id:1\"\nSecRule ARGS \"@rx x\"\n");
    assert_eq!(e.message, "unexpected character after closing quote");
    assert_eq!(at(&e), (2, 9));
    // An action list missing its closing quote is read to the end of the line, as
    // libmodsecurity 3 does, with a note that the compiler turns into a load warning.
    let d = parse_str("t", "\n\nSecRule ARGS \"@rx foo\" \"id:1,deny\n").unwrap();
    assert!(d[0].note.as_deref().unwrap().contains("no closing quote"));
    let DirectiveKind::Rule(r) = &d[0].kind else {
        panic!("not a rule")
    };
    assert_eq!(r.actions.len(), 2);
    // The operator's quote is still required.
    let e = err("SecRule ARGS \"@rx foo\n");
    assert_eq!(e.message, "unclosed quote");
    let e = err("SecRule ARGS \"@rx x\" \\\n  \"id:1,msg:'abc\"");
    assert_eq!(e.message, "unclosed quote");
    assert_eq!(at(&e), (2, 13));
    let e = err("SecRule ARGS:'abc \"@rx x\"");
    assert_eq!(e.message, "unclosed quote");
    assert_eq!(at(&e), (1, 14));
    let e = err("SecAction id:1,msg:'abc");
    assert_eq!(e.message, "unclosed quote");
    assert_eq!(at(&e), (1, 20));
    // A quote elsewhere in a bare target list is just a byte (Coraza).
    let r = one_rule("SecRule ARGS:/it's/|ARGS:a'b \"@rx x\"");
    assert_eq!(r.variables[0].selector, re("it's"));
    assert_eq!(r.variables[1].selector, key("a'b"));
}

#[test]
fn err020_unknown_quoting() {
    let e = err("SecRule ARGS '@rx x' \"id:1\"");
    assert!(
        e.message.starts_with("unsupported quoting"),
        "{}",
        e.message
    );
    assert_eq!(at(&e), (1, 14));
    let e = err("SecRule ARGS \"@rx x\"\"id:1\"");
    assert_eq!(e.message, "unexpected character after closing quote");
    assert_eq!(at(&e), (1, 21));
    let e = err("SecRule ARGS \"@rx x\" \"id:1\" \"deny\"");
    assert_eq!(e.message, "unexpected argument in SecRule");
    assert_eq!(at(&e), (1, 29));
}

#[test]
fn err030_bad_pieces() {
    let e = err("SecRule ARGS| \"@rx x\"");
    assert_eq!(e.message, "missing variable after '|'");
    let e = err("SecRule ARGS|!|TX \"@rx x\"");
    assert_eq!(e.message, "missing variable name");
    assert_eq!(at(&e), (1, 15));
    let e = err("SecRule REQUEST_URI|!REQUEST_COOKIES: \"abc\"");
    assert_eq!(e.message, "missing key after ':'");
    assert_eq!(at(&e), (1, 37));
    let e = err("SecRule ARGS \"@ x\"");
    assert_eq!(e.message, "missing operator name after '@'");
    let e = err("SecAction \"id:1,:x\"");
    assert_eq!(e.message, "missing action name before ':'");
    assert_eq!(at(&e), (1, 17));
    let e = err("SecRuleRemoveById 10-5");
    assert!(e.message.starts_with("invalid id range"), "{}", e.message);
    let e = err("SecRuleRemoveById 1 abc");
    assert_eq!(e.message, "invalid rule id \"abc\"");
    assert_eq!(at(&e), (1, 21));
    let e = err("SecRuleRemoveById");
    assert_eq!(e.message, "missing rule id in SecRuleRemoveById");
    let e = err("SecRuleUpdateActionById 1:2 \"pass\"");
    assert!(e.message.starts_with("unsupported"), "{}", e.message);
    let e = err("SecDataset test `\nfoo\n`");
    assert!(e.message.starts_with("unsupported"), "{}", e.message);
    assert_eq!(at(&e), (1, 17));
    let ds = parse_str("t.conf", "# trailing backtick `\nSecMarker A").expect("comment");
    assert_eq!(ds.len(), 1);
    let e = err("SecMarker a b");
    assert_eq!(e.message, "unexpected argument in SecMarker");
    let e = err("SecRuleRemoveById 99999999999999999999999");
    assert!(e.message.starts_with("invalid rule id"));
}

// ---- includes ----

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "waf-seclang-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("temp subdir");
        }
        std::fs::write(&p, text).expect("temp file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn inc000_relative_to_including_file_and_globs() {
    let t = TempDir::new("rel");
    t.write("sub/b.conf", "SecMarker B\n");
    t.write("sub/rules/2.conf", "SecMarker R2\n");
    t.write("sub/rules/1.conf", "SecMarker R1\n");
    t.write(
        "sub/a.conf",
        "SecMarker A\nInclude b.conf\nInclude rules/*.conf\nIncludeOptional nothing/*.conf\nIncludeOptional missing.conf\n",
    );
    let main = t.write("main.conf", "Include sub/a.conf\nSecMarker END\n");
    let ds = parse_file(&main).expect("parses");
    let markers: Vec<&str> = ds
        .iter()
        .filter_map(|d| match &d.kind {
            DirectiveKind::Marker(m) => Some(m.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(markers, vec!["A", "B", "R1", "R2", "END"]);
    assert!(ds[1].span.file.ends_with("b.conf"), "{}", ds[1].span.file);
    assert!(ds[2].span.file.ends_with("1.conf"));
    assert!(ds[4].span.file.ends_with("main.conf"));
}

#[test]
fn inc010_missing_include_is_an_error() {
    let t = TempDir::new("missing");
    let main = t.write("main.conf", "SecMarker A\n  Include nope.conf\n");
    let e = parse_file(&main).expect_err("missing include");
    assert!(e.message.starts_with("cannot read "), "{}", e.message);
    assert!(e.message.contains("nope.conf"));
    assert_eq!(at(&e), (2, 11));
    assert!(e.span.file.ends_with("main.conf"));
    let main = t.write("glob.conf", "Include none/*.conf\n");
    let e = parse_file(&main).expect_err("no match");
    assert!(e.message.starts_with("no file matches "), "{}", e.message);
    let e = parse_file(&t.0.join("absent.conf")).expect_err("absent");
    assert!(e.message.starts_with("cannot read "), "{}", e.message);
    let e = crate::Error::from(e);
    let _ = e;
}

#[test]
fn inc020_cycles_and_depth_limit() {
    let t = TempDir::new("cycle");
    t.write("a.conf", "Include b.conf\n");
    t.write("b.conf", "Include a.conf\n");
    let e = parse_file(&t.0.join("a.conf")).expect_err("cycle");
    assert!(e.message.starts_with("include cycle"), "{}", e.message);
    t.write("self.conf", "Include *.conf\n");
    let e = parse_file(&t.0.join("self.conf")).expect_err("glob cycle");
    assert!(e.message.starts_with("include cycle"), "{}", e.message);

    let d = TempDir::new("depth");
    for i in 0..40 {
        d.write(&format!("f{i}.conf"), &format!("Include f{}.conf\n", i + 1));
    }
    d.write("f40.conf", "SecMarker DEEP\n");
    let e = parse_file(&d.0.join("f0.conf")).expect_err("too deep");
    assert_eq!(
        e.message,
        format!(
            "include depth limit of {} exceeded",
            crate::limits::DEFAULT_INCLUDE_DEPTH
        )
    );
    let ok = parse_file(&d.0.join("f20.conf")).expect("shallow enough");
    assert_eq!(ok.len(), 1);
}

// ---- robustness ----

/// Random lines over the bytes that matter to the parser never panic.
#[test]
fn fuzz000_no_panic_on_noise() {
    const ALPHABET: &[&str] = &[
        "SecRule ",
        "SecAction ",
        "SecRuleUpdateTargetById ",
        "SecRuleRemoveById ",
        "SecMarker ",
        "Include ",
        "\"",
        "'",
        "\\",
        "\\\"",
        "\\'",
        "/",
        "|",
        "!",
        "&",
        ":",
        ",",
        "@",
        "@rx ",
        " ",
        "\t",
        "\n",
        "\r\n",
        "#",
        "-",
        "1",
        "ARGS",
        "é",
        "`",
        "%{tx.x}",
        "=",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let len = (next() % 24) as usize;
        let mut s = String::new();
        for _ in 0..len {
            s.push_str(ALPHABET[(next() % ALPHABET.len() as u64) as usize]);
        }
        if s.contains("Include") {
            continue;
        }
        if let Err(e) = parse_str("fuzz.conf", &s) {
            assert!(e.span.line >= 1 && e.span.column >= 1, "{e:?} for {s:?}");
            assert!(!e.line_text.is_empty(), "{e:?} for {s:?}");
        }
    }
}

/// Every prefix-cut of a CRS file parses or fails with a located error, never panics.
#[test]
fn fuzz010_truncated_crs() {
    let text =
        std::fs::read_to_string(format!("{CRS}/rules/REQUEST-920-PROTOCOL-ENFORCEMENT.conf"))
            .expect("readable");
    let mut cut = 0;
    while cut < text.len() {
        if let Some(prefix) = text.get(..cut) {
            if let Err(e) = parse_str("cut.conf", prefix) {
                assert!(e.span.line >= 1 && e.span.column >= 1, "{e}");
            }
        }
        cut += 997;
    }
}

/// Parse time of the whole CRS; run with `--release --nocapture` to read it.
#[test]
fn perf000_crs_parse_time() {
    let files = crs_rule_files();
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            (
                f.display().to_string(),
                std::fs::read_to_string(f).expect("readable"),
            )
        })
        .collect();
    let mut best = std::time::Duration::MAX;
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let mut n = 0;
        for (name, text) in &texts {
            n += parse_str(name, text).expect("parses").len();
        }
        best = best.min(start.elapsed());
        assert_eq!(n, 788);
    }
    println!("crs parse (27 files, in memory): {best:?}");
    let mut best = std::time::Duration::MAX;
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let n: usize = files
            .iter()
            .map(|f| parse_file(f).expect("parses").len())
            .sum();
        best = best.min(start.elapsed());
        assert_eq!(n, 788);
    }
    println!("crs parse (27 files, parse_file): {best:?}");
}

#[test]
fn err040_display() {
    let e = err("\tSecRule ARGS");
    assert_eq!(
        e.to_string(),
        "t.conf:1:14: missing operator in SecRule\n  | \tSecRule ARGS\n  | \t            ^^^"
    );
    let e = parse_file(Path::new("/nonexistent/waf-seclang.conf")).expect_err("absent");
    assert_eq!((e.span.line, e.span.column), (0, 0));
    assert!(e
        .to_string()
        .starts_with("/nonexistent/waf-seclang.conf: cannot read /nonexistent/waf-seclang.conf: "));
}

/// The whole load the CRS INSTALL.md describes, through includes, from a main file elsewhere.
#[test]
fn inc030_crs_install_layout() {
    let t = TempDir::new("install");
    let crs = Path::new(CRS).canonicalize().expect("crs dir");
    let main = t.write(
        "main.conf",
        &format!(
            "Include {base}\n\
             IncludeOptional {crs}/crs-setup.conf.example\n\
             IncludeOptional {crs}/plugins/*-config.conf\n\
             IncludeOptional {crs}/plugins/*-before.conf\n\
             Include \"{crs}/rules/*.conf\"\n\
             IncludeOptional {crs}/plugins/*-after.conf\n",
            base = crs
                .join("reference/coraza/coraza.conf-recommended")
                .display(),
            crs = crs.display(),
        ),
    );
    let ds = parse_file(&main).expect("parses");
    let in_rules = ds
        .iter()
        .filter(|d| d.span.file.contains("/rules/"))
        .count();
    assert_eq!(in_rules, 788);
    let defaults = ds
        .iter()
        .filter(|d| matches!(d.kind, DirectiveKind::DefaultAction(_)))
        .count();
    assert_eq!(defaults, 5);
    // Rule files come in name order.
    let files: Vec<&str> = ds
        .iter()
        .map(|d| &*d.span.file)
        .filter(|f| f.contains("/rules/"))
        .collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted);
}

// ---- round trip: parse → print → parse ----

/// Prints a directive back as SecLang (enough for the round-trip test; not a public printer).
fn print(kind: &DirectiveKind) -> String {
    fn quote(s: &str) -> String {
        format!("\"{}\"", s.replace('"', "\\\""))
    }
    fn vars(v: &[VariableAst]) -> String {
        let parts: Vec<String> = v
            .iter()
            .map(|v| {
                let mut s = String::new();
                if v.exclusion {
                    s.push('!');
                }
                if v.count {
                    s.push('&');
                }
                s.push_str(&v.name);
                match &v.selector {
                    None => {}
                    Some(SelectorAst::Regex(r)) => s.push_str(&format!(":/{r}/")),
                    Some(SelectorAst::Key(k)) if k.contains(['|', '\'', ' ']) => {
                        s.push_str(&format!(":'{}'", k.replace('\'', "\\'")))
                    }
                    Some(SelectorAst::Key(k)) => s.push_str(&format!(":{k}")),
                }
                s
            })
            .collect();
        quote(&parts.join("|"))
    }
    fn acts(a: &[ActionAst]) -> String {
        let parts: Vec<String> = a
            .iter()
            .map(|a| match &a.value {
                None => a.name.clone(),
                Some(v) => format!("{}:'{}'", a.name, v.replace('\'', "\\'")),
            })
            .collect();
        quote(&parts.join(","))
    }
    fn ids(ids: &[IdRange]) -> String {
        let parts: Vec<String> = ids
            .iter()
            .map(|r| {
                if r.start == r.end {
                    r.start.to_string()
                } else {
                    format!("{}-{}", r.start, r.end)
                }
            })
            .collect();
        parts.join(",")
    }
    fn replaced(r: &Option<Vec<VariableAst>>) -> String {
        r.as_ref()
            .map(|r| format!(" {}", vars(r)))
            .unwrap_or_default()
    }
    match kind {
        DirectiveKind::Rule(r) => {
            let op = format!(
                "{}@{} {}",
                if r.operator.negated { "!" } else { "" },
                r.operator.name,
                r.operator.argument
            );
            format!(
                "SecRule {} {} {}",
                vars(&r.variables),
                quote(&op),
                acts(&r.actions)
            )
        }
        DirectiveKind::Action(a) => format!("SecAction {}", acts(a)),
        DirectiveKind::DefaultAction(a) => format!("SecDefaultAction {}", acts(a)),
        DirectiveKind::Marker(m) => format!("SecMarker {}", quote(m)),
        DirectiveKind::RemoveById(r) => format!("SecRuleRemoveById {}", ids(r)),
        DirectiveKind::RemoveByTag(t) => format!("SecRuleRemoveByTag {}", quote(t)),
        DirectiveKind::RemoveByMsg(m) => format!("SecRuleRemoveByMsg {}", quote(m)),
        DirectiveKind::UpdateTargetById {
            ids: i,
            targets,
            replaced: r,
        } => format!(
            "SecRuleUpdateTargetById {} {}{}",
            ids(i),
            vars(targets),
            replaced(r)
        ),
        DirectiveKind::UpdateTargetByTag {
            tag,
            targets,
            replaced: r,
        } => format!(
            "SecRuleUpdateTargetByTag {} {}{}",
            quote(tag),
            vars(targets),
            replaced(r)
        ),
        DirectiveKind::UpdateTargetByMsg {
            msg,
            targets,
            replaced: r,
        } => format!(
            "SecRuleUpdateTargetByMsg {} {}{}",
            quote(msg),
            vars(targets),
            replaced(r)
        ),
        DirectiveKind::UpdateActionById { id, actions } => {
            format!("SecRuleUpdateActionById {id} {}", acts(actions))
        }
        DirectiveKind::Setting { name, args } => {
            let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
            format!("{name} {}", args.join(" "))
        }
    }
}

/// The AST with every span set to one place, to compare parses of different texts.
fn without_spans(kind: &DirectiveKind) -> DirectiveKind {
    let here = Span {
        file: "x".into(),
        line: 1,
        column: 1,
    };
    let vars = |v: &[VariableAst]| -> Vec<VariableAst> {
        v.iter()
            .map(|v| VariableAst {
                span: here.clone(),
                ..v.clone()
            })
            .collect()
    };
    let acts = |a: &[ActionAst]| -> Vec<ActionAst> {
        a.iter()
            .map(|a| ActionAst {
                span: here.clone(),
                ..a.clone()
            })
            .collect()
    };
    match kind {
        DirectiveKind::Rule(r) => DirectiveKind::Rule(RuleAst {
            variables: vars(&r.variables),
            operator: OperatorAst {
                span: here.clone(),
                ..r.operator.clone()
            },
            actions: acts(&r.actions),
        }),
        DirectiveKind::Action(a) => DirectiveKind::Action(acts(a)),
        DirectiveKind::DefaultAction(a) => DirectiveKind::DefaultAction(acts(a)),
        DirectiveKind::UpdateTargetById {
            ids,
            targets,
            replaced,
        } => DirectiveKind::UpdateTargetById {
            ids: ids.clone(),
            targets: vars(targets),
            replaced: replaced.as_deref().map(vars),
        },
        DirectiveKind::UpdateTargetByTag {
            tag,
            targets,
            replaced,
        } => DirectiveKind::UpdateTargetByTag {
            tag: tag.clone(),
            targets: vars(targets),
            replaced: replaced.as_deref().map(vars),
        },
        DirectiveKind::UpdateTargetByMsg {
            msg,
            targets,
            replaced,
        } => DirectiveKind::UpdateTargetByMsg {
            msg: msg.clone(),
            targets: vars(targets),
            replaced: replaced.as_deref().map(vars),
        },
        DirectiveKind::UpdateActionById { id, actions } => DirectiveKind::UpdateActionById {
            id: *id,
            actions: acts(actions),
        },
        other => other.clone(),
    }
}

#[test]
fn round000_crs_parse_print_parse() {
    let mut ds = crs_rules();
    ds.extend(
        parse_file(Path::new(&format!("{CRS}/crs-setup.conf.example"))).expect("setup parses"),
    );
    ds.extend(
        parse_file(Path::new(&format!(
            "{CRS}/reference/coraza/coraza.conf-recommended"
        )))
        .expect("base parses"),
    );
    for d in &ds {
        let text = print(&d.kind);
        let again = parse_str("printed.conf", &text)
            .unwrap_or_else(|e| panic!("{:?}: printed text does not parse: {e}", d.span));
        assert_eq!(again.len(), 1, "{text}");
        assert_eq!(
            without_spans(&again[0].kind),
            without_spans(&d.kind),
            "{:?}: {text}",
            d.span
        );
    }
}

#[test]
fn round010_tricky_pieces() {
    for text in [
        r#"SecRule ARGS:'a b'|!ARGS:/x\/y/|&TX:'it\'s' "@rx a\"b\\" "msg:'it\'s, fine',t:none""#,
        r#"SecRule REQUEST_HEADERS "@contains \"" "id:8""#,
        r#"SecRuleUpdateTargetByMsg "a \"b\"" "!ARGS:x" "ARGS""#,
        "SecRuleRemoveById 1-5 7",
        r#"SecAuditLogParts "ABIJDEFHZ""#,
    ] {
        let first = one(text);
        let printed = print(&first);
        let second = one(&printed);
        assert_eq!(
            without_spans(&first),
            without_spans(&second),
            "{text} -> {printed}"
        );
    }
}

/// Names in CRS are plain words: a name with a quote, space or comma in it means a mis-split.
#[test]
fn crs050_names_are_words() {
    let ds = crs_rules();
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    for d in &ds {
        let (vars, actions): (&[VariableAst], &[ActionAst]) = match &d.kind {
            DirectiveKind::Rule(r) => {
                assert!(word(&r.operator.name), "{:?}", r.operator);
                (&r.variables, &r.actions)
            }
            DirectiveKind::Action(a) => (&[], a),
            DirectiveKind::UpdateTargetById { targets, .. } => (targets, &[]),
            _ => (&[], &[]),
        };
        for v in vars {
            assert!(
                word(&v.name) && v.name == v.name.to_ascii_uppercase(),
                "{v:?}"
            );
        }
        for a in actions {
            assert!(word(&a.name), "{a:?}");
            if let Some(v) = &a.value {
                assert!(!v.starts_with('\'') && !v.ends_with('\''), "{a:?}");
            }
        }
    }
}

/// The setup Coraza's CRS regression run loads before CRS (a comment line sits inside the
/// continued `SecAction`, which Coraza skips).
#[test]
fn crs060_regression_test_setup() {
    let text = r#"
SecResponseBodyMimeType text/plain
SecDefaultAction "phase:3,log,auditlog,pass"
SecDefaultAction "phase:4,log,auditlog,pass"

SecAction "id:900005,\
  phase:1,\
  nolog,\
  pass,\
  ctl:ruleEngine=DetectionOnly,\
  ctl:ruleRemoveById=910000,\
  # Interferes with ftw log scanning
  ctl:ruleRemoveById=920250,\
  setvar:tx.paranoia_level=4,\
  setvar:tx.crs_validate_utf8_encoding=1,\
  setvar:tx.arg_name_length=100,\
  setvar:tx.arg_length=400,\
  setvar:tx.total_arg_length=64000,\
  setvar:tx.max_num_args=255,\
  setvar:tx.max_file_size=64100,\
  setvar:tx.combined_file_sizes=65535"

# Write the value from the X-CRS-Test header as a marker to the log
SecRule REQUEST_HEADERS:X-CRS-Test "@rx ^.*$" \
  "id:999999,\
  phase:1,\
  log,\
  msg:'X-CRS-Test %{MATCHED_VAR}',\
  pass,\
  t:none,\
  ctl:ruleRemoveById=1-999999"
"#;
    let ds = parse_str("setup.conf", text).expect("parses");
    assert_eq!(ds.len(), 5);
    let DirectiveKind::Action(a) = &ds[3].kind else {
        panic!("SecAction")
    };
    assert_eq!(a.len(), 15);
    assert_eq!(a[6].value.as_deref(), Some("ruleRemoveById=920250"));
    assert_eq!((a[6].span.line, a[6].span.column), (13, 3));
    let r = match &ds[4].kind {
        DirectiveKind::Rule(r) => r,
        k => panic!("{k:?}"),
    };
    assert_eq!(r.variables[0].selector, key("X-CRS-Test"));
    assert_eq!(
        action_value(&r.actions, "msg"),
        Some("X-CRS-Test %{MATCHED_VAR}")
    );
    assert_eq!(
        action_value(&r.actions, "ctl"),
        Some("ruleRemoveById=1-999999")
    );
}
