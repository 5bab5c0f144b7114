#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Machine deletions against the simulated fleet over HTTPS: mark and lower (or mark and
//! delete at the group's min), a decrement the controller spent on another machine made
//! again, and a mark no watch shows.

use crate::hub_executor::{LIMIT, bed, deletion, done, executor, none, scale_down};
use crate::hub_support::*;

use std::collections::BTreeSet;

use fleetscaler::cluster::executor::{SCALE_DOWN_FROM_ANNOTATION, SCALE_DOWN_GROUP_ANNOTATION};
use fleetscaler::cluster::gate::WriteGate;
use fleetscaler::cluster::outcome::Outcome;
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test]
async fn machine_deletions_mark_and_lower_and_exactly_that_machine_goes() {
    let flavor = Flavor::ClusterApi;
    let fleet = fleet(flavor, false, 2).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let settings = settings();
    let snap = snapshot(&c, flavor).await;
    let exec = executor(&c, WriteGate::always_open(), false).await;
    let group = worker_group(cluster, flavor, 'a');
    let (_, machines) = members(&snap, &settings, &group);
    assert_eq!(machines.len(), 2);
    // A machine deleted without lowering its group (as at min): the group replaces it.
    let at_min = worker_group(cluster, flavor, 'b');
    let (_, b_machines) = members(&snap, &settings, &at_min);

    let mut plan = empty_plan(&snap, &settings);
    plan.delete_failed_machines = vec![deletion(&group, flavor, &machines[0], true)];
    plan.delete_unregistered = vec![deletion(&at_min, flavor, &b_machines[0], false)];
    let run = exec.execute(&plan, &snap, &settings, &none()).await;
    let detail = done(&run.entries[0]);
    assert!(
        detail.contains("marked for deletion") && detail.ends_with("replicas 2 -> 1"),
        "{detail}"
    );
    assert!(done(&run.entries[1]).contains("marked and deleted"));
    assert_eq!(replicas(&c, flavor, &group).await, 1);
    assert_eq!(replicas(&c, flavor, &at_min).await, 2);

    // Repeated before the controllers act: nothing more is lowered.
    let again = exec.execute(&plan, &snap, &settings, &none()).await;
    assert!(matches!(
        again.entries[0].outcome,
        Outcome::Done { .. } | Outcome::Skipped { .. }
    ));
    assert_eq!(replicas(&c, flavor, &group).await, 1);

    let ms = machine_api(&c, flavor, "Machine").await;
    let left = eventually(LIMIT, "the marked machines replaced or gone", || async {
        let names: BTreeSet<String> = ms
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .map(|m| m.name_any())
            .collect();
        let b_count = names
            .iter()
            .filter(|n| n.contains("-worker-us-east-1b"))
            .count();
        (!names.contains(&machines[0]) && !names.contains(&b_machines[0]) && b_count == 2)
            .then_some(names)
    })
    .await;
    assert!(
        left.contains(&machines[1]),
        "the unmarked machine stays: {left:?}"
    );
    assert_eq!(replicas(&c, flavor, &group).await, 1);
    fleet.shutdown().await;
}

/// A machine marked and recorded at 3 replicas, its MachineSet at 2 with 2 machines (this
/// one among them): the controller spent the decrement on another machine, so the removal
/// lowers the group again instead of counting it done, and the machine goes.
#[tokio::test]
async fn a_decrement_the_controller_spent_on_another_machine_is_made_again() {
    let flavor = Flavor::OpenShift;
    let b = bed(flavor, false, 2, 'a').await;
    let (c, group, node) = (&b.c, &b.group, &b.nodes[0]);
    let machine = machine_of(&b.snap, node);
    let marked = json!({"metadata": {"annotations": {
        "machine.openshift.io/delete-machine": "2026-01-01T00:00:00Z",
        SCALE_DOWN_FROM_ANNOTATION: "3",
        SCALE_DOWN_GROUP_ANNOTATION: group.as_str()}}});
    let ms = machine_api(c, flavor, "Machine").await;
    let params = PatchParams::default();
    ms.patch(&machine, &params, &Patch::Merge(marked))
        .await
        .unwrap();
    assert_eq!(replicas(c, flavor, group).await, 2);

    let mut plan = empty_plan(&b.snap, &b.settings);
    plan.scale_down = vec![scale_down(group, node, true)];
    let exec = executor(c, WriteGate::always_open(), false).await;
    let mut run = exec.execute(&plan, &b.snap, &b.settings, &none()).await;
    let entry = tokio::spawn(run.removals.pop().unwrap().run())
        .await
        .unwrap();
    let detail = done(&entry);
    let marked_now = format!("Machine openshift-machine-api/{machine} marked for deletion");
    assert!(
        detail.contains(&marked_now) && detail.ends_with("replicas 2 -> 1"),
        "{detail}"
    );
    assert_eq!(replicas(c, flavor, group).await, 1);
    let nodes_api = Api::<Node>::all(c.clone());
    eventually(LIMIT, "the node gone", || async {
        nodes_api.get_opt(node).await.ok()?.is_none().then_some(())
    })
    .await;
    b.fleet.shutdown().await;
}

/// A removal whose mark no watch shows (the API server refuses every watch) still lowers
/// its group, as upstream's provider does, and its outcome says so.
#[tokio::test]
async fn a_mark_no_watch_shows_still_lowers_its_group_and_says_so() {
    let flavor = Flavor::OpenShift;
    let b = bed(flavor, false, 2, 'a').await;
    let machine = machine_of(&b.snap, &b.nodes[0]);
    // Every watch is refused: none can show the mark.
    b.fleet.cluster(1).unwrap().faults().set(Faults {
        error_rate: 1.0,
        error_code: 500,
        error_paths: vec!["watch=true".into()],
        ..Faults::default()
    });
    let mut plan = empty_plan(&b.snap, &b.settings);
    plan.delete_failed_machines = vec![deletion(&b.group, flavor, &machine, true)];
    let exec = executor(&b.c, WriteGate::always_open(), false).await;
    let run = exec.execute(&plan, &b.snap, &b.settings, &none()).await;
    let detail = done(&run.entries[0]);
    assert!(
        detail.contains("replicas 2 -> 1 (lowered without a watch showing the mark within 10s"),
        "{detail}"
    );
    assert_eq!(replicas(&b.c, flavor, &b.group).await, 1);
    b.fleet.shutdown().await;
}
