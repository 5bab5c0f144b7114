//! The compact Node projection: capacity, labels, taints, readiness, and the links to the
//! Machine behind it.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as corev1;

use super::labels::Labels;
use super::machine_api::MachineApiGroup;
use super::meta::{FieldError, ObjectKey, Projector, annotation, resource_list, taints, timestamp};
use super::resources::Resources;
use super::scheduling::Taint;

pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// The taint the autoscaler puts on a node it is removing.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
pub const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";
/// Default pod capacity when a node or template does not say.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// Readiness as the autoscaler sees it: the Ready condition, and the conditions and taints
/// that make a node with Ready=True still unready.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Ready=True, no DiskPressure / NetworkUnavailable, no not-ready taints.
    pub ready: bool,
    /// When the Ready condition last changed, if the node has one.
    pub since: Option<Timestamp>,
    /// Why the node is not ready, for explanations.
    pub reason: Option<Arc<str>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub labels: Labels,
    pub taints: Arc<[Taint]>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub max_pods: i64,
    pub unschedulable: bool,
    pub readiness: Readiness,
    pub provider_id: Option<Arc<str>>,
    /// The Machine named by the node's `<group>/machine` annotation, with that group (a
    /// Machine of the other API group may have the same namespace and name).
    pub machine: Option<(MachineApiGroup, ObjectKey)>,
    pub scale_down_disabled: bool,
    pub created: Option<Timestamp>,
    pub deleting: bool,
    /// When the autoscaler's ToBeDeleted taint was put on (its value, a unix time), if any.
    /// `Some(None)`: the taint is there with a value that is not a time.
    pub to_be_deleted_at: Option<Option<Timestamp>>,
}

impl Node {
    pub fn is_ready(&self) -> bool {
        self.readiness.ready
    }

    pub fn has_taint(&self, key: &str) -> bool {
        self.taints.iter().any(|t| &*t.key == key)
    }

    /// Projects a Kubernetes Node. Errors name the field that could not be read.
    pub fn from_k8s(node: &corev1::Node, p: &mut Projector) -> Result<Node, FieldError> {
        let meta = &node.metadata;
        let spec = node.spec.as_ref();
        let status = node.status.as_ref();
        let (capacity, cap_pods) =
            resource_list(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?;
        let (mut allocatable, alloc_pods) = resource_list(
            status.and_then(|s| s.allocatable.as_ref()),
            "status.allocatable",
        )?;
        // A node that reports no allocatable (hand-written dumps, very old kubelets) offers its capacity.
        if status.and_then(|s| s.allocatable.as_ref()).is_none() {
            allocatable = capacity.clone();
        }
        let spec_taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let taints = taints(spec_taints, "spec.taints", p)?;
        let readiness = readiness(status, &taints);
        let to_be_deleted_at = taints
            .iter()
            .find(|t| &*t.key == TO_BE_DELETED_TAINT)
            .map(|t| {
                t.value
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .and_then(|secs| Timestamp::from_second(secs).ok())
            });
        Ok(Node {
            name: p.opt_str(meta.name.as_ref()),
            uid: p.opt_str(meta.uid.as_ref()),
            labels: p.labels(meta.labels.as_ref()),
            taints: taints.into(),
            capacity,
            allocatable,
            max_pods: alloc_pods.or(cap_pods).unwrap_or(DEFAULT_MAX_PODS),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            readiness,
            provider_id: spec
                .and_then(|s| s.provider_id.as_deref())
                .filter(|s| !s.is_empty())
                .map(|s| p.str(s)),
            machine: machine_annotation(meta, p),
            scale_down_disabled: annotation(meta, SCALE_DOWN_DISABLED) == Some("true"),
            created: timestamp(meta.creation_timestamp.as_ref()),
            deleting: meta.deletion_timestamp.is_some(),
            to_be_deleted_at,
        })
    }
}

impl Node {
    /// A node whose object cannot be read (`why` says which field). It is kept rather than
    /// dropped, so that its Machine is not taken for one that never got a node (and
    /// deleted), but it is never used: not ready, no room for pods, never removed.
    pub fn unreadable(node: &corev1::Node, why: &str, p: &mut Projector) -> Node {
        let meta = &node.metadata;
        let spec = node.spec.as_ref();
        Node {
            name: p.opt_str(meta.name.as_ref()),
            uid: p.opt_str(meta.uid.as_ref()),
            labels: p.labels(meta.labels.as_ref()),
            taints: Arc::from([]),
            capacity: Resources::default(),
            allocatable: Resources::default(),
            max_pods: 0,
            unschedulable: true,
            readiness: Readiness {
                ready: false,
                since: None,
                reason: Some(format!("the node cannot be read: {why}").into()),
            },
            provider_id: spec
                .and_then(|s| s.provider_id.as_deref())
                .filter(|s| !s.is_empty())
                .map(|s| p.str(s)),
            machine: machine_annotation(meta, p),
            scale_down_disabled: true,
            created: timestamp(meta.creation_timestamp.as_ref()),
            deleting: meta.deletion_timestamp.is_some(),
            to_be_deleted_at: None,
        }
    }
}

const NOT_READY_TAINTS: [&str; 3] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/network-unavailable",
];

fn readiness(status: Option<&corev1::NodeStatus>, taints: &[Taint]) -> Readiness {
    let conditions = status.and_then(|s| s.conditions.as_ref());
    let find = |t: &str| conditions.into_iter().flatten().find(|c| c.type_ == t);
    let Some(ready) = find("Ready") else {
        return Readiness {
            ready: false,
            since: None,
            reason: Some("node has no Ready condition".into()),
        };
    };
    let since = ready.last_transition_time.as_ref().map(|t| t.0);
    let reason: Option<String> = if ready.status != "True" {
        Some(format!("Ready={}", ready.status))
    } else if find("DiskPressure").is_some_and(|c| c.status == "True") {
        Some("DiskPressure=True".into())
    } else if find("NetworkUnavailable").is_some_and(|c| c.status == "True") {
        Some("NetworkUnavailable=True".into())
    } else {
        taints
            .iter()
            .find(|t| NOT_READY_TAINTS.contains(&&*t.key))
            .map(|t| format!("taint {}", t.key))
    };
    Readiness {
        ready: reason.is_none(),
        since,
        reason: reason.map(Arc::from),
    }
}

/// `machine.openshift.io/machine: <ns>/<name>`, or Cluster API's `cluster.x-k8s.io/machine: <name>`
/// with `cluster.x-k8s.io/cluster-namespace: <ns>`.
fn machine_annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    p: &mut Projector,
) -> Option<(MachineApiGroup, ObjectKey)> {
    if let Some(v) = annotation(meta, "machine.openshift.io/machine") {
        let (ns, name) = v.split_once('/')?;
        let key = ObjectKey {
            namespace: p.str(ns),
            name: p.str(name),
        };
        return Some((MachineApiGroup::OpenShift, key));
    }
    let name = annotation(meta, "cluster.x-k8s.io/machine")?;
    let ns = annotation(meta, "cluster.x-k8s.io/cluster-namespace").unwrap_or("");
    let key = ObjectKey {
        namespace: p.str(ns),
        name: p.str(name),
    };
    Some((MachineApiGroup::ClusterApi, key))
}

/// The part of a providerID that identifies the instance: everything after the last `/`
/// (`aws:///us-east-1a/i-0abc` → `i-0abc`), as the clusterapi provider normalises it.
pub fn normalize_provider_id(id: &str) -> &str {
    if id.contains("virtualMachineScaleSets") {
        return id;
    }
    id.rsplit('/').next().unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Node {
        let n: corev1::Node = serde_json::from_value(json).unwrap();
        Node::from_k8s(&n, &mut Projector::default()).unwrap()
    }

    #[test]
    fn readiness_needs_ready_true_without_pressure_or_taints() {
        let ready = node(serde_json::json!({
            "metadata": {"name": "n1", "annotations": {"machine.openshift.io/machine": "openshift-machine-api/m1"}},
            "spec": {"providerID": "aws:///us-east-1a/i-1"},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "250"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        assert!(ready.is_ready());
        assert_eq!(ready.max_pods, 250);
        assert_eq!(
            ready.machine,
            Some((
                MachineApiGroup::OpenShift,
                ObjectKey::new("openshift-machine-api", "m1")
            ))
        );
        let pressured = node(serde_json::json!({
            "metadata": {"name": "n2"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}]}
        }));
        assert!(!pressured.is_ready());
        let tainted = node(serde_json::json!({
            "metadata": {"name": "n3"},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }));
        assert!(!tainted.is_ready());
        let unknown = node(serde_json::json!({"metadata": {"name": "n4"}}));
        assert_eq!(
            unknown.readiness.reason.as_deref(),
            Some("node has no Ready condition")
        );
        assert_eq!(unknown.max_pods, DEFAULT_MAX_PODS);
    }

    #[test]
    fn bad_taint_effect_is_a_field_error() {
        let n: corev1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Never"}]}
        }))
        .unwrap();
        let err = Node::from_k8s(&n, &mut Projector::default()).unwrap_err();
        assert_eq!(err.path, "spec.taints[0].effect");
    }

    #[test]
    fn provider_ids_normalise_to_the_instance() {
        assert_eq!(normalize_provider_id("aws:///us-east-1a/i-0abc"), "i-0abc");
        assert_eq!(normalize_provider_id("gce://proj/zone/inst"), "inst");
        assert_eq!(normalize_provider_id("plain"), "plain");
    }
}
