//! `WriteGate`: whether this hub replica may write to its clusters.
//!
//! With leader election on, the gate is open only while the replica holds the lease; the
//! elector closes it the moment the lease is lost, and every write checks it first, so a
//! replica that lost the lease stops writing at once (reads and planning go on, which keeps
//! its caches warm for a fast take-over). Without leader election the gate is always open.
//! (What else a runner reads of the fleet is `cluster::fleet_inputs`.)

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
}
