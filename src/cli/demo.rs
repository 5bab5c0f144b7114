//! `fleetscaler demo`: a simulated fleet and the hub autoscaling it, in one process, with a
//! live view in the terminal and the hub's HTTP endpoints.
//!
//! The hub reaches the simulated clusters exactly as it reaches real ones: through a
//! kubeconfig (written next to nothing else, readable by the owner only) and HTTPS.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::hub::HubConfig;
use crate::config::{ClusterConfig, FleetConfig};
use crate::engine::settings::SettingsPatch;
use crate::server::{self, ListenError};
use crate::sim::error::SimError;
use crate::sim::fleet::Fleet;
use crate::sim::settings::{FleetSettings, Shape, Timing};

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Number of simulated clusters (sim-1 .. sim-N; every second one uses Cluster API).
    #[arg(long, default_value_t = 3)]
    pub clusters: usize,
    /// Address of the hub's HTTP endpoints.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Worker nodes per zonal group at start.
    #[arg(long, default_value_t = 2)]
    pub nodes_per_group: usize,
    /// Pods per worker node at start.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// Share of the workers' CPU the simulated load asks for at the middle of its waves;
    /// the crests overflow the workers (scale-up), the troughs leave nodes idle (scale-down).
    #[arg(long, default_value_t = 0.85)]
    pub load: f64,
    /// Period of the simulated load's waves, in seconds.
    #[arg(long, default_value_t = 240)]
    pub wave_period_secs: u64,
    /// Plan and report without writing to the clusters.
    #[arg(long)]
    pub dry_run: bool,
    /// Where to write the simulated fleet's kubeconfig (for kubectl).
    #[arg(long, default_value = "fleetscaler-demo.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("the simulated fleet: {0}")]
    Sim(#[from] SimError),
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
    #[error("traces: {0}")]
    Traces(#[from] crate::telemetry::OtelError),
}

pub async fn run(args: DemoArgs) -> Result<(), DemoError> {
    // The demo's traces follow the OTEL_* variables alone.
    let telemetry = super::run::start_telemetry("warn", &HubConfig::default())?;
    let listener = server::bind(&args.listen).await?;
    let fleet = Fleet::start(sim_settings(&args)).await?;
    fleet.write_kubeconfig(&args.kubeconfig_out)?;
    let kubeconfig = args
        .kubeconfig_out
        .canonicalize()
        .unwrap_or_else(|_| args.kubeconfig_out.clone());
    let config = demo_config(&args, &kubeconfig);
    let addr = server::local_addr(&listener).map_or(args.listen.clone(), |a| a.to_string());
    println!(
        "fleetscaler demo: {} simulated clusters; dashboard on http://{addr}/ (API /api/v1/fleet, metrics /metrics)",
        fleet.clusters().len(),
    );
    println!(
        "  kubectl: export KUBECONFIG={}; kubectl --context sim-1 get nodes,machinesets -A",
        kubeconfig.display()
    );
    println!("  Ctrl-C to stop\n");
    let cancel = CancellationToken::new();
    let hub = crate::hub::start(config, None, cancel.clone()).await?;
    tokio::spawn(server::serve(listener, hub.view.clone(), cancel.clone()));
    let view = tokio::spawn(super::view::show(hub.view.clone(), cancel.clone()));
    super::run::stop_gracefully(hub, cancel, telemetry).await;
    let _ = view.await;
    fleet.shutdown().await;
    Ok(())
}

fn sim_settings(args: &DemoArgs) -> FleetSettings {
    FleetSettings {
        clusters: args.clusters,
        shape: Shape {
            nodes_per_group: args.nodes_per_group,
            pods_per_node: args.pods_per_node,
            cpu_fill: args.load,
            ..Shape::default()
        },
        mixed_flavors: true,
        timing: Timing {
            wave_period: Duration::from_secs(args.wave_period_secs.max(10)),
            ..Timing::demo()
        },
        seed: args.seed,
        history_window: 50_000,
        controllers: true,
        stagger_waves: true,
    }
}

/// The hub's configuration for the demo: each cluster's own ClusterAutoscaler, except the
/// waits that would make a person watch for half an hour before the first scale-down
/// (overrides win over the ClusterAutoscaler resource).
pub fn demo_config(args: &DemoArgs, kubeconfig: &std::path::Path) -> FleetConfig {
    let overrides = SettingsPatch {
        scale_down_unneeded_time: Some(Duration::from_secs(60)),
        scale_down_delay_after_add: Some(Duration::from_secs(60)),
        scale_down_delay_after_delete: Some(Duration::from_secs(10)),
        // Upstream's default (the simulated ClusterAutoscaler says 0.4).
        scale_down_utilization_threshold: Some(0.5),
        // The simulated analytics pods use emptyDir and kube-system runs a pod without a
        // budget: with upstream's rules most workers could never be emptied.
        skip_nodes_with_local_storage: Some(false),
        skip_nodes_with_system_pods: Some(false),
        node_delete_delay_after_taint: Some(Duration::from_secs(2)),
        max_pod_eviction_time: Some(Duration::from_secs(60)),
        ..SettingsPatch::default()
    };
    FleetConfig {
        hub: HubConfig {
            listen: args.listen.clone(),
            scan_interval: Duration::from_secs(5),
            kubeconfigs: vec![kubeconfig.to_path_buf()],
            dry_run: args.dry_run,
            ..HubConfig::default()
        },
        fleet: Default::default(),
        defaults: SettingsPatch::default(),
        clusters: (1..=args.clusters)
            .map(|i| ClusterConfig {
                overrides: overrides.clone(),
                ..ClusterConfig::named(&format!("sim-{i}"))
            })
            .collect(),
    }
}
