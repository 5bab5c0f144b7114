use std::collections::BTreeMap;
use std::sync::Mutex;

use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};

use super::*;
use crate::telemetry::metrics::{Exposition, Type};

/// An exporter that keeps what it was last given, as text.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Seen>>);

impl PushMetricExporter for Capture {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        *self.0.lock().unwrap() = seen(metrics);
        Ok(())
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

/// A pipeline reading `source`, collected only when the test asks ([`collect`]).
fn pipeline(source: Source) -> (MetricsPipeline, Capture) {
    let capture = Capture::default();
    let reader = PeriodicReader::builder(capture.clone())
        .with_interval(Duration::from_secs(3600))
        .build();
    let timing = Timing {
        fresh_for: Duration::ZERO,
        retry: Duration::from_millis(10),
    };
    let pipeline = start_with(
        reader,
        Resource::builder_empty().build(),
        MIN_SERIES,
        timing,
        source,
    );
    (pipeline, capture)
}

/// What one collection holds, as text per metric: `kind attributes => value`.
type Seen = BTreeMap<String, Vec<String>>;

/// A collection and its export, now.
fn collect(pipeline: &MetricsPipeline, capture: &Capture) -> Seen {
    capture.0.lock().unwrap().clear();
    pipeline.provider.force_flush().unwrap();
    capture.0.lock().unwrap().clone()
}

fn seen(rm: &ResourceMetrics) -> Seen {
    let mut seen = Seen::new();
    for scope in rm.scope_metrics() {
        for metric in scope.metrics() {
            let AggregatedMetrics::F64(data) = metric.data() else {
                panic!("{} is not f64", metric.name());
            };
            seen.insert(metric.name().to_string(), points(data));
        }
    }
    seen
}

fn attrs<'a>(kvs: impl Iterator<Item = &'a opentelemetry::KeyValue>) -> String {
    let mut pairs: Vec<String> = kvs.map(|kv| format!("{}={}", kv.key, kv.value)).collect();
    pairs.sort();
    pairs.join(",")
}

fn points(data: &MetricData<f64>) -> Vec<String> {
    let mut out: Vec<String> = match data {
        MetricData::Gauge(g) => g
            .data_points()
            .map(|p| format!("gauge {} => {}", attrs(p.attributes()), p.value()))
            .collect(),
        MetricData::Sum(s) => s
            .data_points()
            .map(|p| {
                let kind = if s.is_monotonic() { "counter" } else { "sum" };
                format!("{kind} {} => {}", attrs(p.attributes()), p.value())
            })
            .collect(),
        MetricData::Histogram(h) => h
            .data_points()
            .map(|p| {
                let bounds: Vec<f64> = p.bounds().collect();
                let counts: Vec<u64> = p.bucket_counts().collect();
                format!(
                    "histogram {} => bounds {bounds:?} counts {counts:?} count {} sum {:.6} min {:?}",
                    attrs(p.attributes()),
                    p.count(),
                    p.sum(),
                    p.min()
                )
            })
            .collect(),
        MetricData::ExponentialHistogram(_) => vec!["exponential".into()],
    };
    out.sort();
    out
}

/// The exposition of two clusters, or later of one (`b` removed) with more counted.
fn exposition(later: bool) -> String {
    let mut e = Exposition::new();
    e.family("nodes_count", Type::Gauge, "Nodes.")
        .sample(&[("cluster", "a"), ("state", "ready")], 3.0);
    if !later {
        e.sample(&[("cluster", "b"), ("state", "ready")], 5.0);
    }
    e.family("x_total", Type::Counter, "Things.")
        .sample(&[("cluster", "a")], if later { 5.0 } else { 2.0 });
    let (buckets, sum, count) = if later {
        // Three more: 0.6, 0.7 and 5.
        ([(0.5, 1), (1.0, 4)], 2.25 + 0.6 + 0.7 + 5.0, 6)
    } else {
        // 0.25, 0.75 and 1.25.
        ([(0.5, 1), (1.0, 2)], 2.25, 3)
    };
    e.family("d_seconds", Type::Histogram, "Durations.")
        .histogram(
            &[("cluster", "a"), ("function", "main")],
            buckets.into_iter(),
            sum,
            count,
        );
    e.family("later_seconds", Type::Histogram, "Appears later.");
    if later {
        e.histogram(&[("cluster", "a")], [(2.0, 1)].into_iter(), 1.5, 1);
    }
    e.family("empty", Type::Gauge, "No samples.");
    e.finish()
}

/// Collects until `done` holds (instruments are created by a task of their own).
async fn collect_until(
    pipeline: &MetricsPipeline,
    capture: &Capture,
    done: impl Fn(&Seen) -> bool,
) -> Seen {
    for _ in 0..500 {
        let seen = collect(pipeline, capture);
        if done(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not collected: {:#?}", collect(pipeline, capture));
}

#[tokio::test]
async fn the_exposition_is_collected_with_its_names_values_and_clusters() {
    let text = Arc::new(Mutex::new(exposition(false)));
    let read = text.clone();
    let (pipeline, capture) = pipeline(Arc::new(move || read.lock().unwrap().clone()));
    let seen = collect_until(&pipeline, &capture, |s| {
        ["nodes_count", "x_total", "d_seconds"]
            .iter()
            .all(|m| s.contains_key(*m))
    })
    .await;
    assert_eq!(
        seen["nodes_count"],
        [
            "gauge k8s.cluster.name=a,state=ready => 3",
            "gauge k8s.cluster.name=b,state=ready => 5"
        ]
    );
    assert_eq!(seen["x_total"], ["counter k8s.cluster.name=a => 2"]);
    assert_eq!(
        seen["d_seconds"],
        [
            "histogram function=main,k8s.cluster.name=a => bounds [0.5, 1.0] counts [1, 1, 1] count 3 sum 2.250000 min None"
        ]
    );
    assert!(!seen.contains_key("empty"), "no samples, no metric");

    *text.lock().unwrap() = exposition(true);
    let seen = collect_until(&pipeline, &capture, |s| s.contains_key("later_seconds")).await;
    assert_eq!(
        seen["nodes_count"],
        ["gauge k8s.cluster.name=a,state=ready => 3"],
        "a cluster gone from /metrics is gone from the export"
    );
    assert_eq!(seen["x_total"], ["counter k8s.cluster.name=a => 5"]);
    assert_eq!(
        seen["d_seconds"],
        [
            "histogram function=main,k8s.cluster.name=a => bounds [0.5, 1.0] counts [1, 3, 2] count 6 sum 8.550000 min None"
        ]
    );
    assert_eq!(
        seen["later_seconds"],
        [
            "histogram k8s.cluster.name=a => bounds [2.0] counts [1, 0] count 1 sum 1.500000 min None"
        ]
    );
    // Collected again with nothing new: the histograms do not count twice.
    let again = collect(&pipeline, &capture);
    assert_eq!(again["d_seconds"], seen["d_seconds"]);
    pipeline.shutdown(Duration::from_secs(1)).unwrap();
}

#[tokio::test]
async fn an_unreadable_exposition_exports_nothing_and_does_not_stop_the_rest() {
    let text = Arc::new(Mutex::new("# TYPE a gauge\nb 1\n".to_string()));
    let read = text.clone();
    let (pipeline, capture) = pipeline(Arc::new(move || read.lock().unwrap().clone()));
    assert!(collect(&pipeline, &capture).is_empty());
    *text.lock().unwrap() = exposition(false);
    collect_until(&pipeline, &capture, |s| s.contains_key("nodes_count")).await;
    pipeline.shutdown(Duration::from_secs(1)).unwrap();
}
