//! The simulated machine controller, for either Machine API (the group is data):
//! MachineDeployment → one MachineSet; MachineSet replicas → Machines, removing Machines
//! that carry the delete-machine annotation first when scaling down; a Machine becomes a
//! Node after the provisioning delay, or fails as its MachineSet's failure mode says
//! (`fail`: phase Failed with an error message; `no-node`: never gets a node; `not-ready`:
//! its node never turns Ready); a deleted Machine takes its Node with it after the
//! deprovisioning delay. Orphans are garbage-collected as the owner-reference GC would.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::index::Index;
use crate::sim::api::resources::Resource;
use crate::sim::api::status::ApiError;
use crate::sim::machine_api::{
    FAILURE_MODE_ANNOTATION, MachineApi, NEVER_READY_ANNOTATION, Profile, node,
};
use crate::sim::registry::{DeleteOptions, State, now_rfc3339};
use crate::sim::settings::{Flavor, Timing};
use crate::sim::store::Key;

/// Machines created per MachineSet and pass, at most.
const MACHINE_BURST: usize = 100;

/// A Machine as the controller sees it.
#[derive(Debug)]
struct MachineView {
    key: Key,
    owner_uid: String,
    owner_kind: String,
    deleting: bool,
    phase: String,
    node: Option<String>,
    marked: bool,
    created: String,
}

fn view(api: &MachineApi, key: &Key, v: &Value) -> MachineView {
    let owner = v["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["controller"] == true));
    MachineView {
        key: key.clone(),
        owner_uid: owner
            .and_then(|o| o["uid"].as_str())
            .unwrap_or_default()
            .to_string(),
        owner_kind: owner
            .and_then(|o| o["kind"].as_str())
            .unwrap_or_default()
            .to_string(),
        deleting: v["metadata"].get("deletionTimestamp").is_some(),
        phase: v["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        node: v["status"]["nodeRef"]["name"].as_str().map(str::to_string),
        marked: v["metadata"]["annotations"]
            .get(api.delete_annotation())
            .is_some(),
        created: v["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

/// The machine controller of one cluster.
#[derive(Debug)]
pub struct MachineController {
    api: MachineApi,
    /// The cluster's infrastructure name (the value of the cluster label).
    infra: String,
    /// Machines in a timed stage (provisioning, deleting) and when it began.
    timers: HashMap<String, Instant>,
    last_rv: u64,
}

impl MachineController {
    pub fn new(api: MachineApi, infra: String) -> Self {
        MachineController {
            api,
            infra,
            timers: HashMap::new(),
            last_rv: 0,
        }
    }

    fn relevant_rv(&self, state: &State) -> u64 {
        let mut rv = state
            .store
            .table(self.api.machine_sets)
            .last_write_rv
            .max(state.store.table(self.api.machines).last_write_rv);
        if self.api.flavor == Flavor::ClusterApi {
            rv = rv.max(
                state
                    .store
                    .table(Resource::CapiMachineDeployments)
                    .last_write_rv,
            );
        }
        rv.max(state.store.table(Resource::Nodes).last_write_rv)
    }

    /// One pass; cheap when nothing changed and no machine is in a timed stage.
    pub fn step(&mut self, state: &mut State, index: &Index, timing: &Timing, now: Instant) {
        let seen = self.relevant_rv(state);
        if seen == self.last_rv && self.timers.is_empty() {
            return;
        }
        if self.api.flavor == Flavor::ClusterApi {
            self.sync_deployments(state);
        }
        self.sync_sets(state, index);
        self.sync_machines(state, timing, now);
        // Our own writes count as changes: the next pass sees them (a status that depends on
        // another status settles) and, writing nothing new, goes quiet.
        self.last_rv = seen;
    }

    fn machines(&self, state: &State) -> Vec<MachineView> {
        state
            .store
            .range(self.api.machines, None, None)
            .map(|o| view(&self.api, &o.key, &o.value()))
            .collect()
    }

    fn sync_sets(&mut self, state: &mut State, index: &Index) {
        let sets: Vec<Value> = state
            .store
            .range(self.api.machine_sets, None, None)
            .map(|o| o.value())
            .collect();
        let machines = self.machines(state);
        let live_sets: HashSet<&str> = sets
            .iter()
            .filter_map(|s| s["metadata"]["uid"].as_str())
            .collect();
        for m in &machines {
            if m.owner_kind == "MachineSet"
                && !live_sets.contains(m.owner_uid.as_str())
                && !m.deleting
            {
                let _ = state.delete(self.api.machines, &m.key, &DeleteOptions::default());
            }
        }
        for set in &sets {
            let uid = set["metadata"]["uid"].as_str().unwrap_or_default();
            let key = Key::new(
                set["metadata"]["namespace"].as_str().unwrap_or_default(),
                set["metadata"]["name"].as_str().unwrap_or_default(),
            );
            let want = set["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
            let mut alive: Vec<&MachineView> = machines
                .iter()
                .filter(|m| m.owner_uid == uid && !m.deleting)
                .collect();
            if alive.len() < want {
                // At most a burst per pass, as real controllers: a huge replica count grows
                // the set over many passes instead of stalling the cluster.
                for _ in alive.len()..want.min(alive.len() + MACHINE_BURST) {
                    let _ = create_machine(state, &self.api, &self.infra, set);
                }
            } else if alive.len() > want {
                // Marked machines first, then failed, then those without a node, then newest.
                let ready = |m: &MachineView| {
                    m.node
                        .as_ref()
                        .and_then(|n| index.nodes.get(n))
                        .is_some_and(|n| n.ready)
                };
                alive.sort_by_key(|m| {
                    (
                        !m.marked,
                        m.phase != "Failed",
                        m.node.is_some(),
                        ready(m),
                        std::cmp::Reverse((m.created.clone(), m.key.name.clone())),
                    )
                });
                for m in alive.iter().take(alive.len() - want) {
                    let _ = state.delete(self.api.machines, &m.key, &DeleteOptions::default());
                }
            }
            let owned: Vec<&MachineView> = machines
                .iter()
                .filter(|m| m.owner_uid == uid && !m.deleting)
                .collect();
            let ready = owned
                .iter()
                .filter(|m| {
                    m.node
                        .as_ref()
                        .and_then(|n| index.nodes.get(n))
                        .is_some_and(|n| n.ready)
                })
                .count();
            let generation = set["metadata"]["generation"].clone();
            let selector = selector_string(&set["spec"]["selector"]);
            // OpenShift's CRD names the scale selector field `labelSelector`, Cluster API's `selector`.
            let selector_field = if self.api.flavor == Flavor::OpenShift {
                "labelSelector"
            } else {
                "selector"
            };
            let _ = state.modify(self.api.machine_sets, &key, |v| {
                let status = &mut v["status"];
                status["replicas"] = json!(owned.len());
                status["fullyLabeledReplicas"] = json!(owned.len());
                status["readyReplicas"] = json!(ready);
                status["availableReplicas"] = json!(ready);
                status["observedGeneration"] = generation;
                status[selector_field] = json!(selector);
            });
        }
    }

    fn sync_machines(&mut self, state: &mut State, timing: &Timing, now: Instant) {
        let machines = self.machines(state);
        let names: HashSet<&str> = machines.iter().map(|m| &*m.key.name).collect();
        self.timers.retain(|name, _| names.contains(name.as_str()));
        for m in &machines {
            let timed = m.deleting || matches!(m.phase.as_str(), "" | "Provisioning");
            if !timed || m.owner_kind != "MachineSet" {
                self.timers.remove(&*m.key.name);
                continue;
            }
            let since = *self.timers.entry(m.key.name.to_string()).or_insert(now);
            let elapsed = now.saturating_duration_since(since);
            if m.deleting {
                if m.phase != "Deleting" {
                    let _ = state.modify(self.api.machines, &m.key, |v| {
                        v["status"]["phase"] = json!("Deleting")
                    });
                }
                if elapsed >= timing.machine_deprovision {
                    if let Some(node) = &m.node {
                        state.purge(Resource::Nodes, &Key::cluster(node));
                    }
                    let finalizer = self.api.finalizer;
                    let _ = state.modify(self.api.machines, &m.key, |v| {
                        if let Some(f) = v["metadata"]["finalizers"].as_array_mut() {
                            f.retain(|x| x != finalizer);
                        }
                    });
                    self.timers.remove(&*m.key.name);
                }
            } else if elapsed >= timing.machine_provision {
                let mode = owner_failure_mode(state, &self.api, &m.key, &m.owner_uid);
                let _ = provision(state, &self.api, &self.infra, &m.key, mode.as_deref());
                self.timers.remove(&*m.key.name);
            }
        }
    }

    fn sync_deployments(&mut self, state: &mut State) {
        let deployments: Vec<Value> = state
            .store
            .range(Resource::CapiMachineDeployments, None, None)
            .map(|o| o.value())
            .collect();
        let sets: Vec<(Key, Value)> = state
            .store
            .range(Resource::CapiMachineSets, None, None)
            .map(|o| (o.key.clone(), o.value()))
            .collect();
        let owner_of = |s: &Value| {
            s["metadata"]["ownerReferences"]
                .as_array()
                .and_then(|o| o.iter().find(|o| o["controller"] == true))
                .map(|o| o["uid"].clone())
        };
        let md_uids: HashSet<&str> = deployments
            .iter()
            .filter_map(|d| d["metadata"]["uid"].as_str())
            .collect();
        for (key, set) in &sets {
            if let Some(owner) = owner_of(set)
                && !md_uids.contains(owner.as_str().unwrap_or_default())
            {
                let _ = state.delete(Resource::CapiMachineSets, key, &DeleteOptions::default());
            }
        }
        for md in &deployments {
            let uid = md["metadata"]["uid"].clone();
            let owned: Vec<&(Key, Value)> = sets
                .iter()
                .filter(|(_, s)| owner_of(s) == Some(uid.clone()))
                .collect();
            let replicas = md["spec"]["replicas"].as_i64().unwrap_or(1);
            let mode = md["metadata"]["annotations"][FAILURE_MODE_ANNOTATION].clone();
            match owned.first() {
                None => {
                    let set = machine_set_for(md, &mut state.rng);
                    let _ = state.create(
                        Resource::CapiMachineSets,
                        md["metadata"]["namespace"].as_str().unwrap_or_default(),
                        set,
                    );
                }
                Some((key, _)) => {
                    let _ = state.modify(Resource::CapiMachineSets, key, |s| {
                        s["spec"]["replicas"] = json!(replicas);
                        match &mode {
                            Value::String(m) => {
                                s["metadata"]["annotations"][FAILURE_MODE_ANNOTATION] = json!(m)
                            }
                            _ => {
                                if let Some(a) = s["metadata"]["annotations"].as_object_mut() {
                                    a.remove(FAILURE_MODE_ANNOTATION);
                                }
                            }
                        }
                    });
                }
            }
            let count = |field: &str| {
                owned
                    .iter()
                    .map(|(_, s)| s["status"][field].as_i64().unwrap_or(0))
                    .sum::<i64>()
            };
            let (current, ready) = (count("replicas"), count("readyReplicas"));
            let phase = if current < replicas {
                "ScalingUp"
            } else if current > replicas {
                "ScalingDown"
            } else {
                "Running"
            };
            let key = Key::new(
                md["metadata"]["namespace"].as_str().unwrap_or_default(),
                md["metadata"]["name"].as_str().unwrap_or_default(),
            );
            let generation = md["metadata"]["generation"].clone();
            let selector = selector_string(&md["spec"]["selector"]);
            let _ = state.modify(Resource::CapiMachineDeployments, &key, |v| {
                v["status"] = json!({"replicas": current, "readyReplicas": ready, "availableReplicas": ready,
                    "updatedReplicas": current, "unavailableReplicas": (replicas - ready).max(0),
                    "observedGeneration": generation, "phase": phase, "selector": selector});
            });
        }
    }
}

/// `k=v,k2=v2` of a LabelSelector's matchLabels.
pub fn selector_string(selector: &Value) -> String {
    selector["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The Cluster API MachineSet a MachineDeployment owns.
pub fn machine_set_for(md: &Value, rng: &mut crate::sim::rng::Rng) -> Value {
    let md_name = md["metadata"]["name"].as_str().unwrap_or_default();
    let name = format!("{md_name}-{}", rng.name_suffix());
    let mut annotations = serde_json::Map::new();
    if let Some(a) = md["metadata"]["annotations"].as_object() {
        for (k, v) in a {
            if k.starts_with(crate::sim::machine_api::CAPACITY_PREFIX)
                || k.starts_with("sim.fleetscaler.io/")
            {
                annotations.insert(k.clone(), v.clone());
            }
        }
    }
    annotations.insert(
        "machinedeployment.clusters.x-k8s.io/revision".into(),
        json!("1"),
    );
    let mut labels = md["metadata"]["labels"].clone();
    labels["cluster.x-k8s.io/deployment-name"] = json!(md_name);
    let mut template = md["spec"]["template"].clone();
    template["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] = json!(md_name);
    let mut selector = md["spec"]["selector"].clone();
    selector["matchLabels"]["cluster.x-k8s.io/deployment-name"] = json!(md_name);
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": md_name,
                                 "uid": md["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"clusterName": md["spec"]["clusterName"], "replicas": md["spec"]["replicas"], "selector": selector, "template": template},
    })
}

fn owner_failure_mode(
    state: &State,
    api: &MachineApi,
    machine: &Key,
    owner_uid: &str,
) -> Option<String> {
    state
        .store
        .range(api.machine_sets, Some(&machine.namespace), None)
        .map(|o| o.value())
        .find(|s| s["metadata"]["uid"] == owner_uid)
        .and_then(|s| {
            s["metadata"]["annotations"][FAILURE_MODE_ANNOTATION]
                .as_str()
                .map(str::to_string)
        })
}

/// Creates a new Machine of `set`, in phase Provisioning.
pub fn create_machine(
    state: &mut State,
    api: &MachineApi,
    infra: &str,
    set: &Value,
) -> Result<Key, ApiError> {
    let set_name = set["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = set["metadata"]["namespace"].as_str().unwrap_or_default();
    let template = &set["spec"]["template"];
    let mut labels = template["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[api.set_label] = json!(set_name);
    labels[api.cluster_label] = json!(infra);
    let name = state.fresh_name(api.machines, namespace, &format!("{set_name}-"));
    let machine = json!({
        "apiVersion": format!("{}/v1beta1", api.group), "kind": "Machine",
        "metadata": {"name": name, "labels": labels, "finalizers": [api.finalizer],
            "ownerReferences": [{"apiVersion": format!("{}/v1beta1", api.group), "kind": "MachineSet", "name": set_name,
                                 "uid": set["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": template["spec"].clone(),
        "status": {"phase": "Provisioning"},
    });
    Ok(state.create(api.machines, namespace, machine)?.key.clone())
}

/// Ends a Machine's provisioning as `mode` says: a Node (Ready later, or never), no node,
/// or a failure.
pub fn provision(
    state: &mut State,
    api: &MachineApi,
    infra: &str,
    key: &Key,
    mode: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let Some(machine) = state.store.get(api.machines, key).map(|o| o.value()) else {
        return Ok(None);
    };
    let owner = machine["metadata"]["ownerReferences"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let set = state
        .store
        .get(api.machine_sets, &Key::new(&key.namespace, &owner))
        .map(|o| o.value())
        .unwrap_or(Value::Null);
    let profile = Profile::of(&set, api).map_err(|e| ApiError::invalid("MachineSet", &owner, e))?;
    provision_as(state, api, infra, key, mode, &profile)
}

/// `provision` with the instance profile given (control-plane machines have no MachineSet).
/// Returns the name of the Node made, if one was.
pub fn provision_as(
    state: &mut State,
    api: &MachineApi,
    infra: &str,
    key: &Key,
    mode: Option<&str>,
    profile: &Profile,
) -> Result<Option<String>, ApiError> {
    let now = now_rfc3339();
    if mode == Some("fail") {
        let (reason_field, message_field) = api.failure_fields();
        return state
            .modify(api.machines, key, |m| {
                m["status"]["phase"] = json!("Failed");
                m["status"][reason_field] = json!("InsufficientCapacity");
                m["status"][message_field] = json!(format!(
                    "error launching instance: InsufficientInstanceCapacity: We currently do not have sufficient {} capacity in the Availability Zone you requested ({}).",
                    profile.instance_type, profile.zone
                ));
            })
            .map(|_| None);
    }
    let (a, b) = (state.rng.below(250) + 1, state.rng.below(250) + 2);
    let ip = format!("10.0.{a}.{b}");
    let mut node_name = format!("ip-10-0-{a}-{b}.{}.compute.internal", profile.region);
    while state
        .store
        .get(Resource::Nodes, &Key::cluster(&node_name))
        .is_some()
    {
        node_name = format!(
            "ip-10-0-{a}-{b}-{}.{}.compute.internal",
            state.rng.name_suffix(),
            profile.region
        );
    }
    let provider_id = format!("aws:///{}/i-0{:016x}", profile.zone, state.rng.next_u64());
    let addresses = json!([{"type": "InternalIP", "address": ip}, {"type": "InternalDNS", "address": node_name}]);
    if mode == Some("no-node") {
        return state
            .modify(api.machines, key, |m| {
                m["spec"]["providerID"] = json!(provider_id);
                m["status"]["phase"] = json!("Provisioned");
                m["status"]["addresses"] = addresses;
            })
            .map(|_| None);
    }
    let mut annotations = api.node_annotations(&key.namespace, &key.name, infra);
    if mode == Some("not-ready") {
        annotations[NEVER_READY_ANNOTATION] = json!("true");
    }
    let node_object = node(&node_name, &provider_id, profile, annotations, &ip, &now);
    let created = state.create(Resource::Nodes, "", node_object)?;
    let node_uid = created.value()["metadata"]["uid"].clone();
    state
        .modify(api.machines, key, |m| {
            m["spec"]["providerID"] = json!(provider_id);
            m["status"]["phase"] = json!("Running");
            m["status"]["addresses"] = addresses;
            m["status"]["nodeRef"] =
                json!({"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid});
            if api.flavor == Flavor::ClusterApi {
                m["status"]["bootstrapReady"] = json!(true);
                m["status"]["infrastructureReady"] = json!(true);
            }
        })
        .map(|_| Some(node_name))
}
