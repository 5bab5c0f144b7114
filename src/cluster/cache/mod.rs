//! The cluster's cache: compact projections of watched objects, kept in the shape the engine
//! reads ([`ClusterSnapshot`]), so a pass borrows them instead of copying.
//!
//! Watch events are projected as they arrive (`update` says what arrives, `watch` starts the
//! watchers) and whole Kubernetes objects are dropped at once: a fleet holds millions of
//! pods and only a few fields of each matter. Each change also says whether it should wake
//! the runner early (a pod that just became unschedulable, a node turning ready, a node
//! group or machine that changed); the rest waits for the scan interval.

mod controllers;
pub mod discovery;
pub mod dra;
pub mod heard;
pub mod lean;
pub mod lean_controller;
pub mod lean_dra;
pub mod lean_storage;
pub mod listwatch;
mod project;
mod provisioning;
mod storage;
mod table;
pub mod update;
pub mod watch;
mod watch_lines;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use self::controllers::{end_controllers, remove_controller};
use self::dra::DraTables;
use self::provisioning::ProvisioningTables;
use self::storage::StorageTables;
use self::table::Table;
pub use self::update::{Change, Kind, Object, Update, WatchError};
use crate::model::autoscaler::{ClusterAutoscaler, MachineAutoscaler};
use crate::model::controller::ControllerKind;
use crate::model::infra::InfrastructureTemplate;
use crate::model::meta::key_of;
use crate::model::pod::PodId;
use crate::model::snapshot::PriorityExpanderConfig;
use crate::model::{ClusterSnapshot, Machine, ObjectKey, Projector, ScalableResource};

/// Interned strings no longer used are dropped after this many deletions.
const PRUNE_EVERY: usize = 10_000;
/// At most this many unreadable objects are remembered (with why) for the status.
const MAX_PROBLEMS: usize = 50;

/// A small kind kept apart and copied into the snapshot when it changes.
#[derive(Debug)]
struct Store<T> {
    table: Table<ObjectKey>,
    items: Vec<T>,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Store {
            table: Table::default(),
            items: Vec::new(),
        }
    }
}

/// Where one watched kind stands.
#[derive(Clone, Debug, Default)]
struct KindState {
    /// Its first full list has arrived.
    synced: bool,
    /// The watch is failing: since when, and the last error.
    failing: Option<(Instant, String)>,
}

/// Sizes, for status and the memory benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStats {
    pub nodes: usize,
    pub pods: usize,
    pub machines: usize,
    pub node_groups: usize,
    pub other: usize,
}

#[derive(Default)]
pub struct Cache {
    snapshot: ClusterSnapshot,
    projector: Projector,
    nodes: Table<ObjectKey>,
    pods: Table<ObjectKey>,
    namespaces: Table<ObjectKey>,
    pdbs: Table<ObjectKey>,
    daemonsets: Table<ObjectKey>,
    /// ReplicationControllers, Jobs, ReplicaSets and StatefulSets (`snapshot.controllers`).
    controllers: BTreeMap<ControllerKind, Table<ObjectKey>>,
    scalables: BTreeMap<Kind, Store<ScalableResource>>,
    machines: BTreeMap<Kind, Store<Machine>>,
    cluster_autoscalers: Store<ClusterAutoscaler>,
    machine_autoscalers: Store<MachineAutoscaler>,
    priority: Store<PriorityExpanderConfig>,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes
    /// (`snapshot.storage`).
    storage: StorageTables,
    /// ProvisioningRequests and PodTemplates (`snapshot.provisioning`).
    provisioning: ProvisioningTables,
    /// ResourceClaims, ResourceClaimTemplates, ResourceSlices and DeviceClasses
    /// (`snapshot.dra`).
    dra: DraTables,
    /// The small kinds changed since the snapshot last copied them.
    dirty: bool,
    kinds: BTreeMap<Kind, KindState>,
    /// Kinds given up on (refused for good): their watches keep trying, and what they send
    /// is ignored until the hub connects again, so that a refusal repeated never makes a
    /// kind the cache no longer waits for unsynced or stale.
    given_up: BTreeSet<Kind>,
    /// Objects that could not be read, by `<kind> <key>`, with why.
    problems: BTreeMap<String, String>,
    deletions: usize,
    /// Changes of what a pass reads, counted: an idle cluster's runner skips a pass whose
    /// count is that of the last one (`runner::idle`).
    changes: u64,
    /// The kinds of the changes counted since the last `take_changed_kinds` (a pass says
    /// what woke it): at most one entry per watched kind.
    changed_kinds: BTreeSet<Kind>,
    /// Set by a projection equal to the one it replaces (a node's heartbeat, a pod's probe):
    /// not a change.
    unchanged: bool,
    /// When each pod was first seen unschedulable, for the scale-up latency metric.
    pending_since: HashMap<ObjectKey, Instant>,
    /// Pods turned unschedulable, counted: a pass that answers new ones goes first
    /// (`pool::Urgency`).
    turned_pending: u64,
}

impl Cache {
    /// A cache for the kinds being watched: it is synced once each has listed.
    pub fn new(kinds: &[Kind]) -> Self {
        let mut cache = Cache {
            kinds: kinds.iter().map(|k| (*k, KindState::default())).collect(),
            ..Cache::default()
        };
        cache.set_controller_listings(kinds);
        cache
    }

    /// Applies one watch update; true when the runner should pass soon.
    pub fn apply(&mut self, update: Update, now: Instant) -> bool {
        let kind = update.kind;
        if self.given_up.contains(&kind) {
            return false;
        }
        let state = self.kinds.entry(kind).or_default();
        // Anything but an error proves the kind is read again: a list page arrived, or the
        // API server accepted a watch (`Resumed`).
        if !matches!(update.change, Change::Error(_)) {
            state.failing = None;
        }
        let counts = matches!(
            update.change,
            Change::InitDone | Change::InitApply(_) | Change::Apply(_) | Change::Delete(_)
        );
        let wake = match update.change {
            Change::Init => {
                self.begin_relist(kind);
                false
            }
            Change::Expect(total) => {
                self.expect(kind, total);
                false
            }
            Change::InitDone => {
                self.end_relist(kind);
                self.kinds.entry(kind).or_default().synced = true;
                if kind.is_storage() {
                    self.refresh_storage_listed();
                }
                if kind.is_provisioning() {
                    self.refresh_provisioning_listed();
                }
                if kind.is_dra() {
                    self.refresh_dra_listed();
                }
                true
            }
            Change::InitApply(object) => {
                self.upsert(kind, object, now);
                false
            }
            Change::Apply(object) => self.upsert(kind, object, now),
            // Cleared `failing` above: the watch works again, and nothing changed.
            Change::Resumed | Change::Expired(_) => false,
            Change::Delete(object) => self.delete(kind, object),
            Change::Error(error) => {
                let failing = &mut self.kinds.entry(kind).or_default().failing;
                let since = failing.as_ref().map_or(now, |(since, _)| *since);
                *failing = Some((since, error.message));
                false
            }
        };
        if counts && !std::mem::take(&mut self.unchanged) {
            self.changes += 1;
            self.changed_kinds.insert(kind);
        }
        wake && self.is_synced()
    }

    /// How many changes of cached objects (each projected differently from before, or gone,
    /// or a relist) the cache has taken: equal counts, equal inputs to a pass.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// How many times a pod turned unschedulable: a count that grew since a pass read the
    /// cache means pending pods that pass has not answered.
    pub fn turned_pending(&self) -> u64 {
        self.turned_pending
    }

    /// The kinds that changed since the last call, named as the API does ("pods, nodes").
    pub fn take_changed_kinds(&mut self) -> String {
        let kinds = std::mem::take(&mut self.changed_kinds);
        let names: Vec<String> = kinds.into_iter().map(Kind::describe).collect();
        names.join(", ")
    }

    /// The watch of `kind` is failing (since its last success).
    pub fn is_failing(&self, kind: Kind) -> bool {
        self.kinds.get(&kind).is_some_and(|k| k.failing.is_some())
    }

    /// Stops waiting for a kind (its watch is refused for good, `why`): the cache is synced
    /// without it. Objects of it already cached stay; a controller kind is marked unreadable,
    /// so that no pod's controller of it is judged missing, and a storage kind leaves volumes
    /// unsimulated.
    pub fn give_up_on(&mut self, kind: Kind, why: &str) {
        self.kinds.remove(&kind);
        self.given_up.insert(kind);
        self.controllers_unreadable(kind, why);
        self.refresh_storage_listed();
        self.refresh_provisioning_listed();
        self.refresh_dra_listed();
    }

    /// Why the kinds not listed yet are not: their last errors.
    pub fn sync_errors(&self) -> Vec<String> {
        self.kinds
            .iter()
            .filter(|(_, s)| !s.synced)
            .filter_map(|(k, s)| {
                let (_, e) = s.failing.as_ref()?;
                Some(format!("{}: {e}", k.describe()))
            })
            .collect()
    }

    /// Every watched kind has listed at least once.
    pub fn is_synced(&self) -> bool {
        self.kinds.values().all(|k| k.synced)
    }

    /// The kinds that have not listed yet.
    pub fn unsynced(&self) -> Vec<Kind> {
        self.kinds
            .iter()
            .filter(|(_, s)| !s.synced)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Why the cache cannot be trusted now: a watch failing for longer than `max_age`.
    pub fn stale(&self, now: Instant, max_age: Duration) -> Option<String> {
        self.kinds.iter().find_map(|(kind, s)| {
            let (since, error) = s.failing.as_ref()?;
            let age = now.saturating_duration_since(*since);
            (age > max_age).then(|| {
                format!(
                    "the watch of {} has failed for {}s: {error}",
                    kind.describe(),
                    age.as_secs()
                )
            })
        })
    }

    /// The cluster as cached, for one pass of the engine.
    pub fn snapshot(&mut self) -> &ClusterSnapshot {
        if self.dirty {
            self.copy_small_kinds();
            self.dirty = false;
        }
        if self.deletions >= PRUNE_EVERY {
            self.projector.prune();
            self.deletions = 0;
        }
        &self.snapshot
    }

    /// The Cluster API infrastructure templates last read (not watched: see the runner's
    /// `infra`).
    pub fn set_infrastructure_templates(&mut self, templates: Vec<InfrastructureTemplate>) {
        self.snapshot.infrastructure_templates = templates;
    }

    /// Objects that could not be read, each with why (at most a few dozen): see [`unreadable`].
    pub fn problems(&self) -> impl Iterator<Item = String> + '_ {
        self.problems
            .iter()
            .map(|(what, why)| format!("{what}: {why}"))
    }

    /// Since when the pod has been unschedulable, as far as this cache knows; forgotten
    /// once taken (a pod's latency is measured once) or when the pod is no longer pending.
    pub fn take_pending_since(&mut self, pod: &PodId) -> Option<Instant> {
        self.pending_since.remove(&pod_key(pod))
    }

    /// Forgets pods that are no longer pending (gone while a list was being redone, say).
    pub fn keep_pending_since<'a>(&mut self, pending: impl Iterator<Item = &'a PodId>) {
        // The usual case on every pass: nothing left to measure, no set to build.
        if self.pending_since.is_empty() {
            return;
        }
        let keep: std::collections::HashSet<ObjectKey> = pending.map(pod_key).collect();
        self.pending_since.retain(|k, _| keep.contains(k));
    }

    pub fn stats(&self) -> CacheStats {
        let s = &self.snapshot;
        CacheStats {
            nodes: s.nodes.len(),
            pods: s.pods.len(),
            machines: self.machines.values().map(|m| m.items.len()).sum(),
            node_groups: self.scalables.values().map(|m| m.items.len()).sum(),
            other: s.namespaces.len()
                + s.pdbs.len()
                + s.daemonsets.len()
                + s.controllers.len()
                + self.storage_objects()
                + self.provisioning_objects()
                + self.dra_objects(),
        }
    }

    fn copy_small_kinds(&mut self) {
        let s = &mut self.snapshot;
        s.scalables = self
            .scalables
            .values()
            .flat_map(|m| m.items.clone())
            .collect();
        s.machines = self
            .machines
            .values()
            .flat_map(|m| m.items.clone())
            .collect();
        s.cluster_autoscalers = self.cluster_autoscalers.items.clone();
        s.machine_autoscalers = self.machine_autoscalers.items.clone();
        s.priority_expanders = self.priority.items.clone();
    }

    fn begin_relist(&mut self, kind: Kind) {
        match kind {
            Kind::Node => self.nodes.begin_relist(),
            Kind::Pod => self.pods.begin_relist(),
            Kind::Namespace => self.namespaces.begin_relist(),
            Kind::PodDisruptionBudget => self.pdbs.begin_relist(),
            Kind::DaemonSet => self.daemonsets.begin_relist(),
            Kind::Controller(c) => self.controllers.entry(c).or_default().begin_relist(),
            Kind::PriorityConfigMap => self.priority.table.begin_relist(),
            Kind::Scalable(..) => self.scalables.entry(kind).or_default().table.begin_relist(),
            Kind::Machine(_) => self.machines.entry(kind).or_default().table.begin_relist(),
            Kind::ClusterAutoscaler => self.cluster_autoscalers.table.begin_relist(),
            Kind::MachineAutoscaler => self.machine_autoscalers.table.begin_relist(),
            Kind::PersistentVolumeClaim
            | Kind::PersistentVolume
            | Kind::StorageClass
            | Kind::CsiNode => self.storage.begin_relist(kind),
            Kind::ProvisioningRequest | Kind::PodTemplate => self.provisioning.begin_relist(kind),
            Kind::ResourceClaim
            | Kind::ResourceClaimTemplate
            | Kind::ResourceSlice
            | Kind::DeviceClass => self.dra.begin_relist(kind),
        }
    }

    /// Room for a list's announced count, for the kinds a large cluster has thousands of
    /// (the others grow by a quarter, which costs them little).
    fn expect(&mut self, kind: Kind, total: usize) {
        let s = &mut self.snapshot;
        match kind {
            Kind::Node => self.nodes.expect(&mut s.nodes, total),
            Kind::Pod => self.pods.expect(&mut s.pods, total),
            _ => {}
        }
    }

    fn end_relist(&mut self, kind: Kind) {
        let s = &mut self.snapshot;
        let gone = match kind {
            Kind::Node => self.nodes.end_relist(&mut s.nodes),
            Kind::Pod => self.pods.end_relist(&mut s.pods),
            Kind::Namespace => self.namespaces.end_relist(&mut s.namespaces),
            Kind::PodDisruptionBudget => self.pdbs.end_relist(&mut s.pdbs),
            Kind::DaemonSet => self.daemonsets.end_relist(&mut s.daemonsets),
            Kind::Controller(c) => end_controllers(&mut self.controllers, s, c),
            Kind::PriorityConfigMap => end_store(&mut self.priority),
            Kind::Scalable(..) => end_store(self.scalables.entry(kind).or_default()),
            Kind::Machine(_) => end_store(self.machines.entry(kind).or_default()),
            Kind::ClusterAutoscaler => end_store(&mut self.cluster_autoscalers),
            Kind::MachineAutoscaler => end_store(&mut self.machine_autoscalers),
            Kind::PersistentVolumeClaim
            | Kind::PersistentVolume
            | Kind::StorageClass
            | Kind::CsiNode => self.storage.end_relist(kind, &mut s.storage),
            Kind::ProvisioningRequest | Kind::PodTemplate => {
                self.provisioning.end_relist(kind, &mut s.provisioning)
            }
            Kind::ResourceClaim
            | Kind::ResourceClaimTemplate
            | Kind::ResourceSlice
            | Kind::DeviceClass => self.dra.end_relist(kind, &mut s.dra),
        };
        self.dirty |= is_small(kind);
        self.deletions += gone;
    }

    /// Projects and stores one object; true when the change should wake the runner.
    fn upsert(&mut self, kind: Kind, object: Object, now: Instant) -> bool {
        let what = describe(kind, &object);
        match self.project_and_store(kind, object, now) {
            Ok(wake) => {
                self.problems.remove(&what);
                wake
            }
            Err(e) => {
                // Nodes, pods, budgets and volumes stay as placeholders that protect what
                // they might (their `unreadable`), controllers as present (not gone for an
                // odd field); anything else that cannot be read must not stay cached as it was.
                if !matches!(
                    kind,
                    Kind::Node
                        | Kind::Pod
                        | Kind::PodDisruptionBudget
                        | Kind::PersistentVolume
                        | Kind::Controller(_)
                        | Kind::ProvisioningRequest
                        | Kind::PodTemplate
                ) {
                    self.forget_unreadable(kind, &what);
                }
                if self.problems.len() < MAX_PROBLEMS || self.problems.contains_key(&what) {
                    self.problems.insert(what, e.to_string());
                }
                false
            }
        }
    }

    /// An object that can no longer be read must not stay cached as it was.
    fn forget_unreadable(&mut self, kind: Kind, what: &str) {
        let Some(key) = what.split_once(' ').map(|(_, k)| k) else {
            return;
        };
        let key = match key.split_once('/') {
            Some((ns, name)) => ObjectKey::new(ns, name),
            None => ObjectKey::new("", key),
        };
        self.remove_key(kind, &key);
    }

    fn delete(&mut self, kind: Kind, object: Object) -> bool {
        let key = key_of(object_meta(&object), &mut self.projector);
        self.problems.remove(&describe(kind, &object));
        self.remove_key(kind, &key)
    }

    /// Removes one object; true when its going should wake the runner.
    fn remove_key(&mut self, kind: Kind, key: &ObjectKey) -> bool {
        let s = &mut self.snapshot;
        let removed = match kind {
            Kind::Node => self.nodes.remove(&mut s.nodes, key).is_some(),
            Kind::Pod => {
                self.pending_since.remove(key);
                self.pods.remove(&mut s.pods, key).is_some()
            }
            Kind::Namespace => self.namespaces.remove(&mut s.namespaces, key).is_some(),
            Kind::PodDisruptionBudget => self.pdbs.remove(&mut s.pdbs, key).is_some(),
            Kind::DaemonSet => self.daemonsets.remove(&mut s.daemonsets, key).is_some(),
            Kind::Controller(c) => remove_controller(&mut self.controllers, s, c, key),
            Kind::PriorityConfigMap => remove_from(&mut self.priority, key),
            Kind::Scalable(..) => remove_from(self.scalables.entry(kind).or_default(), key),
            Kind::Machine(_) => remove_from(self.machines.entry(kind).or_default(), key),
            Kind::ClusterAutoscaler => remove_from(&mut self.cluster_autoscalers, key),
            Kind::MachineAutoscaler => remove_from(&mut self.machine_autoscalers, key),
            Kind::PersistentVolumeClaim
            | Kind::PersistentVolume
            | Kind::StorageClass
            | Kind::CsiNode => self.storage.remove(kind, &mut s.storage, key),
            Kind::ProvisioningRequest | Kind::PodTemplate => {
                self.provisioning.remove(kind, &mut s.provisioning, key)
            }
            Kind::ResourceClaim
            | Kind::ResourceClaimTemplate
            | Kind::ResourceSlice
            | Kind::DeviceClass => self.dra.remove(kind, &mut s.dra, key),
        };
        self.dirty |= is_small(kind);
        self.deletions += 1;
        // A pod that went frees room but never needs a pass before the scan interval, nor
        // does a claim (its pod went) or a slice (fewer devices buy nothing sooner).
        removed
            && !matches!(
                kind,
                Kind::Pod
                    | Kind::Namespace
                    | Kind::PodDisruptionBudget
                    | Kind::DaemonSet
                    | Kind::Controller(_)
                    | Kind::PersistentVolumeClaim
                    | Kind::PersistentVolume
                    | Kind::StorageClass
                    | Kind::CsiNode
                    | Kind::PodTemplate
                    | Kind::ResourceClaim
                    | Kind::ResourceClaimTemplate
                    | Kind::ResourceSlice
                    | Kind::DeviceClass
            )
    }
}

/// Kinds kept apart from the snapshot and copied into it when they change.
fn pod_key(pod: &PodId) -> ObjectKey {
    ObjectKey {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    }
}

fn is_small(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::PriorityConfigMap
            | Kind::Scalable(..)
            | Kind::Machine(_)
            | Kind::ClusterAutoscaler
            | Kind::MachineAutoscaler
    )
}

fn end_store<T>(st: &mut Store<T>) -> usize {
    st.table.end_relist(&mut st.items)
}

fn remove_from<T>(st: &mut Store<T>, key: &ObjectKey) -> bool {
    st.table.remove(&mut st.items, key).is_some()
}

fn object_meta(object: &Object) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    match object {
        Object::Node(o) => &o.metadata,
        Object::Pod(o) => &o.metadata,
        Object::Namespace(o) => &o.metadata,
        Object::PodDisruptionBudget(o) => &o.metadata,
        Object::DaemonSet(o) => &o.metadata,
        Object::Controller(o) => &o.metadata,
        Object::ConfigMap(o) => &o.metadata,
        Object::PersistentVolumeClaim(o) => &o.metadata,
        Object::PersistentVolume(o) => &o.metadata,
        Object::StorageClass(o) => &o.metadata,
        Object::CsiNode(o) => &o.metadata,
        Object::PodTemplate(o) => &o.metadata,
        Object::Dynamic(o) => &o.metadata,
    }
}

/// `<kind> <namespace>/<name>`, naming an object in problems.
fn describe(kind: Kind, object: &Object) -> String {
    let meta = object_meta(object);
    let name = meta.name.as_deref().unwrap_or("<unnamed>");
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{} {ns}/{name}", kind.describe()),
        _ => format!("{} {name}", kind.describe()),
    }
}

/// An object left out of the snapshot because it could not be read (one of
/// [`Cache::problems`], or an infrastructure template), as a warning of the plan.
pub fn unreadable(problem: &str) -> crate::model::Warning {
    crate::model::Warning::about(
        crate::model::WarningCode::UnreadableObject,
        "unreadable object",
        problem,
    )
}

#[cfg(test)]
mod tests;
