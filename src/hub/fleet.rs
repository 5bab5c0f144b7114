//! The fleet: one supervised runner per enabled cluster of fleet.toml, and the read-only
//! [`FleetView`] of their reports that the HTTP API and the terminal use.
//!
//! A reload applies a new configuration as a diff: clusters added are started, clusters
//! removed or disabled are stopped, clusters whose connection changed are restarted, and
//! the others only receive their new settings (keeping their caches and memory).

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::health::{self, FleetHealth, FleetState, Glance};
use super::shard::{self, ClusterLease, ShardStatus, Shards};
use super::supervise::{Connection, Supervised, supervise};
pub use super::view::{FleetView, HubStatus, ReloadStatus};
use super::view::{Member, Reports};
use crate::cluster::ClusterName;
use crate::cluster::fleet_inputs::{self, FleetInputsSender};
use crate::cluster::gate::WriteGate;
use crate::cluster::report::{ClusterReport, Phase};
use crate::cluster::runner::RunnerSpec;
use crate::cluster::what_if::{Ask, inbox};
use crate::config::{ClusterConfig, FleetConfig, FleetHealthConfig, HubConfig};

struct Slot {
    connection: Connection,
    spec: watch::Sender<Arc<RunnerSpec>>,
    report: watch::Receiver<ClusterReport>,
    what_if: mpsc::Sender<Ask>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
    /// With sharding: the cluster's Lease, whose holding opens its write gate.
    lease: Option<ClusterLease>,
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
    /// The fleet's inputs every runner's passes read: the scale-down hold set here, the
    /// capacity failures the clusters share.
    inputs: FleetInputsSender,
    /// Turns for engine passes, shared by every cluster (sized once, at the first apply).
    pool: Option<crate::cluster::pool::PassPool>,
    /// With sharding: this replica's part (it runs the clusters it owns).
    shards: Option<Shards>,
    /// The other replicas' glances at their clusters (sharding), for the fleet's health.
    remote_glances: Vec<Glance>,
    /// The configuration last applied: sharding applies it again when replicas come and go.
    last: Option<FleetConfig>,
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
        let inputs = fleet_inputs::channel();
        let view = FleetView {
            failures: inputs.failures().clone(),
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
            inputs,
            pool: None,
            shards: None,
            remote_glances: Vec::new(),
            last: None,
        };
        (fleet, view)
    }

    /// From now on, runs only the clusters this replica owns among `shards`' replicas.
    pub fn shard(&mut self, shards: Shards) {
        self.shards = Some(shards);
    }

    /// The replicas, as sharding sees them (none without sharding).
    pub fn peers(&self) -> Option<watch::Receiver<Vec<shard::peers::Peer>>> {
        self.shards.as_ref().map(Shards::peers)
    }

    /// Applies the last configuration again, to the replicas as they are now.
    pub async fn reshard(&mut self) -> Option<Changes> {
        let last = self.last.clone()?;
        Some(self.apply(&last).await)
    }

    /// Leaves the other replicas (after every cluster has stopped).
    pub async fn leave(&mut self) {
        if let Some(shards) = self.shards.take() {
            shards.stop().await;
        }
    }

    /// Who runs which of `config`'s clusters, and what the other replicas told.
    fn assign(&mut self, config: &FleetConfig) -> Option<ShardStatus> {
        let shards = self.shards.as_ref()?;
        let peers = shards.peers().borrow().clone();
        let names: Vec<String> = config.clusters.iter().map(|c| c.name.to_string()).collect();
        let status = shard::assign(shards.identity(), &peers, &names);
        let others = peers.iter().filter(|p| !p.this);
        self.inputs
            .failures()
            .set_remote(others.clone().flat_map(|p| p.gossip.failures.clone()));
        self.remote_glances = others.flat_map(|p| p.gossip.glances.clone()).collect();
        Some(status)
    }

    /// Brings the running clusters in line with `config` (with sharding: those of its
    /// clusters this replica owns).
    pub async fn apply(&mut self, config: &FleetConfig) -> Changes {
        self.last = Some(config.clone());
        let sharding = self.assign(config);
        let mine = sharding.as_ref().map(ShardStatus::mine);
        self.hub.send_modify(|h| {
            // A new assignment holds no Lease by itself: `writing` stays as last seen (brought
            // up to date below and every second) instead of reading empty until then.
            let writing = h.sharding.take().map(|s| s.writing).unwrap_or_default();
            h.sharding = sharding.map(|s| ShardStatus { writing, ..s });
        });
        self.health_config = config.fleet.clone();
        let concurrency = config.hub.pass_concurrency;
        self.pool
            .get_or_insert_with(|| crate::cluster::pool::PassPool::new(concurrency));
        self.inputs
            .failures()
            .configure(&config.fleet.shared_failures);
        let mut changes = Changes::default();
        let wanted: BTreeMap<&str, &ClusterConfig> = config
            .clusters
            .iter()
            .filter(|c| mine.as_ref().is_none_or(|m| m.contains(&*c.name)))
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
        self.note_writing();
        changes
    }

    async fn apply_one(&mut self, config: &FleetConfig, c: &ClusterConfig, changes: &mut Changes) {
        let connection = connection_of(config, c);
        let spec = Arc::new(RunnerSpec::of(config, c));
        let existing = self.slots.get(&*c.name);
        let was_running = existing.is_some_and(|s| s.task.is_some());
        let keep = existing.is_some_and(|s| {
            was_running == c.enabled && (!c.enabled || s.connection == connection)
        });
        if let (true, Some(slot)) = (keep, existing) {
            if slot
                .spec
                .send_if_modified(|old| replace_if_changed(old, &spec))
            {
                changes.updated.push(c.name.to_string());
            }
            return;
        }
        if let Some(slot) = self.slots.remove(&*c.name) {
            stop(slot).await;
        }
        match (was_running, c.enabled) {
            (true, true) => changes.restarted.push(c.name.to_string()),
            (false, true) => changes.started.push(c.name.to_string()),
            (true, false) => changes.stopped.push(c.name.to_string()),
            (false, false) => {}
        }
        let slot = self.start(c, connection, spec);
        self.slots.insert(c.name.to_string(), slot);
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
        // With sharding, the cluster is written to only while its Lease is held.
        let lease = self
            .shards
            .as_ref()
            .filter(|_| c.enabled)
            .map(|s| s.lease(&c.name));
        let gate = lease
            .as_ref()
            .map_or_else(|| self.gate.clone(), |l| l.gate.clone());
        let task = c.enabled.then(|| {
            tokio::spawn(supervise(
                Supervised {
                    name,
                    connection: connection.clone(),
                    gate,
                    fleet: self.inputs.link(),
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
            lease,
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
        let mut glances: Vec<Glance> = self
            .clusters
            .borrow()
            .values()
            .map(|m| Glance::of(&m.report.borrow()))
            .collect();
        // With sharding, the other replicas' clusters count too (once: a cluster changing
        // hands may be told by both for a moment).
        for g in &self.remote_glances {
            if !glances.iter().any(|own| own.name == g.name) {
                glances.push(g.clone());
            }
        }
        self.note_writing();
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
        self.inputs.set_scale_down_hold(next.hold());
        self.health.send_replace(next);
    }

    /// With sharding: which clusters' Leases this replica holds now, for the API.
    fn note_writing(&self) {
        let writing: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| s.lease.as_ref().is_some_and(|l| l.gate.is_open()))
            .map(|(name, _)| name.clone())
            .collect();
        self.hub.send_if_modified(|h| match &mut h.sharding {
            Some(s) if s.writing != writing => {
                s.writing = writing;
                true
            }
            _ => false,
        });
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

/// Stops a cluster's runner (which undoes what it had under way, still allowed to write),
/// then releases its Lease, so another replica may take it at once.
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
    if let Some(lease) = slot.lease {
        lease.release().await;
    }
}

fn connection_of(config: &FleetConfig, c: &ClusterConfig) -> Connection {
    let (le, sh) = (&config.hub.leader_election, &config.hub.sharding);
    // With leader election (or a Lease per cluster), a write sent just before the lease is
    // lost must not land after another replica may have taken over: writes get at most the
    // lease's margin.
    let margin = match (le.enabled, sh.enabled) {
        (true, _) => Some(le.lease_duration.saturating_sub(le.renew_deadline)),
        (_, true) => Some(sh.lease_duration.saturating_sub(sh.renew_deadline)),
        _ => None,
    };
    let write_timeout = if let Some(margin) = margin {
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
        HubStatus::plain()
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
