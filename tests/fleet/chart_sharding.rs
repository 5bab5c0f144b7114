//! The Helm chart with sharding on, as real Helm renders it (scripts/helm-check.sh): three
//! replicas sharing the clusters, `[hub.sharding]` in the mounted fleet.toml with the Leases
//! in the release namespace, leader election off, the pod's address given to the hub; and a
//! Role that allows exactly the Lease calls a sharded hub makes (its own Lease created,
//! renewed and deleted, the others' listed, its cluster's Lease taken and released), checked
//! against a hub running on a simulated management cluster with every request recorded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::chart_support;
use crate::e2e_support;
use crate::rbac_support;

use std::collections::BTreeSet;
use std::time::Duration;

use chart_support::*;
use e2e_support::{Hub, TempDir, cluster_config, eventually};
use fleetscaler::config::FleetConfig;
use fleetscaler::config::hub::{HubConfig, Sharding};
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::{FleetSettings, Shape};
use rbac_support::{Account, Policy};
use serde_json::json;

#[test]
fn sharding_runs_replicas_that_share_the_clusters() {
    let docs = docs("sharding");
    assert_eq!(one(&docs, "Deployment")["spec"]["replicas"], 3);
    let env = container(&docs)["env"].as_array().unwrap().clone();
    assert!(
        env.iter()
            .any(|e| e["name"] == "POD_IP"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"),
        "{env:?}"
    );
    assert_eq!(pod_spec(&docs)["automountServiceAccountToken"], true);
    let config = check_config("sharding", &docs);
    let sharding = &config["hub"]["sharding"];
    assert_eq!(sharding["enabled"], true, "{config}");
    assert_eq!(sharding["namespace"], NAMESPACE);
    assert_eq!(sharding["lease_prefix"], "fleetscaler");
    assert_eq!(
        sharding["lease_duration"], "20s",
        "the values' own timing kept"
    );
    assert_eq!(config["hub"]["leader_election"]["enabled"], false);
    assert_eq!(one(&docs, "PodDisruptionBudget")["spec"]["minAvailable"], 1);
}

/// A sharded hub's Lease calls on a simulated management cluster against the rendered Role:
/// each allowed, and nothing granted that it did not use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_role_allows_exactly_a_sharded_hubs_lease_calls() {
    let docs = docs("sharding");
    let mut policy = Policy::default();
    for doc in docs.iter().filter(|d| d["kind"] != "ClusterRoleBinding") {
        policy.add(doc.clone(), "the sharding render");
    }
    let account = one(&docs, "ServiceAccount");
    let grants = policy.grants(&Account {
        namespace: NAMESPACE.into(),
        name: account["metadata"]["name"].as_str().unwrap().into(),
    });
    let rendered = check_config("sharding", &docs);
    let prefix = rendered["hub"]["sharding"]["lease_prefix"]
        .as_str()
        .unwrap();

    let fleet = Fleet::start(FleetSettings {
        clusters: 2,
        shape: Shape {
            nodes_per_group: 1,
            pods_per_node: 0,
            workloads: false,
            ..Shape::default()
        },
        ..FleetSettings::default()
    })
    .await
    .unwrap();
    let (management, managed) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let namespace = json!({"metadata": {"name": NAMESPACE}});
    management
        .state()
        .create(Resource::Namespaces, "", namespace)
        .unwrap();
    management.cluster.requests.enable();
    let dir = TempDir::new("helm-sharding");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let config = FleetConfig {
        hub: HubConfig {
            listen: "127.0.0.1:0".into(),
            kubeconfigs: vec![kubeconfig],
            sharding: Sharding {
                enabled: true,
                context: Some(management.name().to_string()),
                namespace: NAMESPACE.into(),
                lease_prefix: prefix.to_string(),
                identity: Some("replica-a".into()),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(200),
                ..Sharding::default()
            },
            ..HubConfig::default()
        },
        clusters: vec![cluster_config(managed.name())],
        ..FleetConfig::default()
    };
    let hub = Hub::start(config).await;
    let view = hub.view();
    // It writes to its one cluster once it holds that cluster's Lease, renewed since.
    let cluster_lease = format!("{prefix}-cluster-{}", managed.name());
    eventually(Duration::from_secs(20), "the cluster's Lease held", || {
        let writing = view
            .hub()
            .sharding
            .is_some_and(|s| s.writing == [managed.name()]);
        async move { writing.then_some(()) }
    })
    .await;
    let renew_time = || {
        management
            .get(Resource::Leases, NAMESPACE, &cluster_lease)
            .map(|l| l["spec"]["renewTime"].clone())
    };
    let first = renew_time();
    eventually(Duration::from_secs(5), "a renewal", || {
        let now = renew_time();
        let first = first.clone();
        async move { (now.is_some() && now != first).then_some(()) }
    })
    .await;
    hub.stop().await;
    // A clean stop leaves: the replica's Lease deleted, the cluster's released.
    let replica_lease = format!("{prefix}-replica-replica-a");
    assert!(
        management
            .get(Resource::Leases, NAMESPACE, &replica_lease)
            .is_none()
    );
    let released = management
        .get(Resource::Leases, NAMESPACE, &cluster_lease)
        .unwrap();
    assert!(released["spec"]["holderIdentity"].is_null(), "{released}");
    let used = management.cluster.requests.records();
    fleet.shutdown().await;

    grants.assert_exactly(&used, "the chart's Role");
    let verbs: BTreeSet<&str> = used.iter().map(|r| r.verb.as_str()).collect();
    assert_eq!(
        verbs,
        BTreeSet::from(["create", "delete", "get", "list", "patch", "update"]),
        "{used:?}"
    );
}
