//! Cluster state: what every node and machine is (ready, unready, not started, unregistered,
//! long unregistered, failed, deleting), how each node group stands against its target,
//! the scale-ups in flight and their timeouts, backoffs, and the health gates.
//!
//! It runs before any scaling decision. It may correct targets and delete machines in the
//! same pass (a timed-out scale-up is corrected at once, not after a second wait; a machine
//! that reports failure is deleted at once), and hands scale-up the corrected targets, the
//! nodes really coming up, and the groups that must not grow.

mod provisioning;
#[cfg(test)]
mod tests;

use fleetscaler_model::Warning;
use jiff::Timestamp;

use super::limits::NodeUsage;
use super::nodegroups::{NodeGroup, NodeGroups};
use super::plan::{
    ClusterHealth, FixTargetSize, GroupHealth, Health, InFlight, MachineDeletion, TimedOut,
};
use super::reason::{ReasonCode, Unfit};
use super::settings::Settings;
use super::state::{EngineState, add};
use super::unready_resources;
use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::node::Node;

/// After this long a ToBeDeleted taint is stale (upstream's MaxCloudProviderNodeDeletionTime).
pub const STALE_DELETION_TAINT: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// A registered node, as the gates count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeReadiness {
    Ready,
    /// Not ready, past `max_node_startup_time`.
    Unready,
    /// Not ready yet, within `max_node_startup_time` of its creation.
    NotStarted,
    /// Being removed (deletion timestamp, the autoscaler's taint, or its machine going).
    Deleting,
}

/// One node group after this pass's corrections.
#[derive(Clone, Debug, Default)]
pub struct GroupState {
    /// `spec.replicas` once this pass's corrections are applied.
    pub target: u64,
    pub ready: u64,
    pub unready: u64,
    pub not_started: u64,
    pub deleting: u64,
    pub unregistered: u64,
    pub long_unregistered: u64,
    pub failed: u64,
    /// Nodes scale-up may count on: not started, unregistered, and not yet created; none while
    /// the group is backed off.
    pub upcoming: u64,
    pub in_flight: Option<InFlight>,
    pub healthy: bool,
    pub health_reason: Option<String>,
    /// Why the group gets no scale-up now.
    pub block: Option<Unfit>,
    /// Why none of its nodes may be removed now.
    pub scale_down_block: Option<String>,
}

impl GroupState {
    /// Registered nodes that are not being removed.
    pub fn registered(&self) -> u64 {
        self.ready + self.unready + self.not_started
    }
}

pub struct ClusterState {
    /// Per snapshot node.
    pub readiness: Vec<NodeReadiness>,
    /// Per snapshot node: whether it should have GPUs and advertises none yet.
    pub gpus_pending: Vec<bool>,
    /// Per snapshot node: what it counts for against the cluster's limits.
    pub usage: Vec<NodeUsage>,
    pub groups: Vec<GroupState>,
    pub health: Health,
    pub fix_target_size: Vec<FixTargetSize>,
    pub delete_failed: Vec<MachineDeletion>,
    pub delete_unregistered: Vec<MachineDeletion>,
    /// The scale-ups that timed out in this pass.
    pub timed_out: Vec<TimedOut>,
    pub warnings: Vec<Warning>,
}

impl ClusterState {
    pub fn healthy(&self) -> bool {
        self.health.cluster.healthy
    }

    /// Why the cluster is unhealthy (empty when it is not).
    pub fn unhealthy_reason(&self) -> String {
        self.health.cluster.reason.clone().unwrap_or_default()
    }
}

/// Assesses the cluster and updates the engine's memory of it.
pub fn assess(
    snapshot: &ClusterSnapshot,
    groups: &NodeGroups,
    state: &mut EngineState,
    settings: &Settings,
    now: Timestamp,
) -> ClusterState {
    state.reset_old_backoffs(now, settings);
    let (gpus_pending, usage) = unready_resources::assess(snapshot, groups);
    let readiness: Vec<NodeReadiness> = snapshot
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| node_readiness(n, i, snapshot, groups, gpus_pending[i], settings, now))
        .collect();
    let mut cs = ClusterState {
        readiness: Vec::new(),
        gpus_pending: Vec::new(),
        usage,
        groups: Vec::new(),
        health: Health::default(),
        fix_target_size: Vec::new(),
        delete_failed: Vec::new(),
        delete_unregistered: Vec::new(),
        timed_out: Vec::new(),
        warnings: Vec::new(),
    };
    let mode = if cluster_healthy(&readiness, settings) {
        provisioning::Mode::Full
    } else {
        provisioning::Mode::UnregisteredOnly
    };
    for g in &groups.groups {
        let gs = provisioning::track(
            snapshot, groups, g, &readiness, state, settings, now, &mut cs, mode,
        );
        cs.groups.push(gs);
    }
    cs.readiness = readiness;
    cs.warnings.extend(unready_resources::gpus_still_missing(
        snapshot,
        groups,
        &cs.readiness,
        &gpus_pending,
    ));
    cs.gpus_pending = gpus_pending;
    state
        .failed_machines
        .retain(|m| snapshot.machines.iter().any(|x| x.key.to_string() == *m));
    for (g, gs) in groups.groups.iter().zip(cs.groups.iter_mut()) {
        group_health(g, gs, state, settings, now);
    }
    cs.health = Health {
        cluster: cluster_health(&cs, settings),
        node_groups: groups
            .groups
            .iter()
            .zip(&cs.groups)
            .map(|(g, gs)| report(g, gs, state, now))
            .collect(),
    };
    cs
}

fn node_readiness(
    node: &Node,
    index: usize,
    snapshot: &ClusterSnapshot,
    groups: &NodeGroups,
    gpus_pending: bool,
    settings: &Settings,
    now: Timestamp,
) -> NodeReadiness {
    let machine_going =
        groups.machine_of_node[index].is_some_and(|m| snapshot.machines[m].deleting);
    // A group's own `maxnodestartuptime` applies to its nodes only (upstream's
    // `updateReadinessStats` lets it leak to the nodes it reads next: not copied).
    let startup_time = groups.group_of_node[index].map_or(settings.max_node_startup_time, |g| {
        groups.groups[g].options.startup_time(settings)
    });
    // A ToBeDeleted taint older than 5 minutes is left over from an interrupted removal.
    let tainted = match node.to_be_deleted_at {
        Some(Some(at)) => add(at, STALE_DELETION_TAINT) > now,
        Some(None) => true,
        None => false,
    };
    if node.deleting || tainted || machine_going {
        NodeReadiness::Deleting
    } else if node.is_ready() && !settings.has_startup_taint(node) && !gpus_pending {
        // A node with a startup taint left, or whose GPUs are not advertised yet, is still
        // starting, whatever its condition says.
        NodeReadiness::Ready
    } else if node.created.is_some_and(|c| add(c, startup_time) > now) {
        NodeReadiness::NotStarted
    } else {
        NodeReadiness::Unready
    }
}

/// Upstream's node-group health: unhealthy when the ready nodes fall short of what the group
/// should have (target less nodes still coming) by more than the unready thresholds allow.
fn group_health(
    g: &NodeGroup,
    gs: &mut GroupState,
    state: &EngineState,
    settings: &Settings,
    now: Timestamp,
) {
    let coming = gs.in_flight.as_ref().map_or(0, |f| f.nodes);
    let min_nodes = gs
        .target
        .saturating_sub(gs.long_unregistered)
        .saturating_sub(coming);
    let (healthy, reason) = if gs.registered() == 0 {
        (
            min_nodes == 0,
            format!(
                "no registered node, but a target of {} with none coming up",
                gs.target
            ),
        )
    } else {
        let short = min_nodes.saturating_sub(gs.ready);
        let threshold = settings.max_total_unready_percentage / 100.0 * gs.registered() as f64;
        let unhealthy = short > settings.ok_total_unready_count && short as f64 > threshold;
        (
            !unhealthy,
            format!("{short} of the {min_nodes} nodes it should have are not ready"),
        )
    };
    gs.healthy = healthy;
    gs.health_reason = (!healthy).then_some(reason);
    let id = &g.id;
    gs.block = if let Some(b) = state.backed_off(id, now) {
        Some(Unfit::new(
            ReasonCode::NodeGroupBackedOff,
            format!("in backoff until {} after: {}", b.until, b.reason),
        ))
    } else if !healthy {
        gs.health_reason
            .clone()
            .map(|r| Unfit::new(ReasonCode::NodeGroupUnhealthy, r))
    } else {
        gs.block.take()
    };
}

/// Unhealthy when more nodes are unready than both thresholds allow.
fn cluster_healthy(readiness: &[NodeReadiness], settings: &Settings) -> bool {
    let unready = readiness
        .iter()
        .filter(|r| **r == NodeReadiness::Unready)
        .count() as u64;
    let threshold = settings.max_total_unready_percentage / 100.0 * readiness.len() as f64;
    !(unready > settings.ok_total_unready_count && unready as f64 > threshold)
}

fn cluster_health(cs: &ClusterState, settings: &Settings) -> ClusterHealth {
    let count = |r: NodeReadiness| cs.readiness.iter().filter(|x| **x == r).count() as u64;
    let (ready, unready, not_started, deleting) = (
        count(NodeReadiness::Ready),
        count(NodeReadiness::Unready),
        count(NodeReadiness::NotStarted),
        count(NodeReadiness::Deleting),
    );
    let registered = ready + unready + not_started + deleting;
    let healthy = cluster_healthy(&cs.readiness, settings);
    ClusterHealth {
        healthy,
        ready,
        unready,
        not_started,
        unregistered: cs.groups.iter().map(|g| g.unregistered).sum(),
        long_unregistered: cs.groups.iter().map(|g| g.long_unregistered).sum(),
        deleting,
        reason: (!healthy).then(|| {
            format!(
                "{unready} of {registered} nodes are unready: more than {} and more than {}%; \
                 no scale-up or scale-down until the cluster recovers",
                settings.ok_total_unready_count, settings.max_total_unready_percentage
            )
        }),
    }
}

fn report(g: &NodeGroup, gs: &GroupState, state: &EngineState, now: Timestamp) -> GroupHealth {
    let backoff = state.backed_off(&g.id, now);
    GroupHealth {
        id: g.id.clone(),
        healthy: gs.healthy,
        ready: gs.ready,
        unready: gs.unready,
        not_started: gs.not_started,
        deleting: gs.deleting,
        unregistered: gs.unregistered,
        long_unregistered: gs.long_unregistered,
        reason: gs
            .health_reason
            .clone()
            .or_else(|| gs.scale_down_block.clone()),
        backoff_until: backoff.map(|b| b.until),
        backoff_reason: backoff.map(|b| b.reason.clone()),
        backoff_kind: backoff.map(|b| b.kind),
        fleet_backoff: None,
        scale_up_in_flight: gs.in_flight.clone(),
    }
}
