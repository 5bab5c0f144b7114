//! From a pass (the plan, and what the executor did with it) to upstream's events.
//!
//! Reasons, objects and types are upstream's (`core/scaleup/orchestrator/executor.go`,
//! `processors/status/eventing_scale_up_processor.go`, `core/scaledown/actuation`,
//! `clusterstate`, `static_autoscaler.go`); messages follow upstream's wording where it has
//! one. Actions are reported from the executor's entries, never from the plan alone:
//! an action the executor skipped (dry run, not the leader, a plan overtaken by the cluster)
//! makes no event, because events say what the autoscaler did and `kubectl describe pod`
//! must not claim a scale-up that never happened. What the engine observed (an unhealthy
//! cluster, a timed-out scale-up, a group the fleet backed off, pods that cannot be helped)
//! is reported in any case. `FleetBackoff` is the one reason of fleetscaler's own: upstream
//! sees no other cluster.
//!
//! Order matters to the rate limit: status ConfigMap events first, then nodes, then pods.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState as Hasher;

use super::pod_reasons::not_triggered;
use super::{EventSpec, EventType, ObjectRef};
use crate::cluster::outcome::{Action, Entry, MachineDeletionKind, Outcome};
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::plan::{self, Plan};
use crate::engine::reason::ReasonCode;
use crate::model::ClusterSnapshot;
use crate::model::pod::PodId;

/// The events of one pass, in the order they should be recorded.
pub fn events_for(
    plan: &Plan,
    entries: &[Entry],
    snapshot: &ClusterSnapshot,
    status_ref: &ObjectRef,
) -> Vec<EventSpec> {
    gather(plan, entries, snapshot, status_ref, true)
}

/// The events of actions that ended between passes (a scale-down finishing), without the
/// observations of the plan they came from (recorded with that pass already).
pub fn events_for_entries(
    plan: &Plan,
    entries: &[Entry],
    snapshot: &ClusterSnapshot,
    status_ref: &ObjectRef,
) -> Vec<EventSpec> {
    gather(plan, entries, snapshot, status_ref, false)
}

fn gather(
    plan: &Plan,
    entries: &[Entry],
    snapshot: &ClusterSnapshot,
    status_ref: &ObjectRef,
    with_plan: bool,
) -> Vec<EventSpec> {
    let mut cx = Context {
        plan,
        status: status_ref,
        cluster: Vec::new(),
        nodes: Vec::new(),
        pods: Vec::new(),
        requests: Vec::new(),
    };
    if with_plan {
        cx.cluster_observations();
    }
    for e in entries {
        cx.entry(e);
    }
    if with_plan {
        cx.scale_up_pods(entries);
    }
    let Context {
        mut cluster,
        nodes,
        pods,
        requests,
        ..
    } = cx;
    cluster.extend(super::requests::with_uids(requests, snapshot));
    cluster.extend(resolve_nodes(nodes, snapshot));
    cluster.extend(resolve_pods(pods, snapshot));
    cluster
}

/// Events gathered in one pass; node and pod events wait for their uids, looked up in one
/// sweep of the snapshot at the end.
struct Context<'a> {
    plan: &'a Plan,
    status: &'a ObjectRef,
    cluster: Vec<EventSpec>,
    nodes: Vec<(Arc<str>, EventType, &'static str, String)>,
    pods: Vec<(PodId, EventType, &'static str, String)>,
    /// Events on ProvisioningRequests, their uids filled in from the snapshot.
    requests: Vec<EventSpec>,
}

impl Context<'_> {
    fn on_status(&mut self, event_type: EventType, reason: &'static str, message: String) {
        self.cluster.push(EventSpec {
            object: self.status.clone(),
            event_type,
            reason,
            message,
        });
    }

    fn on_node(
        &mut self,
        node: &Arc<str>,
        t: EventType,
        reason: &'static str,
        m: impl Into<String>,
    ) {
        self.nodes.push((node.clone(), t, reason, m.into()));
    }

    fn on_pod(&mut self, pod: &PodId, t: EventType, reason: &'static str, m: impl Into<String>) {
        self.pods.push((pod.clone(), t, reason, m.into()));
    }

    fn max_of(&self, group: &NodeGroupId) -> u64 {
        self.plan
            .node_groups
            .iter()
            .find(|g| g.id == *group)
            .and_then(|g| g.max)
            .unwrap_or(0)
    }

    /// What the engine saw, whatever was written: an unhealthy cluster, the node limit,
    /// scale-ups that timed out.
    fn cluster_observations(&mut self) {
        let plan = self.plan;
        let health = &plan.health.cluster;
        if !health.healthy {
            let why = health.reason.as_deref().unwrap_or("too many unready nodes");
            self.on_status(
                EventType::Warning,
                "ClusterUnhealthy",
                format!("Cluster is unhealthy: {why}"),
            );
        }
        let at_max = plan
            .pending_pods
            .iter()
            .flat_map(|p| &p.reasons)
            .any(|r| r.code == ReasonCode::MaxNodesTotalReached);
        if at_max {
            let max = plan.limits.max_nodes_total.max.unwrap_or(0);
            self.on_status(
                EventType::Warning,
                "MaxNodesTotalReached",
                format!("Max total nodes in cluster reached: {max}"),
            );
        }
        // One event per group that timed out, in upstream's words, from the engine's record.
        for t in &plan.timed_out {
            self.on_status(
                EventType::Warning,
                "ScaleUpTimedOut",
                format!(
                    "Nodes added to group {} failed to register: {t}",
                    t.node_group
                ),
            );
        }
        self.fleet_backoffs();
    }

    /// Groups backed off for another cluster's capacity failure (upstream, one cluster's
    /// autoscaler, has no such event). The message says nothing of this pass, so while the
    /// failure holds it is the same event every pass, which the filter writes once.
    fn fleet_backoffs(&mut self) {
        let plan = self.plan;
        for g in &plan.health.node_groups {
            if let Some(f) = &g.fleet_backoff {
                self.on_status(
                    EventType::Warning,
                    "FleetBackoff",
                    format!(
                        "Node group {} backed off: {}; until {}",
                        g.id,
                        f.what(),
                        f.until
                    ),
                );
            }
        }
    }

    fn entry(&mut self, e: &Entry) {
        if matches!(e.outcome, Outcome::Skipped { .. }) {
            return;
        }
        let failed = match &e.outcome {
            Outcome::Failed { error, .. } => Some(error.as_str()),
            _ => None,
        };
        match &e.action {
            Action::ScaleUp { group, from, to } => self.scale_up(group, *from, *to, failed),
            Action::FixTargetSize { group, from, to } => {
                if let Some(error) = failed {
                    self.on_status(
                        EventType::Warning,
                        "FailedToRevertScaleUp",
                        format!(
                            "Failed to lower group {group} from {from} to {to} after a timed-out scale-up: {error}"
                        ),
                    );
                }
            }
            Action::DeleteMachine {
                group,
                machine,
                why,
                ..
            } => self.delete_machine(group, machine, *why, failed),
            Action::MarkNode { node, empty, .. } => self.mark_node(node, *empty, failed),
            Action::RemoveNode {
                node,
                empty,
                evicted,
                ..
            } => self.remove_node(node, *empty, evicted, failed),
            Action::WriteRequestStatus {
                request,
                api_version,
                conditions,
            } => {
                if failed.is_none() {
                    self.requests.extend(super::requests::written(
                        request,
                        api_version,
                        conditions,
                    ));
                }
            }
            Action::DeleteRequest { .. }
            | Action::ClearStaleTaint { .. }
            | Action::FinishDecrement { .. } => {}
        }
    }

    fn scale_up(&mut self, group: &NodeGroupId, from: u64, to: u64, failed: Option<&str>) {
        let max = self.max_of(group);
        self.on_status(
            EventType::Normal,
            "ScaledUpGroup",
            format!("Scale-up: setting group {group} size to {to} instead of {from} (max: {max})"),
        );
        match failed {
            Some(error) => self.on_status(
                EventType::Warning,
                "FailedToScaleUpGroup",
                format!("Scale-up failed for group {group}: {error}"),
            ),
            None => self.on_status(
                EventType::Normal,
                "ScaledUpGroup",
                format!("Scale-up: group {group} size set to {to} instead of {from} (max: {max})"),
            ),
        }
    }

    fn delete_machine(
        &mut self,
        group: &NodeGroupId,
        machine: &crate::model::ObjectKey,
        why: MachineDeletionKind,
        failed: Option<&str>,
    ) {
        let plan = self.plan;
        let list = match why {
            MachineDeletionKind::Unregistered => &plan.delete_unregistered,
            MachineDeletionKind::Failed => &plan.delete_failed_machines,
        };
        let reason = list
            .iter()
            .find(|d| d.machine == *machine)
            .map_or("", |d| d.reason.as_str());
        let (event_type, event_reason, message) = match (why, failed) {
            (MachineDeletionKind::Unregistered, None) => (
                EventType::Normal,
                "DeleteUnregistered",
                format!("Removed unregistered machine {machine} of group {group}: {reason}"),
            ),
            (MachineDeletionKind::Unregistered, Some(error)) => (
                EventType::Warning,
                "DeleteUnregisteredFailed",
                format!(
                    "Failed to remove unregistered machine {machine} of group {group}: {error}"
                ),
            ),
            (MachineDeletionKind::Failed, None) => (
                EventType::Warning,
                "ScaleUpFailed",
                format!("Failed adding a node to group {group}: {reason}; the machine is deleted"),
            ),
            (MachineDeletionKind::Failed, Some(error)) => (
                EventType::Warning,
                "ScaleUpFailed",
                format!(
                    "Failed adding a node to group {group}: {reason}; deleting the machine failed: {error}"
                ),
            ),
        };
        self.on_status(event_type, event_reason, message);
    }

    fn mark_node(&mut self, node: &Arc<str>, empty: bool, failed: Option<&str>) {
        if let Some(error) = failed {
            self.on_node(
                node,
                EventType::Warning,
                "ScaleDownFailed",
                format!("failed to mark the node as toBeDeleted/unschedulable: {error}"),
            );
            return;
        }
        let message = if empty {
            (
                "ScaleDownEmpty",
                format!("Scale-down: removing empty node {node}"),
            )
        } else {
            ("ScaleDown", self.removing_message(node))
        };
        self.on_status(EventType::Normal, message.0, message.1);
        self.on_node(
            node,
            EventType::Normal,
            "ScaleDown",
            "marked the node as toBeDeleted/unschedulable",
        );
    }

    /// `Scale-down: removing node X, utilization: 0.21, pods to reschedule: ns/a,ns/b`.
    fn removing_message(&self, node: &Arc<str>) -> String {
        let utilization = self
            .plan
            .unneeded
            .iter()
            .find(|u| u.node == *node)
            .map_or_else(
                || "unknown".to_string(),
                |u| format!("{:.2}", u.utilization),
            );
        let pods: Vec<String> = self
            .plan
            .scale_down
            .iter()
            .find(|a| a.node == *node)
            .map(|a| a.pods.iter().map(|m| m.pod.to_string()).collect())
            .unwrap_or_default();
        format!(
            "Scale-down: removing node {node}, utilization: {utilization}, pods to reschedule: {}",
            pods.join(",")
        )
    }

    fn remove_node(
        &mut self,
        node: &Arc<str>,
        empty: bool,
        evicted: &[PodId],
        failed: Option<&str>,
    ) {
        for pod in evicted {
            self.on_pod(
                pod,
                EventType::Normal,
                "ScaleDown",
                "deleting pod for node scale down",
            );
        }
        match (failed, empty) {
            (Some(error), true) => self.on_node(
                node,
                EventType::Warning,
                "ScaleDownFailed",
                format!("failed to delete empty node: {error}"),
            ),
            (Some(error), false) => self.on_node(
                node,
                EventType::Warning,
                "ScaleDownFailed",
                format!("failed to drain and delete node: {error}"),
            ),
            (None, _) => {
                let (reason, message) = if empty {
                    (
                        "ScaleDownEmpty",
                        format!("Scale-down: empty node {node} removed"),
                    )
                } else {
                    (
                        "ScaleDown",
                        format!("Scale-down: node {node} removed with drain"),
                    )
                };
                self.on_status(EventType::Normal, reason, message);
                self.on_node(
                    node,
                    EventType::Normal,
                    "ScaleDown",
                    "nodes removed by cluster autoscaler",
                );
            }
        }
    }

    /// `TriggeredScaleUp` on the pods of the scale-ups that were written; when no scale-up
    /// was tried this pass, `NotTriggerScaleUp` on the pods nothing can be done for (upstream
    /// leaves those for a pass without a scale-up attempt, too).
    fn scale_up_pods(&mut self, entries: &[Entry]) {
        let plan = self.plan;
        let mut attempted = false;
        let mut infos = Vec::new();
        let mut done_groups = Vec::new();
        for e in entries {
            if let Action::ScaleUp { group, from, to } = &e.action {
                match e.outcome {
                    Outcome::Done { .. } => {
                        attempted = true;
                        infos.push(format!(
                            "{{{group} {from}->{to} (max: {})}}",
                            self.max_of(group)
                        ));
                        done_groups.push(group);
                    }
                    Outcome::Failed { .. } => attempted = true,
                    Outcome::Skipped { .. } => {}
                }
            }
        }
        if !infos.is_empty() {
            let message = format!("pod triggered scale-up: [{}]", infos.join(" "));
            for a in plan
                .scale_up
                .iter()
                .filter(|a| done_groups.contains(&&a.node_group))
            {
                for pod in &a.pods {
                    self.on_pod(pod, EventType::Normal, "TriggeredScaleUp", message.clone());
                }
            }
        }
        if attempted {
            return;
        }
        for p in &plan.pending_pods {
            if p.outcome != plan::Outcome::NoScaleUp {
                continue;
            }
            if let Some(why) = not_triggered(&p.reasons) {
                self.on_pod(
                    &p.pod,
                    EventType::Normal,
                    "NotTriggerScaleUp",
                    format!("pod didn't trigger scale-up: {why}"),
                );
            }
        }
    }
}

fn resolve_nodes(
    wanted: Vec<(Arc<str>, EventType, &'static str, String)>,
    snapshot: &ClusterSnapshot,
) -> Vec<EventSpec> {
    if wanted.is_empty() {
        return Vec::new();
    }
    let names: HashSet<&str> = wanted.iter().map(|w| &*w.0).collect();
    let uids: HashMap<&str, Arc<str>> = snapshot
        .nodes
        .iter()
        .filter(|n| names.contains(&*n.name) && !n.uid.is_empty())
        .map(|n| (&*n.name, n.uid.clone()))
        .collect();
    wanted
        .into_iter()
        .map(|(name, event_type, reason, message)| EventSpec {
            object: ObjectRef::node(&name, uids.get(&*name).cloned()),
            event_type,
            reason,
            message,
        })
        .collect()
}

fn resolve_pods(
    wanted: Vec<(PodId, EventType, &'static str, String)>,
    snapshot: &ClusterSnapshot,
) -> Vec<EventSpec> {
    if wanted.is_empty() {
        return Vec::new();
    }
    // Every pod of the cluster is looked up (30,000 of a large one, every pass): foldhash,
    // several times faster than the default SipHash on these short keys.
    let ids: HashSet<&PodId, Hasher> = wanted.iter().map(|w| &w.0).collect();
    let uids: HashMap<&PodId, Arc<str>, Hasher> = snapshot
        .pods
        .iter()
        .filter(|p| ids.contains(&p.id) && !p.uid.is_empty())
        .map(|p| (&p.id, p.uid.clone()))
        .collect();
    wanted
        .into_iter()
        .map(|(id, event_type, reason, message)| EventSpec {
            object: ObjectRef::pod(&id.namespace, &id.name, uids.get(&id).cloned()),
            event_type,
            reason,
            message,
        })
        .collect()
}

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;
