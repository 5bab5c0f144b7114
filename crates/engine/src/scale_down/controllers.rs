//! Upstream's replicacount drain rule (`simulator/drainability/rules/replicacount`): a pod
//! keeps its node when its controller is gone (`ControllerNotFound`: nothing would recreate
//! it elsewhere) or, for a ReplicaSet or ReplicationController, asks for fewer replicas than
//! `min_replica_count` (`MinReplicasReached`).
//!
//! Controllers are found by the owner's uid, as the hub's DaemonSet lookup always was: a
//! controller recreated under the same name is another object, and the pod an orphan. One
//! without a uid (a hand-written dump) is found by namespace and name.
//!
//! Where upstream's lister errs it blocks the pod; here a kind that could not be read
//! ([`Listing::Unreadable`]) keeps the pod's node as `UnexpectedError`, never as a missing
//! controller: nothing is evicted on a guess, and nothing is claimed gone that was only not
//! seen. A kind never looked at ([`Listing::Unlisted`]: not in a dump, not served by the
//! cluster) checks nothing, as before this rule.

use std::cell::OnceCell;
use std::collections::HashMap;

use crate::reason::ReasonCode;
use fleetscaler_model::controller::{Controller, ControllerKind, Controllers, Listing};
use fleetscaler_model::pod::Pod;
use fleetscaler_model::workload::DaemonSet;

/// A pod's controller of one kind, as found: its replica count, if it has one.
type Replicas = Option<i32>;

/// One kind's controllers, indexed for lookups by a pod's owner.
#[derive(Debug, Default)]
struct Found<'a> {
    by_uid: HashMap<&'a str, Replicas>,
    /// Those without a uid, by namespace and name.
    by_name: HashMap<(&'a str, &'a str), Replicas>,
}

impl<'a> Found<'a> {
    fn add(&mut self, namespace: &'a str, name: &'a str, uid: &'a str, replicas: Replicas) {
        if uid.is_empty() {
            self.by_name.insert((namespace, name), replicas);
        } else {
            self.by_uid.insert(uid, replicas);
        }
    }

    /// The pod's controller, if it is among these: `Some(replicas)`.
    fn get(&self, pod: &Pod, name: &str, uid: &str) -> Option<Replicas> {
        self.by_uid
            .get(uid)
            .or_else(|| self.by_name.get(&(&*pod.id.namespace, name)))
            .copied()
    }
}

/// The controllers of a snapshot, each kind indexed the first time a pod needs it (most
/// passes look up ReplicaSets only).
pub(super) struct ControllerIndex<'a> {
    daemonsets: &'a [DaemonSet],
    controllers: &'a Controllers,
    found: [OnceCell<Found<'a>>; ControllerKind::ALL.len()],
}

/// Why a pod keeps its node.
pub(super) type Blocked = (ReasonCode, String);

impl<'a> ControllerIndex<'a> {
    pub fn new(daemonsets: &'a [DaemonSet], controllers: &'a Controllers) -> Self {
        ControllerIndex {
            daemonsets,
            controllers,
            found: Default::default(),
        }
    }

    fn found(&self, kind: ControllerKind) -> &Found<'a> {
        self.found[kind.index()].get_or_init(|| self.index(kind))
    }

    fn index(&self, kind: ControllerKind) -> Found<'a> {
        let mut found = Found::default();
        match self.controllers.of(kind) {
            Some(list) => {
                for Controller { key, uid, replicas } in list {
                    found.add(&key.namespace, &key.name, uid, *replicas);
                }
            }
            None => {
                for ds in self.daemonsets {
                    found.add(&ds.key.namespace, &ds.key.name, &ds.uid, None);
                }
            }
        }
        found
    }

    /// Why the pod keeps its node, if its controller says it must (upstream's rule, which
    /// runs only with `skip_nodes_with_custom_controller_pods`).
    pub fn blocks(&self, pod: &Pod, min_replicas: u64) -> Option<Blocked> {
        let kind = looked_up_kind(pod)?;
        match self.controllers.listing(kind) {
            Listing::Unlisted => None,
            Listing::Unreadable(why) => Some(unknown(pod, kind, why)),
            Listing::Complete => self.judge(pod, kind, min_replicas),
        }
    }

    /// The pod's controller of a kind read in full: gone, or asking for too few replicas.
    fn judge(&self, pod: &Pod, kind: ControllerKind, min_replicas: u64) -> Option<Blocked> {
        let owner = pod.owner.as_ref()?;
        let (id, what, name) = (&pod.id, kind.name(), &owner.name);
        let Some(replicas) = self.found(kind).get(pod, name, &owner.uid) else {
            return Some((
                ReasonCode::ControllerNotFound,
                format!(
                    "pod {id}'s {what} {name} is not in the cluster: nothing would recreate the pod elsewhere"
                ),
            ));
        };
        let replicas = replicas.filter(|r| kind.has_min_replicas() && below(*r, min_replicas))?;
        Some((
            ReasonCode::MinReplicasReached,
            format!(
                "pod {id}'s {what} {name} asks for {replicas} replica(s), fewer than min_replica_count {min_replicas}"
            ),
        ))
    }
}

/// A pod whose controller's kind could not be read: it keeps its node, and the reason says
/// that nothing is known of the controller, not that it is gone.
fn unknown(pod: &Pod, kind: ControllerKind, why: &str) -> Blocked {
    let name = pod.owner.as_ref().map_or("", |o| &*o.name);
    (
        ReasonCode::UnexpectedError,
        format!(
            "pod {}'s {} {name} cannot be looked up ({why}): the node stays until the hub may read {kind}",
            pod.id,
            kind.name()
        ),
    )
}

/// The kind of the pod's controller to look up, in the order of upstream's rule: a
/// ReplicationController always; then a DaemonSet pod only under a DaemonSet of the apps
/// group (one marked by the annotation under another owner is not looked up at all); then
/// a Job, a ReplicaSet, and a StatefulSet of the apps group. An owner whose `apiVersion`
/// cannot be read is not looked up (upstream leaves the rule undecided).
fn looked_up_kind(pod: &Pod) -> Option<ControllerKind> {
    let owner = pod.owner.as_ref()?;
    let group = owner.group.as_deref()?;
    match &*owner.kind {
        "ReplicationController" => Some(ControllerKind::ReplicationController),
        _ if pod.is_daemonset() => {
            (&*owner.kind == "DaemonSet" && group == "apps").then_some(ControllerKind::DaemonSet)
        }
        "Job" => Some(ControllerKind::Job),
        "ReplicaSet" => Some(ControllerKind::ReplicaSet),
        "StatefulSet" => (group == "apps").then_some(ControllerKind::StatefulSet),
        _ => None,
    }
}

/// Fewer replicas than the minimum (a negative count, which no API server stores, is not).
fn below(replicas: i32, min: u64) -> bool {
    u64::try_from(replicas).is_ok_and(|r| r < min)
}

#[cfg(test)]
#[path = "controllers_tests.rs"]
mod tests;
