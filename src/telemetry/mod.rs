//! Logging: a `tracing` subscriber writing to stderr, filtered by `RUST_LOG` (e.g.
//! `RUST_LOG=fleetscaler=debug`), with a default level chosen by the command.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub mod metrics;

/// Installs the subscriber once; later calls do nothing.
pub fn init_logging(default_filter: &str) {
    // kube's watcher logs every failed attempt at error level; the runners report a failing
    // watch once, with the cluster's name, so kube's own lines are left out by default.
    let default = format!("{default_filter},kube_runtime=off");
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in files and log collectors.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
