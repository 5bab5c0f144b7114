//! The controllers' shared view of a cluster's pods and nodes: compact records kept up to
//! date from the store's event history, as an informer's cache is from a watch. A tick
//! costs what changed since the last one, not the size of the cluster; if the history has
//! moved past the index (it fell out of the window) it rebuilds from the tables.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::api::resources::Resource;
use crate::machine_api::NEVER_READY_ANNOTATION;
use crate::store::{EventType, Key, Store, Stored};
use fleetscaler_model::Quantity;

/// Resources requested or offered: milli-CPU, bytes, GPUs, pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amounts {
    pub cpu: i64,
    pub memory: i64,
    pub gpus: i64,
    pub pods: i64,
}

/// What the controllers need of a pod.
#[derive(Clone, Debug)]
pub struct PodInfo {
    pub node: String,
    pub phase: String,
    pub terminating: bool,
    pub requests: Amounts,
    pub labels: BTreeMap<String, String>,
    /// The controlling owner's uid (a simulated ReplicaSet or DaemonSet).
    pub owner_uid: String,
    /// When the index first saw the pod in its current state (bound, terminating).
    pub since: Instant,
    /// The pod spec, kept only while it waits for the scheduler.
    pub spec: Option<Box<Value>>,
    pub unschedulable: bool,
}

/// What the controllers need of a node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub allocatable: Amounts,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Value>,
    pub ready: bool,
    pub unschedulable: bool,
    pub never_ready: bool,
    pub ip: String,
    pub since: Instant,
}

/// The index of one cluster's pods and nodes.
#[derive(Debug, Default)]
pub struct Index {
    pos: u64,
    pub pods: HashMap<Key, PodInfo>,
    pub nodes: BTreeMap<String, NodeInfo>,
    /// Requests of the live pods bound to each node.
    pub usage: HashMap<String, Amounts>,
    /// Bumped whenever capacity may have been freed or added (node changes, pods leaving):
    /// the scheduler retries unschedulable pods only then.
    pub capacity_epoch: u64,
    /// Bumped on every pod or node change the index applies: a controller that found nothing
    /// to do at some revision has nothing to do until it moves (or a timer of its own is due).
    pub revision: u64,
    /// Work sets, so that a pass costs what is to be done, not the size of the cluster:
    /// pods waiting for the scheduler (unbound, Pending) ...
    pub waiting: BTreeSet<Key>,
    /// ... bound pods waiting for their kubelet to start them ...
    pub starting: BTreeSet<Key>,
    /// ... pods marked for deletion ...
    pub terminating: BTreeSet<Key>,
    /// ... and nodes not Ready.
    pub not_ready: BTreeSet<String>,
    /// Live (not terminating) pods per controlling owner uid.
    pub live_by_owner: HashMap<String, usize>,
    /// Bumped when a node goes away (its pods must be collected).
    pub nodes_removed: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    deletion_timestamp: Option<String>,
    #[serde(default)]
    owner_references: Vec<OwnerRef>,
}

#[derive(Deserialize)]
struct OwnerRef {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    controller: Option<bool>,
}

#[derive(Deserialize)]
struct PodView {
    metadata: Meta,
    #[serde(default)]
    spec: PodSpecView,
    #[serde(default)]
    status: PodStatusView,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodSpecView {
    #[serde(default)]
    node_name: String,
    #[serde(default)]
    containers: Vec<ContainerView>,
}

#[derive(Deserialize, Default)]
struct ContainerView {
    #[serde(default)]
    resources: ResourcesView,
}

#[derive(Deserialize, Default)]
struct ResourcesView {
    #[serde(default)]
    requests: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodStatusView {
    #[serde(default)]
    phase: String,
    #[serde(default)]
    conditions: Vec<Value>,
}

#[derive(Deserialize)]
struct NodeView {
    metadata: Meta,
    #[serde(default)]
    spec: NodeSpecView,
    #[serde(default)]
    status: NodeStatusView,
}

#[derive(Deserialize, Default)]
struct NodeSpecView {
    #[serde(default)]
    taints: Vec<Value>,
    #[serde(default)]
    unschedulable: bool,
}

#[derive(Deserialize, Default)]
struct NodeStatusView {
    #[serde(default)]
    allocatable: BTreeMap<String, String>,
    #[serde(default)]
    conditions: Vec<Value>,
    #[serde(default)]
    addresses: Vec<Value>,
}

/// Parses a quantity from the cluster; an unparsable one counts as zero (a real scheduler
/// would never see it: the API server validates quantities).
fn quantity(text: Option<&String>, milli: bool) -> i64 {
    text.and_then(|t| Quantity::parse_non_negative(t).ok())
        .map_or(0, |q| {
            if milli {
                q.milli_ceil()
            } else {
                q.units_ceil()
            }
        })
}

/// The total requests of a pod spec (as JSON).
pub fn pod_requests(spec: &Value) -> Amounts {
    let view: PodSpecView = serde_json::from_value(spec.clone()).unwrap_or_default();
    requests_of(&view)
}

fn requests_of(spec: &PodSpecView) -> Amounts {
    let mut total = Amounts {
        pods: 1,
        ..Amounts::default()
    };
    for c in &spec.containers {
        let requests = &c.resources.requests;
        total.cpu += quantity(requests.get("cpu"), true);
        total.memory += quantity(requests.get("memory"), false);
        total.gpus += quantity(requests.get("nvidia.com/gpu"), false);
    }
    total
}

impl Amounts {
    fn add(&mut self, o: &Amounts, sign: i64) {
        self.cpu += sign * o.cpu;
        self.memory += sign * o.memory;
        self.gpus += sign * o.gpus;
        self.pods += sign * o.pods;
    }
}

impl Index {
    /// Brings the index up to the store's latest version.
    pub fn sync(&mut self, store: &Store, now: Instant) {
        let events: Option<Vec<(Resource, EventType, std::sync::Arc<Stored>)>> =
            store.events_after(self.pos).ok().map(|it| {
                it.filter(|e| matches!(e.resource, Resource::Pods | Resource::Nodes))
                    .map(|e| (e.resource, e.ty, e.object.clone()))
                    .collect()
            });
        match events {
            Some(events) => {
                for (resource, ty, object) in events {
                    self.apply(resource, ty, &object, now);
                }
            }
            None => self.rebuild(store, now),
        }
        self.pos = store.rv();
    }

    fn rebuild(&mut self, store: &Store, now: Instant) {
        let since: HashMap<Key, Instant> = self
            .pods
            .iter()
            .map(|(k, p)| (k.clone(), p.since))
            .collect();
        *self = Index {
            capacity_epoch: self.capacity_epoch + 1,
            revision: self.revision + 1,
            // Pods of nodes that went away while the index was behind must be looked at.
            nodes_removed: self.nodes_removed + 1,
            ..Index::default()
        };
        for object in store.range(Resource::Nodes, None, None) {
            self.apply(Resource::Nodes, EventType::Added, object, now);
        }
        for object in store.range(Resource::Pods, None, None) {
            self.apply(
                Resource::Pods,
                EventType::Added,
                object,
                since.get(&object.key).copied().unwrap_or(now),
            );
        }
    }

    fn apply(&mut self, resource: Resource, ty: EventType, object: &Stored, now: Instant) {
        self.revision += 1;
        match resource {
            Resource::Nodes => self.apply_node(ty, object, now),
            _ => self.apply_pod(ty, object, now),
        }
    }

    fn apply_node(&mut self, ty: EventType, object: &Stored, now: Instant) {
        self.capacity_epoch += 1;
        let name = object.key.name.to_string();
        let Ok(view) = serde_json::from_slice::<NodeView>(&object.bytes)
            .map_err(drop)
            .and_then(|v| {
                if ty == EventType::Deleted {
                    Err(())
                } else {
                    Ok(v)
                }
            })
        else {
            if self.nodes.remove(&name).is_some() {
                self.nodes_removed += 1;
            }
            self.not_ready.remove(&name);
            return;
        };
        let a = &view.status.allocatable;
        let ready = view
            .status
            .conditions
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let since = self.nodes.get(&name).map_or(now, |n| n.since);
        let never_ready = view
            .metadata
            .annotations
            .contains_key(NEVER_READY_ANNOTATION);
        // Only nodes a kubelet will still bring up are work.
        if ready || never_ready {
            self.not_ready.remove(&name);
        } else {
            self.not_ready.insert(name.clone());
        }
        let ip = view
            .status
            .addresses
            .iter()
            .find(|a| a["type"] == "InternalIP");
        self.nodes.insert(
            name,
            NodeInfo {
                allocatable: Amounts {
                    cpu: quantity(a.get("cpu"), true),
                    memory: quantity(a.get("memory"), false),
                    gpus: quantity(a.get("nvidia.com/gpu"), false),
                    pods: quantity(a.get("pods"), false),
                },
                labels: view.metadata.labels,
                taints: view.spec.taints,
                ready,
                unschedulable: view.spec.unschedulable,
                never_ready,
                ip: ip
                    .and_then(|a| a["address"].as_str())
                    .unwrap_or_default()
                    .to_string(),
                since,
            },
        );
    }

    fn forget_pod(&mut self, key: &Key, old: &PodInfo) {
        if counts_on_node(old) {
            self.usage
                .entry(old.node.clone())
                .or_default()
                .add(&old.requests, -1);
            self.capacity_epoch += 1;
        }
        self.waiting.remove(key);
        self.starting.remove(key);
        self.terminating.remove(key);
        if !old.terminating
            && !old.owner_uid.is_empty()
            && let Some(n) = self.live_by_owner.get_mut(&old.owner_uid)
        {
            *n = n.saturating_sub(1);
        }
    }

    fn apply_pod(&mut self, ty: EventType, object: &Stored, now: Instant) {
        let key = &object.key;
        let old = self.pods.remove(key);
        if let Some(old) = &old {
            self.forget_pod(key, old);
        }
        if ty == EventType::Deleted {
            return;
        }
        let Ok(view) = serde_json::from_slice::<PodView>(&object.bytes) else {
            return;
        };
        let node = view.spec.node_name.clone();
        let terminating = view.metadata.deletion_timestamp.is_some();
        let requests = old
            .as_ref()
            .map_or_else(|| requests_of(&view.spec), |o| o.requests);
        // `since` restarts when the pod changes state (bound, terminating).
        let since = match &old {
            Some(o) if o.node == node && o.terminating == terminating => o.since,
            _ => now,
        };
        let unschedulable = view.status.conditions.iter().any(|c| {
            c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable"
        });
        let owner_uid = view
            .metadata
            .owner_references
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
            .unwrap_or_default();
        let waiting = node.is_empty() && !terminating && view.status.phase == "Pending";
        // The full spec is parsed only for pods the scheduler must place.
        let spec = waiting
            .then(|| {
                serde_json::from_slice::<Value>(&object.bytes)
                    .ok()
                    .map(|mut v| Box::new(v["spec"].take()))
            })
            .flatten();
        let info = PodInfo {
            node,
            phase: view.status.phase,
            terminating,
            requests,
            labels: view.metadata.labels,
            owner_uid,
            since,
            spec,
            unschedulable,
        };
        if counts_on_node(&info) {
            self.usage
                .entry(info.node.clone())
                .or_default()
                .add(&info.requests, 1);
        }
        if info.terminating {
            self.terminating.insert(key.clone());
        } else {
            if waiting {
                self.waiting.insert(key.clone());
            } else if !info.node.is_empty() && info.phase == "Pending" {
                self.starting.insert(key.clone());
            }
            if !info.owner_uid.is_empty() {
                *self
                    .live_by_owner
                    .entry(info.owner_uid.clone())
                    .or_default() += 1;
            }
        }
        self.pods.insert(key.clone(), info);
    }
}

/// Whether a pod occupies its node's resources (bound and not finished).
fn counts_on_node(p: &PodInfo) -> bool {
    !p.node.is_empty() && !matches!(p.phase.as_str(), "Succeeded" | "Failed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_follows_binding_and_deletion() {
        let mut store = Store::new(100);
        let now = Instant::now();
        let mut pod = json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}});
        store.put(
            Resource::Pods,
            Key::new("ns", "p"),
            &mut pod,
            EventType::Added,
        );
        let mut index = Index::default();
        index.sync(&store, now);
        assert_eq!(
            index.usage["n1"],
            Amounts {
                cpu: 250,
                memory: 1 << 30,
                gpus: 0,
                pods: 1
            }
        );
        store.remove(Resource::Pods, &Key::new("ns", "p"), &mut pod);
        index.sync(&store, now);
        assert_eq!(index.usage["n1"], Amounts::default());
        assert!(index.pods.is_empty());
    }

    #[test]
    fn rebuilds_when_the_history_moved_on() {
        let mut store = Store::new(2);
        let mut index = Index::default();
        for i in 0..5 {
            let mut n = json!({"metadata": {"name": format!("n{i}")}, "status": {"allocatable": {"cpu": "4"}}});
            store.put(
                Resource::Nodes,
                Key::cluster(&format!("n{i}")),
                &mut n,
                EventType::Added,
            );
        }
        index.sync(&store, Instant::now());
        assert_eq!(index.nodes.len(), 5);
        assert_eq!(index.nodes["n0"].allocatable.cpu, 4000);
    }

    #[test]
    fn work_sets_follow_a_pods_life() {
        let mut store = Store::new(100);
        let mut index = Index::default();
        let key = Key::new("ns", "p");
        let mut pod = json!({"metadata": {"name": "p", "namespace": "ns",
                "ownerReferences": [{"uid": "rs-1", "controller": true}]},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
        store.put(Resource::Pods, key.clone(), &mut pod, EventType::Added);
        index.sync(&store, Instant::now());
        assert!(index.waiting.contains(&key) && index.pods[&key].spec.is_some());
        assert_eq!(index.live_by_owner["rs-1"], 1);
        pod["spec"]["nodeName"] = json!("n1");
        store.put(Resource::Pods, key.clone(), &mut pod, EventType::Modified);
        index.sync(&store, Instant::now());
        assert!(!index.waiting.contains(&key) && index.starting.contains(&key));
        pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        store.put(Resource::Pods, key.clone(), &mut pod, EventType::Modified);
        index.sync(&store, Instant::now());
        assert!(index.terminating.contains(&key) && !index.starting.contains(&key));
        assert_eq!(index.live_by_owner["rs-1"], 0);
        store.remove(Resource::Pods, &key, &mut pod);
        index.sync(&store, Instant::now());
        assert!(index.terminating.is_empty() && index.pods.is_empty());
    }

    #[test]
    fn nodes_not_ready_are_work_until_ready_or_never() {
        let mut store = Store::new(100);
        let mut index = Index::default();
        let mut node = json!({"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        store.put(
            Resource::Nodes,
            Key::cluster("n1"),
            &mut node,
            EventType::Added,
        );
        index.sync(&store, Instant::now());
        assert!(index.not_ready.contains("n1"));
        node["status"]["conditions"][0]["status"] = json!("True");
        store.put(
            Resource::Nodes,
            Key::cluster("n1"),
            &mut node,
            EventType::Modified,
        );
        index.sync(&store, Instant::now());
        assert!(index.not_ready.is_empty() && index.nodes["n1"].ready);
        let removed = index.nodes_removed;
        store.remove(Resource::Nodes, &Key::cluster("n1"), &mut node);
        index.sync(&store, Instant::now());
        assert_eq!(index.nodes_removed, removed + 1);
    }
}
