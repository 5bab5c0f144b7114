//! The end-to-end harness: a simulated fleet over HTTPS and the hub autoscaling it, with
//! fast timing, plus helpers that read the clusters' state the way a user would check it.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use crate::sim_support;
pub use sim_support::{eventually, http_send};

use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetscaler::config::hub::HubConfig;
use fleetscaler::config::{ClusterConfig, FleetConfig};
use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::hub::HubHandle;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::{Flavor, FleetSettings, Shape, Timing};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const TAINT: &str = "ToBeDeletedByClusterAutoscaler";

use crate::tempdir_support;
pub use tempdir_support::TempDir;

/// A simulated fleet without generated workloads (tests create their own pods), one worker
/// node per zonal group, millisecond timing.
pub async fn quiet_fleet(clusters: usize, flavor: Flavor) -> Fleet {
    Fleet::start(FleetSettings {
        clusters,
        shape: Shape {
            flavor,
            nodes_per_group: 1,
            pods_per_node: 0,
            workloads: false,
            ..Shape::default()
        },
        timing: Timing::fast(),
        ..FleetSettings::default()
    })
    .await
    .unwrap()
}

/// Engine settings that make every wait of a scale-down short.
pub fn fast_settings() -> SettingsPatch {
    SettingsPatch {
        scale_down_unneeded_time: Some(Duration::from_secs(1)),
        scale_down_unready_time: Some(Duration::from_secs(1)),
        scale_down_delay_after_add: Some(Duration::from_secs(1)),
        scale_down_delay_after_delete: Some(Duration::ZERO),
        scale_down_delay_after_failure: Some(Duration::from_secs(1)),
        node_delete_delay_after_taint: Some(Duration::ZERO),
        max_pod_eviction_time: Some(Duration::from_secs(3)),
        max_node_provision_time: Some(Duration::from_secs(20)),
        initial_node_group_backoff: Some(Duration::from_secs(30)),
        ..SettingsPatch::default()
    }
}

/// fleet.toml for the hub against `fleet`, whose kubeconfig is written into `dir`.
pub fn fleet_config(fleet: &Fleet, dir: &Path, defaults: SettingsPatch) -> FleetConfig {
    let kubeconfig = dir.join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    FleetConfig {
        hub: HubConfig {
            listen: "127.0.0.1:0".into(),
            scan_interval: Duration::from_millis(300),
            debounce: Duration::from_millis(50),
            request_timeout: Duration::from_secs(2),
            kubeconfigs: vec![kubeconfig],
            ..HubConfig::default()
        },
        fleet: Default::default(),
        defaults,
        clusters: fleet
            .clusters()
            .iter()
            .map(|c| cluster_config(c.name()))
            .collect(),
        ..FleetConfig::default()
    }
}

pub fn cluster_config(name: &str) -> ClusterConfig {
    ClusterConfig {
        // The simulated ClusterAutoscaler asks for minutes-long delays.
        use_cluster_autoscaler: false,
        ..ClusterConfig::named(name)
    }
}

pub struct Hub {
    pub handle: Option<HubHandle>,
    pub cancel: CancellationToken,
}

impl Hub {
    pub async fn start(config: FleetConfig) -> Hub {
        let cancel = CancellationToken::new();
        let handle = fleetscaler::hub::start(config, None, cancel.clone())
            .await
            .unwrap();
        Hub {
            handle: Some(handle),
            cancel,
        }
    }

    pub fn view(&self) -> fleetscaler::hub::FleetView {
        self.handle.as_ref().unwrap().view.clone()
    }

    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(h) = self.handle.take() {
            h.wait().await;
        }
    }
}

/// The ReplicaSet `prefix` in `default` (created unless it is there), as an owner reference:
/// the hub keeps the node of a pod whose controller is not in the cluster. It asks for no
/// replicas and nothing acts on it; it only exists.
pub async fn replica_set_owner(client: kube::Client, prefix: &str) -> Value {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    let sets: kube::Api<ReplicaSet> = kube::Api::namespaced(client, "default");
    let set = match sets.get_opt(prefix).await.unwrap() {
        Some(set) => set,
        None => {
            let labels = json!({"app": prefix});
            let set: ReplicaSet = serde_json::from_value(json!({
                "metadata": {"name": prefix},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            }))
            .unwrap();
            sets.create(&Default::default(), &set).await.unwrap()
        }
    };
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": prefix,
        "uid": set.metadata.uid.unwrap(), "controller": true})
}

/// Creates pods in `default`, each asking for `cpu`. They name a ReplicaSet as their
/// controller (so a drain may move them) but nothing recreates them once evicted.
pub async fn create_pods(cluster: &ClusterHandle, prefix: &str, count: usize, cpu: &str) {
    let client = cluster.client().await.unwrap();
    let owner = replica_set_owner(client.clone(), prefix).await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "default");
    for i in 0..count {
        let pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{prefix}-{i}"), "labels": {"app": prefix},
                "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
    }
}

pub async fn delete_pods(cluster: &ClusterHandle, prefix: &str) {
    let client = cluster.client().await.unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "default");
    let lp = kube::api::ListParams::default().labels(&format!("app={prefix}"));
    pods.delete_collection(&Default::default(), &lp)
        .await
        .unwrap();
}

/// The pods named `<prefix>-*`.
pub fn pods(cluster: &ClusterHandle, prefix: &str) -> Vec<Value> {
    cluster
        .list(Resource::Pods)
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == prefix)
        .collect()
}

pub fn running(pods: &[Value]) -> usize {
    pods.iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .count()
}

/// The worker groups (MachineSets of OpenShift clusters, MachineDeployments of Cluster API
/// ones): name → (replicas, min, max).
pub fn groups(cluster: &ClusterHandle) -> Vec<(String, i64, i64, i64)> {
    let api = cluster.machine_api();
    let (resource, prefix) = match api.flavor {
        Flavor::OpenShift => (api.machine_sets, "machine.openshift.io"),
        Flavor::ClusterApi => (Resource::CapiMachineDeployments, "cluster.x-k8s.io"),
    };
    let bound = |g: &Value, which: &str| {
        g["metadata"]["annotations"]
            [format!("{prefix}/cluster-api-autoscaler-node-group-{which}-size")]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1)
    };
    let mut out: Vec<_> = cluster
        .list(resource)
        .iter()
        .map(|g| {
            (
                g["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                g["spec"]["replicas"].as_i64().unwrap_or(1),
                bound(g, "min"),
                bound(g, "max"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Worker groups only (not the GPU group).
pub fn worker_groups(cluster: &ClusterHandle) -> Vec<(String, i64, i64, i64)> {
    groups(cluster)
        .into_iter()
        .filter(|g| g.0.contains("-worker-"))
        .collect()
}

/// The first worker node, as stored.
pub fn first_worker(cluster: &ClusterHandle) -> Value {
    cluster
        .list(Resource::Nodes)
        .into_iter()
        .find(|n| {
            n["metadata"]["labels"]
                .get("node-role.kubernetes.io/worker")
                .is_some()
        })
        .expect("a worker node")
}

pub fn ready_workers(cluster: &ClusterHandle) -> usize {
    cluster
        .list(Resource::Nodes)
        .iter()
        .filter(|n| {
            n["metadata"]["labels"]
                .get("node-role.kubernetes.io/worker")
                .is_some()
        })
        .filter(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .count()
}

/// Nodes carrying the autoscaler's deletion taint.
pub fn tainted_nodes(cluster: &ClusterHandle) -> Vec<String> {
    cluster
        .list(Resource::Nodes)
        .iter()
        .filter(|n| {
            n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == TAINT)
        })
        .map(|n| {
            n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Machines marked with the delete annotation that are not being deleted.
pub fn marked_machines(cluster: &ClusterHandle) -> Vec<Value> {
    let api = cluster.machine_api();
    let annotation = format!("{}/delete-machine", api.group);
    cluster
        .list(api.machines)
        .into_iter()
        .filter(|m| m["metadata"]["annotations"].get(&annotation).is_some())
        .filter(|m| m["metadata"].get("deletionTimestamp").is_none())
        .collect()
}

/// Every group within its bounds.
pub fn assert_within_bounds(cluster: &ClusterHandle) {
    for (name, replicas, min, max) in groups(cluster) {
        assert!(
            replicas >= min && replicas <= max,
            "{}: group {name} has {replicas} replicas outside [{min}, {max}]",
            cluster.name()
        );
    }
}

pub fn sum_replicas(groups: &[(String, i64, i64, i64)]) -> i64 {
    groups.iter().map(|g| g.1).sum()
}

/// Passes the hub has run for `name` so far.
/// Passes run, and passes skipped because nothing changed since a settled one (each a look
/// at the cluster that would have decided the same).
fn passes_run(view: &fleetscaler::hub::FleetView, name: &str) -> u64 {
    view.report(name)
        .map(|r| {
            let c = &r.counters;
            c.durations.get("main").map_or(0, |h| h.count) + c.idle_skips
        })
        .unwrap_or(0)
}

/// Waits until the hub has run `n` more passes of `name`: `n` chances to act. What must not
/// happen is then checked against something that did, not against a sleep.
pub async fn more_passes(view: &fleetscaler::hub::FleetView, name: &str, n: u64) {
    let target = passes_run(view, name) + n;
    eventually(
        Duration::from_secs(60),
        &format!("{n} more passes of {name}"),
        || {
            let done = passes_run(view, name) >= target;
            async move { done.then_some(()) }
        },
    )
    .await;
}

/// The hub's HTTP server (plain, open) on a free port; it stops when the token fires.
pub async fn serve_http(hub: &Hub) -> (std::net::SocketAddr, CancellationToken) {
    let listener = fleetscaler::server::bind("127.0.0.1:0", "--listen")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    tokio::spawn(fleetscaler::server::serve(
        listener,
        hub.view(),
        cancel.clone(),
    ));
    (addr, cancel)
}

/// One plain HTTP/1.0 request: the status code and the body.
pub async fn http_request(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String) {
    http_send(addr, method, path, "").await
}

/// The report of cluster `name` once it runs and has made a pass.
pub async fn running_report(
    view: &fleetscaler::hub::FleetView,
    name: &str,
) -> fleetscaler::cluster::report::ClusterReport {
    use fleetscaler::cluster::report::Phase;
    eventually(Duration::from_secs(40), &format!("{name} running"), || {
        let r = view.report(name);
        async move { r.filter(|r| r.phase == Phase::Running && r.last_pass.is_some()) }
    })
    .await
}

/// A command's output as text.
pub fn lossy_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The stdout of a command that must have succeeded; its whole output when it did not.
pub fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}: {}{}",
        out.status,
        lossy_text(&out.stdout),
        lossy_text(&out.stderr)
    );
    lossy_text(&out.stdout)
}
