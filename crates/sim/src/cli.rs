//! `fleetscaler sim`: start a simulated fleet for kubectl, the hub or tests, write its
//! kubeconfig, say where everything is, and run until Ctrl-C or SIGTERM. `fleetscaler sim
//! machines` runs the simulated machine controller against a real cluster instead
//! (`sim::testbed`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::admin;
use crate::error::SimError;
use crate::fleet::Fleet;
use crate::settings::{Flavor, FleetSettings, Shape, Timing};
use crate::testbed::{self, MachinesArgs};

/// Which Machine API the clusters use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FlavorArg {
    /// OpenShift Machine API (`machine.openshift.io` MachineSets).
    Openshift,
    /// Cluster API (`cluster.x-k8s.io` MachineDeployments).
    Capi,
    /// Odd clusters OpenShift, even clusters Cluster API.
    Mixed,
}

/// How fast the simulated controllers act.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimingArg {
    /// Seconds: a machine takes 20 s to become a node, 10 s more to be Ready.
    Demo,
    /// Milliseconds, as in tests.
    Fast,
}

/// What `fleetscaler sim` runs besides a simulated fleet.
#[derive(Subcommand, Debug, Clone)]
pub enum SimCommand {
    /// Run the simulated machine controller against a real API server (a test bed whose
    /// nodes kwok runs), until Ctrl-C or SIGTERM.
    Machines(MachinesArgs),
}

/// Arguments of `fleetscaler sim`.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// Number of simulated clusters (contexts sim-1 .. sim-N).
    #[arg(long, default_value_t = 3)]
    pub clusters: usize,
    /// Worker nodes per zonal worker group at start (three zones per cluster).
    #[arg(long, default_value_t = 2)]
    pub nodes_per_group: usize,
    /// Workers per cluster at start as MIN-MAX, drawn per cluster and spread over the
    /// three zones (instead of --nodes-per-group).
    #[arg(long, value_parser = parse_range, value_name = "MIN-MAX")]
    pub workers: Option<(usize, usize)>,
    /// Pods per worker node at start.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "fleetscaler-sim.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    /// Seed of every random choice (names, placement, waves).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = FlavorArg::Openshift)]
    pub flavor: FlavorArg,
    #[arg(long, value_enum, default_value_t = TimingArg::Demo)]
    pub timing: TimingArg,
    /// Port of the admin (fault injection) endpoint on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub admin_port: u16,
    /// Start without generated workloads (empty clusters but for the control plane).
    #[arg(long)]
    pub no_workloads: bool,
    /// Leave Machines to a machine controller outside the simulation
    /// (`fleetscaler sim machines`); the scheduler and kubelets still run.
    #[arg(long)]
    pub no_machine_controller: bool,
    /// Period of the replica waves of the generated deployments, in seconds (default: the
    /// timing's, 600 s for the demo); 0 holds every deployment at its base size.
    #[arg(long)]
    pub wave_period_secs: Option<u64>,
    /// Change events kept per cluster for watches; older resourceVersions get 410 Gone.
    #[arg(long, default_value_t = 50_000)]
    pub history_window: usize,
}

/// `MIN-MAX` with MIN <= MAX (or one number, for both).
fn parse_range(text: &str) -> Result<(usize, usize), String> {
    let number = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|e| format!("{t:?} is not a count: {e}"))
    };
    let (low, high) = match text.split_once('-') {
        Some((low, high)) => (number(low)?, number(high)?),
        None => (number(text)?, number(text)?),
    };
    if low > high {
        return Err(format!("{low} is above {high}"));
    }
    Ok((low, high))
}

impl SimArgs {
    /// The fleet settings these arguments describe.
    pub fn settings(&self) -> FleetSettings {
        FleetSettings {
            clusters: self.clusters,
            shape: Shape {
                flavor: if self.flavor == FlavorArg::Capi {
                    Flavor::ClusterApi
                } else {
                    Flavor::OpenShift
                },
                nodes_per_group: self.nodes_per_group,
                workers: self.workers,
                pods_per_node: self.pods_per_node,
                workloads: !self.no_workloads,
                machine_controller: !self.no_machine_controller,
                ..Shape::default()
            },
            mixed_flavors: self.flavor == FlavorArg::Mixed,
            timing: {
                let mut timing = match self.timing {
                    TimingArg::Demo => Timing::demo(),
                    TimingArg::Fast => Timing::fast(),
                };
                if let Some(secs) = self.wave_period_secs {
                    timing.wave_period = std::time::Duration::from_secs(secs);
                }
                timing
            },
            seed: self.seed,
            history_window: self.history_window,
            controllers: true,
            stagger_waves: false,
        }
    }
}

/// Runs `fleetscaler sim` (or its subcommand) until interrupted.
pub async fn run(args: SimArgs) -> Result<(), SimError> {
    if let Some(SimCommand::Machines(machines)) = args.command {
        return testbed::run(machines).await;
    }
    let fleet = Fleet::start(args.settings()).await?;
    fleet.write_kubeconfig(&args.kubeconfig_out)?;
    let (admin_addr, admin_task) = admin::serve(fleet.clusters().to_vec(), args.admin_port).await?;
    println!("simulated fleet: {} cluster(s)", fleet.clusters().len());
    for c in fleet.clusters() {
        let nodes = c
            .state()
            .store
            .table(crate::api::resources::Resource::Nodes)
            .objects
            .len();
        println!(
            "  {:<8} {}  {:?}, {nodes} nodes",
            c.name(),
            c.server_url(),
            c.cluster.flavor
        );
    }
    let path = args
        .kubeconfig_out
        .canonicalize()
        .unwrap_or(args.kubeconfig_out.clone());
    println!("kubeconfig: {}", path.display());
    println!(
        "  export KUBECONFIG={}; kubectl --context sim-1 get nodes",
        path.display()
    );
    println!(
        "faults: curl -X PUT http://{admin_addr}/clusters/sim-1/faults -d '{{\"errorRate\": 0.2}}'"
    );
    println!("running; Ctrl-C to stop");
    wait_for_signal().await?;
    admin_task.abort();
    fleet.shutdown().await;
    Ok(())
}

/// Returns at the next Ctrl-C or SIGTERM.
pub(crate) async fn wait_for_signal() -> Result<(), SimError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).map_err(SimError::Signal)?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map_err(SimError::Signal),
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map_err(SimError::Signal)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn a_range_of_workers_is_min_dash_max_or_one_count() {
        assert_eq!(parse_range("2-10"), Ok((2, 10)));
        assert_eq!(parse_range("4"), Ok((4, 4)));
        assert!(parse_range("10-2").unwrap_err().contains("above"));
        assert!(parse_range("two-3").unwrap_err().contains("\"two\""));
    }
}
