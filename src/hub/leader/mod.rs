//! Leader election among hub replicas, on a `coordination.k8s.io/v1` Lease, the way
//! client-go's `leaderelection` does it (and upstream's cluster-autoscaler with it).
//!
//! A replica takes the lease when it is free or expired, renews it every `retry_period`, and
//! opens the [`WriteGate`](crate::cluster::gate::WriteGate) while it holds it. The gate closes
//! **at once** when a renewal has not succeeded within `renew_deadline` (before the lease can
//! expire for others, since `renew_deadline < lease_duration`) or when another holder is
//! seen: a replica that lost the lease stops writing before anyone else starts. Unlike
//! upstream, which exits on losing the lease, the replica goes back to standby and keeps its
//! caches warm. On cancellation it closes the gate and releases the lease (no holder), so a
//! standby takes over on its next try instead of after a lease duration.
//!
//! [`decide`] holds the pure decision; [`LeaderElector`] the loop, with [`LeaderState`]
//! published on a `watch` channel for the HTTP API.

mod decide;
mod store;
#[cfg(test)]
mod tests;

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use jiff::Timestamp;
use kube::Api;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use decide::{Decision, LeaseRecord, Observer};
use store::{KubeLeases, LeaseStore};

use crate::cluster::error::CallError;
use crate::config::LeaderElection;

/// The election's settings: `hub.leader_election` of fleet.toml, with the identity resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease; must differ between replicas.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Deadline of each API call (a renewal is also bounded by `renew_deadline`).
    pub request_timeout: Duration,
}

impl LeaderConfig {
    pub fn new(settings: &LeaderElection, request_timeout: Duration) -> Self {
        LeaderConfig {
            namespace: settings.namespace.clone(),
            lease_name: settings.lease_name.clone(),
            identity: settings.identity.clone().unwrap_or_else(default_identity),
            lease_duration: settings.lease_duration,
            renew_deadline: settings.renew_deadline,
            retry_period: settings.retry_period,
            request_timeout,
        }
    }
}

/// `<pod or host name>_<random hex>`: the host name says which replica holds the lease, the
/// suffix keeps two processes on one host (or a restarted pod) apart, as client-go's
/// examples do. One per process, so the traces' `service.instance.id` is the lease's name.
pub fn default_identity() -> String {
    static IDENTITY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IDENTITY.get_or_init(new_identity).clone()
}

fn new_identity() -> String {
    let host = ["POD_NAME", "HOSTNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "fleetscaler".to_string());
    // RandomState is seeded from the OS per process: random enough for a name.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Timestamp::now().as_nanosecond().unsigned_abs());
    format!("{host}_{:08x}", h.finish() as u32)
}

/// Who holds the lease, as this replica last saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderState {
    pub identity: String,
    /// This replica holds the lease (its gate is open).
    pub leading: bool,
    /// The holder last seen; `None` before the first read or when the lease is free.
    pub holder: Option<String>,
    pub transitions: i32,
    /// The last failure to read, take or renew the lease, while it lasts (cleared by the
    /// next success).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<LeaseError>,
}

/// A failed lease call, for the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeaseError {
    pub since: Timestamp,
    pub message: String,
}

/// One replica's elector. [`LeaderElector::state`] can be watched before and while it runs.
pub struct LeaderElector {
    client: kube::Client,
    cfg: LeaderConfig,
    state: watch::Sender<LeaderState>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, cfg: LeaderConfig) -> Self {
        let state = watch::Sender::new(LeaderState {
            identity: cfg.identity.clone(),
            leading: false,
            holder: None,
            transitions: 0,
            error: None,
        });
        LeaderElector { client, cfg, state }
    }

    pub fn state(&self) -> watch::Receiver<LeaderState> {
        self.state.subscribe()
    }

    /// Runs until `cancel`: opens `gate` while this replica holds the lease, closes it the
    /// moment it may not, and releases the lease on the way out.
    pub async fn run(self, gate: watch::Sender<bool>, cancel: CancellationToken) {
        let store = KubeLeases {
            api: Api::namespaced(self.client.clone(), &self.cfg.namespace),
            namespace: self.cfg.namespace.clone(),
            name: self.cfg.lease_name.clone(),
            timeout: self.cfg.request_timeout,
        };
        Election {
            store,
            cfg: &self.cfg,
            gate: &gate,
            state: &self.state,
            observer: Observer::default(),
        }
        .run(&cancel)
        .await;
    }
}

/// [`LeaderElector::run`] without watching the state.
pub async fn run(
    client: kube::Client,
    cfg: LeaderConfig,
    gate: watch::Sender<bool>,
    cancel: CancellationToken,
) {
    LeaderElector::new(client, cfg).run(gate, cancel).await;
}

/// How one try went.
enum Attempt {
    /// The lease is ours (taken or renewed).
    Holding,
    /// Someone else holds it.
    Held(String),
}

struct Election<'a, S> {
    store: S,
    cfg: &'a LeaderConfig,
    gate: &'a watch::Sender<bool>,
    state: &'a watch::Sender<LeaderState>,
    observer: Observer,
}

impl<S: LeaseStore> Election<'_, S> {
    async fn run(mut self, cancel: &CancellationToken) {
        loop {
            let Some(taken) = self.acquire(cancel).await else {
                break;
            };
            self.gate.send_replace(true);
            self.publish(true, Some(self.cfg.identity.clone()));
            tracing::info!(identity = %self.cfg.identity, "leading: writes to the clusters are on");
            if !self.lead(cancel, taken).await {
                break;
            }
        }
        // Cancelled: stop writing first, then let a standby in.
        let was_leading = self.gate.send_replace(false);
        if was_leading {
            self.release().await;
        }
        self.publish(false, None);
    }

    /// Tries every `retry_period` until the lease is ours (when the winning attempt was
    /// sent) or cancellation (`None`).
    async fn acquire(&mut self, cancel: &CancellationToken) -> Option<Instant> {
        loop {
            let sent = Instant::now();
            match self.try_once().await {
                Ok(Attempt::Holding) => {
                    self.failed(None);
                    return Some(sent);
                }
                Ok(Attempt::Held(holder)) => {
                    self.failed(None);
                    self.publish(false, Some(holder));
                }
                Err(e) => self.failed(Some(format!("could not read or take the lease: {e}"))),
            }
            tokio::select! {
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    /// Renews every `retry_period` while it can. Returns false on cancellation, true when
    /// the lease is lost (the gate is closed by then).
    ///
    /// The lease counts as renewed from when a renewal was *sent*: others measure its expiry
    /// from when they see it change, which is after that, so a slow answer can never leave
    /// this replica writing past the moment another may take over.
    async fn lead(&mut self, cancel: &CancellationToken, taken: Instant) -> bool {
        let mut renewed = taken;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
            let deadline = renewed + self.cfg.renew_deadline;
            let sent = Instant::now();
            let attempt = tokio::select! {
                () = cancel.cancelled() => return false,
                r = tokio::time::timeout_at(deadline, self.try_once()) => r,
            };
            let lost = match attempt {
                Ok(Ok(Attempt::Holding)) => {
                    renewed = sent;
                    self.failed(None);
                    continue;
                }
                Ok(Ok(Attempt::Held(holder))) => format!("{holder} holds the lease"),
                Ok(Err(e)) if Instant::now() < deadline => {
                    self.failed(Some(format!("renewal failed, retrying: {e}")));
                    continue;
                }
                Ok(Err(e)) => format!("no renewal within the renew deadline: {e}"),
                Err(_) => "no renewal within the renew deadline".to_string(),
            };
            self.gate.send_replace(false);
            self.publish(false, None);
            tracing::warn!(identity = %self.cfg.identity, why = %lost, "lost the lease: writes to the clusters are off");
            return true;
        }
    }

    /// Reads the lease, decides, and writes if the decision is to take or keep it.
    async fn try_once(&mut self) -> Result<Attempt, CallError> {
        let read = self.store.get().await?;
        let now = Instant::now();
        let (record, version) = match read {
            Some((r, v)) => (Some(r), Some(v)),
            None => (None, None),
        };
        let decision = self
            .observer
            .decide(record.as_ref(), &self.cfg.identity, now);
        if let Decision::Held { holder } = decision {
            self.publish_transitions(record.as_ref());
            return Ok(Attempt::Held(holder));
        }
        let claimed = LeaseRecord::claimed(
            record.as_ref(),
            &self.cfg.identity,
            self.cfg.lease_duration,
            Timestamp::now(),
        );
        match version {
            Some(v) => self.store.update(v, &claimed).await?,
            None => self.store.create(&claimed).await?,
        }
        self.publish_transitions(Some(&claimed));
        self.observer.wrote(claimed, Instant::now());
        Ok(Attempt::Holding)
    }

    /// Clears the holder if this replica still holds the lease. Best effort, bounded by
    /// the request timeout: the lease expires anyway.
    async fn release(&mut self) {
        let result = async {
            let Some((record, version)) = self.store.get().await? else {
                return Ok(());
            };
            if record.holder() != Some(self.cfg.identity.as_str()) {
                return Ok(());
            }
            self.store
                .update(version, &record.released(Timestamp::now()))
                .await
        }
        .await;
        match result {
            Ok(()) => tracing::info!(identity = %self.cfg.identity, "released the lease"),
            Err(e) => {
                tracing::warn!(error = %e, "could not release the lease; it expires on its own")
            }
        }
    }

    fn publish(&self, leading: bool, holder: Option<String>) {
        self.state.send_if_modified(|s| {
            let changed = s.leading != leading || s.holder != holder;
            s.leading = leading;
            s.holder = holder;
            changed
        });
    }

    /// Records a lease call's failure (`Some`) or success (`None`). A failure is logged as a
    /// warning when it starts or changes, so a retry every `retry_period` does not flood.
    fn failed(&self, message: Option<String>) {
        self.state.send_if_modified(|s| {
            let same = s.error.as_ref().map(|e| &e.message) == message.as_ref();
            if same {
                return false;
            }
            s.error = message.map(|message| {
                tracing::warn!(identity = %self.cfg.identity, "leader election: {message}");
                LeaseError {
                    since: Timestamp::now(),
                    message,
                }
            });
            true
        });
    }

    fn publish_transitions(&self, record: Option<&LeaseRecord>) {
        let transitions = record.map_or(0, |r| r.transitions);
        self.state.send_if_modified(|s| {
            let changed = s.transitions != transitions;
            s.transitions = transitions;
            changed
        });
    }
}
