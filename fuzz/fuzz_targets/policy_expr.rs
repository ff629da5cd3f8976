//! Policy expressions: any text either fails to load with a located error or compiles, and
//! a compiled one evaluates on a request without panicking.
#![no_main]
use std::time::{Duration, SystemTime};

use libfuzzer_sys::fuzz_target;
use waf_core::policy::{
    ListConfig, ListKind, PolicyConfig, RateLimitConfig, RuleAction, RuleConfig,
};
use waf_core::{ConnectionInfo, RequestHead, Waf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = PolicyConfig {
        lists: vec![
            list("ips", ListKind::Ip, &["192.0.2.0/24", "2001:db8::/32"]),
            list("agents", ListKind::String, &["sqlmap"]),
        ],
        rate_limits: vec![toml_rate()],
        rules: vec![RuleConfig {
            name: "fuzz".into(),
            id: 1,
            expression: text.to_string(),
            action: RuleAction::Block,
            status: None,
            page: None,
            page_file: None,
            skip: None,
            header: None,
            value: None,
            rule_ids: Vec::new(),
            tags: Vec::new(),
            rate_limit: None,
            challenge: None,
            difficulty: None,
            shadow: false,
        }],
        ..PolicyConfig::default()
    };
    let Ok(waf) = Waf::builder().policy(config).build() else {
        return;
    };
    let conn = ConnectionInfo::new(
        "192.0.2.7:1234".parse().unwrap(),
        "127.0.0.1:80".parse().unwrap(),
    );
    let mut tx = waf.transaction(
        &conn,
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    );
    let headers: &[(&[u8], &[u8])] = &[
        (b"Host", b"a.example"),
        (b"User-Agent", b"sqlmap"),
        (b"Cookie", b"s=1"),
    ];
    let _ = tx.request_headers(&RequestHead::new(
        b"GET",
        b"/p%41th?q=1&x=%zz",
        b"HTTP/1.1",
        headers,
    ));
    let _ = tx.request_end();
    let _ = tx.finish();
});

fn list(name: &str, kind: ListKind, items: &[&str]) -> ListConfig {
    ListConfig {
        name: name.into(),
        kind,
        items: items.iter().map(|s| s.to_string()).collect(),
        file: None,
    }
}

fn toml_rate() -> RateLimitConfig {
    RateLimitConfig {
        name: "r".into(),
        key: vec!["ip".into()],
        requests: 10,
        period_secs: 1,
        burst: None,
        when: None,
        count_statuses: Vec::new(),
        status: 429,
        ipv4_prefix: None,
        ipv6_prefix: None,
        shadow: false,
    }
}
