#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The chart's membership (values `membership`, docs/install.md), as real Helm renders it
//! (tests/fleet/chart_support): fleet.toml's `[membership]` from the values (or from the
//! environment with `configToml`), the token mounted, and the RBAC of each source put to
//! work: a hub running the rendered `[membership]` against a simulated management cluster
//! holding one object of each source, every request recorded; the rendered rules must allow
//! each one, and grant nothing the hub did not use.

use crate::chart_support;
use crate::e2e_support;
use crate::rbac_support;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chart_support::*;
use e2e_support::{Hub, TempDir, eventually};
use fleetscaler::config::FleetConfig;
use fleetscaler::config::hub::HubConfig;
use fleetscaler::sim::api::audit::RequestRecord;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::{FleetSettings, Shape};
use rbac_support::{Account, Policy};
use serde_json::{Value, json};

/// The rules of `docs` named `<release>-membership`, as (kind, namespace, rules).
fn membership_rules(docs: &[Value]) -> Vec<(String, String, Value)> {
    docs.iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .filter(|d| d["metadata"]["name"] == "fleetscaler-membership")
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                d["rules"].clone(),
            )
        })
        .collect()
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": [resource], "verbs": verbs})
}

#[test]
fn the_values_set_membership_and_its_rbac_follows_the_sources_and_namespaces() {
    let rendered = docs("membership");
    let config = check_config("membership", &rendered);
    let m = &config["membership"];
    assert_eq!(m["enabled"], true);
    assert_eq!(m["namespaces"], json!([]));
    assert_eq!(m["resync"], "20s");
    assert_eq!(
        (&m["secrets"]["enabled"], &m["secrets"]["argocd"]),
        (&json!(true), &json!(true))
    );
    let plugin = &m["cluster_profiles"]["providers"]["open-cluster-management"];
    assert_eq!(plugin["command"], "/usr/local/bin/cp-creds");
    assert_eq!(plugin["env"]["CP_CREDS_MODE"], "<redacted>", "{plugin}");
    assert_eq!(m["managed_clusters"]["service_account"], "fleetscaler-hub");
    assert_eq!(pod_spec(&rendered)["automountServiceAccountToken"], true);
    let rules = membership_rules(&rendered);
    assert_eq!(
        rules,
        [(
            "ClusterRole".to_string(),
            String::new(),
            json!([
                rule("", "secrets", &["list", "watch"]),
                rule(
                    "multicluster.x-k8s.io",
                    "clusterprofiles",
                    &["list", "watch"]
                ),
                rule(
                    "cluster.open-cluster-management.io",
                    "managedclusters",
                    &["list", "watch"]
                ),
                rule(
                    "authentication.open-cluster-management.io",
                    "managedserviceaccounts",
                    &["list", "watch"]
                ),
                rule("", "secrets", &["get"]),
            ])
        )]
    );

    // Two namespaces: a Role in each, and nothing cluster-wide.
    let rendered = docs("membership-namespaced");
    let config = check_config("membership-namespaced", &rendered);
    // The plugin, which the image does not carry, copied into a volume the hub reads.
    assert_eq!(pod_spec(&rendered)["initContainers"][0]["name"], "plugins");
    let mounts = container(&rendered)["volumeMounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["mountPath"] == "/plugins" && m["readOnly"] == true),
        "{mounts:?}"
    );
    assert_eq!(
        config["membership"]["namespaces"],
        json!(["fleet", "inventory"])
    );
    let namespaced = json!([
        rule("", "secrets", &["list", "watch"]),
        rule(
            "multicluster.x-k8s.io",
            "clusterprofiles",
            &["list", "watch"]
        ),
    ]);
    assert_eq!(
        membership_rules(&rendered),
        [
            ("Role".to_string(), "fleet".to_string(), namespaced.clone()),
            ("Role".to_string(), "inventory".to_string(), namespaced),
        ]
    );

    // ManagedClusters alone need no namespaces: cluster-scoped, with each token Secret in
    // its cluster's namespace, they are read everywhere; no Secret is listed.
    let rendered = docs("membership-managed");
    let config = check_config("membership-managed", &rendered);
    assert_eq!(config["membership"]["secrets"]["enabled"], false);
    assert_eq!(
        membership_rules(&rendered),
        [(
            "ClusterRole".to_string(),
            String::new(),
            json!([
                rule(
                    "cluster.open-cluster-management.io",
                    "managedclusters",
                    &["list", "watch"]
                ),
                rule(
                    "authentication.open-cluster-management.io",
                    "managedserviceaccounts",
                    &["list", "watch"]
                ),
                rule("", "secrets", &["get"]),
            ])
        )]
    );

    // configToml: the same keys from the environment.
    let rendered = docs("membership-config-toml");
    let config = check_config("membership-config-toml", &rendered);
    assert_eq!(config["membership"]["enabled"], true);
    assert_eq!(config["membership"]["namespaces"], json!(["fleet"]));

    // Off by default: no rule, no key.
    let rendered = docs("default");
    assert!(membership_rules(&rendered).is_empty());
    assert_eq!(
        check_config("default", &rendered)["membership"]["enabled"],
        false
    );
}

/// The inventory of the management cluster: a labelled Secret, a ClusterProfile and a
/// ManagedCluster (with its ManagedServiceAccount and token Secret), all for `member`.
/// One case of the render: its name, the namespace holding its Secret and ClusterProfile,
/// its access provider and its ManagedServiceAccount.
struct Case {
    name: &'static str,
    namespace: &'static str,
    provider: &'static str,
    sa: &'static str,
}

fn inventory(management: &ClusterHandle, member: &ClusterHandle, case: &Case) {
    let (namespace, provider, sa) = (case.namespace, case.provider, case.sa);
    let mut state = management.state();
    for ns in ["fleet", "inventory", "member"] {
        state
            .create(Resource::Namespaces, "", json!({"metadata": {"name": ns}}))
            .unwrap();
    }
    let kubeconfig = fleetscaler::sim::kubeconfig::render(&[member.entry()]).unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "from-secret", "labels": {"fleetscaler.io/cluster": "from-secret"}},
        "stringData": {"kubeconfig": kubeconfig}});
    state.create(Resource::Secrets, namespace, secret).unwrap();
    let profile = json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "from-profile"}, "spec": {"clusterManager": {"name": "test"}},
        "status": {"accessProviders": [{"name": provider, "cluster": {"server": member.server_url(),
            "certificate-authority-data": STANDARD.encode(&member.entry().ca_pem)}}]}});
    state
        .create(Resource::ClusterProfiles, namespace, profile)
        .unwrap();
    let token = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "token"}, "stringData": {"token": member.token()}});
    state.create(Resource::Secrets, "member", token).unwrap();
    let msa = json!({"apiVersion": "authentication.open-cluster-management.io/v1beta1",
        "kind": "ManagedServiceAccount", "metadata": {"name": sa},
        "spec": {"rotation": {}}, "status": {"tokenSecretRef": {"name": "token"}}});
    state
        .create(Resource::ManagedServiceAccounts, "member", msa)
        .unwrap();
    let managed = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "member"},
        "spec": {"managedClusterClientConfigs": [{"url": member.server_url()}]}});
    state
        .create(Resource::ManagedClusters, "", managed)
        .unwrap();
}

/// The rendered fleet.toml's `[membership]`, reaching `management` through its context
/// (the pod would use its in-cluster token), and nothing else of the render.
fn rendered_membership(
    docs: &[Value],
    kubeconfig: &std::path::Path,
    management: &str,
) -> FleetConfig {
    let rendered = FleetConfig::parse(&fleet_toml(docs), "rendered").unwrap();
    let mut membership = rendered.membership;
    membership.context = Some(management.to_string());
    membership.resync = Duration::from_secs(1);
    FleetConfig {
        hub: HubConfig {
            listen: "127.0.0.1:0".into(),
            kubeconfigs: vec![kubeconfig.to_path_buf()],
            ..HubConfig::default()
        },
        membership,
        ..FleetConfig::default()
    }
}

/// Runs the rendered `[membership]` of `case` against a management cluster holding one
/// object of each source; returns the requests it answered.
async fn inventory_calls(
    case: &Case,
    docs: &[Value],
    grants: &rbac_support::Grants,
) -> (Vec<RequestRecord>, Vec<String>) {
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
    let (management, member) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    inventory(management, member, case);
    management.cluster.requests.enable();
    let dir = TempDir::new(&format!("chart-{}", case.name));
    let kubeconfig = dir.path().join("management.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let hub = Hub::start(rendered_membership(docs, &kubeconfig, management.name())).await;
    // Every permission the render grants used at least once (lists, then the watches that
    // follow them, and the token Secret's get), or the time is up and the assertion below
    // names what was not.
    let used = |grants: &rbac_support::Grants| {
        let used = management.cluster.requests.records();
        let unused = grants.unused(&used);
        (used, unused)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (calls, unused) = loop {
        let (calls, unused) = used(grants);
        if unused.is_empty() || tokio::time::Instant::now() > deadline {
            break (calls, unused);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let view = hub.view();
    eventually(Duration::from_secs(30), "the inventory read", || {
        let m = view.hub().membership;
        async move { m.filter(|m| m.last_sync.is_some()) }
    })
    .await;
    hub.stop().await;
    fleet.shutdown().await;
    (calls, unused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_membership_rbac_allows_exactly_the_hubs_inventory_calls() {
    let cases = [
        Case {
            name: "membership",
            namespace: "fleet",
            provider: "open-cluster-management",
            sa: "fleetscaler-hub",
        },
        Case {
            name: "membership-namespaced",
            namespace: "inventory",
            provider: "gke-fleet",
            sa: "fleetscaler",
        },
        Case {
            name: "membership-managed",
            namespace: "fleet",
            provider: "none",
            sa: "fleetscaler",
        },
    ];
    for case in &cases {
        let name = case.name;
        let docs = docs(name);
        let mut policy = Policy::default();
        for doc in membership_docs(&docs) {
            policy.add(doc, name);
        }
        let grants = policy.grants(&Account {
            namespace: NAMESPACE.into(),
            name: "fleetscaler".into(),
        });
        let (calls, unused) = inventory_calls(case, &docs, &grants).await;
        // Discovery and /version are not the inventory's: the hub's own client asks them.
        let resources: Vec<RequestRecord> = calls
            .into_iter()
            .filter(RequestRecord::is_resource)
            .collect();
        let denied = grants.denied(&resources);
        assert!(
            denied.is_empty(),
            "{name}: the chart's rules deny: {denied:?}"
        );
        assert!(
            unused.is_empty(),
            "{name}: the chart grants what the hub never used: {unused:?}"
        );
    }
}

/// The chart's membership Roles, ClusterRoles and their bindings.
fn membership_docs(docs: &[Value]) -> Vec<Value> {
    docs.iter()
        .filter(|d| d["metadata"]["name"] == "fleetscaler-membership")
        .cloned()
        .collect()
}
