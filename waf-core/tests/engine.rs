//! Rule-engine semantics, end to end through the public API: small rule sets written for
//! one behaviour each (chains, flow, defaults, ctl, exclusions, collections, limits, errors).

use std::time::{Duration, SystemTime};

use waf_core::{
    ConnectionInfo, DisruptiveAction, ErrorKind, Exclusion, Report, RequestHead, ResponseHead,
    Verdict, Waf,
};

fn waf(rules: &str) -> Waf {
    Waf::builder()
        .seclang("test.conf", rules)
        .build()
        .unwrap_or_else(|e| panic!("rules failed to load: {e}"))
}

/// The same rules evaluated rule by rule with no plan (the test oracle).
fn reference_waf(rules: &str) -> Waf {
    Waf::builder()
        .seclang("test.conf", rules)
        .internal_reference_evaluation()
        .build()
        .unwrap_or_else(|e| panic!("rules failed to load: {e}"))
}

fn conn() -> ConnectionInfo {
    ConnectionInfo::new(
        "192.0.2.7:50000".parse().unwrap(),
        "127.0.0.1:80".parse().unwrap(),
    )
}

struct Outcome {
    verdicts: Vec<Verdict>,
    report: Report,
}

impl Outcome {
    fn ids(&self) -> Vec<u64> {
        self.report.matched_rules.iter().map(|r| r.id).collect()
    }
    fn blocked(&self) -> Option<u16> {
        self.verdicts
            .iter()
            .find_map(|v| v.intervention().map(|i| i.status))
    }
}

/// Runs one whole transaction, stopping at the first intervention.
fn run(
    waf: &Waf,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    response: (&str, &[u8]),
) -> Outcome {
    let hdrs: Vec<(&[u8], &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    let mut tx = waf.transaction(
        &conn(),
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_035_260),
    );
    let mut verdicts = Vec::new();
    let go = |v: Verdict, verdicts: &mut Vec<Verdict>| {
        let stop = v.intervention().is_some();
        verdicts.push(v);
        stop
    };
    let stopped = go(
        tx.request_headers(&RequestHead::new(
            method.as_bytes(),
            uri.as_bytes(),
            b"HTTP/1.1",
            &hdrs,
        )),
        &mut verdicts,
    ) || (tx.wants_request_body() && go(tx.request_body(body), &mut verdicts))
        || go(tx.request_end(), &mut verdicts)
        || go(
            tx.response_headers(&ResponseHead::new(
                200,
                b"HTTP/1.1",
                &[(b"Content-Type", response.0.as_bytes())],
            )),
            &mut verdicts,
        )
        || (tx.wants_response_body() && go(tx.response_body(response.1), &mut verdicts))
        || go(tx.response_end(), &mut verdicts);
    let _ = stopped;
    Outcome {
        verdicts,
        report: tx.finish(),
    }
}

fn get(waf: &Waf, uri: &str) -> Outcome {
    run(
        waf,
        "GET",
        uri,
        &[("Host", "example.com")],
        b"",
        ("text/plain", b""),
    )
}

const ON: &str = "SecRuleEngine On\nSecRequestBodyAccess On\nSecResponseBodyAccess On\n";

#[test]
fn deny_blocks_with_status_and_later_phases_repeat_it() {
    let w = waf(&format!("{ON}SecRule ARGS:q \"@contains evil\" \"id:1,phase:1,deny,status:418,msg:'bad %{{MATCHED_VAR}}'\""));
    let o = get(&w, "/?q=very%20evil");
    assert_eq!(o.blocked(), Some(418));
    assert_eq!(o.ids(), vec![1]);
    assert_eq!(
        o.report.matched_rules[0].message.as_deref(),
        Some("bad very evil")
    );
    assert_eq!(o.report.matched_rules[0].matched_var_name, "ARGS:q");
    assert_eq!(o.report.intervention.as_ref().map(|i| i.rule_id), Some(1));
    assert_eq!(get(&w, "/?q=fine").blocked(), None);
}

#[test]
fn detection_only_reports_without_blocking_and_off_runs_nothing() {
    let rule = "SecRule ARGS \"@contains evil\" \"id:1,phase:1,deny\"";
    let o = get(
        &waf(&format!("SecRuleEngine DetectionOnly\n{rule}")),
        "/?q=evil",
    );
    assert_eq!(o.blocked(), None);
    assert_eq!(o.ids(), vec![1]);
    assert_eq!(
        o.report.would_intervene.as_ref().map(|i| i.status),
        Some(403)
    );
    let o = get(&waf(&format!("SecRuleEngine Off\n{rule}")), "/?q=evil");
    assert!(o.ids().is_empty());
}

#[test]
fn chain_needs_every_link_and_captures_feed_the_next() {
    let w = waf(&format!(
        "{ON}SecRule ARGS:a \"@rx ^(\\w+)-(\\w+)$\" \"id:5,phase:1,deny,capture,chain\"\n  SecRule ARGS:b \"@streq %{{TX.2}}\" \"t:none\""
    ));
    assert_eq!(get(&w, "/?a=x-y&b=y").blocked(), Some(403));
    assert_eq!(get(&w, "/?a=x-y&b=z").blocked(), None);
    assert_eq!(get(&w, "/?b=y").blocked(), None);
}

#[test]
fn setvar_runs_per_match_and_scores_add_up() {
    let w = waf(&format!(
        "{ON}SecAction \"id:1,phase:1,nolog,pass,setvar:tx.score=0\"\n\
         SecRule ARGS \"@contains x\" \"id:2,phase:1,pass,setvar:tx.score=+3\"\n\
         SecRule TX:score \"@ge 6\" \"id:3,phase:1,deny,status:429\""
    ));
    assert_eq!(get(&w, "/?a=x&b=x").blocked(), Some(429));
    assert_eq!(get(&w, "/?a=x&b=y").blocked(), None);
}

#[test]
fn skip_after_jumps_to_the_marker() {
    let w = waf(&format!(
        "{ON}SecRule ARGS:skip \"@eq 1\" \"id:1,phase:1,pass,nolog,skipAfter:END\"\n\
         SecRule ARGS \"@unconditionalMatch\" \"id:2,phase:1,deny\"\n\
         SecMarker END\n\
         SecRule ARGS:late \"@eq 1\" \"id:3,phase:1,deny,status:409\""
    ));
    assert_eq!(get(&w, "/?skip=0").blocked(), Some(403));
    assert_eq!(get(&w, "/?skip=1").blocked(), None);
    assert_eq!(get(&w, "/?skip=1&late=1").blocked(), Some(409));
}

/// Rules that compare one `TX` name with a number (CRS's paranoia gates and setup rules)
/// are decided and recorded by the plan without the value loop: their match must still set
/// `MATCHED_VAR` and `MATCHED_VAR_NAME` (a later `SecAction` reads them), run their effects
/// after that (`setvar` with macros), log with their message, take `skipAfter`, and give
/// way to `ctl:ruleRemoveById`.
#[test]
fn planned_tx_tests_record_their_match_and_take_their_actions() {
    let w = waf(&format!(
        "{ON}SecAction \"id:1,phase:1,pass,nolog,setvar:tx.level=1\"\n\
         SecRule ARGS:off \"@eq 1\" \"id:2,phase:1,pass,nolog,ctl:ruleRemoveById=4\"\n\
         SecRule TX:level \"@lt 1\" \"id:3,phase:1,pass,nolog,skipAfter:END-1\"\n\
         SecRule TX:level \"@lt 2\" \"id:4,phase:1,pass,nolog,skipAfter:END-1\"\n\
         SecAction \"id:5,phase:1,deny,status:401\"\n\
         SecMarker END-1\n\
         SecAction \"id:6,phase:1,pass,log,msg:'%{{MATCHED_VAR_NAME}}=%{{MATCHED_VAR}}'\"\n\
         SecRule &TX:unset \"@eq 0\" \"id:7,phase:1,pass,nolog\"\n\
         SecAction \"id:8,phase:1,pass,log,msg:'%{{MATCHED_VAR_NAME}}=%{{MATCHED_VAR}}'\"\n\
         SecRule TX:unset \"@lt 1\" \"id:9,phase:1,pass,nolog,skipAfter:END-2\"\n\
         SecAction \"id:10,phase:1,pass,log,msg:'%{{MATCHED_VAR_NAME}}=%{{MATCHED_VAR}}'\"\n\
         SecMarker END-2\n\
         SecRule TX:level \"@ge 1\" \"id:11,phase:1,pass,log,msg:'level %{{MATCHED_VAR}}',setvar:'tx.seen=%{{MATCHED_VAR_NAME}}'\"\n\
         SecRule TX:seen \"@streq TX:level\" \"id:12,phase:1,deny,status:402,chain\"\n\
           SecRule ARGS:pay \"@eq 1\" \"t:none\""
    ));
    let o = get(&w, "/?a=b");
    // 3 does not match (1 < 1), 4 does and skips 5; 7 counts an unset name (0); 9 reads
    // an unset name, so it visits nothing and does not match.
    assert_eq!(o.blocked(), None);
    assert_eq!(o.ids(), vec![6, 8, 10, 11]);
    let msgs: Vec<_> = o
        .report
        .matched_rules
        .iter()
        .map(|r| r.message.clone().unwrap_or_default())
        .collect();
    assert_eq!(msgs, ["TX:level=1", "TX=0", "TX=0", "level 1"]);
    assert_eq!(o.report.matched_rules[3].matched_var_name, "TX:level");
    // 11's setvar saw its own match.
    assert_eq!(get(&w, "/?pay=1").blocked(), Some(402));
    // With 4 removed for this transaction, nothing skips 5.
    assert_eq!(get(&w, "/?off=1").blocked(), Some(401));
}

#[test]
fn block_follows_the_default_action_of_its_phase() {
    let w = waf(&format!(
        "{ON}SecDefaultAction \"phase:1,log,deny,status:401\"\n\
         SecDefaultAction \"phase:2,log,pass\"\n\
         SecRule ARGS:a \"@eq 1\" \"id:1,phase:1,block\"\n\
         SecRule ARGS:b \"@eq 1\" \"id:2,phase:2,block\""
    ));
    assert_eq!(get(&w, "/?a=1").blocked(), Some(401));
    let o = get(&w, "/?b=1");
    assert_eq!(o.blocked(), None);
    assert_eq!(o.ids(), vec![2]);
}

#[test]
fn ctl_removes_rules_and_targets_for_one_transaction() {
    let w = waf(&format!(
        "{ON}SecRule REQUEST_URI \"@beginsWith /admin\" \"id:1,phase:1,pass,nolog,ctl:ruleRemoveById=10-19,ctl:ruleRemoveTargetById=20;ARGS:token\"\n\
         SecRule ARGS \"@contains x\" \"id:15,phase:1,deny\"\n\
         SecRule ARGS \"@contains y\" \"id:20,phase:1,deny,status:402\""
    ));
    assert_eq!(get(&w, "/?a=x").blocked(), Some(403));
    assert_eq!(get(&w, "/admin?a=x").blocked(), None);
    assert_eq!(get(&w, "/admin?token=y").blocked(), None);
    assert_eq!(get(&w, "/admin?other=y").blocked(), Some(402));
    assert_eq!(get(&w, "/?token=y").blocked(), Some(402));
}

#[test]
fn exclusions_in_rules_and_update_target() {
    let w = waf(&format!(
        "{ON}SecRule ARGS|!ARGS:safe \"@contains x\" \"id:1,phase:1,deny\"\n\
         SecRule REQUEST_COOKIES \"@contains y\" \"id:2,phase:1,deny,status:402\"\n\
         SecRuleUpdateTargetById 2 \"!REQUEST_COOKIES:/^_ga/\""
    ));
    assert_eq!(get(&w, "/?safe=x").blocked(), None);
    assert_eq!(get(&w, "/?other=x").blocked(), Some(403));
    let cookie =
        |c: &str| run(&w, "GET", "/", &[("Cookie", c)], b"", ("text/plain", b"")).blocked();
    assert_eq!(cookie("_ga_123=y"), None);
    assert_eq!(cookie("sid=y"), Some(402));
    assert!(w.warnings().is_empty(), "{:?}", w.warnings());
}

/// Every row of the table in `waf_core::Exclusion`'s module docs: everywhere or under a
/// path, whole rule or one target, by id or by tag.
#[test]
fn typed_exclusions_act_as_their_seclang_equivalents() {
    let rules = format!(
        "{ON}SecRule ARGS \"@contains x\" \"id:10,phase:1,deny,tag:t-x\"\n\
         SecRule ARGS \"@contains y\" \"id:20,phase:2,deny,status:402,tag:t-y\""
    );
    let build = |e: Exclusion| {
        Waf::builder()
            .exclusion(e)
            .seclang("test.conf", rules.clone())
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    // Everywhere, whole rule: the rule is gone.
    let w = build(Exclusion::rule_ids([10..=10]));
    assert_eq!(get(&w, "/?a=x").blocked(), None);
    assert_eq!(get(&w, "/?a=y").blocked(), Some(402));
    let w = build(Exclusion::tag("t-y"));
    assert_eq!(get(&w, "/?a=y").blocked(), None);
    assert_eq!(get(&w, "/?a=x").blocked(), Some(403));
    // Everywhere, one target.
    let w = build(Exclusion::rule_ids([10..=20]).target("ARGS:safe"));
    assert_eq!(get(&w, "/?safe=x&s2=1").blocked(), None);
    assert_eq!(get(&w, "/?other=x").blocked(), Some(403));
    let w = build(Exclusion::tag("t-y").target("ARGS:/^sa/"));
    assert_eq!(get(&w, "/?same=y").blocked(), None);
    assert_eq!(get(&w, "/?other=y").blocked(), Some(402));
    // Under a path, whole rule: only there, and for the request's whole life (phase 2 too).
    let w = build(Exclusion::rule_ids([10..=10, 20..=20]).under_path("/api/"));
    assert_eq!(get(&w, "/api/v1?a=x").blocked(), None);
    assert_eq!(get(&w, "/api/v1?a=y").blocked(), None);
    assert_eq!(get(&w, "/apix?a=x").blocked(), Some(403));
    assert_eq!(get(&w, "/?a=y").blocked(), Some(402));
    // Under a path, one target.
    let w = build(
        Exclusion::tag("t-x")
            .under_path("/login")
            .target("ARGS:password"),
    );
    assert_eq!(get(&w, "/login?password=x").blocked(), None);
    assert_eq!(get(&w, "/login?user=x").blocked(), Some(403));
    assert_eq!(get(&w, "/?password=x").blocked(), Some(403));
    assert!(w.warnings().is_empty(), "{:?}", w.warnings());
}

#[test]
fn typed_exclusions_are_checked_at_load() {
    let rules = format!("{ON}SecRule ARGS \"@contains x\" \"id:10,phase:1,deny\"");
    let load = |e: Exclusion| {
        Waf::builder()
            .seclang("t.conf", rules.clone())
            .exclusion(e)
            .build()
    };
    let w = load(Exclusion::rule_ids([99..=99]).under_path("/a")).unwrap();
    assert!(
        w.warnings()[0].message.contains("matches no rule"),
        "{:?}",
        w.warnings()
    );
    let w = load(Exclusion::tag("none")).unwrap();
    assert_eq!(w.warnings().len(), 1, "{:?}", w.warnings());
    for bad in [
        Exclusion::rule_ids([]),
        #[allow(clippy::reversed_empty_ranges)]
        Exclusion::rule_ids([5..=1]),
        Exclusion::rule_ids([10..=10]).under_path("api/"),
        Exclusion::rule_ids([10..=10])
            .under_path("/api/")
            .target("NOPE:x"),
        Exclusion::rule_ids([10..=10]).target("NOPE:x"),
    ] {
        let e = load(bad.clone()).expect_err(&format!("{bad:?} should fail to load"));
        assert!(
            matches!(e.kind(), ErrorKind::Invalid | ErrorKind::Unsupported),
            "{e}"
        );
        assert!(e.to_string().contains("exclusion[0]"), "{e}");
    }
}

#[test]
fn exclusion_that_matches_nothing_warns() {
    let w = waf(&format!("{ON}SecRule ARGS \"@contains x\" \"id:1,phase:1,deny\"\nSecRuleRemoveById 99\nSecRuleUpdateTargetById 98 \"!ARGS:x\""));
    assert_eq!(w.warnings().len(), 2, "{:?}", w.warnings());
    assert_eq!(w.warnings()[0].location.as_ref().map(|l| l.line), Some(5));
}

#[test]
fn ctl_exclusion_that_matches_nothing_warns() {
    let w = waf(&format!(
        "{ON}SecRule ARGS \"@contains x\" \"id:1,phase:1,deny,tag:t1\"\n\
         SecAction \"id:2,phase:1,pass,nolog,ctl:ruleRemoveById=5000,ctl:ruleRemoveByTag=t1,ctl:ruleRemoveTargetByTag=nope;ARGS:a\""
    ));
    let messages: Vec<String> = w.warnings().iter().map(|w| w.message.clone()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("5000") && messages[1].contains("nope"),
        "{messages:?}"
    );
}

#[test]
fn counts_and_numbers() {
    let w = waf(&format!("{ON}SecRule &ARGS \"@gt 2\" \"id:1,phase:1,deny\"\nSecRule &REQUEST_HEADERS:X-Missing \"@eq 0\" \"id:2,phase:1,pass\""));
    let o = get(&w, "/?a=1&b=2");
    assert_eq!(o.blocked(), None);
    assert_eq!(o.ids(), vec![2]);
    assert_eq!(get(&w, "/?a=1&b=2&c=3").blocked(), Some(403));
}

#[test]
fn persistent_ip_collection_survives_transactions() {
    let w = waf(&format!(
        "{ON}SecAction \"id:1,phase:1,nolog,pass,initcol:ip=%{{remote_addr}},setvar:ip.hits=+1\"\n\
         SecRule IP:hits \"@gt 2\" \"id:2,phase:1,deny,status:429\""
    ));
    assert_eq!(get(&w, "/").blocked(), None);
    assert_eq!(get(&w, "/").blocked(), None);
    assert_eq!(get(&w, "/").blocked(), Some(429));
}

#[test]
fn response_body_is_inspected_only_for_listed_mime_types() {
    let w = waf(&format!(
        "{ON}SecResponseBodyMimeType text/html\nSecRule RESPONSE_BODY \"@contains stack trace\" \"id:1,phase:4,deny,status:502\""
    ));
    let html = run(
        &w,
        "GET",
        "/",
        &[],
        b"",
        ("text/html; charset=utf-8", b"a stack trace here"),
    );
    assert_eq!(html.blocked(), Some(502));
    let json = run(
        &w,
        "GET",
        "/",
        &[],
        b"",
        ("application/json", b"a stack trace here"),
    );
    assert_eq!(json.blocked(), None);
}

#[test]
fn request_body_limit_rejects_or_processes_partially() {
    let reject = waf(&format!(
        "{ON}SecRequestBodyLimit 10\nSecRequestBodyLimitAction Reject"
    ));
    let o = run(
        &reject,
        "POST",
        "/",
        &[("Content-Type", "text/plain")],
        &[b'a'; 11],
        ("text/plain", b""),
    );
    assert_eq!(o.blocked(), Some(403));
    let partial = waf(&format!(
        "{ON}SecRequestBodyLimit 10\nSecRequestBodyLimitAction ProcessPartial\n\
         SecRule REQUEST_BODY \"@contains evil\" \"id:1,phase:2,deny,ctl:forceRequestBodyVariable=On\"\n\
         SecAction \"id:2,phase:1,nolog,pass,ctl:forceRequestBodyVariable=On\""
    ));
    let o = run(
        &partial,
        "POST",
        "/",
        &[("Content-Type", "text/plain")],
        b"0123456789evil",
        ("text/plain", b""),
    );
    assert_eq!(o.blocked(), None);
    let o = run(
        &partial,
        "POST",
        "/",
        &[("Content-Type", "text/plain")],
        b"evil",
        ("text/plain", b""),
    );
    assert_eq!(o.blocked(), Some(403));
}

/// `WafBuilder::xml_depth_limit` and `multipart_part_limit` move the limits: a body within
/// the default but over the set limit is refused with 400, one within it passes, and 0 is
/// a load error.
#[test]
fn body_parser_limits_are_settable() {
    let with = |b: waf_core::WafBuilder| {
        b.seclang(
            "t.conf",
            format!(
                "{ON}SecRule REQUEST_HEADERS:Content-Type \"@contains xml\" \
                 \"id:9,phase:1,pass,nolog,ctl:requestBodyProcessor=XML\""
            ),
        )
        .build()
        .unwrap()
    };
    let xml = b"<a><b><c><d>x</d></c></b></a>";
    let xml_ct = [("Content-Type", "text/xml")];
    let default = with(Waf::builder());
    let tight = with(Waf::builder().xml_depth_limit(3));
    let post = |w: &Waf, ct: &[(&str, &str)], body: &[u8]| {
        run(w, "POST", "/", ct, body, ("text/plain", b"")).blocked()
    };
    assert_eq!(post(&default, &xml_ct, xml), None);
    assert_eq!(post(&tight, &xml_ct, xml), Some(400));
    assert_eq!(post(&tight, &xml_ct, b"<a><b>x</b></a>"), None);
    let ct = [("Content-Type", "multipart/form-data; boundary=XyZ")];
    let part =
        |n: usize| format!("--XyZ\r\nContent-Disposition: form-data; name=\"f{n}\"\r\n\r\nv\r\n");
    let body = |parts: usize| {
        let mut b: String = (0..parts).map(part).collect();
        b.push_str("--XyZ--\r\n");
        b.into_bytes()
    };
    let two = with(Waf::builder().multipart_part_limit(2));
    assert_eq!(post(&default, &ct, &body(3)), None);
    assert_eq!(post(&two, &ct, &body(2)), None);
    assert_eq!(post(&two, &ct, &body(3)), Some(400));
    for b in [
        Waf::builder().xml_depth_limit(0),
        Waf::builder().multipart_part_limit(0),
    ] {
        let e = b.build().unwrap_err();
        assert!(e.to_string().contains("must be at least 1"), "{e}");
    }
}

#[test]
fn form_body_fills_args() {
    let w = waf(&format!(
        "{ON}SecRule ARGS_POST:name \"@streq bob smith\" \"id:1,phase:2,deny\""
    ));
    let o = run(
        &w,
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"name=bob+smith",
        ("text/plain", b""),
    );
    assert_eq!(o.blocked(), Some(403));
}

#[test]
fn load_errors_carry_file_line_and_column() {
    let cases = [
        (
            "SecRuleEngine On\nSecNoSuchDirective 1\n",
            2,
            "SecNoSuchDirective",
        ),
        ("SecRule ARGS \"@nosuchop x\" \"id:1\"\n", 1, "nosuchop"),
        ("SecRule NO_SUCH_VAR \"@rx x\" \"id:1\"\n", 1, "NO_SUCH_VAR"),
        (
            "SecRule ARGS \"@rx x\" \"id:1,nosuchaction\"\n",
            1,
            "nosuchaction",
        ),
        ("SecRule ARGS \"@rx x\" \"phase:1\"\n", 1, "id"),
        (
            "SecRule ARGS \"@rx x\" \"id:1,chain\"\nSecMarker m\n",
            2,
            "chain",
        ),
        ("SecRule ARGS \"@rx (\" \"id:1\"\n", 1, "regex"),
        (
            "\nSecRule GEO:country_code \"@streq XX\" \"id:1\"\n",
            2,
            "GEO",
        ),
    ];
    for (text, line, needle) in cases {
        let err = Waf::builder()
            .seclang("bad.conf", text)
            .build()
            .expect_err(text);
        let loc = err
            .location()
            .unwrap_or_else(|| panic!("no location for {text:?}: {err}"));
        assert_eq!((loc.file.as_str(), loc.line), ("bad.conf", line), "{err}");
        assert!(loc.column >= 1);
        assert!(
            err.to_string()
                .to_lowercase()
                .contains(&needle.to_lowercase()),
            "{text:?} gave {err}"
        );
    }
}

#[test]
fn redirect_and_drop() {
    let w = waf(&format!(
        "{ON}SecRule ARGS:go \"@eq 1\" \"id:1,phase:1,redirect:https://example.com/blocked\"\nSecRule ARGS:go \"@eq 2\" \"id:2,phase:1,drop\""
    ));
    let o = get(&w, "/?go=1");
    let iv = o.report.intervention.unwrap();
    assert_eq!(
        (iv.status, iv.action),
        (
            302,
            DisruptiveAction::Redirect("https://example.com/blocked".into())
        )
    );
    assert_eq!(
        get(&w, "/?go=2").report.intervention.map(|i| i.action),
        Some(DisruptiveAction::Drop)
    );
}

#[test]
fn allow_stops_inspection() {
    let w = waf(&format!(
        "{ON}SecRule REMOTE_ADDR \"@ipMatch 192.0.2.0/24\" \"id:1,phase:1,allow,nolog\"\nSecRule ARGS \"@contains x\" \"id:2,phase:2,deny\""
    ));
    assert_eq!(get(&w, "/?a=x").blocked(), None);
}

/// A finished transaction's request and response data are recycled for the next one
/// (`eval/data/reuse.rs`): none of its headers, cookies, arguments, request line, response
/// head or `ctl` removals may be seen by the next request.
#[test]
fn recycled_transactions_forget_the_request() {
    let waf = waf(&format!(
        "{ON}{}",
        r#"
        SecRule REQUEST_HEADERS:X-Secret "@rx ." "id:21,phase:1,pass,log"
        SecRule REQUEST_COOKIES:c "@rx ." "id:22,phase:1,pass,log"
        SecRule REQUEST_BASENAME "@streq secret.php" "id:23,phase:1,pass,log"
        SecRule ARGS_GET:q "@rx ." "id:24,phase:1,pass,log"
        SecRule REQUEST_HEADERS:X-Secret "@rx ." "id:25,phase:1,pass,nolog,ctl:ruleRemoveById=26"
        SecRule REQUEST_LINE "@contains secret" "id:28,phase:1,pass,log"
        SecRule REQUEST_METHOD "@streq GET" "id:26,phase:2,pass,log"
        SecRule RESPONSE_CONTENT_TYPE "@contains secret" "id:27,phase:3,pass,log"
    "#
    ));
    let secret = || {
        run(
            &waf,
            "GET",
            "/dir/secret.php?q=1",
            &[("Host", "a"), ("X-Secret", "1"), ("Cookie", "c=1")],
            b"",
            ("text/secret", b""),
        )
    };
    assert_eq!(secret().ids(), vec![21, 22, 23, 24, 28, 27]);
    for _ in 0..3 {
        let plain = run(
            &waf,
            "GET",
            "/index.html",
            &[("Host", "a")],
            b"",
            ("text/html", b""),
        );
        assert_eq!(
            plain.ids(),
            vec![26],
            "request data leaked into the next transaction"
        );
        assert_eq!(secret().ids(), vec![21, 22, 23, 24, 28, 27]);
    }
}

/// Transactions reuse the tables of finished ones (`eval/pool.rs`); nothing of a request may
/// be visible to the next: TX variables, captures and cached transformations start empty.
#[test]
fn recycled_transactions_start_empty() {
    let waf = waf(&format!(
        "{ON}{}",
        r#"
        SecRule ARGS:mark "@rx ^(set)$" "id:1,phase:1,pass,capture,setvar:tx.flag=%{tx.1},setvar:'tx.name_%{tx.1}=1'"
        SecRule &TX:flag "@eq 1" "id:2,phase:1,pass,log"
        SecRule TX:/^name_/ "@rx ." "id:3,phase:1,pass,log"
        SecRule TX:1 "@rx ." "id:4,phase:1,pass,log"
        SecRule ARGS "@rx SET" "id:5,phase:1,pass,log,t:uppercase"
    "#
    ));
    let first = run(
        &waf,
        "GET",
        "/?mark=set",
        &[("Host", "a")],
        b"",
        ("200", b""),
    );
    assert_eq!(first.ids(), vec![1, 2, 3, 4, 5]);
    for _ in 0..3 {
        let next = run(
            &waf,
            "GET",
            "/?other=x",
            &[("Host", "a")],
            b"",
            ("200", b""),
        );
        assert_eq!(
            next.ids(),
            Vec::<u64>::new(),
            "state leaked into the next transaction"
        );
        let again = run(
            &waf,
            "GET",
            "/?mark=set",
            &[("Host", "a")],
            b"",
            ("200", b""),
        );
        assert_eq!(again.ids(), vec![1, 2, 3, 4, 5]);
    }
}

#[test]
fn the_phase_one_setup_is_folded_only_where_it_gives_the_same_answer() {
    // 10-13 read only TX and set only TX: evaluated once when the Waf is built. 14 skips
    // (it ends the fold), 1 and 2 come before it and read the request.
    let rules = format!(
        "{ON}SecRule REQUEST_HEADERS:X-Level \"@rx ^([0-9])$\" \"id:1,phase:1,pass,nolog,capture,setvar:tx.level=%{{TX.1}}\"\n\
         SecRule ARGS:off \"@eq 1\" \"id:2,phase:1,pass,nolog,ctl:ruleRemoveById=12\"\n\
         SecAction \"id:10,phase:1,pass,nolog,setvar:tx.setup=1\"\n\
         SecRule &TX:level \"@eq 0\" \"id:11,phase:1,pass,nolog,setvar:tx.level=1\"\n\
         SecRule &TX:limit \"@eq 0\" \"id:12,phase:1,pass,nolog,setvar:'tx.limit=%{{tx.level}}2'\"\n\
         SecRule &TX:setup \"@eq 0\" \"id:13,phase:1,deny,status:500,log,msg:'no setup'\"\n\
         SecRule TX:level \"@lt 2\" \"id:14,phase:1,pass,nolog,skipAfter:END\"\n\
         SecRule ARGS:a \"@streq x\" \"id:15,phase:1,deny,status:401\"\n\
         SecMarker END\n\
         SecAction \"id:20,phase:1,pass,log,msg:'%{{MATCHED_VAR_NAME}}=%{{MATCHED_VAR}} level=%{{TX.level}} limit=%{{TX.limit}}'\""
    );
    let folded = waf(&rules);
    let reference = reference_waf(&rules);
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<u16>, &'a str);
    let cases: [Case; 3] = [
        // Nothing touched TX before the setup: the fold.
        ("/?a=x", &[], None, "TX:level=1 level=1 limit=12"),
        // 1 set TX first: the rules run, 11 keeps level 5, 14 does not skip.
        ("/?a=x", &[("X-Level", "5")], Some(401), ""),
        // 2 removed 12 for this transaction: the rules run, without 12.
        ("/?off=1&a=x", &[], None, "TX:level=1 level=1 limit="),
    ];
    for (uri, headers, blocked, message) in cases {
        let mut all = vec![("Host", "example.com")];
        all.extend_from_slice(headers);
        let outcomes =
            [&folded, &reference].map(|w| run(w, "GET", uri, &all, b"", ("text/plain", b"")));
        for o in &outcomes {
            assert_eq!(o.blocked(), blocked, "{uri} {headers:?}");
            let last = o
                .report
                .matched_rules
                .last()
                .and_then(|r| r.message.clone());
            if blocked.is_none() {
                assert_eq!(last.as_deref(), Some(message), "{uri} {headers:?}");
            }
        }
        assert_eq!(outcomes[0].ids(), outcomes[1].ids(), "{uri} {headers:?}");
    }
}

#[test]
fn a_multimatch_rule_whose_raw_value_is_prefiltered_still_runs_on_each_changed_step() {
    // 1's literal `evil` is looked for in each raw value first (the prefilter of values
    // with no transformation); a value without it must still be tried after each step
    // that changes it: `EVIL` after t:lowercase, `%65vil` after t:urlDecodeUni.
    let rules = format!(
        "{ON}SecRule ARGS \"@rx evil\" \"id:1,phase:2,pass,nolog,multiMatch,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.hits=+1,setvar:'tx.last=%{{MATCHED_VAR_NAME}}'\"\n\
         SecAction \"id:9,phase:2,pass,log,msg:'hits=%{{tx.hits}}'\""
    );
    let planned = waf(&rules);
    let reference = reference_waf(&rules);
    let few = "/?a=EVIL&b=%2565vil&c=evil&d=good".to_string();
    // Past the size from which big collections are scanned once for all their values.
    let many = (0..24).fold(few.clone(), |u, i| format!("{u}&pad{i}=good"));
    for uri in [&few, &many] {
        let outcomes = [&planned, &reference]
            .map(|w| run(w, "GET", uri, &[("Host", "a")], b"", ("text/plain", b"")));
        for o in &outcomes {
            let last = o
                .report
                .matched_rules
                .last()
                .and_then(|r| r.message.clone());
            assert_eq!(last.as_deref(), Some("hits=3"), "{uri}");
        }
    }
}

/// `%{tx.name}` in an operator's argument, a `setvar`'s name and value, `msg` and
/// `logdata` reads the `TX` table by the slot the compiler gave the name: it sees what
/// `setvar` wrote, whether the writer named the variable literally, through a macro or in
/// another case, and an unset name expands to nothing. The answers are the reference
/// evaluation's, and the texts are spelled out: a macro reading another name's slot
/// would show a wrong number.
#[test]
fn tx_macros_read_what_setvar_wrote() {
    let rules = format!(
        "{ON}SecAction \"id:1,phase:1,pass,nolog,setvar:tx.allowed=|GET|HEAD|,setvar:tx.score=3,setvar:tx.limit=7\"
SecRule REQUEST_METHOD \"!@within %{{tx.allowed}}\" \"id:2,phase:1,deny,status:405\"
SecRule ARGS:n \"@gt %{{TX.Limit}}\" \"id:3,phase:1,deny,status:413,msg:'n over %{{tx.limit}}'\"
SecRule ARGS:k \"@rx ^\\w+$\" \"id:4,phase:1,pass,log,capture,setvar:'tx.key_%{{tx.0}}=%{{tx.score}}',setvar:tx.total=+%{{tx.score}},msg:'key %{{tx.0}}',logdata:'total %{{tx.total}} unset [%{{tx.nothing}}]'\"
SecRule TX:key_abc \"@eq %{{tx.score}}\" \"id:5,phase:1,pass,log,setvar:tx.total=+%{{tx.key_abc}},msg:'key_abc is %{{tx.key_abc}}, total %{{tx.total}}'\"
SecRule TX:total \"@ge 6\" \"id:6,phase:1,deny,status:418,msg:'total %{{tx.TOTAL}} of %{{tx.limit}}'\"
"
    );
    for w in [waf(&rules), reference_waf(&rules)] {
        let o = run(&w, "PUT", "/", &[("Host", "a")], b"", ("text/plain", b""));
        assert_eq!(o.blocked(), Some(405), "@within %{{tx.allowed}}");
        assert_eq!(get(&w, "/?n=8").blocked(), Some(413));
        assert_eq!(
            get(&w, "/?n=8").report.matched_rules[0].message.as_deref(),
            Some("n over 7")
        );
        assert_eq!(get(&w, "/?n=7").blocked(), None);
        let o = get(&w, "/?k=abc");
        assert_eq!(o.ids(), vec![4, 5, 6]);
        assert_eq!(o.blocked(), Some(418));
        let texts: Vec<(Option<&str>, Option<&str>)> = o
            .report
            .matched_rules
            .iter()
            .map(|r| (r.message.as_deref(), r.data.as_deref()))
            .collect();
        assert_eq!(
            texts,
            vec![
                (Some("key abc"), Some("total 3 unset []")),
                (Some("key_abc is 3, total 6"), None),
                (Some("total 6 of 7"), None),
            ]
        );
        // Another key: TX:key_abc is not set, so rule 5 does not match.
        let o = get(&w, "/?k=xyz");
        assert_eq!(o.ids(), vec![4]);
        assert_eq!(o.blocked(), None);
    }
}
