//! Which unneeded nodes go now: those unneeded long enough, never below a group's min or a
//! cluster-wide min limit, empty nodes up to `max_scale_down_parallelism` and nodes that need
//! a drain up to `max_drain_parallelism` (one at a time by default, as seed 001 says),
//! counting deletions already under way. A node at risk (its pods need more disruptions of a
//! PodDisruptionBudget than it allows at once) comes after the others, as upstream's
//! `sortByRisk`, and drains alone: with no other drain under way or started in the pass.

use jiff::Timestamp;

use super::ScaleDownInput;
use super::removal::Removable;
use crate::cluster_state::NodeReadiness;
use crate::limits::{NodeUsage, SkippedByLimit};
use crate::plan::{NotRemovable, ScaleDownAction};
use crate::reason::ReasonCode;
use fleetscaler_model::duration::format_go_duration;

/// An unneeded node with its timing.
pub(super) struct Unneeded {
    pub removable: Removable,
    pub since: Timestamp,
    pub removable_at: Timestamp,
}

/// What the cluster keeps against its min limits.
struct Totals {
    cores: u64,
    memory_gib: f64,
    gpus: std::collections::BTreeMap<String, u64>,
}

fn totals(input: &ScaleDownInput) -> Totals {
    let mut t = Totals {
        cores: 0,
        memory_gib: 0.0,
        gpus: Default::default(),
    };
    for (i, u) in input.cluster.usage.iter().enumerate() {
        if input.cluster.readiness[i] != NodeReadiness::Deleting {
            t.cores += u.cores;
            t.memory_gib += u.memory as f64 / (1u64 << 30) as f64;
            if let Some((kind, count)) = &u.gpu {
                *t.gpus.entry(kind.to_string()).or_default() += count;
            }
        }
    }
    t
}

/// Which min limit removing a node would break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MinLimit {
    Cores,
    Memory,
    Gpus,
}

/// Why removing a node with `usage` would break a min limit, if it would.
fn below_min(input: &ScaleDownInput, t: &Totals, u: &NodeUsage) -> Option<(MinLimit, String)> {
    let s = input.settings;
    if t.cores.saturating_sub(u.cores) < s.cores.min {
        return Some((
            MinLimit::Cores,
            format!(
                "cores would fall to {} below the min {}",
                t.cores - u.cores.min(t.cores),
                s.cores.min
            ),
        ));
    }
    let mem_after = t.memory_gib - u.memory as f64 / (1u64 << 30) as f64;
    if mem_after < s.memory_gib.min as f64 {
        return Some((
            MinLimit::Memory,
            format!(
                "memory would fall to {mem_after:.1}GiB below the min {}GiB",
                s.memory_gib.min
            ),
        ));
    }
    let (kind, count) = u.gpu.as_ref()?;
    let limit = s.gpus.iter().find(|g| g.gpu_type == **kind)?;
    let have = t.gpus.get(kind.as_ref()).copied().unwrap_or(0);
    (have.saturating_sub(*count) < limit.min).then(|| {
        (
            MinLimit::Gpus,
            format!(
                "{kind} GPUs would fall to {} below the min {}",
                have.saturating_sub(*count),
                limit.min
            ),
        )
    })
}

/// What `select` decided: the removals, the nodes that stay, and how often a cores or
/// memory min kept a node (upstream's skipped scale-down events).
pub(super) struct Selection {
    pub actions: Vec<ScaleDownAction>,
    pub stays: Vec<NotRemovable>,
    pub skipped: SkippedByLimit,
}

pub(super) fn select(input: &ScaleDownInput, unneeded: &[Unneeded]) -> Selection {
    let mut due: Vec<&Unneeded> = unneeded
        .iter()
        .filter(|u| u.removable_at <= input.now)
        .collect();
    // Empty nodes first, then those not at risk, then the longest unneeded.
    due.sort_by_key(|u| {
        let r = &u.removable;
        (!r.moves.is_empty(), r.at_risk.is_some(), u.since)
    });
    let mut budgets = Budgets::new(input);
    let mut selection = Selection {
        actions: Vec::new(),
        stays: Vec::new(),
        skipped: SkippedByLimit::default(),
    };
    for u in due {
        let node = &input.snapshot.nodes[u.removable.candidate.node];
        let usage = &input.cluster.usage[u.removable.candidate.node];
        match budgets.why_not(input, u, usage, &mut selection.skipped) {
            Some((code, message)) => selection.stays.push(NotRemovable {
                node: node.name.clone(),
                code,
                message,
            }),
            None => {
                budgets.take(u, usage);
                selection.actions.push(action(input, u));
            }
        }
    }
    selection
}

/// What this pass may still remove: deletions, drains, each group's room above its min, and
/// the cluster's totals against its min limits.
struct Budgets {
    deletions: u64,
    drains: u64,
    /// Drains under way from earlier passes, and started in this one.
    draining: u64,
    room: Vec<u64>,
    totals: Totals,
}

impl Budgets {
    fn new(input: &ScaleDownInput) -> Self {
        let s = input.settings;
        let deleting: Vec<usize> = (0..input.snapshot.nodes.len())
            .filter(|&i| input.cluster.readiness[i] == NodeReadiness::Deleting)
            .collect();
        let deletions = s
            .max_scale_down_parallelism
            .saturating_sub(deleting.len() as u64);
        // Drains still running count against the drain budget.
        let draining = deleting
            .iter()
            .filter(|&&i| input.drain_rules_moving(i))
            .count() as u64;
        let room = input
            .groups
            .groups
            .iter()
            .zip(&input.cluster.groups)
            .map(|(g, gs)| gs.target.saturating_sub(gs.deleting).saturating_sub(g.min))
            .collect();
        Budgets {
            deletions,
            drains: s
                .max_drain_parallelism
                .saturating_sub(draining)
                .min(deletions),
            draining,
            room,
            totals: totals(input),
        }
    }

    /// Why `u` cannot go in this pass, if it cannot; a min limit that keeps it is counted.
    fn why_not(
        &self,
        input: &ScaleDownInput,
        u: &Unneeded,
        usage: &NodeUsage,
        skipped: &mut SkippedByLimit,
    ) -> Option<(ReasonCode, String)> {
        let c = &u.removable.candidate;
        if self.room[c.group] == 0 {
            let min = input.groups.groups[c.group].min;
            return Some((
                ReasonCode::NodeGroupMinSizeReached,
                format!("its group is at its min size {min}"),
            ));
        }
        if let Some((limit, why)) = below_min(input, &self.totals, usage) {
            match limit {
                MinLimit::Cores => skipped.cpu += 1,
                MinLimit::Memory => skipped.memory += 1,
                MinLimit::Gpus => {}
            }
            return Some((ReasonCode::MinimalResourceLimitExceeded, why));
        }
        if let Some(risk) = &u.removable.at_risk
            && self.draining > 0
        {
            return Some((
                ReasonCode::DeletionBudgetReached,
                format!("{risk}: a node at risk drains alone, after the drains under way"),
            ));
        }
        let empty = u.removable.moves.is_empty();
        if self.deletions == 0 || (!empty && self.drains == 0) {
            let which = if self.deletions == 0 {
                "max_scale_down_parallelism"
            } else {
                "max_drain_parallelism"
            };
            return Some((
                ReasonCode::DeletionBudgetReached,
                format!("{which} is used up in this pass; it goes in a later one"),
            ));
        }
        None
    }

    fn take(&mut self, u: &Unneeded, usage: &NodeUsage) {
        self.room[u.removable.candidate.group] -= 1;
        self.deletions -= 1;
        if !u.removable.moves.is_empty() {
            self.drains -= 1;
            self.draining += 1;
        }
        if u.removable.at_risk.is_some() {
            self.drains = 0;
        }
        let t = &mut self.totals;
        t.cores -= usage.cores.min(t.cores);
        t.memory_gib -= usage.memory as f64 / (1u64 << 30) as f64;
        if let Some((kind, count)) = &usage.gpu
            && let Some(have) = t.gpus.get_mut(kind.as_ref())
        {
            *have = have.saturating_sub(*count);
        }
    }
}

fn action(input: &ScaleDownInput, u: &Unneeded) -> ScaleDownAction {
    let c = &u.removable.candidate;
    let node = &input.snapshot.nodes[c.node];
    let s = input.settings;
    let options = &input.groups.groups[c.group].options;
    let wait = if c.ready {
        options.unneeded_time(s)
    } else {
        options.unready_time(s)
    };
    let (threshold, on) = (c.threshold, c.measured_on);
    let moves = &u.removable.moves;
    let pods = if moves.is_empty() {
        "no pod needs to move".to_string()
    } else {
        format!("its {} pod(s) fit on other nodes", moves.len())
    };
    let state = if c.ready { "" } else { "unready and " };
    let risk = u.removable.at_risk.as_ref().map_or(String::new(), |r| {
        format!(
            "; at risk: {r}, so it drains alone and each refused eviction is retried until max_pod_eviction_time ({})",
            format_go_duration(s.max_pod_eviction_time)
        )
    });
    ScaleDownAction {
        node: node.name.clone(),
        node_group: input.groups.groups[c.group].id.clone(),
        empty: moves.is_empty(),
        unready: !c.ready,
        pods: moves.clone(),
        reason: format!(
            "{state}unneeded since {} (utilization {:.2} ({on}) ≤ {threshold}) for at least {}; {pods}{risk}",
            u.since,
            c.utilization,
            format_go_duration(wait)
        ),
    }
}
