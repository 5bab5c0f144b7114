//! The upstream cluster-autoscaler's metrics (`cluster_autoscaler_*`, same names and types),
//! one series per cluster with a `cluster` label, read off each cluster's latest report.

use std::collections::BTreeMap;

use crate::cluster::metrics::{ERROR_TYPES, FAILED_SCALE_UP_REASONS, SCALE_DOWN_REASONS};
use crate::cluster::report::{ClusterReport, Phase};
use crate::engine::plan::Plan;
use crate::telemetry::metrics::{MetricsBuilder, Type};

const P: &str = "cluster_autoscaler_";

/// Writes every per-cluster family; clusters without a pass yet have no plan-based series.
pub fn write(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    gauges(e, reports);
    plan_gauges(e, reports);
    node_group_gauges(e, reports);
    counters(e, reports);
    histograms(e, reports);
}

fn gauges(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    family(
        e,
        "cluster_safe_to_autoscale",
        Type::Gauge,
        "Whether the cluster is healthy enough for autoscaling: 1 if it is, 0 otherwise.",
    );
    for r in reports {
        let safe = r.phase == Phase::Running && r.nodes_healthy;
        e.sample(&[("cluster", r.name.as_str())], bool_value(safe));
    }
    family(
        e,
        "node_groups_count",
        Type::Gauge,
        "Number of node groups managed by the autoscaler.",
    );
    for r in reports {
        let labels = [
            ("cluster", r.name.as_str()),
            ("node_group_type", "autoscaled"),
        ];
        e.sample(&labels, r.node_groups as f64);
    }
    family(
        e,
        "unschedulable_pods_count",
        Type::Gauge,
        "Number of unschedulable pods in the cluster.",
    );
    for r in reports {
        let labels = [("cluster", r.name.as_str()), ("type", "unschedulable")];
        e.sample(&labels, r.pending_pods as f64);
    }
    family(
        e,
        "last_activity",
        Type::Gauge,
        "Last time certain part of the autoscaler logic executed (unix seconds).",
    );
    for r in reports {
        for (activity, at) in &r.counters.last_activity {
            let labels = [("cluster", r.name.as_str()), ("activity", *activity)];
            e.sample(&labels, at.as_millisecond() as f64 / 1e3);
        }
    }
}

/// Families read off the last plan.
fn plan_gauges(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    let planned: Vec<(&str, &Plan)> = reports
        .iter()
        .filter_map(|r| r.plan.as_deref().map(|p| (r.name.as_str(), p)))
        .collect();
    family(
        e,
        "nodes_count",
        Type::Gauge,
        "Number of nodes in the cluster, by state.",
    );
    for (cluster, p) in &planned {
        let h = &p.health.cluster;
        for (state, n) in [
            ("ready", h.ready),
            ("unready", h.unready),
            ("notStarted", h.not_started),
            ("unregistered", h.unregistered),
            ("longUnregistered", h.long_unregistered),
        ] {
            e.sample(&[("cluster", cluster), ("state", state)], n as f64);
        }
    }
    limits(e, &planned);
    family(
        e,
        "unneeded_nodes_count",
        Type::Gauge,
        "Number of nodes currently considered unneeded.",
    );
    for (cluster, p) in &planned {
        e.sample(&[("cluster", cluster)], p.unneeded.len() as f64);
    }
    family(
        e,
        "unremovable_nodes_count",
        Type::Gauge,
        "Number of nodes that cannot be removed, by reason.",
    );
    for (cluster, p) in &planned {
        let mut by_reason: BTreeMap<&str, u64> = BTreeMap::new();
        for n in &p.not_removable {
            *by_reason.entry(n.code.as_str()).or_default() += 1;
        }
        for (reason, n) in by_reason {
            e.sample(&[("cluster", cluster), ("reason", reason)], n as f64);
        }
    }
    family(
        e,
        "scale_down_in_cooldown",
        Type::Gauge,
        "Whether scale-down is paused (cooldown, disabled, unhealthy cluster or degraded fleet).",
    );
    for (cluster, p) in &planned {
        e.sample(
            &[("cluster", cluster)],
            bool_value(p.scale_down_paused.is_some()),
        );
    }
}

fn limits(e: &mut MetricsBuilder, planned: &[(&str, &Plan)]) {
    family(
        e,
        "max_nodes_count",
        Type::Gauge,
        "Maximum number of nodes in the cluster.",
    );
    for (cluster, p) in planned {
        if let Some(max) = p.limits.max_nodes_total.max {
            e.sample(&[("cluster", cluster)], max as f64);
        }
    }
    family(
        e,
        "cluster_cpu_current_cores",
        Type::Gauge,
        "Current number of cores in the cluster.",
    );
    for (cluster, p) in planned {
        e.sample(&[("cluster", cluster)], p.limits.cores.used);
    }
    family(
        e,
        "cluster_memory_current_bytes",
        Type::Gauge,
        "Current number of bytes of memory in the cluster.",
    );
    for (cluster, p) in planned {
        e.sample(&[("cluster", cluster)], p.limits.memory_gib.used * GIB);
    }
    family(
        e,
        "cpu_limits_cores",
        Type::Gauge,
        "Minimum and maximum number of cores in the cluster.",
    );
    for (cluster, p) in planned {
        let c = &p.limits.cores;
        bounds(e, cluster, c.min, c.max, 1.0);
    }
    family(
        e,
        "memory_limits_bytes",
        Type::Gauge,
        "Minimum and maximum number of bytes of memory in the cluster.",
    );
    for (cluster, p) in planned {
        let m = &p.limits.memory_gib;
        bounds(e, cluster, m.min, m.max, GIB);
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn bounds(e: &mut MetricsBuilder, cluster: &str, min: Option<u64>, max: Option<u64>, unit: f64) {
    for (direction, v) in [("minimum", min), ("maximum", max)] {
        if let Some(v) = v {
            e.sample(
                &[("cluster", cluster), ("direction", direction)],
                v as f64 * unit,
            );
        }
    }
}

/// Upstream keeps these behind `--emit-per-nodegroup-metrics`; a fleet hub's dashboards need
/// them, and a cluster has tens of groups at most, so they are always on.
fn node_group_gauges(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    type Pick = fn(&crate::cluster::report::GroupSummary) -> Option<f64>;
    let families: [(&str, &str, Pick); 4] = [
        (
            "node_group_min_count",
            "Minimum number of nodes in the node group.",
            |g| g.min.map(|v| v as f64),
        ),
        (
            "node_group_max_count",
            "Maximum number of nodes in the node group.",
            |g| g.max.map(|v| v as f64),
        ),
        (
            "node_group_target_count",
            "Target number of nodes in the node group.",
            |g| g.target.map(|v| v as f64),
        ),
        (
            "node_group_healthiness",
            "Whether the node group is healthy (1) or not (0).",
            |g| Some(bool_value(g.healthy)),
        ),
    ];
    for (name, help, pick) in families {
        family(e, name, Type::Gauge, help);
        for r in reports {
            for g in r.groups.iter().filter(|g| g.eligible) {
                if let Some(v) = pick(g) {
                    e.sample(
                        &[("cluster", r.name.as_str()), ("node_group", g.id.as_str())],
                        v,
                    );
                }
            }
        }
    }
    family(
        e,
        "node_group_backoff_status",
        Type::Gauge,
        "Whether the node group is backed off (1) or not (0).",
    );
    for r in reports {
        for g in r.groups.iter().filter(|g| g.eligible) {
            let labels = [("cluster", r.name.as_str()), ("node_group", g.id.as_str())];
            e.sample(&labels, bool_value(g.backoff_until.is_some()));
        }
    }
}

fn counters(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    family(
        e,
        "scaled_up_nodes_total",
        Type::Counter,
        "Number of nodes added by the autoscaler.",
    );
    for r in reports {
        e.sample(
            &[("cluster", r.name.as_str())],
            r.counters.scaled_up_nodes as f64,
        );
    }
    let labelled_counters: [Labelled; 4] = [
        Labelled {
            name: "scaled_down_nodes_total",
            help: "Number of nodes removed by the autoscaler.",
            label: "reason",
            known: &SCALE_DOWN_REASONS,
            pick: |r| &r.counters.scaled_down_nodes,
        },
        Labelled {
            name: "failed_scale_ups_total",
            help: "Number of times a scale-up failed.",
            label: "reason",
            known: &FAILED_SCALE_UP_REASONS,
            pick: |r| &r.counters.failed_scale_ups,
        },
        Labelled {
            name: "errors_total",
            help: "The number of errors the autoscaler ran into.",
            label: "type",
            known: &ERROR_TYPES,
            pick: |r| &r.counters.errors,
        },
        Labelled {
            name: "old_unregistered_nodes_removed_count",
            help: "Number of machines removed because they failed or never registered.",
            label: "reason",
            known: &["failed", "unregistered"],
            pick: |r| &r.counters.deleted_machines,
        },
    ];
    for l in labelled_counters {
        l.write(e, reports);
    }
    family(
        e,
        "evicted_pods_total",
        Type::Counter,
        "Number of pods evicted by the autoscaler, by whether the eviction succeeded.",
    );
    for r in reports {
        let c = &r.counters;
        for (result, n) in [
            ("succeeded", c.evicted_pods),
            ("failed", c.failed_evictions),
        ] {
            let labels = [("cluster", r.name.as_str()), ("eviction_result", result)];
            e.sample(&labels, n as f64);
        }
    }
    skipped_scale_events(e, reports);
}

/// Upstream's `skipped_scale_events_count{direction, reason}`, every pair from the start
/// (the OpenShift operator's `ClusterAutoscalerUnableToScale*LimitReached` alerts read it).
fn skipped_scale_events(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    family(
        e,
        "skipped_scale_events_count",
        Type::Counter,
        "Count of scaling events held back by a cores or memory limit: node groups a max left no room for one node (up), nodes a min kept (down).",
    );
    for r in reports {
        for direction in ["up", "down"] {
            for reason in ["CpuResourceLimit", "MemoryResourceLimit"] {
                let n = r
                    .counters
                    .skipped_scale_events
                    .get(&(direction, reason))
                    .copied()
                    .unwrap_or(0);
                let labels = [
                    ("cluster", r.name.as_str()),
                    ("direction", direction),
                    ("reason", reason),
                ];
                e.sample(&labels, n as f64);
            }
        }
    }
}

/// A counter labelled by one value, each of its `known` values served from the start (as
/// upstream's `InitMetrics` does), so that dashboards and alerts have data before anything
/// happened; values met beside them follow.
struct Labelled {
    name: &'static str,
    help: &'static str,
    label: &'static str,
    known: &'static [&'static str],
    pick: fn(&ClusterReport) -> &BTreeMap<&'static str, u64>,
}

impl Labelled {
    fn write(&self, e: &mut MetricsBuilder, reports: &[ClusterReport]) {
        family(e, self.name, Type::Counter, self.help);
        for r in reports {
            let counts = (self.pick)(r);
            let extra = counts.keys().filter(|k| !self.known.contains(*k));
            for value in self.known.iter().chain(extra) {
                let n = counts.get(value).copied().unwrap_or(0);
                e.sample(
                    &[("cluster", r.name.as_str()), (self.label, value)],
                    n as f64,
                );
            }
        }
    }
}

fn histograms(e: &mut MetricsBuilder, reports: &[ClusterReport]) {
    family(
        e,
        "function_duration_seconds",
        Type::Histogram,
        "Time taken by various parts of the autoscaler loop: main (a whole pass), autoscaling (the decision).",
    );
    for r in reports {
        for (function, h) in &r.counters.durations {
            let labels = [("cluster", r.name.as_str()), ("function", *function)];
            e.histogram(&labels, h.cumulative(), h.sum, h.count);
        }
    }
}

fn family(e: &mut MetricsBuilder, name: &str, kind: Type, help: &str) {
    e.family(&format!("{P}{name}"), kind, help);
}

pub(super) fn bool_value(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}
