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
//! A ticket queue, like a deli counter, kept in the policy's [`Store`] so that it can be
//! shared between nodes (a Redis store) without changing anything here. Keys are
//! `wr\0<room>\0` followed by:
//!
//! - `next`: the next ticket number to hand out (`a`).
//! - `head`: the first ticket not yet called (`a`), and when the last one was (`b`, for
//!   `per_minute`).
//! - `slot` + index: one of `capacity` places; `a` is the ticket holding it, `b` is 0 while
//!   the place is held for a called ticket and 1 once its visitor is in. It expires
//!   `idle_secs` after the visitor's last request (or `3 × refresh_secs + 10` after the
//!   call, if the visitor never comes back for it), which frees it.
//! - `call` + ticket: the slot reserved for a called ticket.
//!
//! A visitor without an admission cookie gets a ticket (signed `__waf_ticket` cookie). On
//! every request (the page reloads itself), if the head of the line is at or before its
//! ticket, a free slot is reserved first and the head then advanced by one, so tickets are
//! called strictly in order and each only when a place is free and the rate allows. A
//! called visitor claims its slot and gets the admission cookie (`__waf_admit`: the ticket
//! and the slot, signed and bound); from then on each of its requests refreshes the slot's
//! expiry (one store update) and, once half of the cookie's life is gone, renews the
//! cookie. A visitor whose slot was freed (idle too long) goes back in line.
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
use crate::policy::state::{Cell, Store};
use crate::policy::{PolicyEffects, Request, NANOS};
use crate::verdict::Intervention;

const TICKET_COOKIE: &str = "__waf_ticket";
const ADMIT_COOKIE: &str = "__waf_admit";
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
    capacity: u32,
    /// Nanoseconds between two calls; 0 = no rate limit.
    interval: u64,
    idle: u64,
    admission_ttl: u64,
    refresh: u32,
    key: Vec<u8>,
}

/// What happened to a visitor in line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In: the ticket and its slot.
    Admitted(u64, u32),
    /// Waiting, at this position (1 = next).
    Waiting(u64),
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
            capacity: c.capacity,
            interval: c.per_minute.map_or(0, |n| 60 * NANOS / u64::from(n)),
            idle: c.idle_secs * NANOS,
            admission_ttl: c.admission_ttl_secs,
            refresh: c.refresh_secs,
            key,
        })
    }

    fn key(&self, what: &[u8], n: Option<u64>) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.key.len() + what.len() + 8);
        k.extend_from_slice(&self.key);
        k.extend_from_slice(what);
        if let Some(n) = n {
            k.extend_from_slice(&n.to_be_bytes());
        }
        k
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
                if let Some((ticket, slot)) = ticket_slot(&d) {
                    if self.touch(store, ticket, slot, now) {
                        if Keys::expiry_of(v) < super::secs(now) + self.admission_ttl / 2 {
                            effects
                                .set_cookies
                                .push(self.admit_cookie(g, req, ticket, slot));
                        }
                        return None;
                    }
                }
            }
        }
        // 2. In line (or new).
        let ticket = cookie(req, TICKET_COOKIE)
            .and_then(|v| g.verify(Purpose::Ticket, req, v).ok())
            .and_then(|d| <[u8; 8]>::try_from(d.as_slice()).ok())
            .map(u64::from_be_bytes);
        let (ticket, new) = match ticket {
            Some(t) => (t, false),
            None => (self.take_ticket(store, now), true),
        };
        match self.advance(store, ticket, now) {
            Some(Place::Admitted(t, slot)) => {
                effects.set_cookies.push(self.admit_cookie(g, req, t, slot));
                // The ticket is spent.
                effects.set_cookies.push(format!(
                    "{TICKET_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
                ));
                None
            }
            Some(Place::Waiting(position)) => {
                let mut a = self.waiting(g, req, position);
                if new {
                    let t = g.sign(Purpose::Ticket, req, TICKET_TTL_SECS, &ticket.to_be_bytes());
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
            None => {
                // The ticket was called but its place was lost (the visitor came back too
                // late): back of the line.
                let t = self.take_ticket(store, now);
                let position = match self.advance(store, t, now) {
                    Some(Place::Waiting(p)) => p,
                    _ => 1,
                };
                let mut a = self.waiting(g, req, position);
                let tt = g.sign(Purpose::Ticket, req, TICKET_TTL_SECS, &t.to_be_bytes());
                a.headers.push((
                    "set-cookie",
                    g.cookie(req, TICKET_COOKIE, &tt, TICKET_TTL_SECS),
                ));
                effects.gate = Some(a);
                Some(intervention(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "waiting room",
                ))
            }
        }
    }

    fn admit_cookie(&self, g: &Gates, req: &Request<'_>, ticket: u64, slot: u32) -> String {
        let mut d = [0u8; 12];
        d[..8].copy_from_slice(&ticket.to_be_bytes());
        d[8..].copy_from_slice(&slot.to_be_bytes());
        let v = g.sign(Purpose::Admission, req, self.admission_ttl, &d);
        g.cookie(req, ADMIT_COOKIE, &v, self.admission_ttl)
    }

    fn waiting(&self, g: &Gates, req: &Request<'_>, position: u64) -> GateAnswer {
        let pos = position.to_string();
        let refresh = self.refresh.to_string();
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

    /// A new ticket number.
    pub(crate) fn take_ticket(&self, store: &dyn Store, now: u64) -> u64 {
        let key = self.key(b"next", None);
        let cell = store.update(&key, now, &mut |c| {
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
    pub(crate) fn advance(&self, store: &dyn Store, ticket: u64, now: u64) -> Option<Place> {
        let head_key = self.key(b"head", None);
        let claim = (3 * u64::from(self.refresh) + 10) * NANOS;
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
            if self.interval > 0 && last != 0 && now < last.saturating_add(self.interval) {
                break;
            }
            // Reserve a free place for ticket `first`, then move the head past it.
            let Some(slot) = self.reserve(store, first, now, now + claim) else {
                break;
            };
            let mut moved = false;
            store.update(&head_key, now, &mut |c| {
                let cur = c.map_or(1, |c| c.a.max(1));
                let last = c.map_or(0, |c| c.b);
                let rate_ok =
                    self.interval == 0 || last == 0 || now >= last.saturating_add(self.interval);
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
                self.release(store, slot, first, now);
                continue;
            }
            store.update(&self.key(b"call", Some(first)), now, &mut |_| {
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
        let call = store.update(&self.key(b"call", Some(ticket)), now, &mut |c| c)?;
        let slot = u32::try_from(call.a).ok()?;
        let ok = self.touch(store, ticket, slot, now);
        store.remove(&self.key(b"call", Some(ticket)));
        ok.then_some(Place::Admitted(ticket, slot))
    }

    /// The first free slot, reserved for `ticket` until `until`.
    fn reserve(&self, store: &dyn Store, ticket: u64, now: u64, until: u64) -> Option<u32> {
        for i in 0..self.capacity {
            let mut taken = false;
            store.update(
                &self.key(b"slot", Some(u64::from(i))),
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

    fn release(&self, store: &dyn Store, slot: u32, ticket: u64, now: u64) {
        store.update(
            &self.key(b"slot", Some(u64::from(slot))),
            now,
            &mut |c| match c {
                Some(c) if c.a == ticket && c.b == 0 => None,
                other => other,
            },
        );
    }

    /// An admitted visitor's request: refresh its place; false when the place is gone.
    pub(crate) fn touch(&self, store: &dyn Store, ticket: u64, slot: u32, now: u64) -> bool {
        if slot >= self.capacity {
            return false;
        }
        let idle = self.idle;
        let mut ok = false;
        store.update(
            &self.key(b"slot", Some(u64::from(slot))),
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
}

fn ticket_slot(d: &[u8]) -> Option<(u64, u32)> {
    let t = u64::from_be_bytes(d.get(..8)?.try_into().ok()?);
    let s = u32::from_be_bytes(d.get(8..12)?.try_into().ok()?);
    (d.len() == 12).then_some((t, s))
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

    #[test]
    fn first_in_first_out_within_capacity() {
        let s = MemoryStore::new(1000);
        let r = room(2, None);
        let t: Vec<u64> = (0..4).map(|_| r.take_ticket(&s, 0)).collect();
        assert_eq!(t, [1, 2, 3, 4]);
        // The fourth asks first: the two places go to tickets 1 and 2, held for them.
        assert_eq!(r.advance(&s, 4, 0), Some(Place::Waiting(2)));
        assert_eq!(r.advance(&s, 3, 0), Some(Place::Waiting(1)));
        assert!(matches!(r.advance(&s, 2, 0), Some(Place::Admitted(2, _))));
        assert!(matches!(r.advance(&s, 1, 0), Some(Place::Admitted(1, _))));
        assert_eq!(r.advance(&s, 3, NANOS), Some(Place::Waiting(1)));
        // Ticket 1's visitor stays active; ticket 2's goes idle: 3 is called, 4 waits.
        for sec in 1..=11 {
            // Slot of ticket 1 (whichever it is): touched every second.
            for slot in 0..2 {
                r.touch(&s, 1, slot, sec * NANOS);
            }
        }
        assert!(matches!(
            r.advance(&s, 3, 11 * NANOS),
            Some(Place::Admitted(3, _))
        ));
        assert_eq!(r.advance(&s, 4, 11 * NANOS), Some(Place::Waiting(1)));
    }

    #[test]
    fn per_minute_spaces_the_calls() {
        let s = MemoryStore::new(1000);
        let r = room(100, Some(2)); // one every 30 s
        let a = r.take_ticket(&s, 0);
        let b = r.take_ticket(&s, 0);
        assert!(matches!(r.advance(&s, a, 0), Some(Place::Admitted(..))));
        assert_eq!(r.advance(&s, b, 10 * NANOS), Some(Place::Waiting(1)));
        assert!(matches!(
            r.advance(&s, b, 31 * NANOS),
            Some(Place::Admitted(..))
        ));
    }

    #[test]
    fn a_called_visitor_who_never_comes_loses_the_place() {
        let s = MemoryStore::new(1000);
        let r = room(1, None);
        let a = r.take_ticket(&s, 0);
        let b = r.take_ticket(&s, 0);
        // b's poll calls a (reserving the only place for it); a never shows up.
        assert_eq!(r.advance(&s, b, 0), Some(Place::Waiting(1)));
        // The reservation runs out after 3 × refresh + 10 s; then b is called.
        assert_eq!(r.advance(&s, b, 12 * NANOS), Some(Place::Waiting(1)));
        assert!(matches!(
            r.advance(&s, b, 14 * NANOS),
            Some(Place::Admitted(..))
        ));
        // a comes back too late.
        assert_eq!(r.advance(&s, a, 15 * NANOS), None);
    }
}
