//! What happens around passes: syncing the cache before the first one, repairing what an
//! interrupted run left (at start, whenever this replica becomes the leader, and now and
//! then while it leads), scale-downs ending, and shutdown.

use std::time::Duration;

use jiff::Timestamp;
use tokio::task::{Id, JoinError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::{RECONCILE_EVERY, Runner, RunnerError};
use crate::cluster::cache::{Cache, Change, Kind};
use crate::cluster::error::Category;
use crate::cluster::events::events_for_entries;
use crate::cluster::executor::{Executor, ExecutorConfig};
use crate::cluster::outcome::{Action, Entry, Outcome};
use crate::cluster::report::{Phase, describe_entry};
use crate::telemetry::{Parent, TRACES};

impl Runner {
    /// The runner's one executor (its per-group locks must be shared by every pass and
    /// removal), rebuilt only when a reload turns dry run on or off.
    pub(super) fn executor(&mut self, dry_run: bool) -> Executor {
        match &self.executor {
            Some((executor, was_dry)) if *was_dry == dry_run => executor.clone(),
            _ => {
                let executor = Executor::new(
                    self.ctx.client.clone(),
                    ExecutorConfig {
                        request_timeout: self.ctx.timing.write_timeout,
                        dry_run,
                        gate: self.ctx.gate.clone(),
                        apis: self.machine_apis.clone(),
                    },
                );
                self.executor = Some((executor.clone(), dry_run));
                executor
            }
        }
    }

    /// The status ConfigMap says `Initializing` until the first pass.
    pub(super) async fn initializing(&mut self) {
        if let Err(e) = self.status.initializing(Timestamp::now()).await {
            tracing::warn!(k8s.cluster.name = %self.ctx.name, "cannot write the status ConfigMap: {e}");
        }
    }

    /// Waits until every watched kind has listed; false if cancelled first. A kind the
    /// cluster refuses to list (403) is given up with a warning; other errors are shown in
    /// the report while the watch keeps trying.
    pub(super) async fn sync(&mut self, cancel: &CancellationToken) -> Result<bool, RunnerError> {
        self.ctx
            .set_phase(Phase::Syncing, Some(waiting(&self.cache)));
        let started = Instant::now();
        // A large fleet takes a while to list: its operator sees each cluster's progress.
        let mut progress = tokio::time::interval_at(started + SYNC_PROGRESS, SYNC_PROGRESS);
        while !self.cache.is_synced() {
            let update = tokio::select! {
                _ = cancel.cancelled() => return Ok(false),
                _ = progress.tick() => {
                    tracing::info!(k8s.cluster.name = %self.ctx.name,
                        "syncing for {}s: {} objects so far; {}",
                        started.elapsed().as_secs(), objects(&self.cache), waiting(&self.cache));
                    continue;
                }
                update = self.updates.next() => update.ok_or(RunnerError::WatchesEnded)?,
            };
            let refused = match &update.change {
                Change::Error(e) if e.forbidden => Some((update.kind, e.message.clone())),
                _ => None,
            };
            let failed = matches!(update.change, Change::Error(_));
            self.apply_update(update, Instant::now());
            if let Some((kind, message)) = refused {
                self.give_up_on(kind, &message);
            }
            if failed {
                self.ctx
                    .set_phase(Phase::Syncing, Some(waiting(&self.cache)));
            }
        }
        let stats = self.cache.stats();
        tracing::info!(k8s.cluster.name = %self.ctx.name,
            "synced in {:.1}s: {} nodes, {} pods, {} machines, {} other objects",
            started.elapsed().as_secs_f64(), stats.nodes, stats.pods, stats.machines, stats.other);
        self.ctx.publish(|r| r.cache = stats);
        Ok(true)
    }

    /// A kind the cluster refuses to list: said once, in the log, the report's last error
    /// and its warnings, and in every plan until the hub connects again (what the cluster is
    /// autoscaled without holds as long: a controller kind's pods keep their nodes, a
    /// storage kind leaves volumes unsimulated).
    fn give_up_on(&mut self, kind: Kind, message: &str) {
        let warning = kind.not_allowed(message);
        tracing::warn!(k8s.cluster.name = %self.ctx.name, "{warning}");
        self.cache.give_up_on(kind, message);
        self.discovery_warnings.push(warning.clone());
        let now = Timestamp::now();
        self.ctx.publish(|r| {
            r.record_error(warning.to_string(), now);
            r.warnings.push(warning);
        });
    }

    /// Repairs what an interrupted run left, when this replica may write and has not done
    /// so since it last could (start, a lease won) or for a while. Removals of this runner
    /// still under way are left alone.
    pub(super) async fn reconcile_if_due(&mut self) {
        if !self.ctx.gate.is_open() {
            self.reconciled = None;
            return;
        }
        if self
            .reconciled
            .is_some_and(|at| at.elapsed() < RECONCILE_EVERY)
        {
            return;
        }
        let dry_run = self.spec.borrow().dry_run;
        let executor = self.executor(dry_run);
        let span = tracing::info_span!(target: TRACES, "reconcile",
            k8s.cluster.name = %self.ctx.name);
        let repaired = executor.reconcile(&self.in_flight).instrument(span).await;
        match repaired {
            Ok(entries) => {
                self.reconciled = Some(Instant::now());
                for entry in &entries {
                    tracing::info!(k8s.cluster.name = %self.ctx.name,
                        "repairing an interrupted run: {}", describe_entry(entry));
                }
                let now = Timestamp::now();
                self.ctx.publish(|r| r.record_entries(&entries, now));
            }
            Err(e) => {
                let message = format!(
                    "cannot look for leftovers of an interrupted run (trying again next pass): {e}"
                );
                tracing::warn!(k8s.cluster.name = %self.ctx.name, "{message}");
                let now = Timestamp::now();
                self.ctx.publish(|r| {
                    r.counters.record_error(e.category());
                    r.record_error(message, now);
                });
            }
        }
    }

    pub(super) fn start_removal(&mut self, removal: crate::cluster::executor::NodeRemoval) {
        let node = removal.node().clone();
        let group = removal.group().clone();
        if !self.in_flight.insert(node.clone()) {
            return;
        }
        // A removal outlives its pass (the drain takes a while): its span is its own, under
        // the pass's trace, so that the pass's span ends with the pass.
        let span = tracing::info_span!(target: TRACES, parent: None, "remove_node",
            k8s.cluster.name = %self.ctx.name,
            k8s.node.name = %node,
            fleetscaler.node_group = %group,
            fleetscaler.skipped_reason = Empty,
            error.type = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
        );
        Parent::current().adopt(&span);
        let recorded = span.clone();
        let work = async move {
            let entry = removal.run().await;
            record_entry(&recorded, &entry);
            entry
        };
        let handle = self.removals.spawn(work.instrument(span));
        self.removing.insert(handle.id(), (node, group));
    }

    /// A scale-down finished, failed, or its task died (a panic: the next reconcile
    /// repairs what it left, its node no longer being in flight).
    pub(super) fn removal_ended(&mut self, done: Result<(Id, Entry), JoinError>) {
        self.learned += 1;
        let (id, entry) = match done {
            Ok((id, entry)) => (id, Ok(entry)),
            Err(e) => (e.id(), Err(e)),
        };
        let Some((node, group)) = self.removing.remove(&id) else {
            return;
        };
        self.in_flight.remove(&node);
        let entry = entry.unwrap_or_else(|e| {
            self.reconciled = None;
            let action = Action::RemoveNode {
                group,
                node,
                empty: false,
                unready: false,
                evicted: Vec::new(),
                not_evicted: Vec::new(),
            };
            Entry::failed(action, format!("the removal stopped: {e}"), Category::Other)
        });
        let now = Timestamp::now();
        if matches!(entry.outcome, Outcome::Failed { .. }) {
            self.state.record_scale_down_failure(now);
            // A failure may have left marks its rollback could not remove (the API server
            // went away midway): look for leftovers at the next pass, not minutes later.
            self.reconciled = None;
        }
        super::pass::log_entries(&self.ctx.name, std::slice::from_ref(&entry));
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
        let span = tracing::info_span!(target: TRACES, "shutdown",
            k8s.cluster.name = %self.ctx.name);
        self.shut_down_in().instrument(span).await;
    }

    async fn shut_down_in(&mut self) {
        let interrupted = !self.removals.is_empty();
        self.removals.shutdown().await;
        self.removing.clear();
        self.in_flight.clear();
        let limit = self.ctx.timing.write_timeout * 3;
        if interrupted {
            self.reconciled = None;
            let repair = self.reconcile_if_due();
            if tokio::time::timeout(limit, repair).await.is_err() {
                tracing::warn!(k8s.cluster.name = %self.ctx.name,
                    "could not undo interrupted scale-downs in time; the next start will");
            }
        }
        // As upstream on a clean exit: no status claims to be current once nobody writes it.
        match tokio::time::timeout(limit, self.status.remove()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(k8s.cluster.name = %self.ctx.name,
                "cannot remove the status ConfigMap: {e}"),
            Err(_) => tracing::warn!(k8s.cluster.name = %self.ctx.name,
                "removing the status ConfigMap timed out"),
        }
        self.ctx.set_phase(Phase::Stopped, None);
    }
}

/// How a removal ended, on its span.
fn record_entry(span: &Span, entry: &Entry) {
    match &entry.outcome {
        Outcome::Done { .. } => {}
        Outcome::Skipped { reason } => {
            span.record("fleetscaler.skipped_reason", reason.as_str());
        }
        Outcome::Failed { error, category } => {
            span.record("error.type", category.as_str());
            span.record("otel.status_code", "error");
            span.record("otel.status_description", error.as_str());
        }
    }
}

/// What the sync waits for, with the errors that hold it up.
/// How often a sync still under way says how far it got.
const SYNC_PROGRESS: Duration = Duration::from_secs(5);

fn objects(cache: &Cache) -> usize {
    let s = cache.stats();
    s.nodes + s.pods + s.machines + s.other
}

fn waiting(cache: &Cache) -> String {
    let kinds: Vec<String> = cache.unsynced().iter().map(|k| k.describe()).collect();
    let errors = cache.sync_errors();
    if errors.is_empty() {
        format!("listing {}", kinds.join(", "))
    } else {
        format!(
            "listing {}; failing: {}",
            kinds.join(", "),
            errors.join("; ")
        )
    }
}
