//! Two (or three) nodes in one process, each a `Waf` with its own `Fleet`, against a real
//! `redis-server` and a real three-node Redis Cluster: rate limits and bans hold for the
//! fleet, and the cut-off policy applies when Redis cannot be reached.

#[path = "support/redis.rs"]
mod support;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use support::{RedisCluster, RedisServer};
use waf_core::{ConnectionInfo, RequestHead, Waf};
use waf_redis::{CutOff, Fleet, FleetConfig, FleetStore};

const POLICY: &str = r#"
[[rate_limit]]
name = "all"
requests = 50
period_secs = 1
burst = 5
[bans]
ttl_secs = 600
"#;

fn node(servers: Vec<String>, cluster: bool, cut_off: CutOff, nodes: u32) -> (Fleet, Waf) {
    let mut c = FleetConfig::new(servers);
    c.cluster = cluster;
    c.interval = Duration::from_millis(20);
    c.cut_off = cut_off;
    c.nodes = nodes;
    let fleet = Fleet::start(c).unwrap();
    let store: Arc<FleetStore> = fleet.store("app");
    let waf = Waf::builder()
        .policy(toml::from_str(POLICY).unwrap())
        .policy_store(store)
        .build()
        .unwrap();
    (fleet, waf)
}

/// Whether `waf` lets one request from `client` through now.
fn allowed(waf: &Waf, client: IpAddr) -> bool {
    let conn = ConnectionInfo::new(
        SocketAddr::new(client, 40000),
        "127.0.0.1:80".parse().unwrap(),
    );
    let mut tx = waf.transaction(&conn, SystemTime::now());
    let headers: [(&[u8], &[u8]); 1] = [(b"host", b"app")];
    let v = tx.request_headers(&RequestHead::new(b"GET", b"/", b"HTTP/1.1", &headers));
    v.intervention().is_none()
}

fn wait_connected(fleets: &[&Fleet]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fleets.iter().all(|f| f.stats().connected) {
        assert!(
            Instant::now() < deadline,
            "fleet never connected: {:?}",
            fleets[0].stats()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Requests at ~`rate` per second, round robin over `wafs`, for `secs`; how many passed.
fn spread(wafs: &[&Waf], client: IpAddr, rate: u64, secs: f64) -> u64 {
    let start = Instant::now();
    let step = Duration::from_secs_f64(1.0 / rate as f64);
    let mut passed = 0;
    let mut i = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        if allowed(wafs[(i % wafs.len() as u64) as usize], client) {
            passed += 1;
        }
        i += 1;
        let next = start + step * i as u32;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    passed
}

/// Global limit within ±10 %, then a ban through one node seen by the others within 1 s,
/// and an unban the same way.
fn rate_and_bans(wafs: &[&Waf], fleets: &[&Fleet]) {
    wait_connected(fleets);
    let client: IpAddr = "198.51.100.7".parse().unwrap();
    let secs = 4.0;
    let passed = spread(wafs, client, 400, secs);
    // burst + rate × W; n nodes alone would let n times that through.
    let expected = 5.0 + 50.0 * secs;
    let err = (passed as f64 - expected) / expected;
    eprintln!(
        "{} nodes: {passed} passed, expected {expected}, error {:+.1} %",
        wafs.len(),
        err * 100.0
    );
    assert!(
        err.abs() <= 0.10,
        "{passed} passed, expected {expected} ± 10 %"
    );

    let banned: IpAddr = "203.0.113.9".parse().unwrap();
    wafs[0].ban(banned, Some(600), SystemTime::now()).unwrap();
    let t0 = Instant::now();
    for w in &wafs[1..] {
        while w.bans(SystemTime::now()).iter().all(|b| b.ip != banned) {
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "ban not seen within 1 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!allowed(w, banned));
    }
    eprintln!("ban seen on every node after {:?}", t0.elapsed());
    assert!(wafs[wafs.len() - 1].unban(banned));
    let t0 = Instant::now();
    for w in wafs {
        while !allowed(w, banned) {
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "unban not seen within 1 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn one_server_two_nodes() {
    let redis = RedisServer::start();
    let (fa, a) = node(vec![redis.url()], false, CutOff::Local, 2);
    let (fb, b) = node(vec![redis.url()], false, CutOff::Local, 2);
    rate_and_bans(&[&a, &b], &[&fa, &fb]);
    // One round per interval per node, a handful of commands each.
    let s = fa.stats();
    assert!(s.rounds > 100 && s.commands >= s.rounds, "{s:?}");
}

#[test]
fn cluster_three_nodes() {
    let cluster = RedisCluster::start();
    let (fa, a) = node(cluster.urls(), true, CutOff::Local, 3);
    let (fb, b) = node(cluster.urls(), true, CutOff::Local, 3);
    let (fc, c) = node(cluster.urls(), true, CutOff::Local, 3);
    rate_and_bans(&[&a, &b, &c], &[&fa, &fb, &fc]);
    // The keys are spread over the cluster's nodes, not all on one.
    let busy = cluster
        .nodes
        .iter()
        .filter(|n| n.cli(&["DBSIZE"]).trim().parse::<u64>().unwrap_or(0) > 0)
        .count();
    assert!(busy >= 1, "no key in the cluster");
}

#[test]
fn cut_off_local_keeps_the_limit_and_share_divides_it() {
    // Nothing listens there: every node is cut off from the start.
    let nowhere = format!("redis://127.0.0.1:{}", support::free_port());
    let client: IpAddr = "198.51.100.8".parse().unwrap();
    let (fl, local) = node(vec![nowhere.clone()], false, CutOff::Local, 2);
    let (fs, share) = node(vec![nowhere], false, CutOff::Share, 2);
    let l = spread(&[&local], client, 400, 2.0);
    let s = spread(&[&share], client, 400, 2.0);
    eprintln!("cut off: local {l}, share {s}");
    // Local: 5 + 50 × 2 = 105; share: half the rate and burst, ~53.
    assert!((95..=116).contains(&l), "local {l}");
    assert!((45..=60).contains(&s), "share {s}");
    assert!(!fl.stats().connected && fl.stats().failures > 0);
    assert!(fs.stats().outages == 1, "{:?}", fs.stats());
}
