//! One cluster's supervisor: connects, runs the cluster's runner as its own task, and when
//! the runner fails or panics, reports why and starts it again after a backoff. Whatever
//! happens here stays here: other clusters never wait on it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::ClusterName;
use crate::cluster::client::{connect, load_kubeconfig};
use crate::cluster::gate::WriteGate;
use crate::cluster::report::{ClusterReport, Phase};
use crate::cluster::runner::{self, Context, RunnerSpec, Timing};

/// First wait before a failed runner is started again; it doubles up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A runner that ran this long before failing starts over at the first backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(600);

/// How a cluster is reached; a change to any of it restarts the cluster's runner.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    pub context: String,
    pub kubeconfig: Option<PathBuf>,
    pub hub_kubeconfigs: Vec<PathBuf>,
    pub timing: TimingKey,
    pub status_namespace: String,
}

/// The runner timing, comparable (a reload that changes it restarts the runner).
#[derive(Clone, Debug, PartialEq)]
pub struct TimingKey {
    pub scan_interval: Duration,
    pub debounce: Duration,
    pub request_timeout: Duration,
}

/// Everything a supervisor needs.
pub struct Supervised {
    pub name: ClusterName,
    pub connection: Connection,
    pub gate: WriteGate,
    pub spec: watch::Receiver<Arc<RunnerSpec>>,
    pub report: watch::Sender<ClusterReport>,
}

/// Runs the cluster until `cancel` fires, restarting its runner after failures.
pub async fn supervise(s: Supervised, cancel: CancellationToken) {
    let span = tracing::info_span!("cluster", k8s.cluster.name = %s.name);
    async {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let started = Instant::now();
            let failure = match attempt(&s, &cancel).await {
                Ok(()) if cancel.is_cancelled() => break,
                Ok(()) => "the runner stopped without being asked to".to_string(),
                Err(why) => why,
            };
            if started.elapsed() >= HEALTHY_RUN {
                backoff = FIRST_BACKOFF;
            }
            tracing::warn!(
                "cluster runner failed, restarting in {}s: {failure}",
                backoff.as_secs()
            );
            let message = format!("{failure} (restarting in {}s)", backoff.as_secs());
            s.report.send_modify(|r| {
                r.restarts += 1;
                r.set_phase(Phase::Failed, Some(message), Timestamp::now());
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

/// Connects and runs the runner once, in its own task so that a panic stays in it.
async fn attempt(s: &Supervised, cancel: &CancellationToken) -> Result<(), String> {
    let c = &s.connection;
    let kubeconfig =
        load_kubeconfig(c.kubeconfig.as_deref(), &c.hub_kubeconfigs).map_err(|e| e.to_string())?;
    let client = tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        client = connect(kubeconfig, &c.context, c.timing.request_timeout) => client.map_err(|e| e.to_string())?,
    };
    let ctx = Arc::new(Context {
        name: s.name.clone(),
        client,
        gate: s.gate.clone(),
        timing: Timing {
            scan_interval: c.timing.scan_interval,
            debounce: c.timing.debounce,
            request_timeout: c.timing.request_timeout,
        },
        status_namespace: c.status_namespace.clone(),
        report: s.report.clone(),
    });
    let task =
        tokio::spawn(runner::run(ctx, s.spec.clone(), cancel.child_token()).in_current_span());
    match task.await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) if e.is_panic() => Err(format!("the runner panicked: {}", panic_message(e))),
        Err(e) => Err(format!("the runner task ended: {e}")),
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
