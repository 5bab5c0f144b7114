//! `fleetscaler run`: the hub, on fleet.toml, until Ctrl-C or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::signal::shutdown_requested;
use crate::config::tracing::TracingState;
use crate::config::{ConfigError, FleetConfig, HubConfig};
use crate::server::{self, ListenError};
use crate::telemetry::Telemetry;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// fleet.toml: the hub's settings and the clusters it autoscales. Re-read on SIGHUP and
    /// when it changes.
    #[arg(short, long, default_value = "fleet.toml")]
    pub config: PathBuf,
    /// Address of the HTTP endpoints, instead of `hub.listen`.
    #[arg(long)]
    pub listen: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
    #[error("traces: {0}")]
    Traces(#[from] crate::telemetry::OtelError),
}

pub async fn run(args: RunArgs) -> Result<(), RunError> {
    let config = FleetConfig::load(&args.config)?;
    let telemetry = start_telemetry("info", &config.hub)?;
    let listen = args.listen.unwrap_or_else(|| config.hub.listen.clone());
    let listener = server::bind(&listen).await?;
    let bound = server::local_addr(&listener).map_or(listen, |a| a.to_string());
    tracing::info!(
        "fleetscaler {} serving http://{bound}/ (dashboard; API /api/v1/fleet, metrics /metrics); {} cluster(s) in {}",
        env!("CARGO_PKG_VERSION"),
        config.clusters.len(),
        args.config.display()
    );
    let cancel = CancellationToken::new();
    let hub = crate::hub::start(config, Some(args.config), cancel.clone()).await?;
    tokio::spawn(server::serve(listener, hub.view.clone(), cancel.clone()));
    stop_gracefully(hub, cancel, telemetry).await;
    Ok(())
}

/// Spans still queued at a clean stop are sent within this (inside Kubernetes' 30 s grace
/// period, after the clusters' 20 s).
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// Logs, and traces when fleet.toml or the `OTEL_*` variables turn them on, with this
/// replica's lease identity as `service.instance.id`.
pub(super) fn start_telemetry(
    default_filter: &str,
    hub: &HubConfig,
) -> Result<Telemetry, crate::telemetry::OtelError> {
    let traces = hub
        .tracing
        .with_process_env()
        .unwrap_or_else(|issues| TracingState::Off {
            why: format!("{} problem(s) in the configuration", issues.len()),
        });
    let instance = hub
        .leader_election
        .identity
        .clone()
        .unwrap_or_else(crate::hub::leader::default_identity);
    crate::telemetry::init(default_filter, &traces, &instance)
}

/// The first signal stops every cluster cleanly (scale-downs under way are undone) and
/// sends the spans still queued; a second one exits at once.
pub(super) async fn stop_gracefully(
    hub: crate::hub::HubHandle,
    cancel: CancellationToken,
    telemetry: Telemetry,
) {
    shutdown_requested().await;
    eprintln!("stopping: undoing scale-downs under way (signal again to exit at once)");
    cancel.cancel();
    tokio::select! {
        _ = hub.wait() => {}
        _ = shutdown_requested() => {
            eprintln!("second signal: exiting without waiting");
            return;
        }
    }
    tokio::select! {
        _ = telemetry.shutdown(FLUSH_LIMIT) => eprintln!("stopped"),
        _ = shutdown_requested() => eprintln!("second signal: exiting without sending the last spans"),
    }
}
