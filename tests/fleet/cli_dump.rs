#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler dump` against a live (simulated) fleet, as a user runs it, and read back by
//! `fleetscaler plan -s`: the plan made from the dump is the plan the hub makes from its own
//! reading of the cluster (`cluster::read`, the cache's discovery and lists), on an OpenShift
//! and a Cluster API cluster; a kind the cluster forbids is left out with a warning and the
//! dump still reads; a dump without a Machine API's Machines is warned about.

use crate::e2e_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::layering::{Layers, layer};
use fleetscaler::engine::{EngineState, FleetPolicy, SettingsPatch, run_once_with};
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// sim-1 OpenShift MachineSets, sim-2 Cluster API MachineDeployments; one worker per group.
async fn mixed_fleet() -> Fleet {
    Fleet::start(FleetSettings {
        clusters: 2,
        mixed_flavors: true,
        shape: Shape {
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

fn fleetscaler(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetscaler"));
    cmd.args(args).env_remove("KUBECONFIG");
    // The blocking child waits on the simulated fleet, which runs on this test's runtime.
    tokio::task::block_in_place(|| cmd.output().unwrap())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn succeeded(o: &Output) -> String {
    assert!(o.status.success(), "{}: {}", o.status, stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Dumps `context` into `file`; its stderr.
fn dump(kubeconfig: &Path, context: &str, file: &Path) -> String {
    let out = fleetscaler(&[
        "dump",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--context",
        context,
        "-o",
        file.to_str().unwrap(),
    ]);
    succeeded(&out);
    stderr(&out)
}

/// `plan -s file -o json` at `now`, seeded.
fn plan(file: &Path, now: &str) -> Value {
    let out = fleetscaler(&[
        "plan",
        "-s",
        file.to_str().unwrap(),
        "--now",
        now,
        "--seed",
        "1",
        "-o",
        "json",
    ]);
    serde_json::from_str(&succeeded(&out)).unwrap()
}

/// The plan the hub makes of the cluster at `now`: its own reading (discovery, every kind
/// listed, the infrastructure templates), the dump's ClusterAutoscaler layered as `plan`
/// layers it, a fresh memory.
async fn hub_plan(cluster: &ClusterHandle, now: &str) -> Value {
    let client = cluster.client().await.unwrap();
    let seen = fleetscaler::cluster::read::look(&client, Duration::from_secs(5), LONG)
        .await
        .unwrap();
    let flags = SettingsPatch {
        seed: Some(1),
        ..SettingsPatch::default()
    };
    let effective = layer(Layers {
        fleet_defaults: None,
        cluster_autoscaler: seen.snapshot.cluster_autoscaler().map(|c| &c.spec),
        cluster: None,
        flags: Some(&flags),
    });
    let mut state = EngineState::default();
    let now = now.parse().unwrap();
    let plan = run_once_with(
        &seen.snapshot,
        &mut state,
        &effective.settings,
        &FleetPolicy::none(),
        now,
    );
    serde_json::to_value(plan).unwrap()
}

/// Pods that keep the cluster busy and still: eight of 3 CPUs on three workers of 8 (two
/// pend for a node of any group), and one no group's node can take.
async fn load(cluster: &ClusterHandle) {
    create_pods(cluster, "web", 8, "3").await;
    create_pods(cluster, "huge", 1, "100").await;
    eventually(LONG, "three pods pending", || {
        let all: Vec<Value> = [pods(cluster, "web"), pods(cluster, "huge")].concat();
        let pending = all
            .iter()
            .filter(|p| p["status"]["conditions"][0]["reason"] == "Unschedulable")
            .count();
        let running = running(&all);
        async move { (pending == 3 && running == 6).then_some(()) }
    })
    .await;
}

fn ids(plan: &Value) -> Vec<String> {
    plan["nodeGroups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_gives_the_plan_the_hub_makes_on_both_machine_apis() {
    let fleet = mixed_fleet().await;
    let dir = TempDir::new("cli-dump");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    for (cluster, prefix) in fleet.clusters().iter().zip([
        "MachineSet.machine.openshift.io/",
        "MachineDeployment.cluster.x-k8s.io/",
    ]) {
        load(cluster).await;
        let file = dir.path().join(format!("{}.yaml", cluster.name()));
        let progress = dump(&kubeconfig, cluster.name(), &file);
        assert!(progress.contains("machines.cluster.x-k8s.io"), "{progress}");
        assert!(progress.contains("wrote "), "{progress}");
        let now = jiff::Timestamp::now().to_string();
        let mut from_dump = plan(&file, &now);
        let mut hub = hub_plan(cluster, &now).await;

        // The node groups of the cluster's Machine API, every replica a registered node.
        let groups = ids(&from_dump);
        assert_eq!(groups.len(), 4, "{groups:?}");
        assert!(groups.iter().all(|g| g.starts_with(prefix)), "{groups:?}");
        for g in from_dump["nodeGroups"].as_array().unwrap() {
            assert_eq!(g["upcoming"], 0, "{g:#}");
            assert_eq!(g["registered"], g["target"], "{g:#}");
        }
        assert_eq!(from_dump["scaleUp"][0]["to"], 2, "{from_dump:#}");
        let pending = from_dump["pendingPods"].as_array().unwrap();
        assert_eq!(pending.len(), 3, "{pending:#?}");
        assert_eq!(pending[0]["pod"], "default/huge-0");
        assert_eq!(pending[0]["outcome"], "noScaleUp");
        let warnings = from_dump["warnings"].to_string();
        assert!(!warnings.contains("no Machines"), "{warnings}");

        // The same decisions, reasons and all, as the hub's reading of the cluster.
        from_dump.as_object_mut().unwrap().remove("warnings");
        hub.as_object_mut().unwrap().remove("warnings");
        for key in ["settings", "input"] {
            from_dump.as_object_mut().unwrap().remove(key);
        }
        assert_eq!(
            from_dump,
            hub,
            "{}: the plan from the dump differs from the hub's",
            cluster.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_kind_is_left_out_with_a_warning_and_the_dump_still_reads() {
    let fleet = mixed_fleet().await;
    let sim = &fleet.clusters()[0];
    let dir = TempDir::new("cli-dump-forbidden");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    sim.faults().set(Faults {
        error_rate: 1.0,
        error_code: 403,
        error_paths: vec!["/machineautoscalers".into(), "/replicasets".into()],
        ..Faults::default()
    });
    let file = dir.path().join("dump.json");
    let progress = dump(&kubeconfig, sim.name(), &file);
    assert!(
        progress.contains("warning: not allowed to list machineautoscalers (403: "),
        "{progress}"
    );
    // JSON for a file named so, whole, with the kind left out and everything else in.
    let text = std::fs::read_to_string(&file).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let kinds: Vec<&str> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"MachineAutoscaler"));
    assert!(kinds.contains(&"MachineSet") && kinds.contains(&"Machine"));
    // The refused kinds are marked, so that `plan` reads them as unread, not as empty.
    let refused = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "ReplicaSetList")
        .unwrap();
    let why = refused["metadata"]["annotations"]["fleetscaler.io/unreadable"].as_str();
    assert!(why.unwrap().starts_with("forbidden (403: "), "{refused}");
    // Still a dump: its groups found by their annotations.
    let now = jiff::Timestamp::now().to_string();
    let plan = plan(&file, &now);
    assert_eq!(ids(&plan).len(), 4, "{plan:#}");
    let warned = plan["warnings"].to_string();
    assert!(
        warned.contains("the dump could not list ReplicaSet (apps/v1): forbidden (403: ")
            && warned.contains("no pod's ReplicaSet is judged missing"),
        "{warned}"
    );
    assert!(
        plan["nodeGroups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["boundsFrom"] == "annotations"),
        "{plan:#}"
    );
}

/// What `oc get machines` does on a cluster serving both Machine APIs: one API's Machines
/// only. A dump without the Cluster API Machines is warned about, group by group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_without_a_groups_machines_is_warned_about() {
    let fleet = mixed_fleet().await;
    let sim = &fleet.clusters()[1];
    let dir = TempDir::new("cli-dump-no-machines");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let file = dir.path().join("dump.json");
    dump(&kubeconfig, sim.name(), &file);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let items = doc["items"].as_array_mut().unwrap();
    let capi_machines = |i: &Value| {
        i["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cluster.x-k8s.io/"))
            && matches!(i["kind"].as_str(), Some("Machine" | "MachineList"))
    };
    let before = items.len();
    items.retain(|i| !capi_machines(i));
    assert!(items.len() < before);
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, doc.to_string()).unwrap();
    let now = jiff::Timestamp::now().to_string();
    let plan = plan(&cut, &now);
    let warnings: Vec<&str> = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.starts_with("the dump has no Machines of group"))
        .collect();
    // The three workers want a node each; the GPU group at zero wants none.
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings[0].contains("-md-worker-us-east-1a, which wants 1: upcoming nodes may be invented; make the dump with `fleetscaler dump`"),
        "{warnings:?}"
    );
}
