//! The hub killed (SIGKILL) in the middle of a scale-down and started again: nothing is
//! left half-done. A node tainted for a drain that never finished is given back, and a
//! machine marked for deletion always gets its replicas decrement.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use e2e_support::*;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::fleet::ClusterHandle;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::policy::v1 as policyv1;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(40);

fn fleet_toml(dir: &Path) -> String {
    let kubeconfig = dir.join("fleet.kubeconfig");
    format!(
        r#"
[hub]
scan_interval = "300ms"
debounce = "50ms"
request_timeout = "2s"
kubeconfigs = ["{}"]

[defaults]
scale_down_unneeded_time = "1s"
scale_down_delay_after_add = "1s"
scale_down_delay_after_delete = "0s"
scale_down_delay_after_failure = "1s"
node_delete_delay_after_taint = "2s"
max_pod_eviction_time = "60s"

[[clusters]]
name = "sim-1"
use_cluster_autoscaler = false
"#,
        kubeconfig.display()
    )
}

fn start_hub(dir: &Path, run: usize) -> Child {
    let log = std::fs::File::create(dir.join(format!("hub-{run}.log"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(dir.join("fleet.toml"))
        .env("RUST_LOG", "fleetscaler=debug")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn kill(mut hub: Child) {
    hub.kill().unwrap();
    hub.wait().unwrap();
}

/// Worker node name → names of the `web` pods on it.
fn placement(sim: &ClusterHandle) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in sim.list(Resource::Nodes) {
        if n["metadata"]["labels"]
            .get("node-role.kubernetes.io/worker")
            .is_some()
        {
            out.entry(name(&n)).or_default();
        }
    }
    for p in pods(sim, "web") {
        if let Some(node) = p["spec"]["nodeName"].as_str() {
            out.entry(node.to_string()).or_default().push(name(&p));
        }
    }
    out
}

fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn set_min_available(sim: &ClusterHandle, min: i32) {
    let pdbs: Api<policyv1::PodDisruptionBudget> =
        Api::namespaced(sim.client().await.unwrap(), "default");
    let patch = json!({"spec": {"minAvailable": min, "maxUnavailable": null}});
    pdbs.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn pdb_allows(sim: &ClusterHandle) -> i64 {
    sim.get(Resource::PodDisruptionBudgets, "default", "web")
        .and_then(|p| p["status"]["disruptionsAllowed"].as_i64())
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_hub_leaves_nothing_half_done() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let dir = TempDir::new("e2e-restart");
    fleet
        .write_kubeconfig(&dir.path().join("fleet.kubeconfig"))
        .unwrap();
    std::fs::write(dir.path().join("fleet.toml"), fleet_toml(dir.path())).unwrap();
    let mut hub = start_hub(dir.path(), 1);

    // Twelve pods of 2 CPU: three per worker, so one more worker comes.
    let before: Vec<String> = placement(sim).into_keys().collect();
    create_pods(sim, "web", 12, "2").await;
    eventually(LONG, "twelve pods running", || {
        let n = running(&pods(sim, "web"));
        async move { (n == 12).then_some(()) }
    })
    .await;
    let added = placement(sim)
        .into_keys()
        .find(|n| !before.contains(n))
        .expect("a worker was added");

    // Leave one pod on the new worker and two on each other one: the new worker is the
    // one node a drain can empty.
    let pods_api: Api<corev1::Pod> = Api::namespaced(sim.client().await.unwrap(), "default");
    for (node, names) in placement(sim) {
        let keep = if node == added { 1 } else { 2 };
        for pod in names.iter().skip(keep) {
            pods_api.delete(pod, &Default::default()).await.unwrap();
        }
    }
    let pdbs: Api<policyv1::PodDisruptionBudget> =
        Api::namespaced(sim.client().await.unwrap(), "default");
    let pdb = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}))
    .unwrap();
    pdbs.create(&Default::default(), &pdb).await.unwrap();

    // The drain starts; the budget tightens under it, so its evictions are refused.
    eventually(LONG, "the new worker tainted for removal", || {
        let tainted = tainted_nodes(sim).contains(&added);
        async move { tainted.then_some(()) }
    })
    .await;
    set_min_available(sim, 100).await;
    eventually(LONG, "the budget refusing disruptions", || {
        let allows = pdb_allows(sim);
        async move { (allows == 0).then_some(()) }
    })
    .await;
    // The hub met the refusal (its log says so): it is mid-drain when killed.
    let log = dir.path().join("hub-1.log");
    eventually(LONG, "the hub's evictions refused", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        async move { text.contains("evictions refused; retrying").then_some(()) }
    })
    .await;
    assert!(
        tainted_nodes(sim).contains(&added),
        "still draining when killed"
    );
    kill(hub);

    // Started again: the taint of the interrupted drain is removed.
    hub = start_hub(dir.path(), 2);
    eventually(LONG, "the stale taint cleared", || {
        let clear = tainted_nodes(sim).is_empty();
        let cordoned = sim
            .get(Resource::Nodes, "", &added)
            .is_some_and(|n| n["spec"]["unschedulable"] == true);
        async move { (clear && !cordoned).then_some(()) }
    })
    .await;
    assert!(marked_machines(sim).is_empty());
    assert_within_bounds(sim);

    // The budget relaxes: the drain runs to the end. Every request now takes 300 ms, so
    // the hub is killed the moment the machine is marked, most likely while its decrement
    // is still on the way (either way, nothing may be left half-done).
    set_min_available(sim, 0).await;
    sim.faults().set(Faults {
        latency_ms: 300,
        ..Faults::default()
    });
    eventually(LONG, "the machine of the drained node marked", || {
        let marked = !marked_machines(sim).is_empty();
        async move { marked.then_some(()) }
    })
    .await;
    kill(hub);
    sim.faults().clear();
    let hub = start_hub(dir.path(), 3);
    eventually(LONG, "no machine left marked without its decrement", || {
        let marked = marked_machines(sim).len();
        let gone = sim.get(Resource::Nodes, "", &added).is_none();
        async move { (marked == 0 && gone).then_some(()) }
    })
    .await;
    assert_within_bounds(sim);
    assert_eq!(
        sum_replicas(&worker_groups(sim)),
        3,
        "{:?}",
        worker_groups(sim)
    );
    kill(hub);
    fleet.shutdown().await;
}
