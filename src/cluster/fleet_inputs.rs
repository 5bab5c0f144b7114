//! What the fleet hands each cluster's pass, as one typed value: [`FleetInputs`], published
//! by the hub on one `watch` channel and read once at the start of every pass (and of every
//! what-if) into the engine's [`FleetPolicy`] by [`FleetInputs::policy`], the one place that
//! says what each input means for a pass.
//!
//! Two writers fill it, each its own field: the hub, which judges the fleet's health every
//! second and holds scale-down back while the fleet is degraded (`scale_down_hold`); and
//! [`SharedFailures`], the bounded registry where the clusters publish the capacity failures
//! their passes found (and, with sharding, where the other replicas' are kept), which sends
//! every change of what it holds into the same channel. A pass never reads the registry: it
//! reads one snapshot of the inputs, so the hold and the failures it acts on are of one
//! moment.
//!
//! A new fleet policy: a field here (with its setter on [`FleetInputsSender`]), filled where
//! the hub decides it, and turned into the engine's input in [`FleetInputs::policy`].

use std::fmt;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use tokio::sync::watch;

use crate::config::SharedFailuresConfig;
use crate::engine::FleetPolicy;
use crate::engine::policy::{SharedFailure, TraceRef};
use crate::model::ClusterName;

/// Why scale-down is held back in every cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScaleDownHold {
    /// The fleet is degraded and `[fleet] pause_scale_down_when_degraded` is on: `why` is
    /// the fleet's health's reason, naming the clusters at fault.
    FleetDegraded { why: String },
}

impl fmt::Display for ScaleDownHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScaleDownHold::FleetDegraded { why } => write!(f, "the fleet is degraded: {why}"),
        }
    }
}

/// The fleet's inputs to every cluster's pass, at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetInputs {
    /// Set by the hub while scale-down is held back fleet-wide.
    pub scale_down_hold: Option<ScaleDownHold>,
    /// Every capacity failure the registry holds (this replica's clusters' and, with
    /// sharding, the other replicas'), including the pass's own cluster's and some maybe
    /// ended since: [`FleetInputs::policy`] takes what applies.
    pub shared_failures: Vec<SharedFailure>,
}

impl FleetInputs {
    /// The fleet's decisions for `cluster`'s pass at `now`, as the engine takes them (and
    /// records them in the plan): the hold said in words, and the other clusters' capacity
    /// failures still in force.
    pub fn policy(&self, cluster: &str, now: Timestamp) -> FleetPolicy {
        FleetPolicy {
            scale_down_hold: self.scale_down_hold.as_ref().map(ToString::to_string),
            shared_failures: self
                .shared_failures
                .iter()
                .filter(|f| f.cluster != cluster && f.until > now)
                .cloned()
                .collect(),
        }
    }
}

/// The hub's end of the fleet's inputs: it sets the hold, and keeps the registry of shared
/// failures, which fills its own field.
#[derive(Clone, Debug)]
pub struct FleetInputsSender {
    tx: watch::Sender<FleetInputs>,
    failures: SharedFailures,
}

/// A channel of fleet inputs with nothing held back and nothing shared yet.
pub fn channel() -> FleetInputsSender {
    let (tx, _) = watch::channel(FleetInputs::default());
    let failures = SharedFailures(Arc::new(Registry {
        shared: Mutex::default(),
        inputs: tx.clone(),
    }));
    FleetInputsSender { tx, failures }
}

impl FleetInputsSender {
    /// Sets or lifts the scale-down hold; the runners see it from their next pass.
    pub fn set_scale_down_hold(&self, hold: Option<ScaleDownHold>) {
        self.tx.send_if_modified(|i| {
            let changed = i.scale_down_hold != hold;
            i.scale_down_hold = hold;
            changed
        });
    }

    /// The registry of shared capacity failures.
    pub fn failures(&self) -> &SharedFailures {
        &self.failures
    }

    /// A runner's end.
    pub fn link(&self) -> FleetLink {
        FleetLink {
            inputs: self.tx.subscribe(),
            failures: self.failures.clone(),
        }
    }
}

/// A runner's end of the fleet: the inputs its passes read, and where it shares the capacity
/// failures they find.
#[derive(Clone, Debug)]
pub struct FleetLink {
    inputs: watch::Receiver<FleetInputs>,
    failures: SharedFailures,
}

impl FleetLink {
    /// A link to no fleet: nothing held back, nothing shared but what the runner itself
    /// publishes (which its own passes never read).
    pub fn never() -> Self {
        channel().link()
    }

    /// The fleet's policy for `cluster`'s pass at `now`, from the inputs as they are now.
    pub fn policy(&self, cluster: &str, now: Timestamp) -> FleetPolicy {
        self.inputs.borrow().policy(cluster, now)
    }

    /// The inputs as they are now.
    pub fn inputs(&self) -> FleetInputs {
        self.inputs.borrow().clone()
    }

    /// Shares the capacity failures a pass of `cluster` found (see [`SharedFailures::publish`]).
    pub fn share(
        &self,
        cluster: &ClusterName,
        trace: Option<&TraceRef>,
        found: &[SharedFailure],
        now: Timestamp,
    ) {
        self.failures.publish(cluster, trace, found, now);
    }
}

/// At most this many failures are shared at once: one cluster failing everywhere must not
/// grow the hub or every pass of every other cluster.
const MAX_SHARED: usize = 256;

/// The capacity failures found by the fleet's clusters, until their backoffs end; every
/// change is sent on into the fleet's inputs.
#[derive(Clone, Debug)]
pub struct SharedFailures(Arc<Registry>);

#[derive(Debug)]
struct Registry {
    shared: Mutex<Shared>,
    inputs: watch::Sender<FleetInputs>,
}

#[derive(Debug, Default)]
struct Shared {
    config: SharedFailuresConfig,
    /// What this replica's clusters found.
    list: Vec<SharedFailure>,
    /// What the other replicas' clusters found (sharding), as they last told.
    remote: Vec<SharedFailure>,
}

impl SharedFailures {
    /// Changes what is shared; what `change` leaves is sent on into the fleet's inputs while
    /// the registry is still locked, so that two changes can never arrive in the wrong order.
    fn change(&self, change: impl FnOnce(&mut Shared)) {
        let mut s = self.lock();
        change(&mut s);
        self.0.inputs.send_if_modified(|i| {
            let all = s.list.iter().chain(&s.remote);
            if i.shared_failures.iter().eq(all.clone()) {
                return false;
            }
            i.shared_failures = all.cloned().collect();
            true
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn configure(&self, config: &SharedFailuresConfig) {
        self.change(|s| {
            s.config = config.clone();
            if !config.enabled {
                s.list.clear();
                s.remote.clear();
            }
        });
    }

    /// Adds what `cluster` found in a pass, with the pass's trace when it has one (a newer
    /// failure of the same group replaces the older); expired ones, then the oldest past the
    /// bound, go.
    pub fn publish(
        &self,
        cluster: &ClusterName,
        trace: Option<&TraceRef>,
        found: &[SharedFailure],
        now: Timestamp,
    ) {
        self.change(|s| {
            if !s.config.enabled {
                return;
            }
            let scope = s.config.scope;
            for f in found {
                s.list
                    .retain(|x| !(x.cluster == *cluster && x.node_group == f.node_group));
                s.list.push(SharedFailure {
                    cluster: cluster.clone(),
                    scope,
                    trace: trace.cloned(),
                    ..f.clone()
                });
            }
            s.list.retain(|f| f.until > now);
            let over = s.list.len().saturating_sub(MAX_SHARED);
            s.list.drain(..over);
        });
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
        self.change(|s| {
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
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(group: &str, at: Timestamp, minutes: i64) -> SharedFailure {
        SharedFailure {
            cluster: ClusterName::default(),
            node_group: crate::engine::nodegroups::NodeGroupId::parse(&format!(
                "MachineSet/ns/{group}"
            ))
            .unwrap(),
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

    fn t0() -> Timestamp {
        "2026-11-22T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_hold_says_why_until_lifted() {
        let tx = channel();
        let link = tx.link();
        assert_eq!(link.policy("east", t0()), FleetPolicy::none());
        tx.set_scale_down_hold(Some(ScaleDownHold::FleetDegraded {
            why: "2 of 3 clusters unhealthy".into(),
        }));
        assert_eq!(
            link.policy("east", t0()).scale_down_hold.as_deref(),
            Some("the fleet is degraded: 2 of 3 clusters unhealthy")
        );
        tx.set_scale_down_hold(None);
        assert_eq!(link.policy("east", t0()).scale_down_hold, None);
        assert_eq!(FleetLink::never().policy("east", t0()), FleetPolicy::none());
    }

    #[test]
    fn a_pass_reads_the_hold_and_the_failures_in_one_value() {
        let tx = channel();
        let link = tx.link();
        tx.set_scale_down_hold(Some(ScaleDownHold::FleetDegraded { why: "x".into() }));
        link.share(&"east".into(), None, &[failure("g", t0(), 5)], t0());
        let inputs = link.inputs();
        assert!(inputs.scale_down_hold.is_some());
        assert_eq!(inputs.shared_failures.len(), 1);
        assert!(
            inputs.policy("east", t0()).shared_failures.is_empty(),
            "not its own"
        );
        let west = inputs.policy("west", t0());
        assert_eq!(west.shared_failures.len(), 1);
        assert_eq!(west.shared_failures[0].cluster, "east");
        let later = t0() + jiff::SignedDuration::from_mins(5);
        assert!(
            inputs.policy("west", later).shared_failures.is_empty(),
            "ended"
        );
        // Sharing turned off empties what the passes read.
        tx.failures().configure(&SharedFailuresConfig {
            enabled: false,
            ..Default::default()
        });
        assert!(link.inputs().shared_failures.is_empty());
    }

    #[test]
    fn failures_are_shared_with_the_other_clusters_until_they_end() {
        let tx = channel();
        let (shared, link) = (tx.failures(), tx.link());
        let t0 = t0();
        let trace = TraceRef {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "b7ad6b7169203331".into(),
        };
        shared.publish(&"east".into(), Some(&trace), &[failure("g", t0, 5)], t0);
        assert!(
            link.policy("east", t0).shared_failures.is_empty(),
            "not its own"
        );
        let west = link.policy("west", t0).shared_failures;
        assert_eq!(west.len(), 1);
        assert_eq!(west[0].cluster, "east");
        assert_eq!(
            west[0].trace.as_ref(),
            Some(&trace),
            "the failing pass's trace"
        );
        // A newer failure of the same group replaces the older.
        let t1 = t0 + jiff::SignedDuration::from_mins(1);
        shared.publish(&"east".into(), None, &[failure("g", t1, 10)], t1);
        assert_eq!(shared.current(t1).len(), 1);
        assert_eq!(shared.current(t1)[0].at, t1);
        assert_eq!(
            shared.current(t1)[0].trace,
            None,
            "traces off, or not sampled"
        );
        let later = t1 + jiff::SignedDuration::from_mins(10);
        assert!(
            link.policy("west", later).shared_failures.is_empty(),
            "ended"
        );
        // Turned off: nothing is kept or given.
        shared.configure(&SharedFailuresConfig {
            enabled: false,
            ..Default::default()
        });
        shared.publish(&"east".into(), None, &[failure("h", t1, 5)], t1);
        assert!(shared.current(t1).is_empty());
        assert!(link.policy("west", t1).shared_failures.is_empty());
    }

    #[test]
    fn one_cluster_failing_everywhere_is_bounded() {
        let tx = channel();
        let shared = tx.failures();
        let t0 = t0();
        let many: Vec<SharedFailure> = (0..MAX_SHARED + 40)
            .map(|i| failure(&format!("g{i}"), t0, 5))
            .collect();
        shared.publish(&"east".into(), None, &many, t0);
        let kept = shared.current(t0);
        assert_eq!(kept.len(), MAX_SHARED);
        assert_eq!(
            kept.last().map(|f| f.node_group.as_str()),
            Some("MachineSet/ns/g295")
        );
        assert_eq!(tx.link().inputs().shared_failures.len(), MAX_SHARED);
    }

    #[test]
    fn what_other_replicas_told_is_shared_but_not_told_again() {
        let tx = channel();
        let (shared, link) = (tx.failures(), tx.link());
        let t0 = t0();
        shared.publish(&"east".into(), None, &[failure("g", t0, 5)], t0);
        let told = SharedFailure {
            cluster: "north".into(),
            ..failure("h", t0, 5)
        };
        shared.set_remote([told.clone(), told.clone()]);
        assert_eq!(shared.current(t0).len(), 2);
        assert_eq!(
            link.policy("east", t0).shared_failures,
            std::slice::from_ref(&told)
        );
        assert!(link.policy("north", t0).shared_failures[0].cluster == "east");
        assert_eq!(shared.local(t0).len(), 1, "only its own are told on");
        shared.set_remote([]);
        assert_eq!(shared.current(t0).len(), 1);
        assert_eq!(link.inputs().shared_failures.len(), 1);
    }
}
