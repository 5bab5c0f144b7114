//! The fleet: one supervised runner per enabled cluster of fleet.toml, and the read-only
//! [`FleetView`] of their reports that the HTTP API and the terminal use.
//!
//! A reload applies a new configuration as a diff: clusters added are started, clusters
//! removed or disabled are stopped, clusters whose connection changed are restarted, and
//! the others only receive their new settings (keeping their caches and memory).

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::health::{self, FleetHealth, FleetState, Glance};
use super::supervise::{Connection, Supervised, supervise};
use crate::cluster::ClusterName;
use crate::cluster::gate::{FleetLink, WriteGate, hold_channel};
use crate::cluster::report::{ClusterReport, Phase};
use crate::cluster::runner::RunnerSpec;
use crate::cluster::what_if::{Ask, inbox};
use crate::config::{ClusterConfig, FleetConfig, FleetHealthConfig, HubConfig};

type Reports = BTreeMap<ClusterName, Member>;

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
    /// The management cluster's inventory, when `[membership]` is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub membership: Option<super::membership::MembershipStatus>,
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
    clusters: watch::Receiver<Arc<Reports>>,
    hub: watch::Receiver<HubStatus>,
    gate: WriteGate,
    leader: Option<watch::Receiver<super::leader::LeaderState>>,
    health: watch::Receiver<FleetHealth>,
    /// The capacity failures the clusters share now.
    failures: crate::cluster::gate::SharedFailures,
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

struct Slot {
    connection: Connection,
    spec: watch::Sender<Arc<RunnerSpec>>,
    report: watch::Receiver<ClusterReport>,
    what_if: mpsc::Sender<Ask>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

/// What a reload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub started: Vec<String>,
    pub stopped: Vec<String>,
    pub restarted: Vec<String>,
    pub updated: Vec<String>,
}

impl Changes {
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (what, names) in [
            ("started", &self.started),
            ("stopped", &self.stopped),
            ("restarted", &self.restarted),
            ("new settings for", &self.updated),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        if parts.is_empty() {
            "no cluster changed".into()
        } else {
            parts.join("; ")
        }
    }
}

pub struct Fleet {
    slots: BTreeMap<String, Slot>,
    /// The hub settings a reload cannot change (read once at start).
    fixed: Option<HubConfig>,
    gate: WriteGate,
    /// This replica's name, on the events it writes.
    instance: String,
    clusters: watch::Sender<Arc<Reports>>,
    pub(super) hub: watch::Sender<HubStatus>,
    health_config: FleetHealthConfig,
    health: watch::Sender<FleetHealth>,
    /// Sets the scale-down hold every runner reads.
    hold: watch::Sender<Option<String>>,
    hold_rx: FleetLink,
    /// Turns for engine passes, shared by every cluster (sized once, at the first apply).
    pool: Option<crate::cluster::pool::PassPool>,
}

impl Fleet {
    pub fn new(
        gate: WriteGate,
        leader: Option<watch::Receiver<super::leader::LeaderState>>,
        instance: String,
        status: HubStatus,
    ) -> (Fleet, FleetView) {
        let (clusters, clusters_rx) = watch::channel(Arc::new(Reports::new()));
        let (hub, hub_rx) = watch::channel(status);
        let (health, health_rx) = watch::channel(FleetHealth::starting(Timestamp::now()));
        let (hold, hold_rx) = hold_channel();
        let view = FleetView {
            failures: hold_rx.failures().clone(),
            clusters: clusters_rx,
            hub: hub_rx,
            gate: gate.clone(),
            leader,
            health: health_rx,
            what_if_turn: Arc::default(),
        };
        let fleet = Fleet {
            slots: BTreeMap::new(),
            fixed: None,
            gate,
            instance,
            clusters,
            hub,
            health_config: FleetHealthConfig::default(),
            health,
            hold,
            hold_rx,
            pool: None,
        };
        (fleet, view)
    }

    /// Brings the running clusters in line with `config`.
    pub async fn apply(&mut self, config: &FleetConfig) -> Changes {
        self.health_config = config.fleet.clone();
        let concurrency = config.hub.pass_concurrency;
        self.pool
            .get_or_insert_with(|| crate::cluster::pool::PassPool::new(concurrency));
        self.hold_rx
            .failures()
            .configure(&config.fleet.shared_failures);
        let mut changes = Changes::default();
        let wanted: BTreeMap<&str, &ClusterConfig> = config
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let gone: Vec<String> = self
            .slots
            .keys()
            .filter(|name| !wanted.contains_key(name.as_str()))
            .cloned()
            .collect();
        let stopping: Vec<Slot> = gone.iter().filter_map(|n| self.slots.remove(n)).collect();
        futures::future::join_all(stopping.into_iter().map(stop)).await;
        changes.stopped.extend(gone);
        for cluster in wanted.into_values() {
            self.apply_one(config, cluster, &mut changes).await;
        }
        self.publish();
        changes
    }

    async fn apply_one(&mut self, config: &FleetConfig, c: &ClusterConfig, changes: &mut Changes) {
        let connection = connection_of(config, c);
        let spec = Arc::new(RunnerSpec::of(config, c));
        let existing = self.slots.get(&c.name);
        let was_running = existing.is_some_and(|s| s.task.is_some());
        let keep = existing.is_some_and(|s| {
            was_running == c.enabled && (!c.enabled || s.connection == connection)
        });
        if let (true, Some(slot)) = (keep, existing) {
            if slot
                .spec
                .send_if_modified(|old| replace_if_changed(old, &spec))
            {
                changes.updated.push(c.name.clone());
            }
            return;
        }
        if let Some(slot) = self.slots.remove(&c.name) {
            stop(slot).await;
        }
        match (was_running, c.enabled) {
            (true, true) => changes.restarted.push(c.name.clone()),
            (false, true) => changes.started.push(c.name.clone()),
            (true, false) => changes.stopped.push(c.name.clone()),
            (false, false) => {}
        }
        let slot = self.start(c, connection, spec);
        self.slots.insert(c.name.clone(), slot);
    }

    fn start(&self, c: &ClusterConfig, connection: Connection, spec: Arc<RunnerSpec>) -> Slot {
        let name = ClusterName::new(&c.name);
        let mut report = ClusterReport::new(name.clone(), spec.dry_run, Timestamp::now());
        report.source = c.source().to_string();
        if !c.enabled {
            let why = format!("disabled in {}", c.source());
            report.set_phase(Phase::Stopped, Some(why), Timestamp::now());
        }
        let (report_tx, report_rx) = watch::channel(report);
        let (spec_tx, spec_rx) = watch::channel(spec);
        let (what_if, what_if_rx) = inbox();
        let cancel = CancellationToken::new();
        let task = c.enabled.then(|| {
            tokio::spawn(supervise(
                Supervised {
                    name,
                    connection: connection.clone(),
                    gate: self.gate.clone(),
                    hold: self.hold_rx.clone(),
                    instance: self.instance.clone(),
                    spec: spec_rx,
                    report: report_tx,
                    what_if: what_if_rx,
                    pool: self.pool.clone().unwrap_or_default(),
                },
                cancel.clone(),
            ))
        });
        Slot {
            connection,
            spec: spec_tx,
            report: report_rx,
            what_if,
            cancel,
            task,
        }
    }

    fn publish(&self) {
        let reports: Reports = self
            .slots
            .iter()
            .map(|(name, slot)| {
                let member = Member {
                    report: slot.report.clone(),
                    what_if: slot.what_if.clone(),
                };
                (ClusterName::new(name), member)
            })
            .collect();
        self.clusters.send_replace(Arc::new(reports));
    }

    /// Remembers the hub settings that only a restart changes.
    pub fn started_with(&mut self, config: &FleetConfig) {
        self.fixed = Some(config.hub.clone());
    }

    /// What a reloaded configuration changes that needs the hub restarted.
    pub fn needs_restart(&self, config: &FleetConfig) -> Option<String> {
        let fixed = self.fixed.as_ref()?;
        let new = &config.hub;
        let changed: Vec<&str> = [
            ("hub.listen", fixed.listen != new.listen),
            (
                "hub.leader_election",
                fixed.leader_election != new.leader_election,
            ),
            ("hub.tracing", fixed.tracing != new.tracing),
            ("hub.serving", fixed.serving != new.serving),
            (
                "hub.pass_concurrency",
                fixed.pass_concurrency != new.pass_concurrency,
            ),
        ]
        .into_iter()
        .filter_map(|(key, differs)| differs.then_some(key))
        .collect();
        (!changed.is_empty()).then(|| {
            format!(
                "{} changed: takes effect when the hub restarts",
                changed.join(" and ")
            )
        })
    }

    /// Works out the fleet's health from the latest reports, and sets or lifts the
    /// scale-down hold to match.
    pub fn assess_health(&self) {
        let glances: Vec<Glance> = self
            .clusters
            .borrow()
            .values()
            .map(|m| Glance::of(&m.report.borrow()))
            .collect();
        let previous = self.health.borrow().clone();
        let next = health::assess(&glances, &self.health_config, &previous, Timestamp::now());
        if next.state != previous.state {
            match next.state {
                FleetState::Degraded => tracing::warn!("the fleet is degraded: {}", next.reason),
                FleetState::Healthy => {
                    tracing::info!("the fleet is healthy again: {}", next.reason)
                }
            }
        }
        let hold = next.hold();
        self.hold.send_if_modified(|h| {
            let changed = *h != hold;
            *h = hold;
            changed
        });
        self.health.send_replace(next);
    }

    /// Stops every cluster, each undoing what it had under way.
    pub async fn shut_down(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        futures::future::join_all(slots.into_values().map(stop)).await;
    }
}

fn replace_if_changed(old: &mut Arc<RunnerSpec>, new: &Arc<RunnerSpec>) -> bool {
    if **old == **new {
        return false;
    }
    *old = new.clone();
    true
}

/// How long a cluster gets to stop cleanly (undo scale-downs, remove its status) before
/// its task is dropped; it stays well inside Kubernetes' default 30 s grace period.
const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

async fn stop(slot: Slot) {
    slot.cancel.cancel();
    if let Some(mut task) = slot.task
        && tokio::time::timeout(STOP_LIMIT, &mut task).await.is_err()
    {
        tracing::warn!(
            "a cluster did not stop within {}s; dropping it (its next start repairs what it left)",
            STOP_LIMIT.as_secs()
        );
        task.abort();
    }
}

fn connection_of(config: &FleetConfig, c: &ClusterConfig) -> Connection {
    let le = &config.hub.leader_election;
    // With leader election, a write sent just before the lease is lost must not land after
    // another replica may have taken over: writes get at most the lease's margin.
    let write_timeout = if le.enabled {
        let margin = le.lease_duration.saturating_sub(le.renew_deadline);
        config
            .hub
            .request_timeout
            .min(margin.max(std::time::Duration::from_secs(1)))
    } else {
        config.hub.request_timeout
    };
    Connection {
        context: c.context().to_string(),
        kubeconfig: c.kubeconfig.clone(),
        hub_kubeconfigs: config.hub.kubeconfigs.clone(),
        discovered: c.discovered.clone(),
        timing: crate::cluster::runner::Timing {
            scan_interval: config.hub.scan_interval,
            debounce: config.hub.debounce,
            debounce_max: config.hub.debounce_max,
            request_timeout: config.hub.request_timeout,
            write_timeout,
        },
        status_namespace: config.hub.status_namespace.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::report::Phase;

    /// Clusters whose kubeconfig does not exist: their supervisors fail and back off, which
    /// is all a diff needs.
    fn config(clusters: &[(&str, &str)]) -> FleetConfig {
        let text: String = clusters
            .iter()
            .map(|(name, extra)| {
                format!("[[clusters]]\nname = \"{name}\"\nkubeconfig = \"/nonexistent\"\n{extra}\n")
            })
            .collect();
        FleetConfig::parse(&text, "test").unwrap()
    }

    fn status() -> HubStatus {
        HubStatus {
            started: Timestamp::now(),
            config_path: None,
            last_reload: None,
            leader_election: false,
            leading: true,
            leader: None,
            dry_run: false,
            membership: None,
        }
    }

    #[test]
    fn a_reload_names_the_hub_settings_that_wait_for_a_restart() {
        let (mut fleet, _view) =
            Fleet::new(WriteGate::always_open(), None, "test".into(), status());
        let start = FleetConfig::parse("", "test").unwrap();
        assert_eq!(fleet.needs_restart(&start), None, "nothing to compare yet");
        fleet.started_with(&start);
        assert_eq!(fleet.needs_restart(&start), None);
        let text = "[hub]\nlisten = \"127.0.0.1:9\"\n[hub.tracing]\nendpoint = \"http://c:4317\"\n[hub.serving]\nmax_connections = 9\n";
        let changed = FleetConfig::parse(text, "test").unwrap();
        assert_eq!(
            fleet.needs_restart(&changed).as_deref(),
            Some(
                "hub.listen and hub.tracing and hub.serving changed: takes effect when the hub restarts"
            )
        );
    }

    #[tokio::test]
    async fn a_reload_touches_only_what_changed() {
        let (mut fleet, view) = Fleet::new(WriteGate::always_open(), None, "test".into(), status());
        let first = fleet.apply(&config(&[("a", ""), ("b", "")])).await;
        assert_eq!(first.started, ["a", "b"]);
        let same = fleet.apply(&config(&[("a", ""), ("b", "")])).await;
        assert_eq!(same, Changes::default());
        assert_eq!(same.describe(), "no cluster changed");

        let b_settings = "[clusters.overrides]\nmax_nodes_total = 5";
        let second = fleet.apply(&config(&[("b", b_settings), ("c", "")])).await;
        assert_eq!(second.started, ["c"]);
        assert_eq!(second.stopped, ["a"]);
        assert_eq!(second.updated, ["b"]);
        assert!(second.restarted.is_empty());
        assert!(view.report("a").is_none());

        let third = fleet
            .apply(&config(&[("b", "context = \"other\""), ("c", "")]))
            .await;
        assert_eq!(third.restarted, ["b"]);

        let fourth = fleet
            .apply(&config(&[("b", "enabled = false"), ("c", "")]))
            .await;
        assert_eq!(fourth.stopped, ["b"]);
        let b = view.report("b").unwrap();
        assert_eq!(b.phase, Phase::Stopped);
        assert_eq!(b.message.as_deref(), Some("disabled in fleet.toml"));
        fleet.shut_down().await;
    }
}
