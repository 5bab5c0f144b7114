use serde_json::json;

use super::*;
use crate::model::controller::ControllerKind;

fn node(name: &str, ready: bool) -> Object {
    let status = if ready { "True" } else { "False" };
    Object::Node(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "status": {
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": status}]
            }
        }))
        .unwrap(),
    ))
}

fn pod(name: &str, cpu: &str, unschedulable: bool) -> Object {
    let conditions = if unschedulable {
        json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    } else {
        json!([])
    };
    Object::Pod(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending", "conditions": conditions}
        }))
        .unwrap(),
    ))
}

fn machineset(name: &str, replicas: i64) -> Object {
    Object::Dynamic(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "MachineSet",
            "metadata": {"name": name, "namespace": "openshift-machine-api", "uid": "u",
                "annotations": {
                    "machine.openshift.io/cluster-api-autoscaler-node-group-min-size": "1",
                    "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "5"}},
            "spec": {"replicas": replicas}
        }))
        .unwrap(),
    ))
}

const MS: Kind = Kind::Scalable(MachineApiGroup::OpenShift, ScalableKind::MachineSet);

use crate::model::{MachineApiGroup, ScalableKind};

fn update(kind: Kind, change: Change) -> Update {
    Update { kind, change }
}

fn synced_cache() -> Cache {
    let mut c = Cache::new(&[Kind::Node, Kind::Pod, MS]);
    let now = Instant::now();
    for kind in [Kind::Node, Kind::Pod, MS] {
        c.apply(update(kind, Change::Init), now);
        c.apply(update(kind, Change::InitDone), now);
    }
    c
}

#[tokio::test]
async fn is_synced_only_once_every_kind_listed_and_wakes_no_one_before() {
    let mut c = Cache::new(&[Kind::Node, Kind::Pod]);
    let now = Instant::now();
    assert!(!c.apply(update(Kind::Node, Change::Init), now));
    assert!(!c.apply(update(Kind::Node, Change::InitApply(node("a", true))), now));
    assert!(!c.apply(update(Kind::Node, Change::InitDone), now));
    assert_eq!(c.unsynced(), [Kind::Pod]);
    // An unschedulable pod before the pods have listed wakes no one: the first pass waits.
    assert!(!c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", true))), now));
    assert!(c.apply(update(Kind::Pod, Change::InitDone), now));
    assert!(c.is_synced());
    assert_eq!(c.snapshot().nodes.len(), 1);
}

#[tokio::test]
async fn wakes_on_a_pod_turning_unschedulable_and_a_node_turning_ready_only() {
    let mut c = synced_cache();
    let now = Instant::now();
    assert!(!c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", false))), now));
    assert_eq!(c.turned_pending(), 0);
    assert!(c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", true))), now));
    // Still unschedulable: the runner already knows.
    assert!(!c.apply(update(Kind::Pod, Change::Apply(pod("p", "2", true))), now));
    assert_eq!(c.turned_pending(), 1, "one pod turned pending, once");
    assert!(c.apply(update(Kind::Node, Change::Apply(node("a", false))), now));
    assert!(!c.apply(update(Kind::Node, Change::Apply(node("a", false))), now));
    assert!(c.apply(update(Kind::Node, Change::Apply(node("a", true))), now));
    assert!(!c.apply(update(Kind::Pod, Change::Delete(pod("p", "1", true))), now));
    assert!(c.snapshot().pods.is_empty());
}

/// What a pass reads, counted: a node's heartbeat or a pod's probe projects the same and is
/// no change (an idle cluster's passes are skipped on equal counts); anything else is.
#[tokio::test]
async fn changes_count_what_a_pass_reads_and_nothing_else() {
    let mut c = synced_cache();
    let now = Instant::now();
    let base = c.changes();
    c.apply(update(Kind::Node, Change::Apply(node("a", true))), now);
    assert_eq!(c.changes(), base + 1);
    c.apply(update(Kind::Node, Change::Apply(node("a", true))), now);
    c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", false))), now);
    let seen = c.changes();
    assert_eq!(seen, base + 2, "the same node again is no change");
    c.take_changed_kinds();
    c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", false))), now);
    c.apply(update(Kind::Node, Change::Resumed), now);
    assert_eq!(
        c.changes(),
        seen,
        "the same pod, a watch resumed: no change"
    );
    assert_eq!(c.take_changed_kinds(), "", "nothing changed");
    c.apply(update(Kind::Pod, Change::Apply(pod("p", "2", false))), now);
    c.apply(update(MS, Change::Apply(machineset("w", 2))), now);
    c.apply(update(Kind::Pod, Change::Delete(pod("p", "2", false))), now);
    assert_eq!(c.changes(), seen + 3);
    let kinds = c.take_changed_kinds();
    assert!(
        kinds.contains("pods") && kinds.contains("machinesets"),
        "{kinds}"
    );
    assert_eq!(c.take_changed_kinds(), "", "taken");
}

#[tokio::test]
async fn node_groups_reach_the_snapshot_when_they_change() {
    let mut c = synced_cache();
    let now = Instant::now();
    assert!(c.apply(update(MS, Change::Apply(machineset("a", 2))), now));
    assert!(!c.apply(update(MS, Change::Apply(machineset("a", 2))), now));
    assert_eq!(c.snapshot().scalables[0].replicas, 2);
    assert!(c.apply(update(MS, Change::Apply(machineset("a", 3))), now));
    assert_eq!(c.snapshot().scalables[0].replicas, 3);
    assert!(c.apply(update(MS, Change::Delete(machineset("a", 3))), now));
    assert!(c.snapshot().scalables.is_empty());
}

#[tokio::test]
async fn a_relist_forgets_objects_deleted_while_the_watch_was_down() {
    let mut c = synced_cache();
    let now = Instant::now();
    for name in ["a", "b", "c"] {
        c.apply(update(Kind::Node, Change::Apply(node(name, true))), now);
    }
    c.apply(update(Kind::Node, Change::Init), now);
    c.apply(update(Kind::Node, Change::InitApply(node("b", true))), now);
    c.apply(update(Kind::Node, Change::InitDone), now);
    let names: Vec<_> = c
        .snapshot()
        .nodes
        .iter()
        .map(|n| n.name.to_string())
        .collect();
    assert_eq!(names, ["b"]);
}

#[tokio::test]
async fn an_unreadable_pod_is_reported_and_kept_holding_its_node() {
    let mut c = synced_cache();
    let now = Instant::now();
    c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", false))), now);
    c.apply(
        update(Kind::Pod, Change::Apply(pod("p", "lots", false))),
        now,
    );
    // Kept as a placeholder that holds its node and asks for nothing.
    let kept = &c.snapshot().pods[0];
    assert_eq!(
        kept.extras().safe_to_evict,
        Some(crate::model::pod::SafeToEvict::False)
    );
    assert_eq!(kept.requests(), &crate::model::Resources::default());
    let problems: Vec<_> = c.problems().collect();
    assert_eq!(problems.len(), 1);
    assert!(problems[0].starts_with("pods shop/p: "), "{problems:?}");
    assert!(problems[0].contains("lots"), "{problems:?}");
    c.apply(update(Kind::Pod, Change::Apply(pod("p", "1", false))), now);
    assert_eq!(c.problems().count(), 0);
    assert_eq!(c.snapshot().pods.len(), 1);
    assert_eq!(c.snapshot().pods[0].extras().safe_to_evict, None);
}

#[tokio::test]
async fn an_unreadable_node_is_kept_unusable_so_its_machine_stays_registered() {
    let mut c = synced_cache();
    let now = Instant::now();
    let Object::Node(mut bad) = node("a", true) else {
        unreachable!()
    };
    let status = bad.status.as_mut().unwrap();
    status.capacity.as_mut().unwrap().insert(
        "example.com/widgets".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("10E".into()),
    );
    c.apply(update(Kind::Node, Change::Apply(Object::Node(bad))), now);
    let n = &c.snapshot().nodes[0];
    assert_eq!(&*n.name, "a");
    assert!(!n.is_ready() && n.scale_down_disabled && n.unschedulable && n.max_pods == 0);
    assert!(
        n.readiness
            .reason
            .as_deref()
            .unwrap()
            .contains("cannot be read")
    );
    assert_eq!(c.problems().count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_watch_failing_for_long_makes_the_cache_stale_until_it_recovers() {
    let mut c = synced_cache();
    let start = Instant::now();
    c.apply(
        update(Kind::Pod, Change::Error(WatchError::new("503"))),
        start,
    );
    tokio::time::advance(Duration::from_secs(30)).await;
    c.apply(
        update(Kind::Pod, Change::Error(WatchError::new("503 again"))),
        Instant::now(),
    );
    assert_eq!(c.stale(Instant::now(), Duration::from_secs(60)), None);
    tokio::time::advance(Duration::from_secs(31)).await;
    let stale = c.stale(Instant::now(), Duration::from_secs(60)).unwrap();
    assert!(
        stale.contains("pods") && stale.contains("503 again"),
        "{stale}"
    );
    // A watch the API server accepts again proves the kind is read, with no event at all.
    c.apply(update(Kind::Pod, Change::Resumed), Instant::now());
    assert_eq!(c.stale(Instant::now(), Duration::from_secs(60)), None);
    // So does a list page, after the watch had to list again.
    c.apply(
        update(Kind::Node, Change::Error(WatchError::new("410"))),
        Instant::now(),
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(c.stale(Instant::now(), Duration::from_secs(60)).is_some());
    c.apply(update(Kind::Node, Change::Init), Instant::now());
    assert_eq!(c.stale(Instant::now(), Duration::from_secs(60)), None);
}

const RS: Kind = Kind::Controller(ControllerKind::ReplicaSet);
const JOBS: Kind = Kind::Controller(ControllerKind::Job);

fn replicaset(name: &str, replicas: serde_json::Value) -> Object {
    let lean: lean_controller::LeanController<k8s_openapi::api::apps::v1::ReplicaSet> =
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
            "spec": {"replicas": replicas}
        }))
        .unwrap();
    Object::Controller(Box::new(lean.object))
}

/// ReplicaSets are kept as keys and replicas, follow their watch without waking the runner,
/// and their kind is complete; a controller kind not served is not looked up.
#[tokio::test]
async fn controllers_are_kept_as_keys_and_their_kinds_as_served() {
    use crate::model::controller::Listing;
    let mut c = Cache::new(&[Kind::Pod, RS]);
    let now = Instant::now();
    c.apply(update(Kind::Pod, Change::InitDone), now);
    c.apply(
        update(RS, Change::InitApply(replicaset("web", json!(2)))),
        now,
    );
    c.apply(update(RS, Change::InitDone), now);
    assert!(!c.apply(update(RS, Change::Apply(replicaset("api", json!(1)))), now));
    let controllers = &c.snapshot().controllers;
    let replicas: Vec<_> = controllers
        .replica_sets
        .iter()
        .map(|r| r.replicas)
        .collect();
    assert_eq!(replicas, [Some(2), Some(1)]);
    assert_eq!(&*controllers.replica_sets[0].uid, "uid-web");
    assert_eq!(
        controllers.listing(ControllerKind::ReplicaSet),
        &Listing::Complete
    );
    assert_eq!(controllers.listing(ControllerKind::Job), &Listing::Unlisted);
    assert!(!c.apply(update(RS, Change::Delete(replicaset("web", json!(2)))), now));
    assert_eq!(c.snapshot().controllers.replica_sets.len(), 1);
    assert_eq!(c.stats().other, 1);
}

/// An odd replica count is reported on its object, and the controller stays present: its
/// pods are not judged to have lost it.
#[tokio::test]
async fn an_unreadable_controller_is_reported_and_kept() {
    let mut c = Cache::new(&[RS]);
    let now = Instant::now();
    c.apply(
        update(RS, Change::Apply(replicaset("web", json!("many")))),
        now,
    );
    let kept = &c.snapshot().controllers.replica_sets;
    assert_eq!((kept.len(), kept[0].replicas), (1, None));
    let problems: Vec<_> = c.problems().collect();
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("replicasets.apps shop/web: spec.replicas"),
        "{problems:?}"
    );
}

/// A controller kind the hub may not list is given up on without stopping the cluster, and
/// marked unreadable: the drain rules then keep its pods' nodes instead of guessing.
#[tokio::test]
async fn a_controller_kind_refused_is_unreadable() {
    use crate::model::controller::Listing;
    let mut c = Cache::new(&[Kind::Pod, JOBS]);
    let now = Instant::now();
    c.apply(update(Kind::Pod, Change::InitDone), now);
    c.give_up_on(JOBS, "jobs.batch is forbidden");
    assert!(c.is_synced());
    let Listing::Unreadable(why) = c.snapshot().controllers.listing(ControllerKind::Job) else {
        panic!("a refused kind is unreadable");
    };
    assert_eq!(
        &**why,
        "the hub may not list jobs.batch: jobs.batch is forbidden"
    );
}

/// A budget whose selector cannot be read stays cached as unreadable (the drain rules then
/// keep its namespace's pods' nodes), and is reported: dropping it would lift its protection.
#[tokio::test]
async fn an_unreadable_budget_is_kept_unreadable_and_reported() {
    let mut c = Cache::new(&[Kind::PodDisruptionBudget]);
    let pdb = Object::PodDisruptionBudget(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchExpressions": [
                {"key": "app", "operator": "Near", "values": ["web"]}]}}
        }))
        .unwrap(),
    ));
    c.apply(
        update(Kind::PodDisruptionBudget, Change::Apply(pdb)),
        Instant::now(),
    );
    let kept = &c.snapshot().pdbs;
    assert_eq!(kept.len(), 1, "the unreadable budget is kept");
    assert!(kept[0].unreadable.as_deref().unwrap().contains("Near"));
    assert_eq!(c.problems().count(), 1);
}
