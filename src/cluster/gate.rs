//! `WriteGate`: whether this hub replica may write to its clusters.
//!
//! With leader election on, the gate is open only while the replica holds the lease; the
//! elector closes it the moment the lease is lost, and every write checks it first, so a
//! replica that lost the lease stops writing at once (reads and planning go on, which keeps
//! its caches warm for a fast take-over). Without leader election the gate is always open.

use tokio::sync::watch;

#[derive(Clone, Debug)]
pub struct WriteGate(watch::Receiver<bool>);

/// A gate and the handle that opens and closes it (held by the leader elector).
pub fn channel(open: bool) -> (watch::Sender<bool>, WriteGate) {
    let (tx, rx) = watch::channel(open);
    (tx, WriteGate(rx))
}

impl WriteGate {
    /// A gate that is always open: no leader election.
    pub fn always_open() -> Self {
        // The sender is dropped: the value stays `true` for good.
        channel(true).1
    }

    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the gate is open (returns at once if it is).
    pub async fn opened(&mut self) {
        // An error means the sender is gone: the value can no longer change.
        let _ = self.0.wait_for(|open| *open).await;
    }
}

/// Why scale-down is held back in every cluster (a degraded fleet), while it is. The hub
/// sets it; each runner reads it at the start of a pass.
#[derive(Clone, Debug)]
pub struct ScaleDownHold(watch::Receiver<Option<String>>);

/// A hold and the handle that sets and lifts it (held by the hub).
pub fn hold_channel() -> (watch::Sender<Option<String>>, ScaleDownHold) {
    let (tx, rx) = watch::channel(None);
    (tx, ScaleDownHold(rx))
}

impl ScaleDownHold {
    /// A hold that never holds anything back.
    pub fn never() -> Self {
        hold_channel().1
    }

    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn closes_and_opens_with_its_sender() {
        let (tx, mut gate) = channel(false);
        assert!(!gate.is_open());
        tx.send_replace(true);
        gate.opened().await;
        assert!(gate.is_open());
        tx.send_replace(false);
        assert!(!gate.is_open());
        assert!(WriteGate::always_open().is_open());
    }

    #[test]
    fn a_hold_says_why_until_lifted() {
        let (tx, hold) = hold_channel();
        assert_eq!(hold.reason(), None);
        tx.send_replace(Some("the fleet is degraded".into()));
        assert_eq!(hold.reason().as_deref(), Some("the fleet is degraded"));
        tx.send_replace(None);
        assert_eq!(hold.reason(), None);
        assert_eq!(ScaleDownHold::never().reason(), None);
    }
}
