//! Whether a burst of pending pods is still arriving. A Deployment scaled from 2 to 12 makes
//! its ReplicaSet create ten pods over a few hundred milliseconds, and the scheduler marks
//! each unschedulable as it gets to it: a pass that runs as soon as the first ones are
//! marked sees part of the burst, buys for that part, and buys again for the rest (two small
//! nodes where one large one would have done, as upstream buys seeing the whole burst at its
//! next loop). So while a pending pod's owner still wants pods that do not exist yet, or has
//! pods the scheduler has not judged yet, the batch waits for them (at most `debounce_max`
//! after its first wake-up: the schedule bounds it).

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::Pod;
use crate::model::pod::PodPhase;
use crate::model::snapshot::ClusterSnapshot;
// Every pod of the cluster is tallied at every batch (30,000 of a large one): foldhash,
// several times faster than the default SipHash.
use foldhash::fast::RandomState as Hasher;

/// What one scan of the pods found of an owner's pods.
#[derive(Default)]
struct Tally<'a> {
    /// One of its pods is unschedulable (and not going): the batch may be waiting for it.
    pending: bool,
    /// The first of its pods the scheduler has not judged yet (its place in the pods).
    unjudged: Option<(usize, &'a Pod)>,
    /// Its pods not finished nor going.
    live: usize,
}

/// Why the burst is still arriving (for the debug log), or `None` when every owner of a
/// pending pod has all its pods, each judged by the scheduler. One scan of the pods once a
/// pod pends: the check runs before every pass, on clusters of tens of thousands of pods.
pub(super) fn still_arriving(s: &ClusterSnapshot) -> Option<String> {
    if !s
        .pods
        .iter()
        .any(|p| p.unschedulable && p.deleting.is_none())
    {
        return None;
    }
    let mut owners = tally(s);
    owners.retain(|_, t| t.pending);
    // The first unjudged pod in the pods' order, as a scan stopping at it would name.
    let unjudged = owners.values().filter_map(|t| t.unjudged);
    if let Some((_, pod)) = unjudged.min_by_key(|(i, _)| *i) {
        return Some(format!(
            "pod {} of the same owner as a pending pod waits for the scheduler",
            pod.id
        ));
    }
    wanting_more(s, &owners)
}

/// Every owner's pods, by owner uid. The scan keys by the uid's allocation (the cache
/// interns uids, so an owner's pods share one: hashing an address, not 36 bytes, per pod),
/// then merges by text, so a uid held twice still counts as one owner.
fn tally(s: &ClusterSnapshot) -> HashMap<&str, Tally<'_>, Hasher> {
    let mut by_allocation: HashMap<usize, (&str, Tally), Hasher> = HashMap::default();
    for (i, pod) in s.pods.iter().enumerate() {
        let Some(uid) = pod.owner.as_ref().map(|o| &o.uid).filter(|u| !u.is_empty()) else {
            continue;
        };
        let key = Arc::as_ptr(uid) as *const u8 as usize;
        let (_, t) = by_allocation
            .entry(key)
            .or_insert_with(|| (&**uid, Tally::default()));
        t.add(i, pod);
    }
    let mut owners: HashMap<&str, Tally, Hasher> = HashMap::default();
    for (uid, t) in by_allocation.into_values() {
        owners.entry(uid).or_default().merge(t);
    }
    owners
}

impl<'a> Tally<'a> {
    fn add(&mut self, i: usize, pod: &'a Pod) {
        self.pending |= pod.unschedulable && pod.deleting.is_none();
        if self.unjudged.is_none() && awaits_scheduler(pod) {
            self.unjudged = Some((i, pod));
        }
        if pod.deleting.is_none() && !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) {
            self.live += 1;
        }
    }

    fn merge(&mut self, other: Tally<'a>) {
        self.pending |= other.pending;
        self.live += other.live;
        self.unjudged = match (self.unjudged, other.unjudged) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
    }
}

/// Pending, on no node, not yet marked unschedulable: the scheduler has not got to it.
fn awaits_scheduler(pod: &Pod) -> bool {
    pod.phase == PodPhase::Pending
        && pod.node_name.is_none()
        && !pod.unschedulable
        && pod.deleting.is_none()
}

/// A ReplicaSet or ReplicationController of a pending pod that wants more pods than exist:
/// its controller is still creating them. (A StatefulSet creates its pods one by one,
/// each once the one before runs, and a Job's parallelism is not cached: neither is waited
/// for by count.)
fn wanting_more(s: &ClusterSnapshot, owners: &HashMap<&str, Tally, Hasher>) -> Option<String> {
    let c = &s.controllers;
    c.replica_sets
        .iter()
        .chain(&c.replication_controllers)
        .filter_map(|rc| Some((rc, owners.get(&*rc.uid)?.live, rc.replicas?)))
        .find(|(_, have, want)| usize::try_from(*want).is_ok_and(|want| want > *have))
        .map(|(rc, have, want)| format!("{} wants {want} pods, {have} exist", rc.key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{pod, snapshot};
    use serde_json::{Value, json};

    /// A pod of the fixtures' ReplicaSet `rs` (uid `rs-uid`), or of the one with `uid`.
    fn of(mut pod: Value, uid: &str) -> Value {
        pod["metadata"]["ownerReferences"][0]["uid"] = json!(uid);
        pod
    }

    fn replica_set(uid: &str, replicas: i32) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": {"replicas": replicas}})
    }

    #[test]
    fn a_replica_set_still_creating_its_pods_holds_the_batch() {
        let s = snapshot([
            pod("web-0").on("n1").json(),
            pod("web-1").unschedulable().json(),
            replica_set("rs-uid", 4),
        ]);
        let why = still_arriving(&s).unwrap();
        assert_eq!(why, "default/rs-uid wants 4 pods, 2 exist");
    }

    #[test]
    fn a_pod_the_scheduler_has_not_judged_holds_the_batch() {
        let s = snapshot([
            pod("web-0").unschedulable().json(),
            pod("web-1").json(),
            replica_set("rs-uid", 2),
        ]);
        let why = still_arriving(&s).unwrap();
        assert!(
            why.contains("web-1") && why.contains("waits for the scheduler"),
            "{why}"
        );
    }

    #[test]
    fn a_whole_burst_judged_by_the_scheduler_is_decided_at_once() {
        let pods = [
            pod("web-0").on("n1").json(),
            pod("web-1").unschedulable().json(),
            pod("web-2").unschedulable().json(),
        ];
        let s = snapshot(pods.iter().cloned().chain([replica_set("rs-uid", 3)]));
        assert_eq!(still_arriving(&s), None);
        // Scaled down meanwhile (fewer wanted than exist): nothing more is coming.
        let s = snapshot(pods.into_iter().chain([replica_set("rs-uid", 1)]));
        assert_eq!(still_arriving(&s), None);
    }

    #[test]
    fn an_owner_uid_held_twice_is_one_owner() {
        let mut s = snapshot([
            pod("web-0").on("n1").json(),
            pod("web-1").unschedulable().json(),
            replica_set("rs-uid", 2),
        ]);
        let owner = s.pods[0].owner.as_mut().unwrap();
        owner.uid = std::sync::Arc::from(&*owner.uid.to_string());
        let [a, b] = [&s.pods[0], &s.pods[1]].map(|p| &p.owner.as_ref().unwrap().uid);
        assert!(!std::sync::Arc::ptr_eq(a, b) && a == b);
        assert_eq!(still_arriving(&s), None, "both pods of rs-uid exist");
    }

    #[test]
    fn only_owners_of_pending_pods_are_waited_for() {
        // Another ReplicaSet rolling out (its pods not judged yet, more wanted) does not hold
        // a batch it has no pending pod in.
        let s = snapshot([
            pod("web-0").unschedulable().json(),
            replica_set("rs-uid", 1),
            of(pod("api-0").json(), "other"),
            replica_set("other", 5),
        ]);
        assert_eq!(still_arriving(&s), None);
        // A pending pod whose owner is not cached holds nothing by count.
        let s = snapshot([of(pod("web-0").unschedulable().json(), "unknown")]);
        assert_eq!(still_arriving(&s), None);
    }
}
