//! The reconciliation task: every interval, for every store of the fleet, one round of
//! pipelines sends what the store counted and changed and brings back the fleet's view;
//! a second round fetches the ban list when its version moved.
//!
//! # Redis keys
//!
//! Every key starts with `PREFIX:{NAMESPACE/TAG}:`, so a Cluster hashes only the part in
//! braces and every command, and every pipeline, stays on one slot:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{ns/NN}:r:<bucket key>` | string | the fleet's GCRA TAT of one bucket, microseconds since the epoch; expires when the bucket empties (+2 s) |
//! | `{ns/NN}:s:<score key>` | string | a client's behaviour score, `"points time"` (thousandths, µs); decays with the half-life |
//! | `{ns/bans}:h` | hash | bucket key of a ban -> `"end offences expires"` (nanoseconds) |
//! | `{ns/bans}:v` | string | ban list version: incremented on every change |
//!
//! `NN` is one of [`crate::DEFAULT_TAG_BUCKETS`] buckets chosen by a fixed hash of the
//! bucket key (the same on every node), which spreads the rate-limit keys over the
//! Cluster. A Cluster pipeline must stay on one slot, so each tag gets its own pipeline;
//! the pipelines of one round are sent concurrently.
//!
//! # Reconciling a GCRA bucket
//!
//! A TAT is not a count, but it adds like one: a request that conforms moves the TAT from
//! `max(tat, now)` forward by the interval `T`. So a node sends the number `k` of requests
//! it counted on a bucket since the last round, and Redis (one Lua script, atomic) applies
//! them as if they had just arrived, `tat = max(tat, now) + k·T`, and answers the fleet's
//! TAT. The node then makes its local bucket at least that full (plus what it counted
//! during the round trip). A node that let too much through in one interval (each node
//! only sees its own requests until the next round) thus finds the excess charged to its
//! bucket as debt, and refuses until it is paid: the long-run rate is the limit exactly,
//! and the overshoot at any time is what the other nodes let through in one interval.
//! `k` is capped at what is still in the local bucket, so requests counted during an outage
//! that have since drained are not charged twice.
//!
//! # Reconciling a score
//!
//! A score is a sum of points that decays with its half-life, so it adds too: a node sends
//! the points it added since the last round, Redis decays the fleet's score to now and adds
//! them (a Lua script), and the node takes the fleet's score (plus what it added during the
//! round trip) as its own. The node that sees the score cross the threshold bans the client
//! (the ban is shared) and resets the fleet's score, as a single node resets its own.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Value};
use waf_core::policy::Cell;

use crate::config::{
    FleetConfig, DEFAULT_MAX_KEYS_PER_SYNC, DEFAULT_TAG_BUCKETS, MAX_BACKOFF_MS, MIN_BACKOFF_MS,
};
use crate::line::{LineReply, LINE_LUA};
use crate::record::RECORD_LUA;
use crate::store::{BanOp, Batch, FleetStore};
use crate::Shared;

/// `KEYS[1]` the bucket; `ARGV`: now (µs), requests, interval (µs, may have decimals).
/// Lua numbers are doubles: microseconds since the epoch (~1.8e15) are exact in them.
const GCRA_LUA: &str = r"
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local t = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
tat = tat + n * t
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 2000)
return math.floor(tat)
";

/// `KEYS[1]` a score; `ARGV`: now (µs), half-life (µs), points to add (thousandths), `1`
/// to start from zero. Stored as `"points time"`; answers the points at `now`.
const SCORE_LUA: &str = r"
local now = tonumber(ARGV[1])
local hl = tonumber(ARGV[2])
local add = tonumber(ARGV[3])
local s, t = 0, now
local v = redis.call('GET', KEYS[1])
if v and ARGV[4] ~= '1' then
  local a, b = string.match(v, '^(%S+) (%S+)$')
  s = tonumber(a) or 0
  t = tonumber(b) or now
end
if t > now then t = now end
s = s * math.pow(2, -(now - t) / hl) + add
if s < 1 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], string.format('%.0f %.0f', s, now), 'PX', math.floor(hl * 16 / 1000) + 1000)
return math.floor(s)
";

/// `KEYS[1]` the ban hash, `KEYS[2]` its version; `ARGV`: field, value pairs. Only when
/// the version key is gone (Redis restarted empty, or a new Redis): put our bans back.
const REPUBLISH_LUA: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('INCR', KEYS[2])
return 1
";

enum Conn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

async fn connect(cfg: &FleetConfig) -> redis::RedisResult<Conn> {
    if cfg.cluster {
        let client = redis::cluster::ClusterClientBuilder::new(cfg.servers.clone())
            .connection_timeout(cfg.timeout)
            .response_timeout(cfg.timeout)
            .retries(1)
            .build()?;
        Ok(Conn::Cluster(client.get_async_connection().await?))
    } else {
        let client = redis::Client::open(cfg.servers[0].as_str())?;
        let c = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(cfg.timeout))
            .set_response_timeout(Some(cfg.timeout));
        Ok(Conn::Single(
            client
                .get_multiplexed_async_connection_with_config(&c)
                .await?,
        ))
    }
}

impl Conn {
    /// Sends `cmds` (each with its hash tag) and returns their replies in order.
    async fn run(&mut self, cmds: Vec<(u32, Cmd)>) -> redis::RedisResult<Vec<Value>> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Conn::Single(c) => {
                let mut p = redis::pipe();
                for (_, cmd) in cmds {
                    p.add_command(cmd);
                }
                p.query_async::<Vec<Value>>(c).await
            }
            Conn::Cluster(c) => {
                let mut groups: HashMap<u32, (Vec<usize>, redis::Pipeline)> = HashMap::new();
                let n = cmds.len();
                for (i, (tag, cmd)) in cmds.into_iter().enumerate() {
                    let g = groups
                        .entry(tag)
                        .or_insert_with(|| (Vec::new(), redis::pipe()));
                    g.0.push(i);
                    g.1.add_command(cmd);
                }
                let futs = groups.into_values().map(|(idx, p)| {
                    let mut c = c.clone();
                    async move {
                        let r = p.query_async::<Vec<Value>>(&mut c).await?;
                        Ok::<_, redis::RedisError>((idx, r))
                    }
                });
                let done = futures_util::future::try_join_all(futs).await?;
                let mut out = vec![Value::Nil; n];
                for (idx, replies) in done {
                    for (i, v) in idx.into_iter().zip(replies) {
                        out[i] = v;
                    }
                }
                Ok(out)
            }
        }
    }
}

/// The tag of the ban keys (one slot for the hash and its version).
const BAN_TAG: u32 = u32::MAX;
/// The tag of the waiting rooms' keys (one slot for every key of a namespace's rooms).
const LINE_TAG: u32 = u32::MAX - 1;
/// The tag of the shared records' keys ([`crate::record`]).
const RECORD_TAG: u32 = u32::MAX - 2;

/// FNV-1a: the bucket of a key must be the same on every node.
fn bucket(key: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(DEFAULT_TAG_BUCKETS)) as u32
}

/// Redis key names of one namespace.
struct Names {
    /// `PREFIX:{NS/`
    head: Vec<u8>,
}

impl Names {
    fn new(prefix: &str, namespace: &str) -> Names {
        let ns: String = namespace
            .chars()
            .map(|c| if matches!(c, '{' | '}') { '_' } else { c })
            .collect();
        Names {
            head: format!("{prefix}:{{{ns}/").into_bytes(),
        }
    }
    fn rate(&self, key: &[u8]) -> Vec<u8> {
        let mut k = self.head.clone();
        k.extend_from_slice(format!("{:02}}}:r:", bucket(key)).as_bytes());
        k.extend_from_slice(key);
        k
    }
    fn score(&self, key: &[u8]) -> Vec<u8> {
        let mut k = self.head.clone();
        k.extend_from_slice(format!("{:02}}}:s:", bucket(key)).as_bytes());
        k.extend_from_slice(key);
        k
    }
    fn bans(&self) -> Vec<u8> {
        let mut k = self.head.clone();
        k.extend_from_slice(b"bans}:h");
        k
    }
    /// One of a waiting room's keys: `what` is `l` (the line), `p` (the places), `m`
    /// (its state) or `c` (recent calls).
    fn line(&self, room: &[u8], what: &str) -> Vec<u8> {
        let mut k = self.head.clone();
        k.extend_from_slice(format!("wr}}:{what}:").as_bytes());
        k.extend_from_slice(room);
        k
    }
    /// One of the shared records' keys ([`crate::record`]): `what` is `h` (the records),
    /// `z` (change numbers), `t` (expiries) or `n` (the change counter).
    fn record(&self, what: &str) -> Vec<u8> {
        let mut k = self.head.clone();
        k.extend_from_slice(format!("rec}}:{what}").as_bytes());
        k
    }
    fn version(&self) -> Vec<u8> {
        let mut k = self.head.clone();
        k.extend_from_slice(b"bans}:v");
        k
    }
}

fn ban_value(c: &Cell) -> String {
    format!("{} {} {}", c.a, c.b, c.expires)
}

fn parse_ban(v: &[u8]) -> Option<Cell> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.split(' ').map(|x| x.parse::<u64>().ok());
    Some(Cell {
        a: it.next()??,
        b: it.next()??,
        expires: it.next()??,
    })
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}

fn hash_entries(v: Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    match v {
        Value::Array(items) => {
            let mut out = Vec::new();
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                if let (Some(k), Some(v)) = (bytes(k), bytes(v)) {
                    out.push((k, v));
                }
            }
            out
        }
        Value::Map(pairs) => pairs
            .into_iter()
            .filter_map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The waiting-room script's answer ([`LINE_LUA`]); what does not parse is left out.
fn line_reply(v: Value) -> LineReply {
    let Value::Array(parts) = v else {
        return LineReply::default();
    };
    let mut it = parts.into_iter();
    let ints = |v: Option<Value>| match v {
        Some(Value::Array(xs)) => xs.iter().map(|x| int(x).unwrap_or(-1)).collect(),
        _ => Vec::new(),
    };
    let touched = ints(it.next()).into_iter().map(|x: i64| x == 1).collect();
    let positions = ints(it.next());
    let mut calls = Vec::new();
    if let Some(Value::Array(xs)) = it.next() {
        let mut xs = xs.into_iter();
        while let (Some(id), Some(at)) = (xs.next(), xs.next()) {
            if let (Some(id), Some(at)) = (bytes(id), int(&at)) {
                calls.push((id, at.max(0) as u64));
            }
        }
    }
    let line_len = it.next().as_ref().and_then(int).unwrap_or(0).max(0) as u64;
    LineReply {
        touched,
        positions,
        calls,
        line_len,
    }
}

/// Applies the records script's answer ([`RECORD_LUA`]) to `store`; the change number to
/// read from next round.
fn apply_records(store: &FleetStore, v: Value, since: u64, now: u64) -> u64 {
    let Value::Array(parts) = v else {
        return since;
    };
    let mut it = parts.into_iter();
    let top = it.next().as_ref().and_then(int).unwrap_or(0).max(0) as u64;
    let Some(Value::Array(entries)) = it.next() else {
        return since;
    };
    let full = entries.len() >= 3 * DEFAULT_MAX_KEYS_PER_SYNC;
    let mut last = if top < since { 0 } else { since };
    let mut entries = entries.into_iter();
    while let (Some(k), Some(n), Some(v)) = (entries.next(), entries.next(), entries.next()) {
        let (Some(k), Some(n), Some(v)) = (bytes(k), int(&n), bytes(v)) else {
            continue;
        };
        store.apply_record(&k, crate::record::parse(&v), now);
        last = last.max(n.max(0) as u64);
    }
    // Truncated: go on from the last change read; else everything up to `top` is read.
    if full {
        last
    } else {
        top
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// What the task remembers about one namespace between rounds.
#[derive(Default)]
struct NsState {
    /// The ban list version last applied.
    version: Option<i64>,
    /// The last change number of the shared records read (0: read them all).
    records_since: u64,
}

/// What one round asks of Redis for one store, and where the replies go.
enum Reply {
    Ignore,
    Version(usize),
    Tat(usize, usize),
    Score(usize, usize),
    Line(usize, usize),
    Records(usize),
}

/// The task body: runs until the [`crate::Fleet`] is dropped.
pub(crate) async fn run(shared: Weak<Shared>, cfg: FleetConfig) {
    let mut conn: Option<Conn> = None;
    let mut fresh = true;
    let mut backoff = Duration::from_millis(MIN_BACKOFF_MS);
    let mut retry_at = Instant::now();
    let mut down_since: Option<Instant> = None;
    let mut states: HashMap<String, NsState> = HashMap::new();
    let mut tick = tokio::time::interval(cfg.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let stores = shared.live_stores();
        let failed = |shared: &Shared, why: String, down_since: &mut Option<Instant>| {
            shared.status.connected.store(false, Ordering::Relaxed);
            shared.stats.failures.fetch_add(1, Ordering::Relaxed);
            if down_since.is_none() {
                *down_since = Some(Instant::now());
                shared.stats.outages.fetch_add(1, Ordering::Relaxed);
                // Once per outage, not once per attempt.
                tracing::warn!(error = %why, "redis unreachable: enforcing with local state until it is back");
                if shared.live_stores().iter().any(|s| !s.lines.is_empty()) {
                    tracing::warn!("waiting rooms let nobody in until redis is back; visitors already in stay in");
                }
            }
        };
        if conn.is_none() {
            if Instant::now() < retry_at {
                continue;
            }
            match tokio::time::timeout(cfg.timeout, connect(&cfg)).await {
                Ok(Ok(c)) => {
                    conn = Some(c);
                    fresh = true;
                    shared.stats.connects.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(e)) => {
                    failed(&shared, e.to_string(), &mut down_since);
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_millis(MAX_BACKOFF_MS));
                    continue;
                }
                Err(_) => {
                    failed(&shared, "connect timed out".into(), &mut down_since);
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_millis(MAX_BACKOFF_MS));
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let batches: Vec<Batch> = stores
            .iter()
            .map(|s| s.take(DEFAULT_MAX_KEYS_PER_SYNC, unix_nanos()))
            .collect();
        let result = tokio::time::timeout(
            cfg.timeout,
            round(c, &shared, &stores, &batches, &mut states, fresh),
        )
        .await;
        match result {
            Ok(Ok(())) => {
                shared.status.connected.store(true, Ordering::Relaxed);
                shared.stats.rounds.fetch_add(1, Ordering::Relaxed);
                fresh = false;
                backoff = Duration::from_millis(MIN_BACKOFF_MS);
                if let Some(since) = down_since.take() {
                    tracing::warn!(
                        down_ms = since.elapsed().as_millis() as u64,
                        "redis reachable again: reconciliation resumed"
                    );
                }
            }
            other => {
                let why = match other {
                    Ok(Err(e)) => e.to_string(),
                    _ => "round timed out".to_string(),
                };
                for (s, b) in stores.iter().zip(batches) {
                    s.restore(b);
                }
                conn = None;
                failed(&shared, why, &mut down_since);
                retry_at = Instant::now() + backoff;
                backoff = (backoff * 2).min(Duration::from_millis(MAX_BACKOFF_MS));
            }
        }
    }
}

/// One reconciliation of every store. The batches are not consumed: on an error the caller
/// puts them back.
async fn round(
    conn: &mut Conn,
    shared: &Shared,
    stores: &[Arc<FleetStore>],
    batches: &[Batch],
    states: &mut HashMap<String, NsState>,
    fresh: bool,
) -> redis::RedisResult<()> {
    let now = unix_nanos();
    let mut cmds: Vec<(u32, Cmd)> = Vec::new();
    let mut replies: Vec<Reply> = Vec::new();
    for (si, (store, batch)) in stores.iter().zip(batches).enumerate() {
        let names = Names::new(&shared.config.prefix, &store.namespace);
        let ban_prefix = store.ban_prefix();
        if fresh && ban_prefix.is_some() {
            let mut c = redis::cmd("EVAL");
            c.arg(REPUBLISH_LUA)
                .arg(2)
                .arg(names.bans())
                .arg(names.version());
            for (k, cell) in store.local_bans(now) {
                c.arg(k).arg(ban_value(&cell));
            }
            cmds.push((BAN_TAG, c));
            replies.push(Reply::Ignore);
        }
        if !batch.bans.is_empty() {
            for (k, op) in &batch.bans {
                let c = match op {
                    BanOp::Set(cell) => {
                        let mut c = redis::cmd("HSET");
                        c.arg(names.bans()).arg(&k[..]).arg(ban_value(cell));
                        c
                    }
                    BanOp::Remove => {
                        let mut c = redis::cmd("HDEL");
                        c.arg(names.bans()).arg(&k[..]);
                        c
                    }
                };
                cmds.push((BAN_TAG, c));
                replies.push(Reply::Ignore);
            }
            let mut c = redis::cmd("INCR");
            c.arg(names.version());
            cmds.push((BAN_TAG, c));
            replies.push(Reply::Ignore);
        }
        if ban_prefix.is_some() {
            let mut c = redis::cmd("GET");
            c.arg(names.version());
            cmds.push((BAN_TAG, c));
            replies.push(Reply::Version(si));
        }
        let now_us = now / 1_000;
        for (hi, (key, hits, interval)) in batch.hits.iter().enumerate() {
            // Only what is still in the local bucket needs charging elsewhere.
            let level = store
                .local_tat(key, now)
                .saturating_sub(now)
                .div_ceil(*interval);
            let n = (*hits).min(level.max(1));
            let mut c = redis::cmd("EVAL");
            c.arg(GCRA_LUA)
                .arg(1)
                .arg(names.rate(key))
                .arg(now_us)
                .arg(n)
                .arg(format!("{:.3}", *interval as f64 / 1_000.0));
            cmds.push((bucket(key), c));
            replies.push(Reply::Tat(si, hi));
        }
        for (i, (key, op)) in batch.scores.iter().enumerate() {
            let mut c = redis::cmd("EVAL");
            c.arg(SCORE_LUA)
                .arg(1)
                .arg(names.score(key))
                .arg(now_us)
                .arg((op.half_life / 1_000).max(1))
                .arg(format!("{:.0}", op.add.max(0.0)))
                .arg(if op.reset { "1" } else { "0" });
            cmds.push((bucket(key), c));
            replies.push(Reply::Score(si, i));
        }
    }
    for (si, batch) in batches.iter().enumerate() {
        if !batch.reads_records {
            continue;
        }
        let names = Names::new(&shared.config.prefix, &stores[si].namespace);
        let st = states.entry(stores[si].namespace.clone()).or_default();
        if fresh {
            st.records_since = 0;
        }
        let mut c = redis::cmd("EVAL");
        c.arg(RECORD_LUA).arg(4);
        for what in ["h", "z", "t", "n"] {
            c.arg(names.record(what));
        }
        c.arg(now)
            .arg(st.records_since)
            .arg(DEFAULT_MAX_KEYS_PER_SYNC);
        for (key, op) in &batch.records {
            let (letter, x, y, expires) = op.args();
            c.arg(letter).arg(&key[..]).arg(x).arg(y).arg(expires);
        }
        cmds.push((RECORD_TAG, c));
        replies.push(Reply::Records(si));
    }
    for (si, batch) in batches.iter().enumerate() {
        let names = Names::new(&shared.config.prefix, &stores[si].namespace);
        for (li, b) in batch.lines.iter().enumerate() {
            let mut c = redis::cmd("EVAL");
            c.arg(LINE_LUA).arg(4);
            for what in ["l", "p", "m", "c"] {
                c.arg(names.line(&b.room, what));
            }
            c.arg(now / 1_000)
                .arg(b.spec.capacity)
                .arg(b.spec.interval / 1_000)
                .arg(b.spec.idle / 1_000)
                .arg(b.spec.claim / 1_000)
                .arg(b.since_us)
                .arg(b.touches.len());
            for v in &b.touches {
                c.arg(&v[..]);
            }
            for (v, arrival) in &b.waits {
                c.arg(&v[..]).arg(arrival / 1_000);
            }
            cmds.push((LINE_TAG, c));
            replies.push(Reply::Line(si, li));
        }
    }
    shared
        .stats
        .commands
        .fetch_add(cmds.len() as u64, Ordering::Relaxed);
    let values = conn.run(cmds).await?;
    let mut refetch = Vec::new();
    let now = unix_nanos();
    for (reply, value) in replies.iter().zip(values) {
        if let Value::ServerError(e) = &value {
            return Err(redis::RedisError::from(e.clone()));
        }
        match *reply {
            Reply::Ignore => {}
            Reply::Version(si) => {
                let v = int(&value);
                let st = states.entry(stores[si].namespace.clone()).or_default();
                if fresh || v != st.version {
                    refetch.push((si, v));
                }
            }
            Reply::Score(si, i) => {
                if let Some(points) = int(&value) {
                    let (key, op) = &batches[si].scores[i];
                    stores[si].apply_score(key, op.half_life, points.max(0) as f64, now);
                }
            }
            Reply::Records(si) => {
                let store = &stores[si];
                let st = states.entry(store.namespace.clone()).or_default();
                st.records_since = apply_records(store, value, st.records_since, now);
            }
            Reply::Line(si, li) => {
                let b = &batches[si].lines[li];
                stores[si].lines.apply(b, line_reply(value), now);
            }
            Reply::Tat(si, hi) => {
                if let Some(us) = int(&value) {
                    let (key, _, interval) = &batches[si].hits[hi];
                    let tat = (us.max(0) as u64).saturating_mul(1_000);
                    stores[si].apply_tat(key, *interval, tat, now);
                }
            }
        }
    }
    if refetch.is_empty() {
        return Ok(());
    }
    let mut cmds = Vec::new();
    for (si, _) in &refetch {
        let names = Names::new(&shared.config.prefix, &stores[*si].namespace);
        let mut c = redis::cmd("HGETALL");
        c.arg(names.bans());
        cmds.push((BAN_TAG, c));
    }
    shared
        .stats
        .commands
        .fetch_add(cmds.len() as u64, Ordering::Relaxed);
    let values = conn.run(cmds).await?;
    let now = unix_nanos();
    for ((si, version), value) in refetch.into_iter().zip(values) {
        if let Value::ServerError(e) = &value {
            return Err(redis::RedisError::from(e.clone()));
        }
        let entries: Vec<(Vec<u8>, Cell)> = hash_entries(value)
            .into_iter()
            .filter_map(|(k, v)| Some((k, parse_ban(&v)?)))
            .collect();
        let store = &stores[si];
        // Forget expired entries fleet-wide (any node may; HDEL is idempotent).
        let stale: Vec<&[u8]> = entries
            .iter()
            .filter(|(_, c)| c.expires <= now)
            .map(|(k, _)| k.as_slice())
            .collect();
        if !stale.is_empty() {
            let names = Names::new(&shared.config.prefix, &store.namespace);
            let mut c = redis::cmd("HDEL");
            c.arg(names.bans());
            for k in stale {
                c.arg(k);
            }
            shared.stats.commands.fetch_add(1, Ordering::Relaxed);
            conn.run(vec![(BAN_TAG, c)]).await?;
        }
        store.apply_bans(&entries, now);
        states.entry(store.namespace.clone()).or_default().version = version;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_namespace_hash_on_their_tag() {
        let n = Names::new("waf", "shop{x}");
        let k = n.rate(b"r\0\0abc");
        let s = String::from_utf8_lossy(&k);
        assert!(s.starts_with("waf:{shop_x_/"), "{s}");
        assert_eq!(&n.bans()[..n.head.len()], &n.version()[..n.head.len()]);
        assert!(String::from_utf8_lossy(&n.bans()).ends_with("bans}:h"));
    }

    #[test]
    fn ban_values_round_trip() {
        let c = Cell {
            a: 1,
            b: 2,
            expires: u64::MAX,
        };
        assert_eq!(parse_ban(ban_value(&c).as_bytes()), Some(c));
        assert_eq!(parse_ban(b"1 2"), None);
        assert_eq!(parse_ban(b"x y z"), None);
    }
}
