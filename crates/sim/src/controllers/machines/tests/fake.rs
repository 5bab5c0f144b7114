//! A world of plain maps that records every write, and the objects the tests start from.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::super::*;
use crate::api::status::ApiError;
use crate::rng::Rng;

/// One write the controller made.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Call {
    Create(Resource, Key),
    /// The top-level parts of the object that changed (`metadata`, `spec`, `status`).
    Modify(Resource, Key, BTreeSet<String>),
    Delete(Resource, Key),
    DeleteNode(String),
}

/// A world of plain maps that records every write.
#[derive(Debug)]
pub(super) struct Fake {
    pub(super) objects: BTreeMap<(Resource, Key), Value>,
    pub(super) calls: Vec<Call>,
    pub(super) ready: BTreeSet<String>,
    pub(super) revision: Option<u64>,
    pub(super) rng: Rng,
    /// Creations of this kind are refused, as an API server refuses an invalid object.
    pub(super) refuse: Option<Resource>,
    uids: u64,
}

impl Fake {
    pub(super) fn new() -> Self {
        Fake {
            objects: BTreeMap::new(),
            calls: Vec::new(),
            ready: BTreeSet::new(),
            revision: None,
            rng: Rng::new(7),
            refuse: None,
            uids: 0,
        }
    }

    pub(super) fn put(&mut self, resource: Resource, mut object: Value) -> Value {
        self.uids += 1;
        if object["metadata"]["uid"].is_null() {
            object["metadata"]["uid"] = json!(format!("uid-{}", self.uids));
        }
        if object["metadata"]["creationTimestamp"].is_null() {
            object["metadata"]["creationTimestamp"] =
                json!(format!("2026-01-01T00:00:{:02}Z", self.uids));
        }
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let key = Key::new(ns, object["metadata"]["name"].as_str().unwrap());
        self.objects.insert((resource, key), object.clone());
        object
    }

    pub(super) fn all(&self, resource: Resource) -> Vec<Value> {
        self.list(resource, |_, v| v.clone())
    }

    pub(super) fn writes(&mut self) -> Vec<Call> {
        std::mem::take(&mut self.calls)
    }
}

impl MachineWorld for Fake {
    type Error = ApiError;

    fn revision(&self, _: &[Resource]) -> Option<u64> {
        self.revision
    }

    fn list<T>(&self, resource: Resource, mut f: impl FnMut(&Key, &Value) -> T) -> Vec<T> {
        self.objects
            .iter()
            .filter(|((r, _), _)| *r == resource)
            .map(|((_, k), v)| f(k, v))
            .collect()
    }

    fn get(&self, resource: Resource, key: &Key) -> Option<Value> {
        self.objects.get(&(resource, key.clone())).cloned()
    }

    fn create(
        &mut self,
        resource: Resource,
        ns: &str,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        if self.refuse == Some(resource) {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::invalid(resource.def().kind, name, "refused"));
        }
        if resource.def().namespaced {
            object["metadata"]["namespace"] = json!(ns);
        }
        let stored = self.put(resource, object);
        let key = Key::new(ns, stored["metadata"]["name"].as_str().unwrap());
        self.calls.push(Call::Create(resource, key));
        Ok(stored)
    }

    fn modify(
        &mut self,
        resource: Resource,
        key: &Key,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), ApiError> {
        let Some(old) = self.get(resource, key) else {
            return Err(ApiError::not_found("", "x", &key.name));
        };
        let mut new = old.clone();
        change(&mut new);
        let parts: BTreeSet<String> = ["metadata", "spec", "status"]
            .into_iter()
            .filter(|p| old[*p] != new[*p])
            .map(str::to_string)
            .collect();
        if parts.is_empty() {
            return Ok(());
        }
        self.calls.push(Call::Modify(resource, key.clone(), parts));
        let gone = new["metadata"].get("deletionTimestamp").is_some()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        if gone {
            self.objects.remove(&(resource, key.clone()));
        } else {
            self.objects.insert((resource, key.clone()), new);
        }
        Ok(())
    }

    fn delete(&mut self, resource: Resource, key: &Key) -> Result<(), ApiError> {
        self.calls.push(Call::Delete(resource, key.clone()));
        let entry = (resource, key.clone());
        let Some(object) = self.objects.get_mut(&entry) else {
            return Err(ApiError::not_found("", "x", &key.name));
        };
        if object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
        {
            object["metadata"]["deletionTimestamp"] = json!("2026-01-01T01:00:00Z");
        } else {
            self.objects.remove(&entry);
        }
        Ok(())
    }

    fn delete_node(&mut self, name: &str) {
        self.calls.push(Call::DeleteNode(name.to_string()));
        self.objects.remove(&(Resource::Nodes, Key::cluster(name)));
    }

    fn fresh_name(&mut self, resource: Resource, ns: &str, prefix: &str) -> String {
        loop {
            let name = format!("{prefix}{}", self.rng.name_suffix());
            if !self.contains(resource, &Key::new(ns, &name)) {
                return name;
            }
        }
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn node_ready(&self, name: &str) -> bool {
        self.ready.contains(name)
    }
}

pub(super) const OCP_NS: &str = "openshift-machine-api";
pub(super) const CAPI_NS: &str = "openshift-cluster-api";

pub(super) fn ocp_set(world: &mut Fake, replicas: u64) -> Value {
    let api = MachineApi::of(Flavor::OpenShift);
    world.put(api.machine_sets, json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "infra-worker-a", "namespace": OCP_NS, "generation": 2,
            "labels": {api.cluster_label: "infra"}},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {api.set_label: "infra-worker-a"}},
            "template": {"metadata": {"labels": {api.set_label: "infra-worker-a", "role": "worker"}},
                "spec": {"providerSpec": {"value": {"instanceType": "m6i.2xlarge",
                    "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"}}}}}}}))
}

pub(super) fn capi_deployment(world: &mut Fake, replicas: u64) -> Value {
    world.put(Resource::CapiMachineDeployments, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "md-a", "namespace": CAPI_NS, "generation": 1},
        "spec": {"clusterName": "infra", "replicas": replicas,
            "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "infra"}},
            "template": {"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "infra"}},
                "spec": {"clusterName": "infra", "version": "v1.34.0", "failureDomain": "us-east-1a",
                    "bootstrap": {"dataSecretName": "md-a-bootstrap"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "AWSMachineTemplate", "name": "md-a"}}}}}))
}

/// A Machine of `set` with a Ready node, created `age` seconds into the test.
pub(super) fn running_machine(world: &mut Fake, api: &MachineApi, set: &Value, name: &str) -> Key {
    let ns = set["metadata"]["namespace"].as_str().unwrap();
    let node = format!("node-{name}");
    world.put(
        api.machines,
        json!({
        "metadata": {"name": name, "namespace": ns, "finalizers": [api.finalizer],
            "ownerReferences": [{"kind": "MachineSet", "name": set["metadata"]["name"],
                "uid": set["metadata"]["uid"], "controller": true}]},
        "spec": {}, "status": {"phase": "Running", "nodeRef": {"name": node}}}),
    );
    world.put(Resource::Nodes, json!({"metadata": {"name": node}}));
    world.ready.insert(node);
    Key::new(ns, name)
}

pub(super) fn creates(calls: &[Call], resource: Resource) -> Vec<Key> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Create(r, k) if *r == resource => Some(k.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn timing() -> Timing {
    Timing {
        machine_provision: Duration::from_secs(2),
        machine_deprovision: Duration::from_secs(1),
        ..Timing::fast()
    }
}

/// A Machine of `set` as OpenShift's MachineSet controller creates it: owned, no status, no
/// finalizer.
pub(super) fn set_controllers_machine(world: &mut Fake, set: &Value, name: &str) -> Value {
    let api = MachineApi::of(Flavor::OpenShift);
    world.put(
        api.machines,
        json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": OCP_NS,
            "ownerReferences": [{"kind": "MachineSet", "name": set["metadata"]["name"],
                "uid": set["metadata"]["uid"], "controller": true}]},
        "spec": set["spec"]["template"]["spec"]}),
    )
}
