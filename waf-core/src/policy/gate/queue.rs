//! Waiting rooms: at most `capacity` active visitors on a host or path, at most
//! `per_minute` new ones let in per minute, the rest wait in line in arrival order.
//!
//! ```toml
//! [[gates.waiting_room]]
//! name = "sale"
//! match = 'http.request.uri.path starts_with "/sale"'   # default: every request
//! capacity = 500              # active visitors
//! per_minute = 100            # new visitors let in per minute (default: no limit)
//! idle_secs = 120             # an active visitor silent this long frees its place
//! admission_ttl_secs = 1800   # the admission cookie's life, renewed while active
//! refresh_secs = 5            # the waiting page reloads itself this often
//! skip = 'ip.src in $office'  # allow-listed clients never wait
//! ```
//!
//! # Algorithm
//!
//! A visitor without a ticket gets one: a signed `__waf_ticket` cookie holding a fresh
//! visitor id and the time it arrived. Every request of a visitor in line (the page reloads
//! itself) asks the policy's store, [`Store::line`], whether it is its turn; when it is,
//! the visitor gets the admission cookie (`__waf_admit`: its id and the place the store
//! gave it, signed and bound), and from then on each of its requests keeps the place warm
//! (`LineOp::Active`) and, once half of the cookie's life is gone, renews the cookie. A
//! visitor whose place was freed (idle too long) goes back in line.
//!
//! The line itself belongs to the store, so that a fleet can keep one line for every
//! node. The in-memory store (the provided body of [`Store::line`], [`local_line`] here)
//! keeps it in its cells, like a deli counter. Keys are `wr\0<room>\0` followed by:
//!
//! - `next`: the next ticket number to hand out (`a`).
//! - `head`: the first ticket not yet called (`a`), and when the last one was (`b`, for
//!   `per_minute`).
//! - `slot` + index: one of `capacity` places; `a` is the ticket holding it, `b` is 0 while
//!   the place is held for a called ticket and 1 once its visitor is in. It expires
//!   `idle_secs` after the visitor's last request (or `3 × refresh_secs + 10` after the
//!   call, if the visitor never comes back for it), which frees it.
//! - `call` + ticket: the slot reserved for a called ticket.
//! - `visitor` + id: the ticket number of a visitor in line.
//!
//! On each ask, if the head of the line is at or before the visitor's ticket, a free slot
//! is reserved first and the head then advanced by one, so tickets are called strictly in
//! order and each only when a place is free and the rate allows. An admitted request costs
//! one update (its slot), as the place (ticket and slot) comes back from the cookie.
//!
//! `waf-redis`'s fleet store keeps the same line in Redis instead (a sorted set by arrival
//! time, the places in another, one Lua script per room and round), answering every
//! request from a local mirror.
//!
//! Finding a free slot walks the `capacity` slots, on the waiting path only (a page reload
//! every `refresh_secs` per waiting visitor); capacity is capped at
//! [`DEFAULT_MAX_QUEUE_CAPACITY`](crate::limits::DEFAULT_MAX_QUEUE_CAPACITY).

use http::StatusCode;
use serde::Deserialize;

use super::token::{Keys, Purpose};
use super::{cookie, intervention, GateAnswer, Gates};
use crate::host::pages::PageKind;
use crate::limits::DEFAULT_MAX_QUEUE_CAPACITY;
use crate::policy::error::{PolicyError, PolicyErrorKind};
use crate::policy::expr::fields::Context;
use crate::policy::expr::Expr;
use crate::policy::state::{Cell, LineOp, LineSpec, LineStatus, Store};
use crate::policy::{PolicyEffects, Request, NANOS};
use crate::verdict::Intervention;

const TICKET_COOKIE: &str = "__waf_ticket";
pub(crate) const ADMIT_COOKIE: &str = "__waf_admit";
/// A ticket's life: a visitor who leaves the line for longer than this starts again.
const TICKET_TTL_SECS: u64 = 6 * 3600;

/// `[[gates.waiting_room]]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WaitingRoomConfig {
    /// The room's name (part of its state keys and cookies' meaning).
    pub name: String,
    /// Which requests the room guards (default: all).
    #[serde(default, rename = "match")]
    pub when: Option<String>,
    /// Active visitors at most (1..=100000).
    pub capacity: u32,
    /// New visitors let in per minute (default: no limit).
    #[serde(default)]
    pub per_minute: Option<u32>,
    /// Seconds without a request after which an active visitor's place is freed
    /// (default 120).
    #[serde(default = "d_idle")]
    pub idle_secs: u64,
    /// Life of the admission cookie in seconds, renewed while the visitor is active
    /// (default 1800).
    #[serde(default = "d_admission")]
    pub admission_ttl_secs: u64,
    /// How often the waiting page reloads itself, in seconds (default 5).
    #[serde(default = "d_refresh")]
    pub refresh_secs: u32,
    /// Clients for which this holds never wait (an allow-list).
    #[serde(default)]
    pub skip: Option<String>,
}

fn d_idle() -> u64 {
    120
}
fn d_admission() -> u64 {
    1800
}
fn d_refresh() -> u32 {
    5
}

/// A compiled waiting room.
#[derive(Debug)]
pub(crate) struct Room {
    pub(crate) name: String,
    pub(crate) when: Option<Expr>,
    skip: Option<Expr>,
    spec: LineSpec,
    admission_ttl: u64,
    refresh: u32,
    key: Vec<u8>,
}

impl Room {
    pub(crate) fn compile(
        c: &WaitingRoomConfig,
        compile_expr: &mut dyn FnMut(&str, &str) -> Result<Expr, PolicyError>,
    ) -> Result<Room, PolicyError> {
        let bad = |m: String| {
            Err(PolicyError::new(
                PolicyErrorKind::Invalid,
                format!("waiting room {:?}: {m}", c.name),
            ))
        };
        if c.name.is_empty() || c.name.contains('\0') {
            return bad("needs a name".into());
        }
        if c.capacity == 0 || c.capacity > DEFAULT_MAX_QUEUE_CAPACITY {
            return bad(format!("capacity must be 1..={DEFAULT_MAX_QUEUE_CAPACITY}"));
        }
        if c.per_minute == Some(0) {
            return bad("per_minute must be > 0 (leave it out for no limit)".into());
        }
        if c.idle_secs == 0 || c.admission_ttl_secs == 0 || c.refresh_secs == 0 {
            return bad("idle_secs, admission_ttl_secs and refresh_secs must be > 0".into());
        }
        let when = c
            .when
            .as_deref()
            .map(|t| compile_expr(&format!("waiting room {:?} match", c.name), t))
            .transpose()?;
        let skip = c
            .skip
            .as_deref()
            .map(|t| compile_expr(&format!("waiting room {:?} skip", c.name), t))
            .transpose()?;
        let mut key = b"wr\0".to_vec();
        key.extend_from_slice(c.name.as_bytes());
        key.push(0);
        Ok(Room {
            name: c.name.clone(),
            when,
            skip,
            spec: LineSpec {
                capacity: c.capacity,
                interval: c.per_minute.map_or(0, |n| 60 * NANOS / u64::from(n)),
                idle: c.idle_secs.saturating_mul(NANOS),
                claim: (3 * u64::from(c.refresh_secs) + 10) * NANOS,
            },
            admission_ttl: c.admission_ttl_secs,
            refresh: c.refresh_secs,
            key,
        })
    }

    /// The room's step for a request it guards; `None` lets it through.
    pub(crate) fn check(
        &self,
        g: &Gates,
        req: &Request<'_>,
        cx: &mut Context<'_>,
        store: &dyn Store,
        effects: &mut PolicyEffects,
    ) -> Option<Intervention> {
        if self.skip.as_ref().is_some_and(|e| e.eval(cx)) {
            return None;
        }
        let now = req.now;
        // 1. Admitted already: keep the place warm.
        if let Some(v) = cookie(req, ADMIT_COOKIE) {
            if let Ok(d) = g.verify(Purpose::Admission, req, v) {
                if let Some((visitor, place)) = visitor_place(&d) {
                    let op = LineOp::Active { place };
                    if let LineStatus::Admitted { place } =
                        store.line(&self.key, &self.spec, &visitor, op, now)
                    {
                        if Keys::expiry_of(v) < super::secs(now) + self.admission_ttl / 2 {
                            effects
                                .set_cookies
                                .push(self.admit_cookie(g, req, &visitor, place));
                        }
                        effects.verified(super::VerifiedCookie::Admission);
                        return None;
                    }
                    // The place is gone (idle too long): back of the line, as a new visitor.
                }
            }
        }
        // 2. In line (or new): the ticket is the visitor's id and when it first came.
        let ticket = cookie(req, TICKET_COOKIE)
            .and_then(|v| g.verify(Purpose::Ticket, req, v).ok())
            .and_then(|d| visitor_arrival(&d));
        let (visitor, arrival, new) = match ticket {
            Some((v, a)) => (v, a, false),
            None => {
                let mut v = [0u8; 16];
                v.copy_from_slice(&g.fresh(b"visitor", req)[..16]);
                (v, now, true)
            }
        };
        match store.line(
            &self.key,
            &self.spec,
            &visitor,
            LineOp::Wait { arrival },
            now,
        ) {
            LineStatus::Admitted { place } => {
                effects
                    .set_cookies
                    .push(self.admit_cookie(g, req, &visitor, place));
                if !new {
                    // The ticket is spent.
                    effects.set_cookies.push(format!(
                        "{TICKET_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
                    ));
                }
                None
            }
            LineStatus::Waiting {
                position,
                estimated,
            } => {
                let refresh = if estimated { 1 } else { self.refresh };
                let mut a = self.waiting(g, req, position, refresh);
                if new {
                    let mut d = [0u8; 24];
                    d[..16].copy_from_slice(&visitor);
                    d[16..].copy_from_slice(&arrival.to_be_bytes());
                    let t = g.sign(Purpose::Ticket, req, TICKET_TTL_SECS, &d);
                    a.headers.push((
                        "set-cookie",
                        g.cookie(req, TICKET_COOKIE, &t, TICKET_TTL_SECS),
                    ));
                }
                effects.gate = Some(a);
                Some(intervention(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "waiting room",
                ))
            }
            // Only an admitted visitor's step answers `Gone`; a store that says it to a
            // waiting one gets the visitor's page reloaded, which asks again.
            _ => {
                effects.gate = Some(self.waiting(g, req, 1, 1));
                Some(intervention(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "waiting room",
                ))
            }
        }
    }

    fn admit_cookie(&self, g: &Gates, req: &Request<'_>, visitor: &[u8; 16], place: u64) -> String {
        let mut d = [0u8; 24];
        d[..16].copy_from_slice(visitor);
        d[16..].copy_from_slice(&place.to_be_bytes());
        let v = g.sign(Purpose::Admission, req, self.admission_ttl, &d);
        g.cookie(req, ADMIT_COOKIE, &v, self.admission_ttl)
    }

    fn waiting(&self, g: &Gates, req: &Request<'_>, position: u64, refresh: u32) -> GateAnswer {
        let pos = position.to_string();
        let refresh = refresh.to_string();
        let mut a = g.answer(
            req,
            StatusCode::SERVICE_UNAVAILABLE,
            PageKind::Queue,
            vec![("position", pos.clone()), ("refresh_secs", refresh.clone())],
            &[
                ("error", "queued"),
                ("room", &self.name),
                ("position", &pos),
                ("retry_after", &refresh),
            ],
        );
        a.headers.push(("retry-after", refresh));
        a
    }
}

/// An admission cookie's data: the visitor and its place.
fn visitor_place(d: &[u8]) -> Option<([u8; 16], u64)> {
    let v = <[u8; 16]>::try_from(d.get(..16)?).ok()?;
    let p = u64::from_be_bytes(d.get(16..24)?.try_into().ok()?);
    (d.len() == 24).then_some((v, p))
}

/// A ticket's data: the visitor and when it arrived.
fn visitor_arrival(d: &[u8]) -> Option<([u8; 16], u64)> {
    visitor_place(d)
}

// ---- The line kept in a store's cells (the in-memory store; `Store::line`'s body) ----

/// Bits of a place (`LineStatus::Admitted`) that hold the slot index; the ticket is above.
const SLOT_BITS: u32 = 20;
const _: () = assert!(DEFAULT_MAX_QUEUE_CAPACITY < 1 << SLOT_BITS);

fn key(room: &[u8], what: &[u8], n: Option<u64>) -> Vec<u8> {
    let mut k = Vec::with_capacity(room.len() + what.len() + 16);
    k.extend_from_slice(room);
    k.extend_from_slice(what);
    if let Some(n) = n {
        k.extend_from_slice(&n.to_be_bytes());
    }
    k
}

/// [`Store::line`] on `store`'s own cells. The visitor's ticket number is kept under
/// `visitor` + id; see the module docs for the rest.
pub(crate) fn local_line<S: Store + ?Sized>(
    store: &S,
    room: &[u8],
    spec: &LineSpec,
    visitor: &[u8; 16],
    op: LineOp,
    now: u64,
) -> LineStatus {
    if let LineOp::Active { place } = op {
        let (ticket, slot) = (place >> SLOT_BITS, (place & ((1 << SLOT_BITS) - 1)) as u32);
        return if touch(store, room, spec, ticket, slot, now) {
            LineStatus::Admitted { place }
        } else {
            LineStatus::Gone
        };
    }
    let mut vk = key(room, b"visitor", None);
    vk.extend_from_slice(visitor);
    let ticket = match store.update(&vk, now, &mut |c| c) {
        Some(c) => c.a,
        None => new_ticket(store, room, &vk, now),
    };
    let place = match advance(store, room, spec, ticket, now) {
        Some(p) => p,
        // Called, but the place was lost (the visitor came back too late): back of the
        // line.
        None => {
            let t = new_ticket(store, room, &vk, now);
            advance(store, room, spec, t, now).unwrap_or(Place::Waiting(1))
        }
    };
    match place {
        Place::Waiting(position) => LineStatus::Waiting {
            position,
            estimated: false,
        },
        Place::Admitted(ticket, slot) => {
            store.remove(&vk);
            LineStatus::Admitted {
                place: (ticket << SLOT_BITS) | u64::from(slot),
            }
        }
    }
}

/// What happened to a visitor in line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In: the ticket and its slot.
    Admitted(u64, u32),
    /// Waiting, at this position (1 = next).
    Waiting(u64),
}

/// A new ticket number for the visitor at `vk`.
fn new_ticket<S: Store + ?Sized>(store: &S, room: &[u8], vk: &[u8], now: u64) -> u64 {
    let t = take_ticket(store, room, now);
    store.update(vk, now, &mut |_| {
        Some(Cell {
            a: t,
            b: 0,
            expires: now.saturating_add(TICKET_TTL_SECS * NANOS),
        })
    });
    t
}

/// A new ticket number.
pub(crate) fn take_ticket<S: Store + ?Sized>(store: &S, room: &[u8], now: u64) -> u64 {
    let cell = store.update(&key(room, b"next", None), now, &mut |c| {
        let next = c.map_or(1, |c| c.a + 1);
        Some(Cell {
            a: next,
            b: 0,
            expires: u64::MAX,
        })
    });
    cell.map_or(1, |c| c.a)
}

/// Calls tickets up to `ticket` while places are free and the rate allows, then says
/// where `ticket` stands; `None` when it was called but its place is gone.
pub(crate) fn advance<S: Store + ?Sized>(
    store: &S,
    room: &[u8],
    spec: &LineSpec,
    ticket: u64,
    now: u64,
) -> Option<Place> {
    let head_key = key(room, b"head", None);
    let claim = spec.claim;
    let interval = spec.interval;
    loop {
        let head = store.update(&head_key, now, &mut |c| c).unwrap_or(Cell {
            a: 1,
            b: 0,
            expires: u64::MAX,
        });
        let (first, last) = (head.a.max(1), head.b);
        if ticket < first {
            break;
        }
        if interval > 0 && last != 0 && now < last.saturating_add(interval) {
            break;
        }
        // Reserve a free place for ticket `first`, then move the head past it.
        let Some(slot) = reserve(store, room, spec, first, now, now + claim) else {
            break;
        };
        let mut moved = false;
        store.update(&head_key, now, &mut |c| {
            let cur = c.map_or(1, |c| c.a.max(1));
            let last = c.map_or(0, |c| c.b);
            let rate_ok = interval == 0 || last == 0 || now >= last.saturating_add(interval);
            moved = cur == first && rate_ok;
            Some(Cell {
                a: if moved { cur + 1 } else { cur },
                // 0 means "never called", so a call at time 0 is written as 1.
                b: if moved { now.max(1) } else { last },
                expires: u64::MAX,
            })
        });
        if !moved {
            // Someone else called `first` meanwhile: give the place back, look again.
            release(store, room, slot, first, now);
            continue;
        }
        store.update(&key(room, b"call", Some(first)), now, &mut |_| {
            Some(Cell {
                a: u64::from(slot),
                b: 0,
                expires: now + claim,
            })
        });
    }
    let first = store
        .update(&head_key, now, &mut |c| c)
        .map_or(1, |c| c.a.max(1));
    if ticket >= first {
        return Some(Place::Waiting(ticket - first + 1));
    }
    // Called: claim the place.
    let call_key = key(room, b"call", Some(ticket));
    let call = store.update(&call_key, now, &mut |c| c)?;
    let slot = u32::try_from(call.a).ok()?;
    let ok = touch(store, room, spec, ticket, slot, now);
    store.remove(&call_key);
    ok.then_some(Place::Admitted(ticket, slot))
}

/// The first free slot, reserved for `ticket` until `until`.
fn reserve<S: Store + ?Sized>(
    store: &S,
    room: &[u8],
    spec: &LineSpec,
    ticket: u64,
    now: u64,
    until: u64,
) -> Option<u32> {
    for i in 0..spec.capacity {
        let mut taken = false;
        store.update(
            &key(room, b"slot", Some(u64::from(i))),
            now,
            &mut |c| match c {
                Some(c) => Some(c),
                None => {
                    taken = true;
                    Some(Cell {
                        a: ticket,
                        b: 0,
                        expires: until,
                    })
                }
            },
        );
        if taken {
            return Some(i);
        }
    }
    None
}

fn release<S: Store + ?Sized>(store: &S, room: &[u8], slot: u32, ticket: u64, now: u64) {
    store.update(
        &key(room, b"slot", Some(u64::from(slot))),
        now,
        &mut |c| match c {
            Some(c) if c.a == ticket && c.b == 0 => None,
            other => other,
        },
    );
}

/// An admitted visitor's request: refresh its place; false when the place is gone.
pub(crate) fn touch<S: Store + ?Sized>(
    store: &S,
    room: &[u8],
    spec: &LineSpec,
    ticket: u64,
    slot: u32,
    now: u64,
) -> bool {
    if slot >= spec.capacity {
        return false;
    }
    let idle = spec.idle;
    let mut ok = false;
    store.update(
        &key(room, b"slot", Some(u64::from(slot))),
        now,
        &mut |c| match c {
            Some(c) if c.a == ticket => {
                ok = true;
                Some(Cell {
                    a: ticket,
                    b: 1,
                    expires: now + idle,
                })
            }
            other => other,
        },
    );
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::MemoryStore;

    fn room(capacity: u32, per_minute: Option<u32>) -> Room {
        let c = WaitingRoomConfig {
            name: "r".into(),
            when: None,
            capacity,
            per_minute,
            idle_secs: 10,
            admission_ttl_secs: 100,
            refresh_secs: 1,
            skip: None,
        };
        Room::compile(&c, &mut |_, _| unreachable!()).unwrap()
    }

    fn take(s: &MemoryStore, r: &Room) -> u64 {
        take_ticket(s, &r.key, 0)
    }

    fn adv(s: &MemoryStore, r: &Room, t: u64, now: u64) -> Option<Place> {
        advance(s, &r.key, &r.spec, t, now)
    }

    #[test]
    fn first_in_first_out_within_capacity() {
        let s = MemoryStore::new(1000);
        let r = room(2, None);
        let t: Vec<u64> = (0..4).map(|_| take(&s, &r)).collect();
        assert_eq!(t, [1, 2, 3, 4]);
        // The fourth asks first: the two places go to tickets 1 and 2, held for them.
        assert_eq!(adv(&s, &r, 4, 0), Some(Place::Waiting(2)));
        assert_eq!(adv(&s, &r, 3, 0), Some(Place::Waiting(1)));
        assert!(matches!(adv(&s, &r, 2, 0), Some(Place::Admitted(2, _))));
        assert!(matches!(adv(&s, &r, 1, 0), Some(Place::Admitted(1, _))));
        assert_eq!(adv(&s, &r, 3, NANOS), Some(Place::Waiting(1)));
        // Ticket 1's visitor stays active; ticket 2's goes idle: 3 is called, 4 waits.
        for sec in 1..=11 {
            // Slot of ticket 1 (whichever it is): touched every second.
            for slot in 0..2 {
                touch(&s, &r.key, &r.spec, 1, slot, sec * NANOS);
            }
        }
        assert!(matches!(
            adv(&s, &r, 3, 11 * NANOS),
            Some(Place::Admitted(3, _))
        ));
        assert_eq!(adv(&s, &r, 4, 11 * NANOS), Some(Place::Waiting(1)));
    }

    #[test]
    fn per_minute_spaces_the_calls() {
        let s = MemoryStore::new(1000);
        let r = room(100, Some(2)); // one every 30 s
        let a = take(&s, &r);
        let b = take(&s, &r);
        assert!(matches!(adv(&s, &r, a, 0), Some(Place::Admitted(..))));
        assert_eq!(adv(&s, &r, b, 10 * NANOS), Some(Place::Waiting(1)));
        assert!(matches!(
            adv(&s, &r, b, 31 * NANOS),
            Some(Place::Admitted(..))
        ));
    }

    #[test]
    fn a_called_visitor_who_never_comes_loses_the_place() {
        let s = MemoryStore::new(1000);
        let r = room(1, None);
        let a = take(&s, &r);
        let b = take(&s, &r);
        // b's poll calls a (reserving the only place for it); a never shows up.
        assert_eq!(adv(&s, &r, b, 0), Some(Place::Waiting(1)));
        // The reservation runs out after 3 × refresh + 10 s; then b is called.
        assert_eq!(adv(&s, &r, b, 12 * NANOS), Some(Place::Waiting(1)));
        assert!(matches!(
            adv(&s, &r, b, 14 * NANOS),
            Some(Place::Admitted(..))
        ));
        // a comes back too late.
        assert_eq!(adv(&s, &r, a, 15 * NANOS), None);
    }

    /// `Store::line` as the room uses it: visitors by id, the place given back.
    #[test]
    fn the_line_by_visitor_id() {
        let s = MemoryStore::new(1000);
        let r = room(1, None);
        let wait = |v: u8, now: u64| {
            s.line(
                &r.key,
                &r.spec,
                &[v; 16],
                LineOp::Wait { arrival: now },
                now,
            )
        };
        let LineStatus::Admitted { place } = wait(1, 0) else {
            panic!("the first is let in")
        };
        assert_eq!(
            wait(2, 0),
            LineStatus::Waiting {
                position: 1,
                estimated: false
            }
        );
        assert_eq!(
            wait(3, 0),
            LineStatus::Waiting {
                position: 2,
                estimated: false
            }
        );
        // Asking again keeps the place in line.
        assert_eq!(
            wait(2, NANOS),
            LineStatus::Waiting {
                position: 1,
                estimated: false
            }
        );
        let active = |v: u8, place: u64, now: u64| {
            s.line(&r.key, &r.spec, &[v; 16], LineOp::Active { place }, now)
        };
        assert_eq!(active(1, place, 5 * NANOS), LineStatus::Admitted { place });
        // A forged place (another slot, another ticket) is not in.
        assert_eq!(active(1, place + 1, 5 * NANOS), LineStatus::Gone);
        assert_eq!(active(1, place ^ (1 << 40), 5 * NANOS), LineStatus::Gone);
        // 1 goes idle (10 s): 2 is let in, 3 is next.
        assert!(matches!(wait(2, 16 * NANOS), LineStatus::Admitted { .. }));
        assert_eq!(
            wait(3, 16 * NANOS),
            LineStatus::Waiting {
                position: 1,
                estimated: false
            }
        );
        assert_eq!(active(1, place, 16 * NANOS), LineStatus::Gone);
    }
}
