#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Start-up recovery against the simulated fleet over HTTPS: an interrupted decrement
//! finished, stale taints cleared, every page of Nodes and Machines read.

use crate::hub_executor::{LIMIT, assert_clean, done, executor, has_taint, skipped};
use crate::hub_support::*;

use std::collections::BTreeSet;

use fleetscaler::cluster::executor::{
    CORDONED_ANNOTATION, SCALE_DOWN_FROM_ANNOTATION, SCALE_DOWN_GROUP_ANNOTATION,
};
use fleetscaler::cluster::gate::WriteGate;
use fleetscaler::cluster::outcome::Action;
use fleetscaler::engine::nodegroups::NodeGroupId;
use fleetscaler::model::ObjectKey;
use fleetscaler::model::node::TO_BE_DELETED_TAINT;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

#[tokio::test]
async fn recovery_finishes_an_interrupted_decrement_and_clears_a_stale_taint() {
    let flavor = Flavor::OpenShift;
    let fleet = fleet(flavor, false, 2).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let settings = settings();
    let snap = snapshot(&c, flavor).await;
    let ms = machine_api(&c, flavor, "Machine").await;
    let nodes_api = Api::<Node>::all(c.clone());
    let taint = json!({"key": TO_BE_DELETED_TAINT, "value": "1700000000", "effect": "NoSchedule"});

    // Group a: killed after marking a machine (and tainting its node), before the decrement.
    let a = worker_group(cluster, flavor, 'a');
    let (a_nodes, _) = members(&snap, &settings, &a);
    let marked = machine_of(&snap, &a_nodes[0]);
    let annotate = |from: &str, group: Option<&NodeGroupId>| {
        json!({"metadata": {"annotations": {
            "machine.openshift.io/delete-machine": "2026-01-01T00:00:00Z",
            SCALE_DOWN_FROM_ANNOTATION: from,
            SCALE_DOWN_GROUP_ANNOTATION: group.map(NodeGroupId::as_str)}}})
    };
    // Without the group recorded, it is found through the machine's MachineSet.
    ms.patch(
        &marked,
        &PatchParams::default(),
        &Patch::Merge(annotate("2", None)),
    )
    .await
    .unwrap();
    let tainted = json!({"spec": {"taints": [taint.clone()], "unschedulable": true},
        "metadata": {"annotations": {CORDONED_ANNOTATION: "true"}}});
    nodes_api
        .patch(
            &a_nodes[0],
            &PatchParams::default(),
            &Patch::Merge(tainted.clone()),
        )
        .await
        .unwrap();
    // Group b: killed after tainting and cordoning a node, before its machine was marked.
    let b = worker_group(cluster, flavor, 'b');
    let (b_nodes, _) = members(&snap, &settings, &b);
    nodes_api
        .patch(&b_nodes[0], &PatchParams::default(), &Patch::Merge(tainted))
        .await
        .unwrap();
    // Group c: killed after the decrement (recorded 3, the group has 2): nothing to do.
    let cg = worker_group(cluster, flavor, 'c');
    let (c_nodes, _) = members(&snap, &settings, &cg);
    let done_machine = machine_of(&snap, &c_nodes[0]);
    ms.patch(
        &done_machine,
        &PatchParams::default(),
        &Patch::Merge(annotate("3", Some(&cg))),
    )
    .await
    .unwrap();

    // A dry run reports without writing.
    let dry = executor(&c, WriteGate::always_open(), true)
        .await
        .recover()
        .await;
    assert_eq!(dry.len(), 2, "{dry:?}");
    assert!(dry.iter().all(|e| skipped(e) == "dry run"));
    assert_eq!(replicas(&c, flavor, &a).await, 2);

    let exec = executor(&c, WriteGate::always_open(), false).await;
    let entries = exec.recover().await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(
        entries[0].action,
        Action::FinishDecrement {
            group: a.clone(),
            machine: ObjectKey::new("openshift-machine-api", &marked)
        }
    );
    assert!(done(&entries[0]).ends_with("replicas 2 -> 1"));
    assert_eq!(
        entries[1].action,
        Action::ClearStaleTaint {
            node: b_nodes[0].as_str().into()
        }
    );
    done(&entries[1]);
    assert_eq!(replicas(&c, flavor, &a).await, 1);
    assert_eq!(replicas(&c, flavor, &cg).await, 2);
    assert_clean(&c, &b_nodes[0]).await;
    // The node of the marked machine keeps its taint: it is going away (the machine
    // controller may already have removed it, with its machine, once replicas were lowered).
    if let Some(node) = nodes_api.get_opt(&a_nodes[0]).await.unwrap() {
        assert!(
            has_taint(&node),
            "recovery cleared the taint of a departing node"
        );
    }
    // Recovery is idempotent.
    assert_eq!(exec.recover().await, vec![]);
    eventually(LIMIT, "the marked machine and its node gone", || async {
        let m = ms.get_opt(&marked).await.ok()?;
        let n = nodes_api.get_opt(&a_nodes[0]).await.ok()?;
        (m.is_none() && n.is_none()).then_some(())
    })
    .await;
    fleet.shutdown().await;
}

/// Recovery reads Nodes and Machines a page (500) at a time: a stale taint is found on the
/// node whose name sorts last and on the node of the machine whose name sorts last.
#[tokio::test]
async fn recovery_reads_every_page_of_nodes_and_machines() {
    let flavor = Flavor::OpenShift;
    let fleet = fleet(flavor, false, 200).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let snap = snapshot(&c, flavor).await;
    assert!(snap.nodes.len() > 500 && snap.machines.len() > 500);
    let groups = fleetscaler::engine::nodegroups::discover(&snap, &[]);
    let node_of_machine = |mi: usize| {
        let ni = groups.machine_of_node.iter().position(|m| *m == Some(mi));
        snap.nodes[ni.unwrap()].name.to_string()
    };
    let last_machine = (0..snap.machines.len())
        .max_by_key(|mi| &snap.machines[*mi].key.name)
        .unwrap();
    let last_node = (0..snap.nodes.len())
        .filter(|ni| groups.machine_of_node[*ni].is_some())
        .max_by_key(|ni| &snap.nodes[*ni].name)
        .unwrap();
    let stale: BTreeSet<String> = [
        node_of_machine(last_machine),
        snap.nodes[last_node].name.to_string(),
    ]
    .into();
    let nodes_api = Api::<Node>::all(c.clone());
    let taint = json!({"key": TO_BE_DELETED_TAINT, "value": "1700000000", "effect": "NoSchedule"});
    for node in &stale {
        let tainted = json!({"spec": {"taints": [taint.clone()]}});
        let params = PatchParams::default();
        nodes_api
            .patch(node, &params, &Patch::Merge(tainted))
            .await
            .unwrap();
    }

    let entries = executor(&c, WriteGate::always_open(), false)
        .await
        .recover()
        .await;
    let cleared: BTreeSet<String> = entries
        .iter()
        .map(|e| match &e.action {
            Action::ClearStaleTaint { node } => node.to_string(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(cleared, stale);
    for node in &stale {
        assert_clean(&c, node).await;
    }
    fleet.shutdown().await;
}
