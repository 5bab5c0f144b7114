//! Why a pod did not trigger a scale-up, in upstream's words (`NotTriggerScaleUp`'s
//! message): each node group's reason phrased as the scheduler and upstream's orchestrator
//! say it, counted across groups.

use std::collections::HashMap;

use crate::engine::reason::{Reason, ReasonCode};

/// Upstream's `ReasonsMessage`: each group's reason in upstream's words, counted across
/// groups and sorted (`1 max node group size reached, 2 Insufficient cpu`). A pod still
/// within its scale-up delay gets no event, as upstream filters such pods out before it.
pub(super) fn not_triggered(reasons: &[Reason]) -> Option<String> {
    if reasons.iter().any(|r| r.code == ReasonCode::PodTooNew) {
        return None;
    }
    if reasons
        .iter()
        .any(|r| r.code == ReasonCode::MaxNodesTotalReached)
    {
        return Some("max total nodes in cluster reached".to_string());
    }
    let mut counted: HashMap<String, usize> = HashMap::new();
    for r in reasons
        .iter()
        .filter(|r| r.node_group.is_some() && r.code != ReasonCode::NodeGroupInvalid)
    {
        *counted.entry(phrase(r)).or_default() += 1;
    }
    if counted.is_empty() {
        // No group was considered: say why in the engine's words (no node groups, an
        // unhealthy cluster).
        return reasons
            .iter()
            .find(|r| r.code != ReasonCode::NotSimulated)
            .map(phrase_or_message);
    }
    let mut parts: Vec<String> = counted
        .into_iter()
        .map(|(phrase, n)| format!("{n} {phrase}"))
        .collect();
    parts.sort();
    Some(parts.join(", "))
}

fn phrase_or_message(r: &Reason) -> String {
    match r.code {
        ReasonCode::ClusterUnhealthy | ReasonCode::NoNodeGroups => r.message.clone(),
        _ => phrase(r),
    }
}

/// A reason in upstream's words (the scheduler's predicate messages and the orchestrator's
/// skip reasons), short and the same for every group so that counting them makes sense.
fn phrase(r: &Reason) -> String {
    use ReasonCode::*;
    let first_word = r.message.split_whitespace().next();
    match r.code {
        InsufficientResources => format!("Insufficient {}", first_word.unwrap_or("resources")),
        TooManyPods => "Too many pods".into(),
        NodeSelectorMismatch | NodeAffinityMismatch => {
            "node(s) didn't match Pod's node affinity/selector".into()
        }
        UntoleratedTaint if !r.message.is_empty() => format!("node(s) had {}", r.message),
        UntoleratedTaint => "node(s) had untolerated taint".into(),
        HostPortConflict => "node(s) didn't have free ports for the requested pod ports".into(),
        PodAffinityUnsatisfied => "node(s) didn't match pod affinity rules".into(),
        PodAntiAffinityConflict => "node(s) didn't match pod anti-affinity rules".into(),
        TopologySpreadViolated => "node(s) didn't match pod topology spread constraints".into(),
        NodeUnschedulable => "node(s) were unschedulable".into(),
        MaxSizeReached => "max node group size reached".into(),
        ResourceLimitReached => {
            let which = r.message.split(':').next().unwrap_or_default();
            format!("exceeded quota: {which}")
        }
        MaxNodesTotalReached => "max total nodes in cluster reached".into(),
        NodeGroupBackedOff => "in backoff after failed scale-up".into(),
        FleetBackoff => "in backoff after failed scale-up in another cluster".into(),
        NodeGroupUnhealthy | NodeGroupSizeUnexplained => "not ready for scale-up".into(),
        NoTemplate => "no node template".into(),
        ScaleUpCapReached => "max nodes per scale-up reached".into(),
        ClusterUnhealthy => "cluster is unhealthy".into(),
        other => other.as_str().into(),
    }
}
