//! The runner: one tokio task per cluster that keeps the cache, runs a pass when something
//! relevant happened (after a short debounce) and at least every scan interval, carries out
//! the plan, and publishes a [`ClusterReport`].
//!
//! `pass` is the work of one pass; `upkeep` is what happens around passes (syncing the
//! cache, repairing what an interrupted run left, removals ending, shutdown); `liveness`
//! tells a hung API server from a quiet cluster; `infra` reads the Cluster API
//! infrastructure templates node groups scale from zero with. What a failure
//! means (restart, backoff) is the hub's business: `run` only returns the error.

mod burst;
mod idle;
pub(crate) mod infra;
mod liveness;
mod pass;
mod schedule;
mod upkeep;
mod what_if;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ClusterName;
use super::cache::{Cache, Change, Update, discovery, watch as watches};
use super::error::{CallError, Category};
use super::events::{EventRecorder, RecorderSettings};
use super::executor::Executor;
use super::fleet_inputs::FleetLink;
use super::gate::WriteGate;
use super::outcome::Entry;
use super::report::{ClusterReport, Phase};
use super::status::{StatusSettings, StatusWriter};
use crate::config::ClusterConfig;
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::plan::Plan;
use crate::engine::settings::SettingsPatch;
use crate::engine::state::EngineState;
use crate::model::MachineApis;

/// While leading, leftovers of interrupted removals are looked for this often.
const RECONCILE_EVERY: Duration = Duration::from_secs(300);

/// What fleet.toml says about one cluster. A reload sends a new one; the runner uses it
/// from its next pass on, without restarting (its memory and caches stay).
#[derive(Clone, Debug, PartialEq)]
pub struct RunnerSpec {
    pub cluster: ClusterConfig,
    pub defaults: SettingsPatch,
    /// `hub.dry_run`, or the cluster's own `dry_run`.
    pub dry_run: bool,
}

impl RunnerSpec {
    /// What `config` says about cluster `c`.
    pub fn of(config: &crate::config::FleetConfig, c: &ClusterConfig) -> Self {
        RunnerSpec {
            cluster: c.clone(),
            defaults: config.defaults.clone(),
            dry_run: c.dry_run.unwrap_or(config.hub.dry_run),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub scan_interval: Duration,
    /// A pass starts once the cluster has been quiet this long after a wake-up...
    pub debounce: Duration,
    /// ...or this long after the first wake-up of a burst, whichever comes first.
    pub debounce_max: Duration,
    /// Deadline of reads.
    pub request_timeout: Duration,
    /// Deadline of writes: with leader election, short enough that a write sent just
    /// before the lease is lost cannot land after another replica may lead.
    pub write_timeout: Duration,
}

impl Timing {
    /// A watch failing for longer than this makes the cache too old to act on.
    fn stale_after(&self) -> Duration {
        (self.scan_interval * 3).max(Duration::from_secs(5))
    }

    /// An API server that has not answered for this long is flagged: the next pass, at most
    /// a scan interval later, is skipped and says why, so a hang shows within three scan
    /// intervals of the last answer.
    fn silent_after(&self) -> Duration {
        (self.scan_interval * 2).max(Duration::from_secs(5))
    }

    /// A cache stale for this long is given up: the runner stops, and its supervisor
    /// connects again (re-reading the kubeconfig, whose credentials may have been rotated).
    fn give_up_after(&self) -> Duration {
        (self.stale_after() * 4).max(Duration::from_secs(120))
    }
}

/// What one runner is given; shared with the tasks it starts.
pub struct Context {
    pub name: ClusterName,
    pub client: kube::Client,
    pub gate: WriteGate,
    /// The fleet's inputs each pass reads (`FleetInputs`), and where it shares the capacity
    /// failures it finds.
    pub fleet: FleetLink,
    pub timing: Timing,
    pub status_namespace: String,
    /// This hub replica's name, on the events it writes.
    pub instance: String,
    pub report: watch::Sender<ClusterReport>,
    /// The engine's memory, kept across runner restarts.
    pub memory: EngineMemory,
    /// What-ifs asked of this cluster (`/api/v1/what-if`), answered between passes.
    pub what_if: crate::cluster::what_if::Inbox,
    /// The fleet's turns for engine passes.
    pub pool: crate::cluster::pool::PassPool,
}

/// The engine's memory of one cluster, kept by its supervisor: a runner that restarts (a
/// stale cache, a reconnect, a panic) picks up the backoffs, unneeded timers and scale-ups
/// in flight where the last one left them, instead of forgetting them.
#[derive(Clone, Debug, Default)]
pub struct EngineMemory(Arc<std::sync::Mutex<EngineState>>);

impl EngineMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, EngineState> {
        // A state is only ever replaced whole: one left by a panic is still consistent.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What the last runner left (taken: the runner owns it while it runs).
    pub fn take(&self) -> EngineState {
        std::mem::take(&mut *self.lock())
    }

    pub fn keep(&self, state: EngineState) {
        *self.lock() = state;
    }
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
    #[error("giving up on a cache that stays too old to act on ({0}); connecting again")]
    Stale(String),
}

impl RunnerError {
    pub fn category(&self) -> Category {
        match self {
            RunnerError::Discovery(e) => e.category(),
            RunnerError::WatchesEnded | RunnerError::Stale(_) => Category::Unavailable,
        }
    }
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
    let discovered = discovery::discover(&ctx.client, ctx.timing.request_timeout);
    let served = tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        served = discovered => served.map_err(RunnerError::Discovery)?,
    };
    for warning in &served.warnings {
        tracing::warn!(k8s.cluster.name = %ctx.name, "{warning}");
    }
    let warnings = served.warnings.clone();
    ctx.publish(|r| r.warnings = warnings);
    let dry_run = spec.borrow().dry_run;
    let status = StatusWriter::new(
        ctx.client.clone(),
        StatusSettings::new(
            &ctx.status_namespace,
            ctx.timing.write_timeout,
            dry_run,
            &ctx.instance,
        ),
        ctx.gate.clone(),
    );
    // The recorder's task ends when the runner (its last handle) is dropped.
    let (events, _) = EventRecorder::spawn(
        ctx.client.clone(),
        ctx.name.clone(),
        ctx.gate.clone(),
        RecorderSettings::new(ctx.timing.write_timeout, &ctx.instance),
    );
    let remembered = ctx.memory.take();
    let heard = super::cache::heard::Heard::new();
    let liveness = liveness::Liveness::start(
        ctx.client.clone(),
        heard.clone(),
        ctx.timing.scan_interval.min(Duration::from_secs(10)),
        ctx.timing.request_timeout,
    );
    let infra = infra::InfraTemplates::start(ctx.client.clone(), ctx.timing.request_timeout);
    let mut runner = Runner {
        liveness,
        infra,
        infra_problems: Vec::new(),
        cache: Cache::new(&served.kinds),
        updates: watches::updates(&ctx.client, &served, ctx.timing.request_timeout, heard),
        machine_apis: served.machine_apis,
        discovery_warnings: served.warnings,
        ctx,
        spec,
        state: remembered,
        removals: JoinSet::new(),
        removing: HashMap::new(),
        in_flight: HashSet::new(),
        status,
        status_dry_run: dry_run,
        events,
        last_plan: None,
        executor: None,
        reconciled: None,
        idle: idle::Idle::default(),
        learned: 0,
        pending_answered: 0,
    };
    runner.initializing().await;
    if !runner.sync(&cancel).await? {
        return Ok(());
    }
    let result = runner.serve(&cancel).await;
    runner.shut_down().await;
    result
}

struct Runner {
    ctx: Arc<Context>,
    spec: watch::Receiver<Arc<RunnerSpec>>,
    cache: Cache,
    liveness: liveness::Liveness,
    infra: infra::InfraTemplates,
    /// The infrastructure templates that could not be read, with why (for the plan).
    infra_problems: Vec<String>,
    updates: watches::Updates,
    /// The version of each Machine API group the cluster is read and written through.
    machine_apis: MachineApis,
    /// What discovery found wrong (a Machine API in versions the hub cannot read): repeated
    /// in every plan, as it holds until the hub connects again.
    discovery_warnings: Vec<crate::model::Warning>,
    state: EngineState,
    /// Scale-downs under way (drains), one task each.
    removals: JoinSet<Entry>,
    /// The node and group of each removal task.
    removing: HashMap<Id, (Arc<str>, NodeGroupId)>,
    in_flight: HashSet<Arc<str>>,
    status: StatusWriter,
    /// Whether the status writer says "dry run".
    status_dry_run: bool,
    events: EventRecorder,
    last_plan: Option<Arc<Plan>>,
    /// The executor, and whether it was built for dry run.
    executor: Option<(Executor, bool)>,
    /// When leftovers were last repaired while this replica could write.
    reconciled: Option<Instant>,
    /// The last full pass's inputs, and whether it left the cluster settled.
    idle: idle::Idle,
    /// Counts what the runner learned between passes that a pass reads (a removal ended,
    /// infrastructure templates read): part of a pass's inputs.
    learned: u64,
    /// `Cache::turned_pending` when the last pass read the cache.
    pending_answered: u64,
}

/// However the runner ends (an error, cancellation, a panic unwinding through it), the
/// engine's memory goes back to the supervisor for the next one: nothing per pass.
impl Drop for Runner {
    fn drop(&mut self) {
        self.ctx.memory.keep(std::mem::take(&mut self.state));
    }
}

impl Runner {
    /// Serves passes until cancelled.
    async fn serve(&mut self, cancel: &CancellationToken) -> Result<(), RunnerError> {
        self.ctx.set_phase(Phase::Running, None);
        let timing = self.ctx.timing.clone();
        let mut schedule = schedule::Schedule::new(
            timing.debounce,
            timing.debounce_max,
            timing.scan_interval,
            Instant::now(),
        );
        let mut asks = self.ctx.what_if.take();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                Some(ask) = what_if::next(&mut asks) => self.answer_what_if(ask).await,
                update = self.updates.next() => {
                    let update = update.ok_or(RunnerError::WatchesEnded)?;
                    let now = Instant::now();
                    if self.apply_update(update, now) {
                        schedule.woken(now);
                    }
                }
                Some(done) = self.removals.join_next_with_id(), if !self.removals.is_empty() => {
                    self.removal_ended(done);
                }
                // A template read for a group at zero may let its pending pods scale it up.
                _ = self.infra.read_done() => {
                    self.learned += 1;
                    schedule.woken(Instant::now());
                }
                _ = tokio::time::sleep_until(schedule.next()) => {
                    if self.batch_waits(&mut schedule) {
                        continue;
                    }
                    let limit = timing.give_up_after();
                    if let Some(why) = self.untrusted(Instant::now(), limit, limit) {
                        return Err(RunnerError::Stale(why));
                    }
                    // A pass against a hung API server waits out its calls' deadlines one
                    // after another: a shutdown or reload does not wait for it. Dropping it
                    // midway is safe (its writes are; `shut_down` repairs the rest).
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok(()),
                        _ = self.reconcile_if_due() => {}
                    }
                    let Some(cause) = self.pass_cause() else {
                        schedule.passed(Instant::now());
                        continue;
                    };
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok(()),
                        _ = self.pass(cause) => {}
                    }
                    schedule.passed(Instant::now());
                }
            }
        }
    }

    /// What a pass would decide from, now.
    fn inputs(&self, now: jiff::Timestamp) -> idle::Inputs {
        idle::Inputs {
            cache: self.cache.changes(),
            learned: self.learned,
            spec: self.spec.borrow().clone(),
            policy: self.ctx.fleet.policy(self.ctx.name.as_str(), now),
        }
    }

    /// Why the pass due now runs, or `None` to skip a pass that would decide as the last one
    /// did (`idle`) on a cache the liveness probe and the watches vouch for; a skipped look
    /// is recorded as the main loop's activity.
    fn pass_cause(&mut self) -> Option<idle::Cause> {
        let at = Instant::now();
        if self.untrusted_now(at).is_some() {
            return Some(idle::Cause::Untrusted);
        }
        let now = Timestamp::now();
        if let Some(cause) = self.idle.cause(&self.inputs(now), at) {
            return Some(cause);
        }
        self.ctx.publish(|r| {
            r.counters.idle_skips += 1;
            r.counters.last_activity.insert("main", now);
            r.looked_at = Some(now);
        });
        None
    }

    /// Whether the batch waits on: only looked at before it is due, or held for another
    /// quiet window (within its maximum) while its burst is still arriving, so that the pass
    /// decides on the whole burst. A new burst the scheduler cannot judge within the maximum
    /// is decided on at once.
    fn batch_waits(&mut self, schedule: &mut schedule::Schedule) -> bool {
        let now = Instant::now();
        if !schedule.holdable(now) {
            return false;
        }
        schedule.looked(now);
        let due = schedule.is_due(now);
        let Some(burst) = burst::still_arriving(self.cache.snapshot()) else {
            return !due;
        };
        let name = &self.ctx.name;
        if let Some(per_sec) = self.beyond_the_wait(&burst, schedule, now) {
            let (judged, to_come) = (burst.judged, burst.to_come);
            tracing::debug!(k8s.cluster.name = %name, "pass not held: {judged} pods of the burst judged, {to_come} to come, at {per_sec:.0} a second more than the wait would see ({})", burst.why);
            return false;
        }
        if !due {
            return true;
        }
        tracing::debug!(k8s.cluster.name = %name, "pass held: {}", burst.why);
        schedule.hold(now)
    }

    /// The scheduler's pace (pods turned unschedulable a second) if `burst` is new (every
    /// pod of it judged turned unschedulable since the last pass: later batches of a burst
    /// are batched whole, as before) and too large to wait for at that pace.
    fn beyond_the_wait(
        &self,
        burst: &burst::Arriving,
        schedule: &mut schedule::Schedule,
        now: Instant,
    ) -> Option<f64> {
        let turned = self.cache.turned_pending();
        let since_pass = turned.saturating_sub(self.pending_answered);
        if u64::try_from(burst.judged).unwrap_or(u64::MAX) > since_pass {
            return None;
        }
        let per_sec = schedule.pace(now, turned)?;
        burst.beyond(per_sec, schedule.max()).then_some(per_sec)
    }

    /// Why the cached view cannot be acted on: a watch failing for longer than `stale`, or
    /// the API server silent for longer than `silent`.
    fn untrusted(&self, now: Instant, stale: Duration, silent: Duration) -> Option<String> {
        self.cache
            .stale(now, stale)
            .or_else(|| self.liveness.silent(now, silent))
    }

    /// `untrusted` with the limits of a pass.
    fn untrusted_now(&self, now: Instant) -> Option<String> {
        let t = &self.ctx.timing;
        self.untrusted(now, t.stale_after(), t.silent_after())
    }

    /// Takes one watch update into the cache (saying so once when its watch starts
    /// failing); true when it should wake the runner.
    fn apply_update(&mut self, update: Update, now: Instant) -> bool {
        self.log_watch_failure(&update);
        self.cache.apply(update, now)
    }

    /// Says so once when a watch starts failing (it starts over on its own; the cache goes
    /// stale if it keeps failing).
    fn log_watch_failure(&self, update: &Update) {
        match &update.change {
            Change::Error(e) if !self.cache.is_failing(update.kind) => {
                tracing::warn!(k8s.cluster.name = %self.ctx.name,
                    "the watch of {} failed, resuming it: {e}", update.kind.describe());
            }
            Change::Expired(why) => {
                tracing::info!(k8s.cluster.name = %self.ctx.name,
                    "the watch of {} expired, listing again: {why}", update.kind.describe());
            }
            _ => {}
        }
    }
}
