//! The simulated machine controller, for either Machine API (the group is data):
//! MachineDeployment → one MachineSet; MachineSet replicas → Machines, removing Machines
//! that carry the delete-machine annotation first when scaling down; a Machine becomes a
//! Node after the provisioning delay, or fails as its MachineSet's failure mode says
//! (`fail`: the cloud's error as its failure, and phase Failed on OpenShift; `no-node`:
//! never gets a node; `not-ready`: its node never turns Ready; `gpu-driver-installing`: its
//! node turns Ready without the GPUs, until a test playing the GPU operator adds them) or as
//! a capacity fault of the
//! simulated cloud matching its instance type and zone says (failed with the cloud's error);
//! a deleted Machine takes its Node with it after the deprovisioning delay. Orphans are garbage-collected as
//! the owner-reference GC would.
//!
//! The logic runs against a [`MachineWorld`]: the simulated fleet's state (`SimWorld`) or a
//! real API server (`sim::testbed`), so both behave alike by construction.

mod infra;
mod objects;
#[cfg(test)]
mod tests;
pub mod world;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::api::resources::Resource;
use crate::faults::CapacityFault;
use crate::machine_api::{FAILURE_MODE_ANNOTATION, MachineApi};
use crate::settings::{Flavor, Timing};
use crate::store::Key;
pub use infra::INFRA_FINALIZER;
pub use objects::{
    Counts, Instance, Launch, Link, create_machine, machine_deployment_status, machine_set_for,
    provision, provision_as, selector_string, set_machine_set_status,
};
pub use world::{MachineWorld, Refusal, SimWorld};

/// Machines created per MachineSet and pass, at most.
const MACHINE_BURST: usize = 100;

/// A Machine as the controller sees it.
#[derive(Debug)]
struct MachineView {
    key: Key,
    owner_uid: String,
    owner_kind: String,
    owner_name: String,
    deleting: bool,
    phase: String,
    /// The cloud refused it: never launched again (Cluster API v1beta2 has no phase Failed,
    /// only the failure fields).
    failed: bool,
    node: Option<String>,
    marked: bool,
    /// Whether it carries the Machine controller's finalizer.
    finalized: bool,
    created: String,
}

/// What the controller reads of a Machine, and nothing more: read straight from the stored
/// JSON, a Machine costs a few strings instead of a whole `Value` tree. A field that is
/// missing or null reads as empty, as the `Value` reading did (a Machine that would not
/// read at all is left out of the set's count, and the set would make another).
#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MachineWire {
    #[serde(deserialize_with = "or_default")]
    metadata: WireMeta,
    #[serde(deserialize_with = "or_default")]
    status: WireStatus,
}

/// Null as the type's default.
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    Ok(<Option<T> as serde::Deserialize>::deserialize(d)?.unwrap_or_default())
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireMeta {
    #[serde(deserialize_with = "or_default")]
    owner_references: Vec<WireOwner>,
    deletion_timestamp: Option<String>,
    #[serde(deserialize_with = "or_default")]
    annotations: BTreeMap<String, serde::de::IgnoredAny>,
    #[serde(deserialize_with = "or_default")]
    creation_timestamp: String,
    #[serde(deserialize_with = "or_default")]
    finalizers: Vec<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct WireOwner {
    #[serde(deserialize_with = "or_default")]
    uid: String,
    #[serde(deserialize_with = "or_default")]
    kind: String,
    #[serde(deserialize_with = "or_default")]
    name: String,
    controller: Option<bool>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireStatus {
    #[serde(deserialize_with = "or_default")]
    phase: String,
    node_ref: Option<WireNodeRef>,
    /// OpenShift's failure.
    error_message: Option<String>,
    #[serde(deserialize_with = "or_default")]
    deprecated: WireDeprecated,
}

/// Cluster API v1beta2's `status.deprecated.v1beta1`, where a failure is reported.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct WireDeprecated {
    #[serde(deserialize_with = "or_default")]
    v1beta1: WireFailure,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireFailure {
    failure_message: Option<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct WireNodeRef {
    name: Option<String>,
}

impl MachineWire {
    fn view(self, api: &MachineApi, key: Key) -> MachineView {
        let owner = self
            .metadata
            .owner_references
            .into_iter()
            .find(|o| o.controller == Some(true))
            .unwrap_or_default();
        MachineView {
            key,
            owner_uid: owner.uid,
            owner_kind: owner.kind,
            owner_name: owner.name,
            deleting: self.metadata.deletion_timestamp.is_some(),
            failed: self.status.phase == "Failed"
                || self.status.error_message.is_some()
                || self.status.deprecated.v1beta1.failure_message.is_some(),
            phase: self.status.phase,
            node: self.status.node_ref.and_then(|n| n.name),
            marked: self
                .metadata
                .annotations
                .contains_key(&api.delete_annotation()),
            finalized: self.metadata.finalizers.iter().any(|f| f == api.finalizer),
            created: self.metadata.creation_timestamp,
        }
    }
}

/// The key of an object as it names itself.
fn key_of(v: &Value) -> Key {
    Key::new(
        v["metadata"]["namespace"].as_str().unwrap_or_default(),
        v["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

/// The uid of an object's controlling owner, if it has one.
fn controller_uid(v: &Value) -> Option<&str> {
    v["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["controller"] == true))
        .and_then(|o| o["uid"].as_str())
}

/// Whether the machine has a Node that reports Ready.
fn has_ready_node<W: MachineWorld>(world: &W, m: &MachineView) -> bool {
    m.node.as_deref().is_some_and(|n| world.node_ready(n))
}

/// What of a Machine API the controller plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// Everything: deployments, sets, machines and the cloud (the simulated fleet).
    #[default]
    Whole,
    /// The cloud, beside the real controllers of the API. OpenShift: they own the sets
    /// (they create and delete Machines) and link Nodes (nodelink), and this plays the
    /// Machine controller's part that talks to the cloud: each Machine gets the Machine
    /// controller's finalizer, its instance (provider ID, addresses, phase Provisioned,
    /// then Running once linked) and its Node; a deleted one loses its Node and then its
    /// finalizer. Cluster API: its controllers own Machines and Nodes too, and this plays
    /// the infrastructure provider of AWSMachines (`infra`).
    Cloud,
}

/// The machine controller of one Machine API of one cluster.
#[derive(Debug)]
pub struct MachineController {
    api: MachineApi,
    role: Role,
    /// The resources whose changes may give a pass work.
    watched: Vec<Resource>,
    /// Machines in a timed stage (provisioning, deleting) and when it began.
    timers: HashMap<String, Instant>,
    /// The world's revision the last pass started from, if it tells one.
    last_revision: Option<u64>,
    /// The simulated cloud's capacity faults in force (none over a real API server).
    capacity: Vec<CapacityFault>,
}

impl MachineController {
    pub fn new(api: MachineApi) -> Self {
        Self::with_role(api, Role::Whole)
    }

    pub fn with_role(api: MachineApi, role: Role) -> Self {
        let mut watched = vec![api.machine_sets, api.machines, Resource::Nodes];
        if api.flavor == Flavor::ClusterApi {
            watched.push(Resource::CapiMachineDeployments);
            if role == Role::Cloud {
                watched.push(Resource::AwsMachines);
            }
        }
        MachineController {
            api,
            role,
            watched,
            timers: HashMap::new(),
            last_revision: None,
            capacity: Vec::new(),
        }
    }

    /// The capacity faults the next passes apply: machines of a matching instance type and
    /// zone that finish provisioning go Failed. The world holds objects, not the cloud
    /// behind them, so whoever runs the controller says what the cloud refuses.
    pub fn set_capacity_faults(&mut self, faults: Vec<CapacityFault>) {
        self.capacity = faults;
    }

    /// The Machine API this controller serves.
    pub fn api(&self) -> &MachineApi {
        &self.api
    }

    /// One pass; cheap when the world says nothing changed and no machine's timed stage is
    /// over (a pass reads every Machine: at every tick of a provisioning, that was most of
    /// a simulated fleet's CPU).
    pub fn step<W: MachineWorld>(&mut self, world: &mut W, timing: &Timing, now: Instant) {
        let seen = world.revision(&self.watched);
        let shortest = timing.machine_provision.min(timing.machine_deprovision);
        let due = self
            .timers
            .values()
            .any(|since| now.saturating_duration_since(*since) >= shortest);
        if seen.is_some() && seen == self.last_revision && !due {
            return;
        }
        match (self.role, self.api.flavor) {
            (Role::Whole, flavor) => {
                if flavor == Flavor::ClusterApi {
                    self.sync_deployments(world);
                }
                self.sync_sets(world);
                self.sync_machines(world, timing, now);
            }
            (Role::Cloud, Flavor::OpenShift) => {
                self.adopt_machines(world);
                self.sync_machines(world, timing, now);
            }
            (Role::Cloud, Flavor::ClusterApi) => self.sync_infra(world, timing, now),
        }
        // Our own writes count as changes: the next pass sees them (a status that depends on
        // another status settles) and, writing nothing new, goes quiet.
        self.last_revision = seen;
    }

    fn machines<W: MachineWorld>(&self, world: &W) -> Vec<MachineView> {
        let read = world.list_as::<MachineWire>(self.api.machines);
        read.into_iter()
            .map(|(key, m)| m.view(&self.api, key))
            .collect()
    }

    fn sync_sets<W: MachineWorld>(&mut self, world: &mut W) {
        let sets: Vec<Value> = world.list(self.api.machine_sets, |_, v| v.clone());
        let machines = self.machines(world);
        let live_sets: HashSet<&str> = sets
            .iter()
            .filter_map(|s| s["metadata"]["uid"].as_str())
            .collect();
        for m in &machines {
            if m.owner_kind == "MachineSet"
                && !live_sets.contains(m.owner_uid.as_str())
                && !m.deleting
            {
                let _ = world.delete(self.api.machines, &m.key);
            }
        }
        for set in &sets {
            self.sync_set(world, set, &machines);
        }
    }

    /// Brings one MachineSet's Machines to its replicas and writes its status.
    fn sync_set<W: MachineWorld>(&self, world: &mut W, set: &Value, machines: &[MachineView]) {
        let uid = set["metadata"]["uid"].as_str().unwrap_or_default();
        let want = set["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
        let mut alive: Vec<&MachineView> = machines
            .iter()
            .filter(|m| m.owner_uid == uid && !m.deleting)
            .collect();
        if alive.len() < want {
            // At most a burst per pass, as real controllers: a huge replica count grows
            // the set over many passes instead of stalling the cluster.
            for _ in alive.len()..want.min(alive.len() + MACHINE_BURST) {
                let _ = create_machine(world, &self.api, set);
            }
        } else if alive.len() > want {
            // Marked machines first, then failed, then those without a node, then newest.
            alive.sort_by_key(|m| {
                (
                    !m.marked,
                    !m.failed,
                    m.node.is_some(),
                    has_ready_node(world, m),
                    std::cmp::Reverse((m.created.clone(), m.key.name.clone())),
                )
            });
            for m in alive.iter().take(alive.len() - want) {
                let _ = world.delete(self.api.machines, &m.key);
            }
        }
        // The status counts the machines this pass started from, as before a pass's writes
        // are seen; the next pass settles it.
        let owned: Vec<&MachineView> = machines
            .iter()
            .filter(|m| m.owner_uid == uid && !m.deleting)
            .collect();
        let counts = Counts {
            replicas: owned.len(),
            ready: owned.iter().filter(|m| has_ready_node(world, m)).count(),
        };
        let generation = &set["metadata"]["generation"];
        let selector = selector_string(&set["spec"]["selector"]);
        let api = &self.api;
        let _ = world.modify(api.machine_sets, &key_of(set), |v| {
            set_machine_set_status(api, &mut v["status"], counts, generation, &selector);
        });
    }

    /// The Machine controller's part beside real set controllers: its finalizer on every
    /// Machine it has not seen (a Machine deleted before then has no instance to remove),
    /// and phase Running once nodelink has linked the Node.
    fn adopt_machines<W: MachineWorld>(&mut self, world: &mut W) {
        let finalizer = self.api.finalizer;
        for m in self.machines(world) {
            if m.deleting {
                continue;
            }
            if !m.finalized {
                let _ =
                    world.modify(
                        self.api.machines,
                        &m.key,
                        |v| match v["metadata"]["finalizers"].as_array_mut() {
                            Some(f) => f.push(json!(finalizer)),
                            None => v["metadata"]["finalizers"] = json!([finalizer]),
                        },
                    );
            }
            if m.phase == "Provisioned" && m.node.is_some() {
                let _ = world.modify(self.api.machines, &m.key, |v| {
                    v["status"]["phase"] = json!("Running")
                });
            }
        }
    }

    fn sync_machines<W: MachineWorld>(&mut self, world: &mut W, timing: &Timing, now: Instant) {
        let machines = self.machines(world);
        let names: HashSet<&str> = machines.iter().map(|m| &*m.key.name).collect();
        self.timers.retain(|name, _| names.contains(name.as_str()));
        for m in &machines {
            let timed =
                m.deleting || (!m.failed && matches!(m.phase.as_str(), "" | "Provisioning"));
            if !timed || m.owner_kind != "MachineSet" {
                self.timers.remove(&*m.key.name);
                continue;
            }
            let since = *self.timers.entry(m.key.name.to_string()).or_insert(now);
            let elapsed = now.saturating_duration_since(since);
            if m.deleting {
                self.deprovision(world, m, elapsed >= timing.machine_deprovision);
            } else if elapsed >= timing.machine_provision {
                let mode = self.owner_failure_mode(world, m);
                let link = match self.role {
                    Role::Whole => Link::Here,
                    Role::Cloud => Link::Elsewhere,
                };
                let launch = Launch {
                    mode: mode.as_deref(),
                    capacity: &self.capacity,
                    link,
                };
                let _ = provision(world, &self.api, &m.key, &launch);
                self.timers.remove(&*m.key.name);
            }
        }
    }

    /// A deleted Machine goes into phase Deleting; once `due`, its Node goes and its
    /// finalizer is removed, which lets the deletion complete.
    fn deprovision<W: MachineWorld>(&mut self, world: &mut W, m: &MachineView, due: bool) {
        if m.phase != "Deleting" {
            let _ = world.modify(self.api.machines, &m.key, |v| {
                v["status"]["phase"] = json!("Deleting")
            });
        }
        if due {
            if let Some(node) = &m.node {
                world.delete_node(node);
            }
            let finalizer = self.api.finalizer;
            let _ = world.modify(self.api.machines, &m.key, |v| {
                if let Some(f) = v["metadata"]["finalizers"].as_array_mut() {
                    f.retain(|x| x != finalizer);
                }
            });
            self.timers.remove(&*m.key.name);
        }
    }

    /// The failure mode annotated on the MachineSet that owns `m`.
    fn owner_failure_mode<W: MachineWorld>(&self, world: &W, m: &MachineView) -> Option<String> {
        let set = world.get(
            self.api.machine_sets,
            &Key::new(&m.key.namespace, &m.owner_name),
        )?;
        if set["metadata"]["uid"] != m.owner_uid.as_str() {
            return None;
        }
        set["metadata"]["annotations"][FAILURE_MODE_ANNOTATION]
            .as_str()
            .map(str::to_string)
    }

    fn sync_deployments<W: MachineWorld>(&mut self, world: &mut W) {
        let deployments: Vec<Value> =
            world.list(Resource::CapiMachineDeployments, |_, v| v.clone());
        let sets: Vec<(Key, Value)> =
            world.list(Resource::CapiMachineSets, |k, v| (k.clone(), v.clone()));
        let md_uids: HashSet<&str> = deployments
            .iter()
            .filter_map(|d| d["metadata"]["uid"].as_str())
            .collect();
        for (key, set) in &sets {
            if let Some(owner) = controller_uid(set)
                && !md_uids.contains(owner)
            {
                let _ = world.delete(Resource::CapiMachineSets, key);
            }
        }
        for md in &deployments {
            self.sync_deployment(world, md, &sets);
        }
    }

    /// Keeps one MachineDeployment's MachineSet (creating it, or passing on replicas and the
    /// deployment's annotations) and writes the deployment's status.
    fn sync_deployment<W: MachineWorld>(&self, world: &mut W, md: &Value, sets: &[(Key, Value)]) {
        let uid = md["metadata"]["uid"].as_str();
        let owned: Vec<&(Key, Value)> = sets
            .iter()
            .filter(|(_, s)| uid.is_some() && controller_uid(s) == uid)
            .collect();
        let replicas = md["spec"]["replicas"].as_i64().unwrap_or(1);
        let annotations = objects::set_annotations(md);
        match owned.first() {
            None => {
                let set = machine_set_for(md, &self.api, world.rng());
                let namespace = md["metadata"]["namespace"].as_str().unwrap_or_default();
                let _ = world.create(Resource::CapiMachineSets, namespace, set);
            }
            Some((key, _)) => {
                let _ = world.modify(Resource::CapiMachineSets, key, |s| {
                    s["spec"]["replicas"] = json!(replicas);
                    // In place, as Cluster API does: the deployment's now, the set's own
                    // revision kept.
                    let mut kept = annotations;
                    let revision = "machinedeployment.clusters.x-k8s.io/revision";
                    if let Some(r) = s["metadata"]["annotations"].get(revision) {
                        kept.insert(revision.into(), r.clone());
                    }
                    s["metadata"]["annotations"] = Value::Object(kept);
                });
            }
        }
        let count = |field: &str| {
            owned
                .iter()
                .map(|(_, s)| s["status"][field].as_i64().unwrap_or(0))
                .sum::<i64>()
        };
        let status = machine_deployment_status(
            replicas,
            count("replicas"),
            count("readyReplicas"),
            &md["metadata"]["generation"],
            &selector_string(&md["spec"]["selector"]),
        );
        let _ = world.modify(Resource::CapiMachineDeployments, &key_of(md), |v| {
            v["status"] = status;
        });
    }
}
