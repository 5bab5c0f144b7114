//! `fleetscaler run`: the hub, on fleet.toml, until Ctrl-C or SIGTERM.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::signal::shutdown_requested;
use crate::config::{ConfigError, FleetConfig};
use crate::server::{self, ListenError};

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
}

pub async fn run(args: RunArgs) -> Result<(), RunError> {
    crate::telemetry::init_logging("info");
    let config = FleetConfig::load(&args.config)?;
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
    stop_gracefully(hub, cancel).await;
    Ok(())
}

/// The first signal stops every cluster cleanly (scale-downs under way are undone); a
/// second one exits at once.
pub(super) async fn stop_gracefully(hub: crate::hub::HubHandle, cancel: CancellationToken) {
    shutdown_requested().await;
    eprintln!("stopping: undoing scale-downs under way (signal again to exit at once)");
    cancel.cancel();
    tokio::select! {
        _ = hub.wait() => eprintln!("stopped"),
        _ = shutdown_requested() => eprintln!("second signal: exiting without waiting"),
    }
}
