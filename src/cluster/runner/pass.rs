//! One pass of a runner, and what happens around passes: start-up recovery, scale-downs
//! ending, shutdown.

use std::sync::Arc;

use jiff::Timestamp;
use tokio::task::{Id, JoinError};
use tokio::time::Instant;

use super::{Runner, RunnerSpec};
use crate::cluster::error::Category;
use crate::cluster::events::{events_for, events_for_entries};
use crate::cluster::executor::{Executor, ExecutorConfig, NodeRemoval};
use crate::cluster::outcome::{Action, Entry, Outcome};
use crate::cluster::report::{PassSummary, Phase, describe_entry};
use crate::config::{EffectiveSettings, Layers, effective_settings};
use crate::engine::plan::Plan;
use crate::engine::settings::Settings;
use crate::engine::state::EngineState;
use crate::model::ClusterSnapshot;

impl Runner {
    /// The runner's one executor (its per-group locks must be shared by every pass and
    /// removal), rebuilt only when a reload turns dry run on or off.
    fn executor(&mut self, dry_run: bool) -> Executor {
        match &self.executor {
            Some((executor, was_dry)) if *was_dry == dry_run => executor.clone(),
            _ => {
                let executor = Executor::new(
                    self.ctx.client.clone(),
                    ExecutorConfig {
                        request_timeout: self.ctx.timing.request_timeout,
                        dry_run,
                        gate: self.ctx.gate.clone(),
                    },
                );
                self.executor = Some((executor.clone(), dry_run));
                executor
            }
        }
    }

    /// Finishes or undoes what an earlier run left half-done (see the executor).
    pub(super) async fn recover(&mut self) {
        let dry_run = self.spec.borrow().dry_run;
        let entries = self.executor(dry_run).recover().await;
        for entry in &entries {
            tracing::info!(k8s.cluster.name = %self.ctx.name, "start-up recovery: {}", describe_entry(entry));
        }
        let now = Timestamp::now();
        self.ctx.publish(|r| r.record_entries(&entries, now));
    }

    /// The status ConfigMap says `Initializing` until the first pass.
    pub(super) async fn initializing(&mut self) {
        if let Err(e) = self.status.initializing(Timestamp::now()).await {
            tracing::warn!(k8s.cluster.name = %self.ctx.name, "cannot write the status ConfigMap: {e}");
        }
    }

    pub(super) async fn pass(&mut self) {
        let started = Instant::now();
        let now = Timestamp::now();
        let spec = self.spec.borrow_and_update().clone();
        if let Some(why) = self.cache.stale(started, self.ctx.timing.stale_after()) {
            tracing::warn!(k8s.cluster.name = %self.ctx.name, "pass skipped: {why}");
            self.ctx.publish(|r| {
                r.record_error(why.clone(), now);
                r.last_pass = Some(PassSummary {
                    at: now,
                    took_ms: 0.0,
                    engine_ms: 0.0,
                    scale_ups: 0,
                    scale_downs: 0,
                    skipped: Some(why.clone()),
                });
                r.set_phase(Phase::Running, Some(why), now);
            });
            return;
        }
        let problems: Vec<String> = self.cache.problems().collect();
        let executor = self.executor(spec.dry_run);
        let snapshot = self.cache.snapshot();
        let effective = effective_for(&spec, snapshot);
        let settings = effective.settings;
        let engine_started = Instant::now();
        let mut plan = run_engine(snapshot, &mut self.state, &settings, now);
        let engine_ms = engine_started.elapsed().as_secs_f64() * 1e3;
        plan.warnings.extend(
            effective
                .warnings
                .iter()
                .map(|w| format!("setting {w}"))
                .chain(problems.iter().map(|p| format!("unreadable object: {p}"))),
        );
        let execution = executor
            .execute(&plan, snapshot, &settings, &self.in_flight)
            .await;
        feed_back(&mut self.state, &execution.entries, &settings, now);
        // Status first: events about the ConfigMap need its uid.
        if let Err(e) = self.status.write(&plan, now).await {
            tracing::warn!(k8s.cluster.name = %self.ctx.name, category = e.category().as_str(),
                "cannot write the status ConfigMap: {e}");
            let message = format!("writing the status ConfigMap: {e}");
            self.ctx.publish(|r| r.record_error(message, now));
        }
        let status_ref = self.status.object_ref();
        self.events
            .record_all(events_for(&plan, &execution.entries, snapshot, &status_ref));
        for removal in execution.removals {
            self.start_removal(removal);
        }
        let summary = PassSummary {
            at: now,
            took_ms: started.elapsed().as_secs_f64() * 1e3,
            engine_ms,
            scale_ups: plan.scale_up.len(),
            scale_downs: plan.scale_down.len(),
            skipped: None,
        };
        log_entries(&self.ctx.name, &execution.entries);
        let plan = Arc::new(plan);
        self.last_plan = Some(plan.clone());
        let stats = self.cache.stats();
        self.ctx.publish(|r| {
            r.record_plan(plan);
            r.record_entries(&execution.entries, now);
            r.cache = stats;
            r.last_pass = Some(summary);
            r.set_phase(Phase::Running, None, now);
        });
    }

    fn start_removal(&mut self, removal: NodeRemoval) {
        let node = removal.node().clone();
        let group = removal.group().clone();
        if !self.in_flight.insert(node.clone()) {
            return;
        }
        let handle = self.removals.spawn(removal.run());
        self.removing.insert(handle.id(), (node, group));
    }

    /// A scale-down finished, failed, or its task died.
    pub(super) fn removal_ended(&mut self, done: Result<(Id, Entry), JoinError>) {
        let (id, entry) = match done {
            Ok((id, entry)) => (id, Ok(entry)),
            Err(e) => (e.id(), Err(e)),
        };
        let Some((node, group)) = self.removing.remove(&id) else {
            return;
        };
        self.in_flight.remove(&node);
        let entry = entry.unwrap_or_else(|e| {
            let action = Action::RemoveNode {
                group,
                node,
                empty: false,
                evicted: Vec::new(),
            };
            Entry::failed(action, format!("the removal stopped: {e}"), Category::Other)
        });
        let now = Timestamp::now();
        if matches!(entry.outcome, Outcome::Failed { .. }) {
            self.state.record_scale_down_failure(now);
        }
        log_entries(&self.ctx.name, std::slice::from_ref(&entry));
        if let Some(plan) = &self.last_plan {
            let status_ref = self.status.object_ref();
            let entries = std::slice::from_ref(&entry);
            let snapshot = self.cache.snapshot();
            self.events
                .record_all(events_for_entries(plan, entries, snapshot, &status_ref));
        }
        self.ctx
            .publish(|r| r.record_entries(std::slice::from_ref(&entry), now));
    }

    /// Stops scale-downs under way and undoes what they left (taints) before returning.
    pub(super) async fn shut_down(&mut self) {
        let interrupted = !self.removals.is_empty();
        self.removals.shutdown().await;
        self.removing.clear();
        self.in_flight.clear();
        if interrupted {
            let limit = self.ctx.timing.request_timeout * 3;
            if tokio::time::timeout(limit, self.recover()).await.is_err() {
                tracing::warn!(k8s.cluster.name = %self.ctx.name,
                    "could not undo interrupted scale-downs in time; the next start will");
            }
        }
        // As upstream on a clean exit: no status claims to be current once nobody writes it.
        if let Err(e) = self.status.remove().await {
            tracing::warn!(k8s.cluster.name = %self.ctx.name, "cannot remove the status ConfigMap: {e}");
        }
        self.ctx.set_phase(Phase::Stopped, None);
    }
}

/// Fleet defaults, then the cluster's own ClusterAutoscaler (when allowed), then its overrides.
fn effective_for(spec: &RunnerSpec, snapshot: &ClusterSnapshot) -> EffectiveSettings {
    let overrides = spec.cluster.overrides_with_groups();
    let cluster_autoscaler = spec
        .cluster
        .use_cluster_autoscaler
        .then(|| snapshot.cluster_autoscaler().map(|c| &c.spec))
        .flatten();
    effective_settings(Layers {
        fleet_defaults: Some(&spec.defaults),
        cluster_autoscaler,
        overrides: Some(&overrides),
        flags: None,
    })
}

/// The engine is CPU work: on a multi-threaded runtime it runs in place while other tasks
/// move to other workers, so a large cluster's pass never stalls the rest of the fleet.
fn run_engine(
    snapshot: &ClusterSnapshot,
    state: &mut EngineState,
    settings: &Settings,
    now: Timestamp,
) -> Plan {
    let work = || crate::engine::run_once(snapshot, state, settings, now);
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => crate::engine::run_once(snapshot, state, settings, now),
    }
}

/// The engine assumed its plan carried out; tell it what was not.
fn feed_back(state: &mut EngineState, entries: &[Entry], settings: &Settings, now: Timestamp) {
    for entry in entries {
        match (&entry.action, &entry.outcome) {
            (Action::ScaleUp { group, from, to }, Outcome::Failed { error, .. }) => state
                .record_scale_up_failure(
                    group.as_str(),
                    to.saturating_sub(*from),
                    now,
                    error.clone(),
                    settings,
                ),
            (Action::ScaleUp { group, from, to }, Outcome::Skipped { .. }) => {
                state.forget_scale_up(group.as_str(), to.saturating_sub(*from));
            }
            (Action::MarkNode { .. }, Outcome::Failed { .. }) => {
                state.record_scale_down_failure(now);
            }
            _ => {}
        }
    }
}

fn log_entries(cluster: &crate::cluster::ClusterName, entries: &[Entry]) {
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
