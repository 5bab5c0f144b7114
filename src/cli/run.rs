//! `fleetscaler run`: the hub, on fleet.toml, until Ctrl-C or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::signal::shutdown_requested;
use crate::config::tracing::{MetricsState, TracingState};
use crate::config::{ConfigError, FleetConfig, HubConfig};
use crate::server::{self, ListenError};
use crate::telemetry::{LogFormat, PendingMetrics, Telemetry};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// fleet.toml: the hub's settings and the clusters it autoscales. Re-read on SIGHUP and
    /// when it changes.
    #[arg(short, long, default_value = "fleet.toml")]
    pub config: PathBuf,
    /// Address of the HTTP endpoints, instead of `hub.listen`.
    #[arg(long)]
    pub listen: Option<String>,
    /// Log lines as text, or as JSON objects (with the trace of the pass they were logged
    /// in, when traces are on).
    #[arg(long, value_enum, env = "FLEETSCALER_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
    /// `[hub.serving]` cannot be served (an unreadable certificate, no management cluster to
    /// review tokens): refused before any cluster starts rather than found out by the first
    /// client.
    #[error("serving: {0}")]
    Serving(#[from] server::ServeError),
    #[error("OpenTelemetry: {0}")]
    Otel(#[from] crate::telemetry::OtelError),
}

pub async fn run(args: RunArgs) -> Result<(), RunError> {
    let mut config = FleetConfig::load(&args.config)?;
    let mut telemetry = start_logs_and_traces("info", args.log_format, &config.hub)?;
    let metrics = metrics_exporter(&config)?;
    let listen = args.listen.unwrap_or_else(|| config.hub.listen.clone());
    let listener = server::bind(&listen, "--listen or hub.listen").await?;
    // The other replicas reach this one at the port really bound (`--listen`, port 0).
    if let (Ok(bound), None) = (listener.local_addr(), &config.hub.sharding.advertise) {
        config.hub.sharding.advertise = crate::hub::advertised(&bound.to_string());
    }
    tracing::info!(
        "fleetscaler {}: {} cluster(s) in {} (dashboard /, API /api/v1/fleet, metrics /metrics)",
        env!("CARGO_PKG_VERSION"),
        config.clusters.len(),
        args.config.display()
    );
    warn_misconfigured(&config, &args.config);
    let cancel = CancellationToken::new();
    let serving = config.hub.clone();
    server::check(&serving).await?;
    let hub = crate::hub::start(config, Some(args.config), cancel.clone()).await?;
    // `[hub.serving]` as the hub started with it (a change to it takes a restart).
    if let Err(e) = server::start(&serving, listener, hub.view.clone(), cancel.clone()).await {
        stop_gracefully(hub, cancel, telemetry).await;
        return Err(RunError::Serving(e));
    }
    if let Some(pending) = metrics {
        let view = hub.view.clone();
        telemetry.export_metrics(pending, std::sync::Arc::new(move || view.metrics()));
    }
    stop_gracefully(hub, cancel, telemetry).await;
    Ok(())
}

/// What `check-config` would say of the kubeconfigs and contexts, said at start: a cluster
/// whose context is mistyped runs as misconfigured, and the hub's first lines say why.
fn warn_misconfigured(config: &FleetConfig, path: &std::path::Path) {
    for issue in super::kubeconfigs::check(config) {
        tracing::warn!(
            "{}: {}: {} (the cluster is misconfigured until this is fixed; `fleetscaler check-config` checks it)",
            path.display(),
            issue.key,
            issue.message
        );
    }
}

/// Spans still queued at a clean stop, and the metrics read once more, are sent within this
/// (inside Kubernetes' 30 s grace period, after the clusters' 20 s).
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// Text logs, and traces when fleet.toml or the `OTEL_*` variables turn them on.
pub(super) fn start_telemetry(
    default_filter: &str,
    hub: &HubConfig,
) -> Result<Telemetry, crate::telemetry::OtelError> {
    start_logs_and_traces(default_filter, LogFormat::Text, hub)
}

/// Logs in `format`, and traces when fleet.toml or the `OTEL_*` variables turn them on, with
/// this replica's lease identity as `service.instance.id`.
fn start_logs_and_traces(
    default_filter: &str,
    format: LogFormat,
    hub: &HubConfig,
) -> Result<Telemetry, crate::telemetry::OtelError> {
    // `load` validated the variables: a problem here is one it reported already.
    let traces = hub
        .tracing
        .with_process_env()
        .unwrap_or_else(|issues| TracingState::Off {
            why: format!("{} problem(s) in the configuration", issues.len()),
        });
    let TracingState::On(settings) = &traces else {
        return crate::telemetry::init_with(default_filter, format, None, &instance(hub));
    };
    let telemetry = crate::telemetry::init_with(
        default_filter,
        format,
        Some(&settings.export()),
        &instance(hub),
    )?;
    if telemetry.traces_on() {
        tracing::info!("traces on: {}", settings.describe());
    }
    Ok(telemetry)
}

/// The exporter of the metrics over OTLP when they are asked for, built before anything
/// starts so that a problem stops the hub at once.
fn metrics_exporter(
    config: &FleetConfig,
) -> Result<Option<PendingMetrics>, crate::telemetry::OtelError> {
    let hub = &config.hub;
    let Ok(MetricsState::On(settings)) = hub.tracing.metrics_with_process_env() else {
        return Ok(None);
    };
    let pending = crate::telemetry::metrics_exporter(&settings.export(), &instance(hub))?;
    tracing::info!("metrics over OTLP on: {}", settings.describe());
    Ok(Some(pending))
}

/// This replica's name: its lease identity.
fn instance(hub: &HubConfig) -> String {
    hub.leader_election
        .identity
        .clone()
        .unwrap_or_else(crate::hub::leader::default_identity)
}

/// The first signal stops every cluster cleanly (scale-downs under way are undone) and
/// sends the spans and metrics still to send; a second one exits at once.
pub(super) async fn stop_gracefully(
    hub: crate::hub::HubHandle,
    cancel: CancellationToken,
    telemetry: Telemetry,
) {
    let console = telemetry.console();
    shutdown_requested().await;
    console.say("stopping: undoing scale-downs under way (signal again to exit at once)");
    cancel.cancel();
    tokio::select! {
        _ = hub.wait() => {}
        _ = shutdown_requested() => {
            console.say("second signal: exiting without waiting");
            return;
        }
    }
    tokio::select! {
        _ = telemetry.shutdown(FLUSH_LIMIT) => console.say("stopped"),
        _ = shutdown_requested() => console.say("second signal: exiting without sending the last spans and metrics"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn the_log_format_is_text_unless_asked_and_a_bad_one_is_named() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["run"], args].concat());
        // FLEETSCALER_LOG_FORMAT of the process running the tests would change the default.
        if std::env::var_os("FLEETSCALER_LOG_FORMAT").is_none() {
            let default = parse(&[]).map(|c| c.run.log_format);
            assert_eq!(default.ok(), Some(LogFormat::Text));
        }
        let json = parse(&["--log-format", "json"]).map(|c| c.run.log_format);
        assert_eq!(json.ok(), Some(LogFormat::Json));
        let bad = parse(&["--log-format", "xml"]).err().map(|e| e.to_string());
        let bad = bad.unwrap_or_default();
        assert!(bad.contains("--log-format") && bad.contains("xml"), "{bad}");
    }
}
