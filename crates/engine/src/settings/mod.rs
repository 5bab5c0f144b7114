//! Engine settings with the upstream autoscaler's defaults, and (in `patch`) the partial
//! settings each configuration layer (fleet.toml, a cluster's own ClusterAutoscaler
//! resource, command-line flags) produces and that are applied in order.

mod patch;

pub use patch::{
    PrioritiesError, SETTING_KEYS, SettingError, SettingWarning, SettingsPatch,
    parse_priorities_map,
};

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use fleetscaler_model::ScalableKind;

/// A min/max pair; `max` of `None` means unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    #[serde(default)]
    pub min: u64,
    pub max: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuLimit {
    /// The GPU type: a node's `cluster-api/accelerator` label value, or a GPU resource name.
    #[serde(rename = "type")]
    pub gpu_type: String,
    #[serde(default)]
    pub min: u64,
    pub max: u64,
}

/// A node group named in configuration rather than by annotations on the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroupSpec {
    /// A scalable kind's name (`MachineSet`, `MachineDeployment`: [`ScalableKind`]).
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `machine.openshift.io` (the default) or `cluster.x-k8s.io`.
    #[serde(default)]
    pub api_group: Option<String>,
    #[serde(default)]
    pub min: u64,
    pub max: u64,
}

/// What is wrong with a `node_groups` entry; the key it is under is told beside it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeGroupSpecError {
    #[error("kind {0:?} is not {names}", names = ScalableKind::names())]
    Kind(String),
    #[error("api_group {0:?} is not machine.openshift.io or cluster.x-k8s.io")]
    ApiGroup(String),
    #[error("namespace and name must not be empty")]
    Unnamed,
    #[error("{namespace}/{name}: min {min} and max {max} are not a valid range (max at least 1)")]
    Range {
        namespace: String,
        name: String,
        min: u64,
        max: u64,
    },
}

impl NodeGroupSpec {
    /// Checks the entry; the reason names what is wrong.
    pub fn check(&self) -> Result<(), NodeGroupSpecError> {
        if ScalableKind::parse(&self.kind).is_none() {
            return Err(NodeGroupSpecError::Kind(self.kind.clone()));
        }
        if let Some(g) = self.api_group.as_deref()
            && !matches!(g, "machine.openshift.io" | "cluster.x-k8s.io")
        {
            return Err(NodeGroupSpecError::ApiGroup(g.to_string()));
        }
        if self.name.is_empty() || self.namespace.is_empty() {
            return Err(NodeGroupSpecError::Unnamed);
        }
        if self.max == 0 || self.min > self.max {
            return Err(NodeGroupSpecError::Range {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                min: self.min,
                max: self.max,
            });
        }
        Ok(())
    }
}

/// Why a chain of expanders is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExpanderError {
    #[error("unknown expander {0:?} (least-waste, most-pods, least-nodes, random, priority)")]
    Unknown(String),
    #[error("expander {0} is listed twice")]
    Twice(ExpanderKind),
    #[error("the expander list is empty")]
    Empty,
}

/// How the scale-up option is chosen when several node groups could help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpanderKind {
    LeastWaste,
    MostPods,
    LeastNodes,
    Random,
    Priority,
}

impl ExpanderKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "least-waste" | "LeastWaste" => Some(ExpanderKind::LeastWaste),
            "most-pods" | "MostPods" => Some(ExpanderKind::MostPods),
            "least-nodes" | "LeastNodes" => Some(ExpanderKind::LeastNodes),
            "random" | "Random" => Some(ExpanderKind::Random),
            "priority" | "Priority" => Some(ExpanderKind::Priority),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExpanderKind::LeastWaste => "least-waste",
            ExpanderKind::MostPods => "most-pods",
            ExpanderKind::LeastNodes => "least-nodes",
            ExpanderKind::Random => "random",
            ExpanderKind::Priority => "priority",
        }
    }

    /// Parses a chain such as `priority,least-waste`; duplicates are rejected, as upstream does.
    pub fn parse_chain(text: &str) -> Result<Vec<ExpanderKind>, ExpanderError> {
        let mut chain = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let kind = ExpanderKind::parse(part)
                .ok_or_else(|| ExpanderError::Unknown(part.trim().to_string()))?;
            if chain.contains(&kind) {
                return Err(ExpanderError::Twice(kind));
            }
            chain.push(kind);
        }
        if chain.is_empty() {
            return Err(ExpanderError::Empty);
        }
        Ok(chain)
    }
}

impl fmt::Display for ExpanderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the engine's decisions depend on besides the snapshot, the state and the time.
/// Serialized with the same snake_case keys as fleet.toml, so a report names the key to set.
/// Defaults are the upstream autoscaler's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    // --- scale-up ---
    /// Pods with a priority below this never cause a scale-up and never block a scale-down.
    pub pod_priority_threshold: i32,
    /// Total nodes, control plane included; `None` is unlimited.
    pub max_nodes_total: Option<u64>,
    /// Total cores over all nodes.
    pub cores: Range,
    /// Total memory over all nodes, in GiB.
    pub memory_gib: Range,
    pub gpus: Vec<GpuLimit>,
    /// Cap on the nodes one pass may add (a latency guard, as upstream).
    pub max_nodes_per_scaleup: u64,
    pub expanders: Vec<ExpanderKind>,
    /// Priority expander configuration (`priority → [regex]`); when unset the cluster's
    /// `cluster-autoscaler-priority-expander` ConfigMap is used.
    pub priorities: Option<BTreeMap<i32, Vec<String>>>,
    /// The namespace the priority expander's ConfigMap is read from; `None`: the
    /// autoscaler's own, `openshift-machine-api` on OpenShift and `kube-system` elsewhere.
    pub priority_config_namespace: Option<String>,
    pub balance_similar_node_groups: bool,
    /// Labels ignored when comparing node groups, beside the built-in zone/hostname ones.
    pub balancing_ignored_labels: Vec<String>,
    /// Node groups named in fleet.toml: their bounds win over a MachineAutoscaler and annotations.
    pub node_groups: Vec<NodeGroupSpec>,
    /// Pods younger than this do not trigger a scale-up yet (a pod's
    /// `cluster-autoscaler.kubernetes.io/pod-scale-up-delay` annotation may only lengthen it).
    #[serde(with = "duration_serde")]
    pub new_pod_scale_up_delay: Duration,
    // --- scale-down ---
    pub scale_down_enabled: bool,
    /// No scale-down this long after a scale-up.
    #[serde(with = "duration_serde")]
    pub scale_down_delay_after_add: Duration,
    /// No scale-down this long after a node was deleted.
    #[serde(with = "duration_serde")]
    pub scale_down_delay_after_delete: Duration,
    /// No scale-down this long after a scale-down failed.
    #[serde(with = "duration_serde")]
    pub scale_down_delay_after_failure: Duration,
    /// How long a ready node must be unneeded before it is removed.
    #[serde(with = "duration_serde")]
    pub scale_down_unneeded_time: Duration,
    /// How long an unready node must be unneeded before it is removed.
    #[serde(with = "duration_serde")]
    pub scale_down_unready_time: Duration,
    /// A node whose requests are at most this fraction of allocatable (the larger of CPU and
    /// memory) may be removed.
    pub scale_down_utilization_threshold: f64,
    /// The same for GPU nodes, on GPU requests alone.
    pub scale_down_gpu_utilization_threshold: f64,
    /// Leave DaemonSet pods out of utilization.
    pub ignore_daemonsets_utilization: bool,
    /// Pods with local storage (emptyDir on disk, hostPath) keep their node.
    pub skip_nodes_with_local_storage: bool,
    /// kube-system pods without a PodDisruptionBudget keep their node, until they are
    /// older than `blocking_system_pod_disruption_timeout`.
    pub skip_nodes_with_system_pods: bool,
    /// How old (since its creation) a kube-system pod without a PodDisruptionBudget must be
    /// before it may be evicted after all (upstream's
    /// `--blocking-system-pod-distruption-timeout`, sic).
    #[serde(with = "duration_serde")]
    pub blocking_system_pod_disruption_timeout: Duration,
    /// Pods whose controller is not a ReplicaSet, ReplicationController, Job or StatefulSet
    /// (an operator's own kind, a TaskRun, a VirtualMachineInstance) keep their node unless
    /// annotated safe to evict: nothing known would recreate them elsewhere (upstream's
    /// `--skip-nodes-with-custom-controller-pods`).
    pub skip_nodes_with_custom_controller_pods: bool,
    /// With `skip_nodes_with_custom_controller_pods`, a pod whose ReplicaSet or
    /// ReplicationController asks for fewer replicas than this keeps its node
    /// (`MinReplicasReached`; upstream's `--min-replica-count`, 0 by default: never).
    pub min_replica_count: u64,
    /// Longest termination grace given to a pod evicted for a scale-down.
    #[serde(with = "duration_serde")]
    pub max_pod_grace_period: Duration,
    /// How long evictions of a node's pods are retried (a PodDisruptionBudget refusing
    /// them) before its scale-down fails and is rolled back.
    #[serde(with = "duration_serde")]
    pub max_pod_eviction_time: Duration,
    /// DaemonSet pods of a drained node are evicted too, best effort, after its other pods
    /// (upstream's `--daemonset-eviction-for-occupied-nodes`), so node agents stop gracefully.
    pub daemonset_eviction_for_occupied_nodes: bool,
    /// The same for nodes removed empty (upstream's `--daemonset-eviction-for-empty-nodes`).
    pub daemonset_eviction_for_empty_nodes: bool,
    /// Pause between tainting a node and draining it, so that pods the scheduler placed
    /// just before the taint are seen.
    #[serde(with = "duration_serde")]
    pub node_delete_delay_after_taint: Duration,
    /// Also cordon (`spec.unschedulable`) a node being removed, not only taint it.
    pub cordon_node_before_terminating: bool,
    /// A group whose target is below its min is raised to it, pods pending or not
    /// (`--enforce-node-group-min-size`).
    pub enforce_node_group_min_size: bool,
    /// Taint keys a node carries until it can take workloads (`--startup-taint`); such a
    /// node counts as not ready yet, and no template carries them. Keys with the
    /// `startup-taint.cluster-autoscaler.kubernetes.io/` prefix are startup taints too.
    pub startup_taints: Vec<String>,
    /// Nodes removed at once, empty and drained together.
    pub max_scale_down_parallelism: u64,
    /// Nodes drained at once.
    pub max_drain_parallelism: u64,
    // --- cluster health and provisioning ---
    /// How long a new node may take to register before its scale-up counts as failed.
    #[serde(with = "duration_serde")]
    pub max_node_provision_time: Duration,
    /// How long a registered node may take to become ready before it counts as unready.
    #[serde(with = "duration_serde")]
    pub max_node_startup_time: Duration,
    /// The cluster (or a group) is unhealthy only with more unready nodes than this...
    pub ok_total_unready_count: u64,
    /// ...and more than this percentage of its nodes unready.
    pub max_total_unready_percentage: f64,
    /// First backoff of a node group whose scale-up failed; it doubles on each failure.
    #[serde(with = "duration_serde")]
    pub initial_node_group_backoff: Duration,
    #[serde(with = "duration_serde")]
    pub max_node_group_backoff: Duration,
    /// A group's backoff starts over after this long without a failure.
    #[serde(with = "duration_serde")]
    pub node_group_backoff_reset: Duration,
    /// Seed of the random expander and tie-breaks, so a plan can be reproduced.
    pub seed: u64,
}

const MINUTE: u64 = 60;

impl Settings {
    /// Whether a taint means "not ready for workloads yet": one of `startup_taints`, or
    /// upstream's `startup-taint.` / (deprecated) `ignore-taint.cluster-autoscaler.kubernetes.io/`.
    pub fn is_startup_taint(&self, key: &str) -> bool {
        key.starts_with("startup-taint.cluster-autoscaler.kubernetes.io/")
            || key.starts_with("ignore-taint.cluster-autoscaler.kubernetes.io/")
            || self.startup_taints.iter().any(|k| k == key)
    }

    /// Whether the node still carries a startup taint.
    pub fn has_startup_taint(&self, node: &fleetscaler_model::node::Node) -> bool {
        node.taints.iter().any(|t| self.is_startup_taint(&t.key))
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pod_priority_threshold: -10,
            max_nodes_total: None,
            cores: Range {
                min: 0,
                max: Some(320_000),
            },
            memory_gib: Range {
                min: 0,
                max: Some(6_400_000),
            },
            gpus: Vec::new(),
            max_nodes_per_scaleup: 1000,
            expanders: vec![ExpanderKind::LeastWaste],
            priorities: None,
            priority_config_namespace: None,
            balance_similar_node_groups: false,
            balancing_ignored_labels: Vec::new(),
            node_groups: Vec::new(),
            new_pod_scale_up_delay: Duration::ZERO,
            scale_down_enabled: true,
            scale_down_delay_after_add: Duration::from_secs(10 * MINUTE),
            scale_down_delay_after_delete: Duration::ZERO,
            scale_down_delay_after_failure: Duration::from_secs(3 * MINUTE),
            scale_down_unneeded_time: Duration::from_secs(10 * MINUTE),
            scale_down_unready_time: Duration::from_secs(20 * MINUTE),
            scale_down_utilization_threshold: 0.5,
            scale_down_gpu_utilization_threshold: 0.5,
            ignore_daemonsets_utilization: false,
            skip_nodes_with_local_storage: true,
            skip_nodes_with_system_pods: true,
            blocking_system_pod_disruption_timeout: Duration::from_secs(3600),
            skip_nodes_with_custom_controller_pods: true,
            min_replica_count: 0,
            max_pod_grace_period: Duration::from_secs(600),
            max_pod_eviction_time: Duration::from_secs(2 * MINUTE),
            daemonset_eviction_for_occupied_nodes: true,
            daemonset_eviction_for_empty_nodes: false,
            node_delete_delay_after_taint: Duration::from_secs(5),
            cordon_node_before_terminating: true,
            enforce_node_group_min_size: false,
            startup_taints: Vec::new(),
            max_scale_down_parallelism: 10,
            max_drain_parallelism: 1,
            max_node_provision_time: Duration::from_secs(15 * MINUTE),
            max_node_startup_time: Duration::from_secs(15 * MINUTE),
            ok_total_unready_count: 3,
            max_total_unready_percentage: 45.0,
            initial_node_group_backoff: Duration::from_secs(5 * MINUTE),
            max_node_group_backoff: Duration::from_secs(30 * MINUTE),
            node_group_backoff_reset: Duration::from_secs(180 * MINUTE),
            seed: 0,
        }
    }
}

pub mod duration_serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    use fleetscaler_model::duration::{format_go_duration, parse_go_duration};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_go_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        parse_go_duration(&text).map_err(serde::de::Error::custom)
    }
}

pub mod opt_duration_serde {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration_serde::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::duration_serde::deserialize(d).map(Some)
    }
}
