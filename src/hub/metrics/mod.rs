//! The hub's metrics, filled into one [`MetricsSnapshot`] from its fleet view when asked:
//! the upstream autoscaler's per cluster (`cluster`), then the fleet's own
//! (`fleetscaler_*`). Everything is read off the reports at that moment, so a removed
//! cluster's series go with it. `/metrics` encodes the snapshot as Prometheus text, the
//! OTLP export as protobuf (`telemetry::metrics`, `telemetry::otel_metrics`).

mod cluster;

use crate::cluster::report::ClusterReport;
use crate::engine::policy::SharedFailure;
use crate::hub::FleetView;
use crate::hub::HubStatus;
use crate::hub::health::{ClusterState, FleetHealth, FleetState};
use crate::telemetry::metrics::{MetricsBuilder, MetricsSnapshot, Type};

use self::cluster::bool_value;

impl FleetView {
    /// Every metric of the hub, now.
    pub fn metrics(&self) -> MetricsSnapshot {
        snapshot(self)
    }
}

/// Every metric of the hub, read off `view` now.
pub fn snapshot(view: &FleetView) -> MetricsSnapshot {
    let fleet = Fleet {
        reports: view.reports(),
        health: view.health(),
        failures: view.shared_failures(),
        hub: view.hub(),
    };
    fleet.snapshot()
}

/// What the metrics are read off: a copy of the view's parts at one moment.
struct Fleet {
    reports: Vec<ClusterReport>,
    health: FleetHealth,
    failures: Vec<SharedFailure>,
    hub: HubStatus,
}

impl Fleet {
    fn snapshot(mut self) -> MetricsSnapshot {
        self.reports.sort_by(|a, b| a.name.cmp(&b.name));
        let reports = &self.reports;
        let mut e = MetricsSnapshot::builder();
        cluster::write(&mut e, reports);
        fleet(&mut e, reports, &self.health);
        fleet_backoffs(&mut e, &self.failures);
        pass_queue(&mut e, reports);
        hub(&mut e, &self.hub);
        e.finish()
    }
}

/// The capacity failures in force, counted by what they back off across the fleet.
fn fleet_backoffs(e: &mut MetricsBuilder, failures: &[SharedFailure]) {
    let mut by_key: std::collections::BTreeMap<(&str, &str, &str), u32> = Default::default();
    for f in failures {
        let k = &f.key;
        let zone = k.zone.as_deref().unwrap_or("");
        let region = k.region.as_deref().unwrap_or("");
        *by_key
            .entry((k.instance_type.as_str(), zone, region))
            .or_default() += 1;
    }
    e.family(
        "fleetscaler_fleet_backoffs",
        Type::Gauge,
        "Capacity failures shared across the fleet and in force, by instance type and place: each backs off the other clusters' groups of that type there.",
    );
    for ((instance_type, zone, region), n) in by_key {
        let labels = [
            ("instance_type", instance_type),
            ("zone", zone),
            ("region", region),
        ];
        e.sample(&labels, f64::from(n));
    }
}

fn fleet(e: &mut MetricsBuilder, reports: &[ClusterReport], health: &FleetHealth) {
    e.family(
        "fleetscaler_clusters",
        Type::Gauge,
        "Clusters of the fleet, by state.",
    );
    for state in ClusterState::ALL {
        let n = reports
            .iter()
            .filter(|r| ClusterState::of(r) == state)
            .count();
        e.sample(&[("state", state.as_str())], n as f64);
    }
    e.family(
        "fleetscaler_cluster_state",
        Type::Gauge,
        "The state of each cluster: 1 for its current state, 0 for the others.",
    );
    for r in reports {
        let current = ClusterState::of(r);
        for state in ClusterState::ALL {
            let labels = [("cluster", r.name.as_str()), ("state", state.as_str())];
            e.sample(&labels, bool_value(state == current));
        }
    }
    e.family(
        "fleetscaler_fleet_degraded",
        Type::Gauge,
        "Whether the fleet is degraded ([fleet] thresholds of fleet.toml): 1 if it is.",
    )
    .sample(&[], bool_value(health.state == FleetState::Degraded));
    e.family(
        "fleetscaler_fleet_scale_down_paused",
        Type::Gauge,
        "Whether scale-down is held back in every cluster because the fleet is degraded.",
    )
    .sample(&[], bool_value(health.scale_down_paused));
    e.family(
        "fleetscaler_fleet_unready_ratio",
        Type::Gauge,
        "Unready nodes over all nodes of the fleet.",
    )
    .sample(&[], health.unready_ratio);
    e.family(
        "fleetscaler_runner_restarts_total",
        Type::Counter,
        "Times the hub restarted a cluster's runner after it failed.",
    );
    for r in reports {
        e.sample(&[("cluster", r.name.as_str())], f64::from(r.restarts));
    }
    e.family(
        "fleetscaler_idle_passes_skipped_total",
        Type::Counter,
        "Passes not run because nothing changed since a pass that left the cluster settled.",
    );
    for r in reports {
        e.sample(
            &[("cluster", r.name.as_str())],
            r.counters.idle_skips as f64,
        );
    }
    e.family(
        "fleetscaler_passes_total",
        Type::Counter,
        "Passes run, by why they ran rather than being skipped as idle: first, unsettled (the \
         last plan waits on something undated), changed (a cached object), learned, \
         settings, policy, due (a dated timer), refresh (the periodic full pass), untrusted.",
    );
    for r in reports {
        for (cause, n) in &r.counters.passes_by_cause {
            e.sample(&[("cluster", r.name.as_str()), ("cause", cause)], *n as f64);
        }
    }
    per_cluster_histogram(
        e,
        reports,
        "fleetscaler_scale_up_latency_seconds",
        "Time from the hub seeing a pod unschedulable to the scale-up for it being written.",
        |r| &r.counters.scale_up_latency,
    );
}

fn pass_queue(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    per_cluster_histogram(
        e,
        reports,
        "fleetscaler_pass_queue_seconds",
        "Time a cluster's pass waited for a turn on the fleet's pool of engine passes (hub.pass_concurrency).",
        |r| &r.counters.pass_queue,
    );
}

/// One histogram family with a series per cluster.
fn per_cluster_histogram(
    e: &mut MetricsBuilder,
    reports: &[ClusterReport],
    name: &str,
    help: &str,
    pick: impl Fn(&ClusterReport) -> &crate::cluster::metrics::Histogram,
) {
    e.family(name, Type::Histogram, help);
    for r in reports {
        let h = pick(r);
        e.histogram(
            &[("cluster", r.name.as_str())],
            h.cumulative(),
            h.sum,
            h.count,
        );
    }
}

fn hub(e: &mut MetricsBuilder, status: &HubStatus) {
    e.family(
        "fleetscaler_leader",
        Type::Gauge,
        "Whether this replica may write to the clusters (holds the lease, or no leader election).",
    )
    .sample(&[], bool_value(status.leading));
    e.family(
        "fleetscaler_dry_run",
        Type::Gauge,
        "Whether hub.dry_run is on for the whole fleet.",
    )
    .sample(&[], bool_value(status.dry_run));
    if let Some(reload) = &status.last_reload {
        e.family(
            "fleetscaler_config_last_reload_successful",
            Type::Gauge,
            "Whether the last reload of fleet.toml succeeded.",
        )
        .sample(&[], bool_value(reload.ok));
    }
    e.family(
        "fleetscaler_build_info",
        Type::Gauge,
        "The running version, in its label.",
    )
    .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1.0);
}

#[cfg(test)]
mod tests;
