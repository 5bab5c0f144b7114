//! The connections one port holds, and which one to close when a new one comes and every
//! slot is taken. A connection that has not yet shown it is a client (no request of it has
//! passed authentication: it is in its TLS handshake, sending its head, being reviewed, or
//! was refused) is a stranger; strangers go first, the one connected longest ago first, then
//! connections idle between requests, the one idle longest first. A connection whose
//! authenticated request is being answered is never closed. So slow or silent clients, however
//! many, cannot keep a new one out: they only take turns being closed, and the newcomer is the
//! last of them to go. Nothing is keyed by address: clients behind one router are all served.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// Where a connection stands; closed in this order (lowest first), `Busy` never.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// No request of it has passed authentication yet.
    Stranger,
    /// Served before, now waiting for its next request.
    Idle,
    /// A request that passed authentication is being answered.
    Busy,
}

struct Held {
    stage: Stage,
    /// Since when it has been in its stage; a stranger's is when it connected.
    since: Instant,
    close: CancellationToken,
}

#[derive(Default)]
struct Table {
    next: u64,
    held: HashMap<u64, Held>,
}

/// The slots of one port.
pub(super) struct Slots {
    cap: usize,
    table: Mutex<Table>,
}

/// What taking a slot did.
pub(super) enum Taken {
    /// A free slot.
    Free(Slot),
    /// Another connection was closed for it.
    Evicted(Slot),
    /// Every slot answers an authenticated request: the new connection is refused.
    Full,
}

impl Slots {
    pub(super) fn new(cap: usize) -> Arc<Slots> {
        Arc::new(Slots {
            cap,
            table: Mutex::new(Table::default()),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection, which `close` ends if it is evicted in turn.
    pub(super) fn take(self: &Arc<Self>, close: CancellationToken) -> Taken {
        self.take_at(close, Instant::now())
    }

    fn take_at(self: &Arc<Self>, close: CancellationToken, now: Instant) -> Taken {
        let mut t = self.table();
        let evicted = t.held.len() >= self.cap;
        if evicted {
            let Some(victim) = victim(&t.held) else {
                return Taken::Full;
            };
            if let Some(gone) = t.held.remove(&victim) {
                gone.close.cancel();
            }
        }
        let id = t.next;
        t.next += 1;
        let stage = Stage::Stranger;
        t.held.insert(
            id,
            Held {
                stage,
                since: now,
                close,
            },
        );
        let slot = Slot(Mark {
            slots: self.clone(),
            id,
        });
        if evicted {
            Taken::Evicted(slot)
        } else {
            Taken::Free(slot)
        }
    }

    fn set(&self, id: u64, change: impl FnOnce(Stage) -> Stage, now: Instant) {
        let mut t = self.table();
        let Some(h) = t.held.get_mut(&id) else {
            return;
        };
        let stage = change(h.stage);
        if stage != h.stage {
            h.stage = stage;
            h.since = now;
        }
    }

    #[cfg(test)]
    fn open(&self) -> usize {
        self.table().held.len()
    }
}

/// The connection to close: a stranger before an idle one, the oldest of them first.
fn victim(held: &HashMap<u64, Held>) -> Option<u64> {
    held.iter()
        .filter(|(_, h)| h.stage != Stage::Busy)
        .min_by_key(|(id, h)| (h.stage, h.since, **id))
        .map(|(id, _)| *id)
}

/// A connection's slot, freed when dropped.
pub(super) struct Slot(Mark);

impl Slot {
    pub(super) fn mark(&self) -> Mark {
        self.0.clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.slots.table().held.remove(&self.0.id);
    }
}

/// Tells the port how its connection stands; handlers find it in the request's extensions.
#[derive(Clone)]
pub(super) struct Mark {
    slots: Arc<Slots>,
    id: u64,
}

impl Mark {
    /// A request's head came. A connection served before is a client: its request is
    /// answered whole. A stranger stays one, as old as it was, until authentication passes.
    pub(super) fn request(&self) {
        let busy = |s| if s == Stage::Idle { Stage::Busy } else { s };
        self.slots.set(self.id, busy, Instant::now());
    }

    /// The request passed authentication (or needs none).
    pub(super) fn proven(&self) {
        self.slots.set(self.id, |_| Stage::Busy, Instant::now());
    }

    /// The request was answered.
    pub(super) fn answered(&self) {
        let idle = |s| if s == Stage::Busy { Stage::Idle } else { s };
        self.slots.set(self.id, idle, Instant::now());
    }
}

/// Marks the request's connection proven, if it came through a port that keeps slots.
pub(super) fn proven(extensions: &http::Extensions) {
    if let Some(mark) = extensions.get::<Mark>() {
        mark.proven();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn take(slots: &Arc<Slots>, at: Instant) -> (Option<Slot>, CancellationToken) {
        let close = CancellationToken::new();
        let slot = match slots.take_at(close.clone(), at) {
            Taken::Free(s) | Taken::Evicted(s) => Some(s),
            Taken::Full => None,
        };
        (slot, close)
    }

    #[test]
    fn the_oldest_stranger_goes_first_and_a_busy_client_never() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let slots = Slots::new(3);
        let (client, client_close) = take(&slots, at(0));
        let client = client.unwrap();
        client.mark().request();
        client.mark().proven();
        let (old, old_close) = take(&slots, at(1));
        let (young, young_close) = take(&slots, at(2));
        assert_eq!(slots.open(), 3);

        // Full: the stranger that came first is closed, not the newcomer nor the client.
        let (new, new_close) = take(&slots, at(3));
        assert!(new.is_some());
        assert!(old_close.is_cancelled());
        assert!(!young_close.is_cancelled() && !client_close.is_cancelled());
        assert_eq!(slots.open(), 3);
        drop(old);
        assert_eq!(slots.open(), 3, "an evicted slot is freed once");

        // A stranger refused again and again stays as old as it was.
        young.as_ref().unwrap().mark().request();
        young.as_ref().unwrap().mark().answered();
        let (_newer, _) = take(&slots, at(4));
        assert!(young_close.is_cancelled());
        assert!(!new_close.is_cancelled() && !client_close.is_cancelled());
    }

    #[test]
    fn idle_clients_go_after_strangers_and_all_busy_is_full() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let slots = Slots::new(2);
        let (a, a_close) = take(&slots, at(0));
        let (b, b_close) = take(&slots, at(1));
        let (a, b) = (a.unwrap(), b.unwrap());
        a.mark().proven();
        a.mark().answered();
        // `a` idle, `b` a stranger: `b` goes though it came later.
        let (c, c_close) = take(&slots, at(2));
        assert!(b_close.is_cancelled() && !a_close.is_cancelled());
        drop(b);
        // Both busy: a newcomer is refused and nobody is closed.
        a.mark().request();
        let c = c.unwrap();
        c.mark().proven();
        let (refused, _) = take(&slots, at(3));
        assert!(refused.is_none());
        assert!(!a_close.is_cancelled() && !c_close.is_cancelled());
        // Answered, the one idle longest goes.
        slots.set(c.0.id, |_| Stage::Idle, at(5));
        slots.set(a.0.id, |_| Stage::Idle, at(6));
        let (_d, _) = take(&slots, at(4));
        assert!(c_close.is_cancelled() && !a_close.is_cancelled());
    }

    #[test]
    fn a_dropped_slot_is_free_again() {
        let slots = Slots::new(1);
        let (a, _) = take(&slots, Instant::now());
        drop(a);
        assert_eq!(slots.open(), 0);
        let (b, b_close) = take(&slots, Instant::now());
        assert!(b.is_some() && !b_close.is_cancelled());
    }
}
