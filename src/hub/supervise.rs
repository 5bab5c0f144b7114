//! One cluster's supervisor: connects, runs the cluster's runner as its own task, and when
//! the runner fails or panics, reports why and starts it again after a backoff. Whatever
//! happens here stays here: other clusters never wait on it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::ClusterName;
use crate::cluster::client::{connect_as, inline_kubeconfig, user_agent};
use crate::cluster::error::Category;
use crate::cluster::fleet_inputs::FleetLink;
use crate::cluster::gate::WriteGate;
use crate::cluster::kubeconfig::{load_context, server_of};
use crate::cluster::report::{ClusterReport, Phase};
use crate::cluster::runner::{self, Context, EngineMemory, RunnerError, RunnerSpec, Timing};
use crate::config::membership::Discovered;

/// First wait before a failed runner is started again; it doubles up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The least wait after a failure that will not pass by itself (403, an untrusted certificate).
const PERMANENT_BACKOFF: Duration = Duration::from_secs(30);
/// A runner that ran this long before failing starts over at the first backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(600);

/// How a cluster is reached; a change to any of it restarts the cluster's runner.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    pub context: String,
    pub kubeconfig: Option<PathBuf>,
    pub hub_kubeconfigs: Vec<PathBuf>,
    /// For a cluster found in the management cluster's inventory: where, and its kubeconfig
    /// (in memory), used instead of the files. A changed credential restarts the runner.
    pub discovered: Option<Discovered>,
    /// A reload that changes it restarts the runner.
    pub timing: Timing,
    pub status_namespace: String,
}

/// Everything a supervisor needs.
pub struct Supervised {
    pub name: ClusterName,
    pub connection: Connection,
    pub gate: WriteGate,
    /// The fleet's inputs to the cluster's passes.
    pub fleet: FleetLink,
    /// This hub replica's name (on events).
    pub instance: String,
    pub spec: watch::Receiver<Arc<RunnerSpec>>,
    pub report: watch::Sender<ClusterReport>,
    /// What-ifs asked of this cluster, for whichever runner is running.
    pub what_if: crate::cluster::what_if::Inbox,
    /// The fleet's turns for engine passes.
    pub pool: crate::cluster::pool::PassPool,
}

/// Runs the cluster until `cancel` fires, restarting its runner after failures.
pub async fn supervise(s: Supervised, cancel: CancellationToken) {
    supervise_with(s, cancel, runner::run).await
}

/// [`supervise`] with the runner as a parameter, so that tests can give it one that fails.
async fn supervise_with<R, F>(s: Supervised, cancel: CancellationToken, run: R)
where
    R: Fn(Arc<Context>, watch::Receiver<Arc<RunnerSpec>>, CancellationToken) -> F,
    F: Future<Output = Result<(), RunnerError>> + Send + 'static,
{
    let span = tracing::info_span!("cluster", k8s.cluster.name = %s.name);
    async {
        let mut backoff = FIRST_BACKOFF;
        let memory = EngineMemory::default();
        loop {
            let started = Instant::now();
            let Failure {
                message: failure,
                category,
                misconfigured,
            } = match attempt(&s, &cancel, &run, &memory).await {
                Ok(()) if cancel.is_cancelled() => break,
                Ok(()) => Failure::of(
                    "the runner stopped without being asked to".to_string(),
                    Category::Other,
                ),
                Err(why) => why,
            };
            if started.elapsed() >= HEALTHY_RUN {
                backoff = FIRST_BACKOFF;
            }
            // What will not pass by itself (refused credentials, an untrusted certificate, a
            // broken kubeconfig) is not knocked on every second: someone has to fix it.
            if matches!(
                category,
                Category::Forbidden | Category::Tls | Category::Invalid
            ) {
                backoff = backoff.max(PERMANENT_BACKOFF);
            }
            // A configuration mistake is not an outage: the cluster is reported misconfigured
            // (not counted against the fleet's health) until its configuration changes.
            let (phase, what) = if misconfigured {
                (
                    Phase::Misconfigured,
                    "cluster is misconfigured, trying again",
                )
            } else {
                (Phase::Failed, "cluster runner failed, restarting")
            };
            tracing::warn!("{what} in {}s: {failure}", backoff.as_secs());
            let message = format!(
                "{failure} ({}; {} in {}s)",
                category.as_str(),
                if misconfigured {
                    "trying again"
                } else {
                    "restarting"
                },
                backoff.as_secs()
            );
            s.report.send_modify(|r| {
                r.restarts += 1;
                r.counters.record_error(category);
                r.set_phase(phase, Some(message), Timestamp::now());
            });
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        s.report
            .send_modify(|r| r.set_phase(Phase::Stopped, None, Timestamp::now()));
    }
    .instrument(span)
    .await
}

/// Why an attempt ended.
struct Failure {
    message: String,
    category: Category,
    /// The cluster's configuration cannot be used (a context not in its kubeconfig, a
    /// kubeconfig that does not parse as one): someone has to fix fleet.toml or the file.
    misconfigured: bool,
}

impl Failure {
    fn of(message: String, category: Category) -> Self {
        Failure {
            message,
            category,
            misconfigured: false,
        }
    }
}

/// The failure to build a client: a configuration mistake when it will not pass by itself.
fn configuration(e: crate::cluster::client::ClientError) -> Failure {
    let (message, category) = classify(e);
    Failure {
        message,
        misconfigured: category == Category::Invalid,
        category,
    }
}

/// A kubeconfig that cannot be read or used needs someone to fix it; a credential plugin
/// that failed may do better next time.
fn classify(e: crate::cluster::client::ClientError) -> (String, Category) {
    use crate::cluster::client::ClientError;
    let category = match &e {
        // A file not there yet (a Secret being mounted) or a plugin that failed may do
        // better next time.
        ClientError::ReadKubeconfig { .. }
        | ClientError::KubeconfigFile(crate::files::FileError::Io { .. })
        | ClientError::DefaultKubeconfig { .. }
        | ClientError::Plugin { .. } => Category::Unavailable,
        // Too large, a device, not text: as wrong next time.
        ClientError::KubeconfigFile(_) => Category::Invalid,
        ClientError::Build { .. } => Category::Other,
        ClientError::Context { .. }
        | ClientError::UnknownContext { .. }
        | ClientError::Invalid { .. }
        | ClientError::Inline { .. }
        | ClientError::InCluster { .. } => Category::Invalid,
    };
    (e.to_string(), category)
}

/// Connects and runs the runner once, in its own task so that a panic stays in it.
async fn attempt<R, F>(
    s: &Supervised,
    cancel: &CancellationToken,
    run: &R,
    memory: &EngineMemory,
) -> Result<(), Failure>
where
    R: Fn(Arc<Context>, watch::Receiver<Arc<RunnerSpec>>, CancellationToken) -> F,
    F: Future<Output = Result<(), RunnerError>> + Send + 'static,
{
    let c = &s.connection;
    let kubeconfig = match &c.discovered {
        Some(found) => inline_kubeconfig(found),
        None => load_context(c.kubeconfig.as_deref(), &c.hub_kubeconfigs, &c.context),
    }
    .map_err(configuration)?;
    // Every failure of the runner says where it was talking to.
    let target = match server_of(&kubeconfig, &c.context) {
        Some(server) => format!("server {server}, context {}", c.context),
        None => format!("context {}", c.context),
    };
    // Every request says which replica sent it (the API server's audit log keeps it).
    let agent = user_agent(Some(&s.instance));
    let client = tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        client = connect_as(kubeconfig, &c.context, c.timing.request_timeout, &agent) => client.map_err(configuration)?,
    };
    let ctx = Arc::new(Context {
        name: s.name.clone(),
        client,
        gate: s.gate.clone(),
        fleet: s.fleet.clone(),
        timing: c.timing.clone(),
        status_namespace: c.status_namespace.clone(),
        instance: s.instance.clone(),
        report: s.report.clone(),
        memory: memory.clone(),
        what_if: s.what_if.clone(),
        pool: s.pool.clone(),
    });
    let task = tokio::spawn(run(ctx, s.spec.clone(), cancel.child_token()).in_current_span());
    match task.await {
        Ok(result) => result.map_err(|e| Failure::of(format!("{e} ({target})"), e.category())),
        Err(e) if e.is_panic() => Err(Failure::of(
            format!("the runner panicked: {}", panic_message(e)),
            Category::Other,
        )),
        Err(e) => Err(Failure::of(
            format!("the runner task ended: {e}"),
            Category::Other,
        )),
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    let payload = e.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::cluster::report::ClusterReport;

    use crate::cluster::client::TEST_KUBECONFIG as KUBECONFIG;

    fn supervised(dir: &std::path::Path) -> (Supervised, watch::Receiver<ClusterReport>) {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let name = ClusterName::new("a");
        let (report, report_rx) =
            watch::channel(ClusterReport::new(name.clone(), false, Timestamp::now()));
        let spec = RunnerSpec {
            cluster: serde_json::from_value(serde_json::json!({"name": "a"})).unwrap(),
            defaults: Default::default(),
            dry_run: false,
        };
        let (_, spec_rx) = watch::channel(Arc::new(spec));
        let s = Supervised {
            name,
            connection: Connection {
                context: "east".into(),
                kubeconfig: Some(path),
                hub_kubeconfigs: Vec::new(),
                discovered: None,
                timing: Timing {
                    scan_interval: Duration::from_secs(10),
                    debounce: Duration::from_secs(1),
                    debounce_max: Duration::from_secs(2),
                    request_timeout: Duration::from_secs(1),
                    write_timeout: Duration::from_secs(1),
                },
                status_namespace: "ns".into(),
            },
            gate: WriteGate::always_open(),
            fleet: FleetLink::never(),
            instance: "test".into(),
            spec: spec_rx,
            report,
            what_if: crate::cluster::what_if::inbox().1,
            pool: Default::default(),
        };
        (s, report_rx)
    }

    /// Issue 25, point 3: a mistyped context is a misconfigured cluster, said in the words
    /// check-config uses, never a runner started on it.
    #[tokio::test(start_paused = true)]
    async fn a_context_not_in_the_kubeconfig_is_a_misconfigured_cluster() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-sup-ctx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut s, mut report) = supervised(&dir);
        s.connection.context = "esat".into();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let run = move |_ctx, _spec, _cancel: CancellationToken| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Ok(()) }
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(supervise_with(s, cancel.clone(), run));
        let seen = report
            .wait_for(|r| r.phase == Phase::Misconfigured)
            .await
            .unwrap()
            .clone();
        let message = seen.message.unwrap_or_default();
        let file = dir.join("kubeconfig");
        assert!(
            message.starts_with(&format!(
                "context \"esat\" is not in {} (its contexts: east)",
                file.display()
            )),
            "{message}"
        );
        assert!(message.contains("trying again in 30s"), "{message}");
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        cancel.cancel();
        task.await.unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_runner_is_reported_and_started_again_after_a_backoff() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-sup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (s, mut report) = supervised(&dir);
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = attempts.clone();
        let run = move |_ctx, _spec, cancel: CancellationToken| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n > 0, "boom on the first run");
                cancel.cancelled().await;
                Ok(())
            }
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(supervise_with(s, cancel.clone(), run));
        let failed = report
            .wait_for(|r| r.phase == Phase::Failed)
            .await
            .unwrap()
            .clone();
        assert_eq!(failed.restarts, 1);
        let message = failed.message.unwrap_or_default();
        assert!(
            message.contains("panicked") && message.contains("boom"),
            "{message}"
        );
        assert!(message.contains("restarting in 1s"), "{message}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            2,
            "started again after 1 s"
        );
        cancel.cancel();
        task.await.unwrap();
        assert_eq!(report.borrow().phase, Phase::Stopped);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Seed of issue 12: a restart forgot backoffs, unneeded timers and scale-ups in flight.
    #[tokio::test(start_paused = true)]
    async fn the_engines_memory_outlives_a_runner_restart() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-sup3-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (s, mut report) = supervised(&dir);
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = attempts.clone();
        let (seen_tx, mut seen) = watch::channel(None);
        let run = move |ctx: Arc<Context>, _spec, cancel: CancellationToken| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let seen_tx = seen_tx.clone();
            async move {
                let mut state = ctx.memory.take();
                if n == 0 {
                    let g =
                        crate::engine::nodegroups::NodeGroupId::parse("MachineSet/ns/g").unwrap();
                    state.record_scale_up(&g, 2, Timestamp::UNIX_EPOCH);
                    ctx.memory.keep(state);
                    return Err(RunnerError::WatchesEnded);
                }
                seen_tx.send_replace(Some(state));
                cancel.cancelled().await;
                Ok(())
            }
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(supervise_with(s, cancel.clone(), run));
        report.wait_for(|r| r.restarts == 1).await.unwrap();
        let state = seen
            .wait_for(Option::is_some)
            .await
            .unwrap()
            .clone()
            .unwrap();
        assert_eq!(state.scale_ups["MachineSet/ns/g"][0].nodes, 2);
        cancel.cancel();
        task.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Seed of issue 12: a 403 got the same restart backoff as an outage, and its category
    /// was lost in a string.
    #[tokio::test(start_paused = true)]
    async fn a_refusal_waits_longer_and_keeps_its_category() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-sup4-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (s, mut report) = supervised(&dir);
        let run = |_ctx, _spec, _cancel| async {
            let status: kube::core::Status = serde_json::from_value(serde_json::json!({
                "code": 403, "reason": "Forbidden", "message": "nodes is forbidden"
            }))
            .unwrap();
            Err(RunnerError::Discovery(
                crate::cluster::error::CallError::Api {
                    op: "discovery".into(),
                    source: kube::Error::Api(Box::new(status)),
                },
            ))
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(supervise_with(s, cancel.clone(), run));
        let r = report.wait_for(|r| r.restarts == 1).await.unwrap().clone();
        let message = r.message.unwrap_or_default();
        assert!(
            message.contains("(forbidden; restarting in 30s)"),
            "{message}"
        );
        assert_eq!(r.counters.errors.get("configurationError"), Some(&1));
        cancel.cancel();
        task.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_kubeconfig_backs_off_doubling() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-sup2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut s, mut report) = supervised(&dir);
        s.connection.kubeconfig = Some(dir.join("missing"));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(supervise(s, cancel.clone()));
        let r = report.wait_for(|r| r.restarts == 3).await.unwrap().clone();
        let message = r.message.unwrap_or_default();
        assert!(
            message.contains("missing") && message.contains("restarting in 4s"),
            "{message}"
        );
        cancel.cancel();
        task.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
