//! The engine's output: what to do and why. Serialized as the JSON `fleetscaler plan`
//! prints, documented field by field in `docs/plan-format.md`.

use fleetscaler_model::Warning;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;

use super::limits::LimitsReport;
use super::nodegroups::NodeGroupId;
use super::policy::FleetPolicy;
use super::reason::Reason;
use super::template::TemplateSource;
use fleetscaler_model::pod::PodId;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub now: Timestamp,
    pub node_groups: Vec<NodeGroupStatus>,
    pub scale_up: Vec<ScaleUpAction>,
    pub pending_pods: Vec<PodExplanation>,
    pub limits: LimitsReport,
    pub health: Health,
    /// Targets lowered to what a group can reach (a timed-out scale-up whose machines were never created).
    pub fix_target_size: Vec<FixTargetSize>,
    /// Machines that report a failure, to delete at once.
    pub delete_failed_machines: Vec<MachineDeletion>,
    /// Machines that never got a node within `max_node_provision_time`.
    pub delete_unregistered: Vec<MachineDeletion>,
    /// Nodes that could go, and when.
    pub unneeded: Vec<UnneededNode>,
    /// Nodes to remove now.
    pub scale_down: Vec<ScaleDownAction>,
    /// Nodes that stay, each with why.
    pub not_removable: Vec<NotRemovable>,
    /// Why no node is removed in this pass at all (cooldown, disabled, unhealthy cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_paused: Option<String>,
    /// When that pause ends by itself (a delay after a scale-up, a removal or a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_paused_until: Option<Timestamp>,
    /// Removals the fleet's policy held back (`scaleDownPaused` says why): they would have
    /// happened on a cluster of its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scale_down_held: Vec<ScaleDownAction>,
    /// The fleet's policy this pass was given (left out when it held nothing): with the same
    /// dump, `fleetscaler plan --fleet-policy` replays the plan.
    #[serde(skip_serializing_if = "is_no_policy")]
    pub fleet_policy: FleetPolicy,
    /// Scale-ups of this pass found failing for want of capacity (a machine's capacity error,
    /// a timeout), for the hub to share with the fleet's other clusters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capacity_failures: Vec<super::policy::SharedFailure>,
    /// ProvisioningRequests: per request, its class, what this pass decides and the
    /// conditions to write (left out when the cluster has none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub provisioning_requests: Vec<super::provisioning::RequestDecision>,
    /// Problems that did not stop the pass: bad settings, odd objects, invalid expander config.
    pub warnings: Vec<Warning>,
    /// The scale-ups found timed out in this pass, one per group, as data for those who tell
    /// them in their own words (upstream's `ScaleUpTimedOut` event); the plan's reasons
    /// (`fixTargetSize`, `deleteUnregistered`) already say it in the JSON.
    #[serde(skip)]
    pub timed_out: Vec<TimedOut>,
    /// Scale events a cores or memory limit held back in this pass, for upstream's
    /// `skipped_scale_events_count` (the reasons themselves are in the plan).
    #[serde(skip)]
    pub skipped_scale_events: SkippedScaleEvents,
}

/// A scale-up that timed out: `nodes` asked for since `since` did not register within
/// `within` (a Go duration).
#[derive(Clone, Debug, PartialEq)]
pub struct TimedOut {
    pub node_group: NodeGroupId,
    pub nodes: u64,
    pub since: Timestamp,
    pub within: String,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} node(s) asked for since {} did not register within {}",
            self.nodes, self.since, self.within
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    pub id: NodeGroupId,
    /// False for a resource that opted in but cannot be autoscaled; `reason` says why.
    pub eligible: bool,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub target: Option<u64>,
    pub registered: u64,
    pub ready: u64,
    /// Nodes asked for (target) that have not registered yet.
    pub upcoming: u64,
    pub template: TemplateSource,
    /// The platform its machines run on (`aws`, `openstack`, ...), when its nodes'
    /// providerIDs or its provider spec or infrastructure template say: another cluster's
    /// capacity failure on a different platform never backs it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<&'static str>,
    /// `annotations`, or `MachineAutoscaler <ns>/<name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Settings this group's `autoscaling-options-*` annotations override, by setting key.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub overrides: std::collections::BTreeMap<&'static str, super::nodegroups::GroupOverride>,
}

/// Raise a group's target size.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUpAction {
    pub node_group: NodeGroupId,
    pub from: u64,
    pub to: u64,
    /// The pending pods the new nodes are for.
    pub pods: Vec<PodId>,
    pub reason: String,
}

/// What happens to a pending pod, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// A scale-up in this plan is for it.
    ScaleUp,
    /// It fits a node that exists (the scheduler should place it; or it waits for preemption).
    FitsExisting,
    /// It fits a node already being added (target above registered nodes).
    FitsUpcoming,
    /// Nothing can be done for it now; the reasons say why, group by group.
    NoScaleUp,
    /// Its priority is below the cutoff: it never causes a scale-up.
    BelowPriorityCutoff,
}

impl Outcome {
    /// The name the JSON plan uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::ScaleUp => "scaleUp",
            Outcome::FitsExisting => "fitsExisting",
            Outcome::FitsUpcoming => "fitsUpcoming",
            Outcome::NoScaleUp => "noScaleUp",
            Outcome::BelowPriorityCutoff => "belowPriorityCutoff",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExplanation {
    pub pod: PodId,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group: Option<NodeGroupId>,
    /// The node it fits, for `fitsExisting` and `fitsUpcoming`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Arc<str>>,
    pub reasons: Vec<Reason>,
}

/// Cluster and node-group health, as the gates see them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub cluster: ClusterHealth,
    pub node_groups: Vec<GroupHealth>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterHealth {
    pub healthy: bool,
    pub ready: u64,
    pub unready: u64,
    /// Registered but not ready yet, within `max_node_startup_time` of creation.
    pub not_started: u64,
    /// Machines without a node, within `max_node_provision_time` of creation.
    pub unregistered: u64,
    /// Machines without a node past `max_node_provision_time`.
    pub long_unregistered: u64,
    /// Nodes being removed.
    pub deleting: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupHealth {
    pub id: NodeGroupId,
    pub healthy: bool,
    /// The group's nodes and machines, counted as for the cluster (`ClusterHealth`).
    pub ready: u64,
    pub unready: u64,
    pub not_started: u64,
    pub deleting: u64,
    pub unregistered: u64,
    pub long_unregistered: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_until: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_kind: Option<super::reason::FailureKind>,
    /// Another cluster's capacity failure this group is backed off for (`FleetBackoff`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet_backoff: Option<super::policy::SharedFailure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_up_in_flight: Option<InFlight>,
}

/// Nodes a group was asked for that have not registered yet.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    pub nodes: u64,
    /// When the oldest of them was asked for.
    pub since: Timestamp,
    /// When it times out (`since + max_node_provision_time`).
    pub deadline: Timestamp,
    /// True when no scale-up is on record and it was rebuilt from machine creation times.
    pub reconstructed: bool,
}

/// Lower a group's target to what it can really reach.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixTargetSize {
    pub node_group: NodeGroupId,
    pub from: u64,
    pub to: u64,
    pub reason: String,
    pub cause: super::reason::FailureKind,
}

/// Delete a machine: mark it with the group's delete annotation, then lower the group's
/// replicas by one (or, with `lowerReplicas` false, let the group replace it: it is at min).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletion {
    pub machine: fleetscaler_model::ObjectKey,
    pub node_group: NodeGroupId,
    pub lower_replicas: bool,
    pub reason: String,
    /// The failure it repairs; none for a scale-down's deletion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<super::reason::FailureKind>,
}

/// A node that could go: its pods all fit elsewhere and its utilization is low.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnneededNode {
    pub node: Arc<str>,
    pub node_group: NodeGroupId,
    /// Unneeded without a break since then.
    pub since: Timestamp,
    /// Requests over allocatable: the larger of CPU and memory, or GPUs on a GPU node.
    pub utilization: f64,
    /// When it has been unneeded long enough (`scale_down_unneeded_time`, or the unready time).
    pub removable_at: Timestamp,
}

/// Scale events cores and memory limits held back in one pass: up, node groups a max left
/// no room for a single node (upstream's `IsNodeGroupResourceExceeded`); down, nodes due
/// for removal a min kept (upstream's `MinimalResourceLimitExceeded`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkippedScaleEvents {
    pub up: crate::limits::SkippedByLimit,
    pub down: crate::limits::SkippedByLimit,
}

/// Remove a node: taint and cordon it, evict its pods, then delete its machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownAction {
    pub node: Arc<str>,
    pub node_group: NodeGroupId,
    /// No pod needs to move (DaemonSet, mirror and expendable pods aside).
    pub empty: bool,
    /// The node is unready (removed after `scale_down_unready_time`, upstream's `unready`
    /// scale-down reason).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unready: bool,
    pub pods: Vec<PodMove>,
    pub reason: String,
}

/// Where a pod of a removed node is expected to go.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMove {
    pub pod: PodId,
    pub destination: Arc<str>,
}

/// Why a node is not removed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotRemovable {
    pub node: Arc<str>,
    pub code: super::reason::ReasonCode,
    pub message: String,
}

fn is_no_policy(p: &FleetPolicy) -> bool {
    *p == FleetPolicy::none()
}
