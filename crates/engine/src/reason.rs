//! Reasons: the closed, documented set of codes the engine explains its decisions with,
//! each paired with a human-readable message. `docs/plan-format.md` lists every code; a test
//! keeps the two in step.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::nodegroups::NodeGroupId;

/// What kind of failure backed a group off or made the engine delete a machine. The status
/// ConfigMap's error codes and the events' reasons come from it, never from the wording of
/// a message, so rewording one changes no code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    /// Nodes asked for did not register within `max_node_provision_time`.
    Timeout,
    /// A machine reported a failure (phase Failed, an error message).
    MachineFailed,
    /// One machine never got a node, outside a timed-out scale-up.
    Unregistered,
    /// The hub could not change the group's size (an API error).
    #[default]
    ScaleUpFailed,
}

impl FailureKind {
    /// Upstream's error code for the status ConfigMap's backoff info.
    pub fn error_code(self) -> &'static str {
        match self {
            FailureKind::Timeout | FailureKind::Unregistered => "timeout",
            FailureKind::MachineFailed => "machineFailed",
            FailureKind::ScaleUpFailed => "cloudProviderError",
        }
    }
}

/// Why a pod cannot go somewhere, or why a node group cannot help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ReasonCode {
    // --- scheduling predicates (a pod on a node or a template node) ---
    /// Not enough free CPU, memory, ephemeral storage or an extended resource (GPUs...).
    InsufficientResources,
    /// The node already runs as many pods as it allows.
    TooManyPods,
    /// The pod's `nodeSelector` does not match the node's labels.
    NodeSelectorMismatch,
    /// The pod's required node affinity does not match the node.
    NodeAffinityMismatch,
    /// The node has a taint the pod does not tolerate.
    UntoleratedTaint,
    /// A host port the pod needs is taken on the node.
    HostPortConflict,
    /// No pod the pod requires (inter-pod affinity) runs in the node's topology domain.
    PodAffinityUnsatisfied,
    /// The pod's anti-affinity, or an existing pod's, forbids the node's topology domain.
    PodAntiAffinityConflict,
    /// Placing the pod there would break a `DoNotSchedule` topology spread constraint.
    TopologySpreadViolated,
    /// The node is cordoned (`spec.unschedulable`).
    NodeUnschedulable,
    // --- node groups and limits ---
    /// The node group is at its maximum size.
    MaxSizeReached,
    /// A cluster-wide resource limit (cores, memory, GPUs) leaves no room.
    ResourceLimitReached,
    /// The cluster-wide `maxNodesTotal` is reached.
    MaxNodesTotalReached,
    /// The estimator's cap on nodes per scale-up (`max_nodes_per_scaleup`) was reached.
    ScaleUpCapReached,
    /// The node group has no ready node to copy and no capacity annotations to build a template from.
    NoTemplate,
    /// The node group's configuration is invalid (bad min/max, conflicting MachineAutoscalers...).
    NodeGroupInvalid,
    /// The cluster has no autoscaled node groups at all.
    NoNodeGroups,
    /// The group is backed off after a failed scale-up (a timeout, a failed machine).
    NodeGroupBackedOff,
    /// Another cluster of the fleet found no capacity for the group's instance type in its
    /// zone (or region): the group is backed off here too, without trying.
    FleetBackoff,
    /// Too few of the group's nodes are ready for it to be trusted with more.
    NodeGroupUnhealthy,
    /// The group's size differs from its target for a reason the engine cannot explain.
    NodeGroupSizeUnexplained,
    /// Too many of the cluster's nodes are unready: no scaling until it recovers.
    ClusterUnhealthy,
    // --- scale-down: why a node stays ---
    /// The node carries `cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`.
    ScaleDownDisabledAnnotation,
    /// The node belongs to no autoscaled node group (control plane, unmanaged nodes).
    NotAutoscaled,
    /// The node's requests are above the utilization threshold.
    NotUnderutilized,
    /// The node reports no allocatable resources, so its utilization cannot be known.
    UtilizationUnknown,
    /// The node is already being removed.
    CurrentlyBeingDeleted,
    /// Pods of another node being removed are to move onto this one.
    HoldsMovedPods,
    /// A pod on the node fits no other node.
    NoPlaceToMovePods,
    /// A pod without a controller would not be recreated elsewhere.
    NotReplicated,
    /// A pod's controller is not in the cluster.
    ControllerNotFound,
    /// A pod uses local storage (emptyDir on disk, hostPath).
    LocalStorageRequested,
    /// A pod is annotated `safe-to-evict: "false"` (or waits for completion).
    NotSafeToEvictAnnotation,
    /// A kube-system pod has no PodDisruptionBudget.
    UnmovableKubeSystemPod,
    /// A PodDisruptionBudget allows no more disruptions.
    NotEnoughPdb,
    /// Something about a pod leaves in doubt whether it may be evicted (an annotation with a
    /// value that means neither yes nor no, a controller whose kind the hub may not read):
    /// its node stays (upstream's `UnexpectedError` blocking reason).
    UnexpectedError,
    /// The node's group is at its min size.
    NodeGroupMinSizeReached,
    /// Removing the node would take the cluster below a min limit (cores, memory, GPUs).
    MinimalResourceLimitExceeded,
    /// The parallelism limits for this pass are used up; the node stays unneeded for a later pass.
    DeletionBudgetReached,
    // --- the pod itself ---
    /// The pod's priority is below `podPriorityThreshold`: it never triggers a scale-up.
    BelowPriorityCutoff,
    /// A DaemonSet pod: new nodes run their own copy, so adding nodes cannot place this one.
    DaemonSetPod,
    /// Younger than `new_pod_scale_up_delay` (or its own `pod-scale-up-delay`): it waits.
    PodTooNew,
    /// A scheduler feature the engine does not simulate (named in the message).
    NotSimulated,
    // --- scale-down, added after the rest (kept last so the order of the others stands) ---
    /// A pod's ReplicaSet or ReplicationController asks for fewer replicas than
    /// `min_replica_count`.
    MinReplicasReached,
    /// The node's MachineDeployment is rolling out: a MachineSet of an older revision still
    /// has machines (upstream's Cluster API provider skips such nodes for scale-down).
    NodeGroupRollingOut,
    /// A volume of the pod can only be used from nodes its PersistentVolume's node affinity (or its StorageClass's allowed topologies, or the local volumes it could bind) selects, and this is not one.
    VolumeNodeAffinityConflict,
    /// A volume of the pod lives in a zone (or region) the node is not in.
    VolumeZoneConflict,
    /// A claim of the pod waits to be bound by the volume controllers, not for a node: an unbound claim of an `Immediate` class or of no class, or a local class with no free volume.
    VolumeNotBound,
    /// A claim, volume or StorageClass the pod needs does not exist: no node can run it.
    VolumeMissing,
    /// A `ReadWriteOncePod` claim of the pod is used by another pod.
    VolumeClaimInUse,
    /// The node cannot attach another volume of the pod's CSI driver (its CSINode's `allocatable.count`).
    VolumeLimitReached,
    // --- ProvisioningRequests ---
    /// The pod consumes a ProvisioningRequest: the request provides its capacity, so it
    /// triggers no scale-up of its own (upstream's `ProvisioningRequestPodsFilter`).
    ConsumesProvisioningRequest,
    /// This pass served a ProvisioningRequest; other pending pods wait for the next pass
    /// (upstream's wrapper orchestrator alternates between the two).
    ProvisioningRequestTurn,
    /// A best-effort-atomic request: the group's option would not place all of its pods
    /// (upstream's `AllOrNothingReason`).
    AllOrNothing,
    /// A ResourceClaim (or ResourceClaimTemplate) the pod names does not exist.
    DeviceClaimMissing,
    /// A DeviceClass a claim of the pod asks for does not exist.
    DeviceClassMissing,
    /// The node has too few free devices matching a claim of the pod (devices in use are not free).
    DevicesUnavailable,
    /// A claim of the pod is allocated already, to devices this node cannot use.
    DeviceClaimAllocatedElsewhere,
}

impl ReasonCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::InsufficientResources => "InsufficientResources",
            ReasonCode::TooManyPods => "TooManyPods",
            ReasonCode::NodeSelectorMismatch => "NodeSelectorMismatch",
            ReasonCode::NodeAffinityMismatch => "NodeAffinityMismatch",
            ReasonCode::UntoleratedTaint => "UntoleratedTaint",
            ReasonCode::HostPortConflict => "HostPortConflict",
            ReasonCode::PodAffinityUnsatisfied => "PodAffinityUnsatisfied",
            ReasonCode::PodAntiAffinityConflict => "PodAntiAffinityConflict",
            ReasonCode::TopologySpreadViolated => "TopologySpreadViolated",
            ReasonCode::NodeUnschedulable => "NodeUnschedulable",
            ReasonCode::MaxSizeReached => "MaxSizeReached",
            ReasonCode::ResourceLimitReached => "ResourceLimitReached",
            ReasonCode::MaxNodesTotalReached => "MaxNodesTotalReached",
            ReasonCode::ScaleUpCapReached => "ScaleUpCapReached",
            ReasonCode::NoTemplate => "NoTemplate",
            ReasonCode::NodeGroupInvalid => "NodeGroupInvalid",
            ReasonCode::NoNodeGroups => "NoNodeGroups",
            ReasonCode::NodeGroupBackedOff => "NodeGroupBackedOff",
            ReasonCode::FleetBackoff => "FleetBackoff",
            ReasonCode::NodeGroupUnhealthy => "NodeGroupUnhealthy",
            ReasonCode::NodeGroupSizeUnexplained => "NodeGroupSizeUnexplained",
            ReasonCode::ClusterUnhealthy => "ClusterUnhealthy",
            ReasonCode::ScaleDownDisabledAnnotation => "ScaleDownDisabledAnnotation",
            ReasonCode::NotAutoscaled => "NotAutoscaled",
            ReasonCode::NotUnderutilized => "NotUnderutilized",
            ReasonCode::UtilizationUnknown => "UtilizationUnknown",
            ReasonCode::CurrentlyBeingDeleted => "CurrentlyBeingDeleted",
            ReasonCode::HoldsMovedPods => "HoldsMovedPods",
            ReasonCode::NoPlaceToMovePods => "NoPlaceToMovePods",
            ReasonCode::NotReplicated => "NotReplicated",
            ReasonCode::ControllerNotFound => "ControllerNotFound",
            ReasonCode::LocalStorageRequested => "LocalStorageRequested",
            ReasonCode::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            ReasonCode::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            ReasonCode::NotEnoughPdb => "NotEnoughPdb",
            ReasonCode::UnexpectedError => "UnexpectedError",
            ReasonCode::NodeGroupMinSizeReached => "NodeGroupMinSizeReached",
            ReasonCode::MinimalResourceLimitExceeded => "MinimalResourceLimitExceeded",
            ReasonCode::DeletionBudgetReached => "DeletionBudgetReached",
            ReasonCode::BelowPriorityCutoff => "BelowPriorityCutoff",
            ReasonCode::DaemonSetPod => "DaemonSetPod",
            ReasonCode::PodTooNew => "PodTooNew",
            ReasonCode::NotSimulated => "NotSimulated",
            ReasonCode::MinReplicasReached => "MinReplicasReached",
            ReasonCode::NodeGroupRollingOut => "NodeGroupRollingOut",
            ReasonCode::VolumeNodeAffinityConflict => "VolumeNodeAffinityConflict",
            ReasonCode::VolumeZoneConflict => "VolumeZoneConflict",
            ReasonCode::VolumeNotBound => "VolumeNotBound",
            ReasonCode::VolumeMissing => "VolumeMissing",
            ReasonCode::VolumeClaimInUse => "VolumeClaimInUse",
            ReasonCode::VolumeLimitReached => "VolumeLimitReached",
            ReasonCode::ConsumesProvisioningRequest => "ConsumesProvisioningRequest",
            ReasonCode::ProvisioningRequestTurn => "ProvisioningRequestTurn",
            ReasonCode::AllOrNothing => "AllOrNothing",
            ReasonCode::DeviceClaimMissing => "DeviceClaimMissing",
            ReasonCode::DeviceClassMissing => "DeviceClassMissing",
            ReasonCode::DevicesUnavailable => "DevicesUnavailable",
            ReasonCode::DeviceClaimAllocatedElsewhere => "DeviceClaimAllocatedElsewhere",
        }
    }

    /// Every code, for documentation checks.
    pub const ALL: [ReasonCode; 58] = [
        ReasonCode::InsufficientResources,
        ReasonCode::TooManyPods,
        ReasonCode::NodeSelectorMismatch,
        ReasonCode::NodeAffinityMismatch,
        ReasonCode::UntoleratedTaint,
        ReasonCode::HostPortConflict,
        ReasonCode::PodAffinityUnsatisfied,
        ReasonCode::PodAntiAffinityConflict,
        ReasonCode::TopologySpreadViolated,
        ReasonCode::NodeUnschedulable,
        ReasonCode::MaxSizeReached,
        ReasonCode::ResourceLimitReached,
        ReasonCode::MaxNodesTotalReached,
        ReasonCode::ScaleUpCapReached,
        ReasonCode::NoTemplate,
        ReasonCode::NodeGroupInvalid,
        ReasonCode::NoNodeGroups,
        ReasonCode::NodeGroupBackedOff,
        ReasonCode::FleetBackoff,
        ReasonCode::NodeGroupUnhealthy,
        ReasonCode::NodeGroupSizeUnexplained,
        ReasonCode::ClusterUnhealthy,
        ReasonCode::ScaleDownDisabledAnnotation,
        ReasonCode::NotAutoscaled,
        ReasonCode::NotUnderutilized,
        ReasonCode::UtilizationUnknown,
        ReasonCode::CurrentlyBeingDeleted,
        ReasonCode::HoldsMovedPods,
        ReasonCode::NoPlaceToMovePods,
        ReasonCode::NotReplicated,
        ReasonCode::ControllerNotFound,
        ReasonCode::LocalStorageRequested,
        ReasonCode::NotSafeToEvictAnnotation,
        ReasonCode::UnmovableKubeSystemPod,
        ReasonCode::NotEnoughPdb,
        ReasonCode::NodeGroupMinSizeReached,
        ReasonCode::MinimalResourceLimitExceeded,
        ReasonCode::DeletionBudgetReached,
        ReasonCode::BelowPriorityCutoff,
        ReasonCode::DaemonSetPod,
        ReasonCode::PodTooNew,
        ReasonCode::NotSimulated,
        ReasonCode::UnexpectedError,
        ReasonCode::MinReplicasReached,
        ReasonCode::NodeGroupRollingOut,
        ReasonCode::VolumeNodeAffinityConflict,
        ReasonCode::VolumeZoneConflict,
        ReasonCode::VolumeNotBound,
        ReasonCode::VolumeMissing,
        ReasonCode::VolumeClaimInUse,
        ReasonCode::VolumeLimitReached,
        ReasonCode::ConsumesProvisioningRequest,
        ReasonCode::ProvisioningRequestTurn,
        ReasonCode::AllOrNothing,
        ReasonCode::DeviceClaimMissing,
        ReasonCode::DeviceClassMissing,
        ReasonCode::DevicesUnavailable,
        ReasonCode::DeviceClaimAllocatedElsewhere,
    ];
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code with its message, and the node group it is about, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reason {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group: Option<NodeGroupId>,
    pub code: ReasonCode,
    pub message: String,
}

impl Reason {
    pub fn new(code: ReasonCode, message: impl Into<String>) -> Self {
        Reason {
            node_group: None,
            code,
            message: message.into(),
        }
    }

    pub fn for_group(group: &NodeGroupId, code: ReasonCode, message: impl Into<String>) -> Self {
        Reason {
            node_group: Some(group.clone()),
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node_group {
            Some(g) => write!(f, "{g}: {} ({})", self.message, self.code),
            None => write!(f, "{} ({})", self.message, self.code),
        }
    }
}

/// A predicate failure: the code and what exactly did not fit. On the hot path (asked with
/// `explain` off) the message is left empty: formatting it would cost more than the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unfit {
    pub code: ReasonCode,
    pub message: String,
}

impl Unfit {
    pub fn new(code: ReasonCode, message: impl Into<String>) -> Self {
        Unfit {
            code,
            message: message.into(),
        }
    }

    /// The failure, with its message formatted only when `explain` is set.
    pub fn lazy(code: ReasonCode, explain: bool, message: impl FnOnce() -> String) -> Self {
        Unfit {
            code,
            message: if explain { message() } else { String::new() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exhaustive: a new variant does not compile here until it is in `ALL`.
    fn position(c: ReasonCode) -> usize {
        use ReasonCode::*;
        match c {
            InsufficientResources => 0,
            TooManyPods => 1,
            NodeSelectorMismatch => 2,
            NodeAffinityMismatch => 3,
            UntoleratedTaint => 4,
            HostPortConflict => 5,
            PodAffinityUnsatisfied => 6,
            PodAntiAffinityConflict => 7,
            TopologySpreadViolated => 8,
            NodeUnschedulable => 9,
            MaxSizeReached => 10,
            ResourceLimitReached => 11,
            MaxNodesTotalReached => 12,
            ScaleUpCapReached => 13,
            NoTemplate => 14,
            NodeGroupInvalid => 15,
            NoNodeGroups => 16,
            NodeGroupBackedOff => 17,
            FleetBackoff => 18,
            NodeGroupUnhealthy => 19,
            NodeGroupSizeUnexplained => 20,
            ClusterUnhealthy => 21,
            ScaleDownDisabledAnnotation => 22,
            NotAutoscaled => 23,
            NotUnderutilized => 24,
            UtilizationUnknown => 25,
            CurrentlyBeingDeleted => 26,
            HoldsMovedPods => 27,
            NoPlaceToMovePods => 28,
            NotReplicated => 29,
            ControllerNotFound => 30,
            LocalStorageRequested => 31,
            NotSafeToEvictAnnotation => 32,
            UnmovableKubeSystemPod => 33,
            NotEnoughPdb => 34,
            NodeGroupMinSizeReached => 35,
            MinimalResourceLimitExceeded => 36,
            DeletionBudgetReached => 37,
            BelowPriorityCutoff => 38,
            DaemonSetPod => 39,
            PodTooNew => 40,
            NotSimulated => 41,
            UnexpectedError => 42,
            MinReplicasReached => 43,
            NodeGroupRollingOut => 44,
            VolumeNodeAffinityConflict => 45,
            VolumeZoneConflict => 46,
            VolumeNotBound => 47,
            VolumeMissing => 48,
            VolumeClaimInUse => 49,
            VolumeLimitReached => 50,
            ConsumesProvisioningRequest => 51,
            ProvisioningRequestTurn => 52,
            AllOrNothing => 53,
            DeviceClaimMissing => 54,
            DeviceClassMissing => 55,
            DevicesUnavailable => 56,
            DeviceClaimAllocatedElsewhere => 57,
        }
    }

    #[test]
    fn all_lists_every_code_once_and_names_match_serde() {
        for (i, c) in ReasonCode::ALL.iter().enumerate() {
            assert_eq!(position(*c), i);
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
        }
    }
}
