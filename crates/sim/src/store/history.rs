//! The bounded event history of a store. resourceVersions are consecutive (every write is
//! one event), so the event after `rv` sits at a computed index: no search, no per-watch
//! bookkeeping. Events older than the window are gone, and a watch asking for them gets
//! `410 Expired`, exactly as an API server whose watch cache has moved on. `compact` drops
//! every event up to a version, as etcd's compaction does: a watch from before it is a 410
//! even when no event at all was kept (as on a real apiserver serving watches from etcd).

use std::collections::VecDeque;
use std::sync::Arc;

use super::{EventType, Stored};
use crate::api::resources::Resource;

/// One change: its type, the resource and the object version written.
#[derive(Clone, Debug)]
pub struct HistEvent {
    pub resource: Resource,
    pub ty: EventType,
    pub object: Arc<Stored>,
}

/// The requested version is older than the history kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expired {
    /// The oldest resourceVersion a watch can still start from.
    pub oldest: u64,
}

#[derive(Debug)]
pub(super) struct History {
    events: VecDeque<HistEvent>,
    window: usize,
    /// Versions up to here were compacted away (0: never compacted).
    compacted: u64,
}

impl History {
    pub(super) fn new(window: usize) -> Self {
        History {
            events: VecDeque::new(),
            window: window.max(1),
            compacted: 0,
        }
    }

    /// Forgets the events up to and including `rv`.
    pub(super) fn compact(&mut self, rv: u64) {
        self.compacted = self.compacted.max(rv);
        while self.events.front().is_some_and(|e| e.object.rv <= rv) {
            self.events.pop_front();
        }
    }

    pub(super) fn push(&mut self, event: HistEvent) {
        if self.events.len() == self.window {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    pub(super) fn after(&self, rv: u64) -> Result<impl Iterator<Item = &HistEvent>, Expired> {
        if rv < self.compacted {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let Some(first) = self.events.front().map(|e| e.object.rv) else {
            return Ok(self.events.range(0..0));
        };
        // Any u64 can come from a client: no arithmetic here may overflow.
        let next = rv.saturating_add(1);
        if next < first {
            return Err(Expired { oldest: first - 1 });
        }
        let start = usize::try_from(next - first)
            .unwrap_or(usize::MAX)
            .min(self.events.len());
        Ok(self.events.range(start..))
    }
}
