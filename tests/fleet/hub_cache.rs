//! The cluster cache fed by real watchers over HTTPS from a simulated cluster: it lists
//! every kind the cluster serves and stays equal to the cluster as it changes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::sim_support;

use std::time::Duration;

use fleetscaler::cluster::cache::{Cache, Change, Kind, Object, Update, discovery, watch};
use fleetscaler::cluster::client;
use fleetscaler::model::controller::{ControllerKind, Listing};
use fleetscaler::model::{MachineApiGroup, ScalableKind};
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1 as corev1;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

async fn sync(cache: &mut Cache, updates: &mut watch::Updates) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cache.is_synced() {
        let update = tokio::time::timeout_at(deadline, updates.next())
            .await
            .expect("cache synced in time")
            .expect("watch streams do not end");
        cache.apply(update, Instant::now());
    }
}

#[tokio::test]
async fn lists_what_each_flavour_serves_and_follows_changes() {
    for flavor in [Flavor::OpenShift, Flavor::ClusterApi] {
        let fleet = sim_support::fleet(flavor, true, 10_000).await;
        let sim = &fleet.clusters()[0];
        let config = sim.kube_config().await.unwrap();
        let kube = client::from_config(config, "sim-1", Duration::from_secs(5)).unwrap();
        let served = discovery::discover(&kube, Duration::from_secs(5))
            .await
            .unwrap();
        let api = match flavor {
            Flavor::OpenShift => MachineApiGroup::OpenShift,
            Flavor::ClusterApi => MachineApiGroup::ClusterApi,
        };
        assert!(
            served.kinds.contains(&Kind::Machine(api)),
            "{:?}",
            served.kinds
        );
        assert!(
            served.machine_apis.get(api).is_some(),
            "{:?}",
            served.machine_apis
        );
        assert!(served.warnings.is_empty(), "{:?}", served.warnings);
        assert!(
            served
                .kinds
                .contains(&Kind::Scalable(api, ScalableKind::MachineSet))
        );
        assert!(served.kinds.contains(&Kind::PodDisruptionBudget));
        for kind in Kind::STORAGE {
            assert!(served.kinds.contains(&kind), "{kind:?} not watched");
        }
        let mut cache = Cache::new(&served.kinds);
        let heard = fleetscaler::cluster::cache::heard::Heard::new();
        let before = heard.last();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let mut updates = watch::updates(&kube, &served, Duration::from_secs(5), heard.clone());
        sync(&mut cache, &mut updates).await;
        assert!(heard.last() > before, "the lists' answers are heard");
        assert!(
            cache.problems().next().is_none(),
            "{:?}",
            cache.problems().collect::<Vec<_>>()
        );
        let snapshot = cache.snapshot();
        assert_eq!(
            snapshot.nodes.len(),
            sim.list(fleetscaler::sim::api::resources::Resource::Nodes)
                .len()
        );
        assert!(!snapshot.scalables.is_empty());
        assert!(!snapshot.machines.is_empty());
        assert!(snapshot.cluster_autoscaler().is_some());
        // Served, allowed and listed: volumes are simulated. The simulated CSI driver's
        // class and its CSINode on every node are read.
        assert!(snapshot.storage.listed);
        assert_eq!(snapshot.storage.csi_nodes.len(), snapshot.nodes.len());
        let classes: Vec<&str> = snapshot.storage.classes.iter().map(|c| &*c.name).collect();
        assert_eq!(classes, ["gp3-csi"]);
        assert!(snapshot.storage.classes[0].is_default);
        // The controllers pods' owners are looked up in: the workload generator's
        // ReplicaSets, each the owner (by uid) of its pods; DaemonSets are not served.
        let controllers = &snapshot.controllers;
        assert_eq!(
            controllers.replica_sets.len(),
            sim.list(Resource::ReplicaSets).len()
        );
        assert!(!controllers.replica_sets.is_empty());
        assert_eq!(
            controllers.listing(ControllerKind::ReplicaSet),
            &Listing::Complete
        );
        assert_eq!(controllers.listing(ControllerKind::Job), &Listing::Complete);
        assert_eq!(
            controllers.listing(ControllerKind::DaemonSet),
            &Listing::Unlisted
        );
        let owners: Vec<&str> = controllers.replica_sets.iter().map(|r| &*r.uid).collect();
        let orphans: Vec<String> = snapshot
            .pods
            .iter()
            .filter(|p| {
                p.owner
                    .as_ref()
                    .is_some_and(|o| &*o.kind == "ReplicaSet" && !owners.contains(&&*o.uid))
            })
            .map(|p| p.id.to_string())
            .collect();
        assert!(
            orphans.is_empty(),
            "pods without their ReplicaSet: {orphans:?}"
        );

        // A pod that fits nowhere arrives through the watch and wakes the runner.
        let pods: Api<corev1::Pod> = Api::namespaced(kube.clone(), "default");
        let huge: corev1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "huge"},
            "spec": {"containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": "500"}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &huge).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let update = tokio::time::timeout_at(deadline, updates.next())
                .await
                .expect("the pod turned unschedulable in time")
                .unwrap();
            if cache.apply(update, Instant::now()) {
                let snap = cache.snapshot();
                if snap
                    .pods
                    .iter()
                    .any(|p| &*p.id.name == "huge" && p.unschedulable)
                {
                    break;
                }
            }
        }
        fleet.shutdown().await;
    }
}

/// A watch that fails for a moment resumes from the last resourceVersion it saw: no list
/// again (the request log says so), the failure is reported and then its end, with no
/// object changed, and what changed meanwhile arrives as ordinary events.
#[tokio::test]
async fn a_failed_watch_resumes_without_listing_again() {
    let fleet = sim_support::fleet(Flavor::OpenShift, true, 10_000).await;
    let sim = &fleet.clusters()[0];
    let config = sim.kube_config().await.unwrap();
    let kube = client::from_config(config, "sim-1", Duration::from_secs(5)).unwrap();
    let served = discovery::discover(&kube, Duration::from_secs(5))
        .await
        .unwrap();
    let mut cache = Cache::new(&served.kinds);
    let mut updates = watch::updates(&kube, &served, Duration::from_secs(5), Default::default());
    sync(&mut cache, &mut updates).await;

    sim.cluster.requests.enable();
    // Every watch is cut, and new pod requests fail, until the fault is cleared.
    sim.faults().set(Faults {
        drop_watches: true,
        error_rate: 1.0,
        error_code: 500,
        error_paths: vec!["/pods".into()],
        ..Faults::default()
    });
    next_change(&mut cache, &mut updates, |u| {
        u.kind == Kind::Pod && matches!(u.change, Change::Error(_))
    })
    .await;
    assert!(cache.is_failing(Kind::Pod));
    sim.faults().clear();
    // A pod created while the watch was down arrives once it resumes.
    let pods: Api<corev1::Pod> = Api::namespaced(kube.clone(), "default");
    let late: corev1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "late"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &late).await.unwrap();
    next_change(&mut cache, &mut updates, |u| {
        u.kind == Kind::Pod && matches!(u.change, Change::Resumed)
    })
    .await;
    assert!(!cache.is_failing(Kind::Pod));
    next_change(&mut cache, &mut updates, |u| {
        u.kind == Kind::Pod && matches!(&u.change, Change::Apply(Object::Pod(p)) if p.metadata.name.as_deref() == Some("late"))
    })
    .await;
    let lists: Vec<String> = sim
        .cluster
        .requests
        .records()
        .iter()
        .filter(|r| r.verb == "list")
        .map(|r| r.to_string())
        .collect();
    assert!(lists.is_empty(), "listed again: {lists:?}");
    assert!(
        sim.cluster
            .requests
            .records()
            .iter()
            .any(|r| r.verb == "watch" && r.resource == "pods"),
        "the pods were not watched again"
    );
    fleet.shutdown().await;
}

/// Applies updates until one matches `wanted` (which is applied too).
async fn next_change(
    cache: &mut Cache,
    updates: &mut watch::Updates,
    wanted: impl Fn(&Update) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let update = tokio::time::timeout_at(deadline, updates.next())
            .await
            .expect("the change came in time")
            .expect("watch streams do not end");
        let found = wanted(&update);
        cache.apply(update, Instant::now());
        if found {
            return;
        }
    }
}

/// Read from a live cluster (discovery, list and watch, the cache, the projection of owner
/// references), a pod whose ReplicaSet was deleted keeps its node for the drain rules, and
/// one whose ReplicaSet is there does not.
#[tokio::test]
async fn a_pod_whose_replicaset_was_deleted_keeps_its_node() {
    use crate::e2e_support::replica_set_owner;
    use fleetscaler::engine::scale_down::DrainCheck;
    use fleetscaler::engine::settings::Settings;
    use k8s_openapi::api::apps::v1::ReplicaSet;

    let fleet = sim_support::fleet(Flavor::OpenShift, false, 10_000).await;
    let sim = &fleet.clusters()[0];
    let config = sim.kube_config().await.unwrap();
    let kube = client::from_config(config, "sim-1", Duration::from_secs(5)).unwrap();
    let pods: Api<corev1::Pod> = Api::namespaced(kube.clone(), "default");
    for name in ["kept", "gone"] {
        let owner = replica_set_owner(kube.clone(), name).await;
        let pod: corev1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}-0"), "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "c", "image": "x"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    Api::<ReplicaSet>::namespaced(kube.clone(), "default")
        .delete("gone", &Default::default())
        .await
        .unwrap();

    let look =
        fleetscaler::cluster::read::look(&kube, Duration::from_secs(5), Duration::from_secs(30))
            .await
            .unwrap();
    let pod = |name: &str| {
        let found = look.snapshot.pods.iter().find(|p| &*p.id.name == name);
        found.unwrap().clone()
    };
    let check = DrainCheck::new(&look.snapshot, &Settings::default());
    let now = jiff::Timestamp::now();
    let why = check.blocker(&[pod("gone-0")], now).unwrap();
    assert_eq!(
        why,
        "pod default/gone-0's ReplicaSet gone is not in the cluster: nothing would recreate the \
         pod elsewhere"
    );
    assert_eq!(check.blocker(&[pod("kept-0")], now), None);
    fleet.shutdown().await;
}
