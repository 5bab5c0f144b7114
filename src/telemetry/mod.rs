//! Logging, traces and metrics. Logs: a `tracing` subscriber writing to stderr, as text or
//! as JSON lines (`log_json`), filtered by `RUST_LOG` (e.g. `RUST_LOG=fleetscaler=debug`),
//! with a default level chosen by the command. Traces: spans with the target [`TRACES`],
//! sent over OTLP when `[hub.tracing]` or the `OTEL_*` variables turn them on (`otel`,
//! docs/tracing.md); never printed as logs. Metrics: the typed snapshot the hub fills and
//! its Prometheus text encoder, for `/metrics` (`metrics`), and the same snapshot encoded
//! as OTLP protobuf and sent when asked for (`otel_metrics`, docs/metrics.md). This module
//! is a leaf: it knows neither the hub nor the clusters.

pub mod export;
pub mod held;
pub mod log_json;
pub mod metrics;
pub mod otel;
mod otel_metrics;
mod otlp;

use std::io::IsTerminal;
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

pub use otel::{OtelError, Parent};
pub use otel_metrics::{PendingMetrics, Source};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, for people.
    #[default]
    Text,
    /// One JSON object per line, with the trace of the span it was logged in.
    Json,
}

/// The target of the spans (and their events) that only traces carry.
pub const TRACES: &str = "fleetscaler::traces";

/// A count as a span attribute: OTLP has signed integers only (unsigned ones would be
/// sent as text).
pub fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Installs the text log subscriber once; later calls do nothing.
pub fn init_logging(default_filter: &str) {
    let _ = Registry::default()
        .with(log_layer(default_filter, LogFormat::Text, false))
        .try_init();
}

/// Installs text logs, and traces when `traces` says where to send them (`instance` is this
/// replica's `service.instance.id`). Must run on the tokio runtime the exports are to use.
pub fn init(
    default_filter: &str,
    traces: Option<&export::Traces>,
    instance: &str,
) -> Result<Telemetry, OtelError> {
    init_with(default_filter, LogFormat::Text, traces, instance)
}

/// [`init`], with logs in `format`.
pub fn init_with(
    default_filter: &str,
    format: LogFormat,
    traces: Option<&export::Traces>,
    instance: &str,
) -> Result<Telemetry, OtelError> {
    let mut telemetry = Telemetry {
        format,
        traces: None,
        metrics: None,
    };
    let Some(settings) = traces else {
        let _ = Registry::default()
            .with(log_layer(default_filter, format, false))
            .try_init();
        return Ok(telemetry);
    };
    let pipeline = otel::pipeline(settings, instance)?;
    let installed = Registry::default()
        .with(vec![
            log_layer(default_filter, format, true),
            pipeline.layer,
        ])
        .try_init();
    if installed.is_err() {
        // Another subscriber came first (a test): its spans are not ours to send.
        let _ = pipeline.provider.shutdown();
        return Ok(telemetry);
    }
    otel::installed();
    telemetry.traces = Some(pipeline.provider);
    Ok(telemetry)
}

/// Builds the OTLP sender of the metrics, so that a problem is reported before anything
/// starts; [`Telemetry::export_metrics`] starts sending. Must run on the tokio runtime the
/// exports are to use.
pub fn metrics_exporter(
    settings: &export::Metrics,
    instance: &str,
) -> Result<PendingMetrics, OtelError> {
    otel_metrics::exporter(settings, instance)
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// `traced`: the OpenTelemetry layer is installed beside it (JSON lines then carry ids).
fn log_layer(default_filter: &str, format: LogFormat, traced: bool) -> BoxedLayer {
    // kube's watcher logs every failed attempt at error level, and kube's HTTP layer every
    // failed request ("failed with error client error (Connect)"); the runners report each
    // failure once, with the cluster's name, server and cause, so kube's own lines are left
    // out of the logs by default (traces keep kube's request spans).
    let default = format!("{default_filter},kube_runtime=off,kube_client::client::builder=off");
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    match format {
        LogFormat::Text => log_layer_with(filter),
        LogFormat::Json => log_json::JsonLogs::stderr(traced)
            .with_filter(without_trace_spans(filter))
            .boxed(),
    }
}

/// Spans are for traces: with them off they cost nothing, and logs stay one line each.
fn without_trace_spans(mut filter: EnvFilter) -> EnvFilter {
    if let Ok(off) = format!("{TRACES}=off").parse() {
        filter = filter.add_directive(off);
    }
    filter
}

fn log_layer_with(filter: EnvFilter) -> BoxedLayer {
    tracing_subscriber::fmt::layer()
        .with_writer(held::Stderr)
        .with_ansi(colours(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .with_target(false)
        .with_filter(without_trace_spans(filter))
        .boxed()
}

/// Colours only for a person at a terminal, not in files and log collectors, and not for one
/// who asked for none: `NO_COLOR` set to anything but the empty string (no-color.org). The
/// log lines are the only colour the hub prints (the demo's live view has none).
fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// What [`init`] started; [`Telemetry::shutdown`] sends the spans and metrics still to send.
pub struct Telemetry {
    format: LogFormat,
    traces: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    metrics: Option<otel_metrics::MetricsPipeline>,
}

impl Telemetry {
    /// Whether spans are being sent (another subscriber installed first keeps them off).
    pub fn traces_on(&self) -> bool {
        self.traces.is_some()
    }

    /// Starts sending the metrics `source` reads (the snapshot `/metrics` serves) with the
    /// sender built before. Must run on the tokio runtime the exports are to use.
    pub fn export_metrics(&mut self, pending: PendingMetrics, source: Source) {
        self.metrics = Some(otel_metrics::start(pending, source));
    }

    /// Where the hub's own messages to whoever runs it go (a stop): stderr, in the logs'
    /// format, whatever the log level.
    pub fn console(&self) -> Console {
        Console(self.format)
    }

    /// Sends what is queued (and the metrics once more) and stops the exporters, waiting
    /// at most `limit`.
    pub async fn shutdown(self, limit: Duration) {
        let traces = self.traces.map(|provider| {
            // The SDK blocks its caller until the worker thread is done; the exports it
            // waits for run on this runtime, so the wait goes to a blocking thread.
            stop("traces", limit, move || {
                provider.shutdown_with_timeout(limit)
            })
        });
        let metrics = self.metrics.map(|pipeline| async move {
            if let Err(e) = pipeline.shutdown(limit).await {
                tracing::warn!("metrics not all sent at shutdown: {e}");
            }
        });
        futures::future::join(
            futures::future::OptionFuture::from(traces),
            futures::future::OptionFuture::from(metrics),
        )
        .await;
    }
}

/// Runs a blocking shutdown off the runtime's threads, saying if it did not all go out.
async fn stop(
    what: &str,
    limit: Duration,
    shutdown: impl FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
) {
    let stopped = tokio::task::spawn_blocking(shutdown);
    match tokio::time::timeout(limit + Duration::from_secs(1), stopped).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::warn!("{what} not all sent at shutdown: {e}"),
        Ok(Err(e)) => tracing::warn!("{what} not all sent at shutdown: {e}"),
        Err(_) => tracing::warn!(
            "{what} not all sent at shutdown: no answer within {}s",
            limit.as_secs()
        ),
    }
}

/// The hub's messages to whoever runs it, outside the log levels: text or JSON lines.
#[derive(Clone, Copy, Debug)]
pub struct Console(LogFormat);

impl Console {
    pub fn say(&self, message: &str) {
        match self.0 {
            LogFormat::Text => held::write(format!("{message}\n").as_bytes()),
            LogFormat::Json => log_json::line(tracing::Level::INFO, message),
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
    fn colours_only_at_a_terminal_and_never_under_no_color() {
        let set = |v: &str| Some(std::ffi::OsString::from(v));
        assert!(colours(true, None));
        assert!(!colours(false, None));
        assert!(!colours(true, set("1").as_deref()));
        assert!(!colours(true, set("0").as_deref()), "any value but empty");
        assert!(colours(true, set("").as_deref()));
    }

    #[test]
    fn json_logs_leave_trace_spans_disabled_too() {
        let logs = Registry::default().with(
            log_json::JsonLogs::stderr(false)
                .with_filter(without_trace_spans(EnvFilter::new("info"))),
        );
        tracing::subscriber::with_default(logs, || {
            assert!(tracing::info_span!(target: TRACES, "pass").is_disabled());
            assert!(tracing::enabled!(tracing::Level::INFO));
        });
    }

    #[test]
    fn counts_become_signed_integers() {
        assert_eq!(int(7usize), 7);
        assert_eq!(int(u64::MAX), i64::MAX);
    }
}
