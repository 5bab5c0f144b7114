//! What only a hub can do: a scale-up that fails in one cluster for want of capacity backs
//! off the same instance type in the same zone in every other cluster at once, which then
//! scales another group in its next pass instead of finding out for itself, and tries the
//! first again once the backoff ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::outcome::{Action, Outcome};
use fleetscaler::engine::settings::{ExpanderKind, SettingsPatch};
use fleetscaler::hub::FleetView;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::FailureMode;
use fleetscaler::sim::settings::Flavor;

const LONG: Duration = Duration::from_secs(40);
/// Where the hub writes each cluster's status ConfigMap (`hub.status_namespace`).
const STATUS_NS: &str = "openshift-machine-api";
/// Short enough to see the group tried again within the test.
const BACKOFF: Duration = Duration::from_secs(8);

/// Both clusters prefer their us-east-1a group, so only the fleet's knowledge moves them.
fn settings() -> SettingsPatch {
    let mut priorities = BTreeMap::new();
    priorities.insert("20".to_string(), vec![".*worker-us-east-1a.*".to_string()]);
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

/// Scale-ups written for groups whose name ends with `suffix`.
fn scale_ups(view: &FleetView, cluster: &str, suffix: &str) -> usize {
    let report = view.report(cluster).unwrap();
    report
        .recent
        .iter()
        .filter(|h| matches!(&h.entry.action, Action::ScaleUp { group, .. } if group.as_str().ends_with(suffix)))
        .filter(|h| matches!(h.entry.outcome, Outcome::Done { .. }))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_failure_in_one_cluster_backs_off_the_others_at_once() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let (a, b) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let zone_a = |sim| {
        worker_groups(sim)
            .into_iter()
            .find(|g| g.0.ends_with("worker-us-east-1a"))
            .unwrap()
    };
    let broken = zone_a(a);
    a.set_failure_mode(&broken.0, Some(FailureMode::Fail))
        .unwrap();
    let dir = TempDir::new("e2e-fleet-backoff");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), settings())).await;
    let view = hub.view();
    running_report(&view, "sim-1").await;
    running_report(&view, "sim-2").await;

    // Each worker (8 CPUs) takes one pod of 7: the fourth needs a new node. sim-1 tries its
    // us-east-1a group, whose machine fails for want of capacity.
    create_pods(a, "job", 4, "7").await;
    let failure = eventually(LONG, "sim-2's us-east-1a group backed off for it", || {
        let plan = view.report("sim-2").and_then(|r| r.plan);
        async move {
            let plan = plan?;
            let group = plan
                .health
                .node_groups
                .iter()
                .find(|g| g.id.as_str().ends_with("worker-us-east-1a"))?;
            group.fleet_backoff.clone()
        }
    })
    .await;
    assert_eq!(failure.cluster, "sim-1");
    assert_eq!(failure.key.instance_type, "m6i.2xlarge");
    assert_eq!(failure.key.zone.as_deref(), Some("us-east-1a"));
    assert!(
        failure.reason.contains("InsufficientInstanceCapacity"),
        "{failure:?}"
    );
    // The fleet's API and metrics show it while it is in force.
    let (addr, serving) = serve_http(&hub).await;
    let (status, body) = http_request(addr, "GET", "/api/v1/fleet").await;
    assert_eq!(status, 200);
    let api: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(api["sharedFailures"][0]["cluster"], "sim-1", "{api}");
    let (_, metrics) = http_request(addr, "GET", "/metrics").await;
    let series = "fleetscaler_fleet_backoffs{instance_type=\"m6i.2xlarge\",zone=\"us-east-1a\",region=\"us-east-1\"} 1";
    assert!(metrics.contains(series), "{metrics}");
    serving.cancel();

    // sim-2 needs a node now: it goes to another zone in one pass, never trying us-east-1a.
    let before = zone_a(b);
    create_pods(b, "web", 4, "7").await;
    // Meanwhile sim-2's users see why where they look: the status ConfigMap's us-east-1a
    // group is in backoff with the fleet's code (written within 5 s of the change, inside
    // the backoff), and a Warning event on it says whose failure it is.
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
        "Node group MachineSet.machine.openshift.io/{STATUS_NS}/{} backed off: m6i.2xlarge in us-east-1a failed in cluster sim-1 at ",
        zone_a(b).0
    );
    assert!(message.starts_with(&head), "{message}");
    assert!(
        message.contains("InsufficientInstanceCapacity"),
        "{message}"
    );

    eventually(LONG, "sim-2's pods running", || {
        let n = e2e_support::running(&pods(b, "web"));
        async move { (n == 4).then_some(()) }
    })
    .await;
    assert_eq!(zone_a(b).1, before.1, "sim-2 tried the backed-off group");
    assert_eq!(scale_ups(&view, "sim-2", "worker-us-east-1a"), 0);
    assert!(scale_ups(&view, "sim-2", "") >= 1, "sim-2 scaled nothing");

    // Once the backoff is over, sim-2 prefers its us-east-1a group again.
    eventually(LONG, "sim-2's backoff over", || {
        let plan = view.report("sim-2").and_then(|r| r.plan);
        async move {
            plan.filter(|p| p.fleet_policy.shared_failures.is_empty())
                .map(drop)
        }
    })
    .await;
    create_pods(b, "late", 1, "7").await;
    eventually(LONG, "sim-2 scaling its us-east-1a group again", || {
        let n = scale_ups(&view, "sim-2", "worker-us-east-1a");
        async move { (n >= 1).then_some(()) }
    })
    .await;
    hub.stop().await;
    fleet.shutdown().await;
}
