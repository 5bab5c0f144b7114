//! The `fleetscaler` binary: parses the command line and calls into the library.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Projecting a cluster's objects is mostly allocation: mimalloc does it faster than the
/// system's allocator and returns the memory of a relist's burst instead of keeping it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// One cluster's state, read only, as `plan -s` reads it: what the hub reads, in one List.
    Dump(fleetscaler::cli::dump::DumpArgs),
    /// One decision over a saved cluster dump, offline: what would scale, and why each pending pod waits.
    Plan(fleetscaler::cli::plan::PlanArgs),
    /// Validate fleet.toml and print each cluster's effective settings with their sources.
    CheckConfig(fleetscaler::cli::check_config::CheckConfigArgs),
    /// Run the hub: autoscale every cluster of fleet.toml until Ctrl-C or SIGTERM.
    Run(fleetscaler::cli::run::RunArgs),
    /// A simulated fleet and the hub autoscaling it, with a live view (the quickest look).
    Demo(fleetscaler::cli::demo::DemoArgs),
    /// What a proposed change of settings would change in every cluster right now (read only).
    WhatIf(fleetscaler::cli::what_if::WhatIfArgs),
    /// The fleet at a glance from a running hub's API: one row per cluster.
    Status(fleetscaler::cli::status::StatusArgs),
    /// Why a pending pod waits, from a running hub's API, node group by node group.
    Explain(fleetscaler::cli::explain::ExplainArgs),
    /// Run only a simulated fleet (HTTPS Kubernetes API servers on loopback), for kubectl or tests.
    Sim(fleetscaler::sim::cli::SimArgs),
    /// Shell completions on stdout: `source <(fleetscaler completions bash)`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// This command line's manual page (roff) on stdout: `fleetscaler man | man -l -`.
    Man,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A log collector reading `run --log-format json` gets its last word as JSON too.
    let json_errors = matches!(&cli.command, Command::Run(a) if a.log_format == fleetscaler::telemetry::LogFormat::Json);
    let mut out = std::io::stdout().lock();
    let result = match cli.command {
        Command::Plan(args) => {
            fleetscaler::cli::plan::run(&args, &mut out).map_err(anyhow::Error::from)
        }
        Command::CheckConfig(args) => {
            fleetscaler::cli::check_config::run(&args, &mut out).map_err(anyhow::Error::from)
        }
        Command::Run(args) => {
            drop(out);
            runtime().and_then(|rt| {
                rt.block_on(fleetscaler::cli::run::run(args))
                    .map_err(anyhow::Error::from)
            })
        }
        Command::Demo(args) => {
            drop(out);
            runtime().and_then(|rt| {
                rt.block_on(fleetscaler::cli::demo::run(args))
                    .map_err(anyhow::Error::from)
            })
        }
        Command::WhatIf(args) => runtime().and_then(|rt| {
            rt.block_on(fleetscaler::cli::what_if::run(&args, &mut out))
                .map_err(anyhow::Error::from)
        }),
        Command::Dump(args) => runtime().and_then(|rt| {
            rt.block_on(fleetscaler::cli::dump::run(&args, &mut out))
                .map_err(anyhow::Error::from)
        }),
        Command::Status(args) => runtime().and_then(|rt| {
            rt.block_on(fleetscaler::cli::status::run(&args, &mut out))
                .map_err(anyhow::Error::from)
        }),
        Command::Explain(args) => runtime().and_then(|rt| {
            rt.block_on(fleetscaler::cli::explain::run(&args, &mut out))
                .map_err(anyhow::Error::from)
        }),
        // Both from the command line's own definition, so they never fall behind it.
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "fleetscaler", &mut out);
            Ok(())
        }
        Command::Man => clap_mangen::Man::new(Cli::command())
            .render(&mut out)
            .map_err(anyhow::Error::from),
        Command::Sim(args) => {
            drop(out);
            // `sim machines` reports each failed call as one log line of its own (`RUST_LOG`
            // to change); kube's line for the same failure would repeat it.
            fleetscaler::telemetry::init_logging("info,kube_client=off");
            runtime().and_then(|rt| {
                rt.block_on(fleetscaler::sim::cli::run(args))
                    .map_err(anyhow::Error::from)
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): nothing more to say.
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            if json_errors {
                fleetscaler::telemetry::log_json::line(tracing::Level::ERROR, &message(&e));
            } else {
                eprintln!("error: {}", message(&e));
            }
            ExitCode::from(exit_status(&e))
        }
    }
}

/// The error and its causes, each said once: many of our errors already end with their
/// cause's words (`cannot read F: No such file...`), which `{:#}` would repeat.
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// 2 for an error, 1 for an answer printed with parts missing (`what-if`) or a pod that is
/// not pending (`explain`).
fn exit_status(e: &anyhow::Error) -> u8 {
    if let Some(w) = e.downcast_ref::<fleetscaler::cli::what_if::WhatIfError>() {
        return w.exit_status();
    }
    e.downcast_ref::<fleetscaler::cli::explain::ExplainError>()
        .map_or(2, |x| x.exit_status())
}

fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
