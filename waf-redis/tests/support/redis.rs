//! Real `redis-server` processes for tests: one server, or a three-node Redis Cluster made
//! with `redis-cli --cluster create`, on free loopback ports, killed on drop. Used by
//! `waf-redis/tests/fleet.rs` and `waf-proxy/tests/fleet.rs`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn which(tool: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = format!("{dir}/{tool}");
        if std::path::Path::new(&p).exists() {
            return p;
        }
    }
    panic!("{tool} is not installed: apt-get install redis-server redis-tools");
}

/// One `redis-server`.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    cluster: bool,
}

impl RedisServer {
    /// Starts a server on a free port.
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port(), false)
    }

    /// Starts a server on `port` (again after [`RedisServer::kill`]: a restart, empty).
    pub fn start_on(port: u16, cluster: bool) -> RedisServer {
        let dir = std::env::temp_dir().join(format!("waf-redis-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = RedisServer {
            port,
            child: None,
            dir,
            cluster,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(which("redis-server"));
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            // DEBUG SLEEP: a Redis that stalls.
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(&self.dir);
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
                .arg("--cluster-config-file")
                .arg(self.dir.join("nodes.conf"));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.cli(&["PING"]).trim() != "PONG" {
            assert!(
                Instant::now() < deadline,
                "redis-server on {} did not answer",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs `redis-cli -p PORT ARGS...`; its stdout (empty when it cannot connect).
    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }

    /// Kills the server (SIGKILL: a crash, nothing saved).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Commands of each kind served so far (`INFO commandstats`), e.g. `("eval", 120)`.
    pub fn command_counts(&self) -> Vec<(String, u64)> {
        self.cli(&["INFO", "commandstats"])
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
                Some((name.to_string(), calls.trim().parse().ok()?))
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `redis-cli -p PORT ARGS...`.
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new(which("redis-cli"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Three cluster-enabled servers joined with `redis-cli --cluster create`.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three nodes, creates the cluster (no replicas) and waits for `cluster_state:ok`.
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_on(free_port(), true))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(which("redis-cli"))
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("cannot run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        for n in &nodes {
            while !n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(Instant::now() < deadline, "cluster not ok on {}", n.port);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes }
    }

    /// The seed URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// Calls per command summed over the nodes.
    pub fn command_total(&self) -> u64 {
        self.nodes
            .iter()
            .flat_map(|n| n.command_counts())
            .filter(|(name, _)| !name.starts_with("cluster") && name != "info" && name != "ping")
            .map(|(_, c)| c)
            .sum()
    }
}
