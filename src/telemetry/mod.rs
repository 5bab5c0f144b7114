//! Logging: a `tracing` subscriber writing to stderr, filtered by `RUST_LOG` (e.g.
//! `RUST_LOG=fleetscaler=debug`), with a default level chosen by the command.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the subscriber once; later calls do nothing.
pub fn init_logging(default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in files and log collectors.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
