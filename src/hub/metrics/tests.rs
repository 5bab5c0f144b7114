use jiff::Timestamp;

use super::*;
use crate::cluster::ClusterName;
use crate::cluster::gate::WriteGate;
use crate::cluster::report::Phase;
use crate::hub::fleet::Fleet as Hub;
use crate::telemetry::metrics::{Value, text};

fn status() -> HubStatus {
    HubStatus::plain()
}

/// Two clusters, `b` listed first: `a` running, healthy, with a pass measured and a
/// restart (no pass summary yet: still starting, as the fleet counts it); `b` connecting.
fn fleet() -> Fleet {
    let now = Timestamp::now();
    let mut a = ClusterReport::new(ClusterName::new("a"), false, now);
    a.phase = Phase::Running;
    a.nodes_healthy = true;
    a.restarts = 2;
    a.node_groups = 3;
    a.counters.observe_duration("main", 0.003);
    a.counters.scaled_up_nodes = 4;
    let b = ClusterReport::new(ClusterName::new("b"), false, now);
    Fleet {
        reports: vec![b, a],
        health: FleetHealth::starting(now),
        failures: Vec::new(),
        hub: status(),
    }
}

#[test]
fn the_snapshot_holds_every_family_with_the_clusters_in_order() {
    let snapshot = fleet().snapshot();
    let names: Vec<&str> = snapshot.families.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names.first(),
        Some(&"cluster_autoscaler_cluster_safe_to_autoscale")
    );
    assert_eq!(names.last(), Some(&"fleetscaler_build_info"));
    assert!(
        !names.contains(&"fleetscaler_config_last_reload_successful"),
        "no reload yet"
    );
    let family = |name: &str| {
        snapshot
            .families
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let safe = family("cluster_autoscaler_cluster_safe_to_autoscale");
    let clusters: Vec<(&str, &Value)> = safe
        .series
        .iter()
        .map(|s| (s.labels[0].1.as_str(), &s.value))
        .collect();
    assert_eq!(
        clusters,
        [("a", &Value::Number(1.0)), ("b", &Value::Number(0.0))]
    );
    assert_eq!(
        family("fleetscaler_runner_restarts_total").kind,
        Type::Counter
    );
    let Value::Histogram(h) =
        &family("cluster_autoscaler_function_duration_seconds").series[0].value
    else {
        panic!("a histogram");
    };
    assert_eq!((h.count, h.buckets.len()), (1, 14));
    assert_eq!(h.buckets[1], (0.0025, 0));
    assert_eq!(h.buckets[2], (0.005, 1), "cumulative");
}

#[test]
fn the_text_is_the_exposition_served_on_metrics() {
    let text = text(&fleet().snapshot());
    for line in [
        "# HELP cluster_autoscaler_cluster_safe_to_autoscale Whether the cluster is healthy enough for autoscaling: 1 if it is, 0 otherwise.\n\
         # TYPE cluster_autoscaler_cluster_safe_to_autoscale gauge\n\
         cluster_autoscaler_cluster_safe_to_autoscale{cluster=\"a\"} 1\n\
         cluster_autoscaler_cluster_safe_to_autoscale{cluster=\"b\"} 0\n",
        "cluster_autoscaler_node_groups_count{cluster=\"a\",node_group_type=\"autoscaled\"} 3\n",
        "cluster_autoscaler_scaled_up_nodes_total{cluster=\"a\"} 4\n",
        "cluster_autoscaler_function_duration_seconds_bucket{cluster=\"a\",function=\"main\",le=\"0.005\"} 1\n",
        "cluster_autoscaler_function_duration_seconds_bucket{cluster=\"a\",function=\"main\",le=\"+Inf\"} 1\n\
         cluster_autoscaler_function_duration_seconds_sum{cluster=\"a\",function=\"main\"} 0.003\n\
         cluster_autoscaler_function_duration_seconds_count{cluster=\"a\",function=\"main\"} 1\n",
        "fleetscaler_runner_restarts_total{cluster=\"a\"} 2\n",
        "fleetscaler_clusters{state=\"starting\"} 2\n",
        "fleetscaler_scale_up_latency_seconds_count{cluster=\"b\"} 0\n",
        "# TYPE fleetscaler_fleet_backoffs gauge\n# HELP fleetscaler_pass_queue_seconds",
        "fleetscaler_leader 1\n\
         # HELP fleetscaler_dry_run Whether hub.dry_run is on for the whole fleet.\n\
         # TYPE fleetscaler_dry_run gauge\n\
         fleetscaler_dry_run 0\n\
         # HELP fleetscaler_build_info",
    ] {
        assert!(text.contains(line), "{line}\nnot in\n{text}");
    }
    let version = format!(
        "fleetscaler_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.ends_with(&version), "{text}");
}

#[test]
fn a_fleet_view_gives_its_snapshot() {
    let (_hub, view) = Hub::new(WriteGate::always_open(), None, "test".into(), status());
    let snapshot = view.metrics();
    let clusters = snapshot
        .families
        .iter()
        .find(|f| f.name == "fleetscaler_clusters")
        .unwrap();
    assert!(
        clusters
            .series
            .iter()
            .all(|s| s.value == Value::Number(0.0)),
        "no cluster yet: {clusters:?}"
    );
    assert_eq!(snapshot, super::snapshot(&view));
}
