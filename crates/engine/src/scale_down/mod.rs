//! Scale-down: which nodes are unneeded (underutilized, and every pod on them can go
//! elsewhere), since when, and which of them go now.
//!
//! Unneeded tracking runs every healthy pass, even in cooldown, so a node's clock keeps
//! running; a node that stops being unneeded starts over. Nothing is removed in an unhealthy
//! cluster, within `scale_down_delay_after_add` of a scale-up (seed 001), after a recent
//! deletion or failure, or in a pass that scales up.

mod controllers;
mod drain;
mod eligibility;
mod removal;
mod rollout;
mod select;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use crate::simulator::Simulator;

pub use self::drain::DrainCheck;
use super::cluster_state::ClusterState;
use super::limits::SkippedByLimit;
use super::nodegroups::NodeGroups;
use super::plan::{NotRemovable, ScaleDownAction, UnneededNode};
use super::settings::Settings;
use super::state::{EngineState, add};
use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::duration::format_go_duration;
use fleetscaler_model::pod::Pod;

pub struct ScaleDownInput<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub groups: &'a NodeGroups,
    pub cluster: &'a ClusterState,
    pub settings: &'a Settings,
    pub state: &'a EngineState,
    pub now: Timestamp,
    /// Whether this pass scales up.
    pub scales_up: bool,
    /// Pending pods that fit existing nodes, and those nodes: they will be scheduled there.
    pub expected: Vec<(&'a Pod, std::sync::Arc<str>)>,
    /// The pods on each node (`simulator::pods_by_node`), as the base simulation read them.
    pub pods_on: &'a [Vec<&'a Pod>],
}

#[derive(Default)]
pub struct ScaleDownOutput {
    pub unneeded: Vec<UnneededNode>,
    pub actions: Vec<ScaleDownAction>,
    pub not_removable: Vec<NotRemovable>,
    pub paused: Option<String>,
    /// When the pause ends by itself (a cooldown), if it does.
    pub paused_until: Option<Timestamp>,
    /// The new unneeded-since times, for the engine's memory.
    pub unneeded_since: BTreeMap<String, Timestamp>,
    /// Nodes due for removal that a cores or memory min kept.
    pub skipped: SkippedByLimit,
}

/// The scale-down of a pass, on the pass's base simulation (`Simulator::base`), which it
/// leaves changed.
pub fn plan(input: &ScaleDownInput, sim: &mut Simulator) -> ScaleDownOutput {
    if !input.settings.scale_down_enabled {
        return paused_only("scale-down is disabled (scale_down_enabled = false)".into());
    }
    if !input.cluster.healthy() {
        return paused_only(format!(
            "the cluster is unhealthy: {}",
            input.cluster.unhealthy_reason()
        ));
    }
    let pods_on = input.pods_on;
    let (mut candidates, mut not_removable) = eligibility::candidates(input, pods_on);
    // Empty nodes first, then those unneeded before, then the least used.
    candidates.sort_by(|a, b| {
        let key = |c: &eligibility::Candidate| {
            let name = &input.snapshot.nodes[c.node].name;
            (
                !pods_on[c.node].iter().all(|p| p.is_daemonset() || p.mirror),
                !input.state.unneeded_since.contains_key(&**name),
            )
        };
        key(a)
            .cmp(&key(b))
            .then(a.utilization.total_cmp(&b.utilization))
            .then(a.node.cmp(&b.node))
    });
    let mut removal = removal::Removal::new(input, pods_on, sim);
    let mut unneeded = Vec::new();
    for c in candidates {
        let node = &input.snapshot.nodes[c.node];
        match removal.try_remove(c.clone(), &node.name, &pods_on[c.node]) {
            Ok(r) => unneeded.push(timed(input, r)),
            Err(stay) => not_removable.push(stay),
        }
    }
    let (paused, paused_until) = cooldown(input).unzip();
    let paused_until = paused_until.flatten();
    let mut skipped = SkippedByLimit::default();
    let actions = if paused.is_none() {
        let selection = select::select(input, &unneeded);
        not_removable.extend(selection.stays);
        skipped = selection.skipped;
        selection.actions
    } else {
        Vec::new()
    };
    not_removable.sort_by(|a, b| a.node.cmp(&b.node));
    ScaleDownOutput {
        unneeded_since: unneeded
            .iter()
            .map(|u| {
                (
                    input.snapshot.nodes[u.removable.candidate.node]
                        .name
                        .to_string(),
                    u.since,
                )
            })
            .collect(),
        unneeded: unneeded.iter().map(|u| report(input, u)).collect(),
        actions,
        not_removable,
        paused,
        paused_until,
        skipped,
    }
}

impl ScaleDownInput<'_> {
    /// Whether a node still runs pods that must move elsewhere (a drain under way).
    fn drain_rules_moving(&self, node: usize) -> bool {
        let rules = drain::DrainRules::new(self.snapshot, self.settings, self.now);
        let name = &self.snapshot.nodes[node].name;
        self.snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.as_ref() == Some(name) && !p.is_terminal())
            .any(|p| rules.classify(p) == drain::Drain::Move)
    }
}

fn paused_only(why: String) -> ScaleDownOutput {
    ScaleDownOutput {
        paused: Some(why),
        ..ScaleDownOutput::default()
    }
}

/// Keeps the node's unneeded clock if it was already running.
fn timed(input: &ScaleDownInput, removable: removal::Removable) -> select::Unneeded {
    let c = &removable.candidate;
    let name = &input.snapshot.nodes[c.node].name;
    let since = input
        .state
        .unneeded_since
        .get(&**name)
        .copied()
        .filter(|t| *t <= input.now)
        .unwrap_or(input.now);
    let options = &input.groups.groups[c.group].options;
    let wait = if c.ready {
        options.unneeded_time(input.settings)
    } else {
        options.unready_time(input.settings)
    };
    select::Unneeded {
        removable_at: add(since, wait),
        removable,
        since,
    }
}

fn report(input: &ScaleDownInput, u: &select::Unneeded) -> UnneededNode {
    let c = &u.removable.candidate;
    UnneededNode {
        node: input.snapshot.nodes[c.node].name.clone(),
        node_group: input.groups.groups[c.group].id.clone(),
        since: u.since,
        utilization: (c.utilization * 1000.0).round() / 1000.0,
        removable_at: u.removable_at,
    }
}

/// Why nothing is removed in this pass, if so, and until when if a delay runs out.
fn cooldown(input: &ScaleDownInput) -> Option<(String, Option<Timestamp>)> {
    if input.scales_up {
        return Some(("this pass scales up; scale-down waits".into(), None));
    }
    let s = input.settings;
    let st = input.state;
    let check = |last: Option<Timestamp>, delay: Duration, what: &str, key: &str| {
        let last = last?;
        let until = add(last, delay);
        (until > input.now).then(|| {
            let why = format!(
                "{what} at {last}: no scale-down within {key} ({}), until {until}",
                format_go_duration(delay)
            );
            (why, Some(until))
        })
    };
    check(
        st.last_scale_up,
        s.scale_down_delay_after_add,
        "scale-up",
        "scale_down_delay_after_add",
    )
    .or_else(|| {
        check(
            st.last_scale_down_delete,
            s.scale_down_delay_after_delete,
            "node removal",
            "scale_down_delay_after_delete",
        )
    })
    .or_else(|| {
        check(
            st.last_scale_down_failure,
            s.scale_down_delay_after_failure,
            "failed scale-down",
            "scale_down_delay_after_failure",
        )
    })
}
