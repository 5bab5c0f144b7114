//! The hub reads a cluster's dynamic resource allocation objects (ResourceClaims, their
//! templates, the ResourceSlices drivers publish, DeviceClasses) and scales for a pod's
//! devices: a pending pod whose claim, made from a ResourceClaimTemplate, needs a GPU of the
//! DeviceClass `gpu.example.com` makes the hub scale the GPU group, whose template declares
//! the DRA driver (upstream's Cluster API annotation), and not a CPU group; the simulated
//! fleet's node publishes its slice once Ready and its scheduler allocates the claim and runs
//! the pod there. A pod whose claim no group can satisfy gets no scale-up, and its
//! explanation names why. A cluster whose hub may not list a DRA kind has DRA off, said once.
//! Every wait is for something observable, never a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support::*;

use std::time::Duration;

use fleetscaler::cluster::outcome::Action;
use fleetscaler::cluster::report::{ClusterReport, Phase};
use fleetscaler::engine::plan::Outcome;
use fleetscaler::engine::reason::ReasonCode;
use fleetscaler::hub::FleetView;
use fleetscaler::model::WarningCode;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::fleet::ClusterHandle;
use fleetscaler::sim::settings::Flavor;
use fleetscaler::sim::store::Key;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);
const DRIVER: &str = "gpu.example.com";

/// Makes the cluster's GPU group declare the DRA driver, as upstream's Cluster API provider
/// reads it (one device per GPU of `gpu-count`); returns the group's name.
fn gpu_group_runs_the_driver(sim: &ClusterHandle) -> String {
    let api = sim.machine_api();
    let group = groups(sim)
        .into_iter()
        .find(|g| g.0.contains("-gpu-"))
        .expect("a GPU group")
        .0;
    let key = Key::new(api.namespace, &group);
    sim.state()
        .modify(api.machine_sets, &key, |ms| {
            ms["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/dra-driver"] =
                json!(DRIVER);
        })
        .unwrap();
    group
}

/// The DeviceClass of the driver's GPUs, and templates for claims of `count` of them.
async fn class_and_templates(client: &kube::Client) {
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == \"gpu.example.com\" && device.attributes[\"gpu.example.com\"].type == \"gpu\""}}]}
    }))
    .unwrap();
    let classes: Api<DeviceClass> = Api::all(client.clone());
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), "default");
    for (name, count) in [("one-gpu", 1), ("eight-gpus", 8)] {
        let t: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": DRIVER, "count": count}}]}}}
        }))
        .unwrap();
        templates.create(&PostParams::default(), &t).await.unwrap();
    }
}

/// A pod in `default` claiming the devices of `template`, tolerating the GPU nodes' taint.
async fn pod_claiming(client: &kube::Client, name: &str, template: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]
        }
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
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

/// The pod's outcome and reasons (code, message) in the latest plan that has it pending.
async fn explanation(view: &FleetView, pod: &str) -> (Outcome, Vec<(ReasonCode, String)>) {
    eventually(LONG, &format!("{pod} in a plan"), || {
        let plan = view.report("sim-1").and_then(|r| r.plan);
        let found = plan.and_then(|p| {
            let e = p.pending_pods.iter().find(|e| &*e.pod.name == pod)?;
            let reasons = e.reasons.iter().map(|r| (r.code, r.message.to_string()));
            Some((e.outcome, reasons.collect()))
        });
        async move { found }
    })
    .await
}

fn pod(sim: &ClusterHandle, name: &str) -> Value {
    sim.get(Resource::Pods, "default", name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_claiming_a_gpu_scales_the_gpu_group_and_runs_on_its_new_node() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    let gpu_group = gpu_group_runs_the_driver(sim);
    class_and_templates(&client).await;
    let dir = TempDir::new("dra-gpu");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let view = hub.view();
    let report = running_report(&view, "sim-1").await;
    // Served and read: nothing about DRA is said.
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let before = groups(sim);

    pod_claiming(&client, "train-0", "one-gpu").await;
    let node = eventually(LONG, "train-0 running", || {
        let p = pod(sim, "train-0");
        let node = p["spec"]["nodeName"].as_str().map(str::to_string);
        async move {
            (p["status"]["phase"] == "Running")
                .then_some(node)
                .flatten()
        }
    })
    .await;
    let report = view.report("sim-1").unwrap();
    let ups = scaled_up(&report);
    assert!(!ups.is_empty(), "train-0 runs without a scale-up");
    assert!(
        ups.iter().all(|g| g.ends_with(&format!("/{gpu_group}"))),
        "scaled {ups:?}, not only {gpu_group}"
    );
    let after = groups(sim);
    for ((name, was, ..), (_, now, ..)) in before.iter().zip(&after) {
        let expected = was + i64::from(*name == gpu_group);
        assert_eq!(*now, expected, "{name}: {before:?} → {after:?}");
    }
    // The new node's driver published its GPU, and the scheduler allocated it there.
    let slice = sim
        .list(Resource::ResourceSlices)
        .into_iter()
        .find(|s| s["spec"]["nodeName"] == node.as_str())
        .unwrap_or_else(|| panic!("no ResourceSlice of {node}"));
    assert_eq!(slice["spec"]["driver"], DRIVER);
    let claim_name = pod(sim, "train-0")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap()
        .to_string();
    let claim = sim
        .get(Resource::ResourceClaims, "default", &claim_name)
        .unwrap();
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(result["driver"], DRIVER);
    assert_eq!(result["pool"], node.as_str());
    assert_eq!(claim["status"]["reservedFor"][0]["name"], "train-0");
    // Running and allocated: more passes buy nothing more.
    more_passes(&view, "sim-1", 5).await;
    assert_eq!(groups(sim), after);
    let plan = view.report("sim-1").unwrap().plan.unwrap();
    let unread: Vec<_> = plan
        .warnings
        .iter()
        .filter(|w| {
            matches!(
                w.code,
                WarningCode::NotServed | WarningCode::UnreadableObject
            )
        })
        .collect();
    assert!(unread.is_empty(), "{unread:?}");
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_claim_no_group_can_satisfy_gets_no_scale_up_and_is_told_why() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    gpu_group_runs_the_driver(sim);
    class_and_templates(&client).await;
    let dir = TempDir::new("dra-none");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;
    let before = groups(sim);

    // Eight GPUs in one claim: a node of the GPU group has one.
    pod_claiming(&client, "big-0", "eight-gpus").await;
    eventually(LONG, "big-0 unschedulable", || {
        let p = pod(sim, "big-0");
        let unschedulable = p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["reason"] == "Unschedulable");
        async move { unschedulable.then_some(()) }
    })
    .await;
    let (outcome, reasons) = explanation(&view, "big-0").await;
    assert_eq!(outcome, Outcome::NoScaleUp, "{reasons:?}");
    let devices = reasons
        .iter()
        .find(|(code, _)| *code == ReasonCode::DevicesUnavailable)
        .unwrap_or_else(|| panic!("no DevicesUnavailable among {reasons:?}"));
    assert!(devices.1.contains("claim default/big-0"), "{}", devices.1);
    more_passes(&view, "sim-1", 5).await;
    let report = view.report("sim-1").unwrap();
    assert!(scaled_up(&report).is_empty(), "{:?}", scaled_up(&report));
    assert_eq!(groups(sim), before);
    hub.stop().await;
    fleet.shutdown().await;
}

/// The hub may not list ResourceSlices (403): DRA is off for the cluster, said once as a
/// warning naming the kind, and a pod with claims causes no scale-up and says why; the
/// cluster keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_slices_are_forbidden_has_dra_off_and_says_so() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    gpu_group_runs_the_driver(sim);
    class_and_templates(&client).await;
    sim.faults().set(Faults {
        forbidden: vec!["resourceslices.resource.k8s.io".into()],
        ..Faults::default()
    });
    let dir = TempDir::new("dra-forbidden");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;
    let before = groups(sim);

    pod_claiming(&client, "train-0", "one-gpu").await;
    let (outcome, reasons) = explanation(&view, "train-0").await;
    assert_eq!(outcome, Outcome::NoScaleUp, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|(code, _)| *code == ReasonCode::NotSimulated),
        "{reasons:?}"
    );
    more_passes(&view, "sim-1", 5).await;
    let report = view.report("sim-1").unwrap();
    let said: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.code == WarningCode::NotAllowed)
        .collect();
    assert_eq!(said.len(), 1, "{:?}", report.warnings);
    assert!(
        said[0].message.starts_with(
            "not allowed to list resourceslices.resource.k8s.io: pods with resource claims \
             are not simulated"
        ),
        "{}",
        said[0].message
    );
    assert_eq!(report.phase, Phase::Running);
    assert!(scaled_up(&report).is_empty(), "{:?}", scaled_up(&report));
    assert_eq!(groups(sim), before);
    hub.stop().await;
    fleet.shutdown().await;
}
