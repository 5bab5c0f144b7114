//! End to end: the hub autoscaling simulated clusters through the real kube client over
//! HTTPS. Each test is a story a user would tell: pods waited and got nodes, load left and
//! nodes went, a broken group was routed around, a broken cluster did not hold the others.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::outcome::{Action, Outcome};
use fleetscaler::cluster::report::ClusterReport;
use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::engine::template::TemplateSource;
use fleetscaler::hub::health::ClusterState;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::faults::{Faults, Outage};
use fleetscaler::sim::fleet::FailureMode;
use fleetscaler::sim::settings::Flavor;
use serde_json::json;

const LONG: Duration = Duration::from_secs(40);

fn done(report: &ClusterReport, pick: impl Fn(&Action) -> bool) -> usize {
    report
        .recent
        .iter()
        .filter(|h| pick(&h.entry.action) && matches!(h.entry.outcome, Outcome::Done { .. }))
        .count()
}

/// Waits until sim-1's report holds at least `at_least` actions `pick` chooses, done.
async fn reported(hub: &Hub, what: &str, pick: impl Fn(&Action) -> bool, at_least: usize) {
    let view = hub.view();
    eventually(LONG, what, || {
        let report = view.report("sim-1");
        let n = report.as_ref().map_or(0, |r| done(r, &pick));
        async move { (n >= at_least).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_get_nodes_and_idle_nodes_go() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("e2e-updown");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let sim = &fleet.clusters()[0];
    running_report(&hub.view(), "sim-1").await;
    let before = sum_replicas(&worker_groups(sim));

    // Three workers hold six of these; four wait for two more nodes.
    create_pods(sim, "web", 10, "3").await;
    eventually(LONG, "all ten pods running", || {
        let n = running(&pods(sim, "web"));
        async move { (n == 10).then_some(()) }
    })
    .await;
    assert!(sum_replicas(&worker_groups(sim)) >= before + 2);
    assert_within_bounds(sim);
    // The pods can run before the hub has published the pass that wrote the scale-up: its
    // report is waited for, not read once.
    reported(
        &hub,
        "a scale-up done",
        |a| matches!(a, Action::ScaleUp { .. }),
        1,
    )
    .await;

    // The load leaves: the extra nodes are drained and removed after the unneeded time.
    delete_pods(sim, "web").await;
    eventually(LONG, "every worker group back at its minimum", || {
        let at_min = worker_groups(sim).iter().all(|g| g.1 == g.2);
        let workers = ready_workers(sim);
        async move { (at_min && workers == 3).then_some(()) }
    })
    .await;
    assert!(tainted_nodes(sim).is_empty());
    assert!(marked_machines(sim).is_empty());
    let removed = |a: &Action| matches!(a, Action::RemoveNode { .. });
    reported(&hub, "two node removals done", removed, 2).await;
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_api_machine_deployments_scale_up() {
    let fleet = quiet_fleet(1, Flavor::ClusterApi).await;
    let dir = TempDir::new("e2e-capi");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let sim = &fleet.clusters()[0];
    running_report(&hub.view(), "sim-1").await;
    create_pods(sim, "batch", 8, "3").await;
    eventually(LONG, "all eight pods running", || {
        let n = running(&pods(sim, "batch"));
        async move { (n == 8).then_some(()) }
    })
    .await;
    assert!(sum_replicas(&worker_groups(sim)) >= 4);
    assert_within_bounds(sim);
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_leave_a_group_whose_machines_fail_at_once() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let groups = worker_groups(sim);
    let broken = groups[0].0.clone();
    sim.set_failure_mode(&broken, Some(FailureMode::Fail))
        .unwrap();
    // The broken group is the one the expander prefers; only failure handling moves away.
    let mut priorities = BTreeMap::new();
    priorities.insert("20".to_string(), vec![format!(".*{broken}.*")]);
    priorities.insert("10".to_string(), vec![".*".to_string()]);
    let settings = SettingsPatch {
        expanders: Some(vec![fleetscaler::engine::settings::ExpanderKind::Priority]),
        priorities: Some(priorities),
        // Far away: the move must come from the failure, not from a provisioning timeout.
        max_node_provision_time: Some(Duration::from_secs(600)),
        ..fast_settings()
    };
    let dir = TempDir::new("e2e-failing");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), settings)).await;
    running_report(&hub.view(), "sim-1").await;

    create_pods(sim, "job", 8, "3").await;
    eventually(LONG, "the pods running on other groups", || {
        let n = running(&pods(sim, "job"));
        async move { (n == 8).then_some(()) }
    })
    .await;
    let now = worker_groups(sim);
    assert_eq!(
        now[0].1, groups[0].1,
        "the broken group is back at its size: {now:?}"
    );
    assert!(sum_replicas(&now) > sum_replicas(&groups), "{now:?}");
    let report = hub.view().report("sim-1").unwrap();
    let plan = report.plan.unwrap();
    let health = plan
        .health
        .node_groups
        .iter()
        .find(|g| g.id.as_str().ends_with(&broken))
        .unwrap();
    assert!(health.backoff_until.is_some(), "{health:?}");
    hub.stop().await;
    fleet.shutdown().await;
}

/// Seed of issue 12: a burst of 429s on the scale subresource backed the group off for
/// minutes. Now the executor retries a moment later, and a pass that still fails leaves no
/// backoff: once the API answers again, the next pass scales.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_refusals_on_scale_costs_no_backoff() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("e2e-burst");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let sim = &fleet.clusters()[0];
    running_report(&hub.view(), "sim-1").await;
    sim.faults().set(Faults {
        error_rate: 1.0,
        error_code: 429,
        error_paths: vec!["/scale".into()],
        ..Faults::default()
    });
    create_pods(sim, "web", 10, "3").await;
    let view = hub.view();
    let refused = eventually(LONG, "a scale-up refused with 429", || {
        let r = view.report("sim-1").unwrap();
        async move {
            let failed = r.recent.iter().any(|h| {
                matches!(h.entry.action, Action::ScaleUp { .. })
                    && matches!(h.entry.outcome, Outcome::Failed { .. })
            });
            failed.then_some(r)
        }
    })
    .await;
    assert!(
        refused.groups.iter().all(|g| g.backoff_until.is_none()),
        "{:?}",
        refused.groups
    );
    sim.faults().clear();
    eventually(LONG, "all ten pods running once the API answers", || {
        let n = running(&pods(sim, "web"));
        async move { (n == 10).then_some(()) }
    })
    .await;
    let report = view.report("sim-1").unwrap();
    assert!(report.groups.iter().all(|g| g.backoff_until.is_none()));
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_down_or_failing_does_not_hold_the_others() {
    let fleet = quiet_fleet(3, Flavor::OpenShift).await;
    let dir = TempDir::new("e2e-outage");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    for name in ["sim-1", "sim-2", "sim-3"] {
        running_report(&hub.view(), name).await;
    }
    let [one, two, three] = [0, 1, 2].map(|i| &fleet.clusters()[i]);
    two.faults().set(Faults {
        outage: Some(Outage::Hang),
        ..Faults::default()
    });
    three.faults().set(Faults {
        error_rate: 1.0,
        error_code: 500,
        drop_watches: true,
        ..Faults::default()
    });
    create_pods(one, "web", 8, "3").await;
    eventually(
        LONG,
        "sim-1 scaled while sim-2 hangs and sim-3 fails",
        || {
            let n = running(&pods(one, "web"));
            async move { (n == 8).then_some(()) }
        },
    )
    .await;
    let view = hub.view();
    eventually(LONG, "sim-3 reported as failing", || {
        let r = view.report("sim-3").unwrap();
        let skipped = r.last_pass.as_ref().and_then(|p| p.skipped.clone());
        async move { skipped.filter(|why| why.contains("500") || why.contains("failed")) }
    })
    .await;
    // A hung API server leaves the watches open and silent: noticed, not trusted.
    eventually(LONG, "sim-2's silence noticed", || {
        let r = view.report("sim-2").unwrap();
        async move {
            let why = r.last_pass.as_ref().and_then(|p| p.skipped.clone())?;
            (why.contains("the API server has not answered")
                && ClusterState::of(&r) == ClusterState::Unhealthy)
                .then_some(())
        }
    })
    .await;

    // Back to health: both catch up on their own.
    two.faults().clear();
    three.faults().clear();
    for (cluster, name) in [(two, "two"), (three, "three")] {
        create_pods(cluster, name, 8, "3").await;
    }
    for (cluster, name) in [(two, "two"), (three, "three")] {
        eventually(
            Duration::from_secs(90),
            &format!("{} scaled after recovery", cluster.name()),
            || {
                let n = running(&pods(cluster, name));
                async move { (n == 8).then_some(()) }
            },
        )
        .await;
    }
    hub.stop().await;
    fleet.shutdown().await;
}

/// A Cluster API group at zero with no capacity annotations: its AWSMachineTemplate's
/// `status.capacity` (as Cluster API's AWS provider publishes it) is what the hub models new
/// nodes on. Only that template's 16 CPUs fit the pod; the other groups have 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_at_zero_scales_from_its_infrastructure_template() {
    let fleet = quiet_fleet(1, Flavor::ClusterApi).await;
    let dir = TempDir::new("e2e-infra-template");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let sim = &fleet.clusters()[0];
    running_report(&hub.view(), "sim-1").await;
    create_big_group(sim).await;
    // Until a pod needs it the group stays at zero, modelled on its template.
    let view = hub.view();
    let notes = eventually(LONG, "the new group modelled on its template", || {
        let plan = view.report("sim-1").and_then(|r| r.plan);
        async move {
            let plan = plan?;
            let group = plan
                .node_groups
                .iter()
                .find(|g| g.id.as_str().ends_with("/big"))?;
            (group.template == TemplateSource::InfrastructureTemplate).then(|| group.notes.clone())
        }
    })
    .await;
    assert!(
        notes.iter().any(|n| n.contains("AWSMachineTemplate")),
        "{notes:?}"
    );
    create_pods(sim, "big", 1, "12").await;
    eventually(LONG, "the pod running on a node of the new group", || {
        let n = running(&pods(sim, "big"));
        async move { (n == 1).then_some(()) }
    })
    .await;
    let md = sim
        .get(
            Resource::CapiMachineDeployments,
            "openshift-cluster-api",
            "big",
        )
        .unwrap();
    assert_eq!(md["spec"]["replicas"], 1);
    hub.stop().await;
    fleet.shutdown().await;
}

/// An AWSMachineTemplate with a 16-CPU capacity (set through its status subresource, as the
/// provider does) and a MachineDeployment of 0 to 2 machines made from it.
async fn create_big_group(sim: &fleetscaler::sim::fleet::ClusterHandle) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
    let client = sim.client().await.unwrap();
    let ns = "openshift-cluster-api";
    let resource = |group: &str, kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1beta2", kind), plural)
    };
    let templates = resource(
        "infrastructure.cluster.x-k8s.io",
        "AWSMachineTemplate",
        "awsmachinetemplates",
    );
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client.clone(), ns, &templates);
    let template: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate",
        "metadata": {"name": "big"},
        "spec": {"template": {"spec": {"instanceType": "m6i.4xlarge"}}}}))
    .unwrap();
    api.create(&PostParams::default(), &template).await.unwrap();
    let status = json!({"status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}});
    api.patch_status("big", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let cluster = sim.machine_api().cluster_of(&first_worker_group(sim));
    let mds = resource(
        "cluster.x-k8s.io",
        "MachineDeployment",
        "machinedeployments",
    );
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, ns, &mds);
    let labels = json!({"cluster.x-k8s.io/cluster-name": cluster, "cluster.x-k8s.io/deployment-name": "big"});
    let md: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "big", "labels": {"cluster.x-k8s.io/cluster-name": cluster},
            "annotations": {
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "2"}},
        "spec": {"clusterName": cluster, "replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "clusterName": cluster, "version": "v1.34.0", "failureDomain": "us-east-1a",
                "bootstrap": {"dataSecretName": "big-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "AWSMachineTemplate", "name": "big"}}}}}))
    .unwrap();
    api.create(&PostParams::default(), &md).await.unwrap();
}

fn first_worker_group(sim: &fleetscaler::sim::fleet::ClusterHandle) -> serde_json::Value {
    sim.list(Resource::CapiMachineDeployments)
        .into_iter()
        .next()
        .unwrap()
}
