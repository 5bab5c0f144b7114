//! The hub's metrics over OTLP, end to end: `fleetscaler run` autoscales a simulated fleet
//! of two clusters and sends its metrics to a real OTLP receiver in this test, over gRPC
//! (configured by the standard `OTEL_*` variables, traces off) and over HTTP/protobuf
//! (configured by fleet.toml `[hub.tracing]`, beside the traces). An export is checked
//! against what `/metrics` served just before and just after it was collected: the same
//! families with the same types, `cluster` as `k8s.cluster.name`, equal values where they
//! cannot change, and counters and histograms in between.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::e2e_support;
use crate::otlp_support;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use e2e_support::*;
use fleetscaler::sim::settings::Flavor;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Metric, metric, number_data_point,
};
use otlp_support::{
    HubOptions, HubProcess, LONG, Shared, attrs, grpc_receiver, http_get, http_receiver,
};

type Labels = BTreeMap<String, String>;

/// One sample of the Prometheus exposition.
#[derive(Debug)]
struct Served {
    name: String,
    labels: Labels,
    value: f64,
}

/// `/metrics`: its families' types, and its samples. Label values here hold no `,` or `"`.
struct Exposition {
    types: HashMap<String, String>,
    samples: Vec<Served>,
}

impl Exposition {
    fn read(text: &str) -> Self {
        let mut types = HashMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                types.insert(name.to_string(), kind.to_string());
            } else if !line.starts_with('#') && !line.is_empty() {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
                let labels = labels
                    .trim_end_matches('}')
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').unwrap();
                        (k.to_string(), v.trim_matches('"').to_string())
                    })
                    .collect();
                let value = value.parse().unwrap_or(f64::NAN);
                samples.push(Served {
                    name: name.to_string(),
                    labels,
                    value,
                });
            }
        }
        Exposition { types, samples }
    }

    /// The families with at least one sample; a histogram's, with an observation (OTLP has
    /// no empty histogram: its series start with their first observation).
    fn families(&self) -> BTreeSet<String> {
        let observed = |s: &Served, f: &str| match self.types[f].as_str() {
            "histogram" => s.name == format!("{f}_count") && s.value > 0.0,
            _ => family_of(&s.name, f),
        };
        self.types
            .keys()
            .filter(|f| self.samples.iter().any(|s| observed(s, f)))
            .cloned()
            .collect()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.name == name && labels_are(&s.labels, labels))
            .map(|s| s.value)
    }
}

fn family_of(sample: &str, family: &str) -> bool {
    sample == family
        || sample
            .strip_prefix(family)
            .is_some_and(|s| matches!(s, "_bucket" | "_sum" | "_count"))
}

fn labels_are(have: &Labels, want: &[(&str, &str)]) -> bool {
    have.len() == want.len()
        && want
            .iter()
            .all(|(k, v)| have.get(*k).map(String::as_str) == Some(v))
}

async fn served(addr: &str) -> Exposition {
    Exposition::read(&http_get(addr, "/metrics").await.unwrap())
}

/// The metrics of one export request, by name.
fn metrics(request: &ExportMetricsServiceRequest) -> HashMap<String, Metric> {
    let mut all = HashMap::new();
    for rm in &request.resource_metrics {
        for sm in &rm.scope_metrics {
            all.extend(sm.metrics.iter().map(|m| (m.name.clone(), m.clone())));
        }
    }
    all
}

/// Each data point's attributes and value (a histogram's: its count).
fn points(metric: &Metric) -> Vec<(Labels, f64)> {
    let number = |v: &Option<number_data_point::Value>| match v {
        Some(number_data_point::Value::AsDouble(d)) => *d,
        Some(number_data_point::Value::AsInt(i)) => *i as f64,
        None => f64::NAN,
    };
    let labels = |kvs: &[KeyValue]| attrs(kvs).into_iter().collect::<Labels>();
    match &metric.data {
        Some(metric::Data::Gauge(g)) => g
            .data_points
            .iter()
            .map(|p| (labels(&p.attributes), number(&p.value)))
            .collect(),
        Some(metric::Data::Sum(s)) => s
            .data_points
            .iter()
            .map(|p| (labels(&p.attributes), number(&p.value)))
            .collect(),
        Some(metric::Data::Histogram(h)) => h
            .data_points
            .iter()
            .map(|p| (labels(&p.attributes), p.count as f64))
            .collect(),
        other => panic!("{}: unexpected {other:?}", metric.name),
    }
}

/// The OTLP kind a Prometheus type is exported as.
fn kind_matches(metric: &Metric, prometheus: &str) -> bool {
    let cumulative = AggregationTemporality::Cumulative as i32;
    match (&metric.data, prometheus) {
        (Some(metric::Data::Gauge(_)), "gauge") => true,
        (Some(metric::Data::Sum(s)), "counter") => {
            s.is_monotonic && s.aggregation_temporality == cumulative
        }
        (Some(metric::Data::Histogram(h)), "histogram") => h.aggregation_temporality == cumulative,
        _ => false,
    }
}

/// What `/metrics` serves, with `cluster` as OpenTelemetry names it.
fn as_attributes(labels: &Labels) -> Labels {
    labels
        .iter()
        .map(|(k, v)| {
            let k = if k == "cluster" {
                "k8s.cluster.name"
            } else {
                k
            };
            (k.to_string(), v.clone())
        })
        .collect()
}

const CLUSTERS: [&str; 2] = ["sim-1", "sim-2"];
const DURATION: &str = "cluster_autoscaler_function_duration_seconds";

/// A first export collected after `before` was served that has the pass durations of both
/// clusters; `/metrics` is read again once it arrived.
async fn export_between(addr: &str, inbox: &Shared) -> (Exposition, Metrics, Exposition) {
    // Both clusters passed: their durations are served.
    let before = eventually(LONG, "passes of both clusters on /metrics", || async {
        let served = served(addr).await;
        let passed = CLUSTERS.iter().all(|c| {
            let main = [("cluster", *c), ("function", "main")];
            served
                .value(&format!("{DURATION}_count"), &main)
                .unwrap_or(0.0)
                >= 1.0
        });
        passed.then_some(served)
    })
    .await;
    // Request `sent` may have been collected before `before`; the next one was collected
    // after it, but may reuse a reading of the exposition from up to half an interval
    // before; the one after that reads it after `before` was served.
    let sent = inbox.lock().unwrap().metrics.len();
    let export = eventually(LONG, "an export with the pass durations", || {
        let inbox = inbox.lock().unwrap();
        let found = inbox
            .metrics
            .iter()
            .skip(sent + 2)
            .map(metrics)
            .find(|m| m.contains_key(DURATION));
        async move { found }
    })
    .await;
    (before, export, served(addr).await)
}

type Metrics = HashMap<String, Metric>;

fn check_families(before: &Exposition, export: &Metrics, after: &Exposition) {
    let (was, is) = (before.families(), after.families());
    let exported: BTreeSet<String> = export.keys().cloned().collect();
    let served_throughout: BTreeSet<String> = was.intersection(&is).cloned().collect();
    let missing: Vec<&String> = served_throughout.difference(&exported).collect();
    assert!(missing.is_empty(), "served, not exported: {missing:?}");
    let extra: Vec<&String> = exported
        .iter()
        .filter(|m| !was.contains(*m) && !is.contains(*m))
        .collect();
    assert!(extra.is_empty(), "exported, never served: {extra:?}");
    for (name, metric) in export {
        let kind = &after.types[name];
        assert!(kind_matches(metric, kind), "{name} is a {kind}: {metric:?}");
        for (attributes, _) in points(metric) {
            assert!(
                !attributes.contains_key("cluster"),
                "{name}: {attributes:?}"
            );
        }
    }
}

/// Values that cannot change while the test runs are equal; the rest lie in between.
fn check_values(before: &Exposition, export: &Metrics, after: &Exposition) {
    let groups = &export["cluster_autoscaler_node_groups_count"];
    let exported: Vec<(Labels, f64)> = points(groups);
    for cluster in CLUSTERS {
        let labels = [("cluster", cluster), ("node_group_type", "autoscaled")];
        let served = after.value("cluster_autoscaler_node_groups_count", &labels);
        assert!(served.is_some_and(|n| n >= 1.0), "{cluster}: {served:?}");
        assert_eq!(
            before.value("cluster_autoscaler_node_groups_count", &labels),
            served
        );
        let point = exported
            .iter()
            .find(|(a, _)| a.get("k8s.cluster.name").map(String::as_str) == Some(cluster));
        assert_eq!(point.map(|(_, v)| *v), served, "{cluster}: {exported:?}");
    }
    // Each node group's bounds, from its annotations: the same series, the same values.
    let max = "cluster_autoscaler_node_group_max_count";
    let served: BTreeSet<String> = after
        .samples
        .iter()
        .filter(|s| s.name == max)
        .map(|s| format!("{:?} {}", as_attributes(&s.labels), s.value))
        .collect();
    let sent: BTreeSet<String> = points(&export[max])
        .into_iter()
        .map(|(a, v)| format!("{a:?} {v}"))
        .collect();
    assert!(served.len() >= 2, "{served:?}");
    assert_eq!(sent, served);
    for cluster in CLUSTERS {
        check_durations(before, export, after, cluster);
    }
}

/// A histogram: the exposition's bounds, and buckets, count and sum between the readings.
fn check_durations(before: &Exposition, export: &Metrics, after: &Exposition, cluster: &str) {
    let Some(metric::Data::Histogram(h)) = &export[DURATION].data else {
        panic!("{DURATION} is not a histogram");
    };
    let want = Labels::from([
        ("k8s.cluster.name".to_string(), cluster.to_string()),
        ("function".to_string(), "main".to_string()),
    ]);
    let point = h
        .data_points
        .iter()
        .find(|p| attrs(&p.attributes).into_iter().collect::<Labels>() == want)
        .unwrap_or_else(|| panic!("no {want:?} in {h:?}"));
    let main = [("cluster", cluster), ("function", "main")];
    let between = |name: &str, sent: f64, labels: &[(&str, &str)]| {
        let (lo, hi) = (
            before.value(name, labels).unwrap(),
            after.value(name, labels).unwrap(),
        );
        let slack = 1e-9 * hi.abs().max(1.0);
        assert!(
            lo - slack <= sent && sent <= hi + slack,
            "{name}{labels:?}: {lo} <= {sent} <= {hi}"
        );
    };
    between(&format!("{DURATION}_count"), point.count as f64, &main);
    between(
        &format!("{DURATION}_sum"),
        point.sum.unwrap_or(f64::NAN),
        &main,
    );
    let mut cumulative = 0;
    for (bound, n) in point.explicit_bounds.iter().zip(&point.bucket_counts) {
        cumulative += n;
        let le = bound.to_string();
        let labels = [
            ("cluster", cluster),
            ("function", "main"),
            ("le", le.as_str()),
        ];
        between(&format!("{DURATION}_bucket"), cumulative as f64, &labels);
    }
    let served_bounds = after
        .samples
        .iter()
        .filter(|s| {
            s.name == format!("{DURATION}_bucket")
                && s.labels.get("cluster").map(String::as_str) == Some(cluster)
                && s.labels["function"] == "main"
        })
        .count();
    assert_eq!(
        point.explicit_bounds.len() + 1,
        served_bounds,
        "the same buckets, and +Inf"
    );
}

/// The story both protocols tell.
async fn metrics_are_exported_as_served(options: HubOptions<'_>, inbox: &Shared) {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("otlp-metrics");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let mut hub = HubProcess::start(dir.path(), &kubeconfig, options);
    let addr = hub.address().await;
    let (before, export, after) = export_between(&addr, inbox).await;
    check_families(&before, &export, &after);
    check_values(&before, &export, &after);
    let request = inbox.lock().unwrap().metrics.last().cloned().unwrap();
    let resource = request.resource_metrics[0].resource.as_ref().unwrap();
    let resource = attrs(&resource.attributes);
    assert_eq!(resource["service.name"], "fleetscaler", "{resource:?}");
    assert!(resource.contains_key("service.instance.id"));
    // A clean stop sends the metrics once more.
    let sent = inbox.lock().unwrap().metrics.len();
    let status = hub.stop().await;
    assert!(status.success(), "{status}: {}", hub.log());
    assert!(inbox.lock().unwrap().metrics.len() > sent, "{}", hub.log());
    fleet.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_metrics_configured_by_the_otel_variables() {
    let (endpoint, inbox) = grpc_receiver().await;
    let vars = [
        ("OTEL_METRICS_EXPORTER", "otlp"),
        ("OTEL_TRACES_EXPORTER", "none"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-test=from-env"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "300"),
    ];
    let options = HubOptions {
        tracing: "",
        defaults: "",
        vars: &vars,
        args: &[],
        clusters: 2,
    };
    metrics_are_exported_as_served(options, &inbox).await;
    let inbox = inbox.lock().unwrap();
    assert!(inbox.traces.is_empty(), "traces are off");
    assert!(
        !inbox.x_test.is_empty() && inbox.x_test.iter().all(|h| h == "from-env"),
        "{:?}",
        inbox.x_test
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_metrics_beside_the_traces_configured_by_fleet_toml() {
    let (endpoint, inbox) = http_receiver().await;
    let tracing = format!(
        "[hub.tracing]\nendpoint = {endpoint:?}\nprotocol = \"http/protobuf\"\nheaders = {{ x-test = \"from-file\" }}\nmetrics = true\nmetrics_interval = \"300ms\"\n"
    );
    let options = HubOptions {
        tracing: &tracing,
        defaults: "",
        vars: &[],
        args: &[],
        clusters: 2,
    };
    metrics_are_exported_as_served(options, &inbox).await;
    let inbox = inbox.lock().unwrap();
    let paths: BTreeSet<&str> = inbox.paths.iter().map(String::as_str).collect();
    assert_eq!(paths, BTreeSet::from(["/v1/metrics", "/v1/traces"]));
    assert!(
        inbox.x_test.iter().all(|h| h == "from-file"),
        "{:?}",
        inbox.x_test
    );
}
