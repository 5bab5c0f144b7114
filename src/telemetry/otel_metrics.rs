//! The hub's metrics over OTLP: every interval, the snapshot the binary hands in (the one
//! `/metrics` encodes as text) is read, encoded into one protobuf request (`encode`) and
//! sent over the traces' transport settings (`send`); once more at a clean stop. No SDK
//! pipeline: the OpenTelemetry SDK takes no ready-made data points, and the hub has them.
//! One snapshot is held at a time. Built only when metrics over OTLP are asked for
//! (docs/metrics.md).

mod encode;
mod send;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::common::v1::KeyValue;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use self::encode::Times;
use self::send::Sender;
use super::export::Metrics;
use super::metrics::MetricsSnapshot;
use super::otel::OtelError;
use super::otlp::{Transport, process_env, resource_attributes};

/// The hub's metrics now (what `/metrics` serves).
pub type Source = Arc<dyn Fn() -> MetricsSnapshot + Send + Sync>;

/// The sender, built (and its problems reported) before the hub starts; the exports start
/// once there are metrics to read ([`start`]).
pub struct PendingMetrics {
    sender: Sender,
    endpoint: String,
    interval: Duration,
    timeout: Duration,
    resource: Vec<KeyValue>,
}

/// Builds the OTLP metrics sender. Must run on the hub's runtime.
pub(super) fn exporter(m: &Metrics, instance: &str) -> Result<PendingMetrics, OtelError> {
    tokio::runtime::Handle::try_current().map_err(|_| OtelError::NoRuntime("metrics"))?;
    let transport = Transport {
        signal: "metrics",
        endpoint: &m.endpoint,
        headers: &m.headers,
        timeout: m.timeout,
    };
    let resource = resource_attributes(&m.service_name, &m.resource, instance, &process_env)
        .iter()
        .map(|kv| encode::attribute(kv.key.as_str(), &kv.value.as_str()))
        .collect();
    Ok(PendingMetrics {
        sender: send::sender(&transport, m.protocol)?,
        endpoint: m.endpoint.clone(),
        interval: m.interval,
        timeout: m.timeout,
        resource,
    })
}

/// The task sending the metrics, and how to stop it.
pub(super) struct MetricsPipeline {
    stop: CancellationToken,
    task: JoinHandle<Exporter>,
}

/// Sends `source` every interval. Must run on the hub's runtime.
pub(super) fn start(pending: PendingMetrics, source: Source) -> MetricsPipeline {
    let stop = CancellationToken::new();
    let interval = pending.interval;
    let exporter = Exporter {
        pending,
        source,
        // Counters count from the hub's start, near enough: their start time stays fixed.
        start: unix_nanos(SystemTime::now()),
        failing: false,
    };
    let task = tokio::spawn(exporter.every(interval, stop.clone()));
    MetricsPipeline { stop, task }
}

impl MetricsPipeline {
    /// Stops the exports and sends the metrics once more, within `limit`.
    pub(super) async fn shutdown(self, limit: Duration) -> Result<(), String> {
        self.stop.cancel();
        let last = async {
            let mut exporter = self.task.await.map_err(|e| e.to_string())?;
            exporter.export().await
        };
        tokio::time::timeout(limit, last)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {}s", limit.as_secs())))
    }
}

struct Exporter {
    pending: PendingMetrics,
    source: Source,
    start: u64,
    /// The last export failed: said once, until one succeeds.
    failing: bool,
}

impl Exporter {
    /// Exports every `interval` (the first after one) until `stop`, and hands itself back
    /// for the last export. An export under way when `stop` comes is dropped.
    async fn every(mut self, interval: Duration, stop: CancellationToken) -> Self {
        let mut ticks = tokio::time::interval_at(Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return self,
                _ = ticks.tick() => {}
            }
            tokio::select! {
                () = stop.cancelled() => return self,
                _ = self.export() => {}
            }
        }
    }

    /// Reads the snapshot, encodes it, drops it, and sends the request within the timeout.
    /// A failure is logged once per run of failures and stops nothing: the next export
    /// sends the totals again (cumulative).
    async fn export(&mut self) -> Result<(), String> {
        let times = Times {
            start: self.start,
            now: unix_nanos(SystemTime::now()),
        };
        let request = encode::request(&(self.source)(), &self.pending.resource, times);
        let sent = tokio::time::timeout(self.pending.timeout, self.pending.sender.send(request))
            .await
            .unwrap_or_else(|_| {
                // Debug of a Duration reads as Go's for a wait under a minute: 10s, 1.5s.
                Err(format!("no answer within {:?}", self.pending.timeout))
            });
        let endpoint = &self.pending.endpoint;
        match &sent {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!("metrics over OTLP sent to {endpoint} again");
            }
            Ok(()) => {}
            Err(e) if self.failing => {
                tracing::debug!("metrics over OTLP not sent to {endpoint}: {e}")
            }
            Err(e) => {
                self.failing = true;
                tracing::warn!(
                    "metrics over OTLP not sent to {endpoint}: {e} (said once until an export succeeds)"
                );
            }
        }
        sent
    }
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
