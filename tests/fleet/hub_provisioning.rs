//! The hub serves ProvisioningRequests against a simulated cluster, which serves the CRD
//! kind (`autoscaling.x-k8s.io/v1`, with its `status` subresource) and PodTemplates: a
//! check-capacity request gets `Provisioned=True` when its pods fit the cluster and
//! `Provisioned=False` (`CapacityIsNotFound`) when they do not; a best-effort-atomic request
//! scales one group by all the nodes it needs and is `Provisioned=True` once that is
//! written; one no group can take gets `Provisioned=False` and no scale-up. Every wait is
//! for a condition to appear, never a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support::*;

use std::time::Duration;

use fleetscaler::cluster::outcome::Action;
use fleetscaler::cluster::report::ClusterReport;
use fleetscaler::hub::FleetView;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::ClusterHandle;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);
const CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";
const ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";

/// A PodTemplate `name` in `default` whose pod asks for `cpu`.
async fn template(client: &kube::Client, name: &str, cpu: &str) {
    let t: PodTemplate = serde_json::from_value(json!({
        "metadata": {"name": name},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}
    }))
    .unwrap();
    let api: Api<PodTemplate> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &t).await.unwrap();
}

/// A ProvisioningRequest `name` of `class` for `count` pods of the template `name`.
async fn request(client: &kube::Client, name: &str, class: &str, count: u32) {
    let gvk = GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "provisioningrequests");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name},
        "spec": {"provisioningClassName": class,
            "podSets": [{"podTemplateRef": {"name": name}, "count": count}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// The request's `Provisioned` condition once written: (status, reason).
async fn provisioned(sim: &ClusterHandle, name: &str) -> (String, String) {
    eventually(LONG, &format!("{name} Provisioned written"), || {
        let found = sim
            .get(Resource::ProvisioningRequests, "default", name)
            .and_then(|r| condition(&r, "Provisioned"));
        async move { found }
    })
    .await
}

fn condition(r: &Value, type_: &str) -> Option<(String, String)> {
    let c = r["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

/// The groups the hub scaled up so far, with by how much.
fn scaled_up(report: &ClusterReport) -> Vec<(String, u64)> {
    report
        .recent
        .iter()
        .filter_map(|h| match &h.entry.action {
            Action::ScaleUp { group, from, to } if h.entry.is_done() => {
                Some((group.to_string(), to - from))
            }
            _ => None,
        })
        .collect()
}

async fn start(name: &str) -> (fleetscaler::sim::fleet::Fleet, Hub, FleetView, TempDir) {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new(name);
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let view = hub.view();
    let report = running_report(&view, "sim-1").await;
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    (fleet, hub, view, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_capacity_is_provisioned_when_the_capacity_exists_and_not_when_not() {
    let (fleet, hub, view, _dir) = start("provreq-check").await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    template(&client, "small", "1").await;
    request(&client, "small", CHECK_CAPACITY, 2).await;
    assert_eq!(
        provisioned(sim, "small").await,
        ("True".into(), "CapacityIsFound".into())
    );
    let r = sim
        .get(Resource::ProvisioningRequests, "default", "small")
        .unwrap();
    assert!(r["status"]["conditions"][0]["lastTransitionTime"].is_string());
    // Told on the request, one event per condition written.
    let event = eventually(LONG, "the CapacityIsFound event on the request", || {
        let found = sim
            .list(Resource::Events)
            .into_iter()
            .find(|e| e["reason"] == "CapacityIsFound" && e["involvedObject"]["name"] == "small");
        async move { found }
    })
    .await;
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["involvedObject"]["kind"], "ProvisioningRequest");
    assert_eq!(event["involvedObject"]["uid"], r["metadata"]["uid"]);

    template(&client, "huge", "6").await;
    request(&client, "huge", CHECK_CAPACITY, 10).await;
    assert_eq!(
        provisioned(sim, "huge").await,
        ("False".into(), "CapacityIsNotFound".into())
    );
    let report = view.report("sim-1").unwrap();
    assert!(scaled_up(&report).is_empty(), "{:?}", scaled_up(&report));
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_effort_atomic_scales_one_group_by_all_it_needs_or_nothing() {
    let (fleet, hub, view, _dir) = start("provreq-atomic").await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    let before = worker_groups(sim);
    // Five pods of 5 CPU: one on each of the three workers, two on two new nodes of one group.
    template(&client, "train", "5").await;
    request(&client, "train", ATOMIC, 5).await;
    assert_eq!(
        provisioned(sim, "train").await,
        ("True".into(), "CapacityIsProvisioned".into())
    );
    // The pass's report is published after its writes: wait for the one that scaled.
    let ups = eventually(LONG, "the scale-up in a report", || {
        let ups = view
            .report("sim-1")
            .map(|r| scaled_up(&r))
            .unwrap_or_default();
        async move { (!ups.is_empty()).then_some(ups) }
    })
    .await;
    assert_eq!(ups.len(), 1, "{ups:?}");
    assert_eq!(ups[0].1, 2, "{ups:?}");
    let after = worker_groups(sim);
    let raised: i64 = before.iter().zip(&after).map(|(b, a)| a.1 - b.1).sum();
    assert_eq!(raised, 2, "{before:?} → {after:?}");

    // Ten more: no one group can take them (each is at most 3 nodes).
    template(&client, "giant", "5").await;
    request(&client, "giant", ATOMIC, 10).await;
    let (status, _) = provisioned(sim, "giant").await;
    assert_eq!(status, "False");
    more_passes(&view, "sim-1", 3).await;
    let report = view.report("sim-1").unwrap();
    assert_eq!(scaled_up(&report).len(), 1, "{:?}", scaled_up(&report));
    hub.stop().await;
    fleet.shutdown().await;
}

/// A dry run decides as a live hub would and writes nothing to the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_no_condition() {
    use fleetscaler::engine::provisioning::Decision;
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let dir = TempDir::new("provreq-dry-run");
    let mut config = fleet_config(&fleet, dir.path(), fast_settings());
    config.hub.dry_run = true;
    let hub = Hub::start(config).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;
    let client = sim.client().await.unwrap();
    template(&client, "small", "1").await;
    request(&client, "small", CHECK_CAPACITY, 2).await;
    let decision = eventually(LONG, "a decision about the request", || {
        let found = view
            .report("sim-1")
            .and_then(|r| r.plan)
            .and_then(|p| p.provisioning_requests.first().map(|d| d.decision));
        async move { found }
    })
    .await;
    assert_eq!(decision, Decision::CapacityFound);
    more_passes(&view, "sim-1", 3).await;
    let r = sim
        .get(Resource::ProvisioningRequests, "default", "small")
        .unwrap();
    assert!(r["status"].get("conditions").is_none(), "{r}");
    hub.stop().await;
    fleet.shutdown().await;
}
