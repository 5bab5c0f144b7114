#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The executor against the simulated fleet over HTTPS: scale-ups and their stale-plan
//! check, dry runs and a closed write gate, machine deletions, full node removals (drain,
//! mark, decrement), rollbacks (a refusing PodDisruptionBudget, a group at min, an empty
//! node that gained pods). Start-up recovery: `hub_recovery.rs`.

use crate::hub_support;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use fleetscaler::cluster::error::Category;
use fleetscaler::cluster::executor::{
    CORDONED_ANNOTATION, DrainTiming, Executor, ExecutorConfig, SCALE_DOWN_FROM_ANNOTATION,
    SCALE_DOWN_GROUP_ANNOTATION,
};
use fleetscaler::cluster::gate::{self, WriteGate};
use fleetscaler::cluster::outcome::{Action, Entry, Outcome};
use fleetscaler::engine::nodegroups::NodeGroupId;
use fleetscaler::engine::plan::{FixTargetSize, MachineDeletion, ScaleDownAction, ScaleUpAction};
use fleetscaler::model::ObjectKey;
use fleetscaler::model::node::TO_BE_DELETED_TAINT;
use fleetscaler::sim::settings::Flavor;
use hub_support::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

pub(crate) const LIMIT: Duration = Duration::from_secs(10);

pub(crate) async fn executor(client: &Client, gate: WriteGate, dry_run: bool) -> Executor {
    Executor::new(
        client.clone(),
        ExecutorConfig {
            request_timeout: Duration::from_secs(5),
            dry_run,
            gate,
            apis: machine_apis(client).await,
        },
    )
    .with_drain_timing(DrainTiming {
        eviction_retry: Duration::from_millis(50),
        poll: Duration::from_millis(20),
        headroom: Duration::from_secs(5),
    })
}

/// A simulated cluster, a client to it, its snapshot, and one worker group with its nodes.
pub(crate) struct Bed {
    pub(crate) fleet: fleetscaler::sim::fleet::Fleet,
    pub(crate) c: Client,
    pub(crate) settings: fleetscaler::engine::settings::Settings,
    pub(crate) snap: fleetscaler::model::ClusterSnapshot,
    pub(crate) group: NodeGroupId,
    pub(crate) nodes: Vec<String>,
}

pub(crate) async fn bed(flavor: Flavor, workloads: bool, per_group: usize, zone: char) -> Bed {
    let fleet = fleet(flavor, workloads, per_group).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let settings = settings();
    let snap = snapshot(&c, flavor).await;
    let group = worker_group(cluster, flavor, zone);
    let (nodes, _) = members(&snap, &settings, &group);
    Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        nodes,
    }
}

pub(crate) fn none() -> HashSet<Arc<str>> {
    HashSet::new()
}

fn scale_up(group: &NodeGroupId, from: u64, to: u64) -> ScaleUpAction {
    ScaleUpAction {
        node_group: group.clone(),
        from,
        to,
        pods: vec![],
        reason: "test".into(),
    }
}

pub(crate) fn scale_down(group: &NodeGroupId, node: &str, empty: bool) -> ScaleDownAction {
    ScaleDownAction {
        node: node.into(),
        node_group: group.clone(),
        empty,
        unready: false,
        pods: vec![],
        reason: "test".into(),
    }
}

pub(crate) fn deletion(
    group: &NodeGroupId,
    flavor: Flavor,
    machine: &str,
    lower: bool,
) -> MachineDeletion {
    let ns = match flavor {
        Flavor::OpenShift => "openshift-machine-api",
        Flavor::ClusterApi => "openshift-cluster-api",
    };
    MachineDeletion {
        machine: ObjectKey::new(ns, machine),
        node_group: group.clone(),
        lower_replicas: lower,
        reason: "test".into(),
        cause: None,
    }
}

pub(crate) fn done(e: &Entry) -> &str {
    match &e.outcome {
        Outcome::Done { detail } => detail,
        other => panic!("expected Done for {:?}, got {other:?}", e.action),
    }
}

pub(crate) fn skipped(e: &Entry) -> &str {
    match &e.outcome {
        Outcome::Skipped { reason } => reason,
        other => panic!("expected Skipped for {:?}, got {other:?}", e.action),
    }
}

fn failed(e: &Entry) -> (&str, Category) {
    match &e.outcome {
        Outcome::Failed { error, category } => (error, *category),
        other => panic!("expected Failed for {:?}, got {other:?}", e.action),
    }
}

pub(crate) fn has_taint(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
}

fn cordoned(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// Asserts a node is back as it was: no taint, not cordoned, no cordon record.
pub(crate) async fn assert_clean(client: &Client, node: &str) {
    let n = Api::<Node>::all(client.clone()).get(node).await.unwrap();
    assert!(!has_taint(&n), "{node} still tainted");
    assert!(!cordoned(&n), "{node} still cordoned");
    assert!(!n.annotations().contains_key(CORDONED_ANNOTATION));
}

/// Asserts a machine carries none of the executor's marks.
async fn assert_unmarked(client: &Client, flavor: Flavor, machine: &str) {
    let m = machine_api(client, flavor, "Machine")
        .await
        .get(machine)
        .await
        .unwrap();
    let a = m.annotations();
    for key in [SCALE_DOWN_FROM_ANNOTATION, SCALE_DOWN_GROUP_ANNOTATION] {
        assert!(!a.contains_key(key), "{machine} still has {key}");
    }
    assert!(
        !a.keys().any(|k| k.ends_with("/delete-machine")),
        "{machine} still marked"
    );
}

/// The verbs of the requests to MachineSets' `scale` a simulated cluster answered.
fn scale_calls(cluster: &fleetscaler::sim::fleet::ClusterHandle) -> Vec<String> {
    let records = cluster.cluster.requests.records();
    let scale = records
        .into_iter()
        .filter(|r| r.resource == "machinesets" && r.subresource == "scale");
    scale.map(|r| r.verb).collect()
}

#[tokio::test]
async fn scale_up_raises_replicas_once_and_never_writes_a_stale_plan() {
    let flavor = Flavor::OpenShift;
    let fleet = fleet(flavor, false, 1).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let settings = settings();
    let snap = snapshot(&c, flavor).await;
    let group = worker_group(cluster, flavor, 'a');
    let exec = executor(&c, WriteGate::always_open(), false).await;

    let mut plan = empty_plan(&snap, &settings);
    plan.scale_up = vec![scale_up(&group, 1, 2)];
    cluster.cluster.requests.enable();
    let run = exec.execute(&plan, &snap, &settings, &none()).await;
    assert_eq!(run.entries.len(), 1);
    assert!(
        done(&run.entries[0]).ends_with("replicas 1 -> 2"),
        "{:?}",
        run.entries
    );
    // Written against the snapshot's version: the Scale was not read first.
    assert_eq!(scale_calls(cluster), ["update"]);
    assert_eq!(replicas(&c, flavor, &group).await, 2);

    // The same plan again: the group has moved on, nothing is written (the write against
    // the snapshot's version gets 409, and the Scale read then shows the plan stale).
    let (_, _, name) = parts(&group);
    let sets = machine_api(&c, flavor, "MachineSet").await;
    // The controllers write the status; only a write of the spec bumps the generation.
    let generation = sets.get(&name).await.unwrap().metadata.generation;
    let again = exec.execute(&plan, &snap, &settings, &none()).await;
    let reason = skipped(&again.entries[0]);
    assert!(
        reason.contains("it saw 1 replicas") && reason.contains("has 2 now"),
        "{reason}"
    );
    assert_eq!(
        sets.get(&name).await.unwrap().metadata.generation,
        generation
    );
    assert_eq!(replicas(&c, flavor, &group).await, 2);

    // A plan made on a stale view, one above the max, and a target fix.
    plan.scale_up = vec![scale_up(&group, 5, 6), scale_up(&group, 2, 4)];
    plan.fix_target_size = vec![FixTargetSize {
        node_group: group.clone(),
        from: 2,
        to: 1,
        reason: "test".into(),
        cause: fleetscaler::engine::reason::FailureKind::Timeout,
    }];
    let run = exec.execute(&plan, &snap, &settings, &none()).await;
    assert!(matches!(
        run.entries[0].action,
        Action::FixTargetSize { .. }
    ));
    assert!(done(&run.entries[0]).ends_with("replicas 2 -> 1"));
    let stale = skipped(&run.entries[1]);
    assert!(
        stale.contains("saw 5 replicas") && stale.contains("has 1 now"),
        "{stale}"
    );
    let over = skipped(&run.entries[2]);
    assert!(over.contains("saw 2 replicas"), "{over}");
    plan.fix_target_size.clear();
    plan.scale_up = vec![scale_up(&group, 1, 4)];
    let run = exec.execute(&plan, &snap, &settings, &none()).await;
    assert!(skipped(&run.entries[0]).contains("exceed its max size 3"));
    assert_eq!(replicas(&c, flavor, &group).await, 1);
    fleet.shutdown().await;
}

#[tokio::test]
async fn one_plan_raises_several_groups_each_reported_in_the_plans_order() {
    let flavor = Flavor::ClusterApi;
    let Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        ..
    } = bed(flavor, false, 1, 'c').await;
    let cluster = fleet.cluster(1).unwrap();
    let others = ['a', 'b'].map(|zone| worker_group(cluster, flavor, zone));
    let groups: Vec<_> = std::iter::once(group).chain(others).collect();
    let exec = executor(&c, WriteGate::always_open(), false).await;
    let mut plan = empty_plan(&snap, &settings);
    plan.scale_up = groups.iter().map(|g| scale_up(g, 1, 3)).collect();
    // One more for the first group, from a count it no longer has once the first lands.
    plan.scale_up.push(scale_up(&groups[0], 1, 2));
    let run = exec.execute(&plan, &snap, &settings, &none()).await;
    let reported: Vec<_> = run.entries.iter().map(|e| e.action.clone()).collect();
    let planned: Vec<_> = plan
        .scale_up
        .iter()
        .map(|s| Action::ScaleUp {
            group: s.node_group.clone(),
            from: s.from,
            to: s.to,
        })
        .collect();
    assert_eq!(reported, planned);
    for (entry, group) in run.entries.iter().zip(&groups) {
        assert!(done(entry).ends_with("replicas 1 -> 3"), "{entry:?}");
        assert_eq!(replicas(&c, flavor, group).await, 3);
    }
    // The group lock orders the two writes to the first group: the later one finds it moved.
    assert!(skipped(&run.entries[3]).contains("has 3 now"), "{run:?}");
    fleet.shutdown().await;
}

#[tokio::test]
async fn a_dry_run_and_a_closed_gate_write_nothing() {
    let flavor = Flavor::OpenShift;
    let fleet = fleet(flavor, false, 2).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let settings = settings();
    let snap = snapshot(&c, flavor).await;
    let group = worker_group(cluster, flavor, 'a');
    let (nodes, machines) = members(&snap, &settings, &group);
    let mut plan = empty_plan(&snap, &settings);
    plan.scale_up = vec![scale_up(&group, 2, 3)];
    plan.delete_failed_machines = vec![deletion(&group, flavor, &machines[0], true)];
    plan.scale_down = vec![scale_down(&group, &nodes[1], true)];

    let (tx, closed) = gate::channel(false);
    for (exec, why) in [
        (
            executor(&c, WriteGate::always_open(), true).await,
            "dry run",
        ),
        (executor(&c, closed, false).await, "not the leader"),
    ] {
        let run = exec.execute(&plan, &snap, &settings, &none()).await;
        assert_eq!(run.entries.len(), 3);
        assert!(run.removals.is_empty());
        for e in &run.entries {
            assert_eq!(skipped(e), why);
        }
    }
    assert_eq!(replicas(&c, flavor, &group).await, 2);
    assert_clean(&c, &nodes[1]).await;
    assert_unmarked(&c, flavor, &machines[0]).await;

    // A removal whose leader steps down before it runs writes nothing more and leaves the
    // taint for the next leader's recovery.
    tx.send_replace(true);
    let (tx2, gate2) = gate::channel(true);
    let exec = executor(&c, gate2, false).await;
    plan.scale_up.clear();
    plan.delete_failed_machines.clear();
    let mut run = exec.execute(&plan, &snap, &settings, &none()).await;
    done(&run.entries[0]);
    tx2.send_replace(false);
    let entry = run.removals.pop().unwrap().run().await;
    assert!(skipped(&entry).starts_with("not the leader"), "{entry:?}");
    assert_unmarked(&c, flavor, &machine_of(&snap, &nodes[1])).await;
    let n = Api::<Node>::all(c.clone()).get(&nodes[1]).await.unwrap();
    assert!(has_taint(&n));
    // Recovery with the gate closed reports, and writes nothing.
    let rec = exec.recover().await;
    assert_eq!(rec.len(), 1, "{rec:?}");
    assert_eq!(skipped(&rec[0]), "not the leader");
    assert!(has_taint(
        &Api::<Node>::all(c.clone()).get(&nodes[1]).await.unwrap()
    ));
    drop(tx);
    fleet.shutdown().await;
}

/// The live pods owned by ReplicaSets, by owner.
async fn replica_pods(client: &Client) -> Vec<(String, String)> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    pods.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let o = p
                .owner_references()
                .iter()
                .find(|o| o.kind == "ReplicaSet")?;
            Some((o.name.clone(), p.name_any()))
        })
        .collect()
}

#[tokio::test]
async fn a_node_removal_drains_marks_lowers_and_the_node_goes() {
    let flavor = Flavor::OpenShift;
    let Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        nodes,
    } = bed(flavor, true, 2, 'a').await;
    let node = nodes[0].clone();
    let machine = machine_of(&snap, &node);
    let exec = executor(&c, WriteGate::always_open(), false).await;
    let before = replica_pods(&c).await;

    let mut plan = empty_plan(&snap, &settings);
    plan.scale_down = vec![scale_down(&group, &node, false)];
    let mut run = exec.execute(&plan, &snap, &settings, &none()).await;
    assert!(
        done(&run.entries[0])
            .contains("tainted ToBeDeletedByClusterAutoscaler:NoSchedule and cordoned")
    );
    let n = Api::<Node>::all(c.clone()).get(&node).await.unwrap();
    assert!(has_taint(&n) && cordoned(&n));
    let removal = run.removals.pop().unwrap();
    assert_eq!(&**removal.node(), node);
    assert_eq!(removal.group(), &group);

    // Already in flight: the runner's next pass leaves it alone.
    let in_flight: HashSet<Arc<str>> = [Arc::from(node.as_str())].into();
    let again = exec.execute(&plan, &snap, &settings, &in_flight).await;
    assert_eq!(skipped(&again.entries[0]), "already being removed");

    let entry = tokio::spawn(removal.run()).await.unwrap();
    let detail = done(&entry);
    let Action::RemoveNode { evicted, .. } = &entry.action else {
        panic!("{entry:?}")
    };
    assert!(!evicted.is_empty(), "{entry:?}");
    assert!(
        detail.contains(&format!(
            "Machine openshift-machine-api/{machine} marked for deletion"
        )),
        "{detail}"
    );
    assert!(detail.ends_with("replicas 2 -> 1"), "{detail}");
    assert_eq!(replicas(&c, flavor, &group).await, 1);

    let nodes_api = Api::<Node>::all(c.clone());
    eventually(LIMIT, "the node gone", || async {
        nodes_api.get_opt(&node).await.ok()?.is_none().then_some(())
    })
    .await;
    // The evicted pods' owners made new pods for them.
    let evicted: HashSet<String> = evicted.iter().map(|p| p.name.to_string()).collect();
    let owners: BTreeSet<&String> = before
        .iter()
        .filter(|(_, p)| evicted.contains(p))
        .map(|(o, _)| o)
        .collect();
    assert!(!owners.is_empty());
    let old: HashSet<&String> = before.iter().map(|(_, p)| p).collect();
    eventually(LIMIT, "the evicted pods replaced", || async {
        let now = replica_pods(&c).await;
        let renewed = owners
            .iter()
            .all(|o| now.iter().any(|(owner, p)| owner == *o && !old.contains(p)));
        (renewed && !now.iter().any(|(_, p)| evicted.contains(p))).then_some(())
    })
    .await;
    fleet.shutdown().await;
}

#[tokio::test]
async fn a_refusing_disruption_budget_fails_the_removal_and_everything_is_rolled_back() {
    let flavor = Flavor::OpenShift;
    let fleet = fleet(flavor, false, 2).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let settings = fleetscaler::engine::settings::Settings {
        max_pod_eviction_time: Duration::from_millis(400),
        ..settings()
    };
    let snap = snapshot(&c, flavor).await;
    let group = worker_group(cluster, flavor, 'a');
    let (nodes, _) = members(&snap, &settings, &group);
    let node = nodes[0].clone();
    let machine = machine_of(&snap, &node);

    let pods: Api<Pod> = Api::namespaced(c.clone(), "shop");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "held", "labels": {"app": "held"}, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "held", "uid": "u-held", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "held"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "held"}}}}))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(c.clone(), "shop")
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();
    eventually(LIMIT, "the held pod running", || async {
        let p = pods.get("held").await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;

    let exec = executor(&c, WriteGate::always_open(), false).await;
    let mut plan = empty_plan(&snap, &settings);
    plan.scale_down = vec![scale_down(&group, &node, false)];
    let mut run = exec.execute(&plan, &snap, &settings, &none()).await;
    done(&run.entries[0]);
    let entry = run.removals.pop().unwrap().run().await;
    let (error, category) = failed(&entry);
    assert_eq!(category, Category::TooManyRequests);
    assert!(
        error.contains("shop/held") && error.contains("disruption budget"),
        "{error}"
    );
    assert!(
        error.ends_with(&format!("taint removed from node {node} and uncordoned")),
        "{error}"
    );
    assert_clean(&c, &node).await;
    assert_unmarked(&c, flavor, &machine).await;
    assert_eq!(replicas(&c, flavor, &group).await, 2);
    assert!(pods.get("held").await.is_ok());
    fleet.shutdown().await;
}

#[tokio::test]
async fn a_removal_from_a_group_at_min_fails_and_rolls_back() {
    let flavor = Flavor::ClusterApi;
    let Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        nodes,
    } = bed(flavor, false, 1, 'a').await;
    let machine = machine_of(&snap, &nodes[0]);
    let exec = executor(&c, WriteGate::always_open(), false).await;

    let mut plan = empty_plan(&snap, &settings);
    plan.scale_down = vec![scale_down(&group, &nodes[0], true)];
    let mut run = exec.execute(&plan, &snap, &settings, &none()).await;
    done(&run.entries[0]);
    // Marking again is idempotent: no second taint.
    let again = exec.execute(&plan, &snap, &settings, &none()).await;
    assert!(done(&again.entries[0]).contains("already tainted"));
    let n = Api::<Node>::all(c.clone()).get(&nodes[0]).await.unwrap();
    let taints = n.spec.unwrap().taints.unwrap();
    assert_eq!(
        taints
            .iter()
            .filter(|t| t.key == TO_BE_DELETED_TAINT)
            .count(),
        1
    );
    let entry = run.removals.pop().unwrap().run().await;
    let (error, category) = failed(&entry);
    assert_eq!(category, Category::Conflict);
    assert!(error.contains("at its min size 1"), "{error}");
    assert_clean(&c, &nodes[0]).await;
    assert_unmarked(&c, flavor, &machine).await;
    assert_eq!(replicas(&c, flavor, &group).await, 1);
    fleet.shutdown().await;
}

#[tokio::test]
async fn an_empty_node_that_gained_pods_is_not_removed() {
    let flavor = Flavor::OpenShift;
    let Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        nodes,
    } = bed(flavor, false, 2, 'b').await;
    let exec = executor(&c, WriteGate::always_open(), false).await;
    let mut plan = empty_plan(&snap, &settings);
    plan.scale_down = vec![scale_down(&group, &nodes[0], true)];
    let mut run = exec.execute(&plan, &snap, &settings, &none()).await;
    done(&run.entries[0]);

    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "late", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "late", "uid": "u-late", "controller": true}]},
        "spec": {"nodeName": nodes[0], "containers": [{"name": "c", "image": "i"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let entry = run.removals.pop().unwrap().run().await;
    let (error, category) = failed(&entry);
    assert_eq!(category, Category::Conflict);
    assert!(
        error.contains("now has pods that must move: default/late"),
        "{error}"
    );
    assert_clean(&c, &nodes[0]).await;
    assert!(pods.get("late").await.is_ok(), "nothing was evicted");
    assert_eq!(replicas(&c, flavor, &group).await, 2);
    fleet.shutdown().await;
}

#[tokio::test]
async fn parallel_removals_in_one_group_each_lower_it_by_one() {
    let flavor = Flavor::OpenShift;
    let Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        nodes,
    } = bed(flavor, false, 3, 'c').await;
    let exec = executor(&c, WriteGate::always_open(), false).await;
    let mut plan = empty_plan(&snap, &settings);
    plan.scale_down = vec![
        scale_down(&group, &nodes[0], true),
        scale_down(&group, &nodes[1], true),
    ];
    let run = exec.execute(&plan, &snap, &settings, &none()).await;
    assert_eq!(run.removals.len(), 2);
    let tasks: Vec<_> = run
        .removals
        .into_iter()
        .map(|r| tokio::spawn(r.run()))
        .collect();
    let mut details = Vec::new();
    for t in tasks {
        details.push(done(&t.await.unwrap()).to_string());
    }
    details.sort_by_key(|d| d.ends_with("2 -> 1"));
    assert!(details[0].ends_with("replicas 3 -> 2"), "{details:?}");
    assert!(details[1].ends_with("replicas 2 -> 1"), "{details:?}");
    assert_eq!(replicas(&c, flavor, &group).await, 1);
    let nodes_api = Api::<Node>::all(c.clone());
    eventually(LIMIT, "both nodes gone, the third kept", || async {
        let gone = nodes_api.get_opt(&nodes[0]).await.ok()?.is_none()
            && nodes_api.get_opt(&nodes[1]).await.ok()?.is_none();
        (gone && nodes_api.get_opt(&nodes[2]).await.ok()?.is_some()).then_some(())
    })
    .await;
    fleet.shutdown().await;
}

/// A pod that arrives on a node after the plan chose it, and that must keep its node
/// (`safe-to-evict: "false"`, no controller), stops the drain: nothing is evicted and the
/// taint comes off again.
#[tokio::test]
async fn a_pod_that_arrived_after_the_plan_and_must_stay_stops_the_drain() {
    let flavor = Flavor::OpenShift;
    let Bed {
        fleet,
        c,
        settings,
        snap,
        group,
        nodes,
    } = bed(flavor, true, 2, 'a').await;
    let exec = executor(&c, WriteGate::always_open(), false).await;
    let mut plan = empty_plan(&snap, &settings);
    plan.scale_down = vec![scale_down(&group, &nodes[0], false)];
    let mut run = exec.execute(&plan, &snap, &settings, &none()).await;
    done(&run.entries[0]);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let precious: Pod = serde_json::from_value(json!({
        "metadata": {"name": "precious",
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
        "spec": {"nodeName": nodes[0], "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "x"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &precious)
        .await
        .unwrap();
    let uid = pods.get("precious").await.unwrap().metadata.uid;

    let entry = run.removals.pop().unwrap().run().await;
    let (error, _) = failed(&entry);
    assert!(
        error.contains("default/precious") && error.contains("must stay"),
        "{error}"
    );
    let after = pods.get("precious").await.unwrap();
    assert_eq!(after.metadata.uid, uid);
    assert!(after.metadata.deletion_timestamp.is_none(), "not evicted");
    assert_clean(&c, &nodes[0]).await;
    fleet.shutdown().await;
}
