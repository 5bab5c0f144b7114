//! The `fleetscaler` binary: parses the command line and calls into the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fleetscaler",
    version,
    about = "Autoscale a fleet of OpenShift / Cluster API clusters from one hub"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One decision over a saved cluster dump, offline: what would scale, and why each pending pod waits.
    Plan(fleetscaler::cli::plan::PlanArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => fleetscaler::cli::plan::run(&args, &mut std::io::stdout().lock())
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
