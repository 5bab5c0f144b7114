//! One node group's provisioning: failed machines, scale-ups in flight and their timeouts,
//! and machines that never got a node.
//!
//! Seed 004's failure modes, each handled in the pass that sees it: a machine that reports
//! failure backs its group off and is deleted at once; a scale-up whose nodes do not register
//! within `max_node_provision_time` backs the group off and its target is corrected right
//! away (not after a second wait); after a restart with no memory, nodes asked for and not
//! registered are timed from their machines' creation, so the timeout still fires.

use jiff::Timestamp;

use super::{ClusterState, GroupState, NodeReadiness};
use crate::nodegroups::{NodeGroup, NodeGroups};
use crate::plan::{FixTargetSize, InFlight, MachineDeletion, TimedOut};
use crate::reason::{FailureKind, ReasonCode, Unfit};
use crate::settings::Settings;
use crate::state::{EngineState, ScaleUpIncrement, add};
use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::duration::format_go_duration;

/// The group's machines without a node, by what they are.
#[derive(Default)]
struct Machines {
    alive: u64,
    unregistered: Vec<usize>,
    long_unregistered: Vec<usize>,
    failed: Vec<usize>,
}

fn sort_machines(
    snapshot: &ClusterSnapshot,
    groups: &NodeGroups,
    g: &NodeGroup,
    settings: &Settings,
    now: Timestamp,
) -> Machines {
    let mut out = Machines::default();
    for &mi in &g.machines {
        let m = &snapshot.machines[mi];
        if m.deleting {
            continue;
        }
        out.alive += 1;
        if groups.node_of_machine[mi].is_some() {
            continue;
        }
        if m.has_failed() {
            out.failed.push(mi);
        } else if m
            .created
            .is_some_and(|c| add(c, g.options.provision_time(settings)) <= now)
        {
            out.long_unregistered.push(mi);
        } else {
            out.unregistered.push(mi);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub(super) fn track(
    snapshot: &ClusterSnapshot,
    groups: &NodeGroups,
    g: &NodeGroup,
    readiness: &[NodeReadiness],
    state: &mut EngineState,
    settings: &Settings,
    now: Timestamp,
    cs: &mut ClusterState,
    mode: Mode,
) -> GroupState {
    let mut gs = GroupState {
        target: g.target,
        ..GroupState::default()
    };
    for &ni in &g.nodes {
        match readiness[ni] {
            NodeReadiness::Ready => gs.ready += 1,
            NodeReadiness::Unready => gs.unready += 1,
            NodeReadiness::NotStarted => gs.not_started += 1,
            NodeReadiness::Deleting => gs.deleting += 1,
        }
    }
    let machines = sort_machines(snapshot, groups, g, settings, now);
    gs.unregistered = machines.unregistered.len() as u64;
    gs.long_unregistered = machines.long_unregistered.len() as u64;
    gs.failed = machines.failed.len() as u64;
    let mut t = Tracker {
        snapshot,
        g,
        state,
        settings,
        now,
        cs,
        gs: &mut gs,
    };
    // Everything asked for that is not ready (or unready) yet: not started, without a node,
    // failed, or never created. Scale-ups on record are matched against this.
    let missing = g.target.saturating_sub(machines.alive);
    let waiting = machines.unregistered.len() as u64 + machines.long_unregistered.len() as u64;
    let coming = t.gs.not_started + waiting + machines.failed.len() as u64 + missing;
    t.reconcile(coming, &machines);
    let mut deleted = Vec::new();
    let mut fixed = 0;
    if mode == Mode::Full {
        t.delete_failed(&machines.failed);
        if let Some((nodes, since)) = t.expired() {
            let open = coming - machines.failed.len() as u64;
            (deleted, fixed) = t.time_out(nodes.min(open), since, &machines, missing);
        }
    }
    t.delete_long_unregistered(&machines.long_unregistered, &deleted);
    t.report_in_flight();
    let backed_off = state.backed_off(&g.id, now).is_some();
    let still_waiting = machines
        .unregistered
        .iter()
        .filter(|m| !deleted.contains(m))
        .count() as u64;
    gs.upcoming = if backed_off {
        0
    } else {
        gs.not_started + still_waiting + (missing - fixed)
    };
    explain_size(g, &mut gs);
    gs
}

/// How much of the provisioning work a pass may do.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Full,
    /// An unhealthy cluster: only machines that never registered in time are removed, and
    /// nothing else is recorded, so the next healthy pass finds the rest as it was.
    UnregisteredOnly,
}

struct Tracker<'a> {
    snapshot: &'a ClusterSnapshot,
    g: &'a NodeGroup,
    state: &'a mut EngineState,
    settings: &'a Settings,
    now: Timestamp,
    cs: &'a mut ClusterState,
    gs: &'a mut GroupState,
}

impl Tracker<'_> {
    fn increments(&mut self) -> &mut Vec<ScaleUpIncrement> {
        self.state.scale_ups.entry(self.g.id.clone()).or_default()
    }

    /// Marks a machine for deletion, lowering the target unless the group is at its min (then
    /// the group replaces the machine instead).
    fn delete(&mut self, mi: usize, cause: FailureKind, reason: String) -> MachineDeletion {
        let lower = self.gs.target > self.g.min;
        if lower {
            self.gs.target -= 1;
        }
        let suffix = if lower {
            ""
        } else {
            "; the group is at its min size, so it gets a new machine"
        };
        MachineDeletion {
            machine: self.snapshot.machines[mi].key.clone(),
            node_group: self.g.id.clone(),
            lower_replicas: lower,
            reason: format!("{reason}{suffix}"),
            cause: Some(cause),
        }
    }

    fn delete_failed(&mut self, failed: &[usize]) {
        for &mi in failed {
            let m = &self.snapshot.machines[mi];
            let what = m
                .failure
                .as_deref()
                .map_or_else(|| "phase Failed".to_string(), str::to_string);
            let key = m.key.to_string();
            let action = self.delete(
                mi,
                FailureKind::MachineFailed,
                format!("machine {key} reports a failure: {what}"),
            );
            self.cs.delete_failed.push(action);
            if self.state.failed_machines.insert(key.clone()) {
                let reason = format!("machine {key} failed: {what}");
                self.state.back_off(
                    &self.g.id,
                    self.now,
                    FailureKind::MachineFailed,
                    reason,
                    self.settings,
                );
                if let Some(b) = self.state.backoff.get_mut(&self.g.id) {
                    b.machine = Some(key.clone());
                }
            }
            consume_oldest(self.increments(), 1);
        }
    }

    /// Matches the scale-ups on record with the nodes still coming: registered ones are done;
    /// nodes coming with no record (a restart, or someone else's scale-up) are each timed from
    /// their machine's creation, and those without a machine yet from now.
    fn reconcile(&mut self, coming: u64, machines: &Machines) {
        let recorded: u64 = self.increments().iter().map(|i| i.nodes).sum();
        if recorded > coming {
            consume_oldest(self.increments(), recorded - coming);
            return;
        }
        let mut extra = coming - recorded;
        let snapshot = self.snapshot;
        let mut created: Vec<Timestamp> = machines
            .unregistered
            .iter()
            .chain(&machines.long_unregistered)
            .filter_map(|&mi| snapshot.machines[mi].created)
            .collect();
        created.sort();
        let now = self.now;
        let mut rebuilt: Vec<ScaleUpIncrement> = Vec::new();
        // The newest machines are the ones the record does not cover.
        for t in created
            .into_iter()
            .rev()
            .take(usize::try_from(extra).unwrap_or(usize::MAX))
        {
            rebuilt.push(ScaleUpIncrement {
                nodes: 1,
                requested_at: t,
                reconstructed: true,
            });
            extra -= 1;
        }
        if extra > 0 {
            rebuilt.push(ScaleUpIncrement {
                nodes: extra,
                requested_at: now,
                reconstructed: true,
            });
        }
        let increments = self.increments();
        increments.extend(rebuilt);
        increments.sort_by_key(|i| i.requested_at);
    }

    /// Nodes of the scale-ups whose deadline has passed, and when the oldest was asked for.
    fn expired(&mut self) -> Option<(u64, Timestamp)> {
        let provision = self.g.options.provision_time(self.settings);
        let now = self.now;
        let increments = self.increments();
        let expired: Vec<&ScaleUpIncrement> = increments
            .iter()
            .filter(|i| add(i.requested_at, provision) <= now)
            .collect();
        let nodes: u64 = expired.iter().map(|i| i.nodes).sum();
        let since = expired.first().map(|i| i.requested_at)?;
        (nodes > 0).then_some((nodes, since))
    }

    /// A scale-up did not register in time: back the group off, and bring the target down by
    /// the nodes that did not come, in this pass: their machines (oldest first) are deleted,
    /// and those never created are taken off the target.
    fn time_out(
        &mut self,
        nodes: u64,
        since: Timestamp,
        machines: &Machines,
        missing: u64,
    ) -> (Vec<usize>, u64) {
        let timed_out = TimedOut {
            node_group: self.g.id.clone(),
            nodes,
            since,
            within: format_go_duration(self.g.options.provision_time(self.settings)),
        };
        let why = timed_out.to_string();
        self.cs.timed_out.push(timed_out);
        self.state.back_off(
            &self.g.id,
            self.now,
            FailureKind::Timeout,
            format!("scale-up timed out: {why}"),
            self.settings,
        );
        let snapshot = self.snapshot;
        let mut waiting: Vec<usize> = machines
            .unregistered
            .iter()
            .chain(&machines.long_unregistered)
            .copied()
            .collect();
        waiting.sort_by_key(|&mi| snapshot.machines[mi].created);
        let deleted: Vec<usize> = waiting
            .into_iter()
            .take(usize::try_from(nodes).unwrap_or(usize::MAX))
            .collect();
        for &mi in &deleted {
            let action = self.delete(
                mi,
                FailureKind::Timeout,
                format!("scale-up timed out: {why}"),
            );
            self.cs.delete_unregistered.push(action);
        }
        // Machines never created come off the target, but never below the group's min.
        let room = self.gs.target.saturating_sub(self.g.min);
        let fixed = (nodes - deleted.len() as u64).min(missing).min(room);
        if fixed > 0 {
            let from = self.gs.target;
            self.gs.target -= fixed;
            self.cs.fix_target_size.push(FixTargetSize {
                node_group: self.g.id.clone(),
                from,
                to: self.gs.target,
                reason: format!("scale-up timed out: {why}; {fixed} machine(s) were never created"),
                cause: FailureKind::Timeout,
            });
        }
        consume_oldest(self.increments(), nodes);
        (deleted, fixed)
    }

    fn delete_long_unregistered(&mut self, long: &[usize], already: &[usize]) {
        let within = format_go_duration(self.g.options.provision_time(self.settings));
        for &mi in long.iter().filter(|mi| !already.contains(mi)) {
            let created = self.snapshot.machines[mi]
                .created
                .map_or("?".to_string(), |c| c.to_string());
            let action = self.delete(
                mi,
                FailureKind::Unregistered,
                format!("no node registered within {within} (machine created {created})"),
            );
            self.cs.delete_unregistered.push(action);
            consume_oldest(self.increments(), 1);
        }
    }

    fn report_in_flight(&mut self) {
        let provision = self.g.options.provision_time(self.settings);
        let id = self.g.id.clone();
        let increments = self.state.scale_ups.get(&id).cloned().unwrap_or_default();
        self.gs.in_flight = increments.first().map(|first| InFlight {
            nodes: increments.iter().map(|i| i.nodes).sum(),
            since: first.requested_at,
            deadline: add(first.requested_at, provision),
            reconstructed: increments.iter().any(|i| i.reconstructed),
        });
        if increments.is_empty() {
            self.state.scale_ups.remove(&id);
        }
    }
}

/// No scaling of a group whose size differs from its target for a reason the engine cannot
/// explain: nodes coming that no scale-up on record asked for, or more nodes than the target
/// with none being removed.
fn explain_size(g: &NodeGroup, gs: &mut GroupState) {
    if let Some(f) = gs.in_flight.as_ref().filter(|f| f.reconstructed) {
        gs.block = Some(Unfit::new(
            ReasonCode::NodeGroupSizeUnexplained,
            format!(
                "target {} is above its {} registered node(s) with no scale-up on record; waiting for the nodes, or for the provision timeout at {}",
                gs.target,
                gs.registered(),
                f.deadline
            ),
        ));
    }
    if gs.registered() > gs.target && gs.deleting == 0 {
        let why = format!(
            "{} has {} registered nodes but a target of {}, and none is being removed",
            g.id,
            gs.registered(),
            gs.target
        );
        gs.block = Some(Unfit::new(
            ReasonCode::NodeGroupSizeUnexplained,
            why.clone(),
        ));
        gs.scale_down_block = Some(why);
    }
}

/// Removes `nodes` from the oldest increments (they registered, or will never come).
fn consume_oldest(increments: &mut Vec<ScaleUpIncrement>, mut nodes: u64) {
    while nodes > 0 && !increments.is_empty() {
        let take = increments[0].nodes.min(nodes);
        increments[0].nodes -= take;
        nodes -= take;
        if increments[0].nodes == 0 {
            increments.remove(0);
        }
    }
}
