//! Whether a burst of pending pods is still arriving. A Deployment scaled from 2 to 12 makes
//! its ReplicaSet create ten pods over a few hundred milliseconds, and the scheduler marks
//! each unschedulable as it gets to it: a pass that runs as soon as the first ones are
//! marked sees part of the burst, buys for that part, and buys again for the rest (two small
//! nodes where one large one would have done, as upstream buys seeing the whole burst at its
//! next loop). So while a pending pod's owner still wants pods that do not exist yet, or has
//! pods the scheduler has not judged yet, the batch waits for them (at most `debounce_max`
//! after its first wake-up: the schedule bounds it).

use std::collections::{HashMap, HashSet};

use crate::model::Pod;
use crate::model::pod::PodPhase;
use crate::model::snapshot::ClusterSnapshot;
// Every pod of the cluster is looked up at every batch (30,000 of a large one): foldhash,
// several times faster than the default SipHash on uids.
use foldhash::fast::RandomState as Hasher;

/// Why the burst is still arriving (for the debug log), or `None` when every owner of a
/// pending pod has all its pods, each judged by the scheduler.
pub(super) fn still_arriving(s: &ClusterSnapshot) -> Option<String> {
    let owners: HashSet<&str, Hasher> = s
        .pods
        .iter()
        .filter(|p| p.unschedulable && p.deleting.is_none())
        .filter_map(|p| p.owner.as_ref().map(|o| &*o.uid))
        .filter(|uid| !uid.is_empty())
        .collect();
    if owners.is_empty() {
        return None;
    }
    let mut live: HashMap<&str, usize, Hasher> = HashMap::default();
    for pod in &s.pods {
        let Some(uid) = owned_by(pod, &owners) else {
            continue;
        };
        if awaits_scheduler(pod) {
            return Some(format!(
                "pod {} of the same owner as a pending pod waits for the scheduler",
                pod.id
            ));
        }
        if pod.deleting.is_none() && !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) {
            *live.entry(uid).or_default() += 1;
        }
    }
    wanting_more(s, &live)
}

fn owned_by<'a>(pod: &'a Pod, owners: &HashSet<&str, Hasher>) -> Option<&'a str> {
    let uid = &*pod.owner.as_ref()?.uid;
    owners.contains(uid).then_some(uid)
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
fn wanting_more(s: &ClusterSnapshot, live: &HashMap<&str, usize, Hasher>) -> Option<String> {
    let c = &s.controllers;
    c.replica_sets
        .iter()
        .chain(&c.replication_controllers)
        .filter_map(|rc| Some((rc, *live.get(&*rc.uid)?, rc.replicas?)))
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
