//! `WriteGate`: whether this hub replica may write to its clusters.
//!
//! With leader election on, the gate is open only while the replica holds the lease; the
//! elector closes it the moment the lease is lost, and every write checks it first, so a
//! replica that lost the lease stops writing at once (reads and planning go on, which keeps
//! its caches warm for a fast take-over). Without leader election the gate is always open.
//!
//! `FleetLink`: what else a runner reads of the fleet at each pass (the scale-down hold, the
//! capacity failures the clusters share).

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use tokio::sync::watch;

use crate::config::SharedFailuresConfig;
use crate::engine::policy::{SharedFailure, TraceRef};

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

/// What ties a runner to the rest of the fleet, read at the start of each pass into its
/// `FleetPolicy`: why scale-down is held back in every cluster (a degraded fleet, set by the
/// hub), and the capacity failures the clusters share.
#[derive(Clone, Debug)]
pub struct FleetLink {
    hold: watch::Receiver<Option<String>>,
    failures: SharedFailures,
}

/// A link and the handle that sets and lifts the hold (held by the hub).
pub fn hold_channel() -> (watch::Sender<Option<String>>, FleetLink) {
    let (tx, rx) = watch::channel(None);
    let link = FleetLink {
        hold: rx,
        failures: SharedFailures::default(),
    };
    (tx, link)
}

impl FleetLink {
    /// A link to no fleet: nothing held back, nothing shared.
    pub fn never() -> Self {
        hold_channel().1
    }

    pub fn reason(&self) -> Option<String> {
        self.hold.borrow().clone()
    }

    pub fn failures(&self) -> &SharedFailures {
        &self.failures
    }
}

/// At most this many failures are shared at once: one cluster failing everywhere must not
/// grow the hub or every pass of every other cluster.
const MAX_SHARED: usize = 256;

/// The capacity failures found by the fleet's clusters, until their backoffs end.
#[derive(Clone, Debug, Default)]
pub struct SharedFailures(Arc<Mutex<Shared>>);

#[derive(Debug, Default)]
struct Shared {
    config: SharedFailuresConfig,
    /// What this replica's clusters found.
    list: Vec<SharedFailure>,
    /// What the other replicas' clusters found (sharding), as they last told.
    remote: Vec<SharedFailure>,
}

impl SharedFailures {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn configure(&self, config: &SharedFailuresConfig) {
        let mut s = self.lock();
        s.config = config.clone();
        if !config.enabled {
            s.list.clear();
            s.remote.clear();
        }
    }

    /// Adds what `cluster` found in a pass, with the pass's trace when it has one (a newer
    /// failure of the same group replaces the older); expired ones, then the oldest past the
    /// bound, go.
    pub fn publish(
        &self,
        cluster: &str,
        trace: Option<&TraceRef>,
        found: &[SharedFailure],
        now: Timestamp,
    ) {
        let mut s = self.lock();
        if !s.config.enabled {
            return;
        }
        let scope = s.config.scope;
        for f in found {
            s.list
                .retain(|x| !(x.cluster == cluster && x.node_group == f.node_group));
            s.list.push(SharedFailure {
                cluster: cluster.to_string(),
                scope,
                trace: trace.cloned(),
                ..f.clone()
            });
        }
        s.list.retain(|f| f.until > now);
        let over = s.list.len().saturating_sub(MAX_SHARED);
        s.list.drain(..over);
    }

    /// The failures of the other clusters still in force, for `cluster`'s pass.
    pub fn for_cluster(&self, cluster: &str, now: Timestamp) -> Vec<SharedFailure> {
        let s = self.lock();
        s.list
            .iter()
            .chain(&s.remote)
            .filter(|f| f.cluster != cluster && f.until > now)
            .cloned()
            .collect()
    }

    /// Every failure in force, this replica's clusters' and the others', for the API.
    pub fn current(&self, now: Timestamp) -> Vec<SharedFailure> {
        let s = self.lock();
        s.list
            .iter()
            .chain(&s.remote)
            .filter(|f| f.until > now)
            .cloned()
            .collect()
    }

    /// What this replica's own clusters found, still in force: what it tells the others.
    pub fn local(&self, now: Timestamp) -> Vec<SharedFailure> {
        let s = self.lock();
        s.list.iter().filter(|f| f.until > now).cloned().collect()
    }

    /// What the other replicas told (replacing what they told before), bounded; nothing
    /// while sharing is off, and never a cluster's failure twice.
    pub fn set_remote(&self, told: impl IntoIterator<Item = SharedFailure>) {
        let mut s = self.lock();
        if !s.config.enabled {
            s.remote.clear();
            return;
        }
        let mut remote: Vec<SharedFailure> = told
            .into_iter()
            .filter(|f| {
                !s.list
                    .iter()
                    .any(|x| x.cluster == f.cluster && x.node_group == f.node_group)
            })
            .take(MAX_SHARED)
            .collect();
        remote.dedup_by(|a, b| a.cluster == b.cluster && a.node_group == b.node_group);
        s.remote = remote;
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
        assert_eq!(FleetLink::never().reason(), None);
    }

    fn failure(group: &str, at: Timestamp, minutes: i64) -> SharedFailure {
        SharedFailure {
            cluster: String::new(),
            node_group: group.into(),
            machine: None,
            key: crate::engine::policy::CapacityKey {
                instance_type: "m5.2xlarge".into(),
                zone: Some("us-east-1a".into()),
                region: Some("us-east-1".into()),
                platform: Some("aws".into()),
            },
            scope: Default::default(),
            reason: "InsufficientInstanceCapacity".into(),
            at,
            until: at + jiff::SignedDuration::from_mins(minutes),
            trace: None,
        }
    }

    #[test]
    fn failures_are_shared_with_the_other_clusters_until_they_end() {
        let shared = SharedFailures::default();
        let t0: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let trace = TraceRef {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
        };
        shared.publish("east", Some(&trace), &[failure("g", t0, 5)], t0);
        assert!(shared.for_cluster("east", t0).is_empty(), "not its own");
        let west = shared.for_cluster("west", t0);
        assert_eq!(west.len(), 1);
        assert_eq!(west[0].cluster, "east");
        assert_eq!(
            west[0].trace.as_ref(),
            Some(&trace),
            "the failing pass's trace"
        );
        // A newer failure of the same group replaces the older.
        let t1 = t0 + jiff::SignedDuration::from_mins(1);
        shared.publish("east", None, &[failure("g", t1, 10)], t1);
        assert_eq!(shared.current(t1).len(), 1);
        assert_eq!(shared.current(t1)[0].at, t1);
        assert_eq!(
            shared.current(t1)[0].trace,
            None,
            "traces off, or not sampled"
        );
        let later = t1 + jiff::SignedDuration::from_mins(10);
        assert!(shared.for_cluster("west", later).is_empty(), "ended");
        // Turned off: nothing is kept or given.
        shared.configure(&SharedFailuresConfig {
            enabled: false,
            ..Default::default()
        });
        shared.publish("east", None, &[failure("h", t1, 5)], t1);
        assert!(shared.current(t1).is_empty());
    }

    #[test]
    fn one_cluster_failing_everywhere_is_bounded() {
        let shared = SharedFailures::default();
        let t0: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let many: Vec<SharedFailure> = (0..MAX_SHARED + 40)
            .map(|i| failure(&format!("g{i}"), t0, 5))
            .collect();
        shared.publish("east", None, &many, t0);
        let kept = shared.current(t0);
        assert_eq!(kept.len(), MAX_SHARED);
        assert_eq!(kept.last().map(|f| f.node_group.as_str()), Some("g295"));
    }

    #[test]
    fn what_other_replicas_told_is_shared_but_not_told_again() {
        let shared = SharedFailures::default();
        let t0: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        shared.publish("east", None, &[failure("g", t0, 5)], t0);
        let told = SharedFailure {
            cluster: "north".into(),
            ..failure("h", t0, 5)
        };
        shared.set_remote([told.clone(), told.clone()]);
        assert_eq!(shared.current(t0).len(), 2);
        assert_eq!(shared.for_cluster("east", t0), std::slice::from_ref(&told));
        assert!(shared.for_cluster("north", t0)[0].cluster == "east");
        assert_eq!(shared.local(t0).len(), 1, "only its own are told on");
        shared.set_remote([]);
        assert_eq!(shared.current(t0).len(), 1);
    }
}
