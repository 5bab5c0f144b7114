//! Odd and hostile objects in a cluster: named in the plan, never harmful, never stopping
//! the pass. A node the hub cannot read keeps its machine (it is not taken for one that
//! never registered); a node group with an unreadable size annotation is set aside alone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::time::Duration;

use e2e_support::*;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

const LONG: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_objects_are_named_and_do_no_harm() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    let worker = first_worker(sim);
    let node = worker["metadata"]["name"].as_str().unwrap().to_string();
    // A quantity Kubernetes takes but the hub cannot hold.
    let mut capacity = worker["status"]["capacity"].clone();
    capacity["example.com/widgets"] = json!("10E");
    Api::<Node>::all(client.clone())
        .patch_status(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": capacity}})),
        )
        .await
        .unwrap();
    // A group whose max size is not a number.
    let groups = worker_groups(sim);
    let odd_group = groups[1].0.clone();
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet");
    let sets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "openshift-machine-api",
        &ApiResource::from_gvk_with_plural(&gvk, "machinesets"),
    );
    let max = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size";
    sets.patch(
        &odd_group,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {max: "lots"}}})),
    )
    .await
    .unwrap();
    // MachineAutoscalers would override the annotations: this group has none any more.
    let mas: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "openshift-machine-api",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("autoscaling.openshift.io", "v1beta1", "MachineAutoscaler"),
            "machineautoscalers",
        ),
    );
    mas.delete(&odd_group, &Default::default()).await.unwrap();

    let mut settings = fast_settings();
    // Any machine without a node would count as never registered at once.
    settings.max_node_provision_time = Some(Duration::from_secs(2));
    let dir = TempDir::new("hostile");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), settings)).await;
    let view = hub.view();
    let plan = eventually(LONG, "a plan naming both odd objects", || {
        let plan = view.report("sim-1").and_then(|r| r.plan).filter(|p| {
            p.warnings.iter().any(|w| {
                w.code == fleetscaler::model::WarningCode::UnreadableObject
                    && w.message.contains(node.as_str())
            }) && p.node_groups.iter().any(|g| !g.eligible)
        });
        async move { plan }
    })
    .await;
    let set_aside = plan.node_groups.iter().find(|g| !g.eligible).unwrap();
    assert!(set_aside.id.as_str().ends_with(&odd_group), "{set_aside:?}");
    assert!(
        set_aside
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("lots"),
        "{set_aside:?}"
    );

    // The other groups still scale; the unreadable node's machine stays.
    create_pods(sim, "web", 8, "3").await;
    eventually(LONG, "the pods running", || {
        let n = running(&pods(sim, "web"));
        async move { (n == 8).then_some(()) }
    })
    .await;
    // Five passes after the pods ran: five chances to remove what it must not.
    more_passes(&view, "sim-1", 5).await;
    assert!(
        sim.get(Resource::Nodes, "", &node).is_some(),
        "the node stays"
    );
    assert!(
        marked_machines(sim).is_empty(),
        "no machine marked for deletion"
    );
    let report = view.report("sim-1").unwrap();
    assert!(
        report.recent.iter().all(|h| !matches!(
            h.entry.action,
            fleetscaler::cluster::outcome::Action::DeleteMachine { .. }
        )),
        "{:?}",
        report.recent
    );
    hub.stop().await;
    fleet.shutdown().await;
}
