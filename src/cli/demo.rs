//! `fleetscaler demo`: a simulated fleet and the hub autoscaling it, in one process, with a
//! live view in the terminal and the hub's HTTP endpoints.
//!
//! The hub reaches the simulated clusters exactly as it reaches real ones: through a
//! kubeconfig and HTTPS. The kubeconfig holds the clusters' credentials, so it goes into a
//! directory of its own that only the user can read, outside the working directory (which
//! is often a checkout), and is removed when the demo stops.

use std::path::{Path, PathBuf};
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
    /// Write the simulated fleet's kubeconfig (for kubectl) here, and keep it, instead of
    /// into a private directory under $XDG_RUNTIME_DIR or the temporary directory that is
    /// removed when the demo stops.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
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
    #[error("cannot create a private directory for the demo's kubeconfig in {base}: {source}")]
    KubeconfigDir {
        base: PathBuf,
        source: std::io::Error,
    },
}

pub async fn run(args: DemoArgs) -> Result<(), DemoError> {
    // The demo's traces follow the OTEL_* variables alone.
    let telemetry = super::run::start_telemetry("warn", &HubConfig::default())?;
    let listener = server::bind(&args.listen, "--listen").await?;
    let fleet = Fleet::start(sim_settings(&args)).await?;
    // Dropped when `run` returns, which removes the directory and the kubeconfig in it.
    let (kubeconfig, private_dir) = write_kubeconfig(&fleet, args.kubeconfig_out.as_deref())?;
    let config = demo_config(&args, &kubeconfig);
    let addr = server::local_addr(&listener).map_or(args.listen.clone(), |a| a.to_string());
    println!(
        "fleetscaler demo: {} simulated clusters; dashboard on http://{addr}/ (API /api/v1/fleet, metrics /metrics)",
        fleet.clusters().len(),
    );
    let lifetime = match private_dir {
        Some(_) => "removed when the demo stops",
        None => "kept after the demo",
    };
    println!("  kubeconfig: {} ({lifetime})", kubeconfig.display());
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

/// Writes the fleet's kubeconfig where the user asked, or else into a fresh private
/// directory (returned, to be dropped when the demo stops). Returns the file's path.
fn write_kubeconfig(
    fleet: &Fleet,
    asked: Option<&Path>,
) -> Result<(PathBuf, Option<PrivateDir>), DemoError> {
    if let Some(path) = asked {
        fleet.write_kubeconfig(path)?;
        let absolute = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        return Ok((absolute, None));
    }
    let dir = PrivateDir::create(&private_base())?;
    let path = dir.0.join("fleetscaler-demo.kubeconfig");
    fleet.write_kubeconfig(&path)?;
    Ok((path, Some(dir)))
}

/// `$XDG_RUNTIME_DIR` (per user, in memory, emptied at logout) when there is one, else the
/// OS's temporary directory.
fn private_base() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .unwrap_or_else(std::env::temp_dir)
}

/// A directory only its owner can enter, removed with everything in it when dropped.
#[derive(Debug)]
struct PrivateDir(PathBuf);

impl PrivateDir {
    /// Tries a few names rather than reusing one: an existing directory (left by a demo that
    /// was killed, or made by someone else in a shared /tmp) is never written into.
    fn create(base: &Path) -> Result<PrivateDir, DemoError> {
        let pid = std::process::id();
        let mut last = None;
        for n in 0..16 {
            let name = match n {
                0 => format!("fleetscaler-demo-{pid}"),
                n => format!("fleetscaler-demo-{pid}-{n}"),
            };
            let dir = base.join(name);
            match create_private_dir(&dir) {
                Ok(()) => return Ok(PrivateDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(dir_error(base, e)),
            }
        }
        let e = last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into());
        Err(dir_error(base, e))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.0) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                eprintln!("could not remove {}: {e}", self.0.display());
            }
            _ => {}
        }
    }
}

fn dir_error(base: &Path, source: std::io::Error) -> DemoError {
    DemoError::KubeconfigDir {
        base: base.to_path_buf(),
        source,
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
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
        ..FleetConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_kubeconfig_directory_is_private_fresh_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let base =
            std::env::temp_dir().join(format!("fleetscaler-demo-unit-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let first = PrivateDir::create(&base).unwrap();
        let mode = std::fs::metadata(&first.0).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // A directory already there (left by a killed demo) is not reused.
        let second = PrivateDir::create(&base).unwrap();
        assert_ne!(first.0, second.0);
        std::fs::write(first.0.join("kubeconfig"), "x").unwrap();
        let path = first.0.clone();
        drop(first);
        assert!(!path.exists());
        drop(second);
        std::fs::remove_dir(&base).unwrap();
    }
}
