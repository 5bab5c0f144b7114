//! docs/managed-cluster-rbac.yaml against what the hub really does: the hub autoscales a
//! simulated OpenShift cluster and a simulated Cluster API one through a scale-up and a
//! scale-down with a drain, each cluster records every request it answers, and every request
//! must be allowed by the YAML's rules for the hub's ServiceAccount. The other way round,
//! every permission the YAML grants must have been used, or be listed in `NOT_EXERCISED` with
//! the reason the hub needs it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;
use crate::rbac_support;

use std::collections::HashSet;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::outcome::{Action, Outcome};
use fleetscaler::cluster::report::Phase;
use fleetscaler::sim::api::audit::RequestRecord;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::registry::{DeleteOptions, key_for};
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use rbac_support::{Account, Policy};
use serde_json::json;

const LONG: Duration = Duration::from_secs(60);

/// Permissions the YAML grants that this scenario cannot reach, and why the hub needs them.
const NOT_EXERCISED: &[(&str, &str)] = &[
    (
        "get /version",
        "the liveness probe, sent only when a cluster's watches heard nothing for a scan \
         interval (runner/liveness.rs); the simulated watches' bookmarks and events leave no \
         such gap here, and hub_e2e's hung API server is found by it",
    ),
    (
        "list apps/daemonsets",
        "DaemonSet pods are part of a node group's template; every real cluster serves apps/v1 \
         DaemonSets, the simulated ones do not (docs/sim.md)",
    ),
    ("watch apps/daemonsets", "as for list apps/daemonsets"),
    (
        "delete machine.openshift.io/machines",
        "a failed or never-registered machine in a group at its minimum size is deleted \
         (executor/machines.rs); no machine fails here",
    ),
    (
        "delete cluster.x-k8s.io/machines",
        "as for machine.openshift.io machines",
    ),
    (
        "get machine.openshift.io/machinesets",
        "start-up recovery finds the group of a machine marked before a crash through its \
         MachineSet when the machine does not record its group (executor/recover.rs)",
    ),
    (
        "get cluster.x-k8s.io/machinesets",
        "as for machine.openshift.io MachineSets",
    ),
    (
        "get cluster.x-k8s.io/machinesets/scale",
        "a Cluster API MachineSet that no MachineDeployment owns is a node group of its own; \
         the simulated clusters' MachineSets all belong to MachineDeployments",
    ),
    (
        "update cluster.x-k8s.io/machinesets/scale",
        "as for get cluster.x-k8s.io/machinesets/scale",
    ),
    (
        "patch core/events",
        "an event repeated within 5 minutes raises the count of the first (events/recorder.rs); \
         whether one repeats here depends on timing",
    ),
    (
        "get machine.openshift.io/machines",
        "a machine is read again before it is marked or deleted; reached here only if the \
         OpenShift cluster's scale-down picks a node, which depends on timing",
    ),
    (
        "get cluster.x-k8s.io/machines",
        "as for machine.openshift.io machines",
    ),
    (
        "list autoscaling.x-k8s.io/provisioningrequests",
        "ProvisioningRequests are watched where their CRD is served (cache/discovery.rs); \
         the clusters of this scenario create none (tests/fleet/hub_provisioning.rs does)",
    ),
    (
        "watch autoscaling.x-k8s.io/provisioningrequests",
        "as for list autoscaling.x-k8s.io/provisioningrequests",
    ),
    (
        "get autoscaling.x-k8s.io/provisioningrequests",
        "a request is read again before its conditions are written (executor/provisioning.rs)",
    ),
    (
        "delete autoscaling.x-k8s.io/provisioningrequests",
        "a request finished longer than the TTL (7 days) ago is deleted, as upstream does",
    ),
    (
        "update autoscaling.x-k8s.io/provisioningrequests/status",
        "a request's conditions are written to its status subresource",
    ),
    (
        "patch autoscaling.x-k8s.io/provisioningrequests/status",
        "as for update autoscaling.x-k8s.io/provisioningrequests/status (a merge patch)",
    ),
    (
        "list core/podtemplates",
        "the PodTemplates ProvisioningRequests name, watched only where their CRD is served",
    ),
    ("watch core/podtemplates", "as for list core/podtemplates"),
];

fn quiet_mixed_fleet() -> FleetSettings {
    FleetSettings {
        clusters: 2,
        // sim-1 OpenShift MachineSets, sim-2 Cluster API MachineDeployments.
        mixed_flavors: true,
        shape: Shape {
            nodes_per_group: 1,
            pods_per_node: 0,
            workloads: false,
            ..Shape::default()
        },
        timing: Timing::fast(),
        ..FleetSettings::default()
    }
}

/// Creates `count` pods asking for `cpu` in `default`, straight in the cluster's store so that
/// the only requests the cluster answers are the hub's.
fn create_pods_quietly(cluster: &ClusterHandle, prefix: &str, count: usize, cpu: &str) {
    let mut state = cluster.state();
    // Their ReplicaSet exists: the hub keeps the node of a pod whose controller is gone.
    let labels = json!({"app": prefix});
    let set = state
        .create(
            Resource::ReplicaSets,
            "default",
            json!({"metadata": {"name": prefix},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}),
        )
        .unwrap();
    let uid = set.value()["metadata"]["uid"].clone();
    for i in 0..count {
        let pod = json!({
            "metadata": {"name": format!("{prefix}-{i}"), "labels": {"app": prefix},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": prefix, "uid": uid, "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
        });
        state.create(Resource::Pods, "default", pod).unwrap();
    }
}

fn node_names(cluster: &ClusterHandle) -> HashSet<String> {
    cluster
        .list(Resource::Nodes)
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Leaves one `prefix` pod on each node that is not in `initial` (the scale-up's nodes, whose
/// groups are above their minimum) and none elsewhere: each new node is then underused, with
/// a pod that fits on the emptied initial nodes, so its removal must drain.
fn thin_out(cluster: &ClusterHandle, prefix: &str, initial: &HashSet<String>) {
    let mut kept_on = HashSet::new();
    let pods = pods(cluster, prefix);
    let mut state = cluster.state();
    for p in pods {
        let node = p["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !initial.contains(&node) && kept_on.insert(node) {
            continue;
        }
        let name = p["metadata"]["name"].as_str().unwrap();
        let key = key_for(Resource::Pods, "default", name);
        state
            .delete(Resource::Pods, &key, &DeleteOptions::default())
            .unwrap();
    }
    assert!(!kept_on.is_empty(), "{}: no new node", cluster.name());
}

async fn scale_up_then_drain(hub: &Hub, fleet: &Fleet) {
    let view = hub.view();
    let initial: Vec<HashSet<String>> = fleet.clusters().iter().map(node_names).collect();
    for sim in fleet.clusters() {
        let name = sim.name().to_string();
        eventually(LONG, &format!("{name} running"), || {
            let r = view.report(&name);
            async move { r.filter(|r| r.phase == Phase::Running && r.last_pass.is_some()) }
        })
        .await;
        create_pods_quietly(sim, "web", 10, "3");
    }
    for (sim, initial) in fleet.clusters().iter().zip(&initial) {
        eventually(LONG, &format!("{}: ten pods running", sim.name()), || {
            let n = running(&pods(sim, "web"));
            async move { (n == 10).then_some(()) }
        })
        .await;
        thin_out(sim, "web", initial);
    }
    for sim in fleet.clusters() {
        let name = sim.name().to_string();
        eventually(LONG, &format!("{name}: a node drained and removed"), || {
            let drained = view.report(&name).is_some_and(|r| {
                r.recent.iter().any(|h| {
                    matches!(&h.entry.action, Action::RemoveNode { evicted, .. } if !evicted.is_empty())
                        && matches!(h.entry.outcome, Outcome::Done { .. })
                })
            });
            async move { drained.then_some(()) }
        })
        .await;
    }
}

#[test]
fn the_rbac_matcher_follows_kubernetes_rules() {
    rbac_support::self_check();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_cluster_rbac_allows_every_request_and_grants_only_what_is_used() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/managed-cluster-rbac.yaml"
    );
    let yaml = std::fs::read_to_string(path).unwrap();
    let policy = Policy::from_yaml(&yaml, path);
    let grants = policy.grants(&Account {
        namespace: "fleetscaler".into(),
        name: "fleetscaler-hub".into(),
    });
    assert!(
        !grants.rules.is_empty(),
        "nothing bound to the hub's ServiceAccount"
    );

    let fleet = Fleet::start(quiet_mixed_fleet()).await.unwrap();
    for sim in fleet.clusters() {
        sim.cluster.requests.enable();
    }
    let dir = TempDir::new("managed-rbac");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    scale_up_then_drain(&hub, &fleet).await;
    // A clean stop deletes the status ConfigMaps: that is a request too.
    hub.stop().await;

    let mut used: Vec<RequestRecord> = Vec::new();
    for sim in fleet.clusters() {
        assert_eq!(
            sim.cluster.requests.dropped(),
            0,
            "{}: log full",
            sim.name()
        );
        used.extend(sim.cluster.requests.records());
    }
    fleet.shutdown().await;

    let denied = grants.denied(&used);
    assert!(
        denied.is_empty(),
        "docs/managed-cluster-rbac.yaml denies requests the hub made:\n  {}",
        denied.join("\n  ")
    );
    for must in [
        "create core/pods/eviction",
        "update machine.openshift.io/machinesets/scale",
        "update cluster.x-k8s.io/machinedeployments/scale",
        "patch core/nodes",
        "patch machine.openshift.io/machines",
        "patch cluster.x-k8s.io/machines",
        "create core/configmaps in openshift-machine-api",
        "delete core/configmaps in openshift-machine-api named cluster-autoscaler-status",
    ] {
        assert!(
            used.iter().any(|r| r.to_string().starts_with(must)),
            "the scenario never made a request `{must}`: it no longer tests what it claims"
        );
    }

    let unused: Vec<String> = grants
        .permissions(&used)
        .into_iter()
        .filter(|(name, hit)| {
            !hit && !NOT_EXERCISED
                .iter()
                .any(|(extra, _)| name == extra || name.starts_with(&format!("{extra} ")))
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        unused.is_empty(),
        "docs/managed-cluster-rbac.yaml grants what the hub never used (remove it, or list it \
         in NOT_EXERCISED with the reason):\n  {}",
        unused.join("\n  ")
    );
}
