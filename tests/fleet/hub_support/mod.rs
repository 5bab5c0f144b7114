//! Shared helpers of the hub's integration tests against the simulated fleet: a one-cluster
//! fleet, the hub's own client for it, a snapshot read from the live cluster, plans built
//! by hand, and waiting on conditions.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use crate::sim_support;
pub use sim_support::eventually;

use std::time::Duration;

use fleetscaler::cluster::cache::discovery::{discover, machine_api_resource};
use fleetscaler::cluster::client::from_config;
use fleetscaler::engine::nodegroups::{self, GroupRef, NodeGroupId};
use fleetscaler::engine::plan::Plan;
use fleetscaler::engine::settings::Settings;
use fleetscaler::engine::state::EngineState;
use fleetscaler::model::dump::SnapshotBuilder;
use fleetscaler::model::{
    ClusterSnapshot, MachineApi, MachineApiGroup, MachineApis, MachineKind, ObjectKey, ScalableKind,
};
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::{Flavor, FleetSettings, Shape, Timing};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// A one-cluster fleet with millisecond controllers and replica waves too slow to move
/// during a test; `workloads` off keeps the cluster empty of pods.
pub async fn fleet(flavor: Flavor, workloads: bool, nodes_per_group: usize) -> Fleet {
    Fleet::start(FleetSettings {
        clusters: 1,
        shape: Shape {
            flavor,
            nodes_per_group,
            pods_per_node: 6,
            workloads,
            ..Shape::default()
        },
        timing: Timing {
            wave_period: Duration::from_secs(3600),
            ..Timing::fast()
        },
        ..FleetSettings::default()
    })
    .await
    .unwrap()
}

/// The hub's client for the cluster (kube's retries off, as the hub builds it).
pub async fn client(cluster: &ClusterHandle) -> Client {
    let config = cluster.kube_config().await.unwrap();
    from_config(config, cluster.name(), Duration::from_secs(5)).unwrap()
}

/// Settings with no pause after the taint and a short eviction time.
/// Short drain clocks. The tests hand the executor plans of their own making, so the drain
/// rules that would have kept the simulated workloads' nodes (pods with `emptyDir`,
/// kube-system pods without a budget) are relaxed: the executor re-checks them before
/// draining, as the engine would have planned.
pub fn settings() -> Settings {
    Settings {
        node_delete_delay_after_taint: Duration::ZERO,
        max_pod_eviction_time: Duration::from_secs(10),
        skip_nodes_with_local_storage: false,
        skip_nodes_with_system_pods: false,
        ..Settings::default()
    }
}

/// The node group id of a worker group in zone `zone` (`a`, `b`, `c`).
pub fn worker_group(cluster: &ClusterHandle, flavor: Flavor, zone: char) -> NodeGroupId {
    let infra = &cluster.infra;
    let (api, kind, ns, name) = match flavor {
        Flavor::OpenShift => (
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            "openshift-machine-api",
            format!("{infra}-worker-us-east-1{zone}"),
        ),
        Flavor::ClusterApi => (
            MachineApiGroup::ClusterApi,
            ScalableKind::MachineDeployment,
            "openshift-cluster-api",
            format!("{infra}-md-worker-us-east-1{zone}"),
        ),
    };
    NodeGroupId::new(api, kind, &ObjectKey::new(ns, &name))
}

/// `(kind, namespace, name)` of a group id (the kind without its API group).
pub fn parts(id: &NodeGroupId) -> (String, String, String) {
    let r = GroupRef::parse(id.as_str()).unwrap();
    let (ns, name) = (r.key.namespace.to_string(), r.key.name.to_string());
    (r.kind.as_str().to_string(), ns, name)
}

/// The Machine API versions the cluster serves, as the hub's discovery chooses them.
pub async fn machine_apis(client: &Client) -> MachineApis {
    discover(client, Duration::from_secs(5))
        .await
        .unwrap()
        .machine_apis
}

/// The Machine API group of a flavor, at the version the hub's discovery chose.
pub async fn flavor_api(client: &Client, flavor: Flavor) -> MachineApi {
    let group = match flavor {
        Flavor::OpenShift => MachineApiGroup::OpenShift,
        Flavor::ClusterApi => MachineApiGroup::ClusterApi,
    };
    machine_apis(client).await.get(group).unwrap()
}

/// The dynamic API of a Machine API kind, at the version the cluster is read through.
pub async fn machine_api(client: &Client, flavor: Flavor, kind: &str) -> Api<DynamicObject> {
    let ns = match flavor {
        Flavor::OpenShift => "openshift-machine-api",
        Flavor::ClusterApi => "openshift-cluster-api",
    };
    let api = flavor_api(client, flavor).await;
    let kind = MachineKind::named(kind).expect("a Machine API kind");
    Api::namespaced_with(client.clone(), ns, &machine_api_resource(api, kind))
}

/// A group's `spec.replicas`, read through the API.
pub async fn replicas(client: &Client, flavor: Flavor, group: &NodeGroupId) -> i64 {
    let (kind, _, name) = parts(group);
    let scale = machine_api(client, flavor, &kind)
        .await
        .get_scale(&name)
        .await
        .unwrap();
    i64::from(scale.spec.unwrap().replicas.unwrap_or(0))
}

/// A snapshot of the live cluster, read through the API as the hub's cache would see it.
pub async fn snapshot(client: &Client, flavor: Flavor) -> ClusterSnapshot {
    let mut items: Vec<Value> = Vec::new();
    let nodes = Api::<Node>::all(client.clone());
    for n in nodes.list(&ListParams::default()).await.unwrap().items {
        items.push(serde_json::to_value(n).unwrap());
    }
    let pods = Api::<Pod>::all(client.clone());
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        items.push(serde_json::to_value(p).unwrap());
    }
    let api_version = flavor_api(client, flavor).await.api_version();
    let kinds: &[&str] = match flavor {
        Flavor::OpenShift => &["MachineSet", "Machine"],
        Flavor::ClusterApi => &["MachineDeployment", "MachineSet", "Machine"],
    };
    for kind in kinds {
        for o in machine_api(client, flavor, kind)
            .await
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
        {
            let mut v = serde_json::to_value(o).unwrap();
            v["apiVersion"] = json!(api_version);
            v["kind"] = json!(kind);
            items.push(v);
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut b = SnapshotBuilder::default();
    b.add_text(&list.to_string(), "live cluster").unwrap();
    b.finish().0
}

/// A plan for `snapshot` with no action at all, for a test to add its own.
pub fn empty_plan(snapshot: &ClusterSnapshot, settings: &Settings) -> Plan {
    let mut plan = fleetscaler::engine::run_once(
        snapshot,
        &mut EngineState::default(),
        settings,
        jiff::Timestamp::now(),
    );
    plan.scale_up.clear();
    plan.fix_target_size.clear();
    plan.delete_failed_machines.clear();
    plan.delete_unregistered.clear();
    plan.scale_down.clear();
    plan
}

/// The names of a group's nodes and machines in a snapshot.
pub fn members(
    snapshot: &ClusterSnapshot,
    settings: &Settings,
    group: &NodeGroupId,
) -> (Vec<String>, Vec<String>) {
    let groups = nodegroups::discover(snapshot, &settings.node_groups);
    let g = groups.by_id(group).unwrap();
    let nodes = g
        .nodes
        .iter()
        .map(|&i| snapshot.nodes[i].name.to_string())
        .collect();
    let machines = g
        .machines
        .iter()
        .map(|&i| snapshot.machines[i].key.name.to_string())
        .collect();
    (nodes, machines)
}

/// The machine of a node in a snapshot.
pub fn machine_of(snapshot: &ClusterSnapshot, node: &str) -> String {
    let groups = nodegroups::discover(snapshot, &[]);
    let ni = snapshot
        .nodes
        .iter()
        .position(|n| &*n.name == node)
        .unwrap();
    let mi = groups.machine_of_node[ni].unwrap();
    snapshot.machines[mi].key.name.to_string()
}
