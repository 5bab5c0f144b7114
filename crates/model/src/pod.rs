//! The compact Pod projection: what scheduling, scale-up and drain decisions read, nothing
//! more. The scheduling-relevant part of the spec (`PodSpec`) is interned, so the replicas of
//! one workload share it, and sharing it is how the engine recognises equivalent pods.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as corev1;
use serde::Serialize;

use super::labels::Labels;
use super::meta::{
    FieldError, OwnerRef, Projector, annotation, controller_of, resource_list, timestamp,
};
use super::resources::Resources;
use super::scheduling::{AffinityTerm, HostPort, NodeSelector, SpreadConstraint, Toleration};

pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
pub const SAFE_TO_EVICT_LOCAL_VOLUMES: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";
pub const POD_SCALE_UP_DELAY: &str = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay";
/// Marks a pod that is a DaemonSet's in all but its owner (a custom DaemonSet kind), as
/// upstream's `pod_util.IsDaemonSetPod` reads it: `"true"` only.
pub const DAEMONSET_POD: &str = "cluster-autoscaler.kubernetes.io/daemonset-pod";
/// Whether a DaemonSet pod is evicted when its node is removed (`"true"` / anything else),
/// over the cluster's setting (upstream's `daemonset.EnableDsEvictionKey`).
pub const ENABLE_DS_EVICTION: &str = "cluster-autoscaler.kubernetes.io/enable-ds-eviction";
/// Upstream's `PodLongTerminatingExtraThreshold`.
const LONG_TERMINATING_EXTRA_SECONDS: i64 = 30;

/// `namespace/name` of a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl fmt::Display for PodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl Serialize for PodId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// A volume of the pod backed by a PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClaimRef {
    /// `persistentVolumeClaim.claimName`.
    Claim(Arc<str>),
    /// A generic ephemeral volume: its claim is `<pod name>-<volume name>`, made by the
    /// ephemeral volume controller from the template (its class and access modes kept here,
    /// for when the claim does not exist yet).
    Ephemeral {
        volume: Arc<str>,
        storage_class: Option<Arc<str>>,
        read_write_once_pod: bool,
    },
}

impl ClaimRef {
    /// The claim's name for the pod named `pod`.
    pub fn claim_name(&self, pod: &str) -> String {
        match self {
            ClaimRef::Claim(name) => name.to_string(),
            ClaimRef::Ephemeral { volume, .. } => format!("{pod}-{volume}"),
        }
    }
}

/// Scheduler features the engine does not simulate; a pod that uses one gets it named in its
/// explanation instead of it being silently ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Unsimulated {
    /// PersistentVolumeClaims, when the cluster's storage objects were not read.
    VolumeBinding,
    /// `resourceClaims` (dynamic resource allocation), when the cluster's
    /// `resource.k8s.io/v1` objects were not read.
    DynamicResources,
    /// Affinity terms with a `namespaceSelector` when the dump has no Namespace objects.
    NamespaceSelector,
    /// `ScheduleAnyway` spread constraints and preferred affinities only score nodes.
    SoftConstraints,
}

impl Unsimulated {
    pub fn describe(self) -> &'static str {
        match self {
            Unsimulated::VolumeBinding => {
                "uses PersistentVolumeClaims, and the cluster's claims, volumes and StorageClasses were not read: volume binding and zones are not simulated"
            }
            Unsimulated::DynamicResources => {
                "uses resourceClaims, and the cluster's resource.k8s.io/v1 objects (ResourceClaims, ResourceSlices, DeviceClasses) were not read: dynamic resource allocation is not simulated, so no node is bought for it (a node without its devices could never run it)"
            }
            Unsimulated::NamespaceSelector => {
                "has an affinity term with a namespaceSelector; without Namespace objects only the pod's own namespace is matched"
            }
            Unsimulated::SoftConstraints => {
                "has preferred (soft) affinity or ScheduleAnyway spread constraints: they only rank nodes and are not simulated"
            }
        }
    }
}

/// The scheduling-relevant part of a pod spec, shared by every replica of a workload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodSpec {
    /// Effective requests: containers, sidecar and regular init containers, and overhead.
    pub requests: Resources,
    pub node_selector: Labels,
    pub node_affinity: Option<NodeSelector>,
    pub tolerations: Vec<Toleration>,
    pub host_ports: Vec<HostPort>,
    pub affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub spread: Vec<SpreadConstraint>,
    /// Names of `hostPath` and disk-backed `emptyDir` volumes.
    pub local_volumes: Vec<Arc<str>>,
    /// The PersistentVolumeClaims its volumes use, in the order of its volumes.
    pub claims: Vec<ClaimRef>,
    /// `resourceClaims`: the ResourceClaims (dynamic resource allocation) it needs.
    pub resource_claims: Vec<crate::dra::PodClaim>,
    pub unsimulated: Vec<Unsimulated>,
    pub restart_policy_always: bool,
    pub termination_grace_seconds: Option<i64>,
}

impl PodSpec {
    pub fn has_pod_affinity(&self) -> bool {
        !self.affinity.is_empty() || !self.anti_affinity.is_empty()
    }

    /// Whether a new node with these labels would run this DaemonSet pod: node selection
    /// without the controller's per-node `metadata.name` pinning.
    pub fn selects_new_node(&self, labels: &Labels) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .node_affinity
                .as_ref()
                .is_none_or(|a| a.matches_labels_only(labels))
    }

    /// Whether a node's labels (and name) satisfy the pod's `nodeSelector` and required node
    /// affinity: the node selection that does not depend on other pods.
    pub fn selects_node(&self, labels: &Labels, node_name: &str) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .node_affinity
                .as_ref()
                .is_none_or(|a| a.matches(labels, node_name))
    }
}

/// What the `safe-to-evict` annotation says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SafeToEvict {
    True,
    False,
    OnCompletion,
    /// A value the autoscaler does not know; treated as absent and reported.
    Other(Arc<str>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pod {
    pub id: PodId,
    pub uid: Arc<str>,
    pub labels: Labels,
    pub spec: Arc<PodSpec>,
    pub owner: Option<OwnerRef>,
    /// `None` when the pod carries no priority (it then never counts as expendable).
    pub priority: Option<i32>,
    pub node_name: Option<Arc<str>>,
    pub phase: PodPhase,
    /// PodScheduled=False with reason Unschedulable: the scheduler found no node.
    pub unschedulable: bool,
    pub created: Option<Timestamp>,
    pub deleting: Option<Timestamp>,
    pub mirror: bool,
    /// What few pods carry, `None` when the pod carries none of it: see [`Pod::extras`].
    pub extras: Option<Box<PodExtras>>,
}

/// The annotations and statuses few pods carry, boxed apart from [`Pod`]: inline they were
/// 130 of a pod's 360 bytes, and the cache holds every pod of a cluster (30,000 pods: 4 MiB
/// of a hub's memory for fields nearly all of them leave empty).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodExtras {
    pub nominated_node: Option<Arc<str>>,
    pub safe_to_evict: Option<SafeToEvict>,
    pub safe_to_evict_local_volumes: Vec<Arc<str>>,
    /// The `daemonset-pod` annotation's value, as written.
    pub daemonset_pod_annotation: Option<Arc<str>>,
    /// The `pod-scale-up-delay` annotation: the pod waits this long before triggering a
    /// scale-up. `Err` holds an unreadable value, reported in the pod's explanation.
    pub scale_up_delay: Option<Result<std::time::Duration, Arc<str>>>,
    /// The ProvisioningRequest (in the pod's namespace) it consumes: the
    /// `autoscaling.x-k8s.io/consume-provisioning-request` annotation, or its older
    /// `cluster-autoscaler.kubernetes.io/` spelling.
    pub consumes: Option<Arc<str>>,
    /// `status.resourceClaimStatuses`: each claim made from a template for this pod, as
    /// (the pod's claim name, the ResourceClaim's name).
    pub claim_statuses: Vec<(Arc<str>, Arc<str>)>,
}

/// What a pod without extras reads.
static NO_EXTRAS: PodExtras = PodExtras {
    nominated_node: None,
    safe_to_evict: None,
    safe_to_evict_local_volumes: Vec::new(),
    daemonset_pod_annotation: None,
    scale_up_delay: None,
    consumes: None,
    claim_statuses: Vec::new(),
};

impl PodExtras {
    /// Boxed when it holds anything; a pod without extras keeps `None`.
    pub fn boxed(self) -> Option<Box<PodExtras>> {
        (self != NO_EXTRAS).then(|| Box::new(self))
    }
}

impl Pod {
    /// The annotations and statuses few pods carry (all empty for most).
    pub fn extras(&self) -> &PodExtras {
        self.extras.as_deref().unwrap_or(&NO_EXTRAS)
    }

    /// Owned by a DaemonSet, or annotated `daemonset-pod: "true"` (upstream's
    /// `IsDaemonSetPod`): never moved, and left out of utilization with
    /// `ignore_daemonsets_utilization`.
    pub fn is_daemonset(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| &*o.kind == "DaemonSet")
            || self.extras().daemonset_pod_annotation.as_deref() == Some("true")
    }

    /// A `daemonset-pod` annotation that is neither `"true"` nor absent: its value, which
    /// leaves in doubt whether the pod may simply go with its node.
    pub fn odd_daemonset_annotation(&self) -> Option<&str> {
        self.extras()
            .daemonset_pod_annotation
            .as_deref()
            .filter(|v| *v != "true")
    }

    /// Below the priority cutoff: never causes a scale-up, never blocks a scale-down, and its
    /// space counts as free (a pending pod may preempt it). A pod without a priority is not.
    pub fn is_expendable(&self, priority_threshold: i32) -> bool {
        self.priority.is_some_and(|p| p < priority_threshold)
    }

    /// Terminating for longer than its grace period (30 s when it has none, as the API
    /// defaults it) and upstream's extra 30 s (`drain.IsPodLongTerminating`): a pod the
    /// kubelet should have stopped, counted as gone.
    pub fn is_long_terminating(&self, now: Timestamp) -> bool {
        let Some(deleted) = self.deleting else {
            return false;
        };
        let grace = self.spec.termination_grace_seconds.unwrap_or(30).max(0);
        let past =
            jiff::SignedDuration::from_secs(grace.saturating_add(LONG_TERMINATING_EXTRA_SECONDS));
        deleted.checked_add(past).is_ok_and(|t| t < now)
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    pub fn requests(&self) -> &Resources {
        &self.spec.requests
    }

    /// Projects a Kubernetes Pod. Errors name the field that could not be read. The hub's
    /// cache decodes only the fields read here and in `pod_spec::project`: a field newly
    /// read must be added to `cluster/cache/lean.rs` too (its tests compare both ways).
    pub fn from_k8s(pod: &corev1::Pod, p: &mut Projector) -> Result<Pod, FieldError> {
        let meta = &pod.metadata;
        let empty = corev1::PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        let status = pod.status.as_ref();
        let unschedulable = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            });
        let phase = match status.and_then(|s| s.phase.as_deref()) {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some("Unknown") => PodPhase::Unknown,
            _ => PodPhase::Pending,
        };
        let namespace = p.opt_str(meta.namespace.as_ref());
        let projected = super::pod_spec::project(spec, &namespace, meta.labels.as_ref(), p)?;
        Ok(Pod {
            id: PodId {
                namespace,
                name: p.opt_str(meta.name.as_ref()),
            },
            uid: p.opt_str(meta.uid.as_ref()),
            labels: p.labels(meta.labels.as_ref()),
            spec: p.specs.intern(projected),
            owner: controller_of(meta, p),
            priority: spec.priority,
            node_name: spec
                .node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(|n| p.str(n)),
            phase,
            unschedulable,
            created: timestamp(meta.creation_timestamp.as_ref()),
            deleting: timestamp(meta.deletion_timestamp.as_ref()),
            mirror: annotation(meta, MIRROR_POD).is_some(),
            extras: PodExtras {
                nominated_node: status
                    .and_then(|s| s.nominated_node_name.as_deref())
                    .filter(|n| !n.is_empty())
                    .map(|n| p.str(n)),
                safe_to_evict: annotation(meta, SAFE_TO_EVICT).map(|v| match v {
                    "true" => SafeToEvict::True,
                    "false" => SafeToEvict::False,
                    "on-completion" => SafeToEvict::OnCompletion,
                    other => SafeToEvict::Other(p.str(other)),
                }),
                safe_to_evict_local_volumes: annotation(meta, SAFE_TO_EVICT_LOCAL_VOLUMES)
                    .map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(|s| p.str(s))
                            .collect()
                    })
                    .unwrap_or_default(),
                daemonset_pod_annotation: annotation(meta, DAEMONSET_POD).map(|v| p.str(v)),
                scale_up_delay: annotation(meta, POD_SCALE_UP_DELAY)
                    .map(|v| crate::duration::parse_go_duration(v.trim()).map_err(|_| p.str(v))),
                consumes: consumed_request(meta, p),
                claim_statuses: super::dra::claim_statuses(status, p),
            }
            .boxed(),
        })
    }
}

impl Pod {
    /// A pod whose object cannot be read. It is kept, asking for nothing, so that its node
    /// is never taken for empty and drained: it counts as `safe-to-evict: "false"`. It never
    /// triggers a scale-up.
    pub fn unreadable(pod: &corev1::Pod, p: &mut Projector) -> Pod {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        Pod {
            id: PodId {
                namespace: p.opt_str(meta.namespace.as_ref()),
                name: p.opt_str(meta.name.as_ref()),
            },
            uid: p.opt_str(meta.uid.as_ref()),
            labels: p.labels(meta.labels.as_ref()),
            spec: p.specs.intern(PodSpec::default()),
            owner: controller_of(meta, p),
            priority: None,
            node_name: spec
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
                .map(|n| p.str(n)),
            phase: PodPhase::Running,
            unschedulable: false,
            created: timestamp(meta.creation_timestamp.as_ref()),
            deleting: timestamp(meta.deletion_timestamp.as_ref()),
            mirror: annotation(meta, MIRROR_POD).is_some(),
            extras: PodExtras {
                safe_to_evict: Some(SafeToEvict::False),
                consumes: consumed_request(meta, p),
                ..PodExtras::default()
            }
            .boxed(),
        }
    }
}

/// The request a pod consumes, as upstream's `provisioningRequestName` reads it: the
/// current annotation first, then the deprecated one.
fn consumed_request(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    p: &mut Projector,
) -> Option<Arc<str>> {
    use crate::provisioning::{CONSUME_ANNOTATION, DEPRECATED_CONSUME_ANNOTATION};
    annotation(meta, CONSUME_ANNOTATION)
        .or_else(|| annotation(meta, DEPRECATED_CONSUME_ANNOTATION))
        .map(|v| p.str(&crate::quote::bounded(v, 253)))
}

/// Effective requests of a pod, as the scheduler computes them (Kubernetes 1.29+ rules):
/// the larger of (regular containers + sidecars) and the peak during init, plus overhead.
/// A container with limits but no requests requests its limits (API defaulting).
pub fn effective_requests(spec: &corev1::PodSpec) -> Result<Resources, FieldError> {
    let mut regular = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        regular.add(&container_requests(c, &format!("spec.containers[{i}]"))?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let req = container_requests(c, &format!("spec.initContainers[{i}]"))?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&req);
            init_peak.max_with(&sidecars);
        } else {
            let mut during = sidecars.clone();
            during.add(&req);
            init_peak.max_with(&during);
        }
    }
    regular.add(&sidecars);
    regular.max_with(&init_peak);
    let (overhead, _) = resource_list(spec.overhead.as_ref(), "spec.overhead")?;
    regular.add(&overhead);
    Ok(regular)
}

fn container_requests(c: &corev1::Container, path: &str) -> Result<Resources, FieldError> {
    let res = c.resources.as_ref();
    let (mut requests, _) = resource_list(
        res.and_then(|r| r.requests.as_ref()),
        &format!("{path}.resources.requests"),
    )?;
    let (limits, _) = resource_list(
        res.and_then(|r| r.limits.as_ref()),
        &format!("{path}.resources.limits"),
    )?;
    let requested = res.and_then(|r| r.requests.as_ref());
    let defaulted = |name: &str| requested.is_none_or(|m| !m.contains_key(name));
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if defaulted(name) && limits.get(name) > 0 {
            requests.set(name, limits.get(name));
        }
    }
    for (name, amount) in &limits.extended {
        if defaulted(name) {
            requests.set(name, *amount);
        }
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use std::collections::BTreeMap;

    fn container(cpu: &str, mem: &str, sidecar: bool) -> corev1::Container {
        let mut requests = BTreeMap::new();
        requests.insert("cpu".to_string(), Q(cpu.into()));
        requests.insert("memory".to_string(), Q(mem.into()));
        corev1::Container {
            name: "c".into(),
            restart_policy: sidecar.then(|| "Always".to_string()),
            resources: Some(corev1::ResourceRequirements {
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A pod carries its rare annotations and statuses boxed, and only when it has one: most
    /// pods pay 8 bytes for them.
    #[test]
    fn extras_are_boxed_only_when_a_pod_carries_one() {
        let mut p = Projector::default();
        let mut pod = corev1::Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: Some(corev1::PodSpec {
                containers: vec![container("1", "1Gi", false)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let plain = Pod::from_k8s(&pod, &mut p).unwrap();
        assert!(plain.extras.is_none());
        assert_eq!(plain.extras(), &PodExtras::default());
        let annotations = [(SAFE_TO_EVICT.to_string(), "false".to_string())];
        pod.metadata.annotations = Some(annotations.into_iter().collect());
        let marked = Pod::from_k8s(&pod, &mut p).unwrap();
        assert_eq!(marked.extras().safe_to_evict, Some(SafeToEvict::False));
        assert!(marked.extras().consumes.is_none());
    }

    #[test]
    fn requests_combine_containers_init_sidecars_and_overhead() {
        let mut spec = corev1::PodSpec {
            containers: vec![
                container("500m", "256Mi", false),
                container("250m", "256Mi", false),
            ],
            init_containers: Some(vec![
                container("100m", "64Mi", true),
                container("2", "128Mi", false),
            ]),
            ..Default::default()
        };
        let r = effective_requests(&spec).unwrap();
        // init peak cpu: sidecar 100m + init 2 = 2100m > regular 750m + sidecar 100m.
        assert_eq!(r.cpu_milli, 2100);
        // memory: regular 512Mi + sidecar 64Mi = 576Mi > init peak 192Mi.
        assert_eq!(r.memory, 576 << 20);
        let mut overhead = BTreeMap::new();
        overhead.insert("cpu".to_string(), Q("100m".into()));
        spec.overhead = Some(overhead);
        assert_eq!(effective_requests(&spec).unwrap().cpu_milli, 2200);
    }

    #[test]
    fn limits_stand_in_for_missing_requests() {
        let mut limits = BTreeMap::new();
        limits.insert("cpu".to_string(), Q("1".into()));
        limits.insert("nvidia.com/gpu".to_string(), Q("1".into()));
        let spec = corev1::PodSpec {
            containers: vec![corev1::Container {
                name: "c".into(),
                resources: Some(corev1::ResourceRequirements {
                    limits: Some(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = effective_requests(&spec).unwrap();
        assert_eq!((r.cpu_milli, r.get("nvidia.com/gpu")), (1000, 1));
    }

    #[test]
    fn bad_request_names_container_and_resource() {
        let spec = corev1::PodSpec {
            containers: vec![
                container("1", "2Gi", false),
                container("fast", "1Gi", false),
            ],
            ..Default::default()
        };
        let err = effective_requests(&spec).unwrap_err();
        assert_eq!(err.path, "spec.containers[1].resources.requests.cpu");
    }
}
