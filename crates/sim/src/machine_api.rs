//! The Machine API as data: OpenShift's `machine.openshift.io` and Cluster API's
//! `cluster.x-k8s.io` differ in group, version, namespace, label and annotation keys and a
//! few field names, not in behaviour, so one `MachineApi` value carries the differences and
//! one implementation builds Machines and Nodes for both. Cluster API is `v1beta2`, the
//! version Cluster API 1.11 and later store and the test bed's CRDs serve alone. Also the profile of a group's
//! instances (capacity, zone, labels, taints) read from its MachineSet, the single source the
//! machine controller and the autoscaler's scale-from-zero annotations agree on.

use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::settings::Flavor;
use fleetscaler_model::Quantity;
use fleetscaler_model::quantity::QuantityError;

/// Capacity annotations read by the autoscaler for scale-from-zero (not group-prefixed).
pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";

/// Annotation selecting a MachineSet's failure mode: `fail`, `no-node` or `not-ready`.
pub const FAILURE_MODE_ANNOTATION: &str = "sim.fleetscaler.io/failure-mode";

/// Node annotation of nodes that must never turn Ready.
pub const NEVER_READY_ANNOTATION: &str = "sim.fleetscaler.io/never-ready";

/// The differences between the two Machine APIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineApi {
    pub flavor: Flavor,
    pub group: &'static str,
    /// The version objects are written in: `v1beta1` (OpenShift) or `v1beta2` (Cluster API).
    pub version: &'static str,
    pub namespace: &'static str,
    pub machine_sets: Resource,
    pub machines: Resource,
    /// Label on Machines naming their MachineSet.
    pub set_label: &'static str,
    /// Label on Machine API objects naming the cluster.
    pub cluster_label: &'static str,
    pub finalizer: &'static str,
}

impl MachineApi {
    /// The Machine API of `flavor`.
    pub const fn of(flavor: Flavor) -> Self {
        match flavor {
            Flavor::OpenShift => MachineApi {
                flavor,
                group: "machine.openshift.io",
                version: "v1beta1",
                namespace: "openshift-machine-api",
                machine_sets: Resource::OcpMachineSets,
                machines: Resource::OcpMachines,
                set_label: "machine.openshift.io/cluster-api-machineset",
                cluster_label: "machine.openshift.io/cluster-api-cluster",
                finalizer: "machine.machine.openshift.io",
            },
            Flavor::ClusterApi => MachineApi {
                flavor,
                group: "cluster.x-k8s.io",
                version: "v1beta2",
                namespace: "openshift-cluster-api",
                machine_sets: Resource::CapiMachineSets,
                machines: Resource::CapiMachines,
                set_label: "cluster.x-k8s.io/set-name",
                cluster_label: "cluster.x-k8s.io/cluster-name",
                finalizer: "machine.cluster.x-k8s.io",
            },
        }
    }

    /// `<group>/<version>`, the `apiVersion` of its objects and owner references.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The cluster (infrastructure) name a MachineSet or MachineDeployment belongs to: its
    /// cluster label on OpenShift, `spec.clusterName` on Cluster API (where it is required);
    /// the template's when the object itself lacks it. Empty when neither says.
    pub fn cluster_of(&self, set: &Value) -> String {
        let found = match self.flavor {
            Flavor::OpenShift => set["metadata"]["labels"][self.cluster_label]
                .as_str()
                .or(set["spec"]["template"]["metadata"]["labels"][self.cluster_label].as_str()),
            Flavor::ClusterApi => set["spec"]["clusterName"]
                .as_str()
                .or(set["spec"]["template"]["spec"]["clusterName"].as_str()),
        };
        found.unwrap_or_default().to_string()
    }

    /// `<group>/<suffix>`, the form of every group-prefixed key.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}/{suffix}", self.group)
    }

    /// The annotation marking a Machine to be removed first on scale-down.
    pub fn delete_annotation(&self) -> String {
        self.key("delete-machine")
    }

    /// Node annotations linking a Node to its Machine.
    pub fn node_annotations(&self, machine_ns: &str, machine: &str, cluster: &str) -> Value {
        match self.flavor {
            Flavor::OpenShift => json!({self.key("machine"): format!("{machine_ns}/{machine}")}),
            Flavor::ClusterApi => json!({
                self.key("machine"): machine,
                self.key("cluster-namespace"): machine_ns,
                self.key("cluster-name"): cluster,
            }),
        }
    }

    /// Writes a failed Machine's reason and message where its API reports them:
    /// `status.error{Reason,Message}` on OpenShift; on Cluster API v1beta2 the v1beta1
    /// `failure{Reason,Message}` live on under `status.deprecated.v1beta1`.
    pub fn set_failure(&self, status: &mut Value, reason: &str, message: &str) {
        match self.flavor {
            Flavor::OpenShift => {
                status["errorReason"] = json!(reason);
                status["errorMessage"] = json!(message);
            }
            Flavor::ClusterApi => {
                let legacy = &mut status["deprecated"]["v1beta1"];
                legacy["failureReason"] = json!(reason);
                legacy["failureMessage"] = json!(message);
            }
        }
    }

    /// A Machine's `status.nodeRef`: an object reference on OpenShift, `{name}` alone on
    /// Cluster API v1beta2.
    pub fn node_ref(&self, name: &str, uid: &Value) -> Value {
        match self.flavor {
            Flavor::OpenShift => {
                json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid})
            }
            Flavor::ClusterApi => json!({"name": name}),
        }
    }
}

/// What the machines of one MachineSet are.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub instance_type: String,
    pub region: String,
    pub zone: String,
    pub cpu_milli: i64,
    pub memory_bytes: i64,
    pub gpus: i64,
    pub gpu_type: String,
    pub max_pods: i64,
    /// The DRA driver its GPUs are published by (`crate::dra`), if the group declares one.
    pub dra_driver: Option<String>,
    /// Labels every node of the group gets (roles, accelerator).
    pub labels: serde_json::Map<String, Value>,
    pub taints: Vec<Value>,
}

/// A capacity the profile cannot be read from.
#[derive(Debug, thiserror::Error)]
#[error("annotation {CAPACITY_PREFIX}{key}: {source}")]
pub struct ProfileError {
    pub key: String,
    #[source]
    pub source: QuantityError,
}

impl Profile {
    /// Reads the profile of a MachineSet (or MachineDeployment): capacity from the
    /// scale-from-zero annotations, else from the infrastructure template's `status.capacity`
    /// (Cluster API: the instance type it names decides), placement from the provider spec or
    /// failure domain.
    pub fn of(
        set: &Value,
        api: &MachineApi,
        template: Option<&Value>,
    ) -> Result<Profile, ProfileError> {
        let annotations = &set["metadata"]["annotations"];
        let infra_template = template.unwrap_or(&Value::Null);
        let status = &infra_template["status"]["capacity"];
        let gpu_in_template = status
            .as_object()
            .and_then(|c| c.keys().find(|k| k.ends_with("/gpu")).cloned());
        let from_template = |key: &str| {
            let name = match key {
                "cpu" | "memory" => key.to_string(),
                "maxPods" => "pods".to_string(),
                "gpu-count" => gpu_in_template.clone()?,
                "gpu-type" => return gpu_in_template.clone(),
                _ => return None,
            };
            match &status[&name] {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }
        };
        let capacity = |key: &str| {
            annotations[format!("{CAPACITY_PREFIX}{key}")]
                .as_str()
                .map(str::to_string)
                .or_else(|| from_template(key))
        };
        let quantity = |key: &str, default: &str| -> Result<Quantity, ProfileError> {
            let text = capacity(key).unwrap_or_else(|| default.to_string());
            Quantity::parse_non_negative(&text).map_err(|source| ProfileError {
                key: key.to_string(),
                source,
            })
        };
        let template = &set["spec"]["template"];
        let (instance_type, zone, region, labels) = match api.flavor {
            Flavor::OpenShift => {
                let provider = &template["spec"]["providerSpec"]["value"];
                (
                    provider["instanceType"]
                        .as_str()
                        .unwrap_or("m6i.2xlarge")
                        .to_string(),
                    provider["placement"]["availabilityZone"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    provider["placement"]["region"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    template["spec"]["metadata"]["labels"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                )
            }
            Flavor::ClusterApi => {
                let zone = template["spec"]["failureDomain"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let region = zone
                    .trim_end_matches(|c: char| c.is_ascii_lowercase())
                    .to_string();
                let labels = template["metadata"]["labels"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| {
                                k.starts_with("node-role.kubernetes.io/")
                                    || k.contains("accelerator")
                            })
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                (
                    annotations["sim.fleetscaler.io/instance-type"]
                        .as_str()
                        .or(infra_template["spec"]["template"]["spec"]["instanceType"].as_str())
                        .unwrap_or("m6i.2xlarge")
                        .to_string(),
                    zone,
                    region,
                    labels,
                )
            }
        };
        Ok(Profile {
            instance_type,
            region,
            zone,
            cpu_milli: quantity("cpu", "8")?.milli_ceil(),
            memory_bytes: quantity("memory", "32Gi")?.units_ceil(),
            gpus: quantity("gpu-count", "0")?.units_ceil(),
            gpu_type: capacity("gpu-type").unwrap_or_default(),
            max_pods: quantity("maxPods", "250")?.units_ceil(),
            dra_driver: annotations[crate::dra::DRIVER_ANNOTATION]
                .as_str()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string),
            labels,
            taints: template["spec"]["taints"]
                .as_array()
                .map(|ts| ts.iter().map(node_taint).collect())
                .unwrap_or_default(),
        })
    }
}

/// A Machine template's taint as its Node carries it: key, value and effect (Cluster API
/// v1beta2 adds `propagation`, which a Node's taint has not).
fn node_taint(taint: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for field in ["key", "value", "effect"] {
        if let Some(v) = taint.get(field) {
            out.insert(field.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// A Node as a kubelet registers it, not yet Ready, for the machine `machine` of `profile`.
pub fn node(
    name: &str,
    provider_id: &str,
    profile: &Profile,
    mut annotations: Value,
    ip: &str,
    now: &str,
) -> Value {
    // Its kubelet runs the group's DRA driver, which publishes the GPUs once it is Ready.
    if let Some(driver) = profile.dra_driver.as_ref().filter(|_| profile.gpus > 0) {
        annotations[crate::dra::NODE_DRIVER] = json!(driver);
        annotations[crate::dra::NODE_DEVICES] = json!(profile.gpus.to_string());
    }
    let mut labels = json!({
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": profile.instance_type,
        "beta.kubernetes.io/instance-type": profile.instance_type,
        "topology.kubernetes.io/region": profile.region, "topology.kubernetes.io/zone": profile.zone,
        "node.openshift.io/os_id": "rhcos",
    });
    for (k, v) in &profile.labels {
        labels[k] = v.clone();
    }
    let mem_ki = profile.memory_bytes / 1024;
    let reserved_ki = (1i64 << 30) / 1024;
    let mut capacity = json!({
        "cpu": format!("{}m", profile.cpu_milli), "memory": format!("{mem_ki}Ki"),
        "pods": profile.max_pods.to_string(), "ephemeral-storage": "125293548Ki", "hugepages-1Gi": "0",
    });
    let mut allocatable = json!({
        "cpu": format!("{}m", (profile.cpu_milli - 500).max(100)),
        "memory": format!("{}Ki", (mem_ki - reserved_ki).max(mem_ki / 2)),
        "pods": profile.max_pods.to_string(), "ephemeral-storage": "115470533646", "hugepages-1Gi": "0",
    });
    if profile.gpus > 0 && !profile.gpu_type.is_empty() {
        capacity[&profile.gpu_type] = json!(profile.gpus.to_string());
        allocatable[&profile.gpu_type] = json!(profile.gpus.to_string());
    }
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": provider_id, "taints": profile.taints},
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "False", "KubeletNotReady", "container runtime network not ready"),
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "cri-o://1.34.0",
                "kernelVersion": "5.14.0-570.el9_6.x86_64", "kubeProxyVersion": "", "kubeletVersion": "v1.34.0",
                "machineID": "", "operatingSystem": "linux",
                "osImage": "Red Hat Enterprise Linux CoreOS 9.6", "systemUUID": ""
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        }
    })
}

/// Marks the node's Ready condition `status` (`"True"` once its kubelet has booted).
pub fn set_node_ready(node: &mut Value, ready: bool, now: &str) {
    if let Some(conditions) = node["status"]["conditions"].as_array_mut()
        && let Some(c) = conditions.iter_mut().find(|c| c["type"] == "Ready")
    {
        let (status, reason, message) = if ready {
            ("True", "KubeletReady", "kubelet is posting ready status")
        } else {
            (
                "False",
                "KubeletNotReady",
                "container runtime network not ready",
            )
        };
        if c["status"] != status {
            c["lastTransitionTime"] = json!(now);
        }
        c["status"] = json!(status);
        c["reason"] = json!(reason);
        c["message"] = json!(message);
        c["lastHeartbeatTime"] = json!(now);
    }
}

/// Whether a Node reports Ready.
pub fn node_is_ready(node: &Value) -> bool {
    node["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine_set() -> Value {
        json!({"metadata": {"annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": "16",
                "capacity.cluster-autoscaler.kubernetes.io/memory": "64Gi",
                "capacity.cluster-autoscaler.kubernetes.io/gpu-count": "1",
                "capacity.cluster-autoscaler.kubernetes.io/gpu-type": "nvidia.com/gpu"}},
               "spec": {"template": {"spec": {
                   "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                   "providerSpec": {"value": {"instanceType": "g5.4xlarge",
                       "placement": {"availabilityZone": "us-east-1b", "region": "us-east-1"}}}}}}})
    }

    #[test]
    fn profile_reads_capacity_annotations_and_placement() {
        let p = Profile::of(&machine_set(), &MachineApi::of(Flavor::OpenShift), None).unwrap();
        assert_eq!((p.cpu_milli, p.memory_bytes, p.gpus), (16_000, 64 << 30, 1));
        assert_eq!(
            (p.zone.as_str(), p.instance_type.as_str()),
            ("us-east-1b", "g5.4xlarge")
        );
        let n = node(
            "n1",
            "aws:///us-east-1b/i-1",
            &p,
            json!({}),
            "10.0.0.1",
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(n["status"]["capacity"]["nvidia.com/gpu"], "1");
        assert_eq!(
            n["metadata"]["labels"]["node-role.kubernetes.io/worker"],
            ""
        );
        assert!(!node_is_ready(&n));
    }

    #[test]
    fn a_bad_capacity_annotation_is_an_error() {
        let mut ms = machine_set();
        ms["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/cpu"] =
            json!("lots");
        assert!(Profile::of(&ms, &MachineApi::of(Flavor::OpenShift), None).is_err());
    }

    #[test]
    fn the_two_apis_differ_only_in_data() {
        let ocp = MachineApi::of(Flavor::OpenShift);
        let capi = MachineApi::of(Flavor::ClusterApi);
        assert_eq!(
            ocp.delete_annotation(),
            "machine.openshift.io/delete-machine"
        );
        assert_eq!(capi.delete_annotation(), "cluster.x-k8s.io/delete-machine");
        assert_eq!(
            ocp.node_annotations("ns", "m", "c")["machine.openshift.io/machine"],
            "ns/m"
        );
        assert_eq!(
            capi.node_annotations("ns", "m", "c")["cluster.x-k8s.io/machine"],
            "m"
        );
    }
}
