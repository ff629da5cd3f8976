//! Waiting rooms shared by a fleet: one line, in arrival order, for every node, and never
//! more visitors in than the room's capacity, counted over the whole fleet.
//!
//! # Who decides what
//!
//! Redis holds the line and the places; only Redis calls a visitor in. Each round
//! ([`crate::sync`]), a node runs one Lua script per room it has news for (`LINE_LUA`).
//! The script, atomically:
//!
//! 1. frees the places whose time ran out (an admitted visitor idle for `idle_secs`, a
//!    called one that did not come back within `3 × refresh_secs + 10`);
//! 2. keeps the places of the visitors this node saw active warm (or, when a place was lost
//!    with Redis's data or to idleness, gives one back if nobody waits and there is room);
//! 3. puts the visitors that asked on this node into the line, ordered by the arrival time
//!    in their signed ticket (so a visitor who arrived first on node A is ahead of one who
//!    arrived later on node B, whichever node's round comes first);
//! 4. calls visitors from the front of the line while places are free (and `per_minute`
//!    allows), holding a place for each;
//! 5. answers the positions of this node's visitors and every call made since the node
//!    last asked.
//!
//! So the fleet's line is one FIFO and its places are never more than `capacity`: every
//! call and every place is one Redis operation inside one script.
//!
//! # What a request sees
//!
//! A request never waits on Redis: [`Lines::line`] answers from this node's mirror of what
//! the last rounds said. A visitor Redis called (on any node's round) is let in on its next
//! request to any node that has had a round since; a visitor in line gets its last known
//! position; a visitor this node has not heard of yet (new, or coming from another node)
//! gets an estimate (the line's length), marked as such, so the page reloads after a second
//! instead of `refresh_secs`. An admitted visitor this node has not seen before is trusted
//! on its signed admission cookie, and checked in the next round: if its place is gone it
//! goes back in line on its next request. That is the one leniency: a visitor whose place
//! ran out (idle) and who comes back to a node that had forgotten it gets one round's worth
//! of requests (≤ `interval`) before it is sent back.
//!
//! # Redis unreachable
//!
//! Nobody is called while Redis cannot be reached: capacity is a fleet-wide count that no
//! node can check alone, and letting visitors in on local guesses could overfill the site
//! the room protects. Visitors already in stay in (their requests are answered from the
//! mirror, and their places are renewed when Redis is back); visitors in line keep their
//! page and their position, and the line moves again, in order, once Redis is back. The
//! reconciliation task logs this once per outage ("waiting rooms let nobody in until redis
//! is back").

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use waf_core::policy::{LineOp, LineSpec, LineStatus};

/// Most visitors one room's mirror remembers (and most sent in one round); past it, new
/// visitors get estimates until older ones are forgotten. About 60 bytes a visitor.
pub const DEFAULT_MAX_LINE_VISITORS: usize = 100_000;

/// The script of one room's round. `KEYS`: the line (sorted set, arrival µs -> visitor),
/// the places (sorted set, expiry µs -> visitor), the room's state (hash: `head`, the
/// arrival of the last visitor called, and `last`, when it was), the recent calls (sorted
/// set, call µs -> visitor). `ARGV`: now, capacity, interval, idle, claim, since (µs, the
/// last call this node has seen), the number of touches, the touched visitors, then
/// (visitor, arrival) pairs. Answers `{touched (1/0 each), positions (0 = in, -1 =
/// unknown), calls (visitor, µs, ...), line length}`.
pub(crate) const LINE_LUA: &str = r"
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local idle = tonumber(ARGV[4])
local claim = tonumber(ARGV[5])
local since = tonumber(ARGV[6])
local nt = tonumber(ARGV[7])
local function f(x) return string.format('%.0f', x) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', f(now))
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', f(now - claim))
local touched = {}
for i = 1, nt do
  local id = ARGV[7 + i]
  if redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZADD', KEYS[2], f(now + idle), id)
    touched[i] = 1
  elseif redis.call('ZCARD', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) < cap then
    redis.call('ZADD', KEYS[2], f(now + idle), id)
    touched[i] = 1
  else
    touched[i] = 0
  end
end
local head = tonumber(redis.call('HGET', KEYS[3], 'head') or '0') or 0
local last = tonumber(redis.call('HGET', KEYS[3], 'last') or '0') or 0
local waits = {}
for i = 8 + nt, #ARGV - 1, 2 do
  local id = ARGV[i]
  if not redis.call('ZSCORE', KEYS[2], id) and not redis.call('ZSCORE', KEYS[1], id) then
    local arrival = tonumber(ARGV[i + 1])
    if arrival <= head then arrival = now end
    redis.call('ZADD', KEYS[1], f(arrival), id)
  end
  waits[#waits + 1] = id
end
while redis.call('ZCARD', KEYS[2]) < cap do
  if interval > 0 and last > 0 and now < last + interval then break end
  local p = redis.call('ZPOPMIN', KEYS[1])
  if #p == 0 then break end
  redis.call('ZADD', KEYS[2], f(now + claim), p[1])
  redis.call('ZADD', KEYS[4], f(now), p[1])
  local a = tonumber(p[2])
  if a > head then head = a end
  last = now
end
redis.call('HSET', KEYS[3], 'head', f(head), 'last', f(last))
local pos = {}
for i, id in ipairs(waits) do
  if redis.call('ZSCORE', KEYS[2], id) then
    pos[i] = 0
  else
    local r = redis.call('ZRANK', KEYS[1], id)
    if r then pos[i] = r + 1 else pos[i] = -1 end
  end
end
local called = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. f(since), '+inf', 'WITHSCORES')
local keep = 21600000
for k = 1, 4 do redis.call('PEXPIRE', KEYS[k], keep) end
return {touched, pos, called, redis.call('ZCARD', KEYS[1])}
";

type Visitor = [u8; 16];

/// What this node last heard of a visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    /// In line at this position, as of `at`.
    Waiting { position: u64, at: u64 },
    /// Called or in; last seen at `at`.
    In { at: u64 },
    /// Its place is gone (it goes back in line with a new ticket).
    Gone { at: u64 },
}

/// One room's mirror.
#[derive(Debug)]
struct Mirror {
    spec: LineSpec,
    known: HashMap<Visitor, Known>,
    /// To send: visitors that asked since the last round, with their arrival (ns).
    waits: HashMap<Visitor, u64>,
    /// To send: admitted visitors seen since the last round.
    touches: HashSet<Visitor>,
    /// The latest call this node has seen (µs).
    since: u64,
    /// The line's length, as of the last round.
    line_len: u64,
    /// When a visitor last waited here (ns): while someone may still be waiting, the room
    /// takes part in every round, so calls go on and are learnt.
    last_wait: u64,
}

/// One room's part of a round.
#[derive(Debug)]
pub(crate) struct LineBatch {
    pub(crate) room: Box<[u8]>,
    pub(crate) spec: LineSpec,
    pub(crate) touches: Vec<Visitor>,
    pub(crate) waits: Vec<(Visitor, u64)>,
    pub(crate) since_us: u64,
}

/// What the script answered.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LineReply {
    pub(crate) touched: Vec<bool>,
    pub(crate) positions: Vec<i64>,
    pub(crate) calls: Vec<(Vec<u8>, u64)>,
    pub(crate) line_len: u64,
}

/// One room's mirror, shared by the request path and the reconciliation task.
type Room = Arc<Mutex<Mirror>>;

/// The waiting rooms of one [`crate::FleetStore`].
#[derive(Debug, Default)]
pub(crate) struct Lines {
    rooms: RwLock<HashMap<Box<[u8]>, Room>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned mirror only means a panic elsewhere while it was held; its maps are
    // consistent between statements.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Lines {
    fn room(&self, room: &[u8], spec: &LineSpec) -> Room {
        if let Some(m) = self
            .rooms
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(room)
        {
            return Arc::clone(m);
        }
        let mut rooms = self.rooms.write().unwrap_or_else(|e| e.into_inner());
        Arc::clone(rooms.entry(room.into()).or_insert_with(|| {
            Arc::new(Mutex::new(Mirror {
                spec: *spec,
                known: HashMap::new(),
                waits: HashMap::new(),
                touches: HashSet::new(),
                since: 0,
                line_len: 0,
                last_wait: 0,
            }))
        }))
    }

    /// Whether any room was asked about.
    pub(crate) fn is_empty(&self) -> bool {
        self.rooms
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The request path: answers from the mirror, notes what to tell Redis.
    pub(crate) fn line(
        &self,
        room: &[u8],
        spec: &LineSpec,
        visitor: &Visitor,
        op: LineOp,
        now: u64,
    ) -> LineStatus {
        let m = self.room(room, spec);
        let mut m = lock(&m);
        m.spec = *spec;
        let full = m.known.len() >= DEFAULT_MAX_LINE_VISITORS;
        match op {
            LineOp::Active { .. } => {
                if let Some(Known::Gone { .. }) = m.known.get(visitor) {
                    m.known.remove(visitor);
                    return LineStatus::Gone;
                }
                if !full || m.known.contains_key(visitor) {
                    m.known.insert(*visitor, Known::In { at: now });
                }
                if m.touches.len() < DEFAULT_MAX_LINE_VISITORS {
                    m.touches.insert(*visitor);
                }
                LineStatus::Admitted { place: 0 }
            }
            LineOp::Wait { arrival } => {
                m.last_wait = now;
                match m.known.get(visitor).copied() {
                    Some(Known::In { .. }) => {
                        m.known.insert(*visitor, Known::In { at: now });
                        m.touches.insert(*visitor);
                        LineStatus::Admitted { place: 0 }
                    }
                    known => {
                        if m.waits.len() < DEFAULT_MAX_LINE_VISITORS {
                            m.waits.insert(*visitor, arrival);
                        }
                        match known {
                            Some(Known::Waiting { position, .. }) => LineStatus::Waiting {
                                position,
                                estimated: false,
                            },
                            _ => LineStatus::Waiting {
                                position: m.line_len + 1,
                                estimated: true,
                            },
                        }
                    }
                }
            }
            _ => LineStatus::Waiting {
                position: m.line_len + 1,
                estimated: true,
            },
        }
    }

    /// What the rooms must send this round; forgets visitors not heard of for long.
    pub(crate) fn take(&self, now: u64) -> Vec<LineBatch> {
        let rooms: Vec<(Box<[u8]>, Room)> = self
            .rooms
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        let mut out = Vec::new();
        for (room, m) in rooms {
            let mut m = lock(&m);
            let spec = m.spec;
            let keep_in = spec.idle.max(spec.claim);
            m.known.retain(|_, k| match *k {
                Known::Waiting { at, .. } | Known::Gone { at } => {
                    now.saturating_sub(at) < spec.claim
                }
                Known::In { at } => now.saturating_sub(at) < keep_in,
            });
            let waiting = now.saturating_sub(m.last_wait) < spec.claim;
            if m.waits.is_empty() && m.touches.is_empty() && !waiting {
                continue;
            }
            let since_us = if m.since == 0 {
                (now.saturating_sub(spec.claim)) / 1_000
            } else {
                m.since
            };
            out.push(LineBatch {
                room,
                spec,
                touches: m.touches.drain().collect(),
                waits: m.waits.drain().collect(),
                since_us,
            });
        }
        out
    }

    /// Puts back what a failed round took.
    pub(crate) fn restore(&self, batches: Vec<LineBatch>) {
        for b in batches {
            let m = self.room(&b.room, &b.spec);
            let mut m = lock(&m);
            m.touches.extend(b.touches);
            for (v, a) in b.waits {
                m.waits.entry(v).or_insert(a);
            }
        }
    }

    /// Takes in what Redis answered for `batch`.
    pub(crate) fn apply(&self, batch: &LineBatch, reply: LineReply, now: u64) {
        let m = self.room(&batch.room, &batch.spec);
        let mut m = lock(&m);
        for (v, ok) in batch.touches.iter().zip(&reply.touched) {
            if *ok {
                m.known.insert(*v, Known::In { at: now });
            } else {
                m.known.insert(*v, Known::Gone { at: now });
            }
        }
        for ((v, _), pos) in batch.waits.iter().zip(&reply.positions) {
            match *pos {
                0 => {
                    m.known.insert(*v, Known::In { at: now });
                }
                // Unless a touch said it is in (a later call, below, may too).
                p if p > 0 && !matches!(m.known.get(v), Some(Known::In { .. })) => {
                    m.known.insert(
                        *v,
                        Known::Waiting {
                            position: p as u64,
                            at: now,
                        },
                    );
                }
                _ => {}
            }
        }
        let before = m.since;
        let mut new_calls = 0;
        for (v, at_us) in &reply.calls {
            let Ok(v) = Visitor::try_from(v.as_slice()) else {
                continue;
            };
            if *at_us > before {
                new_calls += 1;
            }
            if !matches!(m.known.get(&v), Some(Known::Gone { .. })) {
                m.known.insert(v, Known::In { at: now });
            }
            m.since = m.since.max(*at_us);
        }
        if new_calls > 0 {
            // Every visitor called was ahead of every visitor still waiting (one FIFO):
            // those this round did not ask about move up as many places.
            let asked: HashSet<&Visitor> = batch.waits.iter().map(|(v, _)| v).collect();
            for (v, k) in m.known.iter_mut() {
                if let Known::Waiting { position, .. } = k {
                    if !asked.contains(v) {
                        *position = position.saturating_sub(new_calls).max(1);
                    }
                }
            }
        }
        m.line_len = reply.line_len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn spec() -> LineSpec {
        LineSpec {
            capacity: 1,
            interval: 0,
            idle: 10 * S,
            claim: 13 * S,
        }
    }

    #[test]
    fn the_mirror_lets_in_only_whom_redis_called() {
        let l = Lines::default();
        let r = b"wr\0r\0";
        let wait = |v: u8, now| l.line(r, &spec(), &[v; 16], LineOp::Wait { arrival: now }, now);
        assert_eq!(
            wait(1, S),
            LineStatus::Waiting {
                position: 1,
                estimated: true
            }
        );
        assert_eq!(
            wait(2, S),
            LineStatus::Waiting {
                position: 1,
                estimated: true
            }
        );
        let b = l.take(S);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].waits.len(), 2);
        // Redis called 1 and puts 2 first in line.
        let positions = b[0]
            .waits
            .iter()
            .map(|(v, _)| if v[0] == 1 { 0 } else { 1 })
            .collect();
        l.apply(
            &b[0],
            LineReply {
                touched: vec![],
                positions,
                calls: vec![(vec![1; 16], 1)],
                line_len: 1,
            },
            S,
        );
        assert_eq!(wait(1, 2 * S), LineStatus::Admitted { place: 0 });
        assert_eq!(
            wait(2, 2 * S),
            LineStatus::Waiting {
                position: 1,
                estimated: false
            }
        );
        // 1's request is a touch for the next round; Redis says its place is gone.
        let b = l.take(3 * S);
        assert_eq!(b[0].touches, vec![[1; 16]]);
        l.apply(
            &b[0],
            LineReply {
                touched: vec![false],
                positions: vec![1],
                calls: vec![],
                line_len: 1,
            },
            3 * S,
        );
        assert_eq!(
            l.line(r, &spec(), &[1; 16], LineOp::Active { place: 0 }, 3 * S),
            LineStatus::Gone
        );
    }

    #[test]
    fn a_failed_round_is_sent_again() {
        let l = Lines::default();
        let r = b"wr\0r\0";
        l.line(r, &spec(), &[1; 16], LineOp::Wait { arrival: 5 }, S);
        l.line(r, &spec(), &[2; 16], LineOp::Active { place: 0 }, S);
        let b = l.take(S);
        l.restore(b);
        let b = l.take(S);
        assert_eq!(b[0].waits, vec![([1; 16], 5)]);
        assert_eq!(b[0].touches, vec![[2; 16]]);
        // Nobody waits any more and nothing happened: the room sits out the rounds.
        assert!(l.take(S + 14 * S).is_empty());
    }
}
