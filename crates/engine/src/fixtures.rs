//! Test fixtures: builders for pods, nodes and machine sets that produce the Kubernetes JSON
//! a real cluster would return, so tests exercise the same projection as production.
//! `pod("web-1").cpu("500m").on("node-a")`.
//!
//! Test code only: compiled for this crate's tests and, through the `fixtures` feature, for
//! the tests of the crates above (a fixture that cannot build its object is a broken test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::dump::SnapshotBuilder;

pub struct PodBuilder(Value);

pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": true}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {}}}]},
        "status": {"phase": "Pending"}
    }))
}

impl PodBuilder {
    fn spec(&mut self) -> &mut serde_json::Map<String, Value> {
        self.0["spec"].as_object_mut().unwrap()
    }

    pub fn ns(mut self, ns: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(ns);
        self
    }
    pub fn cpu(mut self, q: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(q);
        self
    }
    pub fn mem(mut self, q: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!(q);
        self
    }
    pub fn request(mut self, name: &str, q: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"]["requests"][name] = json!(q);
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }
    pub fn owner(mut self, kind: &str, name: &str) -> Self {
        self.0["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": format!("{name}-uid"), "controller": true}]);
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().insert("priority".into(), json!(p));
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        let sel = self.spec().entry("nodeSelector").or_insert(json!({}));
        sel[k] = json!(v);
        self
    }
    pub fn tolerate(mut self, key: &str) -> Self {
        let tols = self.spec().entry("tolerations").or_insert(json!([]));
        tols.as_array_mut()
            .unwrap()
            .push(json!({"key": key, "operator": "Exists"}));
        self
    }
    pub fn host_port(mut self, port: i32) -> Self {
        self.0["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": port, "hostPort": port}]);
        self
    }
    fn affinity_term(mut self, kind: &str, app: &str, key: &str) -> Self {
        let term = json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key});
        let aff = self.spec().entry("affinity").or_insert(json!({}));
        let terms = aff
            .as_object_mut()
            .unwrap()
            .entry(kind)
            .or_insert(json!({"requiredDuringSchedulingIgnoredDuringExecution": []}));
        terms["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array_mut()
            .unwrap()
            .push(term);
        self
    }
    pub fn anti_affinity(self, app: &str, key: &str) -> Self {
        self.affinity_term("podAntiAffinity", app, key)
    }
    pub fn affinity(self, app: &str, key: &str) -> Self {
        self.affinity_term("podAffinity", app, key)
    }
    pub fn spread(mut self, max_skew: i32, key: &str, app: &str) -> Self {
        let c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}}});
        let list = self
            .spec()
            .entry("topologySpreadConstraints")
            .or_insert(json!([]));
        list.as_array_mut().unwrap().push(c);
        self
    }
    /// A volume backed by the PersistentVolumeClaim `claim`.
    pub fn claim(mut self, claim: &str) -> Self {
        let list = self.spec().entry("volumes").or_insert(json!([]));
        let name = format!("v{}", list.as_array().map_or(0, Vec::len));
        list.as_array_mut()
            .unwrap()
            .push(json!({"name": name, "persistentVolumeClaim": {"claimName": claim}}));
        self
    }
    /// Scheduled on a node and running.
    pub fn on(mut self, node: &str) -> Self {
        self.spec().insert("nodeName".into(), json!(node));
        self.0["status"] = json!({"phase": "Running"});
        self
    }
    /// Pending with PodScheduled=False/Unschedulable.
    pub fn unschedulable(mut self) -> Self {
        self.0["status"] = json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
        self
    }
    pub fn json(self) -> Value {
        self.0
    }
}

pub struct NodeBuilder(Value);

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
}

impl NodeBuilder {
    pub fn cpu(mut self, q: &str) -> Self {
        self.0["status"]["capacity"]["cpu"] = json!(q);
        self.0["status"]["allocatable"]["cpu"] = json!(q);
        self
    }
    pub fn mem(mut self, q: &str) -> Self {
        self.0["status"]["capacity"]["memory"] = json!(q);
        self.0["status"]["allocatable"]["memory"] = json!(q);
        self
    }
    pub fn resource(mut self, name: &str, q: &str) -> Self {
        self.0["status"]["capacity"][name] = json!(q);
        self.0["status"]["allocatable"][name] = json!(q);
        self
    }
    pub fn pods(mut self, n: i64) -> Self {
        self.0["status"]["capacity"]["pods"] = json!(n.to_string());
        self.0["status"]["allocatable"]["pods"] = json!(n.to_string());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }
    pub fn zone(self, z: &str) -> Self {
        self.label("topology.kubernetes.io/zone", z)
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.0["spec"].as_object_mut().unwrap();
        let taints = spec.entry("taints").or_insert(json!([]));
        taints
            .as_array_mut()
            .unwrap()
            .push(json!({"key": key, "value": value, "effect": effect}));
        self
    }
    pub fn cordoned(mut self) -> Self {
        self.0["spec"]["unschedulable"] = json!(true);
        self
    }
    /// Ready=False, with the taint the node lifecycle controller adds.
    pub fn not_ready(mut self) -> Self {
        self.0["status"]["conditions"][0]["status"] = json!("False");
        self.taint("node.kubernetes.io/not-ready", "", "NoSchedule")
    }
    pub fn created(mut self, t: &str) -> Self {
        self.0["metadata"]["creationTimestamp"] = json!(t);
        self
    }
    pub fn provider_id(mut self, id: &str) -> Self {
        self.0["spec"]["providerID"] = json!(id);
        self
    }
    pub fn json(self) -> Value {
        self.0
    }
}

/// A MachineSet of the OpenShift Machine API with autoscaler bounds.
pub struct MachineSetBuilder(Value);

pub fn machineset(name: &str, min: u64, max: u64, replicas: u64) -> MachineSetBuilder {
    MachineSetBuilder(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": "openshift-machine-api", "annotations": {
            "machine.openshift.io/cluster-api-autoscaler-node-group-min-size": min.to_string(),
            "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": max.to_string()}},
        "spec": {"replicas": replicas, "template": {"spec": {"metadata": {"labels": {}}}}}
    }))
}

impl MachineSetBuilder {
    /// Scale-from-zero capacity annotations.
    pub fn capacity(mut self, cpu: &str, mem: &str) -> Self {
        let a = &mut self.0["metadata"]["annotations"];
        a["capacity.cluster-autoscaler.kubernetes.io/cpu"] = json!(cpu);
        a["capacity.cluster-autoscaler.kubernetes.io/memory"] = json!(mem);
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["annotations"][k] = json!(v);
        self
    }
    pub fn node_label(mut self, k: &str, v: &str) -> Self {
        self.0["spec"]["template"]["spec"]["metadata"]["labels"][k] = json!(v);
        self
    }
    /// The same MachineSet in Cluster API v1beta2 (its annotations in that group).
    pub fn cluster_api(mut self) -> Self {
        self.0["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
        if let Some(a) = self.0["metadata"]["annotations"].as_object_mut() {
            *a = a
                .iter()
                .map(|(k, v)| {
                    (
                        k.replace("machine.openshift.io/", "cluster.x-k8s.io/"),
                        v.clone(),
                    )
                })
                .collect();
        }
        self
    }
    pub fn json(self) -> Value {
        self.0
    }
}

/// A Machine as Cluster API v1beta2 has it (owned by a Cluster API MachineSet).
pub fn cluster_api_machine(mut machine: Value) -> Value {
    machine["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
    machine["metadata"]["ownerReferences"][0]["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
    machine
}

/// A Machine of a MachineSet, linked to a node by providerID.
pub fn machine(name: &str, machineset: &str, node: Option<&str>) -> Value {
    let mut m = json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": "openshift-machine-api",
            "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                "name": machineset, "uid": format!("{machineset}-uid"), "controller": true}]},
        "spec": {}, "status": {"phase": "Provisioning"}
    });
    if let Some(n) = node {
        m["spec"]["providerID"] = json!(format!("test:///{n}"));
        m["status"] = json!({"phase": "Running", "nodeRef": {"kind": "Node", "name": n}});
    }
    m
}

/// A Machine of a MachineSet created at `created`, with no node yet.
pub fn pending_machine(name: &str, machineset: &str, created: &str) -> Value {
    let mut m = machine(name, machineset, None);
    m["metadata"]["creationTimestamp"] = json!(created);
    m
}

/// A Machine that reports a failure, as OpenShift's Machine API does.
pub fn failed_machine(name: &str, machineset: &str, created: &str, message: &str) -> Value {
    let mut m = pending_machine(name, machineset, created);
    m["status"] =
        json!({"phase": "Failed", "errorReason": "InsufficientCapacity", "errorMessage": message});
    m
}

/// A node of a machine set: the Node, and its Machine linked by providerID.
pub fn group_node(name: &str, machineset: &str, node: NodeBuilder) -> Vec<Value> {
    vec![
        node.provider_id(&format!("test:///{name}")).json(),
        machine(&format!("{name}-machine"), machineset, Some(name)),
    ]
}

pub fn snapshot(items: impl IntoIterator<Item = Value>) -> ClusterSnapshot {
    let list =
        json!({"apiVersion": "v1", "kind": "List", "items": items.into_iter().collect::<Vec<_>>()});
    snapshot_of_text(&list.to_string())
}

/// A snapshot of a dump written as YAML (or JSON) text.
pub fn snapshot_of_text(text: &str) -> ClusterSnapshot {
    let mut b = SnapshotBuilder::default();
    b.add_text(text, "fixture").unwrap();
    b.finish().0
}

/// A PersistentVolumeClaim in `default`, bound to `volume` when given.
pub fn pvc(name: &str, class: &str, volume: Option<&str>) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"storageClassName": class, "volumeName": volume.unwrap_or(""),
            "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": if volume.is_some() { "Bound" } else { "Pending" }}})
}

/// A PersistentVolume pinned to `zone` by the EBS CSI driver's topology key.
pub fn zonal_pv(name: &str, zone: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": name},
            "storageClassName": "gp3",
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}]}]}}},
        "status": {"phase": "Bound"}})
}

/// A StorageClass; `wait`: `WaitForFirstConsumer`, else `Immediate`.
pub fn storage_class(name: &str, wait: bool, zones: &[&str]) -> Value {
    let mut sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": if wait { "WaitForFirstConsumer" } else { "Immediate" }});
    if !zones.is_empty() {
        sc["allowedTopologies"] = json!([{"matchLabelExpressions": [
            {"key": "topology.ebs.csi.aws.com/zone", "values": zones}]}]);
    }
    sc
}
