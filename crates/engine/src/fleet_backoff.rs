//! What the fleet knows about capacity, in one cluster's pass: groups whose instance type
//! failed for want of capacity in another cluster's same zone (or region), on the same
//! platform (`CapacityKey`, read off each group's template), get no scale-up until that
//! failure's backoff ends (`FleetBackoff`), and this cluster's own capacity failures of this
//! pass are handed to the hub to share.

use jiff::Timestamp;

use super::cluster_state::ClusterState;
use super::nodegroups::NodeGroups;
use super::plan::Plan;
use super::policy::{CapacityKey, FleetPolicy, SharedFailure, is_capacity_error};
use super::reason::{FailureKind, ReasonCode, Unfit};
use super::state::EngineState;
use super::template::{TemplateError, TemplateNode};

/// Blocks the groups another cluster's capacity failure covers (a backoff of their own
/// already blocks them: it is the fresher knowledge, and says more).
pub fn apply(
    cluster: &mut ClusterState,
    groups: &NodeGroups,
    templates: &[Result<TemplateNode, TemplateError>],
    policy: &FleetPolicy,
    now: Timestamp,
) {
    if policy.shared_failures.is_empty() {
        return;
    }
    for (i, g) in groups.groups.iter().enumerate() {
        let Some(key) = templates[i].as_ref().ok().and_then(CapacityKey::of) else {
            continue;
        };
        let Some(failure) = policy.shared_failures.iter().find(|f| f.applies(&key, now)) else {
            continue;
        };
        let gs = &mut cluster.groups[i];
        if gs
            .block
            .as_ref()
            .is_some_and(|b| b.code == ReasonCode::NodeGroupBackedOff)
        {
            continue;
        }
        gs.block = Some(Unfit::new(ReasonCode::FleetBackoff, failure.explain()));
        if let Some(h) = cluster.health.node_groups.iter_mut().find(|h| h.id == g.id) {
            h.fleet_backoff = Some(failure.clone());
        }
    }
}

/// The capacity failures of this pass: backoffs that started now, after a machine failed
/// with a capacity error or a scale-up timed out, of groups whose template says what they
/// are. The cluster's name and the pass's trace are the hub's to fill in.
pub fn found(
    groups: &NodeGroups,
    templates: &[Result<TemplateNode, TemplateError>],
    state: &EngineState,
    now: Timestamp,
) -> Vec<SharedFailure> {
    let mut out = Vec::new();
    for (i, g) in groups.groups.iter().enumerate() {
        let Some(b) = state.backoff.get(g.id.as_str()) else {
            continue;
        };
        let capacity = match b.kind {
            FailureKind::Timeout => true,
            FailureKind::MachineFailed => is_capacity_error(&b.reason),
            FailureKind::Unregistered | FailureKind::ScaleUpFailed => false,
        };
        let Some(key) = templates[i].as_ref().ok().and_then(CapacityKey::of) else {
            continue;
        };
        if b.last_failure == now && capacity {
            out.push(SharedFailure {
                cluster: fleetscaler_model::ClusterName::default(),
                node_group: g.id.clone(),
                machine: b.machine.clone(),
                key,
                scope: Default::default(),
                reason: b.reason.clone(),
                at: now,
                until: b.until,
                trace: None,
            });
        }
    }
    out
}

/// Each group backed off for another cluster's failure says so among its notes, where a
/// person reading the node groups looks.
pub fn note(plan: &mut Plan) {
    for h in &plan.health.node_groups {
        let Some(f) = &h.fleet_backoff else {
            continue;
        };
        if let Some(g) = plan.node_groups.iter_mut().find(|g| g.id == h.id) {
            g.notes.push(format!("FleetBackoff: {}", f.explain()));
        }
    }
}
