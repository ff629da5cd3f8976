//! Two (or three) nodes in one process, each a `Waf` with its own `Fleet`, against a real
//! `redis-server` and a real three-node Redis Cluster: rate limits and bans hold for the
//! fleet, and the cut-off policy applies when Redis cannot be reached.

#[path = "support/redis.rs"]
mod support;

#[path = "fleet_signin/mod.rs"]
mod signin;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use support::{RedisCluster, RedisServer};
use waf_core::{ConnectionInfo, RequestHead, ResponseHead, Waf};
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

#[test]
fn a_stalled_redis_counts_as_down_and_no_request_waits() {
    let redis = RedisServer::start();
    let (fleet, waf) = node(vec![redis.url()], false, CutOff::Share, 2);
    wait_connected(&[&fleet]);
    // DEBUG SLEEP blocks the whole server: every round times out (250 ms).
    let port = redis.port;
    let stall = std::thread::spawn(move || support::cli(port, &["DEBUG", "SLEEP", "1.5"]));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !fleet.stats().connected,
        "a stalled redis is down: {:?}",
        fleet.stats()
    );
    let client: IpAddr = "198.51.100.9".parse().unwrap();
    let mut slowest = Duration::ZERO;
    let mut passed = 0;
    for _ in 0..500 {
        let t = Instant::now();
        passed += u32::from(allowed(&waf, client));
        slowest = slowest.max(t.elapsed());
    }
    // Decisions are local (and, cut off with `share`, each request weighs 2: burst 5 / 2).
    // A request that waited on the stalled Redis would take up to its 1.5 s.
    assert!(
        slowest < Duration::from_millis(500),
        "a request waited {slowest:?}"
    );
    assert!((1..=5).contains(&passed), "{passed} passed while cut off");
    stall.join().unwrap();
    wait_connected(&[&fleet]);
    assert_eq!(fleet.stats().outages, 1, "{:?}", fleet.stats());
}

#[test]
fn bad_configs_are_refused_before_a_thread_starts() {
    let ok = FleetConfig::new(vec!["redis://127.0.0.1:6379".into()]);
    assert_eq!(ok.validate(), Ok(()));
    let cases: Vec<(FleetConfig, &str)> = vec![
        (FleetConfig::new(vec![]), "no redis server"),
        (
            FleetConfig::new(vec!["redis://a:1".into(), "redis://b:1".into()]),
            "set cluster = true",
        ),
        (
            FleetConfig::new(vec!["http://x".into()]),
            "is not a redis URL",
        ),
        (
            FleetConfig {
                interval: Duration::from_millis(5),
                ..ok.clone()
            },
            "interval 5 ms",
        ),
        (
            FleetConfig {
                cut_off: CutOff::Share,
                ..ok.clone()
            },
            "at least 2",
        ),
        (
            FleetConfig {
                prefix: "a{b".into(),
                ..ok.clone()
            },
            "prefix",
        ),
    ];
    for (c, want) in cases {
        let e = Fleet::start(c.clone()).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(want), "{c:?}: {e}");
    }
}

/// A request from `client` through `waf` answered with `status` (scored at the end).
fn answered(waf: &Waf, client: IpAddr, status: u16) {
    let conn = ConnectionInfo::new(
        SocketAddr::new(client, 40000),
        "127.0.0.1:80".parse().unwrap(),
    );
    let mut tx = waf.transaction(&conn, SystemTime::now());
    let headers: [(&[u8], &[u8]); 1] = [(b"host", b"app")];
    let _ = tx.request_headers(&RequestHead::new(b"GET", b"/x", b"HTTP/1.1", &headers));
    let _ = tx.response_headers(&ResponseHead::new(status, b"HTTP/1.1", &[]));
    let _ = tx.finish();
}

#[test]
fn scores_add_up_over_the_fleet() {
    let redis = RedisServer::start();
    let policy = r#"
[bans]
ttl_secs = 600
[scoring]
threshold = 10
streak = 0.0
half_life_secs = 600
weights = { "404" = 2 }
"#;
    let make = || {
        let mut c = FleetConfig::new(vec![redis.url()]);
        c.interval = Duration::from_millis(20);
        let fleet = Fleet::start(c).unwrap();
        let waf = Waf::builder()
            .policy(toml::from_str(policy).unwrap())
            .policy_store(fleet.store("app"))
            .build()
            .unwrap();
        (fleet, waf)
    };
    let (fa, a) = make();
    let (fb, b) = make();
    wait_connected(&[&fa, &fb]);
    // Six 404s, three on each node: 12 points for the fleet, 6 (no ban) on either alone.
    let scanner: IpAddr = "198.51.100.20".parse().unwrap();
    for i in 0..6 {
        answered(if i % 2 == 0 { &a } else { &b }, scanner, 404);
        std::thread::sleep(Duration::from_millis(80));
    }
    let t0 = Instant::now();
    for w in [&a, &b] {
        while allowed(w, scanner) {
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "the fleet's score did not ban"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(a.bans(SystemTime::now()).len(), 1);
    // A client with three 404s in all is banned nowhere.
    let user: IpAddr = "198.51.100.21".parse().unwrap();
    for i in 0..3 {
        answered(if i % 2 == 0 { &a } else { &b }, user, 404);
        std::thread::sleep(Duration::from_millis(80));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(allowed(&a, user) && allowed(&b, user));
}

/// A waiting room of capacity 2 on two nodes (driven through `Store::line`, as the room
/// drives it): five visitors arrive 60 ms apart, alternating nodes, and each asks on a
/// different node every time. They are let in in arrival order, never more than two at
/// once (counted in Redis itself), the positions they see are the fleet's, and while
/// Redis is down nobody new gets in while those in stay in.
#[test]
fn a_waiting_room_is_one_line_for_the_fleet() {
    use waf_core::policy::{LineOp, LineSpec, LineStatus, Store};
    let mut redis = RedisServer::start();
    let make = || {
        let mut c = FleetConfig::new(vec![redis.url()]);
        c.interval = Duration::from_millis(20);
        Fleet::start(c).unwrap()
    };
    let (fa, fb) = (make(), make());
    wait_connected(&[&fa, &fb]);
    let stores: [Arc<FleetStore>; 2] = [fa.store("app"), fb.store("app")];
    let spec = LineSpec {
        capacity: 2,
        interval: 0,
        idle: 800_000_000,
        claim: 3_000_000_000,
    };
    let room = b"wr-shop-";
    let now = || {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let port = redis.port;
    let places = || -> u64 {
        support::cli(port, &["ZCARD", "waf:{app/wr}:p:wr-shop-"])
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let mut arrival = [0u64; 5];
    let mut admitted: Vec<usize> = Vec::new();
    let mut left: Vec<usize> = Vec::new();
    let start = Instant::now();
    let mut step = 0usize;
    let mut max_places = 0;
    let mut settled_positions = Vec::new();
    while admitted.len() < 5 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "stuck: {admitted:?}"
        );
        step += 1;
        let t = start.elapsed().as_millis() as usize;
        for v in 0..5 {
            if t < v * 60 || left.contains(&v) {
                continue;
            }
            if arrival[v] == 0 {
                arrival[v] = now();
            }
            let node = &stores[(v + step) % 2];
            let id = [v as u8 + 1; 16];
            if admitted.contains(&v) {
                // In: the first in stays 300 ms, then leaves (and its place idles out).
                let pos = admitted.iter().position(|&x| x == v).unwrap();
                if left.len() == pos && t > 600 + 300 * pos {
                    left.push(v);
                    continue;
                }
                let s = node.line(room, &spec, &id, LineOp::Active { place: 0 }, now());
                assert_eq!(
                    s,
                    LineStatus::Admitted { place: 0 },
                    "visitor {v} lost its place"
                );
                continue;
            }
            match node.line(
                room,
                &spec,
                &id,
                LineOp::Wait {
                    arrival: arrival[v],
                },
                now(),
            ) {
                LineStatus::Admitted { .. } => admitted.push(v),
                LineStatus::Waiting {
                    position,
                    estimated: false,
                } => settled_positions.push((v, admitted.len(), left.len(), position)),
                _ => {}
            }
        }
        max_places = max_places.max(places());
        std::thread::sleep(Duration::from_millis(15));
    }
    assert_eq!(admitted, [0, 1, 2, 3, 4], "not let in in arrival order");
    assert!(max_places <= 2, "{max_places} places held at once");
    // A waiting visitor's position is the number of visitors ahead of it in the fleet's
    // line (ahead = arrived earlier and not yet called), give or take one round.
    assert!(!settled_positions.is_empty());
    for (v, _, _, position) in &settled_positions {
        assert!(
            (1..=3).contains(position) && *position as usize <= *v,
            "{settled_positions:?}"
        );
    }

    // Redis down: the two last visitors stay in, a new one waits even once places free.
    redis.kill();
    std::thread::sleep(Duration::from_millis(300));
    let late = [9u8; 16];
    for i in 0..40 {
        let t = now();
        let node = &stores[i % 2];
        let s = node.line(room, &spec, &late, LineOp::Wait { arrival: t }, t);
        assert!(
            matches!(s, LineStatus::Waiting { .. }),
            "let in while redis is down"
        );
        for v in [3u8, 4] {
            let s = node.line(room, &spec, &[v + 1; 16], LineOp::Active { place: 0 }, t);
            assert_eq!(s, LineStatus::Admitted { place: 0 });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // Back (empty): the visitors in get their places again, and the line moves.
    redis.restart();
    wait_connected(&[&fa, &fb]);
    let t0 = Instant::now();
    let mut i = 0;
    loop {
        i += 1;
        let node = &stores[i % 2];
        for v in [3u8, 4] {
            if i > 40 {
                break;
            }
            let s = node.line(
                room,
                &spec,
                &[v + 1; 16],
                LineOp::Active { place: 0 },
                now(),
            );
            assert_eq!(
                s,
                LineStatus::Admitted { place: 0 },
                "lost its place to the restart"
            );
        }
        if i == 40 {
            assert_eq!(
                places(),
                2,
                "the places of those in, back after the restart"
            );
        }
        if i > 40 {
            // 4 and 5 leave; the late visitor is called.
            let t = now();
            if let LineStatus::Admitted { .. } =
                node.line(room, &spec, &late, LineOp::Wait { arrival: t }, t)
            {
                break;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the line never moved again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
