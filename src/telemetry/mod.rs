//! Logging and traces. Logs: a `tracing` subscriber writing to stderr, filtered by
//! `RUST_LOG` (e.g. `RUST_LOG=fleetscaler=debug`), with a default level chosen by the
//! command. Traces: spans with the target [`TRACES`], sent over OTLP when `[hub.tracing]`
//! or the `OTEL_*` variables turn them on (`otel`, docs/tracing.md); never printed as logs.

pub mod metrics;
pub mod otel;

use std::io::IsTerminal;
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::tracing::TracingState;
pub use otel::{OtelError, Parent};

/// The target of the spans (and their events) that only traces carry.
pub const TRACES: &str = "fleetscaler::traces";

/// A count as a span attribute: OTLP has signed integers only (unsigned ones would be
/// sent as text).
pub fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Installs the log subscriber once; later calls do nothing.
pub fn init_logging(default_filter: &str) {
    let _ = Registry::default()
        .with(log_layer(default_filter))
        .try_init();
}

/// Installs logs, and traces when `tracing` is on (`instance` is this replica's
/// `service.instance.id`). Must run on the tokio runtime the exports are to use.
pub fn init(
    default_filter: &str,
    tracing: &TracingState,
    instance: &str,
) -> Result<Telemetry, OtelError> {
    let TracingState::On(settings) = tracing else {
        init_logging(default_filter);
        return Ok(Telemetry { provider: None });
    };
    let pipeline = otel::pipeline(settings, instance)?;
    let installed = Registry::default()
        .with(vec![log_layer(default_filter), pipeline.layer])
        .try_init();
    if installed.is_err() {
        // Another subscriber came first (a test): its spans are not ours to send.
        let _ = pipeline.provider.shutdown();
        return Ok(Telemetry { provider: None });
    }
    otel::installed();
    tracing::info!("traces on: {}", settings.describe());
    Ok(Telemetry {
        provider: Some(pipeline.provider),
    })
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

fn log_layer(default_filter: &str) -> BoxedLayer {
    // kube's watcher logs every failed attempt at error level; the runners report a failing
    // watch once, with the cluster's name, so kube's own lines are left out by default.
    let default = format!("{default_filter},kube_runtime=off");
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    log_layer_with(filter)
}

fn log_layer_with(mut filter: EnvFilter) -> BoxedLayer {
    // Spans are for traces: with them off they cost nothing, and logs stay one line each.
    if let Ok(off) = format!("{TRACES}=off").parse() {
        filter = filter.add_directive(off);
    }
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in files and log collectors.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter)
        .boxed()
}

/// What [`init`] started; [`Telemetry::shutdown`] sends the spans still queued.
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Sends what is queued and stops the exporter, waiting at most `limit`.
    pub async fn shutdown(self, limit: Duration) {
        let Some(provider) = self.provider else {
            return;
        };
        // The SDK blocks its caller until the worker thread is done; the exports it waits
        // for run on this runtime, so the wait goes to a blocking thread.
        let stop = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(limit));
        match tokio::time::timeout(limit + Duration::from_secs(1), stop).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!("traces not all sent at shutdown: {e}"),
            Ok(Err(e)) => tracing::warn!("traces not all sent at shutdown: {e}"),
            Err(_) => tracing::warn!(
                "traces not all sent at shutdown: no answer within {}s",
                limit.as_secs()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_traces_the_spans_are_disabled_and_logs_still_flow() {
        let logs = Registry::default().with(log_layer_with(EnvFilter::new("info")));
        tracing::subscriber::with_default(logs, || {
            let pass = tracing::info_span!(target: TRACES, "pass");
            assert!(
                pass.is_disabled(),
                "a trace span costs nothing without traces"
            );
            assert!(!tracing::enabled!(target: TRACES, tracing::Level::INFO));
            assert!(
                tracing::enabled!(tracing::Level::INFO),
                "logs at info still pass"
            );
        });
    }

    #[test]
    fn counts_become_signed_integers() {
        assert_eq!(int(7usize), 7);
        assert_eq!(int(u64::MAX), i64::MAX);
    }
}
