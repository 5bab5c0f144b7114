//! The OTLP encoder of the hub's [`MetricsSnapshot`]: one `ExportMetricsServiceRequest` of
//! the official protobuf types, with the resource and the scope `fleetscaler`. Counters
//! are monotonic cumulative sums, gauges gauges, histograms cumulative explicit-bucket
//! histograms with the snapshot's bounds (per-bucket counts, as OTLP has them; no min or
//! max, which Prometheus histograms do not keep). The `cluster` label is the attribute
//! `k8s.cluster.name`, as in the traces; other labels keep their names.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::telemetry::metrics::{self, Family, MetricsSnapshot, Type, Value};

/// The scope every metric is sent under.
pub(super) const SCOPE: &str = "fleetscaler";

/// When the data points were read, and since when their counters count (Unix nanoseconds).
#[derive(Clone, Copy, Debug)]
pub(super) struct Times {
    pub start: u64,
    pub now: u64,
}

/// The whole request. A family without a series is left out, and so is a histogram series
/// without an observation (OTLP series start with their first one, as before the hub sent
/// them itself).
pub(super) fn request(
    snapshot: &MetricsSnapshot,
    resource: &[KeyValue],
    times: Times,
) -> ExportMetricsServiceRequest {
    let metrics = snapshot
        .families
        .iter()
        .filter_map(|f| metric(f, times))
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource.to_vec(),
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: SCOPE.to_string(),
                    ..Default::default()
                }),
                metrics,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// A string attribute.
pub(super) fn attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_string())),
        }),
        ..Default::default()
    }
}

fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(k, v)| {
            let key = if k == "cluster" {
                "k8s.cluster.name"
            } else {
                k
            };
            attribute(key, v)
        })
        .collect()
}

fn metric(family: &Family, times: Times) -> Option<Metric> {
    let numbers = || {
        family.series.iter().filter_map(move |s| match &s.value {
            Value::Number(v) => Some(NumberDataPoint {
                attributes: attributes(&s.labels),
                time_unix_nano: times.now,
                value: Some(number_data_point::Value::AsDouble(*v)),
                ..Default::default()
            }),
            Value::Histogram(_) => None,
        })
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let data = match family.kind {
        Type::Gauge => metric::Data::Gauge(Gauge {
            data_points: numbers().collect(),
        }),
        Type::Counter => metric::Data::Sum(Sum {
            data_points: numbers()
                .map(|p| NumberDataPoint {
                    start_time_unix_nano: times.start,
                    ..p
                })
                .collect(),
            aggregation_temporality: cumulative,
            is_monotonic: true,
        }),
        Type::Histogram => metric::Data::Histogram(Histogram {
            data_points: family
                .series
                .iter()
                .filter_map(|s| match &s.value {
                    Value::Histogram(h) if h.count > 0 => Some(histogram(&s.labels, h, times)),
                    _ => None,
                })
                .collect(),
            aggregation_temporality: cumulative,
        }),
    };
    let empty = match &data {
        metric::Data::Gauge(g) => g.data_points.is_empty(),
        metric::Data::Sum(s) => s.data_points.is_empty(),
        metric::Data::Histogram(h) => h.data_points.is_empty(),
        _ => true,
    };
    (!empty).then(|| Metric {
        name: family.name.clone(),
        description: family.help.clone(),
        // Not set: the names carry their units, and a Prometheus reading OTLP keeps them.
        unit: String::new(),
        metadata: Vec::new(),
        data: Some(data),
    })
}

/// Prometheus's cumulative buckets as OTLP's counts per bucket, the last above every bound.
fn histogram(
    labels: &[(String, String)],
    h: &metrics::Histogram,
    times: Times,
) -> HistogramDataPoint {
    let mut below = 0;
    let mut bucket_counts: Vec<u64> = h
        .buckets
        .iter()
        .map(|(_, cumulative)| {
            let n = cumulative.saturating_sub(below);
            below = below.max(*cumulative);
            n
        })
        .collect();
    bucket_counts.push(h.count.saturating_sub(below));
    HistogramDataPoint {
        attributes: attributes(labels),
        start_time_unix_nano: times.start,
        time_unix_nano: times.now,
        count: h.count,
        sum: Some(h.sum),
        bucket_counts,
        explicit_bounds: h.buckets.iter().map(|(bound, _)| *bound).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMES: Times = Times { start: 10, now: 20 };

    fn snapshot() -> MetricsSnapshot {
        let mut e = MetricsSnapshot::builder();
        e.family("nodes_count", Type::Gauge, "Nodes.")
            .sample(&[("cluster", "a"), ("state", "ready")], 3.0);
        e.family("x_total", Type::Counter, "Things.")
            .sample(&[("cluster", "a")], 2.0);
        e.family("d_seconds", Type::Histogram, "Durations.")
            .histogram(
                &[("cluster", "a"), ("function", "main")],
                [(0.5, 1), (1.0, 2)].into_iter(),
                2.25,
                3,
            )
            .histogram(
                &[("cluster", "b")],
                [(0.5, 0), (1.0, 0)].into_iter(),
                0.0,
                0,
            );
        e.family("later_seconds", Type::Histogram, "Nothing observed.")
            .histogram(&[("cluster", "a")], [(2.0, 0)].into_iter(), 0.0, 0);
        e.family("empty", Type::Gauge, "No series.");
        e.finish()
    }

    fn by_name(request: &ExportMetricsServiceRequest) -> Vec<(&str, &Metric)> {
        request.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .map(|m| (m.name.as_str(), m))
            .collect()
    }

    fn pairs(kvs: &[KeyValue]) -> Vec<(String, String)> {
        kvs.iter()
            .map(|kv| {
                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), v)
            })
            .collect()
    }

    #[test]
    fn families_become_metrics_of_their_kind_with_the_cluster_as_k8s_cluster_name() {
        let resource = [attribute("service.name", "fleetscaler")];
        let request = request(&snapshot(), &resource, TIMES);
        let rm = &request.resource_metrics[0];
        assert_eq!(
            pairs(&rm.resource.as_ref().unwrap().attributes),
            [("service.name".to_string(), "fleetscaler".to_string())]
        );
        assert_eq!(
            rm.scope_metrics[0].scope.as_ref().unwrap().name,
            "fleetscaler"
        );
        let metrics = by_name(&request);
        let names: Vec<&str> = metrics.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["nodes_count", "x_total", "d_seconds"],
            "no series, or no observation: not sent"
        );

        let Some(metric::Data::Gauge(g)) = &metrics[0].1.data else {
            panic!("a gauge: {:?}", metrics[0].1);
        };
        assert_eq!(metrics[0].1.description, "Nodes.");
        let p = &g.data_points[0];
        assert_eq!(
            pairs(&p.attributes),
            [
                ("k8s.cluster.name".to_string(), "a".to_string()),
                ("state".to_string(), "ready".to_string())
            ]
        );
        assert_eq!(p.value, Some(number_data_point::Value::AsDouble(3.0)));
        assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (0, 20));

        let Some(metric::Data::Sum(s)) = &metrics[1].1.data else {
            panic!("a sum: {:?}", metrics[1].1);
        };
        assert!(s.is_monotonic);
        assert_eq!(
            s.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        let p = &s.data_points[0];
        assert_eq!(p.value, Some(number_data_point::Value::AsDouble(2.0)));
        assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (10, 20));

        let Some(metric::Data::Histogram(h)) = &metrics[2].1.data else {
            panic!("a histogram: {:?}", metrics[2].1);
        };
        assert_eq!(
            h.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        assert_eq!(h.data_points.len(), 1, "cluster b observed nothing yet");
        let p = &h.data_points[0];
        assert_eq!(p.explicit_bounds, [0.5, 1.0]);
        assert_eq!(p.bucket_counts, [1, 1, 1], "per bucket, the last above 1");
        assert_eq!((p.count, p.sum, p.min, p.max), (3, Some(2.25), None, None));
        assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (10, 20));
        assert_eq!(
            pairs(&p.attributes),
            [
                ("k8s.cluster.name".to_string(), "a".to_string()),
                ("function".to_string(), "main".to_string())
            ]
        );
    }

    #[test]
    fn the_request_is_prost_encodable_and_reads_back_the_same() {
        use prost::Message;
        let request = request(&snapshot(), &[], TIMES);
        let bytes = request.encode_to_vec();
        let back = ExportMetricsServiceRequest::decode(bytes.as_slice()).unwrap();
        assert_eq!(back, request);
    }
}
