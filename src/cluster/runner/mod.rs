//! The runner: one tokio task per cluster that keeps the cache, runs a pass when something
//! relevant happened (after a short debounce) and at least every scan interval, carries out
//! the plan, and publishes a [`ClusterReport`].
//!
//! The work of a pass lives in `pass`; what a failure means (restart, backoff) is the hub's
//! business: `run` only returns the error.

mod pass;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use jiff::Timestamp;
use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ClusterName;
use super::cache::{Cache, Update, watch as watches};
use super::error::CallError;
use super::events::{EventRecorder, RecorderSettings};
use super::gate::WriteGate;
use super::outcome::Entry;
use super::report::{ClusterReport, Phase};
use super::status::{StatusSettings, StatusWriter};
use crate::config::ClusterConfig;
use crate::engine::settings::SettingsPatch;
use crate::engine::state::EngineState;

/// What fleet.toml says about one cluster. A reload sends a new one; the runner uses it
/// from its next pass on, without restarting (its memory and caches stay).
#[derive(Clone, Debug, PartialEq)]
pub struct RunnerSpec {
    pub cluster: ClusterConfig,
    pub defaults: SettingsPatch,
    /// `hub.dry_run`, or the cluster's own `dry_run`.
    pub dry_run: bool,
}

#[derive(Clone, Debug)]
pub struct Timing {
    pub scan_interval: Duration,
    pub debounce: Duration,
    pub request_timeout: Duration,
}

impl Timing {
    /// A watch failing for longer than this makes the cache too old to act on.
    fn stale_after(&self) -> Duration {
        (self.scan_interval * 3).max(Duration::from_secs(5))
    }
}

/// What one runner is given; shared with the tasks it starts.
pub struct Context {
    pub name: ClusterName,
    pub client: kube::Client,
    pub gate: WriteGate,
    pub timing: Timing,
    pub status_namespace: String,
    pub report: watch::Sender<ClusterReport>,
}

impl Context {
    fn publish(&self, change: impl FnOnce(&mut ClusterReport)) {
        self.report.send_modify(change);
    }

    fn set_phase(&self, phase: Phase, message: Option<String>) {
        self.publish(|r| r.set_phase(phase, message, Timestamp::now()));
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("cannot discover what the cluster serves: {0}")]
    Discovery(#[source] CallError),
    #[error("the watches of the cluster ended")]
    WatchesEnded,
}

/// Runs one cluster until `cancel` fires (then returns `Ok`) or an error stops it.
pub async fn run(
    ctx: Arc<Context>,
    spec: watch::Receiver<Arc<RunnerSpec>>,
    cancel: CancellationToken,
) -> Result<(), RunnerError> {
    ctx.set_phase(
        Phase::Connecting,
        Some("asking what the cluster serves".into()),
    );
    let discovery = watches::discover(&ctx.client, ctx.timing.request_timeout);
    let served = tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        served = discovery => served.map_err(RunnerError::Discovery)?,
    };
    let dry_run = spec.borrow().dry_run;
    let status = StatusWriter::new(
        ctx.client.clone(),
        StatusSettings::new(&ctx.status_namespace, ctx.timing.request_timeout, dry_run),
        ctx.gate.clone(),
    );
    // The recorder's task ends when the runner (its last handle) is dropped.
    let (events, _) = EventRecorder::spawn(
        ctx.client.clone(),
        ctx.name.clone(),
        ctx.gate.clone(),
        RecorderSettings::new(ctx.timing.request_timeout, "fleetscaler"),
    );
    let mut runner = Runner {
        cache: Cache::new(&served.kinds),
        updates: watches::updates(&ctx.client, &served),
        ctx,
        spec,
        state: EngineState::default(),
        removals: JoinSet::new(),
        removing: HashMap::new(),
        in_flight: HashSet::new(),
        status,
        events,
        last_plan: None,
        executor: None,
    };
    runner.initializing().await;
    if !runner.sync(&cancel).await? {
        return Ok(());
    }
    runner.recover().await;
    let result = runner.serve(&cancel).await;
    runner.shut_down().await;
    result
}

struct Runner {
    ctx: Arc<Context>,
    spec: watch::Receiver<Arc<RunnerSpec>>,
    cache: Cache,
    updates: SelectAll<BoxStream<'static, Update>>,
    state: EngineState,
    /// Scale-downs under way (drains), one task each.
    removals: JoinSet<Entry>,
    /// The node and group of each removal task.
    removing: HashMap<Id, (Arc<str>, crate::engine::nodegroups::NodeGroupId)>,
    in_flight: HashSet<Arc<str>>,
    status: StatusWriter,
    events: EventRecorder,
    last_plan: Option<Arc<crate::engine::plan::Plan>>,
    /// The executor, and whether it was built for dry run.
    executor: Option<(super::executor::Executor, bool)>,
}

impl Runner {
    /// Waits until every watched kind has listed; false if cancelled first.
    async fn sync(&mut self, cancel: &CancellationToken) -> Result<bool, RunnerError> {
        let waiting = |c: &Cache| {
            let kinds: Vec<String> = c.unsynced().iter().map(|k| k.describe()).collect();
            Some(format!("listing {}", kinds.join(", ")))
        };
        self.ctx.set_phase(Phase::Syncing, waiting(&self.cache));
        while !self.cache.is_synced() {
            let update = tokio::select! {
                _ = cancel.cancelled() => return Ok(false),
                update = self.updates.next() => update.ok_or(RunnerError::WatchesEnded)?,
            };
            self.cache.apply(update, Instant::now());
        }
        let stats = self.cache.stats();
        self.ctx.publish(|r| r.cache = stats);
        Ok(true)
    }

    /// Says so once when a watch starts failing (it retries on its own; the cache goes stale
    /// if it keeps failing).
    fn log_watch_failure(&self, update: &Update) {
        if let super::cache::Change::Error(e) = &update.change
            && !self.cache.is_failing(update.kind)
        {
            tracing::warn!(k8s.cluster.name = %self.ctx.name,
                "the watch of {} failed, starting it over: {e}", update.kind.describe());
        }
    }

    /// Serves passes until cancelled.
    async fn serve(&mut self, cancel: &CancellationToken) -> Result<(), RunnerError> {
        self.ctx.set_phase(Phase::Running, None);
        let timing = self.ctx.timing.clone();
        let mut next_pass = Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                update = self.updates.next() => {
                    let update = update.ok_or(RunnerError::WatchesEnded)?;
                    self.log_watch_failure(&update);
                    let now = Instant::now();
                    if self.cache.apply(update, now) {
                        next_pass = next_pass.min(now + timing.debounce);
                    }
                }
                Some(done) = self.removals.join_next_with_id(), if !self.removals.is_empty() => {
                    self.removal_ended(done);
                }
                _ = tokio::time::sleep_until(next_pass) => {
                    self.pass().await;
                    next_pass = Instant::now() + timing.scan_interval;
                }
            }
        }
    }
}
