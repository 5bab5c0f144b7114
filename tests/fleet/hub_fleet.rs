//! The hub as a fleet: two replicas with leader election never both act, and a fleet.toml
//! changed on disk starts a new cluster without touching the running one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::outcome::{Action, Outcome};
use fleetscaler::cluster::report::Phase;
use fleetscaler::config::hub::LeaderElection;
use fleetscaler::hub::FleetView;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(40);

/// Leader election on a Lease in the simulated cluster, which doubles as the management
/// cluster, with short durations.
fn election(identity: &str) -> LeaderElection {
    LeaderElection {
        enabled: true,
        context: Some("sim-1".into()),
        namespace: "default".into(),
        lease_name: "fleetscaler".into(),
        identity: Some(identity.into()),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    }
}

fn scale_ups_done(view: &FleetView) -> usize {
    view.report("sim-1")
        .map(|r| {
            r.recent
                .iter()
                .filter(|h| matches!(h.entry.action, Action::ScaleUp { .. }))
                .filter(|h| matches!(h.entry.outcome, Outcome::Done { .. }))
                .count()
        })
        .unwrap_or(0)
}

/// Replicas added by the scale-ups a replica reports done.
fn raised_by(view: &FleetView) -> i64 {
    view.report("sim-1")
        .map(|r| {
            r.recent
                .iter()
                .filter(|h| matches!(h.entry.outcome, Outcome::Done { .. }))
                .map(|h| match &h.entry.action {
                    Action::ScaleUp { from, to, .. } => *to as i64 - *from as i64,
                    _ => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

async fn leading(view: &FleetView, want: bool) {
    eventually(LONG, &format!("leading == {want}"), || {
        let now = view.hub().leading;
        async move { (now == want).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_both_act_and_the_standby_takes_over() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let dir = TempDir::new("leader");
    let replica = |identity: &str| {
        let mut config = fleet_config(&fleet, dir.path(), fast_settings());
        config.hub.leader_election = election(identity);
        config
    };
    let a = Hub::start(replica("a")).await;
    leading(&a.view(), true).await;
    let b = Hub::start(replica("b")).await;
    let b_view = b.view();
    eventually(LONG, "b planning as a standby", || {
        let r = b_view.report("sim-1");
        async move { r.filter(|r| r.phase == Phase::Running && r.last_pass.is_some()) }
    })
    .await;
    // b's election reads the Lease on its own clock: its first pass can come first.
    eventually(LONG, "b knowing a leads", || {
        let holder = b_view.hub().leader.and_then(|l| l.holder);
        async move { (holder.as_deref() == Some("a")).then_some(()) }
    })
    .await;
    assert!(!b_view.hub().leading);

    let before = sum_replicas(&worker_groups(sim));
    create_pods(sim, "first", 8, "3").await;
    eventually(LONG, "the first pods running", || {
        let n = running(&pods(sim, "first"));
        async move { (n == 8).then_some(()) }
    })
    .await;
    // Every replica added is one the leader reports adding: the standby wrote none.
    let added = sum_replicas(&worker_groups(sim)) - before;
    assert!(added >= 1);
    // The simulated fleet can run the pods before the leader has published the pass that
    // wrote the scale-up: wait for its report rather than read it once.
    let a_view = a.view();
    eventually(LONG, "the leader reporting every replica added", || {
        let raised = raised_by(&a_view);
        async move { (raised == added).then_some(()) }
    })
    .await;
    assert_eq!(scale_ups_done(&b_view), 0, "the standby wrote nothing");
    assert_within_bounds(sim);

    // The leader stops (releasing the Lease): the standby takes over and acts.
    a.stop().await;
    leading(&b_view, true).await;
    create_pods(sim, "second", 4, "3").await;
    eventually(LONG, "the second pods running", || {
        let n = running(&pods(sim, "second"));
        async move { (n == 4).then_some(()) }
    })
    .await;
    eventually(LONG, "the new leader reporting its scale-up", || {
        let done = scale_ups_done(&b_view);
        async move { (done >= 1).then_some(()) }
    })
    .await;
    b.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_added_to_fleet_toml_starts_without_touching_the_others() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("reload");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let toml = |clusters: &[&str]| {
        let mut text = format!(
            "[hub]\nscan_interval = \"300ms\"\ndebounce = \"50ms\"\nkubeconfigs = [\"{}\"]\n",
            kubeconfig.display()
        );
        for c in clusters {
            text.push_str(&format!(
                "[[clusters]]\nname = \"{c}\"\nuse_cluster_autoscaler = false\n"
            ));
        }
        text
    };
    let path = dir.path().join("fleet.toml");
    std::fs::write(&path, toml(&["sim-1"])).unwrap();
    let config = fleetscaler::config::FleetConfig::load(&path).unwrap();
    let cancel = CancellationToken::new();
    let hub = fleetscaler::hub::start(config, Some(path.clone()), cancel.clone())
        .await
        .unwrap();
    let view = hub.view.clone();
    let running_since = eventually(LONG, "sim-1 running", || {
        let r = view.report("sim-1");
        async move { r.filter(|r| r.phase == Phase::Running).map(|r| r.since) }
    })
    .await;
    assert!(view.report("sim-2").is_none());

    std::fs::write(&path, "[hub\nthis is not toml").unwrap();
    eventually(LONG, "the broken file refused", || {
        let reload = view.hub().last_reload;
        async move { reload.filter(|r| !r.ok) }
    })
    .await;
    std::fs::write(&path, toml(&["sim-1", "sim-2"])).unwrap();
    eventually(LONG, "sim-2 started by the reload", || {
        let r = view.report("sim-2");
        async move { r.filter(|r| r.phase == Phase::Running) }
    })
    .await;
    let one = view.report("sim-1").unwrap();
    assert_eq!(one.phase, Phase::Running);
    assert_eq!(one.since, running_since, "sim-1 was not restarted");
    assert_eq!(one.restarts, 0);
    assert!(view.hub().last_reload.unwrap().ok);
    cancel.cancel();
    hub.wait().await;
    fleet.shutdown().await;
}

/// A replica that takes the Lease over from one that died repairs what the dead one left
/// (here: a node tainted and cordoned for a drain that never finished).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_repairs_what_the_dead_one_left() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let sim = &fleet.clusters()[0];
    let client = sim.client().await.unwrap();
    let worker = first_worker(sim);
    let node = worker["metadata"]["name"].as_str().unwrap().to_string();
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({
        "metadata": {"annotations": {"fleetscaler.io/cordoned-for-scale-down": "true"}},
        "spec": {"unschedulable": true, "taints": [{"key": TAINT, "value": "1", "effect": "NoSchedule"}]}
    });
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // The dead replica's Lease, renewed just now.
    let now = jiff::Timestamp::now();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "fleetscaler", "namespace": "default"},
        "spec": {"holderIdentity": "dead", "leaseDurationSeconds": 2,
            "acquireTime": now.to_string(), "renewTime": now.to_string(), "leaseTransitions": 0}
    }))
    .unwrap();
    Api::<Lease>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();

    let dir = TempDir::new("leader-repair");
    let mut config = fleet_config(&fleet, dir.path(), fast_settings());
    config.hub.leader_election = election("new");
    let hub = Hub::start(config).await;
    leading(&hub.view(), true).await;
    eventually(
        LONG,
        "the dead leader's taint cleared by the new one",
        || {
            let clear = tainted_nodes(sim).is_empty();
            let cordoned = sim
                .get(Resource::Nodes, "", &node)
                .is_some_and(|n| n["spec"]["unschedulable"] == true);
            async move { (clear && !cordoned).then_some(()) }
        },
    )
    .await;
    hub.stop().await;
    fleet.shutdown().await;
}
