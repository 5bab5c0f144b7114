//! The membership task: every `resync`, and sooner when a watch sees a change, it lists each
//! source on the management cluster (`sources`: every call with a deadline, a bounded number
//! of objects), reads each object into a cluster, and publishes what it found. A source that
//! cannot be listed keeps the clusters of its last listing: an unreachable management cluster
//! stops no running cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::merge;
use super::sources;
use super::{Found, Problem, SourceStatus, TimedError};
use crate::cluster::client::ClientError;
use crate::config::membership::MembershipConfig;
use crate::config::{ClusterConfig, FleetConfig};

/// Listings triggered by watches are at least this far apart, so a burst of changes makes
/// one listing, not one per change.
const MIN_RELIST: Duration = Duration::from_secs(1);

/// How the management cluster is reached: as leader election reaches it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Access {
    pub context: Option<String>,
    pub kubeconfigs: Vec<PathBuf>,
    pub timeout: Duration,
}

impl Access {
    pub(super) fn of(config: &FleetConfig) -> Access {
        Access {
            context: config.membership.context.clone(),
            kubeconfigs: config.hub.kubeconfigs.clone(),
            timeout: config.hub.request_timeout,
        }
    }
}

/// The sources, in the order their clusters are taken (the first to claim a name keeps it).
#[derive(Clone, Copy, Debug)]
enum Source {
    Secrets,
    ClusterProfiles,
    ManagedClusters,
}

impl Source {
    const ALL: [Source; 3] = [
        Source::Secrets,
        Source::ClusterProfiles,
        Source::ManagedClusters,
    ];

    fn name(self) -> &'static str {
        match self {
            Source::Secrets => "secrets",
            Source::ClusterProfiles => "clusterProfiles",
            Source::ManagedClusters => "managedClusters",
        }
    }

    fn enabled(self, config: &MembershipConfig) -> bool {
        match self {
            Source::Secrets => config.secrets.enabled,
            Source::ClusterProfiles => config.cluster_profiles.enabled,
            Source::ManagedClusters => config.managed_clusters.enabled,
        }
    }
}

/// What the task remembers of one source.
#[derive(Default)]
struct Memory {
    /// The clusters of the last listing, by object.
    good: BTreeMap<String, ClusterConfig>,
    problems: Vec<Problem>,
    objects: usize,
    last_sync: Option<Timestamp>,
    error: Option<TimedError>,
}

pub(super) type Watch = BoxFuture<'static, ()>;

/// Starts the task; it publishes on the returned channel (`None` until its first round).
pub(super) fn spawn(
    config: MembershipConfig,
    access: Access,
    cancel: CancellationToken,
) -> (watch::Receiver<Option<Arc<Found>>>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let task = Task {
        config,
        access,
        tx,
        memory: Source::ALL.map(|_| Memory::default()),
        logged: BTreeSet::new(),
    };
    (rx, tokio::spawn(task.run(cancel)))
}

struct Task {
    config: MembershipConfig,
    access: Access,
    tx: watch::Sender<Option<Arc<Found>>>,
    memory: [Memory; 3],
    /// Problems already logged, so each is logged once, when it appears.
    logged: BTreeSet<String>,
}

impl Task {
    async fn run(mut self, cancel: CancellationToken) {
        let mut client: Option<kube::Client> = None;
        loop {
            let started = Instant::now();
            if client.is_none() {
                let connected = tokio::select! {
                    _ = cancel.cancelled() => return,
                    c = connect(&self.access) => c,
                };
                match connected {
                    Ok(c) => client = Some(c),
                    Err(e) => self.unreachable(&e),
                }
            }
            let mut watches = Vec::new();
            if let Some(c) = &client {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    w = self.round(c) => watches = w,
                }
                // Nothing could be listed: connect again next time, re-reading the
                // kubeconfig (its credentials may have been rotated).
                if self.all_failing() {
                    client = None;
                }
            }
            self.publish();
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(self.config.resync) => {}
                _ = first_of(watches) => {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep_until(started + MIN_RELIST) => {}
                    }
                }
            }
        }
    }

    /// Lists every enabled source; returns the watches that end the wait for the next round.
    async fn round(&mut self, client: &kube::Client) -> Vec<Watch> {
        let mut watches = Vec::new();
        for (i, source) in Source::ALL.into_iter().enumerate() {
            if !source.enabled(&self.config) {
                continue;
            }
            let listed = match source {
                Source::Secrets => {
                    sources::secrets(client, &self.config, self.access.timeout).await
                }
                Source::ClusterProfiles => {
                    sources::profiles(client, &self.config, self.access.timeout).await
                }
                Source::ManagedClusters => {
                    sources::managed(client, &self.config, self.access.timeout).await
                }
            };
            let memory = &mut self.memory[i];
            match listed {
                Ok((listing, mut w)) => {
                    memory.objects = listing.objects.len();
                    let (good, problems) = merge::settle(source.name(), listing, &memory.good);
                    memory.good = good;
                    memory.problems = problems;
                    memory.last_sync = Some(Timestamp::now());
                    memory.error = None;
                    watches.append(&mut w);
                }
                Err(e) => fail(source, memory, e.to_string()),
            }
        }
        watches
    }

    fn all_failing(&self) -> bool {
        Source::ALL
            .into_iter()
            .zip(&self.memory)
            .filter(|(s, _)| s.enabled(&self.config))
            .all(|(_, m)| m.error.is_some())
    }

    /// The management cluster cannot be reached: every source keeps what it had.
    fn unreachable(&mut self, error: &ClientError) {
        let message = format!("cannot reach the management cluster: {error}");
        for (i, source) in Source::ALL.into_iter().enumerate() {
            if source.enabled(&self.config) {
                fail(source, &mut self.memory[i], message.clone());
            }
        }
    }

    fn publish(&mut self) {
        let (clusters, combined) = merge::combine(self.memory.iter().map(|m| &m.good));
        let mut problems: Vec<Problem> = self
            .memory
            .iter()
            .flat_map(|m| m.problems.iter().cloned())
            .chain(combined)
            .collect();
        problems.sort_by(|a, b| a.object.cmp(&b.object));
        self.log_new(&problems);
        let sources: Vec<SourceStatus> = Source::ALL
            .into_iter()
            .zip(&self.memory)
            .filter(|(s, _)| s.enabled(&self.config))
            .map(|(s, m)| SourceStatus {
                source: s.name(),
                objects: m.objects,
                clusters: m.good.len(),
                last_sync: m.last_sync,
                error: m.error.clone(),
            })
            .collect();
        let last_sync = sources
            .iter()
            .map(|s| s.error.is_none().then_some(s.last_sync).flatten())
            .collect::<Option<Vec<_>>>()
            .and_then(|times| times.into_iter().min());
        self.tx.send_replace(Some(Arc::new(Found {
            clusters,
            sources,
            problems,
            last_sync,
        })));
    }

    fn log_new(&mut self, problems: &[Problem]) {
        super::log_new(&mut self.logged, problems);
    }
}

fn fail(source: Source, memory: &mut Memory, message: String) {
    let changed = memory.error.as_ref().is_none_or(|e| e.message != message);
    if changed {
        tracing::warn!(
            "membership: cannot list {} (keeping its {} cluster(s)): {message}",
            source.name(),
            memory.good.len()
        );
        memory.error = Some(TimedError {
            since: Timestamp::now(),
            message,
        });
    }
}

/// The first change any watch sees; never, without watches (`select_all` of none panics).
fn first_of(watches: Vec<Watch>) -> Watch {
    if watches.is_empty() {
        return Box::pin(std::future::pending());
    }
    Box::pin(async move {
        futures::future::select_all(watches).await;
    })
}

/// A client for the management cluster: its context, else the in-cluster service account.
async fn connect(access: &Access) -> Result<kube::Client, ClientError> {
    let context = access.context.as_deref();
    crate::hub::management::client(
        &access.kubeconfigs,
        context,
        access.timeout,
        "membership.context",
    )
    .await
}
