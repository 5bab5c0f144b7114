#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Fault injection, switched at run time through the cluster handle: injected errors
//! (500/429), latency, cut watches, refused and hung connections, resources RBAC refuses —
//! and the other clusters of the fleet unaffected; and through the admin endpoint over HTTP:
//! the cloud out of capacity for an instance type in a zone.

use crate::sim_support;

use std::time::{Duration, Instant};

use fleetscaler::sim::admin;
use fleetscaler::sim::faults::{Faults, Outage};
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, Patch, PatchParams, WatchParams};
use kube::{Api, Error};
use serde_json::{Value, json};
use sim_support::{client, eventually, http_send, machine_api};

async fn two_clusters() -> Fleet {
    Fleet::start(FleetSettings {
        clusters: 2,
        shape: Shape {
            nodes_per_group: 1,
            workloads: false,
            ..Shape::default()
        },
        timing: Timing::fast(),
        ..FleetSettings::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn injected_errors_and_latency() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let ns: Api<Namespace> = Api::all(client(sim1).await);
    sim1.faults().set(Faults {
        error_rate: 1.0,
        error_code: 500,
        ..Faults::default()
    });
    match ns.get("default").await.unwrap_err() {
        Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (500, "InternalError")),
        other => panic!("expected 500, got {other:?}"),
    }
    sim1.faults().set(Faults {
        error_rate: 1.0,
        error_code: 429,
        ..Faults::default()
    });
    match ns.get("default").await.unwrap_err() {
        Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests")),
        other => panic!("expected 429, got {other:?}"),
    }
    // Half the requests fail, half succeed (the draws are seeded).
    sim1.faults().set(Faults {
        error_rate: 0.5,
        error_code: 500,
        ..Faults::default()
    });
    let mut failures = 0;
    for _ in 0..40 {
        if ns.get("default").await.is_err() {
            failures += 1;
        }
    }
    assert!((5..35).contains(&failures), "{failures} of 40 failed");
    // The other cluster never noticed.
    let other: Api<Namespace> = Api::all(client(fleet.cluster(2).unwrap()).await);
    for _ in 0..10 {
        other.get("default").await.unwrap();
    }
    sim1.faults().set(Faults {
        latency_ms: 300,
        ..Faults::default()
    });
    let start = Instant::now();
    ns.get("default").await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    sim1.faults().clear();
    ns.get("default").await.unwrap();
    fleet.shutdown().await;
}

/// A forbidden resource is refused (403, in RBAC's words) for every verb and scope, and
/// only it: the same resource of another group, and the other resources, are served.
#[tokio::test]
async fn forbidden_resources_are_refused_as_rbac_refuses_them() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let kube = client(sim1).await;
    sim1.faults().set(Faults {
        forbidden: vec![
            "persistentvolumeclaims".into(),
            "csinodes.storage.k8s.io".into(),
        ],
        ..Faults::default()
    });
    let refused = |e: Error| match e {
        Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("expected 403, got {other:?}"),
    };
    let claims: Api<PersistentVolumeClaim> = Api::all(kube.clone());
    let (code, reason, message) = refused(claims.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        message,
        "persistentvolumeclaims is forbidden: User \"sim-1\" cannot list resource \
         \"persistentvolumeclaims\" in API group \"\" at the cluster scope"
    );
    let in_ns: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), "default");
    let (code, _, message) = refused(in_ns.get("data").await.unwrap_err());
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot get resource") && message.contains("in the namespace \"default\""),
        "{message}"
    );
    let csi: Api<CSINode> = Api::all(kube.clone());
    let (code, _, message) = refused(csi.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert!(
        message.starts_with("csinodes.storage.k8s.io is forbidden"),
        "{message}"
    );
    Api::<PersistentVolume>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    Api::<StorageClass>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let other = Api::<PersistentVolumeClaim>::all(client(fleet.cluster(2).unwrap()).await);
    other.list(&ListParams::default()).await.unwrap();
    sim1.faults().clear();
    claims.list(&ListParams::default()).await.unwrap();
    fleet.shutdown().await;
}

#[tokio::test]
async fn outages_refuse_or_hang_and_recover() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let ns: Api<Namespace> = Api::all(client(sim1).await);
    ns.get("default").await.unwrap();
    sim1.faults().set(Faults {
        outage: Some(Outage::Refuse),
        ..Faults::default()
    });
    let refused = tokio::time::timeout(Duration::from_secs(10), ns.get("default"))
        .await
        .unwrap();
    assert!(
        !matches!(refused, Ok(_) | Err(Error::Api(_))),
        "{refused:?}"
    );
    sim1.faults().set(Faults {
        outage: Some(Outage::Hang),
        ..Faults::default()
    });
    let hung = tokio::time::timeout(Duration::from_millis(500), ns.get("default")).await;
    assert!(hung.is_err(), "a hung server answered: {hung:?}");
    let other: Api<Namespace> = Api::all(client(fleet.cluster(2).unwrap()).await);
    other.get("default").await.unwrap();
    sim1.faults().clear();
    // The client recovers by itself (hung connections are closed when the outage ends).
    let mut ok = false;
    for _ in 0..20 {
        if ns.get("default").await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "no request succeeded after the outage ended");
    fleet.shutdown().await;
}

#[tokio::test]
async fn dropped_watches_end_streams() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client(sim1).await, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = Box::pin(
        cms.watch(&WatchParams::default().timeout(60), &rv)
            .await
            .unwrap(),
    );
    sim1.faults().set(Faults {
        drop_watches: true,
        ..Faults::default()
    });
    let next = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap();
    assert!(matches!(next, Ok(None)), "{next:?}");
    fleet.shutdown().await;
}

/// The machines of the MachineSet `set`, as stored.
fn machines_of(cluster: &ClusterHandle, set: &str) -> Vec<Value> {
    let api = cluster.machine_api();
    cluster
        .list(api.machines)
        .into_iter()
        .filter(|m| m["metadata"]["labels"][api.set_label] == set)
        .collect()
}

/// Scales the MachineSet `set` to `replicas` through the API, as the hub would.
async fn scale(cluster: &ClusterHandle, set: &str, replicas: i64) {
    let api = cluster.machine_api();
    let sets = machine_api(
        &client(cluster).await,
        api.group,
        "MachineSet",
        "machinesets",
        api.namespace,
    );
    let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
    sets.patch(set, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

/// Scales `set` up by one and waits for its new machine to finish provisioning.
async fn one_more(cluster: &ClusterHandle, set: &str) -> Value {
    let before = machines_of(cluster, set);
    let known: Vec<&Value> = before.iter().map(|m| &m["metadata"]["name"]).collect();
    scale(cluster, set, before.len() as i64 + 1).await;
    eventually(
        Duration::from_secs(20),
        &format!("a new machine of {set}"),
        || {
            let new = machines_of(cluster, set).into_iter().find(|m| {
                !known.contains(&&m["metadata"]["name"])
                    && !matches!(m["status"]["phase"].as_str(), None | Some("Provisioning"))
            });
            async move { new }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_faults_set_over_the_admin_endpoint_fail_matching_machines() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let (admin, serving) = admin::serve(fleet.clusters().to_vec(), 0).await.unwrap();
    let path = "/clusters/sim-1/faults";
    for (body, field) in [
        (
            r#"{"capacity": [{"instanceType": "m6i.2xlarge", "reason": "no capacity"}]}"#,
            "capacity[0].reason",
        ),
        (
            r#"{"capacity": [{"zone": "us-east-1a"}]}"#,
            "capacity[0]: missing field `instanceType`",
        ),
        (
            r#"{"capacity": [{"instanceType": "m6i.2xlarge", "zones": ["us-east-1a"]}]}"#,
            "capacity[0].zones",
        ),
    ] {
        let (status, answer) = http_send(admin, "PUT", path, body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer.contains(field), "{body}: {answer}");
    }
    let fault = r#"{"capacity": [{"instanceType": "m6i.2xlarge", "zone": "us-east-1a"}]}"#;
    let (status, answer) = http_send(admin, "PUT", path, fault).await;
    assert_eq!(status, 200, "{answer}");
    let set: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        set["capacity"],
        json!([{"instanceType": "m6i.2xlarge", "zone": "us-east-1a", "reason": "InsufficientInstanceCapacity"}])
    );

    // us-east-1a scaled up: its new machine fails as AWS would say; us-east-1b's does not.
    let (zone_a, zone_b) = (
        format!("{}-worker-us-east-1a", sim1.infra),
        format!("{}-worker-us-east-1b", sim1.infra),
    );
    let failed = one_more(sim1, &zone_a).await;
    assert_eq!(failed["status"]["phase"], "Failed", "{failed}");
    let message = failed["status"]["errorMessage"].as_str().unwrap();
    assert_eq!(
        message,
        "error launching instance: InsufficientInstanceCapacity: We currently do not have \
         sufficient m6i.2xlarge capacity in the Availability Zone you requested (us-east-1a)."
    );
    assert_eq!(one_more(sim1, &zone_b).await["status"]["phase"], "Running");
    // The machine running before the fault still runs.
    let running = machines_of(sim1, &zone_a)
        .into_iter()
        .filter(|m| m["status"]["phase"] == "Running")
        .count();
    assert_eq!(running, 1);

    // Cleared: the next machine of us-east-1a gets its node.
    let (status, answer) = http_send(admin, "DELETE", path, "").await;
    assert_eq!(
        (status, answer.contains(r#""capacity":[]"#)),
        (200, true),
        "{answer}"
    );
    assert_eq!(one_more(sim1, &zone_a).await["status"]["phase"], "Running");
    serving.abort();
    fleet.shutdown().await;
}
