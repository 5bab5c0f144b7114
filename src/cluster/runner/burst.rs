//! Whether a burst of pending pods is still arriving. A Deployment scaled from 2 to 12 makes
//! its ReplicaSet create ten pods over a few hundred milliseconds, and the scheduler marks
//! each unschedulable as it gets to it: a pass that runs as soon as the first ones are
//! marked sees part of the burst, buys for that part, and buys again for the rest (two small
//! nodes where one large one would have done, as upstream buys seeing the whole burst at its
//! next loop). So while a pending pod's owner still wants pods that do not exist yet, or has
//! pods the scheduler has not judged yet, the batch waits for them (at most `debounce_max`
//! after its first wake-up: the schedule bounds it).
//!
//! A burst the scheduler cannot judge within that wait is not waited for: three thousand
//! pods on a thousand nodes take the scheduler minutes to judge, so the pass at the end of
//! the wait would see a sliver of the burst all the same, only later. When a new burst has
//! at least [`MIN_TO_COME`] pods still to come, and they would take, at the pace the
//! scheduler is judging pods (measured between two looks at the batch), more than
//! [`LOOKAHEAD`] times the wait, the pass runs at once on what has been judged, and the
//! next passes take the rest as it is judged (as upstream's loops do).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::model::Pod;
use crate::model::pod::PodPhase;
use crate::model::snapshot::ClusterSnapshot;
// Every pod of the cluster is looked up at every batch (30,000 of a large one): foldhash,
// several times faster than the default SipHash on uids.
use foldhash::fast::RandomState as Hasher;

/// How many times the batch's maximum the rest of a burst may take to be judged and still be
/// waited for: only a burst clearly beyond the wait is not waited for.
pub(super) const LOOKAHEAD: u32 = 3;

/// Fewer pods still to come are always waited for, however slow the scheduler: a
/// Deployment's or a Job's worth is what the batching is for.
pub(super) const MIN_TO_COME: usize = 100;

/// A burst still arriving: why (for the debug log) and how far along it is.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Arriving {
    pub why: String,
    /// Pods the scheduler has marked unschedulable, of the owners with pods still to come.
    pub judged: usize,
    /// Pods of those owners still to come: not created yet, or not judged yet.
    pub to_come: usize,
}

impl Arriving {
    /// Whether the pods to come are too many to wait for: at least [`MIN_TO_COME`], and at
    /// `per_sec` pods judged a second they would take more than [`LOOKAHEAD`] times `wait`.
    /// No pace yet (nothing judged between the looks) is not beyond: the burst is waited for.
    pub(super) fn beyond(&self, per_sec: f64, wait: Duration) -> bool {
        self.to_come >= MIN_TO_COME
            && per_sec > 0.0
            && self.to_come as f64 / per_sec > (wait * LOOKAHEAD).as_secs_f64()
    }
}

/// What one owner of a pending pod has.
#[derive(Default)]
struct Owned {
    /// Pods not deleting and not finished (what its controller counts).
    live: usize,
    judged: usize,
    unjudged: usize,
    /// Pods its controller still has to create.
    missing: usize,
}

/// The burst still arriving, or `None` when every owner of a pending pod has all its pods,
/// each judged by the scheduler.
pub(super) fn still_arriving(s: &ClusterSnapshot) -> Option<Arriving> {
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
    let mut owned: HashMap<&str, Owned, Hasher> = HashMap::default();
    let mut waiting = None;
    for pod in &s.pods {
        let Some(uid) = owned_by(pod, &owners) else {
            continue;
        };
        let o = owned.entry(uid).or_default();
        if awaits_scheduler(pod) {
            o.unjudged += 1;
            waiting.get_or_insert(&pod.id);
        } else if pod.unschedulable && pod.deleting.is_none() {
            o.judged += 1;
        }
        if pod.deleting.is_none() && !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) {
            o.live += 1;
        }
    }
    let wanting = wanting_more(s, &mut owned);
    let why = match (waiting, wanting) {
        (Some(pod), _) => {
            format!("pod {pod} of the same owner as a pending pod waits for the scheduler")
        }
        (None, Some(why)) => why,
        (None, None) => return None,
    };
    // Only the owners with pods to come: a pod stuck pending for hours is not this burst.
    let arriving = owned.values().filter(|o| o.unjudged + o.missing > 0);
    let (judged, to_come) = arriving.fold((0, 0), |(j, c), o| {
        (j + o.judged, c + o.unjudged + o.missing)
    });
    Some(Arriving {
        why,
        judged,
        to_come,
    })
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

/// Records on each owner of a pending pod that is a ReplicaSet or ReplicationController
/// wanting more pods than exist (its controller is still creating them) how many are
/// missing, and names the first such owner. (A StatefulSet creates its pods one by one,
/// each once the one before runs, and a Job's parallelism is not cached: neither is waited
/// for by count.)
fn wanting_more(s: &ClusterSnapshot, owned: &mut HashMap<&str, Owned, Hasher>) -> Option<String> {
    let c = &s.controllers;
    let mut first = None;
    for rc in c.replica_sets.iter().chain(&c.replication_controllers) {
        let Some(o) = owned.get_mut(&*rc.uid) else {
            continue;
        };
        let Some(want) = rc.replicas.and_then(|r| usize::try_from(r).ok()) else {
            continue;
        };
        if want <= o.live {
            continue;
        }
        o.missing += want - o.live;
        let have = o.live;
        first.get_or_insert_with(|| format!("{} wants {want} pods, {have} exist", rc.key));
    }
    first
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
        let burst = still_arriving(&s).unwrap();
        assert_eq!(burst.why, "default/rs-uid wants 4 pods, 2 exist");
        assert_eq!((burst.judged, burst.to_come), (1, 2));
    }

    #[test]
    fn a_pod_the_scheduler_has_not_judged_holds_the_batch() {
        let s = snapshot([
            pod("web-0").unschedulable().json(),
            pod("web-1").json(),
            replica_set("rs-uid", 2),
        ]);
        let burst = still_arriving(&s).unwrap();
        assert!(
            burst.why.contains("web-1") && burst.why.contains("waits for the scheduler"),
            "{burst:?}"
        );
        assert_eq!((burst.judged, burst.to_come), (1, 1));
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

    fn burst(judged: usize, to_come: usize) -> Arriving {
        Arriving {
            why: String::new(),
            judged,
            to_come,
        }
    }

    #[test]
    fn a_burst_judged_within_the_wait_is_waited_for_and_a_far_larger_one_is_not() {
        let wait = Duration::from_secs(2);
        // 2,990 pods to come at 50 a second: a minute, thirty waits.
        assert!(burst(10, 2990).beyond(50.0, wait));
        // Just past three waits (6 s at 100 pods a second), and just within.
        assert!(burst(10, 610).beyond(100.0, wait));
        assert!(!burst(10, 590).beyond(100.0, wait));
        // Fewer than MIN_TO_COME pods to come are waited for, however slow the scheduler.
        assert!(!burst(1, MIN_TO_COME - 1).beyond(0.5, wait));
        assert!(burst(1, MIN_TO_COME).beyond(0.5, wait));
        // No pace yet: waited for.
        assert!(!burst(0, 3000).beyond(0.0, wait));
    }

    #[test]
    fn every_owner_short_of_pods_counts_towards_the_pods_to_come() {
        let s = snapshot([
            pod("web-0").unschedulable().json(),
            replica_set("rs-uid", 3),
            of(pod("api-0").unschedulable().json(), "other"),
            of(pod("api-1").json(), "other"),
            replica_set("other", 5),
            of(pod("old-0").unschedulable().json(), "stuck"),
            replica_set("stuck", 1),
        ]);
        let burst = still_arriving(&s).unwrap();
        // rs-uid misses 2, other misses 3 and has one pod not judged; the pod of `stuck`,
        // which has all its pods judged, is no part of the burst.
        assert_eq!((burst.judged, burst.to_come), (2, 6));
    }
}
