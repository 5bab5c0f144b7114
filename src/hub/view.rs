//! The read-only [`FleetView`] of the fleet's reports that the HTTP API and the terminal use,
//! and the hub's own status as the API shows it.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::health::{FleetHealth, Glance};
use crate::cluster::ClusterName;
use crate::cluster::gate::WriteGate;
/// A cluster's latest report, as the view serves it to readers (the server reads the fleet
/// only through this module).
pub use crate::cluster::report::ClusterReport;
use crate::cluster::what_if::Ask;

pub(super) type Reports = BTreeMap<ClusterName, Member>;

/// One cluster as readers of the fleet reach it: its latest report, and its runner's
/// what-if inbox.
#[derive(Clone)]
pub(super) struct Member {
    pub report: watch::Receiver<ClusterReport>,
    pub what_if: mpsc::Sender<Ask>,
}

/// The hub itself, as the API shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HubStatus {
    pub started: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_path: Option<String>,
    /// The last reload of fleet.toml and how it went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reload: Option<ReloadStatus>,
    pub leader_election: bool,
    /// True while this replica may write (always, without leader election).
    pub leading: bool,
    /// Who holds the lease, as last seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<super::leader::LeaderState>,
    pub dry_run: bool,
    /// With sharding: the replicas, who runs which cluster, and which this one writes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharding: Option<super::shard::ShardStatus>,
    /// The management cluster's inventory, when `[membership]` is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub membership: Option<super::membership::MembershipStatus>,
}

#[cfg(test)]
impl HubStatus {
    /// A hub started now, leading, with nothing else on: the status unit tests start from.
    pub(crate) fn plain() -> HubStatus {
        HubStatus {
            started: Timestamp::now(),
            config_path: None,
            last_reload: None,
            leader_election: false,
            leading: true,
            leader: None,
            dry_run: false,
            sharding: None,
            membership: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadStatus {
    pub at: Timestamp,
    pub ok: bool,
    pub message: String,
}

/// Read-only access to the fleet's reports; cheap to clone.
#[derive(Clone)]
pub struct FleetView {
    pub(super) clusters: watch::Receiver<Arc<Reports>>,
    pub(super) hub: watch::Receiver<HubStatus>,
    pub(super) gate: WriteGate,
    pub(super) leader: Option<watch::Receiver<super::leader::LeaderState>>,
    pub(super) health: watch::Receiver<FleetHealth>,
    /// The capacity failures the clusters share now.
    pub(super) failures: crate::cluster::fleet_inputs::SharedFailures,
    /// Held while a what-if is evaluated (one at a time).
    pub(super) what_if_turn: Arc<tokio::sync::Mutex<()>>,
}

impl FleetView {
    /// Every cluster, by name.
    pub(super) fn members(&self) -> Vec<(String, Member)> {
        let clusters = self.clusters.borrow().clone();
        clusters
            .iter()
            .map(|(name, m)| (name.to_string(), m.clone()))
            .collect()
    }

    /// The capacity failures this replica's own clusters found (what it tells the others).
    pub fn own_shared_failures(&self) -> Vec<crate::engine::policy::SharedFailure> {
        self.failures.local(Timestamp::now())
    }

    /// The capacity failures shared across the fleet and still in force.
    pub fn shared_failures(&self) -> Vec<crate::engine::policy::SharedFailure> {
        self.failures.current(Timestamp::now())
    }

    /// What the fleet's health is worked out from, per cluster, without copying reports.
    pub fn glances(&self) -> Vec<Glance> {
        let clusters = self.clusters.borrow().clone();
        clusters
            .values()
            .map(|m| Glance::of(&m.report.borrow()))
            .collect()
    }

    /// The fleet's health as last worked out (every second), and what it holds back.
    pub fn health(&self) -> FleetHealth {
        self.health.borrow().clone()
    }

    /// Every cluster's latest report, by name.
    pub fn reports(&self) -> Vec<ClusterReport> {
        let clusters = self.clusters.borrow().clone();
        clusters
            .values()
            .map(|m| m.report.borrow().clone())
            .collect()
    }

    pub fn report(&self, name: &str) -> Option<ClusterReport> {
        let clusters = self.clusters.borrow().clone();
        clusters
            .get(&ClusterName::new(name))
            .map(|m| m.report.borrow().clone())
    }

    pub fn hub(&self) -> HubStatus {
        let mut status = self.hub.borrow().clone();
        status.leading = self.gate.is_open();
        status.leader = self.leader.as_ref().map(|l| l.borrow().clone());
        status
    }
}
