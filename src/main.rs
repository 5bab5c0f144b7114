//! The `fleetscaler` binary: parses the command line and calls into the library.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fleetscaler",
    version,
    about = "Autoscale a fleet of OpenShift / Cluster API clusters from one hub"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(command) = cli.command {
        match command {}
    }
    Ok(())
}
