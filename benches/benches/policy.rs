//! The native policy (`waf_core::policy`) in the scenario Corvus calls "protected": 30
//! rules that do not match the traffic, over path, query, header, User-Agent, referer,
//! method, host, scheme, IP and country conditions; one IP list of 1,000 CIDRs; a rate
//! limit of 100,000 requests per second that is evaluated on every request and never
//! triggered. One whole transaction (phases 1-5) per iteration, against the same
//! transaction on a `Waf` with no policy, so the difference is the policy's cost.
//! Also: loading a 100,000-CIDR list.
//!
//! `cargo bench -p waf-bench --bench policy`. The country database is written at start
//! with Debian's libmaxmind-db-writer-perl (`perl`), as the tests do.
//!
//! Instruction counts (steady state, `N` transactions each, after a warm-up):
//! `POLICY_CALLGRIND=N valgrind --tool=callgrind --toggle-collect='*measured*' BENCH_BINARY`
//! once with `POLICY_CALLGRIND_WAF=protected` and once with `=none`; divide `I refs` by `N`.
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{criterion_group, Criterion};
use waf_core::policy::{IpList, PolicyConfig};
use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Waf};

/// `n` CIDRs spread over the whole address space (nine in ten IPv4 /28s, one in ten IPv6
/// /64s in 2001:db8::/32), pseudo-random so that few merge; the benchmark's client
/// (6.1.2.3) is checked not to be in them.
fn cidrs(n: usize) -> Vec<String> {
    let mut x: u32 = 0x9e37_79b9;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if i % 10 == 9 {
                format!("2001:db8:{:x}:{:x}::/64", x >> 16, x & 0xffff)
            } else {
                format!("{}/28", std::net::Ipv4Addr::from(x & !0xf))
            }
        })
        .collect()
}

/// The 30 rules: three of each kind, none matching the benchmark's request.
fn rules() -> String {
    let conds = [
        r#"http.request.uri.path starts_with "/wp-admin""#,
        r##"http.request.uri.path matches r"\.(bak|old|swp)$""##,
        r#"http.request.uri.path contains "/.git/""#,
        r#"http.request.uri.query contains "union select""#,
        r#"http.request.uri.args["debug"] == "1""#,
        r#"http.request.uri.query matches "(?i)<script""#,
        r#"http.request.headers["x-forwarded-host"] != "" and http.request.headers["x-forwarded-host"] != "shop.example""#,
        r#"http.request.headers["x-original-url"] != """#,
        r#"http.request.headers["content-type"] contains "multipart/mixed""#,
        r#"http.user_agent in {"sqlmap" "nikto" "masscan"}"#,
        r#"http.user_agent matches "(?i)(python-requests|curl|go-http-client)/""#,
        r#"http.user_agent == """#,
        r#"http.referer contains "casino""#,
        r#"http.referer wildcard "*.spam.example/*""#,
        r#"http.referer starts_with "http://localhost""#,
        r#"http.request.method in {"TRACE" "TRACK" "CONNECT"}"#,
        r#"http.request.method == "DELETE" and http.request.uri.path starts_with "/api/admin""#,
        r#"http.request.method == "PUT" and not http.request.uri.path starts_with "/api/""#,
        r#"http.host == "internal.shop.example""#,
        r#"http.host ends_with ".onion""#,
        r#"http.host matches "^[0-9.]+$""#,
        r#"http.request.scheme == "https" and http.request.uri.path == "/http-only""#,
        r#"http.request.scheme == "http" and http.request.uri.path starts_with "/account""#,
        r#"http.request.scheme == "http" and http.request.uri.path == "/checkout""#,
        r#"ip.src in $blocked"#,
        r#"ip.src in {198.18.0.0/15 100.64.0.0/10}"#,
        r#"ip.src == 192.0.2.250"#,
        r#"ip.src.country in {"KP" "XX"}"#,
        r#"ip.src.country == "ZZ" and http.request.uri.path starts_with "/admin""#,
        r#"not ip.src.country in {"DE" "FR" "US" "GB" "NL"} and http.request.uri.path == "/internal""#,
    ];
    assert_eq!(conds.len(), 30);
    let mut out = String::new();
    for (i, c) in conds.iter().enumerate() {
        writeln!(
            out,
            "[[rules]]\nname = \"r{i}\"\nexpression = '''{c}'''\naction = \"block\"\n"
        )
        .unwrap();
    }
    out
}

fn write_mmdb(path: &Path) {
    let script = r#"use strict; use MaxMind::DB::Writer::Tree;
my %types = (country => 'map', iso_code => 'utf8_string');
my $t = MaxMind::DB::Writer::Tree->new(ip_version => 6, record_size => 24, remove_reserved_networks => 0,
  database_type => 'Bench-Country', languages => ['en'], description => { en => 'bench' },
  map_key_type_callback => sub { $types{ $_[0] } });
my @cc = ('DE', 'FR', 'US', 'GB', 'NL', 'XX');
for my $i (0 .. 255) { $t->insert_network("$i.0.0.0/8", { country => { iso_code => $cc[$i % 6] } }) unless $i == 0 || $i == 127 || $i >= 224 || $i % 6 == 5; }
open my $fh, '>:raw', $ARGV[0] or die; $t->write_tree($fh); close $fh or die;
"#;
    let out = std::process::Command::new("perl")
        .arg("-e")
        .arg(script)
        .arg(path)
        .output()
        .expect("perl is missing: install libmaxmind-db-writer-perl");
    assert!(
        out.status.success(),
        "writing the bench .mmdb failed (is libmaxmind-db-writer-perl installed?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn protected_policy(dir: &Path) -> PolicyConfig {
    let db = dir.join("country.mmdb");
    write_mmdb(&db);
    let list: Vec<String> = cidrs(1000).iter().map(|c| format!("{c:?}")).collect();
    let text = format!(
        "[geo]\ncountry_db = {:?}\n\
         [[list]]\nname = \"blocked\"\nkind = \"ip\"\nitems = [{}]\n\
         [[rate_limit]]\nname = \"flood\"\nrequests = 100000\nperiod_secs = 1\nburst = 100000\n\
         {}",
        db.display().to_string(),
        list.join(", "),
        rules()
    );
    toml::from_str(&text).expect("bench policy parses")
}

const HEADERS: &[(&[u8], &[u8])] = &[
    (b"Host", b"shop.example"),
    (
        b"User-Agent",
        b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    ),
    (
        b"Accept",
        b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    ),
    (b"Accept-Language", b"en-US,en;q=0.5"),
    (b"Accept-Encoding", b"gzip, deflate, br"),
    (b"Referer", b"https://shop.example/products"),
    (b"Cookie", b"session=3f2a9c1d7e; theme=dark"),
    (b"Connection", b"keep-alive"),
];

/// One benign transaction, phases 1-5; whether it was blocked.
fn run(waf: &Waf, conn: &ConnectionInfo, now: SystemTime) -> bool {
    let mut tx = waf.transaction(conn, now);
    let head = RequestHead::new(
        b"GET",
        b"/products/42?color=blue&size=m",
        b"HTTP/1.1",
        HEADERS,
    );
    let blocked = tx.request_headers(&head).intervention().is_some()
        || tx.request_end().intervention().is_some()
        || tx
            .response_headers(&ResponseHead::new(200, b"HTTP/1.1", &[]))
            .intervention()
            .is_some();
    let _ = tx.response_end();
    black_box(tx.finish());
    blocked
}

/// The two `Waf`s compared, the connection, the start time.
fn setup() -> (Waf, Waf, ConnectionInfo, SystemTime) {
    let dir = std::env::temp_dir().join(format!("waf-bench-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = protected_policy(&dir);
    let with = Waf::builder().policy(policy).build().expect("policy loads");
    std::fs::remove_dir_all(dir).ok();
    let without = Waf::builder().build().expect("empty waf");
    // A client from a country database entry (DE), not in any list.
    let conn = ConnectionInfo::new(
        "6.1.2.3:50000".parse().unwrap(),
        "127.0.0.1:443".parse().unwrap(),
    )
    .with_tls(true);
    (
        with,
        without,
        conn,
        UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    )
}

/// `n` transactions 20 µs apart; the only code callgrind counts (`--toggle-collect`).
#[inline(never)]
fn measured_transactions(waf: &Waf, conn: &ConnectionInfo, start: SystemTime, from: u64, n: u64) {
    for i in from..from + n {
        assert!(!run(waf, conn, start + Duration::from_micros(20 * i)));
    }
}

fn protected(c: &mut Criterion) {
    let (with, without, conn, start) = setup();
    assert!(
        !run(&with, &conn, start),
        "the protected policy must pass the benign request"
    );
    let mut group = c.benchmark_group("policy");
    for (name, waf) in [("protected", &with), ("no_policy", &without)] {
        // 20 µs apart: 50,000 r/s from one client, under the 100,000 r/s limit, so the
        // limit is evaluated (and its bucket written) on every request but never trips.
        let mut i = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                let now = start + Duration::from_micros(20 * i);
                assert!(!run(black_box(waf), &conn, now));
            })
        });
    }
    group.finish();
}

fn list_load(c: &mut Criterion) {
    let text = cidrs(100_000).join("\n");
    let list = IpList::parse("bench", &text).unwrap();
    eprintln!(
        "100,000 CIDRs: {} ranges after merging, {} KiB of ranges ({} KiB of text)",
        list.ranges(),
        list.heap_bytes() / 1024,
        text.len() / 1024
    );
    let mut group = c.benchmark_group("ip_list");
    group.sample_size(10);
    group.bench_function("load_100k_cidrs", |b| {
        b.iter(|| IpList::parse("bench", black_box(&text)).unwrap())
    });
    let probe: std::net::IpAddr = "10.20.30.40".parse().unwrap();
    group.bench_function("lookup_100k_cidrs", |b| {
        b.iter(|| list.contains(black_box(probe)))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = protected, list_load
}

/// `VmRSS` and `VmHWM` (peak) of this process, in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    if std::env::var_os("POLICY_LIST_MEMORY").is_some() {
        // Memory of a 100,000-CIDR list: the text is made first, so the growth is the
        // parse (peak) and the list that stays (after the text is dropped).
        let text = cidrs(100_000).join("\n");
        // Reset the peak to the current RSS (Linux: `5` > /proc/self/clear_refs).
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let (rss0, hwm0) = rss_kib();
        let t = std::time::Instant::now();
        let list = IpList::parse("bench", &text).unwrap();
        let took = t.elapsed();
        let (_, hwm1) = rss_kib();
        drop(text);
        let (rss1, _) = rss_kib();
        println!(
            "100,000 CIDRs: {} ranges, {} KiB of ranges; load {:.1} ms; RSS {} KiB -> {} KiB after dropping the text, peak +{} KiB during the parse",
            list.ranges(),
            list.heap_bytes() / 1024,
            took.as_secs_f64() * 1000.0,
            rss0,
            rss1,
            hwm1.saturating_sub(hwm0.max(rss0))
        );
        return;
    }
    if let Ok(n) = std::env::var("POLICY_CALLGRIND") {
        let n: u64 = n.parse().expect("POLICY_CALLGRIND=N transactions");
        let (with, without, conn, start) = setup();
        let waf = match std::env::var("POLICY_CALLGRIND_WAF").as_deref() {
            Ok("none") => without,
            _ => with,
        };
        // Warm-up (first-use allocations, lazy regex caches), then the measured run.
        for i in 0..100 {
            assert!(!run(&waf, &conn, start + Duration::from_micros(20 * i)));
        }
        measured_transactions(&waf, &conn, start, 100, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
