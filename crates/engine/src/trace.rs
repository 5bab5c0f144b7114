//! The engine's phases as `tracing` spans (`health`, `scale_up`, `scale_down`) with their
//! outcome as attributes and their reasons as span events: what a trace viewer shows under
//! a pass. Spans are not I/O: with traces off they are disabled and these functions only run
//! the phase. Lists are bounded ([`MAX_LISTED`] items, then a count), so thousands of
//! pending pods make a few dozen events.

use tracing::Span;
use tracing::field::Empty;

use super::cluster_state::ClusterState;
use super::plan::{Outcome, PodExplanation};
use super::scale_down::ScaleDownOutput;
use super::scale_up::ScaleUpOutput;

/// The target of the spans (and their events) that only traces carry. The hub's telemetry
/// routes this target to traces alone; it names the same string (`telemetry::TRACES`, whose
/// equality with this one a test of the hub checks), as the engine depends on nothing above it.
pub const TRACES: &str = "fleetscaler::traces";

/// A count as a span attribute: OTLP has signed integers only (unsigned ones would be
/// sent as text).
fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Pods, nodes or groups listed one event each; the rest are counted.
pub const MAX_LISTED: usize = 20;
/// Reasons listed per pod.
const MAX_REASONS: usize = 5;

/// Cluster state: readiness, health gates, corrections.
pub(super) fn health(assess: impl FnOnce() -> ClusterState) -> ClusterState {
    let span = tracing::info_span!(target: TRACES, "health",
        fleetscaler.cluster.healthy = Empty,
        fleetscaler.nodes.ready = Empty,
        fleetscaler.nodes.unready = Empty,
        fleetscaler.nodes.not_started = Empty,
        fleetscaler.nodes.unregistered = Empty,
        fleetscaler.nodes.long_unregistered = Empty,
        fleetscaler.nodes.deleting = Empty,
        fleetscaler.cluster.unhealthy_reason = Empty,
    );
    let cluster = span.in_scope(assess);
    if !span.is_disabled() {
        span.in_scope(|| record_health(&span, &cluster));
    }
    cluster
}

fn record_health(span: &Span, cluster: &ClusterState) {
    let c = &cluster.health.cluster;
    span.record("fleetscaler.cluster.healthy", c.healthy);
    span.record("fleetscaler.nodes.ready", int(c.ready));
    span.record("fleetscaler.nodes.unready", int(c.unready));
    span.record("fleetscaler.nodes.not_started", int(c.not_started));
    span.record("fleetscaler.nodes.unregistered", int(c.unregistered));
    span.record(
        "fleetscaler.nodes.long_unregistered",
        int(c.long_unregistered),
    );
    span.record("fleetscaler.nodes.deleting", int(c.deleting));
    if let Some(reason) = &c.reason {
        span.record("fleetscaler.cluster.unhealthy_reason", reason.as_str());
    }
    let unhealthy = cluster.health.node_groups.iter().filter(|g| !g.healthy);
    bounded(unhealthy, "more unhealthy node groups", |g| {
        tracing::info!(target: TRACES, node_group = %g.id, ready = int(g.ready), unready = int(g.unready),
            reason = g.reason.as_deref().unwrap_or_default(), "node group unhealthy");
    });
    for g in cluster
        .health
        .node_groups
        .iter()
        .filter(|g| g.backoff_until.is_some())
    {
        tracing::info!(target: TRACES, node_group = %g.id,
            reason = g.backoff_reason.as_deref().unwrap_or_default(), "node group backed off");
    }
    for f in &cluster.fix_target_size {
        tracing::info!(target: TRACES, node_group = %f.node_group, from = int(f.from), to = int(f.to),
            reason = f.reason.as_str(), "fix target size");
    }
    let deletions = cluster
        .delete_failed
        .iter()
        .chain(&cluster.delete_unregistered);
    for d in deletions {
        tracing::info!(target: TRACES, node_group = %d.node_group, machine = %d.machine,
            reason = d.reason.as_str(), "delete machine");
    }
}

/// Scale-up: each action with its reason, and the pending pods' outcomes.
pub(super) fn scale_up(plan: impl FnOnce() -> ScaleUpOutput) -> ScaleUpOutput {
    let span = tracing::info_span!(target: TRACES, "scale_up",
        fleetscaler.pods.pending = Empty,
        fleetscaler.pods.helped = Empty,
        fleetscaler.scale_ups = Empty,
        fleetscaler.nodes.added = Empty,
    );
    let out = span.in_scope(plan);
    if !span.is_disabled() {
        span.in_scope(|| record_scale_up(&span, &out));
    }
    out
}

fn record_scale_up(span: &Span, out: &ScaleUpOutput) {
    let helped = out
        .pods
        .iter()
        .filter(|p| p.outcome == Outcome::ScaleUp)
        .count();
    let added: u64 = out
        .actions
        .iter()
        .map(|a| a.to.saturating_sub(a.from))
        .sum();
    span.record("fleetscaler.pods.pending", int(out.pods.len()));
    span.record("fleetscaler.pods.helped", int(helped));
    span.record("fleetscaler.scale_ups", int(out.actions.len()));
    span.record("fleetscaler.nodes.added", int(added));
    for a in &out.actions {
        tracing::info!(target: TRACES, node_group = %a.node_group, from = int(a.from), to = int(a.to),
            pods = int(a.pods.len()), reason = a.reason.as_str(), "scale-up");
    }
    bounded(out.pods.iter(), "more pending pods", pod_event);
}

fn pod_event(p: &PodExplanation) {
    let reasons: Vec<String> = p
        .reasons
        .iter()
        .take(MAX_REASONS)
        .map(|r| match &r.node_group {
            Some(g) => format!("{g}: {} ({})", r.code.as_str(), r.message),
            None => format!("{} ({})", r.code.as_str(), r.message),
        })
        .collect();
    let more = p.reasons.len().saturating_sub(MAX_REASONS);
    tracing::info!(target: TRACES,
        outcome = p.outcome.as_str(),
        k8s.namespace.name = %p.pod.namespace,
        k8s.pod.name = %p.pod.name,
        node_group = p.node_group.as_ref().map(|g| g.as_str()).unwrap_or_default(),
        reasons = reasons.join("; "),
        more_reasons = int(more),
        "pending pod");
}

/// Scale-down: each removal with its reason, and why other nodes stay.
pub(super) fn scale_down(plan: impl FnOnce() -> ScaleDownOutput) -> ScaleDownOutput {
    let span = tracing::info_span!(target: TRACES, "scale_down",
        fleetscaler.nodes.unneeded = Empty,
        fleetscaler.scale_downs = Empty,
        fleetscaler.nodes.not_removable = Empty,
        fleetscaler.scale_down.paused = Empty,
    );
    let out = span.in_scope(plan);
    if !span.is_disabled() {
        span.in_scope(|| record_scale_down(&span, &out));
    }
    out
}

fn record_scale_down(span: &Span, out: &ScaleDownOutput) {
    span.record("fleetscaler.nodes.unneeded", int(out.unneeded.len()));
    span.record("fleetscaler.scale_downs", int(out.actions.len()));
    span.record(
        "fleetscaler.nodes.not_removable",
        int(out.not_removable.len()),
    );
    if let Some(why) = &out.paused {
        span.record("fleetscaler.scale_down.paused", why.as_str());
    }
    for a in &out.actions {
        tracing::info!(target: TRACES, node_group = %a.node_group,
            k8s.node.name = %a.node, empty = a.empty, pods = int(a.pods.len()),
            reason = a.reason.as_str(), "scale-down");
    }
    bounded(out.not_removable.iter(), "more nodes not removable", |n| {
        tracing::info!(target: TRACES, code = n.code.as_str(),
            k8s.node.name = %n.node, reason = n.message.as_str(), "node not removable");
    });
}

/// One event per item for the first [`MAX_LISTED`], then one event with the count left.
fn bounded<T>(items: impl Iterator<Item = T>, more: &'static str, mut event: impl FnMut(T)) {
    let mut left = 0usize;
    for (i, item) in items.enumerate() {
        if i < MAX_LISTED {
            event(item);
        } else {
            left += 1;
        }
    }
    if left > 0 {
        tracing::info!(target: TRACES, count = int(left), "{more}");
    }
}
