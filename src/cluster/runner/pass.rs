//! One pass of a runner: effective settings, the engine on the cached snapshot, the plan
//! carried out, what did not happen fed back into the engine's memory, status and events.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::Runner;
use super::idle::Cause;
use crate::cluster::events::events_for;
use crate::cluster::layering::{self, EffectiveSettings};
use crate::cluster::outcome::{Action, Entry, Outcome};
use crate::cluster::pool::{Turn, Urgency};
use crate::cluster::report::{PassSummary, Phase};
use crate::engine::FleetPolicy;
use crate::engine::plan::{Outcome as PodOutcome, Plan};
use crate::engine::policy::{SharedFailure, TraceRef};
use crate::engine::settings::{SettingWarning, Settings};
use crate::engine::state::EngineState;
use crate::model::ClusterSnapshot;
use crate::telemetry::export::SpanRef;
use crate::telemetry::{TRACES, int, otel};

impl Runner {
    /// One pass, in its span: the trace of a pass has the engine's phases and every write
    /// under it (docs/tracing.md).
    pub(super) async fn pass(&mut self, cause: Cause) {
        let span = tracing::info_span!(target: TRACES, "pass",
            k8s.cluster.name = %self.ctx.name,
            fleetscaler.dry_run = Empty,
            fleetscaler.pods.pending = Empty,
            fleetscaler.scale_ups = Empty,
            fleetscaler.scale_downs = Empty,
            fleetscaler.pass.cause = Empty,
            fleetscaler.pass.skipped_reason = Empty,
            fleetscaler.actions.failed = Empty,
            fleetscaler.fleet_backoffs = Empty,
            fleetscaler.pass.queued_ms = Empty,
            fleetscaler.capacity_failures = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
        );
        self.pass_in(span.clone(), cause).instrument(span).await;
    }

    async fn pass_in(&mut self, span: Span, cause: Cause) {
        let started = Instant::now();
        let now = Timestamp::now();
        let spec = self.spec.borrow_and_update().clone();
        span.record("fleetscaler.dry_run", spec.dry_run);
        let woken_by = self.woken_by(cause);
        span.record("fleetscaler.pass.cause", woken_by.as_str());
        if let Some(why) = self.untrusted_now(started) {
            span.record("fleetscaler.pass.skipped_reason", why.as_str());
            self.skip_pass(why, now, (cause, woken_by));
            return;
        }
        self.follow_dry_run(spec.dry_run);
        self.take_infrastructure_templates();
        let problems: Vec<String> = self
            .cache
            .problems()
            .chain(self.infra_problems.iter().cloned())
            .collect();
        let executor = self.executor(spec.dry_run);
        // The fleet's passes take turns on the cores; the snapshot is read once it is ours.
        let turn = self.wait_turn().await;
        span.record(
            "fleetscaler.pass.queued_ms",
            turn.waited.as_secs_f64() * 1e3,
        );
        let before = Cooldowns::of(&self.state);
        let policy = self.ctx.fleet.policy(self.ctx.name.as_str(), now);
        let snapshot_span = snapshot_span();
        let changes = self.cache.changes();
        self.pending_answered = self.cache.turned_pending();
        let snapshot = self.cache.snapshot();
        let effective = snapshot_span.in_scope(|| layering::for_cluster(&spec, snapshot, None));
        // Kept as it is and shown with its sources only when asked (`/api`): the JSON form
        // is some ten times its size, per cluster.
        let effective = Arc::new(effective);
        record_snapshot(&snapshot_span, snapshot);
        drop(snapshot_span);
        let settings = &effective.settings;
        let engine_started = Instant::now();
        let inputs = super::idle::Inputs {
            cache: changes,
            learned: self.learned,
            spec: spec.clone(),
            policy: policy.clone(),
        };
        let mut plan = run_engine(snapshot, &mut self.state, settings, &policy, now);
        let unsettled = super::idle::unsettled(&plan, settings.scale_down_enabled);
        self.idle.passed(inputs, (started, now), unsettled.as_ref());
        let engine_ms = engine_started.elapsed().as_secs_f64() * 1e3;
        let queued_ms = turn.waited.as_secs_f64() * 1e3;
        drop(turn);
        plan.warnings.extend(
            self.discovery_warnings
                .iter()
                .cloned()
                .chain(effective.warnings.iter().map(SettingWarning::warning))
                .chain(
                    problems
                        .iter()
                        .map(|p| crate::cluster::cache::unreadable(p)),
                ),
        );
        let held = held_entries(&plan);
        share_capacity_failures(&self.ctx, &plan, &span, now);
        link_fleet_backoffs(&span, &plan);
        let mut execution = executor
            .execute(&plan, snapshot, settings, &self.in_flight)
            .await;
        let written_at = Instant::now();
        let writes_ms = (written_at - engine_started).as_secs_f64() * 1e3 - engine_ms;
        execution.entries.extend(held);
        feed_back(&mut self.state, &execution.entries, settings, now);
        before.restore_unless_done(&mut self.state, &execution.entries);
        // Status first: events about the ConfigMap need its uid.
        if let Err(e) = self.status.write(&plan, now).await {
            tracing::warn!(k8s.cluster.name = %self.ctx.name, category = e.category().as_str(),
                "cannot write the status ConfigMap: {e}");
            let message = format!("writing the status ConfigMap: {e}");
            self.ctx.publish(|r| {
                r.counters.record_error(e.category());
                r.record_error(message, now);
            });
        }
        let status_ref = self.status.object_ref();
        self.events
            .record_all(events_for(&plan, &execution.entries, snapshot, &status_ref));
        for removal in execution.removals {
            self.start_removal(removal);
        }
        let latencies = self.scale_up_latencies(&plan, &execution.entries, written_at);
        let summary = PassSummary {
            at: now,
            took_ms: started.elapsed().as_secs_f64() * 1e3,
            engine_ms,
            queued_ms,
            scale_ups: plan.scale_up.len(),
            scale_downs: plan.scale_down.len(),
            skipped: None,
            waits_on: unsettled.map(|u| u.why),
            cause: woken_by,
        };
        // Where a pass's time went, for a latency to be taken apart from the log.
        tracing::debug!(k8s.cluster.name = %self.ctx.name,
            "pass took {:.0} ms: queued {queued_ms:.0}, engine {engine_ms:.0}, writes {writes_ms:.0}; \
             {} scale-ups, {} scale-downs",
            summary.took_ms, summary.scale_ups, summary.scale_downs);
        record_outcome(&span, &plan, &execution.entries);
        log_entries(&self.ctx.name, &execution.entries);
        let done = Done {
            cause,
            entries: &execution.entries,
            summary,
            latencies,
        };
        self.publish_pass(Arc::new(plan), effective.clone(), done, now);
    }

    /// Points the template reader at what the node groups reference now, and hands what it
    /// read last to the cache.
    fn take_infrastructure_templates(&mut self) {
        self.infra.want(self.cache.snapshot().scalables.iter());
        if let Some((templates, problems)) = self.infra.take() {
            self.cache.set_infrastructure_templates(templates);
            self.infra_problems = problems;
        }
    }

    /// For each pod a written scale-up is for: how long since the cache saw it unschedulable.
    fn scale_up_latencies(&mut self, plan: &Plan, entries: &[Entry], at: Instant) -> Vec<f64> {
        let mut latencies = Vec::new();
        for entry in entries {
            let (Action::ScaleUp { group, .. }, Outcome::Done { .. }) =
                (&entry.action, &entry.outcome)
            else {
                continue;
            };
            let helped = plan.pending_pods.iter().filter(|p| {
                p.outcome == PodOutcome::ScaleUp && p.node_group.as_ref() == Some(group)
            });
            for pod in helped {
                if let Some(since) = self.cache.take_pending_since(&pod.pod) {
                    latencies.push(at.saturating_duration_since(since).as_secs_f64());
                }
            }
        }
        self.cache
            .keep_pending_since(plan.pending_pods.iter().map(|p| &p.pod));
        latencies
    }

    /// Waits for this pass's turn on the fleet's cores. A pass that answers pods turned
    /// unschedulable since the last one goes first; one that waits for anything else keeps
    /// reading the watches meanwhile (keeping its place in the queue), and moves ahead as
    /// soon as such a pod arrives (the pass, reading the cache once its turn comes, will
    /// answer it).
    async fn wait_turn(&mut self) -> Turn {
        let asked = Instant::now();
        let pool = self.ctx.pool.clone();
        let mut urgency = self.urgency();
        let mut turn = Box::pin(pool.turn(urgency));
        loop {
            tokio::select! {
                mut given = &mut turn => {
                    given.waited = asked.elapsed();
                    return given;
                }
                Some(update) = self.updates.next(), if urgency == Urgency::Other => {
                    self.apply_update(update, Instant::now());
                    if self.urgency() == Urgency::NewPending {
                        urgency = Urgency::NewPending;
                        turn = Box::pin(pool.turn(urgency));
                    }
                }
            }
        }
    }

    /// Whether the cache holds pods turned unschedulable since the last pass read it.
    fn urgency(&self) -> Urgency {
        if self.cache.turned_pending() != self.pending_answered {
            Urgency::NewPending
        } else {
            Urgency::Other
        }
    }

    /// The cause of a pass as the report and its trace say it: the kinds that changed for
    /// a change (their record is cleared by every pass).
    fn woken_by(&mut self, cause: Cause) -> String {
        let kinds = self.cache.take_changed_kinds();
        match cause {
            Cause::Changed => format!("changed: {kinds}"),
            other => other.as_str().to_string(),
        }
    }

    fn skip_pass(&mut self, why: String, now: Timestamp, (cause, woken_by): (Cause, String)) {
        self.idle.forget();
        tracing::warn!(k8s.cluster.name = %self.ctx.name, "pass skipped: {why}");
        self.ctx.publish(|r| {
            r.counters.record_pass_cause(cause.as_str());
            r.record_error(why.clone(), now);
            r.last_pass = Some(PassSummary {
                at: now,
                took_ms: 0.0,
                engine_ms: 0.0,
                queued_ms: 0.0,
                scale_ups: 0,
                scale_downs: 0,
                skipped: Some(why.clone()),
                waits_on: None,
                cause: woken_by,
            });
            r.looked_at = Some(now);
            r.set_phase(Phase::Running, Some(why), now);
        });
    }

    /// A reload that turns dry run on or off reaches the status and the report too.
    fn follow_dry_run(&mut self, dry_run: bool) {
        if self.status_dry_run != dry_run {
            self.status.set_dry_run(dry_run);
            self.status_dry_run = dry_run;
            self.ctx.publish(|r| r.dry_run = dry_run);
        }
    }

    fn publish_pass(
        &mut self,
        plan: Arc<Plan>,
        settings: Arc<EffectiveSettings>,
        done: Done<'_>,
        now: Timestamp,
    ) {
        self.last_plan = Some(plan.clone());
        let stats = self.cache.stats();
        self.ctx.publish(|r| {
            r.record_plan(plan);
            r.settings = Some(settings);
            r.record_entries(done.entries, now);
            r.cache = stats;
            let c = &mut r.counters;
            c.record_pass_cause(done.cause.as_str());
            c.observe_duration("main", done.summary.took_ms / 1e3);
            c.observe_duration("autoscaling", done.summary.engine_ms / 1e3);
            c.pass_queue.observe(done.summary.queued_ms / 1e3);
            c.last_activity.insert("main", now);
            for seconds in done.latencies {
                c.scale_up_latency.observe(seconds);
            }
            r.last_pass = Some(done.summary);
            r.looked_at = Some(now);
            r.set_phase(Phase::Running, None, now);
        });
    }
}

/// What a pass did, for its report.
struct Done<'a> {
    /// Why the pass ran (counted with the other figures of the pass).
    cause: Cause,
    entries: &'a [Entry],
    summary: PassSummary,
    /// Seconds from pods seen unschedulable to their scale-up written.
    latencies: Vec<f64>,
}

/// The engine starts its cooldowns as if its plan is carried out. A scale-up or removal
/// that did not happen (a stale plan, dry run, not the leader, a failure) must not hold
/// scale-down back: the times it set are put back.
struct Cooldowns {
    last_scale_up: Option<Timestamp>,
    last_scale_down_delete: Option<Timestamp>,
}

impl Cooldowns {
    fn of(state: &EngineState) -> Self {
        Cooldowns {
            last_scale_up: state.last_scale_up,
            last_scale_down_delete: state.last_scale_down_delete,
        }
    }

    fn restore_unless_done(self, state: &mut EngineState, entries: &[Entry]) {
        let done = |pick: fn(&Action) -> bool| {
            entries
                .iter()
                .any(|e| pick(&e.action) && matches!(e.outcome, Outcome::Done { .. }))
        };
        if !done(|a| matches!(a, Action::ScaleUp { .. })) {
            state.last_scale_up = self.last_scale_up;
        }
        if !done(|a| matches!(a, Action::MarkNode { .. })) {
            state.last_scale_down_delete = self.last_scale_down_delete;
        }
    }
}

/// Hands a pass's capacity failures to the fleet with the pass's trace, for the passes they
/// back off groups in to link to, and says so.
fn share_capacity_failures(ctx: &super::Context, plan: &Plan, span: &Span, now: Timestamp) {
    if plan.capacity_failures.is_empty() {
        return;
    }
    for f in &plan.capacity_failures {
        tracing::warn!(k8s.cluster.name = %ctx.name, fleetscaler.node_group = %f.node_group,
            "no capacity for {}: the fleet's other clusters back off their groups of it until {}: {}",
            f.key.describe(), f.until, f.reason);
    }
    span.record(
        "fleetscaler.capacity_failures",
        int(plan.capacity_failures.len()),
    );
    let trace = otel::trace_ref(span).map(|s| TraceRef {
        trace_id: s.trace_id,
        span_id: s.span_id,
    });
    ctx.fleet
        .share(&ctx.name, trace.as_ref(), &plan.capacity_failures, now);
}

/// How many groups the fleet backed off in this pass, and a link to each pass elsewhere whose
/// failure did it: from "why did this cluster not scale that group" to where it failed.
fn link_fleet_backoffs(span: &Span, plan: &Plan) {
    if span.is_disabled() {
        return;
    }
    let failures: Vec<&SharedFailure> = plan
        .health
        .node_groups
        .iter()
        .filter_map(|g| g.fleet_backoff.as_ref())
        .collect();
    span.record("fleetscaler.fleet_backoffs", int(failures.len()));
    let mut linked = HashSet::new();
    for f in failures {
        let Some(trace) = &f.trace else {
            continue;
        };
        // One failure may back off several groups here: one link to its pass.
        if linked.insert(trace) {
            let attributes = [
                ("k8s.cluster.name", f.cluster.as_str()),
                ("fleetscaler.node_group", f.node_group.as_str()),
            ];
            let to = SpanRef {
                trace_id: trace.trace_id.clone(),
                span_id: trace.span_id.clone(),
            };
            otel::link(span, &to, &attributes);
        }
    }
}

/// The removals the fleet's hold kept back, as skipped actions (so the report and events say
/// why each did not happen).
fn held_entries(plan: &Plan) -> Vec<Entry> {
    let why = plan.scale_down_paused.clone().unwrap_or_default();
    plan.scale_down_held
        .iter()
        .map(|d| {
            let action = Action::MarkNode {
                group: d.node_group.clone(),
                node: d.node.clone(),
                empty: d.empty,
            };
            Entry::skipped(action, why.clone())
        })
        .collect()
}

/// The engine is CPU work: on a multi-threaded runtime it runs in place while other tasks
/// move to other workers, so a large cluster's pass never stalls the rest of the fleet.
fn run_engine(
    snapshot: &ClusterSnapshot,
    state: &mut EngineState,
    settings: &Settings,
    policy: &FleetPolicy,
    now: Timestamp,
) -> Plan {
    // The engine's spans go under the pass: it is entered again wherever the work runs.
    let pass = Span::current();
    crate::cluster::cpu(|| {
        pass.in_scope(|| crate::engine::run_once_with(snapshot, state, settings, policy, now))
    })
}

/// Reading the cache and the effective settings.
fn snapshot_span() -> Span {
    tracing::info_span!(target: TRACES, "snapshot",
        fleetscaler.nodes = Empty,
        fleetscaler.pods = Empty,
        fleetscaler.machines = Empty,
        fleetscaler.node_group_objects = Empty,
    )
}

fn record_snapshot(span: &Span, snapshot: &ClusterSnapshot) {
    if span.is_disabled() {
        return;
    }
    span.record("fleetscaler.nodes", int(snapshot.nodes.len()));
    span.record("fleetscaler.pods", int(snapshot.pods.len()));
    span.record("fleetscaler.machines", int(snapshot.machines.len()));
    span.record(
        "fleetscaler.node_group_objects",
        int(snapshot.scalables.len()),
    );
}

/// The pass's outcome on its span; an error status when an action failed.
fn record_outcome(span: &Span, plan: &Plan, entries: &[Entry]) {
    if span.is_disabled() {
        return;
    }
    span.record("fleetscaler.pods.pending", int(plan.pending_pods.len()));
    span.record("fleetscaler.scale_ups", int(plan.scale_up.len()));
    span.record("fleetscaler.scale_downs", int(plan.scale_down.len()));
    let failed = entries
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Failed { .. }))
        .count();
    span.record("fleetscaler.actions.failed", int(failed));
    if failed > 0 {
        span.record("otel.status_code", "error");
        span.record(
            "otel.status_description",
            format!("{failed} action(s) failed").as_str(),
        );
    }
}

/// The engine assumed its plan carried out; tell it what was not.
fn feed_back(state: &mut EngineState, entries: &[Entry], settings: &Settings, now: Timestamp) {
    for entry in entries {
        match (&entry.action, &entry.outcome) {
            // An API error that means "not now" is no failure of the group: the next pass
            // tries again. Only what would repeat (403, an invalid object) backs it off.
            (Action::ScaleUp { group, from, to }, Outcome::Failed { category, .. })
                if category.is_transient() =>
            {
                state.forget_scale_up(group, to.saturating_sub(*from));
            }
            (Action::ScaleUp { group, from, to }, Outcome::Failed { error, .. }) => state
                .record_scale_up_failure(
                    group,
                    to.saturating_sub(*from),
                    now,
                    error.clone(),
                    settings,
                ),
            (Action::ScaleUp { group, from, to }, Outcome::Skipped { .. }) => {
                state.forget_scale_up(group, to.saturating_sub(*from));
            }
            (Action::MarkNode { .. }, Outcome::Failed { .. }) => {
                state.record_scale_down_failure(now);
            }
            _ => {}
        }
    }
}

pub(super) fn log_entries(cluster: &crate::cluster::ClusterName, entries: &[Entry]) {
    for entry in entries {
        match &entry.outcome {
            Outcome::Done { detail } => {
                tracing::info!(k8s.cluster.name = %cluster, "{detail}");
            }
            Outcome::Skipped { reason } => {
                tracing::debug!(k8s.cluster.name = %cluster, action = ?entry.action, "skipped: {reason}");
            }
            Outcome::Failed { error, category } => {
                tracing::warn!(k8s.cluster.name = %cluster, action = ?entry.action,
                    category = category.as_str(), "failed: {error}");
            }
        }
    }
}
