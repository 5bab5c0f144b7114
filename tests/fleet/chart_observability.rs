//! The chart's Grafana dashboard and PrometheusRule (charts/fleetscaler/files/), as real Helm
//! renders them (scripts/helm-check.sh, through tests/fleet/chart_support): each rendered only
//! when enabled and labelled as asked, the rules one file with docs/prometheus-rules.yaml,
//! every PromQL expression of both parsed by Prometheus's own `promtool`, and every metric
//! they read served by a real hub's /metrics on the simulated fleet.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::chart_support;
use crate::e2e_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use chart_support::promql::{self, Query};
use chart_support::*;
use e2e_support::*;
use fleetscaler::sim::settings::Flavor;
use serde_json::{Value, json};

const RULES: &str = "charts/fleetscaler/files/prometheus-rules.yaml";
const DASHBOARD: &str = "charts/fleetscaler/files/grafana-dashboard.json";
/// The renders with the rule and the dashboard on: the example, labelled for
/// kube-prometheus-stack, and one labelled for another Grafana.
const ENABLED: [&str; 2] = ["multi-cluster", "observability"];
/// The renders with the rule but not the dashboard: upstream cluster-autoscaler chart's
/// names (tests/fleet/chart_values.rs).
const RULE_ONLY: [&str; 4] = [
    "upstream-own-names",
    "upstream-names",
    "upstream-both-names",
    "upstream-fills",
];
/// The value `$cluster` takes when the dashboard's expressions are checked.
const CLUSTER: &str = "sim-1";

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn rules_file() -> Value {
    serde_saphyr::from_str(&read(RULES)).unwrap()
}

fn prometheus_rule(case: &str) -> Value {
    one(&docs(case), "PrometheusRule").clone()
}

/// The rendered PrometheusRule's rules as a Prometheus rules file.
fn rendered_rules(case: &str) -> Value {
    json!({"groups": prometheus_rule(case)["spec"]["groups"]})
}

fn dashboard_map(case: &str) -> Value {
    config_map_with(&docs(case), "fleetscaler.json").clone()
}

fn dashboard(case: &str) -> Value {
    let text = dashboard_map(case)["data"]["fleetscaler.json"]
        .as_str()
        .unwrap()
        .to_string();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{case}: the dashboard: {e}"))
}

fn dashboard_queries(dashboard: &Value) -> Vec<Query> {
    let (queries, problems) = promql::dashboard_queries(dashboard, &[("cluster", CLUSTER)]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    queries
}

#[test]
fn the_documented_rules_are_the_charts_own() {
    assert!(
        read("docs/prometheus-rules.yaml") == read(RULES),
        "docs/prometheus-rules.yaml differs from {RULES}, which the chart ships: \
         cp {RULES} docs/prometheus-rules.yaml"
    );
}

#[test]
fn the_rule_and_the_dashboard_are_rendered_only_when_enabled() {
    for case in CASES.iter().filter(|c| !ENABLED.contains(c)) {
        let docs = docs(case);
        assert_eq!(
            all(&docs, "PrometheusRule").len(),
            usize::from(RULE_ONLY.contains(case)),
            "{case}"
        );
        let dashboards = all(&docs, "ConfigMap")
            .into_iter()
            .filter(|c| !c["data"]["fleetscaler.json"].is_null())
            .count();
        assert_eq!(dashboards, 0, "{case}");
    }
}

#[test]
fn the_prometheus_rule_carries_the_charts_rules_and_its_labels() {
    for case in ENABLED {
        let rule = prometheus_rule(case);
        assert_eq!(
            rule["spec"]["groups"],
            rules_file()["groups"],
            "{case}: the rendered rules differ from {RULES}"
        );
        assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
        assert_eq!(
            rule["metadata"]["labels"]["app.kubernetes.io/name"],
            "fleetscaler"
        );
    }
    // What kube-prometheus-stack's ruleSelector matches.
    let example = prometheus_rule("multi-cluster");
    assert_eq!(
        example["metadata"]["labels"]["release"], "kube-prometheus-stack",
        "{example}"
    );
    let other = prometheus_rule("observability");
    assert_eq!(
        other["metadata"]["annotations"],
        json!({"team": "platform"})
    );
    assert!(other["metadata"]["labels"]["release"].is_null());
}

#[test]
fn the_dashboard_is_a_config_map_for_grafanas_sidecar() {
    let example = dashboard_map("multi-cluster");
    let meta = &example["metadata"];
    assert_eq!(meta["namespace"], "monitoring", "Grafana's own namespace");
    assert_eq!(
        meta["labels"]["grafana_dashboard"], "1",
        "the sidecar's default"
    );
    assert_eq!(meta["annotations"]["grafana_folder"], "Autoscaling");
    let other = dashboard_map("observability");
    let meta = &other["metadata"];
    assert_eq!(meta["namespace"], NAMESPACE);
    assert_eq!(meta["labels"]["grafana.example.com/dashboard"], "fleet");
    assert_eq!(meta["labels"]["team"], "platform");
    assert!(meta["labels"]["grafana_dashboard"].is_null(), "{meta}");

    let shipped: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    for case in ENABLED {
        assert_eq!(
            dashboard(case),
            shipped,
            "{case}: not the file the chart ships"
        );
    }
    let d = shipped;
    assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let variables = d["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    let cluster = variable("cluster");
    assert_eq!(
        (&cluster["multi"], &cluster["includeAll"]),
        (&json!(true), &json!(true)),
        "{cluster}"
    );

    // Panel ids are unique, every query goes to the chosen data source, and every panel of
    // the upstream per-cluster metrics follows the `cluster` variable.
    let mut ids = BTreeSet::new();
    let mut panels = 0;
    let mut stack: Vec<&Value> = d["panels"].as_array().unwrap().iter().collect();
    while let Some(p) = stack.pop() {
        panels += 1;
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "panel id {} twice",
            p["id"]
        );
        stack.extend(p["panels"].as_array().into_iter().flatten());
        for t in p["targets"].as_array().into_iter().flatten() {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
            let expr = t["expr"].as_str().unwrap();
            if expr.contains("cluster_autoscaler_") {
                assert!(
                    expr.contains("cluster=~\"$cluster\""),
                    "{}: not filtered by $cluster: {expr}",
                    p["title"]
                );
            }
        }
    }
    assert!(panels >= 20, "{panels} panels");
}

/// Every expression, as Prometheus parses it: the dashboard's (with `$cluster` and the
/// interval variables given values) and the rendered rule's. A broken expression and an
/// unknown variable are caught, so the check is not vacuous.
#[test]
fn every_promql_expression_of_the_dashboard_and_the_rule_parses() {
    let queries = dashboard_queries(&dashboard("observability"));
    assert!(queries.len() >= 25, "{queries:?}");
    assert!(queries.iter().all(|q| !q.expr.contains('$')), "{queries:?}");
    promql::promtool_check_queries(&queries).unwrap_or_else(|e| panic!("{e}"));

    let rules = rendered_rules("observability");
    let count = promql::rule_queries(&rules).len();
    assert_eq!(count, 7);
    let dir = TempDir::new("chart-rules");
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, rules.to_string()).unwrap();
    promql::promtool_check_rules(&file, count).unwrap_or_else(|e| panic!("{e}"));

    let broken = Query {
        at: "broken".into(),
        expr: "sum by (cluster) (rate(fleetscaler_leader[5m])".into(),
    };
    let mut with_broken = queries.clone();
    with_broken.push(broken);
    assert!(promql::promtool_check_queries(&with_broken).is_err());
    let mut unknown = dashboard("observability");
    unknown["panels"][1]["targets"][0]["expr"] = json!("max(fleetscaler_leader{job=\"$job\"})");
    let (_, problems) = promql::dashboard_queries(&unknown, &[("cluster", CLUSTER)]);
    assert!(
        problems.len() == 1 && problems[0].contains("$job is not a variable"),
        "{problems:?}"
    );
}

#[test]
fn metric_names_are_told_from_functions_keywords_and_labels() {
    let names = |e: &str| promql::metric_names(e);
    assert_eq!(
        names(
            "histogram_quantile(0.9, sum by (cluster, le) (rate(a_bucket{x=\"y\", z=~\"b|c\"}[5m:1m]))) \
             / on (cluster) group_left (state) b:recorded offset 5m > bool 1e3 and ignoring (x) c"
        ),
        ["a_bucket", "b:recorded", "c"]
    );
    assert_eq!(
        names("label_replace(time() - max without (le) (d), \"to\", \"$1\", \"from\", \"(.*)\")"),
        ["d"]
    );
    assert_eq!(names("sum(e) by (cluster) unless NaN"), ["e"]);
    assert_eq!(names("vector(1) * Inf"), Vec::<String>::new());
    assert_eq!(names("{__name__=\"f\"}"), ["{__name__=\"f\"}"]);
}

/// What `queries` read that `served` does not have, and queries that read nothing of it.
fn unserved(queries: &[Query], served: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    for q in queries {
        let names = promql::metric_names(&q.expr);
        if names.is_empty() {
            problems.push(format!("{}: reads no metric: {}", q.at, q.expr));
        }
        for name in names.iter().filter(|n| !served.contains(*n)) {
            problems.push(format!("{}: {name} is not served: {}", q.at, q.expr));
        }
    }
    problems
}

/// The served names come from a hub autoscaling the simulated fleet, scraped over HTTP, so
/// a metric renamed or dropped in the hub fails here as a misspelt one in the dashboard does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_the_rule_read_is_served_by_the_hub() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("chart-observability");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let (addr, stop_http) = serve_http(&hub).await;
    let ready = format!("cluster_autoscaler_nodes_count{{cluster=\"{CLUSTER}\",state=\"ready\"}} ");
    let metrics = eventually(
        Duration::from_secs(40),
        "a pass counted in /metrics",
        || {
            let ready = ready.clone();
            async move {
                let (status, body) = http_request(addr, "GET", "/metrics").await;
                (status == 200 && body.contains(&ready)).then_some(body)
            }
        },
    )
    .await;
    stop_http.cancel();
    hub.stop().await;
    fleet.shutdown().await;

    let served = promql::served_names(&metrics);
    assert!(served.len() >= 30, "{served:?}");
    let mut queries = dashboard_queries(&dashboard("observability"));
    queries.extend(promql::rule_queries(&rendered_rules("observability")));
    let problems = unserved(&queries, &served);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // A hub that has done nothing yet (one quiet pass) already has data for every panel and
    // rule: counters at zero for each of their labels, as upstream's metric initialisation.
    let no_data = unserved(&queries, &promql::sampled_names(&metrics));
    assert!(no_data.is_empty(), "no data yet:\n{}", no_data.join("\n"));
    let skipped = "cluster_autoscaler_skipped_scale_events_count{cluster=\"sim-1\",direction=\"up\",reason=\"CpuResourceLimit\"} 0";
    assert!(metrics.contains(skipped), "{metrics}");

    // The same check on a dashboard with one misspelt metric finds exactly it.
    let mut wrong = dashboard("observability");
    let target = &mut wrong["panels"][1]["targets"][0]["expr"];
    let right = target.as_str().unwrap().to_string();
    *target = json!(right.replace("fleetscaler_", "fleetscaler_no_such_"));
    let problems = unserved(&dashboard_queries(&wrong), &served);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("fleetscaler_no_such_"), "{problems:?}");
}
