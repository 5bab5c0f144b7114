#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! What a platform team reads off the hub, against the simulated fleet: `/metrics` (upstream
//! names with a `cluster` label, checked by Prometheus's own `promtool`), the fleet API with
//! its health, the probes, and a degraded fleet holding scale-down back everywhere.

use crate::e2e_support;

use std::time::Duration;

use e2e_support::*;
use fleetscaler::cluster::report::Phase;
use fleetscaler::hub::health::{ClusterState, FleetState};
use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::settings::Flavor;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(40);

/// The value of the one sample whose line starts with `series`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Upstream's gauges and counters whose names end in `_count`, kept as they are so that
/// existing cluster-autoscaler dashboards and alerts work: promtool's naming lint flags that
/// suffix (it belongs to histograms and summaries), and for the two counters the missing
/// `_total`; those findings alone are accepted for them.
const UPSTREAM_COUNT_NAMES: [&str; 10] = [
    "cluster_autoscaler_old_unregistered_nodes_removed_count",
    "cluster_autoscaler_skipped_scale_events_count",
    "cluster_autoscaler_node_group_max_count",
    "cluster_autoscaler_node_group_min_count",
    "cluster_autoscaler_node_group_target_count",
    "cluster_autoscaler_node_groups_count",
    "cluster_autoscaler_nodes_count",
    "cluster_autoscaler_unneeded_nodes_count",
    "cluster_autoscaler_unremovable_nodes_count",
    "cluster_autoscaler_unschedulable_pods_count",
];

/// `promtool check metrics` from Debian's `prometheus` package: the exposition must parse,
/// and follow Prometheus's naming rules but for upstream's own `_count` gauges.
fn promtool_check(metrics: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = child.unwrap_or_else(|e| {
        panic!("cannot run promtool ({e}): install it with `apt-get install prometheus` (scripts/test.sh does so under CI)")
    });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let unexpected: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            let name = l.split(' ').next().unwrap_or("");
            !(UPSTREAM_COUNT_NAMES.contains(&name)
                && (l.contains("should not have \"_count\" suffix")
                    || l.contains("should have \"_total\" suffix")))
        })
        .collect();
    assert!(unexpected.is_empty(), "promtool: {said}");
    // promtool exits 3 for naming findings alone, 1 when the exposition does not parse.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "promtool failed ({:?}): {said}",
        out.status.code()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_api_and_probes_describe_the_fleet() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("observability");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let (addr, stop_http) = serve_http(&hub).await;
    let sim = &fleet.clusters()[0];
    create_pods(sim, "web", 8, "3").await;
    eventually(LONG, "all eight pods running", || {
        let n = running(&pods(sim, "web"));
        async move { (n == 8).then_some(()) }
    })
    .await;

    // The pods can run before the pass that bought their node has published its report
    // (its status and events are written after the scale-up), and on a loaded machine
    // before the idle sim-2 has finished its first pass (sim-1's scale-up can take less
    // than a second): the metrics are read until they show both.
    let added = "cluster_autoscaler_scaled_up_nodes_total{cluster=\"sim-1\"}";
    let latency = "fleetscaler_scale_up_latency_seconds_count{cluster=\"sim-1\"}";
    let ready = "cluster_autoscaler_nodes_count{cluster=\"sim-1\",state=\"ready\"}";
    let healthy = "fleetscaler_clusters{state=\"healthy\"}";
    let metrics = eventually(
        LONG,
        "the scale-up in the metrics, both clusters past their first pass",
        || async move {
            let (status, metrics) = http_request(addr, "GET", "/metrics").await;
            assert_eq!(status, 200);
            let at_least = |name, n| sample(&metrics, name).is_some_and(|v| v >= n);
            let shown = at_least(added, 1.0) && at_least(latency, 1.0) && at_least(ready, 5.0);
            (shown && at_least(healthy, 2.0)).then_some(metrics)
        },
    )
    .await;
    promtool_check(&metrics);
    let safe = "cluster_autoscaler_cluster_safe_to_autoscale{cluster=\"sim-2\"}";
    assert_eq!(sample(&metrics, safe), Some(1.0));
    assert_eq!(sample(&metrics, healthy), Some(2.0));
    assert_eq!(sample(&metrics, "fleetscaler_fleet_degraded"), Some(0.0));
    let rules = names_in_rules();
    assert!(rules.len() >= 5, "{rules:?}");
    for name in rules {
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "the rules use {name}, not served"
        );
    }

    let (status, body) = http_request(addr, "GET", "/api/v1/fleet").await;
    assert_eq!(status, 200);
    let fleet_json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(fleet_json["fleet"]["state"], "healthy");
    assert_eq!(fleet_json["fleet"]["clusters"], 2);
    let clusters = fleet_json["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 2);
    for c in clusters {
        assert!(c["pending"].is_array(), "{c}");
        assert!(c["settings"].is_object(), "{c}");
        assert!(c["groups"].as_array().is_some_and(|g| !g.is_empty()), "{c}");
    }
    for probe in ["/livez", "/readyz", "/healthz"] {
        assert_eq!(
            http_request(addr, "GET", probe).await,
            (200, "ok\n".to_string()),
            "{probe}"
        );
        assert_eq!(
            http_request(addr, "HEAD", probe).await,
            (200, String::new()),
            "{probe}"
        );
    }
    assert_eq!(http_request(addr, "POST", "/readyz").await.0, 405);
    stop_http.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_fleet_holds_scale_down_everywhere() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("degraded");
    let mut config = fleet_config(&fleet, dir.path(), fast_settings());
    config.fleet.max_unhealthy_clusters = Some(0);
    let hub = Hub::start(config).await;
    let view = hub.view();
    let [one, two] = [0, 1].map(|i| &fleet.clusters()[i]);
    create_pods(one, "web", 8, "3").await;
    eventually(LONG, "all eight pods running", || {
        let n = running(&pods(one, "web"));
        async move { (n == 8).then_some(()) }
    })
    .await;
    let scaled = sum_replicas(&worker_groups(one));

    two.faults().set(Faults {
        error_rate: 1.0,
        error_code: 500,
        drop_watches: true,
        ..Faults::default()
    });
    eventually(LONG, "the fleet degraded by sim-2", || {
        let h = view.health();
        async move { (h.state == FleetState::Degraded && h.reason.contains("sim-2")).then_some(()) }
    })
    .await;
    delete_pods(one, "web").await;
    // Passes go on in sim-1, finding nodes to remove but holding them back.
    let held = eventually(LONG, "sim-1 holding back removals", || {
        let r = view.report("sim-1").unwrap();
        async move {
            let plan = r.plan.clone()?;
            let paused = plan.scale_down_paused.clone()?;
            // The hold is an input of the pass, recorded in its plan for replay.
            (r.phase == Phase::Running
                && paused.contains("the fleet is degraded")
                && plan.fleet_policy.scale_down_hold.as_ref() == Some(&paused)
                && !plan.unneeded.is_empty())
            .then_some(r.counters.durations.get("main").map_or(0, |h| h.count))
        }
    })
    .await;
    eventually(LONG, "five more passes in sim-1", || {
        let r = view.report("sim-1").unwrap();
        let passes = r.counters.durations.get("main").map_or(0, |h| h.count);
        async move { (passes >= held + 5).then_some(()) }
    })
    .await;
    assert!(tainted_nodes(one).is_empty());
    assert_eq!(sum_replicas(&worker_groups(one)), scaled);

    // sim-2 recovers: the fleet is healthy again and sim-1 removes its idle nodes.
    two.faults().clear();
    eventually(LONG, "the fleet healthy again", || {
        let h = view.health();
        async move { (h.state == FleetState::Healthy).then_some(()) }
    })
    .await;
    eventually(LONG, "sim-1 scaled down", || {
        let n = sum_replicas(&worker_groups(one));
        async move { (n < scaled).then_some(()) }
    })
    .await;
    hub.stop().await;
    fleet.shutdown().await;
}

/// Issue 25, point 3: two of three clusters with a mistyped context were counted unhealthy,
/// so the fleet was degraded and the healthy one never scaled down. Misconfigured clusters
/// are reported as such, with check-config's words, and count for nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistyped_contexts_do_not_hold_back_the_healthy_cluster() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("misconfigured");
    let mut config = fleet_config(&fleet, dir.path(), fast_settings());
    for typo in ["east", "west"] {
        let mut c = cluster_config(typo);
        c.context = Some(format!("{typo}-typo"));
        config.clusters.push(c);
    }
    let hub = Hub::start(config).await;
    let view = hub.view();
    for typo in ["east", "west"] {
        let r = eventually(LONG, "the cluster reported misconfigured", || {
            let r = view.report(typo).unwrap();
            async move { (r.phase == Phase::Misconfigured).then_some(r) }
        })
        .await;
        let message = r.message.unwrap_or_default();
        assert!(
            message.contains(&format!("context \"{typo}-typo\" is not in"))
                && message.contains("(its contexts: sim-1)"),
            "{message}"
        );
    }
    let one = &fleet.clusters()[0];
    create_pods(one, "web", 8, "3").await;
    eventually(LONG, "all eight pods running", || {
        let n = running(&pods(one, "web"));
        async move { (n == 8).then_some(()) }
    })
    .await;
    let scaled = sum_replicas(&worker_groups(one));
    delete_pods(one, "web").await;
    eventually(LONG, "sim-1 scaled down", || {
        let n = sum_replicas(&worker_groups(one));
        async move { (n < scaled).then_some(()) }
    })
    .await;
    let h = view.health();
    assert_eq!(h.state, FleetState::Healthy, "{}", h.reason);
    // As the API and the dashboard class it.
    let east = view.report("east").unwrap();
    assert_eq!(ClusterState::of(&east), ClusterState::Misconfigured);
    hub.stop().await;
    fleet.shutdown().await;
}

#[test]
fn the_documented_alerting_rules_are_valid() {
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/prometheus-rules.yaml");
    let out = std::process::Command::new("promtool")
        .args(["check", "rules", rules])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install it with `apt-get install prometheus`")
        });
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("SUCCESS: 7 rules found"), "{said}");
}

/// The metric names the documented alerting rules use.
fn names_in_rules() -> Vec<String> {
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/prometheus-rules.yaml");
    let text = std::fs::read_to_string(rules).unwrap();
    let re = regex::Regex::new(r"\b(?:cluster_autoscaler|fleetscaler)_[a-z_]+").unwrap();
    let mut names: Vec<String> = re
        .find_iter(&text)
        .map(|m| m.as_str().trim_end_matches("_bucket").to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// docs/metrics.md says which names promtool flags and how many: the list the test accepts.
#[test]
fn metrics_doc_names_exactly_the_names_promtool_flags() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    let start = doc.find("`promtool check metrics` flags").unwrap();
    let paragraph = &doc[start..start + doc[start..].find("\n\n").unwrap()];
    let paragraph = paragraph.replace("\n", " ").replace(
        "`node_group_{min,max,target}_count`",
        "`node_group_min_count` `node_group_max_count` `node_group_target_count`",
    );
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let count = words[UPSTREAM_COUNT_NAMES.len()];
    assert!(
        paragraph.contains(&format!("flags {count} upstream names")),
        "{paragraph}"
    );
    // Every `name_count` in it, not the bare suffix `_count`.
    let named = paragraph.matches("_count`").count() - paragraph.matches("`_count`").count();
    assert_eq!(named, UPSTREAM_COUNT_NAMES.len(), "{paragraph}");
    for name in UPSTREAM_COUNT_NAMES {
        let short = name.trim_start_matches("cluster_autoscaler_");
        assert!(
            paragraph.contains(&format!("`{short}`")),
            "{short} not in: {paragraph}"
        );
    }
}
