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
enum Command {
    /// Run only a simulated fleet (HTTPS Kubernetes API servers on loopback), for kubectl or tests.
    Sim(fleetscaler::sim::cli::SimArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(command) = cli.command {
        match command {
            Command::Sim(args) => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(fleetscaler::sim::cli::run(args))?;
            }
        }
    }
    Ok(())
}
