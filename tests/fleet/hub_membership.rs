//! Fleet membership beyond fleet.toml, end to end: sim-1 plays the management cluster and
//! holds the inventory; fleet.toml lists sim-1 alone. A labelled Secret holding sim-2's
//! kubeconfig starts sim-2 (with its annotation's overrides), deleting it stops sim-2; a
//! malformed Secret is reported by name and disturbs nothing, nor does an inventory that
//! cannot be read, nor a reload of `[membership]`; a ManagedCluster with its
//! ManagedServiceAccount's token, and a ClusterProfile reached through a credential plugin
//! (a shell script printing the cluster's token), each bring a cluster in, seen through the
//! hub's watches (its resync is ten minutes there).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use e2e_support::*;
use fleetscaler::config::FleetConfig;
use fleetscaler::config::membership::{ExecPlugin, MembershipConfig};
use fleetscaler::hub::FleetView;
use fleetscaler::hub::membership::MembershipStatus;
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);

/// fleet.toml of sim-1 alone, with `[membership]` reading sim-1 (the management cluster).
/// The resync is long: every change below is seen through the watches.
fn config(fleet: &Fleet, dir: &std::path::Path, membership: MembershipConfig) -> FleetConfig {
    let mut config = fleet_config(fleet, dir, fast_settings());
    config.clusters.truncate(1);
    config.membership = MembershipConfig {
        enabled: true,
        context: Some("sim-1".into()),
        resync: Duration::from_secs(600),
        ..membership
    };
    config
}

async fn create(client: &kube::Client, ar: &ApiResource, ns: Option<&str>, object: Value) {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    let name = object.metadata.name.clone().unwrap();
    api.create(&Default::default(), &object).await.unwrap();
    // As a controller writes it: the status through its subresource.
    if let Some(status) = object.data.get("status") {
        let patch = Patch::Merge(json!({"status": status}));
        api.patch_status(&name, &PatchParams::default(), &patch)
            .await
            .unwrap();
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn secret_resource() -> ApiResource {
    resource("", "v1", "Secret", "secrets")
}

async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&Default::default(), &ns).await.unwrap();
}

/// The inventory's state once `check` holds.
async fn membership(
    view: &FleetView,
    what: &str,
    check: impl Fn(&MembershipStatus) -> bool,
) -> MembershipStatus {
    eventually(LONG, what, || {
        let status = view.hub().membership.filter(|m| check(m));
        async move { status }
    })
    .await
}

fn has_error(m: &MembershipStatus, object: &str, part: &str) -> bool {
    m.errors
        .iter()
        .any(|e| e.object == object && e.message.contains(part))
}

async fn gone(view: &FleetView, name: &str) {
    eventually(LONG, &format!("{name} stopped"), || {
        let absent = view.report(name).is_none();
        async move { absent.then_some(()) }
    })
    .await;
}

/// fleet.toml on disk: sim-1 alone, `[membership]` reading Secrets in sim-1.
fn fleet_toml(kubeconfig: &std::path::Path, resync: &str) -> String {
    format!(
        "[hub]\nscan_interval = \"300ms\"\ndebounce = \"50ms\"\nrequest_timeout = \"2s\"\n\
         kubeconfigs = [\"{}\"]\n\
         [membership]\nenabled = true\ncontext = \"sim-1\"\nresync = \"{resync}\"\n\
         [[clusters]]\nname = \"sim-1\"\nuse_cluster_autoscaler = false\n",
        kubeconfig.display()
    )
}

/// Waits until `name` has run `n` more passes and checks it was never restarted since
/// `before`.
async fn untouched(
    view: &FleetView,
    name: &str,
    before: &fleetscaler::cluster::report::ClusterReport,
) {
    more_passes(view, name, 2).await;
    let now = view.report(name).unwrap();
    assert_eq!(
        (now.since, now.restarts),
        (before.since, 0),
        "{name} untouched"
    );
}

/// sim-2's kubeconfig, as a platform team's inventory would hold it.
fn kubeconfig_of(cluster: &ClusterHandle) -> String {
    fleetscaler::sim::kubeconfig::render(&[cluster.entry()]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_secret_brings_a_cluster_in_and_out() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let (management, sim2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let dir = TempDir::new("membership-secrets");
    let client = management.client().await.unwrap();
    namespace(&client, "fleet").await;
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let path = dir.path().join("fleet.toml");
    std::fs::write(&path, fleet_toml(&kubeconfig, "1s")).unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let handle = fleetscaler::hub::start(
        FleetConfig::load(&path).unwrap(),
        Some(path.clone()),
        cancel.clone(),
    )
    .await
    .unwrap();
    let hub = Hub {
        handle: Some(handle),
        cancel,
    };
    let view = hub.view();
    let (addr, serving) = serve_http(&hub).await;
    membership(&view, "a first listing", |m| m.last_sync.is_some()).await;
    let sim1 = running_report(&view, "sim-1").await;

    let labelled = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "sim-2-kubeconfig", "namespace": "fleet",
            "labels": {"fleetscaler.io/cluster": "sim-2"},
            "annotations": {"fleetscaler.io/overrides": "max_nodes_total = 7"}},
        "stringData": {"kubeconfig": kubeconfig_of(sim2)}});
    create(&client, &secret_resource(), Some("fleet"), labelled).await;
    let report = running_report(&view, "sim-2").await;
    more_passes(&view, "sim-2", 2).await;
    assert_eq!(report.source, "Secret fleet/sim-2-kubeconfig");
    let settings = view
        .report("sim-2")
        .unwrap()
        .settings
        .unwrap()
        .with_sources();
    assert_eq!(
        settings["max_nodes_total"],
        json!({"value": 7, "source": "clusterOverrides"}),
        "the annotation's overrides in the effective settings"
    );
    let (code, body) = http_request(addr, "GET", "/api/v1/fleet").await;
    assert_eq!(code, 200);
    let api: Value = serde_json::from_str(&body).unwrap();
    let sources: Vec<(&str, &str)> = api["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sources,
        [
            ("sim-1", "fleet.toml"),
            ("sim-2", "Secret fleet/sim-2-kubeconfig")
        ]
    );
    let m = &api["hub"]["membership"];
    assert_eq!(m["clusters"], 1);
    assert_eq!(m["sources"][0]["source"], "secrets");
    assert!(m["lastSync"].is_string(), "{m}");
    assert!(!body.contains(sim2.token()), "credentials are never served");

    // A malformed Secret, and one naming a cluster of fleet.toml: each named, nothing else
    // touched.
    let broken = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "broken", "namespace": "fleet",
            "labels": {"fleetscaler.io/cluster": "sim-9"},
            "annotations": {"fleetscaler.io/dry-run": "maybe"}},
        "stringData": {"kubeconfig": kubeconfig_of(sim2)}});
    create(&client, &secret_resource(), Some("fleet"), broken).await;
    let shadow = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "shadow", "namespace": "fleet",
            "labels": {"fleetscaler.io/cluster": "sim-1"}},
        "stringData": {"kubeconfig": kubeconfig_of(sim2)}});
    create(&client, &secret_resource(), Some("fleet"), shadow).await;
    let m = membership(&view, "both Secrets reported", |m| {
        has_error(
            m,
            "Secret fleet/broken",
            "fleetscaler.io/dry-run: \"maybe\"",
        ) && has_error(m, "Secret fleet/shadow", "in fleet.toml, which wins")
    })
    .await;
    assert_eq!(m.clusters, 1);
    untouched(&view, "sim-1", &sim1).await;
    untouched(&view, "sim-2", &report).await;
    assert_eq!(view.report("sim-1").unwrap().source, "fleet.toml");
    assert!(view.report("sim-9").is_none());

    // The inventory cannot be read: the source says why, and its clusters keep running.
    management.faults().set(Faults {
        error_rate: 1.0,
        error_code: 500,
        error_paths: vec!["/secrets".into()],
        ..Faults::default()
    });
    let m = membership(&view, "the listing's failure", |m| {
        m.sources[0].error.is_some() && m.last_sync.is_none()
    })
    .await;
    let error = &m.sources[0].error.as_ref().unwrap().message;
    assert!(
        error.contains("list Secrets labelled fleetscaler.io/cluster"),
        "{error}"
    );
    assert_eq!(m.clusters, 1, "the last good listing is kept");
    untouched(&view, "sim-2", &report).await;
    management.faults().clear();
    membership(&view, "the inventory read again", |m| {
        m.sources[0].error.is_none()
    })
    .await;

    // A reload changing `[membership]` restarts the task, not the clusters it found.
    std::fs::write(&path, fleet_toml(&kubeconfig, "2s")).unwrap();
    eventually(LONG, "the reload", || {
        let reload = view.hub().last_reload;
        async move { reload.filter(|r| r.ok) }
    })
    .await;
    let reloaded = jiff::Timestamp::now();
    membership(&view, "a listing by the new task", |m| {
        m.last_sync.is_some_and(|t| t > reloaded)
    })
    .await;
    untouched(&view, "sim-2", &report).await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "fleet");
    secrets
        .delete("sim-2-kubeconfig", &DeleteParams::default())
        .await
        .unwrap();
    gone(&view, "sim-2").await;
    untouched(&view, "sim-1", &sim1).await;

    serving.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_cluster_and_a_cluster_profile_each_bring_a_cluster_in() {
    let fleet = quiet_fleet(3, Flavor::OpenShift).await;
    let management = &fleet.clusters()[0];
    let (sim2, sim3) = (&fleet.clusters()[1], &fleet.clusters()[2]);
    let dir = TempDir::new("membership-ocm");
    // The access provider's credential plugin: prints sim-3's token as an ExecCredential.
    let plugin = dir.path().join("plugin.sh");
    let credential = json!({"apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential", "status": {"token": sim3.token()}});
    std::fs::write(&plugin, format!("#!/bin/sh\necho '{credential}'\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut membership_config = MembershipConfig::default();
    membership_config.secrets.enabled = false;
    membership_config.managed_clusters.enabled = true;
    membership_config.cluster_profiles.enabled = true;
    membership_config.cluster_profiles.providers.insert(
        "test-provider".into(),
        ExecPlugin {
            command: plugin.display().to_string(),
            ..ExecPlugin::default()
        },
    );
    let client = management.client().await.unwrap();
    let hub = Hub::start(config(&fleet, dir.path(), membership_config)).await;
    let view = hub.view();
    membership(&view, "a first listing", |m| m.last_sync.is_some()).await;

    // Open Cluster Management: the ManagedCluster, and in its namespace the
    // ManagedServiceAccount whose token Secret the addon wrote.
    namespace(&client, "sim-2").await;
    let token = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "fleetscaler-token", "namespace": "sim-2"},
        "stringData": {"token": sim2.token(), "ca.crt": sim2.entry().ca_pem}});
    create(&client, &secret_resource(), Some("sim-2"), token).await;
    let msa = json!({"apiVersion": "authentication.open-cluster-management.io/v1beta1",
        "kind": "ManagedServiceAccount",
        "metadata": {"name": "fleetscaler", "namespace": "sim-2"},
        "spec": {"rotation": {"enabled": true, "validity": "8640h0m0s"}},
        "status": {"tokenSecretRef": {"name": "fleetscaler-token",
            "lastRefreshTimestamp": "2026-01-01T00:00:00Z"}}});
    let msa_ar = resource(
        "authentication.open-cluster-management.io",
        "v1beta1",
        "ManagedServiceAccount",
        "managedserviceaccounts",
    );
    create(&client, &msa_ar, Some("sim-2"), msa).await;
    let managed = json!({"apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster", "metadata": {"name": "sim-2"},
        "spec": {"hubAcceptsClient": true,
            "managedClusterClientConfigs": [{"url": sim2.server_url()}]}});
    let cluster_ar = resource(
        "cluster.open-cluster-management.io",
        "v1",
        "ManagedCluster",
        "managedclusters",
    );
    create(&client, &cluster_ar, None, managed).await;
    let report = running_report(&view, "sim-2").await;
    assert_eq!(report.source, "ManagedCluster sim-2");
    more_passes(&view, "sim-2", 1).await;

    // SIG-Multicluster: a ClusterProfile whose access provider the hub has a plugin for.
    namespace(&client, "fleet").await;
    let profile = json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile", "metadata": {"name": "sim-3", "namespace": "fleet"},
        "spec": {"displayName": "sim-3", "clusterManager": {"name": "test"}},
        "status": {"accessProviders": [{"name": "test-provider", "cluster": {
            "server": sim3.server_url(),
            "certificate-authority-data": STANDARD.encode(&sim3.entry().ca_pem)}}]}});
    let profile_ar = resource(
        "multicluster.x-k8s.io",
        "v1alpha1",
        "ClusterProfile",
        "clusterprofiles",
    );
    create(&client, &profile_ar, Some("fleet"), profile).await;
    let report3 = running_report(&view, "sim-3").await;
    assert_eq!(report3.source, "ClusterProfile fleet/sim-3");
    more_passes(&view, "sim-3", 1).await;
    let m = membership(&view, "both found", |m| m.clusters == 2).await;
    let sources: Vec<(&str, usize)> = m.sources.iter().map(|s| (s.source, s.clusters)).collect();
    assert_eq!(sources, [("clusterProfiles", 1), ("managedClusters", 1)]);
    assert!(m.errors.is_empty(), "{:?}", m.errors);

    let clusters: Api<DynamicObject> = Api::all_with(client.clone(), &cluster_ar);
    clusters
        .delete("sim-2", &DeleteParams::default())
        .await
        .unwrap();
    gone(&view, "sim-2").await;
    let now = view.report("sim-3").unwrap();
    assert_eq!(
        (now.since, now.restarts),
        (report3.since, 0),
        "sim-3 untouched"
    );

    hub.stop().await;
    fleet.shutdown().await;
}
