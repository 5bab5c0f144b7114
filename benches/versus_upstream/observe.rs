//! What the bench reads off each cluster while an autoscaler works: when a node group was
//! first patched, when the load's pods all ran, and each group's replicas. Watches, so a
//! change is seen as it happens, not at the next poll.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::time::Instant;

/// One cluster as the watches last saw it.
#[derive(Debug, Default)]
pub struct Seen {
    /// MachineSet name → spec.replicas.
    pub replicas: BTreeMap<String, i64>,
    /// When a MachineSet's replicas first moved up from what the first list said.
    pub first_patch: Option<Instant>,
    baseline: BTreeMap<String, i64>,
    /// Load pod name → running.
    pub pods: BTreeMap<String, bool>,
}

impl Seen {
    pub fn running(&self) -> usize {
        self.pods.values().filter(|r| **r).count()
    }
}

pub type Shared = Arc<Mutex<Seen>>;

/// Starts the watches of one cluster; they run until the runtime ends.
pub fn watch(client: Client, app: &'static str) -> Shared {
    let seen: Shared = Arc::default();
    tokio::spawn(machine_sets(client.clone(), seen.clone()));
    tokio::spawn(pods(client, app, seen.clone()));
    seen
}

async fn machine_sets(client: Client, seen: Shared) {
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "machinesets");
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut objects = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(next) = objects.next().await {
        let Ok(ms) = next else { continue };
        let name = ms.metadata.name.clone().unwrap_or_default();
        let replicas = ms.data["spec"]["replicas"].as_i64().unwrap_or(0);
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        let base = *s.baseline.entry(name.clone()).or_insert(replicas);
        if replicas > base && s.first_patch.is_none() {
            s.first_patch = Some(Instant::now());
        }
        s.replicas.insert(name, replicas);
    }
}

async fn pods(client: Client, app: &'static str, seen: Shared) {
    let api: Api<Pod> = Api::namespaced(client, "default");
    let config = watcher::Config::default().labels(&format!("app={app}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(next) = events.next().await {
        let Ok(event) = next else { continue };
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none();
                s.pods.insert(p.metadata.name.unwrap_or_default(), running);
            }
            watcher::Event::Delete(p) => {
                s.pods.remove(&p.metadata.name.unwrap_or_default());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}
