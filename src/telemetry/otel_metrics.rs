//! The hub's metrics over OTLP: what `/metrics` serves, read at each collection (`bridge`)
//! and sent by the SDK's periodic reader with the OTLP exporter of the traces' transport.
//! Built only when metrics over OTLP are asked for (docs/metrics.md).

mod bridge;
mod replay;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{
    Aggregation, Instrument, PeriodicReader, SdkMeterProvider, Stream, Temporality,
};

pub use bridge::Source;
use bridge::{Bounds, Bridge};

use super::otel::OtelError;
use super::otlp::{Transport, process_env, resource};
use crate::config::tracing::{MetricsExport, Protocol};

/// The series one metric may carry, per cluster of the fleet at start (the SDK's default,
/// 2,000 in all, would cut a fleet of 1,000 clusters short at `nodes_count`'s five states).
const SERIES_PER_CLUSTER: usize = 64;
const MIN_SERIES: usize = 2_000;

/// The exporter, built (and its problems reported) before the hub starts; the pipeline
/// starts once there are metrics to read ([`start`]).
pub struct PendingMetrics {
    exporter: InRuntime<opentelemetry_otlp::MetricExporter>,
    interval: Duration,
    resource: Resource,
    max_series: usize,
}

/// Builds the OTLP metrics exporter. Must run on the hub's runtime.
pub(super) fn exporter(
    m: &MetricsExport,
    instance: &str,
    clusters: usize,
) -> Result<PendingMetrics, OtelError> {
    let runtime =
        tokio::runtime::Handle::try_current().map_err(|_| OtelError::NoRuntime("metrics"))?;
    let transport = Transport {
        signal: "metrics",
        endpoint: &m.endpoint,
        headers: &m.headers,
        timeout: m.timeout,
    };
    // Cumulative, as Prometheus reads counters and histograms.
    let builder =
        opentelemetry_otlp::MetricExporter::builder().with_temporality(Temporality::Cumulative);
    let built = match m.protocol {
        Protocol::Grpc => transport.grpc(builder.with_tonic())?.build(),
        Protocol::HttpProtobuf => transport.http(builder.with_http())?.build(),
    };
    Ok(PendingMetrics {
        exporter: InRuntime {
            inner: transport.built(built)?,
            runtime,
        },
        interval: m.interval,
        resource: resource(&m.service_name, &m.resource, instance, &process_env),
        max_series: (clusters * SERIES_PER_CLUSTER).max(MIN_SERIES),
    })
}

/// The meter provider and what feeds it.
pub(super) struct MetricsPipeline {
    provider: SdkMeterProvider,
    registrar: tokio::task::JoinHandle<()>,
}

/// Reads `source` every interval and sends it. Must run on the hub's runtime.
pub(super) fn start(pending: PendingMetrics, source: Source) -> MetricsPipeline {
    let reader = PeriodicReader::builder(pending.exporter)
        .with_interval(pending.interval)
        .build();
    // Every callback of one collection reads the same snapshot; the next one reads anew.
    let fresh_for = (pending.interval / 2).min(Duration::from_secs(1));
    let timing = Timing {
        fresh_for,
        retry: pending.interval,
    };
    start_with(reader, pending.resource, pending.max_series, timing, source)
}

/// How long a reading of the exposition serves, and how often new families are looked for
/// unprompted.
struct Timing {
    fresh_for: Duration,
    retry: Duration,
}

fn start_with<E: PushMetricExporter>(
    reader: PeriodicReader<E>,
    resource: Resource,
    max_series: usize,
    timing: Timing,
    source: Source,
) -> MetricsPipeline {
    let bounds = Bounds::default();
    let provider = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_view(view(max_series, bounds.clone()))
        .with_reader(reader)
        .build();
    let bridge = Arc::new(Bridge::new(source, timing.fresh_for, timing.retry, bounds));
    let meter = opentelemetry::metrics::MeterProvider::meter(&provider, "fleetscaler");
    let registrar = tokio::spawn(bridge.register_families(meter));
    MetricsPipeline {
        provider,
        registrar,
    }
}

impl MetricsPipeline {
    /// The last collection is sent, then the exporter stops. Blocks: call off the runtime's
    /// threads (the export runs on them).
    pub(super) fn shutdown(self, limit: Duration) -> OTelSdkResult {
        self.registrar.abort();
        self.provider.shutdown_with_timeout(limit)
    }
}

/// Every metric: room for the fleet's series; a histogram: the exposition's bounds, and no
/// min or max (the replayed values are not the observations, only their buckets and sum).
fn view(max_series: usize, bounds: Bounds) -> impl Fn(&Instrument) -> Option<Stream> + Send + Sync {
    move |instrument: &Instrument| {
        let mut stream = Stream::builder().with_cardinality_limit(max_series);
        let family_bounds = bounds
            .read()
            .ok()
            .and_then(|b| b.get(instrument.name()).cloned());
        if let Some(boundaries) = family_bounds {
            stream = stream.with_aggregation(Aggregation::ExplicitBucketHistogram {
                boundaries,
                record_min_max: false,
            });
        }
        stream.build().ok()
    }
}

/// An exporter whose exports run inside the tokio runtime: the periodic reader drives them
/// from a thread of its own with a blocking executor, and the gRPC and HTTP clients need
/// the runtime's reactor and timers. (The export borrows the collected metrics, so it
/// cannot be spawned onto the runtime as the traces' exports are.)
#[derive(Debug)]
struct InRuntime<E> {
    inner: E,
    runtime: tokio::runtime::Handle,
}

impl<E: PushMetricExporter> PushMetricExporter for InRuntime<E> {
    fn export(&self, metrics: &ResourceMetrics) -> impl Future<Output = OTelSdkResult> + Send {
        let mut export = Box::pin(self.inner.export(metrics));
        let runtime = self.runtime.clone();
        std::future::poll_fn(move |cx| {
            let _inside = runtime.enter();
            export.as_mut().poll(cx)
        })
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _inside = self.runtime.enter();
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests;
