//! Which unneeded nodes go now: those unneeded long enough, never below a group's min or a
//! cluster-wide min limit, empty nodes up to `max_scale_down_parallelism` and nodes that need
//! a drain up to `max_drain_parallelism` (one at a time by default, as seed 001 says),
//! counting deletions already under way.

use jiff::Timestamp;

use super::ScaleDownInput;
use super::removal::Removable;
use crate::cluster_state::NodeReadiness;
use crate::limits::NodeUsage;
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
    for (i, n) in input.snapshot.nodes.iter().enumerate() {
        if input.cluster.readiness[i] != NodeReadiness::Deleting {
            let u = NodeUsage::of_node(n);
            t.cores += u.cores;
            t.memory_gib += u.memory as f64 / (1u64 << 30) as f64;
            if let Some((kind, count)) = u.gpu {
                *t.gpus.entry(kind.to_string()).or_default() += count;
            }
        }
    }
    t
}

/// Why removing a node with `usage` would break a min limit, if it would.
fn below_min(input: &ScaleDownInput, t: &Totals, u: &NodeUsage) -> Option<String> {
    let s = input.settings;
    if t.cores.saturating_sub(u.cores) < s.cores.min {
        return Some(format!(
            "cores would fall to {} below the min {}",
            t.cores - u.cores.min(t.cores),
            s.cores.min
        ));
    }
    let mem_after = t.memory_gib - u.memory as f64 / (1u64 << 30) as f64;
    if mem_after < s.memory_gib.min as f64 {
        return Some(format!(
            "memory would fall to {mem_after:.1}GiB below the min {}GiB",
            s.memory_gib.min
        ));
    }
    let (kind, count) = u.gpu.as_ref()?;
    let limit = s.gpus.iter().find(|g| g.gpu_type == **kind)?;
    let have = t.gpus.get(kind.as_ref()).copied().unwrap_or(0);
    (have.saturating_sub(*count) < limit.min).then(|| {
        format!(
            "{kind} GPUs would fall to {} below the min {}",
            have.saturating_sub(*count),
            limit.min
        )
    })
}

pub(super) fn select(
    input: &ScaleDownInput,
    unneeded: &[Unneeded],
) -> (Vec<ScaleDownAction>, Vec<NotRemovable>) {
    let s = input.settings;
    let deleting: Vec<usize> = (0..input.snapshot.nodes.len())
        .filter(|&i| input.cluster.readiness[i] == NodeReadiness::Deleting)
        .collect();
    let mut budget = s
        .max_scale_down_parallelism
        .saturating_sub(deleting.len() as u64);
    // Drains still running count against the drain budget.
    let draining = deleting
        .iter()
        .filter(|&&i| input.drain_rules_moving(i))
        .count() as u64;
    let mut drains = s.max_drain_parallelism.saturating_sub(draining).min(budget);
    let mut room: Vec<u64> = input
        .groups
        .groups
        .iter()
        .zip(&input.cluster.groups)
        .map(|(g, gs)| gs.target.saturating_sub(gs.deleting).saturating_sub(g.min))
        .collect();
    let mut totals = totals(input);
    let mut due: Vec<&Unneeded> = unneeded
        .iter()
        .filter(|u| u.removable_at <= input.now)
        .collect();
    // Empty nodes first, then the longest unneeded.
    due.sort_by_key(|u| (!u.removable.moves.is_empty(), u.since));
    let mut actions = Vec::new();
    let mut stays = Vec::new();
    for u in due {
        let c = &u.removable.candidate;
        let node = &input.snapshot.nodes[c.node];
        let empty = u.removable.moves.is_empty();
        let stay = |code, message: String| NotRemovable {
            node: node.name.clone(),
            code,
            message,
        };
        let usage = NodeUsage::of_node(node);
        let min = input.groups.groups[c.group].min;
        if room[c.group] == 0 {
            stays.push(stay(
                ReasonCode::NodeGroupMinSizeReached,
                format!("its group is at its min size {min}"),
            ));
        } else if let Some(why) = below_min(input, &totals, &usage) {
            stays.push(stay(ReasonCode::MinimalResourceLimitExceeded, why));
        } else if budget == 0 || (!empty && drains == 0) {
            let which = if budget == 0 {
                "max_scale_down_parallelism"
            } else {
                "max_drain_parallelism"
            };
            stays.push(stay(
                ReasonCode::DeletionBudgetReached,
                format!("{which} is used up in this pass; it goes in a later one"),
            ));
        } else {
            room[c.group] -= 1;
            budget -= 1;
            if !empty {
                drains -= 1;
            }
            totals.cores -= usage.cores.min(totals.cores);
            totals.memory_gib -= usage.memory as f64 / (1u64 << 30) as f64;
            if let Some((kind, count)) = &usage.gpu
                && let Some(have) = totals.gpus.get_mut(kind.as_ref())
            {
                *have = have.saturating_sub(*count);
            }
            actions.push(action(input, u));
        }
    }
    (actions, stays)
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
    ScaleDownAction {
        node: node.name.clone(),
        node_group: input.groups.groups[c.group].id.clone(),
        empty: moves.is_empty(),
        pods: moves.clone(),
        reason: format!(
            "{state}unneeded since {} (utilization {:.2} ({on}) ≤ {threshold}) for at least {}; {pods}",
            u.since,
            c.utilization,
            format_go_duration(wait)
        ),
    }
}
