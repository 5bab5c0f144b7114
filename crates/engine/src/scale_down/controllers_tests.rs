use serde_json::{Value, json};

use super::*;
use crate::fixtures::{pod, snapshot};
use fleetscaler_model::ClusterSnapshot;

/// A pod owned by `kind` `name` of `api_version` (uid `<name>-uid`), as upstream's
/// `GenerateOwnerReferences` builds it.
fn owned(kind: &str, name: &str, api_version: &str) -> Value {
    let mut p = pod("bar").on("node").json();
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind,
        "name": name, "uid": format!("{name}-uid"), "controller": true}]);
    p
}

/// A controller object named as upstream's test names them, with the uid pods point at.
fn object(api_version: &str, kind: &str, name: &str, replicas: Option<i32>) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid")},
        "spec": {"selector": {}, "template": {}}});
    if let Some(r) = replicas {
        o["spec"]["replicas"] = json!(r);
    }
    o
}

/// Upstream's fixtures: rc and rs with 5 replicas, a ds, a job and an ss.
fn every_kind() -> Vec<Value> {
    vec![
        object("v1", "ReplicationController", "rc", Some(5)),
        object("apps/v1", "DaemonSet", "ds", None),
        object("batch/v1", "Job", "job", None),
        object("apps/v1", "StatefulSet", "ss", Some(1)),
        object("apps/v1", "ReplicaSet", "rs", Some(5)),
    ]
}

fn code_in(s: &ClusterSnapshot, min: u64) -> Option<ReasonCode> {
    let index = ControllerIndex::new(&s.daemonsets, &s.controllers);
    index.blocks(&s.pods[0], min).map(|(code, _)| code)
}

fn code(pod: Value, min: u64) -> Option<ReasonCode> {
    let mut items = vec![pod];
    items.extend(every_kind());
    code_in(&snapshot(items), min)
}

/// Upstream's `TestDrainable` (`rules/replicacount/rule_test.go`), case by case.
#[test]
fn upstreams_cases() {
    let missing = Some(ReasonCode::ControllerNotFound);
    let cases = [
        (
            "RC-managed pod",
            owned("ReplicationController", "rc", "core/v1"),
            None,
        ),
        (
            "RC-managed pod with missing reference",
            owned("ReplicationController", "missing", "core/v1"),
            missing,
        ),
        ("DS-managed pod", owned("DaemonSet", "ds", "apps/v1"), None),
        (
            "DS-managed pod with missing reference",
            owned("DaemonSet", "missing", "apps/v1"),
            missing,
        ),
        (
            "DS-managed pod by a custom API Group",
            owned("DaemonSet", "ds", "crd/v1"),
            None,
        ),
        (
            "... with missing reference",
            owned("DaemonSet", "missing", "crd/v1"),
            None,
        ),
        ("Job-managed pod", owned("Job", "job", "batch/v1"), None),
        (
            "Job-managed pod with missing reference",
            owned("Job", "missing", "batch/v1"),
            missing,
        ),
        (
            "SS-managed pod",
            owned("StatefulSet", "ss", "apps/v1"),
            None,
        ),
        (
            "SS-managed pod with missing reference",
            owned("StatefulSet", "missing", "apps/v1"),
            missing,
        ),
        (
            "SS-managed pod by a custom API Group",
            owned("StatefulSet", "ss", "kruise/v1"),
            None,
        ),
        (
            "... with missing reference",
            owned("StatefulSet", "missing", "kruise/v1"),
            None,
        ),
        ("RS-managed pod", owned("ReplicaSet", "rs", "apps/v1"), None),
        (
            "RS-managed pod with missing reference",
            owned("ReplicaSet", "missing", "apps/v1"),
            missing,
        ),
        (
            "a custom controller is not looked up",
            owned("TaskRun", "missing", "tekton.dev/v1"),
            None,
        ),
    ];
    for (case, pod, want) in cases {
        assert_eq!(code(pod, 0), want, "{case}");
    }
}

/// Upstream's "DS-managed pod by a custom Daemonset" cases: a pod marked by the annotation
/// under another owner is a DaemonSet pod, and its owner is not looked up, even when it is
/// a ReplicaSet; a ReplicationController owner is looked up first all the same.
#[test]
fn a_pod_marked_as_a_daemonset_pod_is_not_looked_up_under_another_owner() {
    let marked = |kind: &str, name: &str, api_version: &str| {
        let mut p = owned(kind, name, api_version);
        p["metadata"]["annotations"] =
            json!({"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"});
        p
    };
    assert_eq!(code(marked("CustomDaemonSet", "ds", "crd/v1"), 0), None);
    assert_eq!(
        code(marked("CustomDaemonSet", "missing", "crd/v1"), 0),
        None
    );
    assert_eq!(code(marked("ReplicaSet", "missing", "apps/v1"), 0), None);
    assert_eq!(
        code(marked("ReplicationController", "missing", "v1"), 0),
        Some(ReasonCode::ControllerNotFound)
    );
}

/// `--min-replica-count`: a ReplicaSet's or ReplicationController's `spec.replicas` below it
/// keeps the pod's node; a StatefulSet's is not held against it, nor is an absent count.
#[test]
fn replicas_below_the_minimum_keep_the_node() {
    let rs = owned("ReplicaSet", "rs", "apps/v1");
    let rc = owned("ReplicationController", "rc", "v1");
    let ss = owned("StatefulSet", "ss", "apps/v1");
    assert_eq!(code(rs.clone(), 5), None, "5 replicas, min 5");
    assert_eq!(code(rs.clone(), 6), Some(ReasonCode::MinReplicasReached));
    assert_eq!(code(rc, 6), Some(ReasonCode::MinReplicasReached));
    assert_eq!(code(ss, 6), None);
    let s = snapshot(vec![
        rs.clone(),
        object("apps/v1", "ReplicaSet", "rs", None),
    ]);
    assert_eq!(code_in(&s, 6), None, "no spec.replicas: nothing to compare");
    let s = snapshot([rs].into_iter().chain(every_kind()));
    let index = ControllerIndex::new(&s.daemonsets, &s.controllers);
    let (_, why) = index.blocks(&s.pods[0], 6).unwrap();
    assert_eq!(
        why,
        "pod default/bar's ReplicaSet rs asks for 5 replica(s), fewer than min_replica_count 6"
    );
}

/// A kind not in the snapshot at all (a dump without it, a cluster that does not serve it)
/// checks nothing; one the hub could not read keeps the node without claiming the
/// controller is gone.
#[test]
fn kinds_not_listed_or_not_readable() {
    let s = snapshot(vec![owned("Job", "missing", "batch/v1")]);
    assert_eq!(
        s.controllers.listing(ControllerKind::Job),
        &Listing::Unlisted
    );
    assert_eq!(code_in(&s, 0), None);
    let mut s = s;
    let forbidden = "jobs.batch is forbidden to the hub";
    s.controllers
        .set_listing(ControllerKind::Job, Listing::Unreadable(forbidden.into()));
    let index = ControllerIndex::new(&s.daemonsets, &s.controllers);
    let (code, why) = index.blocks(&s.pods[0], 0).unwrap();
    assert_eq!(code, ReasonCode::UnexpectedError);
    assert_eq!(
        why,
        "pod default/bar's Job missing cannot be looked up (jobs.batch is forbidden to the hub): \
         the node stays until the hub may read jobs.batch"
    );
}

/// Found by uid: a controller of the same name but another uid is not the pod's. One
/// without a uid (hand-written) is found by namespace and name.
#[test]
fn controllers_are_found_by_uid_then_by_name_without_one() {
    let pod = owned("ReplicaSet", "web", "apps/v1");
    let mut recreated = object("apps/v1", "ReplicaSet", "web", Some(2));
    recreated["metadata"]["uid"] = json!("another-uid");
    let s = snapshot(vec![pod.clone(), recreated.clone()]);
    assert_eq!(code_in(&s, 0), Some(ReasonCode::ControllerNotFound));
    let mut uidless = recreated;
    if let Some(meta) = uidless["metadata"].as_object_mut() {
        meta.remove("uid");
    }
    let s = snapshot(vec![pod.clone(), uidless.clone()]);
    assert_eq!(code_in(&s, 0), None);
    uidless["metadata"]["namespace"] = json!("other");
    let s = snapshot(vec![pod, uidless]);
    assert_eq!(code_in(&s, 0), Some(ReasonCode::ControllerNotFound));
}

#[test]
fn a_missing_controller_is_named_with_its_pod() {
    let s = snapshot(
        [owned("StatefulSet", "db", "apps/v1")]
            .into_iter()
            .chain(every_kind()),
    );
    let index = ControllerIndex::new(&s.daemonsets, &s.controllers);
    let (_, why) = index.blocks(&s.pods[0], 0).unwrap();
    assert_eq!(
        why,
        "pod default/bar's StatefulSet db is not in the cluster: nothing would recreate the pod elsewhere"
    );
    assert!(!below(-1, 3) && below(2, 3) && !below(3, 3));
}
