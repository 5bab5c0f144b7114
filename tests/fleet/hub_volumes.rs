//! The hub reads a cluster's storage (claims, volumes, classes, and the CSINodes the
//! simulated EBS driver registers) and scales for a pod's volumes: a pod whose claim is bound to a zonal volume is served by the group in the
//! volume's zone, even when the expander prefers another; and a cluster whose claims the hub
//! may not list is still autoscaled, with volumes reported unsimulated.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support::*;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fleetscaler::cluster::outcome::Action;
use fleetscaler::cluster::report::{ClusterReport, Phase};
use fleetscaler::engine::plan::{Outcome, Plan};
use fleetscaler::engine::reason::{Reason, ReasonCode};
use fleetscaler::engine::settings::{ExpanderKind, SettingsPatch};
use fleetscaler::hub::FleetView;
use fleetscaler::model::WarningCode;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::fleet::{ClusterHandle, FailureMode};
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use serde_json::json;

const LONG: Duration = Duration::from_secs(60);
const DRIVER: &str = "ebs.csi.aws.com";
/// The zone label the EBS CSI driver puts on its nodes and pins its volumes by.
const CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// Creates the cluster-scoped `value` of type `K`.
async fn create_all<K>(client: &kube::Client, value: serde_json::Value)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    let api: Api<K> = Api::all(client.clone());
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Creates `value` of type `K` in `default`.
async fn create_in_default<K>(client: &kube::Client, value: serde_json::Value)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    let api: Api<K> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// The worker nodes, as the simulated EBS CSI driver leaves them: each labelled with its
/// zone under the driver's key, with a CSINode naming the driver, its attach limit and that
/// key. Each gets a pod of 1 CPU pinned to it, so that a pod of 7 fits none of them (the
/// simulated scheduler does not look at volumes). Returns each worker's zone.
async fn csi_workers(sim: &ClusterHandle) -> Vec<(String, String)> {
    let client = sim.client().await.unwrap();
    let mut workers = Vec::new();
    for node in sim.list(Resource::Nodes) {
        let labels = &node["metadata"]["labels"];
        if labels.get("node-role.kubernetes.io/worker").is_none() {
            continue;
        }
        let name = node["metadata"]["name"].as_str().unwrap().to_string();
        let zone = labels["topology.kubernetes.io/zone"].as_str().unwrap();
        assert_eq!(labels[CSI_ZONE], zone, "{name}");
        let csi = sim.get(Resource::CsiNodes, "", &name).expect("a CSINode");
        assert_eq!(csi["spec"]["drivers"][0]["topologyKeys"][0], CSI_ZONE);
        create_in_default::<Pod>(
            &client,
            json!({"metadata": {"name": format!("fill-{name}"),
                "labels": {"app": "fill"}},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}),
        )
        .await;
        workers.push((name, zone.to_string()));
    }
    let count = workers.len();
    eventually(LONG, "the filler pods running", || {
        let n = running(&pods(sim, "fill"));
        async move { (n == count).then_some(()) }
    })
    .await;
    workers
}

/// A class of the EBS driver, a volume in `zone` (pinned by the driver's zone key) bound to
/// the claim `default/data`.
async fn zonal_volume(client: &kube::Client, zone: &str) {
    create_all::<StorageClass>(
        client,
        json!({"metadata": {"name": "gp3"},
        "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    create_all::<PersistentVolume>(
        client,
        json!({"metadata": {"name": "pv-data"},
        "spec": {"storageClassName": "gp3", "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"namespace": "default", "name": "data"},
            "csi": {"driver": DRIVER, "volumeHandle": "vol-0123"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": CSI_ZONE, "operator": "In", "values": [zone]}]}]}}},
        "status": {"phase": "Bound"}}),
    )
    .await;
    create_in_default::<PersistentVolumeClaim>(
        client,
        json!({"metadata": {"name": "data"},
        "spec": {"storageClassName": "gp3", "volumeName": "pv-data",
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Bound"}}),
    )
    .await;
}

/// The pod `db-0` of 7 CPU, using the claim `default/data`.
async fn pod_with_claim(client: &kube::Client) {
    create_in_default::<Pod>(
        client,
        json!({"metadata": {"name": "db-0",
            "labels": {"app": "db"}},
        "spec": {"containers": [{"name": "db", "image": "postgres",
                "resources": {"requests": {"cpu": "7", "memory": "1Gi"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    )
    .await;
}

/// The groups the hub scaled up so far.
fn scaled_up(report: &ClusterReport) -> Vec<String> {
    report
        .recent
        .iter()
        .filter_map(|h| match &h.entry.action {
            Action::ScaleUp { group, .. } => Some(group.to_string()),
            _ => None,
        })
        .collect()
}

async fn first_scale_up(view: &FleetView) -> Vec<String> {
    eventually(LONG, "a scale-up", || {
        let groups = view
            .report("sim-1")
            .map(|r| scaled_up(&r))
            .unwrap_or_default();
        async move { (!groups.is_empty()).then_some(groups) }
    })
    .await
}

/// The reasons the plan gives for `db-0`, once a plan has it pending.
async fn reasons_for_db(view: &FleetView, what: &str) -> (Outcome, Vec<Reason>, Arc<Plan>) {
    eventually(LONG, what, || {
        let plan = view.report("sim-1").and_then(|r| r.plan);
        let found = plan.and_then(|p| {
            let e = p.pending_pods.iter().find(|e| &*e.pod.name == "db-0")?;
            Some((e.outcome, e.reasons.clone(), p.clone()))
        });
        async move { found }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_bound_to_a_zonal_volume_scales_the_group_of_its_zone() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    let workers = csi_workers(sim).await;
    assert_eq!(workers.len(), 3, "{workers:?}");
    zonal_volume(&client, "us-east-1b").await;
    // Without the volume, the expander would pick zone a, then c: only the volume makes b.
    let mut priorities = BTreeMap::new();
    priorities.insert("30".to_string(), vec![".*-worker-us-east-1a".to_string()]);
    priorities.insert("20".to_string(), vec![".*-worker-us-east-1c".to_string()]);
    priorities.insert("10".to_string(), vec![".*".to_string()]);
    let settings = SettingsPatch {
        expanders: Some(vec![ExpanderKind::Priority]),
        priorities: Some(priorities),
        ..fast_settings()
    };
    let dir = TempDir::new("volumes-zonal");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), settings)).await;
    let view = hub.view();
    let report = running_report(&view, "sim-1").await;
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let before = worker_groups(sim);

    pod_with_claim(&client).await;
    let groups = first_scale_up(&view).await;
    assert!(
        groups.iter().all(|g| g.ends_with("-worker-us-east-1b")),
        "scaled {groups:?}, not the volume's zone"
    );
    eventually(LONG, "db-0 running", || {
        let n = running(&pods(sim, "db"));
        async move { (n == 1).then_some(()) }
    })
    .await;
    // More chances to scale anything else: nothing else is scaled.
    more_passes(&view, "sim-1", 5).await;
    let report = view.report("sim-1").unwrap();
    assert!(
        scaled_up(&report)
            .iter()
            .all(|g| g.ends_with("-worker-us-east-1b")),
        "{:?}",
        scaled_up(&report)
    );
    let after = worker_groups(sim);
    for ((name, was, ..), (_, now, ..)) in before.iter().zip(&after) {
        let expected = was + i64::from(name.ends_with("-worker-us-east-1b"));
        assert_eq!(*now, expected, "{name}: {before:?} → {after:?}");
    }
    // Nothing about storage is said: it was served, allowed and read.
    let plan = report.plan.unwrap();
    let storage_warnings: Vec<_> = plan
        .warnings
        .iter()
        .filter(|w| {
            matches!(
                w.code,
                WarningCode::NotServed | WarningCode::NotAllowed | WarningCode::UnreadableObject
            )
        })
        .collect();
    assert!(storage_warnings.is_empty(), "{storage_warnings:?}");
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_claims_are_forbidden_still_scales_with_volumes_unsimulated() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    csi_workers(sim).await;
    zonal_volume(&client, "us-east-1b").await;
    sim.faults().set(Faults {
        forbidden: vec!["persistentvolumeclaims".into()],
        ..Faults::default()
    });
    // Machines that never get a node: the pod stays pending, its explanation in every plan.
    for (group, ..) in worker_groups(sim) {
        sim.set_failure_mode(&group, Some(FailureMode::NoNode))
            .unwrap();
    }
    let dir = TempDir::new("volumes-forbidden");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;

    pod_with_claim(&client).await;
    first_scale_up(&view).await;
    let (outcome, reasons, plan) = reasons_for_db(&view, "db-0 in a plan").await;
    assert!(
        matches!(outcome, Outcome::ScaleUp | Outcome::FitsUpcoming),
        "{outcome:?}"
    );
    let unsimulated = reasons
        .iter()
        .find(|r| r.code == ReasonCode::NotSimulated)
        .unwrap_or_else(|| panic!("volumes are not said to be unsimulated: {reasons:?}"));
    assert!(
        unsimulated.message.contains("PersistentVolumeClaims"),
        "{}",
        unsimulated.message
    );
    let refused: Vec<_> = plan
        .warnings
        .iter()
        .filter(|w| w.code == WarningCode::NotAllowed)
        .collect();
    assert_eq!(refused.len(), 1, "{:?}", plan.warnings);
    assert!(
        refused[0]
            .message
            .starts_with("not allowed to list persistentvolumeclaims: volumes are not simulated"),
        "{}",
        refused[0].message
    );
    // Said once, and the cluster keeps running: the watch's repeated refusals (it tries
    // again with a growing backoff) neither unsync the cache nor make it stale. Thirty passes,
    // at most one per 300 ms scan unless woken, outlast the 5 s after which a failing watch
    // would make passes skip.
    more_passes(&view, "sim-1", 30).await;
    let report = view.report("sim-1").unwrap();
    let said: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.message.contains("persistentvolumeclaims"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", report.warnings);
    assert_eq!((report.phase, report.restarts), (Phase::Running, 0));
    let last = report.last_pass.unwrap();
    assert_eq!(last.skipped, None);
    hub.stop().await;
    fleet.shutdown().await;
}
