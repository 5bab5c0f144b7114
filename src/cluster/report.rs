//! `ClusterReport`: what one cluster's runner tells the hub after every pass, published on a
//! `watch` channel. The fleet view, the HTTP API and the demo's terminal read it; nothing
//! reads a runner's insides.

use std::collections::VecDeque;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;

use super::ClusterName;
use super::cache::CacheStats;
use super::metrics::Counters;
use super::outcome::{Action, Entry, MachineDeletionKind, Outcome};
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::plan::{Outcome as PodOutcome, Plan};
use crate::engine::policy::SharedFailure;

/// Recent actions kept per cluster.
const RECENT: usize = 50;
/// Passes kept in a cluster's history (sparklines): 20 minutes at the default scan interval.
const HISTORY: usize = 120;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Building the client and asking what the cluster serves.
    Connecting,
    /// Listing every watched kind before the first pass.
    Syncing,
    Running,
    /// The runner stopped on an error; the hub restarts it after a backoff.
    Failed,
    /// Its configuration cannot be used (a context not in its kubeconfig, a kubeconfig that
    /// is not one): tried again after a backoff, and not counted as an unhealthy cluster.
    Misconfigured,
    /// Removed from fleet.toml, disabled, or the hub is shutting down.
    Stopped,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Connecting => "connecting",
            Phase::Syncing => "syncing",
            Phase::Running => "running",
            Phase::Failed => "failed",
            Phase::Misconfigured => "misconfigured",
            Phase::Stopped => "stopped",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    pub name: ClusterName,
    /// Where the cluster is configured: `fleet.toml`, or the inventory object of the
    /// management cluster it was found in (`Secret fleet/prod-east`).
    pub source: String,
    pub phase: Phase,
    /// Why the phase is what it is (an error, what is being waited for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub since: Timestamp,
    pub dry_run: bool,
    /// Times the hub restarted this cluster's runner after a failure.
    pub restarts: u32,
    pub cache: CacheStats,
    pub nodes: u64,
    pub ready_nodes: u64,
    pub unready_nodes: u64,
    /// Pods waiting for a node, as the last pass saw them.
    pub pending_pods: usize,
    /// Of those, pods no scale-up can help now.
    pub stuck_pods: usize,
    pub node_groups: usize,
    /// Upstream's cluster health, from its nodes alone: unready nodes within
    /// `ok_total_unready_count` / `max_total_unready_percentage`. The API's `healthy` is the
    /// hub's one verdict (`state`), which this is part of.
    pub nodes_healthy: bool,
    /// Why the nodes make the cluster unhealthy, when they do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_health_reason: Option<String>,
    /// Each node group as the last pass saw it.
    pub groups: Vec<GroupSummary>,
    /// Nodes and pending pods over the last passes, oldest first.
    pub history: VecDeque<Sample>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_pass: Option<PassSummary>,
    /// When the runner last looked at the cluster: a pass, or a pass skipped because
    /// nothing changed since a settled one (then `last_pass` is older).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub looked_at: Option<Timestamp>,
    /// What the hub found wrong with the cluster when it connected (a Machine API served
    /// only in versions it cannot read): it holds until the hub connects again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<crate::model::Warning>,
    /// The last failed call or action, and when: what a user should look at first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<TimedMessage>,
    /// The latest actions, newest last.
    pub recent: VecDeque<Happening>,
    /// Actions recorded since the runner started (so a reader can tell which are new).
    pub actions_total: u64,
    /// The last plan in full, for the API.
    #[serde(skip)]
    pub plan: Option<Arc<Plan>>,
    /// The effective settings of the last pass, each with its source.
    #[serde(skip)]
    pub settings: Option<Arc<crate::cluster::layering::EffectiveSettings>>,
    /// Running totals for `/metrics`.
    #[serde(skip)]
    pub counters: Counters,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupSummary {
    pub id: NodeGroupId,
    pub eligible: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    pub ready: u64,
    pub registered: u64,
    pub upcoming: u64,
    pub healthy: bool,
    /// Why the group is set aside, unhealthy or backed off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_until: Option<Timestamp>,
    /// Another cluster's capacity failure the group is backed off for (its own backoff
    /// wins), so that a reader of this cluster sees whose failure holds it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet_backoff: Option<SharedFailure>,
}

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub at: Timestamp,
    pub nodes: u64,
    pub ready_nodes: u64,
    pub pending_pods: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassSummary {
    pub at: Timestamp,
    /// The whole pass: the engine, the writes and the status.
    pub took_ms: f64,
    /// The engine's decision alone.
    pub engine_ms: f64,
    /// How long the pass waited for its turn on the fleet's pool before it began.
    pub queued_ms: f64,
    pub scale_ups: usize,
    pub scale_downs: usize,
    /// Why the pass did not run the engine, if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// What in the pass's plan waits on the clock, so that the next scan runs a pass even
    /// if nothing changes (an unneeded node's timer, a node still coming); absent when the
    /// cluster is settled and scans skip passes until something changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits_on: Option<String>,
    /// Why the pass ran rather than being skipped as idle: `changed: <kinds>`, `due`,
    /// `refresh`, ... (`idle::Cause`).
    pub cause: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimedMessage {
    pub at: Timestamp,
    pub message: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Happening {
    pub at: Timestamp,
    #[serde(flatten)]
    pub entry: Entry,
}

impl ClusterReport {
    pub fn new(name: ClusterName, dry_run: bool, now: Timestamp) -> Self {
        ClusterReport {
            name,
            source: "fleet.toml".into(),
            phase: Phase::Connecting,
            message: None,
            since: now,
            dry_run,
            restarts: 0,
            cache: CacheStats::default(),
            nodes: 0,
            ready_nodes: 0,
            unready_nodes: 0,
            pending_pods: 0,
            stuck_pods: 0,
            node_groups: 0,
            nodes_healthy: false,
            nodes_health_reason: None,
            groups: Vec::new(),
            history: VecDeque::new(),
            last_pass: None,
            looked_at: None,
            warnings: Vec::new(),
            last_error: None,
            recent: VecDeque::new(),
            actions_total: 0,
            plan: None,
            settings: None,
            counters: Counters::default(),
        }
    }

    /// Moves to `phase` (keeping `since` when the phase does not change).
    pub fn set_phase(&mut self, phase: Phase, message: Option<String>, now: Timestamp) {
        if self.phase != phase {
            self.since = now;
        }
        self.phase = phase;
        self.message = message;
    }

    /// Takes in what a pass planned.
    pub fn record_plan(&mut self, plan: Arc<Plan>) {
        let h = &plan.health.cluster;
        self.nodes_healthy = h.healthy;
        self.nodes_health_reason = h.reason.clone();
        self.ready_nodes = h.ready;
        self.unready_nodes = h.unready;
        self.nodes = h.ready + h.unready + h.not_started + h.deleting;
        self.pending_pods = plan.pending_pods.len();
        self.stuck_pods = plan
            .pending_pods
            .iter()
            .filter(|p| p.outcome == PodOutcome::NoScaleUp)
            .count();
        self.node_groups = plan.node_groups.iter().filter(|g| g.eligible).count();
        self.groups = group_summaries(&plan);
        self.counters.record_plan(&plan);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Sample {
            at: plan.now,
            nodes: self.nodes,
            ready_nodes: self.ready_nodes,
            pending_pods: self.pending_pods,
        });
        self.plan = Some(plan);
    }

    /// Remembers actions that did something or failed (skips are in the plan already).
    pub fn record_entries(&mut self, entries: &[Entry], now: Timestamp) {
        for entry in entries {
            self.counters.record_entry(entry, now);
            if let Outcome::Failed { error, .. } = &entry.outcome {
                let message = format!("{}: {error}", describe_action(&entry.action));
                self.record_error(message, now);
            }
            if matches!(entry.outcome, Outcome::Skipped { .. }) && !self.dry_run {
                continue;
            }
            self.actions_total += 1;
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(Happening {
                at: now,
                entry: entry.clone(),
            });
        }
    }

    pub fn record_error(&mut self, message: String, now: Timestamp) {
        self.last_error = Some(TimedMessage { at: now, message });
    }

    /// The newest action, for one-line views.
    pub fn last_action(&self) -> Option<&Happening> {
        self.recent.back()
    }
}

fn group_summaries(plan: &Plan) -> Vec<GroupSummary> {
    plan.node_groups
        .iter()
        .map(|g| {
            let health = plan.health.node_groups.iter().find(|h| h.id == g.id);
            let reason = g
                .reason
                .clone()
                .or_else(|| health.and_then(|h| h.backoff_reason.clone()))
                .or_else(|| health.and_then(|h| h.reason.clone()));
            GroupSummary {
                id: g.id.clone(),
                eligible: g.eligible,
                min: g.min,
                max: g.max,
                target: g.target,
                ready: g.ready,
                registered: g.registered,
                upcoming: g.upcoming,
                healthy: health.is_none_or(|h| h.healthy),
                reason,
                backoff_until: health.and_then(|h| h.backoff_until),
                fleet_backoff: health.and_then(|h| h.fleet_backoff.clone()),
            }
        })
        .collect()
}

/// One line for an action: `scale up MachineSet.machine.openshift.io/ns/a 2 -> 3`.
pub fn describe_action(action: &Action) -> String {
    match action {
        Action::ScaleUp { group, from, to } => format!("scale up {group} {from} -> {to}"),
        Action::FixTargetSize { group, from, to } => {
            format!("lower the target of {group} {from} -> {to}")
        }
        Action::DeleteMachine { machine, why, .. } => {
            let why = match why {
                MachineDeletionKind::Failed => "failed",
                MachineDeletionKind::Unregistered => "never registered",
            };
            format!("delete machine {machine} ({why})")
        }
        Action::MarkNode { node, .. } => format!("taint node {node} for removal"),
        Action::RemoveNode { node, .. } => format!("remove node {node}"),
        Action::WriteRequestStatus {
            request,
            conditions,
            ..
        } => {
            let written: Vec<String> = conditions
                .iter()
                .map(|c| format!("{}={}", c.type_, c.status.as_str()))
                .collect();
            format!(
                "write {} to ProvisioningRequest {request}",
                written.join(", ")
            )
        }
        Action::DeleteRequest { request, .. } => {
            format!("delete ProvisioningRequest {request}")
        }
        Action::ClearStaleTaint { node } => format!("clear a stale taint on node {node}"),
        Action::FinishDecrement { machine, .. } => {
            format!("finish the interrupted removal of machine {machine}")
        }
    }
}

/// One line for an action and how it went.
pub fn describe_entry(entry: &Entry) -> String {
    match &entry.outcome {
        Outcome::Done { detail } => detail.clone(),
        Outcome::Skipped { reason } => {
            format!("{} skipped: {reason}", describe_action(&entry.action))
        }
        Outcome::Failed { error, .. } => {
            format!("{} failed: {error}", describe_action(&entry.action))
        }
    }
}
