#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Watches against kube's client: resuming from a resourceVersion, bookmarks, 410 Gone once
//! the version has left the history window, and kube-runtime's watcher recovering from 410
//! and from cut watches; streaming lists.

use crate::sim_support;

use std::time::Duration;

use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::settings::Flavor;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;
use sim_support::{client, fleet};

fn cm(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn resumes_from_a_version_filters_and_bookmarks() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let cms: Api<ConfigMap> = Api::namespaced(c, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.create(&PostParams::default(), &cm("a", "web"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", "db"))
        .await
        .unwrap();
    let params = WatchParams::default().labels("app=web").timeout(5);
    let mut stream = cms.watch(&params, &rv).await.unwrap().boxed();
    match tokio::time::timeout(LIMIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("a")),
        other => panic!("expected ADDED a, got {other:?}"),
    }
    // Bookmarks come at the cluster's bookmark interval.
    let params = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    }
    .labels("app=none")
    .timeout(5);
    let mut stream = cms.watch(&params, &rv).await.unwrap().boxed();
    match tokio::time::timeout(LIMIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Bookmark(b)) => assert!(!b.metadata.resource_version.is_empty()),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    fleet.shutdown().await;
}

#[tokio::test]
async fn expired_versions_get_410() {
    let fleet = fleet(Flavor::OpenShift, false, 20).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let cms: Api<ConfigMap> = Api::namespaced(c, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for i in 0..40 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), "x"))
            .await
            .unwrap();
    }
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(LIMIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Error(e)) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    fleet.shutdown().await;
}

/// kube-runtime's watcher sees every object despite cut watches and an expired version.
#[tokio::test]
async fn runtime_watcher_recovers_from_cuts_and_410() {
    let fleet = fleet(Flavor::OpenShift, false, 20).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let cms: Api<ConfigMap> = Api::namespaced(c, "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let watched = cms.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(watched, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    let _ = tx.send(o.metadata.name.unwrap_or_default());
                }
                Ok(_) => {}
                // The watcher backs off and retries by itself; errors are not the end.
                Err(_) => {}
            }
        }
    });
    cms.create(&PostParams::default(), &cm("before", "x"))
        .await
        .unwrap();
    wait_for(&mut rx, "before").await;
    // Cut every watch while far more changes than the window holds happen.
    cluster.faults().set(Faults {
        drop_watches: true,
        ..Faults::default()
    });
    for i in 0..60 {
        cms.create(&PostParams::default(), &cm(&format!("gap{i}"), "x"))
            .await
            .unwrap();
    }
    cms.create(&PostParams::default(), &cm("after-gap", "x"))
        .await
        .unwrap();
    cluster.faults().clear();
    wait_for(&mut rx, "after-gap").await;
    cms.create(&PostParams::default(), &cm("live", "x"))
        .await
        .unwrap();
    wait_for(&mut rx, "live").await;
    task.abort();
    fleet.shutdown().await;
}

async fn wait_for(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, name: &str) {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(n) = rx.recv().await {
            if n == name {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the watcher never saw {name}");
}

#[tokio::test]
async fn streaming_lists_end_with_the_initial_events_bookmark() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let c = client(fleet.cluster(1).unwrap()).await;
    let cms: Api<ConfigMap> = Api::namespaced(c, "default");
    cms.create(&PostParams::default(), &cm("one", "x"))
        .await
        .unwrap();
    let mut events = watcher(cms, watcher::Config::default().streaming_lists()).boxed();
    let mut names = Vec::new();
    let done = tokio::time::timeout(LIMIT, async {
        while let Some(e) = events.next().await {
            match e.unwrap() {
                watcher::Event::InitApply(o) => names.push(o.metadata.name.unwrap_or_default()),
                watcher::Event::InitDone => return true,
                _ => {}
            }
        }
        false
    })
    .await;
    assert_eq!(done, Ok(true));
    assert!(names.contains(&"one".to_string()));
    fleet.shutdown().await;
}
