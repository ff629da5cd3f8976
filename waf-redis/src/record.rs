//! Records every node must know at once: the sign-in's codes, lockouts and sign-out
//! revocations ([`ValueKind::Shared`]) and its rate counters ([`ValueKind::Count`]).
//!
//! A rate-limit bucket only needs the fleet's view where the client is active, so a node
//! fetches it for the keys it watches. A sign-in record is different: the code asked for
//! through one node is posted to whichever node the load balancer (or the nginx worker
//! that accepts the connection) picks next, and a session signed out through one node may
//! come back to any other. So every change is *broadcast*: each round, a node sends what it
//! changed and reads every change made by any node since its last read, in one Lua script
//! per namespace ([`RECORD_LUA`]).
//!
//! # Redis keys
//!
//! All on one slot (tag `{ns/rec}`):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{ns/rec}:h` | hash | store key -> `"a b expires"` (decimal; nanoseconds), or `"-"` for a removed record |
//! | `{ns/rec}:z` | sorted set | store key -> the change number of its last change |
//! | `{ns/rec}:t` | sorted set | store key -> when it expires (ns): the script forgets it then |
//! | `{ns/rec}:n` | string | the change counter (incremented on every change) |
//!
//! A node remembers the last change number it read; a round reads the keys changed after
//! it (`ZRANGEBYSCORE`), at most [`crate::DEFAULT_MAX_KEYS_PER_SYNC`] a round. After a
//! reconnection, or when the counter went back (Redis restarted empty), it reads everything
//! again. A removed record stays as `"-"` until the record itself would have expired, so a
//! node that reads late still learns of the removal before its own copy could be used.
//! Codes are in the hash only as keyed 64-bit hashes (of the address and the code, with the
//! policy's gate key), addresses only as keyed hashes in the key: a Redis dump tells
//! neither.
//!
//! # Merging what nodes do at the same time
//!
//! A node sends changes, not values, and the script applies them atomically in arrival
//! order:
//!
//! - a record written or replaced (a code sent, a lockout, a revocation): last writer wins;
//! - wrong attempts on a code: added to the fleet's count *if the fleet's record is still
//!   that code* (same `a`), so two nodes' attempts on one code add up, and attempts on a code
//!   already replaced or consumed are dropped;
//! - a record removed (a right code consumed, a code locked out): removed only if the
//!   fleet's record is still the one removed, so a newer code asked for meanwhile survives;
//! - a count (codes sent per address or IP, wrong codes per IP): what the node added is
//!   added to the fleet's count, in the window of the first node that counted.
//!
//! The node then takes the fleet's value as its own, plus what it changed during the round
//! trip (its changes still pending).
//!
//! # The window, and what it allows
//!
//! A change on one node reaches Redis on that node's next round, and every other node on
//! its next round after that: the mirrors agree within `w ≤ 2 × (interval + round trip)`
//! (≈ 200 ms with the default 100 ms interval on a LAN). Within `w` each node decides on
//! what it knows:
//!
//! - a code sent through one node is unknown to the others for up to `w` (they answer
//!   "expired"; a person reading the mail takes longer);
//! - a revoked session is still let in by the other nodes for up to `w`;
//! - each node refuses once *its* count reaches a limit, its count being the fleet's as of
//!   its last round plus its own since. So a guesser who spreads over `n` nodes (or nginx
//!   workers) faster than `w` gets at most `n × max_attempts` guesses on one code: the limit
//!   is exceeded by at most `(n − 1) × max_attempts`, once, after which the lockout (shared
//!   too) holds everywhere. A guesser slower than one guess per `w` gets `max_attempts`,
//!   exactly as on one node. The same bound holds for `attempts_per_ip`, `codes_per_address`
//!   and `codes_per_ip`. Six digits and 5 attempts on each of 2 nginx workers: a code falls
//!   to a guesser with probability at most 10 / 10⁶.
//! - a right code is consumed where it is accepted, and the removal reaches the others
//!   within `w`: the same right code posted to two nodes within `w` signs in on both. Both
//!   are whoever holds the mail (a guesser who does not know the code gains nothing from
//!   it), so this is accepted rather than making a sign-in wait on Redis.
//!
//! # Redis unreachable
//!
//! Each node goes on with its mirror: codes sent through it are accepted there, its
//! attempts and lockouts hold there, and what it changed stays pending (bounded, like every
//! pending change) and is published when Redis is back. Nodes then read every record again.

use waf_core::policy::{Cell, ValueKind};

/// One round's script. `KEYS`: the hash, the change set, the expiry set, the counter
/// (see the module docs). `ARGV`: now (ns), the last change number read, the most entries
/// to answer, then 5 per change: op (`S` set, `A` attempts, `C` count, `R` remove), key,
/// `x`, `y`, expires. Answers `{counter, {key, change number, value, ...}}`.
pub(crate) const RECORD_LUA: &str = r"
local now = tonumber(ARGV[1])
local since = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, 1000)
for _, f in ipairs(gone) do
  redis.call('HDEL', KEYS[1], f)
  redis.call('ZREM', KEYS[2], f)
  redis.call('ZREM', KEYS[3], f)
end
local function current(f)
  local v = redis.call('HGET', KEYS[1], f)
  if not v then return nil end
  local a, b, e = string.match(v, '^(%d+) (%d+) (%d+)$')
  if not a or tonumber(e) <= now then return nil end
  return {a, b, e}
end
local function put(f, v, e)
  local n = redis.call('INCR', KEYS[4])
  redis.call('HSET', KEYS[1], f, v)
  redis.call('ZADD', KEYS[2], n, f)
  redis.call('ZADD', KEYS[3], e, f)
end
local function add(x, y) return string.format('%.0f', tonumber(x) + tonumber(y)) end
for i = 4, #ARGV - 4, 5 do
  local op, f, x, y, e = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local c = current(f)
  if op == 'S' then
    put(f, x .. ' ' .. y .. ' ' .. e, e)
  elseif op == 'A' then
    if c and c[1] == x then put(f, c[1] .. ' ' .. add(c[2], y) .. ' ' .. c[3], c[3]) end
  elseif op == 'C' then
    if c then put(f, add(c[1], x) .. ' ' .. c[2] .. ' ' .. c[3], c[3])
    else put(f, x .. ' ' .. y .. ' ' .. e, e) end
  elseif op == 'R' then
    if c and c[1] == x then put(f, '-', e) end
  end
end
local top = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
if top < since then since = 0 end
local z = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%.0f', since), '+inf', 'WITHSCORES', 'LIMIT', 0, max)
local out = {}
for i = 1, #z - 1, 2 do
  out[#out + 1] = z[i]
  out[#out + 1] = z[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[1], z[i]) or '-'
end
return {top, out}
";

/// A change to a shared record or count, as sent to Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecOp {
    /// Write (or replace) the record.
    Set(Cell),
    /// `n` more wrong attempts on the record whose `a` is `a`.
    Attempts {
        /// The record's `a` (a code's keyed hash).
        a: u64,
        /// Attempts to add to its `b`.
        n: u64,
    },
    /// `n` more on a count; `cell` is the local count's first cell (its window), used when
    /// the fleet has none.
    Count {
        /// To add.
        n: u64,
        /// Where the window ends, when the fleet has no count yet.
        cell: Cell,
    },
    /// Remove the record whose `a` is `a` (its tombstone lives until `expires`).
    Remove {
        /// The removed record's `a`.
        a: u64,
        /// The removed record's expiry.
        expires: u64,
    },
}

impl RecOp {
    /// What a node must publish when a key of `kind` went from `old` to `new` (`None` for
    /// a read, and for a kind that is not a record).
    pub(crate) fn of(kind: ValueKind, old: Option<Cell>, new: Option<Cell>) -> Option<RecOp> {
        match (kind, old, new) {
            (_, None, None) => None,
            (ValueKind::Count, None, Some(n)) => Some(RecOp::Count { n: n.a, cell: n }),
            (ValueKind::Count, Some(o), Some(n)) if n.a > o.a && n.expires == o.expires => {
                Some(RecOp::Count {
                    n: n.a - o.a,
                    cell: n,
                })
            }
            // Counts end with their window; any other change stays local.
            (ValueKind::Count, _, _) => None,
            (ValueKind::Shared, _, Some(n)) if old == Some(n) => None,
            (ValueKind::Shared, Some(o), Some(n))
                if n.a == o.a && n.expires == o.expires && n.b > o.b =>
            {
                Some(RecOp::Attempts {
                    a: o.a,
                    n: n.b - o.b,
                })
            }
            (ValueKind::Shared, _, Some(n)) => Some(RecOp::Set(n)),
            (ValueKind::Shared, Some(o), None) => Some(RecOp::Remove {
                a: o.a,
                expires: o.expires,
            }),
            _ => None,
        }
    }

    /// `self`, then `later`, as one change.
    pub(crate) fn then(self, later: RecOp) -> RecOp {
        match (self, later) {
            (RecOp::Set(c), RecOp::Attempts { a, n }) if c.a == a => RecOp::Set(Cell {
                b: c.b.saturating_add(n),
                ..c
            }),
            (RecOp::Attempts { a: a0, n: m }, RecOp::Attempts { a, n }) if a0 == a => {
                RecOp::Attempts {
                    a,
                    n: m.saturating_add(n),
                }
            }
            (RecOp::Count { n: m, cell }, RecOp::Count { n, .. }) => RecOp::Count {
                n: m.saturating_add(n),
                cell,
            },
            (_, later) => later,
        }
    }

    /// The local value once the fleet says `fleet` while this change is still to be sent:
    /// `None` to keep the local value (a write or removal of our own wins on its way).
    pub(crate) fn over(self, fleet: Option<Cell>) -> Option<Option<Cell>> {
        match self {
            RecOp::Set(_) | RecOp::Remove { .. } => None,
            RecOp::Attempts { a, n } => Some(match fleet {
                Some(f) if f.a == a => Some(Cell {
                    b: f.b.saturating_add(n),
                    ..f
                }),
                other => other,
            }),
            RecOp::Count { n, .. } => fleet.map(|f| {
                Some(Cell {
                    a: f.a.saturating_add(n),
                    ..f
                })
            }),
        }
    }

    /// The script's five arguments for this change (after the key).
    pub(crate) fn args(&self) -> (&'static str, u64, u64, u64) {
        match *self {
            RecOp::Set(c) => ("S", c.a, c.b, c.expires),
            RecOp::Attempts { a, n } => ("A", a, n, 0),
            RecOp::Count { n, cell } => ("C", n, cell.b, cell.expires),
            RecOp::Remove { a, expires } => ("R", a, 0, expires),
        }
    }
}

/// A value of the hash (`"a b expires"`, or `"-"` for removed).
pub(crate) fn parse(v: &[u8]) -> Option<Cell> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.split(' ').map(|x| x.parse::<u64>().ok());
    Some(Cell {
        a: it.next()??,
        b: it.next()??,
        expires: it.next()??,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(a: u64, b: u64) -> Cell {
        Cell {
            a,
            b,
            expires: 1_000,
        }
    }

    #[test]
    fn changes_of_a_record() {
        let s = ValueKind::Shared;
        assert_eq!(RecOp::of(s, None, None), None);
        assert_eq!(
            RecOp::of(s, Some(cell(7, 0)), Some(cell(7, 0))),
            None,
            "a read"
        );
        assert_eq!(
            RecOp::of(s, None, Some(cell(7, 0))),
            Some(RecOp::Set(cell(7, 0)))
        );
        assert_eq!(
            RecOp::of(s, Some(cell(7, 1)), Some(cell(7, 3))),
            Some(RecOp::Attempts { a: 7, n: 2 })
        );
        assert_eq!(
            RecOp::of(s, Some(cell(7, 1)), Some(cell(8, 0))),
            Some(RecOp::Set(cell(8, 0))),
            "a new code replaces the old"
        );
        assert_eq!(
            RecOp::of(s, Some(cell(7, 1)), None),
            Some(RecOp::Remove {
                a: 7,
                expires: 1_000
            })
        );
        let c = ValueKind::Count;
        assert_eq!(
            RecOp::of(c, None, Some(cell(1, 0))),
            Some(RecOp::Count {
                n: 1,
                cell: cell(1, 0)
            })
        );
        assert_eq!(
            RecOp::of(c, Some(cell(1, 0)), Some(cell(3, 0))),
            Some(RecOp::Count {
                n: 2,
                cell: cell(3, 0)
            })
        );
        assert_eq!(RecOp::of(c, Some(cell(3, 0)), Some(cell(3, 0))), None);
        assert_eq!(RecOp::of(ValueKind::Ban, None, Some(cell(1, 0))), None);
    }

    #[test]
    fn changes_combine_and_pending_ones_stay_on_top_of_the_fleets_value() {
        let set = RecOp::Set(cell(7, 0));
        assert_eq!(
            set.then(RecOp::Attempts { a: 7, n: 2 }),
            RecOp::Set(cell(7, 2))
        );
        assert_eq!(
            RecOp::Attempts { a: 7, n: 1 }.then(RecOp::Attempts { a: 7, n: 2 }),
            RecOp::Attempts { a: 7, n: 3 }
        );
        let rm = RecOp::Remove { a: 7, expires: 9 };
        assert_eq!(set.then(rm), rm);
        assert_eq!(rm.then(set), set);
        // The fleet counted 2 attempts on code 7; 1 more here during the round trip.
        assert_eq!(
            RecOp::Attempts { a: 7, n: 1 }.over(Some(cell(7, 2))),
            Some(Some(cell(7, 3)))
        );
        // The code was consumed (or replaced) elsewhere: the fleet's view wins.
        assert_eq!(RecOp::Attempts { a: 7, n: 1 }.over(None), Some(None));
        assert_eq!(
            RecOp::Attempts { a: 7, n: 1 }.over(Some(cell(8, 0))),
            Some(Some(cell(8, 0)))
        );
        assert_eq!(set.over(None), None, "our own write is on its way");
        let count = RecOp::Count {
            n: 2,
            cell: cell(2, 0),
        };
        assert_eq!(count.over(Some(cell(5, 0))), Some(Some(cell(7, 0))));
        assert_eq!(
            parse(b"1 2 3"),
            Some(Cell {
                a: 1,
                b: 2,
                expires: 3
            })
        );
        assert_eq!(parse(b"-"), None);
    }
}
