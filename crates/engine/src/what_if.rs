//! What a proposed change of settings would change in one cluster right now: the plan made
//! with the settings in force and the plan made with the proposed ones, from the same
//! snapshot, memory and time, compared decision by decision. Pure, like the rest of the
//! engine: the caller runs both passes (`compare` takes their plans).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::limits::LimitsReport;
use super::nodegroups::NodeGroupId;
use super::plan::{Outcome, Plan, PodExplanation};
use super::reason::{Reason, ReasonCode};
use fleetscaler_model::ObjectKey;
use fleetscaler_model::pod::PodId;

/// Pods listed per cluster, at most: a change can move thousands of pods, and the counts say
/// how many more there are.
pub const MAX_POD_CHANGES: usize = 100;
/// Node changes (removals, unneeded) listed per cluster, at most.
pub const MAX_NODE_CHANGES: usize = 200;

/// One decision that differs. `current` is what the settings in force decide now;
/// `proposed` what the proposed settings would.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Change {
    /// A scale-up that appears, goes, or changes size.
    #[serde(rename_all = "camelCase")]
    ScaleUp {
        node_group: NodeGroupId,
        current: Option<Resize>,
        proposed: Option<Resize>,
        reason: Why,
    },
    /// A node removed now in one plan and not in the other.
    #[serde(rename_all = "camelCase")]
    Removal {
        node: Arc<str>,
        node_group: NodeGroupId,
        current: bool,
        proposed: bool,
        reason: Why,
    },
    /// A node that starts or stops counting as unneeded (its timer towards removal).
    #[serde(rename_all = "camelCase")]
    Unneeded {
        node: Arc<str>,
        node_group: NodeGroupId,
        current: bool,
        proposed: bool,
        reason: Why,
    },
    /// A pending pod whose outcome changes.
    #[serde(rename_all = "camelCase")]
    Pod {
        pod: PodId,
        current: Fate,
        proposed: Fate,
        reason: Why,
    },
    /// A cluster-wide limit that holds scale-ups back in one plan and not in the other.
    #[serde(rename_all = "camelCase")]
    Limit {
        limit: String,
        current: bool,
        proposed: bool,
        reason: Why,
    },
    /// Scale-down paused in one plan and not the other (or for another reason).
    #[serde(rename_all = "camelCase")]
    ScaleDownPaused {
        current: Option<String>,
        proposed: Option<String>,
    },
    /// The cluster's health gate flips (unready thresholds).
    #[serde(rename_all = "camelCase")]
    ClusterHealth {
        current: bool,
        proposed: bool,
        reason: Why,
    },
    /// A machine deleted now (failed, never registered) in one plan and not the other.
    #[serde(rename_all = "camelCase")]
    MachineDeletion {
        machine: ObjectKey,
        node_group: NodeGroupId,
        current: bool,
        proposed: bool,
        reason: Why,
    },
}

/// Why the proposed plan decides as it does: its reasons, typed, where the plan has them
/// (a pod's, a node kept); else its own words (an action's reason, a timer). Written out as
/// one line, the reasons' `message (Code)` joined by `; `.
#[derive(Clone, Debug, PartialEq)]
pub enum Why {
    Reasons(Vec<Reason>),
    Said(String),
}

impl Why {
    fn said(text: impl Into<String>) -> Why {
        Why::Said(text.into())
    }

    /// The reason codes it carries (none when it is words only).
    pub fn codes(&self) -> Vec<ReasonCode> {
        match self {
            Why::Reasons(reasons) => reasons.iter().map(|r| r.code).collect(),
            Why::Said(_) => Vec::new(),
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Said(text) => f.write_str(text),
            Why::Reasons(reasons) => {
                for (i, r) in reasons.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{r}")?;
                }
                Ok(())
            }
        }
    }
}

impl Serialize for Why {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A group's target, from and to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Resize {
    pub from: u64,
    pub to: u64,
}

/// What happens to a pending pod in one plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fate {
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group: Option<NodeGroupId>,
}

/// The differences between two plans of one cluster, bounded.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    pub changes: Vec<Change>,
    /// Pods whose outcome changes, all of them (`changes` lists at most `MAX_POD_CHANGES`).
    pub pods_changed: usize,
    /// Changes left out of `changes` to keep the answer bounded.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_shown: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Every decision of `proposed` that differs from `current`, in a fixed order: cluster-wide
/// first (health, limits, scale-down paused), then scale-ups, pods, removals, machines.
pub fn compare(current: &Plan, proposed: &Plan) -> Diff {
    let mut diff = Diff::default();
    cluster_health(current, proposed, &mut diff.changes);
    limits(&current.limits, &proposed.limits, &mut diff.changes);
    if current.scale_down_paused != proposed.scale_down_paused {
        diff.changes.push(Change::ScaleDownPaused {
            current: current.scale_down_paused.clone(),
            proposed: proposed.scale_down_paused.clone(),
        });
    }
    scale_ups(current, proposed, &mut diff.changes);
    pods(current, proposed, &mut diff);
    let mut nodes = Vec::new();
    removals(current, proposed, &mut nodes);
    unneeded(current, proposed, &mut nodes);
    machines(current, proposed, &mut nodes);
    diff.not_shown += nodes.len().saturating_sub(MAX_NODE_CHANGES);
    nodes.truncate(MAX_NODE_CHANGES);
    diff.changes.extend(nodes);
    diff
}

fn cluster_health(current: &Plan, proposed: &Plan, out: &mut Vec<Change>) {
    let (c, p) = (&current.health.cluster, &proposed.health.cluster);
    if c.healthy != p.healthy {
        let why = if p.healthy { &c.reason } else { &p.reason };
        out.push(Change::ClusterHealth {
            current: c.healthy,
            proposed: p.healthy,
            reason: Why::said(why.clone().unwrap_or_else(|| "unready nodes".into())),
        });
    }
}

fn limits(current: &LimitsReport, proposed: &LimitsReport, out: &mut Vec<Change>) {
    let describe = |name: &str, used: f64, max: Option<u64>| match max {
        Some(m) => format!("{name}: {used} used of at most {m}"),
        None => format!("{name}: {used} used, no maximum"),
    };
    let pairs = [
        (
            "maxNodesTotal",
            &current.max_nodes_total,
            &proposed.max_nodes_total,
        ),
        ("cores", &current.cores, &proposed.cores),
        ("memoryGiB", &current.memory_gib, &proposed.memory_gib),
    ];
    for (name, c, p) in pairs {
        if c.reached != p.reached {
            out.push(Change::Limit {
                limit: name.into(),
                current: c.reached,
                proposed: p.reached,
                reason: Why::said(describe(name, p.used, p.max)),
            });
        }
    }
    let was: BTreeMap<&str, bool> = current
        .gpus
        .iter()
        .map(|g| (g.gpu_type.as_str(), g.reached))
        .collect();
    let now: BTreeMap<&str, bool> = proposed
        .gpus
        .iter()
        .map(|g| (g.gpu_type.as_str(), g.reached))
        .collect();
    for kind in was.keys().chain(now.keys()).collect::<BTreeSet<_>>() {
        let (c, p) = (was.get(kind) == Some(&true), now.get(kind) == Some(&true));
        if c != p {
            let entry = proposed.gpus.iter().find(|g| g.gpu_type == **kind);
            out.push(Change::Limit {
                limit: format!("gpus/{kind}"),
                current: c,
                proposed: p,
                reason: Why::said(entry.map_or(format!("no GPU limit for {kind}"), |g| {
                    describe(&format!("gpus/{kind}"), g.used as f64, Some(g.max))
                })),
            });
        }
    }
}

fn scale_ups(current: &Plan, proposed: &Plan, out: &mut Vec<Change>) {
    let before: BTreeMap<&NodeGroupId, Resize> = current
        .scale_up
        .iter()
        .map(|a| {
            (
                &a.node_group,
                Resize {
                    from: a.from,
                    to: a.to,
                },
            )
        })
        .collect();
    let after: BTreeMap<&NodeGroupId, (Resize, &str)> = proposed
        .scale_up
        .iter()
        .map(|a| {
            (
                &a.node_group,
                (
                    Resize {
                        from: a.from,
                        to: a.to,
                    },
                    &*a.reason,
                ),
            )
        })
        .collect();
    let groups: BTreeSet<&NodeGroupId> = before.keys().chain(after.keys()).copied().collect();
    for group in groups {
        let c = before.get(group).copied();
        let p = after.get(group).map(|(r, _)| *r);
        if c == p {
            continue;
        }
        let reason = match after.get(group) {
            Some((_, why)) => Why::said(*why),
            None => no_scale_up_reason(proposed, group),
        };
        out.push(Change::ScaleUp {
            node_group: group.clone(),
            current: c,
            proposed: p,
            reason,
        });
    }
}

/// Why a group gets no scale-up in a plan: what its pods were told about it.
fn no_scale_up_reason(plan: &Plan, group: &NodeGroupId) -> Why {
    plan.pending_pods
        .iter()
        .flat_map(|p| &p.reasons)
        .find(|r| r.node_group.as_ref() == Some(group))
        // The change names the group already.
        .map_or(Why::said("no pending pod needs it"), |r| {
            Why::Reasons(vec![Reason::new(r.code, r.message.clone())])
        })
}

fn fate(p: &PodExplanation) -> Fate {
    Fate {
        outcome: p.outcome,
        node_group: p.node_group.clone(),
    }
}

fn pods(current: &Plan, proposed: &Plan, diff: &mut Diff) {
    let before: BTreeMap<&PodId, &PodExplanation> =
        current.pending_pods.iter().map(|p| (&p.pod, p)).collect();
    for p in &proposed.pending_pods {
        let Some(c) = before.get(&p.pod) else {
            continue;
        };
        let (was, will) = (fate(c), fate(p));
        if was == will {
            continue;
        }
        diff.pods_changed += 1;
        if diff.pods_changed > MAX_POD_CHANGES {
            diff.not_shown += 1;
            continue;
        }
        diff.changes.push(Change::Pod {
            pod: p.pod.clone(),
            current: was,
            proposed: will,
            reason: pod_reason(c, p),
        });
    }
}

/// The proposed plan's account of a pod, leading with what is new to it (a limit reached
/// where there was none names the limit first).
fn pod_reason(current: &PodExplanation, proposed: &PodExplanation) -> Why {
    match proposed.outcome {
        Outcome::ScaleUp => Why::Said(format!(
            "a scale-up of {} is for it",
            proposed
                .node_group
                .as_ref()
                .map_or("a group".into(), |g| g.to_string())
        )),
        Outcome::FitsExisting | Outcome::FitsUpcoming => Why::Said(format!(
            "fits node {}",
            proposed.node.as_deref().unwrap_or("(unnamed)")
        )),
        Outcome::NoScaleUp | Outcome::BelowPriorityCutoff => {
            let known: BTreeSet<_> = current.reasons.iter().map(|r| r.code).collect();
            let mut reasons: Vec<&Reason> = proposed.reasons.iter().collect();
            reasons.sort_by_key(|r| known.contains(&r.code));
            if reasons.is_empty() {
                Why::said("no scale-up")
            } else {
                Why::Reasons(reasons.into_iter().take(3).cloned().collect())
            }
        }
    }
}

fn removals(current: &Plan, proposed: &Plan, out: &mut Vec<Change>) {
    let before: BTreeMap<&str, &NodeGroupId> = current
        .scale_down
        .iter()
        .map(|d| (&*d.node, &d.node_group))
        .collect();
    let after: BTreeMap<&str, (&NodeGroupId, &str)> = proposed
        .scale_down
        .iter()
        .map(|d| (&*d.node, (&d.node_group, &*d.reason)))
        .collect();
    for (node, (group, why)) in &after {
        if !before.contains_key(node) {
            out.push(Change::Removal {
                node: Arc::from(*node),
                node_group: (*group).clone(),
                current: false,
                proposed: true,
                reason: Why::said(*why),
            });
        }
    }
    for (node, group) in &before {
        if !after.contains_key(node) {
            out.push(Change::Removal {
                node: Arc::from(*node),
                node_group: (*group).clone(),
                current: true,
                proposed: false,
                reason: why_kept(proposed, node),
            });
        }
    }
}

/// Why a plan keeps a node: what it says about it.
fn why_kept(plan: &Plan, node: &str) -> Why {
    if let Some(n) = plan.not_removable.iter().find(|n| &*n.node == node) {
        return Why::Reasons(vec![Reason::new(n.code, n.message.clone())]);
    }
    if let Some(u) = plan.unneeded.iter().find(|u| &*u.node == node) {
        return Why::Said(format!(
            "unneeded since {}, removable at {}",
            u.since, u.removable_at
        ));
    }
    Why::Said(
        plan.scale_down_paused
            .clone()
            .unwrap_or_else(|| "not removed in this pass".into()),
    )
}

fn unneeded(current: &Plan, proposed: &Plan, out: &mut Vec<Change>) {
    let before: BTreeMap<&str, &NodeGroupId> = current
        .unneeded
        .iter()
        .map(|u| (&*u.node, &u.node_group))
        .collect();
    let after: BTreeMap<&str, (&NodeGroupId, f64, jiff::Timestamp)> = proposed
        .unneeded
        .iter()
        .map(|u| (&*u.node, (&u.node_group, u.utilization, u.removable_at)))
        .collect();
    for (node, (group, utilization, at)) in &after {
        if !before.contains_key(node) {
            out.push(Change::Unneeded {
                node: Arc::from(*node),
                node_group: (*group).clone(),
                current: false,
                proposed: true,
                reason: Why::Said(format!(
                    "utilization {:.0}%: removable at {at} if it stays unneeded",
                    utilization * 100.0
                )),
            });
        }
    }
    for (node, group) in &before {
        if !after.contains_key(node) {
            out.push(Change::Unneeded {
                node: Arc::from(*node),
                node_group: (*group).clone(),
                current: true,
                proposed: false,
                reason: why_kept(proposed, node),
            });
        }
    }
}

fn machines(current: &Plan, proposed: &Plan, out: &mut Vec<Change>) {
    let all = |p: &Plan| -> BTreeMap<ObjectKey, (NodeGroupId, String)> {
        p.delete_failed_machines
            .iter()
            .chain(&p.delete_unregistered)
            .map(|d| (d.machine.clone(), (d.node_group.clone(), d.reason.clone())))
            .collect()
    };
    let (before, after) = (all(current), all(proposed));
    for (machine, (group, why)) in &after {
        if !before.contains_key(machine) {
            out.push(Change::MachineDeletion {
                machine: machine.clone(),
                node_group: group.clone(),
                current: false,
                proposed: true,
                reason: Why::said(why.as_str()),
            });
        }
    }
    for (machine, (group, _)) in &before {
        if !after.contains_key(machine) {
            out.push(Change::MachineDeletion {
                machine: machine.clone(),
                node_group: group.clone(),
                current: true,
                proposed: false,
                reason: Why::said("not deleted in this pass with the proposed settings"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::fixtures::{group_node, machineset, node, pod, snapshot};
    use crate::{EngineState, Settings, run_once};
    use fleetscaler_model::ClusterSnapshot;

    fn plan(s: &ClusterSnapshot, settings: &Settings) -> Plan {
        run_once(
            s,
            &mut EngineState::default(),
            settings,
            Timestamp::UNIX_EPOCH,
        )
    }

    /// One full 4-core worker in group `workers` (max 5) and `n` pending 1-core pods.
    fn full_cluster(n: usize) -> ClusterSnapshot {
        let mut items = vec![machineset("workers", 1, 5, 1).json()];
        items.extend(group_node("w1", "workers", node("w1").cpu("4")));
        items.push(pod("filler").cpu("4").on("w1").json());
        items.extend((0..n).map(|i| pod(&format!("web-{i}")).cpu("1").unschedulable().json()));
        snapshot(items)
    }

    #[test]
    fn the_same_settings_change_nothing() {
        let s = full_cluster(6);
        let p = plan(&s, &Settings::default());
        assert_eq!(compare(&p, &p), Diff::default());
    }

    #[test]
    fn a_lower_max_nodes_total_caps_the_scale_up_and_names_the_limit() {
        let s = full_cluster(8);
        let current = plan(&s, &Settings::default());
        let proposed = plan(
            &s,
            &Settings {
                max_nodes_total: Some(2),
                ..Settings::default()
            },
        );
        let diff = compare(&current, &proposed);
        let kinds: Vec<&str> = diff
            .changes
            .iter()
            .map(|c| match c {
                Change::Limit { .. } => "limit",
                Change::ScaleUp { .. } => "scaleUp",
                Change::Pod { .. } => "pod",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds[..2], ["limit", "scaleUp"], "{diff:#?}");
        let Change::Limit {
            limit,
            proposed: reached,
            ..
        } = &diff.changes[0]
        else {
            unreachable!()
        };
        assert_eq!((limit.as_str(), *reached), ("maxNodesTotal", true));
        let Change::ScaleUp {
            current,
            proposed,
            reason,
            ..
        } = &diff.changes[1]
        else {
            unreachable!()
        };
        assert_eq!(*current, Some(Resize { from: 1, to: 3 }));
        assert_eq!(*proposed, Some(Resize { from: 1, to: 2 }));
        assert!(
            reason.to_string().contains("MaxNodesTotalReached"),
            "{reason}"
        );
        // Two nodes of four pods each were wanted; one is allowed: four pods lose theirs.
        assert_eq!(diff.pods_changed, 4);
        let Some(Change::Pod {
            proposed, reason, ..
        }) = diff.changes.last()
        else {
            unreachable!()
        };
        assert_eq!(proposed.outcome, Outcome::NoScaleUp);
        assert_eq!(
            reason.codes()[0],
            ReasonCode::MaxNodesTotalReached,
            "{reason}"
        );
        assert!(reason.to_string().starts_with("MachineSet"), "{reason}");
        assert!(
            reason.to_string().contains("(MaxNodesTotalReached)"),
            "{reason}"
        );
    }

    #[test]
    fn a_scale_up_that_goes_says_why() {
        let s = full_cluster(2);
        let current = plan(&s, &Settings::default());
        let proposed = plan(
            &s,
            &Settings {
                max_nodes_total: Some(1),
                ..Settings::default()
            },
        );
        let diff = compare(&current, &proposed);
        let up = diff
            .changes
            .iter()
            .find(|c| matches!(c, Change::ScaleUp { .. }))
            .unwrap();
        let Change::ScaleUp {
            proposed, reason, ..
        } = up
        else {
            unreachable!()
        };
        assert_eq!(*proposed, None);
        assert!(reason.to_string().contains("maxNodesTotal 1"), "{reason}");
        assert_eq!(diff.pods_changed, 2);
    }

    #[test]
    fn pods_listed_are_bounded_and_counted() {
        let mut items = vec![machineset("workers", 1, 5, 1).json()];
        items.extend(group_node("w1", "workers", node("w1").cpu("4")));
        items.extend((0..MAX_POD_CHANGES + 30).map(|i| {
            let p = pod(&format!("web-{i}")).cpu("1").priority(0);
            p.unschedulable().json()
        }));
        let s = snapshot(items);
        let current = plan(&s, &Settings::default());
        let proposed = plan(
            &s,
            &Settings {
                scale_down_enabled: false,
                pod_priority_threshold: 10,
                ..Settings::default()
            },
        );
        let diff = compare(&current, &proposed);
        assert_eq!(diff.pods_changed, MAX_POD_CHANGES + 30);
        let listed = diff
            .changes
            .iter()
            .filter(|c| matches!(c, Change::Pod { .. }))
            .count();
        assert_eq!(listed, MAX_POD_CHANGES);
        assert_eq!(diff.not_shown, 30);
        // Scale-down waits for the scale-up now; it would be off for another reason.
        let paused = diff.changes.iter().find_map(|c| match c {
            Change::ScaleDownPaused { current, proposed } => Some((current, proposed)),
            _ => None,
        });
        let (current, proposed) = paused.unwrap();
        assert!(current.as_deref().unwrap().contains("scales up"));
        assert!(proposed.as_deref().unwrap().contains("disabled"));
    }
}
