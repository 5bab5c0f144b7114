//! What only a hub can do: a scale-up that fails in one cluster for want of capacity backs
//! off the same instance type in the same zone in every other cluster at once. The simulated
//! cloud runs out of m6i.2xlarge in us-east-1a for cluster A (a capacity fault set over the
//! fleet's admin endpoint); cluster B, whose pods must run in us-east-1a and whose priority
//! expander prefers its m6i.2xlarge group there (X), scales its m6i.4xlarge group in the same
//! zone (Y) in the first pass that sees the pods, never trying X, and tries X again once the
//! backoff ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::outcome::{Action, Outcome};
use fleetscaler::cluster::report::Happening;
use fleetscaler::engine::settings::{ExpanderKind, SettingsPatch};
use fleetscaler::hub::FleetView;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::ClusterHandle;
use fleetscaler::sim::settings::Flavor;
use jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(40);
/// Short enough to see the group tried again within the test, long enough for the status
/// ConfigMap (written at most every 5 s) to show it.
const BACKOFF: Duration = Duration::from_secs(12);
/// Where the hub writes each cluster's status ConfigMap (`hub.status_namespace`).
const STATUS_NS: &str = "openshift-machine-api";
const ZONE: &str = "us-east-1a";
/// X: the worker groups in us-east-1a, m6i.2xlarge (8 CPUs), as the fleet is built.
const X: &str = "-worker-us-east-1a";
/// Y: cluster B's second group in us-east-1a, m6i.4xlarge (16 CPUs), at zero.
const Y: &str = "-large-us-east-1a";

/// Both clusters prefer X, so only the fleet's knowledge moves them off it.
fn settings() -> SettingsPatch {
    let mut priorities = BTreeMap::new();
    priorities.insert("20".to_string(), vec![format!(".*{X}$")]);
    priorities.insert("10".to_string(), vec![".*".to_string()]);
    SettingsPatch {
        expanders: Some(vec![ExpanderKind::Priority]),
        priorities: Some(priorities),
        balance_similar_node_groups: Some(false),
        initial_node_group_backoff: Some(BACKOFF),
        max_node_provision_time: Some(Duration::from_secs(600)),
        ..fast_settings()
    }
}

/// Scale-ups the hub wrote (or tried to) in `cluster` for groups whose name ends with
/// `suffix`.
fn scale_ups(view: &FleetView, cluster: &str, suffix: &str) -> Vec<Happening> {
    let report = view.report(cluster).unwrap();
    report
        .recent
        .iter()
        .filter(|h| matches!(&h.entry.action, Action::ScaleUp { group, .. } if group.as_str().ends_with(suffix)))
        .cloned()
        .collect()
}

fn done(happenings: &[Happening]) -> Option<Happening> {
    happenings
        .iter()
        .find(|h| matches!(h.entry.outcome, Outcome::Done { .. }))
        .cloned()
}

/// Adds Y to `cluster`: a copy of its X MachineSet under another name, of another instance
/// type (the provider spec's `instanceType`, which the machines and the hub's
/// scale-from-zero template read) with its capacity, at zero replicas, created through the API.
async fn add_group_y(cluster: &ClusterHandle) -> String {
    let api = cluster.machine_api();
    let x = format!("{}{X}", cluster.infra);
    let name = format!("{}{Y}", cluster.infra);
    let mut set = cluster.get(api.machine_sets, api.namespace, &x).unwrap();
    let mut annotations = set["metadata"]["annotations"].clone();
    annotations[api.key("cluster-api-autoscaler-node-group-min-size")] = json!("0");
    annotations[api.key("cluster-api-autoscaler-node-group-max-size")] = json!("3");
    annotations["capacity.cluster-autoscaler.kubernetes.io/cpu"] = json!("16");
    annotations["capacity.cluster-autoscaler.kubernetes.io/memory"] = json!("64Gi");
    set["metadata"] = json!({"name": name, "namespace": api.namespace,
        "labels": set["metadata"]["labels"], "annotations": annotations});
    set.as_object_mut().unwrap().remove("status");
    let spec = &mut set["spec"];
    spec["replicas"] = json!(0);
    spec["selector"]["matchLabels"][api.set_label] = json!(name);
    spec["template"]["metadata"]["labels"][api.set_label] = json!(name);
    spec["template"]["spec"]["providerSpec"]["value"]["instanceType"] = json!("m6i.4xlarge");
    let gvk = GroupVersionKind::gvk(api.group, api.version, "MachineSet");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "machinesets");
    let sets: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(cluster.client().await.unwrap(), api.namespace, &resource);
    let object: DynamicObject = serde_json::from_value(set).unwrap();
    sets.create(&Default::default(), &object).await.unwrap();
    name
}

/// Pods of `cpu` that must run in us-east-1a.
async fn create_pinned_pods(cluster: &ClusterHandle, prefix: &str, count: usize, cpu: &str) {
    let client = cluster.client().await.unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "default");
    for i in 0..count {
        let pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{prefix}-{i}"), "labels": {"app": prefix}},
            "spec": {"nodeSelector": {"topology.kubernetes.io/zone": ZONE},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
    }
}

async fn all_running(cluster: &ClusterHandle, prefix: &str, count: usize) {
    eventually(
        LONG,
        &format!("{}'s {prefix} pods running", cluster.name()),
        || {
            let n = running(&pods(cluster, prefix));
            async move { (n == count).then_some(()) }
        },
    )
    .await;
}

/// The fault over HTTP, as an operator would set it.
async fn no_capacity_in_cluster_a(admin: std::net::SocketAddr) {
    let fault = format!(
        r#"{{"capacity": [{{"instanceType": "m6i.2xlarge", "zone": "{ZONE}", "reason": "InsufficientInstanceCapacity"}}]}}"#
    );
    let (status, body) = http_send(admin, "PUT", "/clusters/sim-1/faults", &fault).await;
    assert_eq!(status, 200, "{body}");
}

/// B's users see why where they look: the status ConfigMap has B's X in backoff with the
/// fleet's code, and a Warning event on it says whose failure it is.
async fn status_and_event_show_it(b: &ClusterHandle, x: &str) {
    let status = eventually(LONG, "sim-2's status showing the fleet's backoff", || {
        let cm = b.get(Resource::ConfigMaps, STATUS_NS, "cluster-autoscaler-status");
        let yaml = cm.and_then(|cm| cm["data"]["status"].as_str().map(str::to_string));
        async move { yaml.filter(|y| y.contains("errorCode: fleetBackoff")) }
    })
    .await;
    assert!(
        status.contains("m6i.2xlarge in us-east-1a failed in cluster sim-1 at"),
        "{status}"
    );
    let event = eventually(LONG, "sim-2's FleetBackoff event", || {
        let events = b.list(Resource::Events);
        let found = events.into_iter().find(|e| e["reason"] == "FleetBackoff");
        async move { found }
    })
    .await;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["involvedObject"]["name"], "cluster-autoscaler-status");
    let message = event["message"].as_str().unwrap_or_default();
    let head = format!(
        "Node group MachineSet.machine.openshift.io/{STATUS_NS}/{x} backed off: m6i.2xlarge in us-east-1a failed in cluster sim-1 at "
    );
    assert!(message.starts_with(&head), "{message}");
    assert!(
        message.contains("InsufficientInstanceCapacity"),
        "{message}"
    );
}

/// The fleet's API and metrics show the shared failure while it is in force.
async fn api_and_metrics_show_it(hub: &Hub) {
    let (addr, serving) = serve_http(hub).await;
    let (status, body) = http_request(addr, "GET", "/api/v1/fleet").await;
    assert_eq!(status, 200);
    let api: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(api["sharedFailures"][0]["cluster"], "sim-1", "{api}");
    assert_eq!(api["sharedFailures"][0]["key"]["platform"], "aws", "{api}");
    let (_, metrics) = http_request(addr, "GET", "/metrics").await;
    let series = "fleetscaler_fleet_backoffs{instance_type=\"m6i.2xlarge\",zone=\"us-east-1a\",region=\"us-east-1\"} 1";
    assert!(metrics.contains(series), "{metrics}");
    serving.cancel();
}

/// When the first pass of `cluster` after `since` that saw pending pods ran.
fn first_pass_with_pending_pods(view: &FleetView, cluster: &str, since: Timestamp) -> Timestamp {
    let report = view.report(cluster).unwrap();
    let sample = report
        .history
        .iter()
        .find(|s| s.at > since && s.pending_pods > 0);
    sample.map(|s| s.at).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_failure_in_one_cluster_backs_off_the_others_at_once() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let (a, b) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let (admin, admin_task) = fleetscaler::sim::admin::serve(fleet.clusters().to_vec(), 0)
        .await
        .unwrap();
    let y = add_group_y(b).await;
    let dir = TempDir::new("e2e-fleet-backoff");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), settings())).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;
    eventually(LONG, "sim-2 seeing its group Y", || {
        let seen = view.report("sim-2").and_then(|r| r.plan).is_some_and(|p| {
            p.node_groups
                .iter()
                .any(|g| g.id.as_str().ends_with(&y) && g.eligible)
        });
        async move { seen.then_some(()) }
    })
    .await;
    // B's us-east-1a worker (8 CPUs) is taken: every pod pinned there later needs a new node.
    create_pinned_pods(b, "fill", 1, "7").await;
    all_running(b, "fill", 1).await;

    // Each of A's workers takes one pod of 7: the fourth needs a new node. A tries X, whose
    // machine fails: the cloud has no m6i.2xlarge left in us-east-1a.
    no_capacity_in_cluster_a(admin).await;
    create_pods(a, "job", 4, "7").await;
    let failure = eventually(LONG, "sim-2's X backed off for sim-1's failure", || {
        let plan = view.report("sim-2").and_then(|r| r.plan);
        async move {
            let plan = plan?;
            let x = plan
                .health
                .node_groups
                .iter()
                .find(|g| g.id.as_str().ends_with(X))?;
            x.fleet_backoff.clone()
        }
    })
    .await;
    assert_eq!(failure.cluster, "sim-1");
    assert_eq!(failure.key.instance_type, "m6i.2xlarge");
    assert_eq!(failure.key.zone.as_deref(), Some(ZONE));
    // The simulated cloud is AWS on both sides: A's failed group by its nodes' providerIDs,
    // B's X by its nodes' and B's Y, at zero, by its provider spec's kind.
    assert_eq!(failure.key.platform.as_deref(), Some("aws"), "{failure:?}");
    let plan = view.report("sim-2").and_then(|r| r.plan).unwrap();
    for suffix in [X, y.as_str()] {
        let g = plan
            .node_groups
            .iter()
            .find(|g| g.id.as_str().ends_with(suffix));
        assert_eq!(g.and_then(|g| g.platform), Some("aws"), "{suffix}: {g:?}");
    }
    assert!(
        failure.reason.contains("InsufficientInstanceCapacity"),
        "{failure:?}"
    );
    api_and_metrics_show_it(&hub).await;

    // B needs nodes in us-east-1a now: the first pass that sees its pods scales Y.
    let before = Timestamp::now();
    create_pinned_pods(b, "web", 2, "7").await;
    let first = eventually(LONG, "sim-2 scaling up", || {
        let up = scale_ups(&view, "sim-2", "")
            .into_iter()
            .find(|h| h.at > before);
        async move { up }
    })
    .await;
    let (Action::ScaleUp { group, from, to }, Outcome::Done { .. }) =
        (&first.entry.action, &first.entry.outcome)
    else {
        panic!("sim-2's first scale-up: {first:?}");
    };
    assert!(group.as_str().ends_with(&y), "sim-2 scaled {group}, not Y");
    assert_eq!((from, to), (&0, &1));
    assert_eq!(
        first.at,
        first_pass_with_pending_pods(&view, "sim-2", before),
        "sim-2 did not scale Y in the first pass that saw its pods"
    );
    status_and_event_show_it(b, &format!("{}{X}", b.infra)).await;
    all_running(b, "web", 2).await;
    let tried = scale_ups(&view, "sim-2", X);
    assert!(tried.is_empty(), "sim-2 tried X: {tried:?}");
    let x = groups(b).into_iter().find(|g| g.0.ends_with(X)).unwrap();
    assert_eq!(x.1, 1, "sim-2's X was scaled");

    // Once the backoff is over, B prefers X again.
    eventually(LONG, "sim-2's backoff over", || {
        let plan = view.report("sim-2").and_then(|r| r.plan);
        async move {
            plan.filter(|p| p.fleet_policy.shared_failures.is_empty())
                .map(drop)
        }
    })
    .await;
    create_pinned_pods(b, "late", 1, "7").await;
    eventually(LONG, "sim-2 scaling X again", || {
        let up = done(&scale_ups(&view, "sim-2", X));
        async move { up }
    })
    .await;
    all_running(b, "late", 1).await;
    hub.stop().await;
    admin_task.abort();
    fleet.shutdown().await;
}
