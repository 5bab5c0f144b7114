//! Fleet membership beyond fleet.toml: clusters found in the management cluster's inventory
//! (`[membership]`), merged with fleet.toml's own and applied as a diff, exactly as a
//! reload: a found cluster added, removed or changed starts, stops or restarts that cluster
//! alone.
//!
//! `task` lists (and watches) the sources with deadlines and publishes what it found on a
//! `watch` channel; `sources` lists each source; `secrets`, `profiles` and `managed` read one
//! object each into a cluster (pure), with `kubeconfig` building its kubeconfig in memory and
//! `annotations` its settings; `merge` keeps each source's last good clusters and puts
//! fleet.toml first. [`Members`] is what the hub's loop holds.

mod annotations;
mod kubeconfig;
mod list;
mod managed;
mod merge;
mod profiles;
mod secrets;
mod sources;
mod task;

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use self::annotations::{AnnotationError, OverridesError};
pub use self::kubeconfig::{KubeconfigError, NotBase64};
pub use self::managed::{ManagedError, TokenError};
pub use self::merge::merge;
pub use self::profiles::ProfileError;
pub use self::secrets::SecretError;
use self::task::Access;
use super::fleet::Fleet;
use crate::config::membership::MembershipConfig;
use crate::config::{ClusterConfig, FleetConfig};

/// At most this many clusters are taken from the inventory, and read from each source.
pub const MAX_CLUSTERS: usize = 1000;
/// Problems listed in the status (all are logged, each once).
const MAX_PROBLEMS_SHOWN: usize = 100;

/// An object of the inventory that gives no cluster (or not the one it would), and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `Secret fleet/east`, `ClusterProfile ns/name`, `ManagedCluster name`, or a source.
    pub object: String,
    pub message: String,
}

/// Logs the problems not in `logged` yet (once each, not at every resync), and remembers
/// these as the ones logged.
fn log_new(logged: &mut BTreeSet<String>, problems: &[Problem]) {
    let now: BTreeSet<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.object, p.message))
        .collect();
    for line in now.difference(logged) {
        tracing::warn!("membership: {line}");
    }
    *logged = now;
}

/// Why an object of the inventory gives no cluster: what its source's reader said.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Managed(#[from] ManagedError),
}

/// Why a source could not be listed, since when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TimedError {
    pub since: Timestamp,
    pub message: String,
}

/// One source as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// `secrets`, `clusterProfiles` or `managedClusters`.
    pub source: &'static str,
    /// Objects read at its last listing.
    pub objects: usize,
    /// Clusters taken from them.
    pub clusters: usize,
    /// Its last listing without an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<Timestamp>,
    /// While listing fails: why (its last clusters are kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<TimedError>,
}

/// The inventory as `/api/v1/fleet` shows it (`hub.membership`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MembershipStatus {
    pub sources: Vec<SourceStatus>,
    /// Clusters of the inventory the hub runs (fleet.toml's own not counted).
    pub clusters: usize,
    /// Objects that give no cluster, each with why, by object (the first 100).
    pub errors: Vec<Problem>,
    /// Problems beyond those listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_errors: usize,
    /// When every source was last listed without an error.
    pub last_sync: Option<Timestamp>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What one round of the task found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    pub clusters: Vec<ClusterConfig>,
    pub sources: Vec<SourceStatus>,
    pub problems: Vec<Problem>,
    pub last_sync: Option<Timestamp>,
}

/// fleet.toml as last loaded, and the inventory's task when `[membership]` is on.
pub struct Members {
    file: FleetConfig,
    running: Option<Running>,
    /// The task's last round; kept while a restarted task has not published yet, so that a
    /// change of `[membership]` does not stop the clusters it found.
    found: Option<Arc<Found>>,
    /// The found clusters as last merged: a round that changes none applies nothing.
    merged: Option<Vec<ClusterConfig>>,
    /// Conflicts with fleet.toml already logged.
    logged: BTreeSet<String>,
}

struct Running {
    config: MembershipConfig,
    access: Access,
    found: watch::Receiver<Option<Arc<Found>>>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// The configuration to apply, and the inventory's state to show.
pub struct Merged {
    pub config: FleetConfig,
    pub status: Option<MembershipStatus>,
    /// Whether the found clusters differ from those merged last time.
    pub clusters_changed: bool,
}

impl Members {
    /// Starts the inventory's task if `file` turns membership on.
    pub fn start(file: FleetConfig) -> Members {
        let mut members = Members {
            file,
            running: None,
            found: None,
            merged: None,
            logged: BTreeSet::new(),
        };
        members.follow_file();
        members
    }

    /// A reloaded fleet.toml: the task is restarted if `[membership]` or the way to the
    /// management cluster changed, stopped if membership is now off.
    pub fn set_file(&mut self, file: FleetConfig) {
        self.file = file;
        self.follow_file();
    }

    fn follow_file(&mut self) {
        let wanted = self
            .file
            .membership
            .enabled
            .then(|| (self.file.membership.clone(), Access::of(&self.file)));
        let same = match (&self.running, &wanted) {
            (Some(r), Some((config, access))) => r.config == *config && r.access == *access,
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        if let Some(old) = self.running.take() {
            old.stop.cancel();
        }
        let Some((config, access)) = wanted else {
            self.found = None;
            return;
        };
        let stop = CancellationToken::new();
        let (found, task) = task::spawn(config.clone(), access.clone(), stop.clone());
        self.running = Some(Running {
            config,
            access,
            found,
            stop,
            task,
        });
    }

    /// Resolves when the task has published a new round; never without a task.
    pub async fn changed(&mut self) {
        let Some(running) = self.running.as_mut() else {
            return std::future::pending().await;
        };
        if running.found.changed().await.is_err() {
            // The task ended (it only does when stopped): nothing more will come.
            return std::future::pending().await;
        }
        if let Some(found) = running.found.borrow_and_update().clone() {
            self.found = Some(found);
        }
    }

    /// fleet.toml with the clusters found, and the inventory's state.
    pub fn merged(&mut self) -> Merged {
        let clusters = self.found.as_ref().map_or(&[][..], |f| &f.clusters[..]);
        let (config, conflicts) = merge(&self.file, clusters);
        let clusters_changed = self.merged.as_deref() != Some(clusters);
        self.merged = Some(clusters.to_vec());
        self.log_conflicts(&conflicts);
        let status = self.file.membership.enabled.then(|| {
            let found = self.found.as_deref().cloned().unwrap_or_default();
            let mut problems = found.problems;
            problems.extend(conflicts);
            problems.sort_by(|a, b| a.object.cmp(&b.object));
            let more_errors = problems.len().saturating_sub(MAX_PROBLEMS_SHOWN);
            problems.truncate(MAX_PROBLEMS_SHOWN);
            MembershipStatus {
                sources: found.sources,
                clusters: config
                    .clusters
                    .len()
                    .saturating_sub(self.file.clusters.len()),
                errors: problems,
                more_errors,
                last_sync: found.last_sync,
            }
        });
        Merged {
            config,
            status,
            clusters_changed,
        }
    }

    fn log_conflicts(&mut self, conflicts: &[Problem]) {
        log_new(&mut self.logged, conflicts);
    }

    /// Stops the task and waits for it.
    pub async fn stop(self) {
        if let Some(running) = self.running {
            running.stop.cancel();
            let _ = running.task.await;
        }
    }
}

/// A Secret of the inventory read into a cluster, as the hub reads it: pure, bounded, never
/// a panic, and an error names what is wrong without quoting a credential. For tests and
/// tools; the hub's own listing calls it for each Secret.
pub fn read_secret(
    secret: &k8s_openapi::api::core::v1::Secret,
    source: &crate::config::membership::SecretsSource,
) -> Result<ClusterConfig, ReadError> {
    Ok(secrets::read(secret, source)?)
}

/// A ClusterProfile read into a cluster, as [`read_secret`].
pub fn read_cluster_profile(
    profile: &kube::api::DynamicObject,
    source: &crate::config::membership::ClusterProfilesSource,
) -> Result<ClusterConfig, ReadError> {
    Ok(profiles::read(profile, source)?)
}

/// A ManagedCluster read into a cluster with its ManagedServiceAccount's token Secret (or
/// why there is none), as [`read_secret`].
pub fn read_managed_cluster(
    cluster: &kube::api::DynamicObject,
    token: Result<&k8s_openapi::api::core::v1::Secret, TokenError>,
) -> Result<ClusterConfig, ReadError> {
    Ok(managed::read(cluster, token)?)
}

/// A new round of the inventory: applied (when its clusters changed) as a reload applies
/// fleet.toml, and shown in the hub's status.
pub(super) async fn apply(fleet: &mut Fleet, members: &mut Members) {
    let merged = members.merged();
    fleet.hub.send_modify(|h| h.membership = merged.status);
    if merged.clusters_changed {
        let changes = fleet.apply(&merged.config).await;
        if changes != Default::default() {
            tracing::info!("the inventory changed: {}", changes.describe());
        }
    }
}
