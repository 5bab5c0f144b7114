#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! What users see in their clusters, against the simulated fleet over HTTPS: the status
//! ConfigMap (created, rate-limited, in upstream's YAML, removed), Events on the right
//! objects (deduplicated), and leader election between hub replicas on one Lease.

use crate::sim_support;

use std::time::Duration;

use fleetscaler::cluster::ClusterName;
use fleetscaler::cluster::client::from_config;
use fleetscaler::cluster::events::{EventRecorder, RecorderSettings, events_for};
use fleetscaler::cluster::gate::{self, WriteGate};
use fleetscaler::cluster::outcome::{Action, Entry};
use fleetscaler::cluster::status::{
    DRY_RUN_ANNOTATION, LAST_UPDATED_ANNOTATION, STATUS_CONFIGMAP, StatusSettings, StatusWriter,
    WRITER_ANNOTATION, WriteOutcome,
};
use fleetscaler::engine::{EngineState, Plan, Settings, run_once};
use fleetscaler::hub::leader::{LeaderConfig, LeaderElector};
use fleetscaler::model::ClusterSnapshot;
use fleetscaler::model::dump::SnapshotBuilder;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::Flavor;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node};
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use sim_support::{eventually, fleet};
use tokio_util::sync::CancellationToken;

const NS: &str = "openshift-machine-api";
const TIMEOUT: Duration = Duration::from_secs(5);

async fn client(cluster: &ClusterHandle) -> Client {
    from_config(cluster.kube_config().await.unwrap(), "sim-1", TIMEOUT).unwrap()
}

/// The cluster as the engine reads it, straight from the simulated store.
fn snapshot(cluster: &ClusterHandle) -> ClusterSnapshot {
    let mut items: Vec<Value> = Vec::new();
    for r in [
        Resource::Nodes,
        Resource::Pods,
        Resource::OcpMachineSets,
        Resource::OcpMachines,
    ] {
        items.extend(cluster.list(r));
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut b = SnapshotBuilder::default();
    b.add_text(&list.to_string(), "sim").unwrap();
    b.finish().0
}

fn plan(snapshot: &ClusterSnapshot, now: Timestamp) -> Plan {
    run_once(
        snapshot,
        &mut EngineState::default(),
        &Settings::default(),
        now,
    )
}

fn at(t0: Timestamp, secs: i64) -> Timestamp {
    t0 + SignedDuration::from_secs(secs)
}

async fn status_of(cms: &Api<ConfigMap>) -> Option<(Value, String, String)> {
    let cm = cms.get_opt(STATUS_CONFIGMAP).await.unwrap()?;
    let yaml = cm.data.as_ref()?.get("status")?.clone();
    let value: Value = serde_saphyr::from_str(&yaml).unwrap();
    let stamp = cm.metadata.annotations.as_ref()?[LAST_UPDATED_ANNOTATION].clone();
    Some((value, stamp, cm.metadata.resource_version.unwrap()))
}

async fn start() -> (Fleet, Client) {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    (fleet, c)
}

#[tokio::test]
async fn the_status_configmap_is_created_rate_limited_and_removed() {
    let (fleet, c) = start().await;
    let cluster = fleet.cluster(1).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    let settings = StatusSettings::new(NS, TIMEOUT, false, "hub-a");
    let mut writer = StatusWriter::new(c.clone(), settings, WriteGate::always_open());
    let t0: Timestamp = "2026-11-22T10:00:00.25Z".parse().unwrap();

    assert_eq!(
        writer.initializing(t0).await.unwrap(),
        WriteOutcome::Written
    );
    let (v, stamp, _) = status_of(&cms).await.unwrap();
    assert_eq!(v["autoscalerStatus"], "Initializing");
    assert_eq!(stamp, "2026-11-22 10:00:00.25 +0000 UTC");
    assert!(writer.object_ref().uid.is_some());

    let snap = snapshot(cluster);
    let p = plan(&snap, t0);
    assert_eq!(
        writer.write(&p, at(t0, 1)).await.unwrap(),
        WriteOutcome::Written
    );
    let (v, _, version) = status_of(&cms).await.unwrap();
    assert_eq!(v["autoscalerStatus"], "Running");
    for key in ["health", "scaleUp", "scaleDown"] {
        assert!(v["clusterWide"][key]["status"].is_string(), "{key}: {v}");
        assert!(v["clusterWide"][key]["lastTransitionTime"].is_string());
    }
    assert_eq!(v["clusterWide"]["health"]["status"], "Healthy");
    let ready = &v["clusterWide"]["health"]["nodeCounts"]["registered"]["ready"];
    assert_eq!(ready.as_u64().unwrap(), snap.nodes.len() as u64);
    let groups = v["nodeGroups"].as_array().unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert!(
        names.iter().any(|n| n.contains("worker-us-east-1a")),
        "{names:?}"
    );
    for g in groups {
        assert!(g["health"]["cloudProviderTarget"].is_u64(), "{g}");
        assert!(g["health"]["maxSize"].is_u64(), "{g}");
    }

    // A change waits for the minimum interval (5s); it is dated from when it was seen.
    let mut sick = p.clone();
    sick.health.cluster.healthy = false;
    assert_eq!(
        writer.write(&sick, at(t0, 3)).await.unwrap(),
        WriteOutcome::RateLimited
    );
    assert_eq!(status_of(&cms).await.unwrap().2, version, "not rewritten");
    assert_eq!(
        writer.write(&sick, at(t0, 6)).await.unwrap(),
        WriteOutcome::Written
    );
    let (v, _, _) = status_of(&cms).await.unwrap();
    let health = &v["clusterWide"]["health"];
    assert_eq!(health["status"], "Unhealthy");
    assert_eq!(health["lastTransitionTime"], "2026-11-22T10:00:03.25Z");
    // Nothing new: no write until the refresh interval (60s), which moves the probe time.
    assert_eq!(
        writer.write(&sick, at(t0, 30)).await.unwrap(),
        WriteOutcome::RateLimited
    );
    assert_eq!(
        writer.write(&sick, at(t0, 66)).await.unwrap(),
        WriteOutcome::Written
    );
    let (v, _, _) = status_of(&cms).await.unwrap();
    let health = &v["clusterWide"]["health"];
    assert_eq!(health["lastProbeTime"], "2026-11-22T10:01:06.25Z");
    assert_eq!(health["lastTransitionTime"], "2026-11-22T10:00:03.25Z");

    // A replica that may not write does not.
    let (_closed_tx, closed) = gate::channel(false);
    let settings = StatusSettings::new(NS, TIMEOUT, false, "hub-a");
    let mut standby = StatusWriter::new(c.clone(), settings, closed);
    assert_eq!(
        standby.write(&p, at(t0, 200)).await.unwrap(),
        WriteOutcome::GateClosed
    );
    assert_eq!(standby.remove().await.unwrap(), WriteOutcome::GateClosed);
    assert!(status_of(&cms).await.is_some());

    writer.remove().await.unwrap();
    assert!(cms.get_opt(STATUS_CONFIGMAP).await.unwrap().is_none());
    writer.remove().await.unwrap();
    fleet.shutdown().await;
}

/// Seed of issue 12: a dry-run hub beside the live one overwrote its status and, on exit,
/// deleted it.
#[tokio::test]
async fn a_dry_run_hub_leaves_the_live_hubs_status_alone() {
    let (fleet, c) = start().await;
    let cluster = fleet.cluster(1).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    let open = WriteGate::always_open;
    let mut live = StatusWriter::new(
        c.clone(),
        StatusSettings::new(NS, TIMEOUT, false, "live"),
        open(),
    );
    let mut dry = StatusWriter::new(
        c.clone(),
        StatusSettings::new(NS, TIMEOUT, true, "dry"),
        open(),
    );
    let t0 = Timestamp::now();
    let p = plan(&snapshot(cluster), t0);
    assert_eq!(live.write(&p, t0).await.unwrap(), WriteOutcome::Written);
    let (_, _, version) = status_of(&cms).await.unwrap();
    assert_eq!(dry.initializing(t0).await.unwrap(), WriteOutcome::NotOurs);
    assert_eq!(dry.write(&p, t0).await.unwrap(), WriteOutcome::NotOurs);
    assert_eq!(dry.remove().await.unwrap(), WriteOutcome::NotOurs);
    assert_eq!(status_of(&cms).await.unwrap().2, version, "untouched");
    let cm = cms.get(STATUS_CONFIGMAP).await.unwrap();
    let notes = cm.metadata.annotations.unwrap();
    assert_eq!(notes[WRITER_ANNOTATION], "live");
    assert_eq!(notes[DRY_RUN_ANNOTATION], "false");
    assert_eq!(live.remove().await.unwrap(), WriteOutcome::Written);
    assert!(cms.get_opt(STATUS_CONFIGMAP).await.unwrap().is_none());
    fleet.shutdown().await;
}

fn events_of(list: &[Event], kind: &str, name: &str) -> Vec<Event> {
    list.iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
        })
        .cloned()
        .collect()
}

#[tokio::test]
async fn events_land_on_their_objects_and_are_deduplicated() {
    let (fleet, c) = start().await;
    let cluster = fleet.cluster(1).unwrap();
    let mut writer = StatusWriter::new(
        c.clone(),
        StatusSettings::new(NS, TIMEOUT, false, "hub-a"),
        WriteGate::always_open(),
    );
    let now = Timestamp::now();
    writer.initializing(now).await.unwrap();
    let status_ref = writer.object_ref();
    let (recorder, task) = EventRecorder::spawn(
        c.clone(),
        ClusterName::new("sim-1"),
        WriteGate::always_open(),
        RecorderSettings::new(TIMEOUT, "hub-test"),
    );

    let snap = snapshot(cluster);
    let p = plan(&snap, now);
    let group = p.node_groups.iter().find(|g| g.eligible).unwrap();
    let node = snap.nodes.iter().find(|n| !n.uid.is_empty()).unwrap();
    let entries = [
        Entry::done(
            Action::ScaleUp {
                group: group.id.clone(),
                from: 1,
                to: 2,
            },
            "replicas 1 -> 2",
        ),
        Entry::done(
            Action::MarkNode {
                group: group.id.clone(),
                node: node.name.clone(),
                empty: true,
            },
            "tainted",
        ),
    ];
    let events = events_for(&p, &entries, &snap, &status_ref);
    let expected = events.len() as u64;
    assert!(expected >= 4, "{events:?}");
    recorder.record_all(events.clone());
    eventually(Duration::from_secs(5), "events written", || {
        let written = recorder.stats().written;
        async move { (written >= expected).then_some(()) }
    })
    .await;

    let on_status: Api<Event> = Api::namespaced(c.clone(), NS);
    let listed = on_status.list(&ListParams::default()).await.unwrap().items;
    let cm_events = events_of(&listed, "ConfigMap", STATUS_CONFIGMAP);
    let reasons: Vec<&str> = cm_events
        .iter()
        .map(|e| e.reason.as_deref().unwrap())
        .collect();
    assert_eq!(
        reasons.iter().filter(|r| **r == "ScaledUpGroup").count(),
        2,
        "{reasons:?}"
    );
    assert!(reasons.contains(&"ScaleDownEmpty"), "{reasons:?}");
    let cm = Api::<ConfigMap>::namespaced(c.clone(), NS)
        .get(STATUS_CONFIGMAP)
        .await
        .unwrap();
    for e in &cm_events {
        assert_eq!(e.involved_object.uid, cm.metadata.uid);
        assert_eq!(e.involved_object.api_version.as_deref(), Some("v1"));
        assert_eq!(
            e.source.as_ref().unwrap().component.as_deref(),
            Some("cluster-autoscaler")
        );
        assert_eq!(e.reporting_component.as_deref(), Some("fleetscaler"));
        assert_eq!(e.count, Some(1));
        assert!(e.first_timestamp.is_some() && e.last_timestamp.is_some());
        assert!(
            e.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("cluster-autoscaler-status.")
        );
    }

    // The node's event is in `default`, on the node's uid (what `kubectl describe` matches).
    let in_default: Api<Event> = Api::namespaced(c.clone(), "default");
    let by_node = in_default
        .list(&ListParams::default().fields(&format!("involvedObject.name={}", node.name)))
        .await
        .unwrap()
        .items;
    assert_eq!(by_node.len(), 1, "{by_node:?}");
    let real = Api::<Node>::all(c.clone()).get(&node.name).await.unwrap();
    assert_eq!(by_node[0].involved_object.uid, real.metadata.uid);
    assert_eq!(by_node[0].reason.as_deref(), Some("ScaleDown"));
    assert_eq!(by_node[0].type_.as_deref(), Some("Normal"));

    // The same pass again: all duplicates, nothing new written.
    recorder.record_all(events);
    let stats = recorder.stats();
    assert_eq!(stats.duplicates, expected, "{stats:?}");
    // The writer ends once it has written everything queued: after that, the cluster shows
    // whether a duplicate got through.
    drop(recorder);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let again = on_status.list(&ListParams::default()).await.unwrap().items;
    // Neither a new event nor a raised count (a repeat is a patch of the first's count).
    let counts = |list: &[Event]| -> Vec<(Option<String>, Option<i32>)> {
        list.iter()
            .map(|e| (e.metadata.name.clone(), e.count))
            .collect()
    };
    assert_eq!(
        counts(&events_of(&again, "ConfigMap", STATUS_CONFIGMAP)),
        counts(&cm_events)
    );
    fleet.shutdown().await;
}

struct Replica {
    gate: WriteGate,
    identity: String,
    state: tokio::sync::watch::Receiver<fleetscaler::hub::leader::LeaderState>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn replica(cluster: &ClusterHandle, identity: &str) -> Replica {
    let cfg = LeaderConfig {
        namespace: NS.into(),
        lease_name: "fleetscaler".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        request_timeout: Duration::from_secs(1),
    };
    let elector = LeaderElector::new(client(cluster).await, cfg);
    let state = elector.state();
    let (tx, gate) = gate::channel(false);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(elector.run(tx, cancel.clone()));
    Replica {
        gate,
        identity: identity.into(),
        state,
        cancel,
        task,
    }
}

async fn until_open(r: &Replica, limit: Duration) -> Duration {
    let started = tokio::time::Instant::now();
    let mut gate = r.gate.clone();
    tokio::time::timeout(limit, gate.opened())
        .await
        .unwrap_or_else(|_| panic!("{} did not lead within {limit:?}", r.identity));
    started.elapsed()
}

#[tokio::test]
async fn one_replica_leads_and_a_standby_takes_over() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let a = replica(cluster, "hub-a").await;
    until_open(&a, Duration::from_secs(3)).await;
    let b = replica(cluster, "hub-b").await;
    // b has read the lease and seen a holder: it had its chance to take it.
    let mut seen = b.state.clone();
    seen.wait_for(|s| s.holder.is_some()).await.unwrap();
    assert!(
        a.gate.is_open() && !b.gate.is_open(),
        "one leader at a time"
    );
    assert_eq!(b.state.borrow().holder.as_deref(), Some("hub-a"));
    assert!(a.state.borrow().leading);

    // The leader dies without a word: the standby waits out the lease (2s) it saw renewed.
    a.task.abort();
    let took = until_open(&b, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(1500),
        "took over after {took:?}"
    );
    assert!(b.state.borrow().leading);

    // A leader that is stopped releases the lease: the next standby takes it at once.
    let c = replica(cluster, "hub-c").await;
    let mut seen = c.state.clone();
    seen.wait_for(|s| s.holder.is_some()).await.unwrap();
    assert!(!c.gate.is_open());
    b.cancel.cancel();
    b.task.await.unwrap();
    assert!(!b.gate.is_open(), "closed once stopped");
    let took = until_open(&c, Duration::from_secs(2)).await;
    // Well within the ~2s a lease left behind would take: the release did it.
    assert!(
        took < Duration::from_millis(1500),
        "took over after {took:?}"
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client(cluster).await, NS);
    let spec = leases.get("fleetscaler").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("hub-c"));
    assert_eq!(spec.lease_transitions, Some(2));
    c.cancel.cancel();
    c.task.await.unwrap();
    fleet.shutdown().await;
}
