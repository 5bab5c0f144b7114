//! The hub: one supervised runner per cluster of fleet.toml, reloads, leader election, and
//! the fleet view the HTTP API and terminal read.
//!
//! `fleet` keeps the runners and applies configuration diffs, `supervise` restarts a failed
//! runner with backoff, `reload` notices a changed fleet.toml, `membership` finds clusters
//! in the management cluster's inventory, `metrics` fills the hub's metrics snapshot from
//! the fleet view (which `/metrics` and the OTLP export encode).

pub mod fleet;
pub mod health;
pub mod leader;
pub mod management;
pub mod membership;
pub mod metrics;
pub mod reload;
pub mod shard;
mod supervise;
mod view;
pub mod what_if;

use std::path::PathBuf;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::fleet::{Fleet, ReloadStatus};
pub use self::fleet::{FleetView, HubStatus};
use self::leader::{LeaderConfig, LeaderElector, LeaderState};
use self::membership::Members;
use self::reload::FileWatch;
use self::shard::peers::Gossip;
use self::shard::{ShardConfig, Shards};
pub use self::view::ClusterReport;
use crate::cluster::client::ClientError;
use crate::cluster::gate::{self, WriteGate};
use crate::config::FleetConfig;

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("{purpose} needs a client for the management cluster: {source}")]
    ManagementClient {
        purpose: &'static str,
        #[source]
        source: ClientError,
    },
}

/// A running hub.
pub struct HubHandle {
    pub view: FleetView,
    task: JoinHandle<()>,
}

impl HubHandle {
    /// Waits until the hub has stopped every cluster (after its cancellation).
    pub async fn wait(self) {
        // The hub's task never panics by design; a panic would already have been reported.
        let _ = self.task.await;
    }
}

/// Starts the hub on `config`. With `path`, fleet.toml is re-read on SIGHUP and when it
/// changes on disk. Runs until `cancel` fires; then every cluster stops and undoes what it
/// had under way.
pub async fn start(
    config: FleetConfig,
    path: Option<PathBuf>,
    cancel: CancellationToken,
) -> Result<HubHandle, HubError> {
    let election = Election::start(&config).await?;
    let status = HubStatus {
        started: Timestamp::now(),
        config_path: path.as_ref().map(|p| p.display().to_string()),
        last_reload: None,
        leader_election: config.hub.leader_election.enabled,
        leading: election.gate.is_open(),
        leader: None,
        dry_run: config.hub.dry_run,
        sharding: None,
        membership: None,
    };
    let sharding = &config.hub.sharding;
    let instance = match (&sharding.identity, sharding.enabled) {
        (Some(identity), true) => identity.clone(),
        _ => election.identity.clone(),
    };
    let (mut fleet, view) = Fleet::new(
        election.gate.clone(),
        election.state.clone(),
        instance.clone(),
        status,
    );
    if sharding.enabled {
        fleet.shard(start_sharding(&config, instance, view.clone()).await?);
    }
    let changes = fleet.apply(&config).await;
    fleet.started_with(&config);
    tracing::info!("hub started: {}", changes.describe());
    let members = Members::start(config);
    let task = tokio::spawn(async move {
        serve(fleet, members, path, cancel).await;
        election.stop().await;
    });
    Ok(HubHandle { view, task })
}

/// Joins the replicas sharing the fleet (`hub.sharding`), telling them what this one's
/// clusters found.
async fn start_sharding(
    config: &FleetConfig,
    identity: String,
    view: FleetView,
) -> Result<Shards, HubError> {
    let s = &config.hub.sharding;
    let timeout = config.hub.request_timeout;
    let client = management_client(
        config,
        s.context.as_deref(),
        "sharding",
        "hub.sharding.context",
    )
    .await?;
    let address = s
        .advertise
        .clone()
        .or_else(|| advertised(&config.hub.listen));
    let cfg = ShardConfig::new(s, identity, address, timeout);
    let told = move || Gossip {
        address: None,
        failures: view.own_shared_failures(),
        glances: view.glances(),
    };
    Ok(Shards::start(client, cfg, told))
}

/// Where the others reach this replica: the pod's address (the chart sets `POD_IP`) or the
/// host's name, and the listen port.
pub fn advertised(listen: &str) -> Option<String> {
    let port = listen.rsplit_once(':')?.1;
    if port == "0" {
        return None;
    }
    let host = std::env::var("POD_IP")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))?;
    Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// A client of the management cluster for `purpose` (`leader election`, `sharding`), at the
/// context `setting` names.
async fn management_client(
    config: &FleetConfig,
    context: Option<&str>,
    purpose: &'static str,
    setting: &'static str,
) -> Result<kube::Client, HubError> {
    let timeout = config.hub.request_timeout;
    management::client(&config.hub.kubeconfigs, context, timeout, setting)
        .await
        .map_err(|source| HubError::ManagementClient { purpose, source })
}

/// The leader election, when fleet.toml turns it on.
struct Election {
    gate: WriteGate,
    /// This replica's name: its name in the Lease, or the host's.
    identity: String,
    state: Option<watch::Receiver<LeaderState>>,
    /// Cancelled only after every cluster has stopped: their clean-up still writes.
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Election {
    async fn start(config: &FleetConfig) -> Result<Election, HubError> {
        let le = &config.hub.leader_election;
        let cancel = CancellationToken::new();
        if !le.enabled {
            return Ok(Election {
                gate: WriteGate::always_open(),
                identity: leader::default_identity(),
                state: None,
                cancel,
                task: None,
            });
        }
        let timeout = config.hub.request_timeout;
        let kube = management_client(
            config,
            le.context.as_deref(),
            "leader election",
            "hub.leader_election.context",
        )
        .await?;
        let cfg = LeaderConfig::new(le, timeout);
        let identity = cfg.identity.clone();
        let elector = LeaderElector::new(kube, cfg);
        let state = elector.state();
        let (open, gate) = gate::channel(false);
        let task = tokio::spawn(elector.run(open, cancel.clone()));
        Ok(Election {
            gate,
            identity,
            state: Some(state),
            cancel,
            task: Some(task),
        })
    }

    /// Releases the lease (so a standby takes over at once) and waits for it.
    async fn stop(self) {
        self.cancel.cancel();
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}

/// How often the fleet's health is worked out (cheap: it reads the clusters' reports).
const HEALTH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

async fn serve(
    mut fleet: Fleet,
    mut members: Members,
    path: Option<PathBuf>,
    cancel: CancellationToken,
) {
    let mut file = path.as_deref().map(FileWatch::new);
    let mut hangup = path.as_ref().and_then(|_| hangup_signal());
    let mut poll = tokio::time::interval(reload::POLL);
    let mut health = tokio::time::interval(HEALTH_EVERY);
    let mut peers = fleet.peers();
    loop {
        let why = tokio::select! {
            _ = cancel.cancelled() => break,
            _ = health.tick() => {
                fleet.assess_health();
                continue;
            }
            Some(()) = changed(&mut peers) => {
                if let Some(changes) = fleet.reshard().await
                    && changes != fleet::Changes::default()
                {
                    tracing::info!("the replicas changed: {}", changes.describe());
                }
                continue;
            }
            () = members.changed() => {
                membership::apply(&mut fleet, &mut members).await;
                continue;
            }
            Some(()) = recv(&mut hangup) => "SIGHUP",
            _ = poll.tick() => {
                if !file.as_mut().is_some_and(FileWatch::changed) {
                    continue;
                }
                "fleet.toml changed"
            }
        };
        if let Some(path) = &path {
            reload(&mut fleet, &mut members, path, why).await;
        }
    }
    members.stop().await;
    fleet.shut_down().await;
    fleet.leave().await;
}

/// The next change of the replicas; never, without sharding.
async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) -> Option<()> {
    match rx {
        Some(rx) => rx.changed().await.ok(),
        None => std::future::pending().await,
    }
}

async fn reload(fleet: &mut Fleet, members: &mut Members, path: &std::path::Path, why: &str) {
    let status = match FleetConfig::load(path) {
        Ok(config) => {
            // fleet.toml with the clusters the inventory holds (`[membership]`).
            members.set_file(config);
            let merged = members.merged();
            fleet.hub.send_modify(|h| h.membership = merged.status);
            let config = merged.config;
            let changes = fleet.apply(&config).await;
            let mut message = changes.describe();
            if let Some(note) = fleet.needs_restart(&config) {
                message.push_str(&format!("; {note}"));
            }
            tracing::info!("reloaded {} ({why}): {message}", path.display());
            ReloadStatus {
                at: Timestamp::now(),
                ok: true,
                message,
            }
        }
        Err(e) => {
            tracing::error!("not reloading ({why}), keeping the running configuration: {e}");
            ReloadStatus {
                at: Timestamp::now(),
                ok: false,
                message: e.to_string(),
            }
        }
    };
    fleet.hub.send_modify(|h| h.last_reload = Some(status));
}

#[cfg(unix)]
type Hangup = tokio::signal::unix::Signal;
#[cfg(not(unix))]
type Hangup = ();

#[cfg(unix)]
fn hangup_signal() -> Option<Hangup> {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot listen for SIGHUP, reloading on file changes only: {e}");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangup_signal() -> Option<Hangup> {
    None
}

/// The next SIGHUP; never, without a signal stream.
async fn recv(hangup: &mut Option<Hangup>) -> Option<()> {
    #[cfg(unix)]
    if let Some(s) = hangup {
        return s.recv().await;
    }
    let _ = hangup;
    std::future::pending().await
}
