//! `fleetscaler sim machines`: connect with a kubeconfig context, find the Machine APIs the
//! server serves, and run one machine controller per API every tick until Ctrl-C or
//! SIGTERM. Each pass lists afresh and runs on a blocking thread (the world's calls block);
//! discovery is repeated now and then, so CRDs installed after the start are picked up.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::runtime::Handle;
use tokio::time::{Instant, MissedTickBehavior};

use super::discovery::{Served, served};
use super::world::KubeWorld;
use crate::api::resources::Resource;
use crate::cli::wait_for_signal;
use crate::controllers::machines::{MachineController, Role};
use crate::error::SimError;
use crate::machine_api::MachineApi;
use crate::settings::{Flavor, Timing};
use fleetscaler_model::duration::parse_go_duration;

/// How often the served Machine APIs are looked up again.
const DISCOVERY_INTERVAL: Duration = Duration::from_secs(10);

/// Arguments of `fleetscaler sim machines`.
#[derive(Args, Debug, Clone)]
pub struct MachinesArgs {
    /// The kubeconfig of the cluster whose Machines to run.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Its context (default: the kubeconfig's current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Machine created until its Node registers (Go duration: 2s, 500ms, 1m).
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub provision_delay: Duration,
    /// Machine deleted until it and its Node are gone.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub deprovision_delay: Duration,
    /// How often the controller looks at the cluster.
    #[arg(long, default_value = "250ms", value_parser = duration)]
    pub tick: Duration,
    /// Deadline of each API call.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub request_timeout: Duration,
    /// Machine APIs whose controllers run for real beside this one (`openshift`: the
    /// machine-api-operator's MachineSet and nodelink controllers; `cluster-api`: Cluster
    /// API's core manager): for those this controller plays only the cloud (for Cluster
    /// API, the infrastructure provider of AWSMachines).
    #[arg(long, value_delimiter = ',', value_parser = flavor)]
    pub real_controllers: Vec<Flavor>,
}

fn flavor(text: &str) -> Result<Flavor, String> {
    match text {
        "openshift" => Ok(Flavor::OpenShift),
        "cluster-api" => Ok(Flavor::ClusterApi),
        other => Err(format!(
            "{other:?}: the real controllers are openshift's or cluster-api's"
        )),
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_go_duration(text).map_err(|e| e.to_string())
}

impl MachinesArgs {
    fn timing(&self) -> Timing {
        Timing {
            tick: self.tick,
            machine_provision: self.provision_delay,
            machine_deprovision: self.deprovision_delay,
            ..Timing::demo()
        }
    }
}

/// The world, a controller per served Machine API, and what discovery last found when.
#[derive(Debug)]
struct Testbed {
    world: KubeWorld,
    real_controllers: Vec<Flavor>,
    controllers: Vec<MachineController>,
    served: Option<Vec<MachineApi>>,
    discovered: Option<Instant>,
}

impl Testbed {
    /// One pass: discovery when due, a fresh list, then every controller's step.
    fn pass(&mut self, timing: &Timing, now: Instant) {
        let due = self
            .discovered
            .is_none_or(|at| now.saturating_duration_since(at) >= DISCOVERY_INTERVAL);
        if due {
            self.discover(now);
        }
        if let Err(e) = self.world.refresh() {
            tracing::warn!("{e}; this pass is skipped");
            if e.code() == Some(404) {
                // A kind went away (its CRD deleted): look again at once.
                self.discovered = None;
            }
            return;
        }
        for controller in &mut self.controllers {
            controller.step(&mut self.world, timing, now);
        }
    }

    fn discover(&mut self, now: Instant) {
        let Served { apis, notes } = match self.world.discover() {
            Ok(found) => served(&found),
            Err(e) => {
                tracing::warn!("{e}; discovery is retried next pass");
                return;
            }
        };
        self.discovered = Some(now);
        if self.served.as_ref() == Some(&apis) {
            return;
        }
        for note in notes {
            tracing::warn!("{note}");
        }
        // Controllers of APIs still served keep their timers; new ones start afresh.
        let mut kept: Vec<MachineController> = Vec::new();
        for api in &apis {
            match self.controllers.iter().position(|c| c.api() == api) {
                Some(i) => kept.push(self.controllers.swap_remove(i)),
                None => {
                    let role = if self.real_controllers.contains(&api.flavor) {
                        Role::Cloud
                    } else {
                        Role::Whole
                    };
                    kept.push(MachineController::with_role(*api, role))
                }
            }
        }
        self.controllers = kept;
        let cloud: &[_] = if self.real_controllers.contains(&Flavor::ClusterApi)
            && apis.iter().any(|a| a.flavor == Flavor::ClusterApi)
        {
            &[Resource::AwsMachines, Resource::AwsMachineTemplates]
        } else {
            &[]
        };
        self.world.serve(&apis, cloud);
        self.served = Some(apis.clone());
        let names: Vec<String> = apis.iter().map(|a| a.api_version()).collect();
        if names.is_empty() {
            tracing::warn!(
                "no Machine API served (machine.openshift.io, cluster.x-k8s.io); waiting for one"
            );
        } else {
            tracing::info!("serving {}", names.join(", "));
        }
    }
}

/// Runs the test-bed machine controller until Ctrl-C or SIGTERM.
pub async fn run(args: MachinesArgs) -> Result<(), SimError> {
    let client = connect(&args).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
        ^ u64::from(std::process::id());
    let world = KubeWorld::new(
        client,
        Handle::current(),
        args.request_timeout,
        seed,
        stop.clone(),
    );
    let mut bed = Some(Testbed {
        world,
        real_controllers: args.real_controllers.clone(),
        controllers: Vec::new(),
        served: None,
        discovered: None,
    });
    let timing = args.timing();
    // Every line names the cluster, for a test bed that runs one controller per cluster.
    let context = args.context.clone().unwrap_or_else(|| "(current)".into());
    let span = tracing::info_span!("sim machines", context = %context);
    let mut ticker = tokio::time::interval(args.tick);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let signal = wait_for_signal();
    tokio::pin!(signal);
    println!("running; Ctrl-C to stop");
    loop {
        tokio::select! {
            r = &mut signal => { r?; break; }
            _ = ticker.tick() => {}
        }
        let Some(mut current) = bed.take() else {
            break;
        };
        let (timing, span) = (timing.clone(), span.clone());
        let mut pass = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            current.pass(&timing, Instant::now());
            current
        });
        let done = tokio::select! {
            done = &mut pass => done,
            r = &mut signal => {
                // Calls not yet sent are dropped; the one in flight ends within its deadline.
                stop.store(true, Ordering::Relaxed);
                let _ = pass.await;
                r?;
                break;
            }
        };
        bed = Some(done.map_err(|e| SimError::Pass(e.to_string()))?);
    }
    tracing::info!(parent: &span, "stopped");
    Ok(())
}

/// A client for the kubeconfig's context, with deadlines and kube's retries off (a 409 or
/// 429 means "next pass" here).
async fn connect(args: &MachinesArgs) -> Result<kube::Client, SimError> {
    let err = |message: String| SimError::Connect {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone().unwrap_or_else(|| "(current)".into()),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig).map_err(|e| err(e.to_string()))?;
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| err(e.to_string()))?;
    config.connect_timeout = Some(args.request_timeout);
    config.read_timeout = Some(args.request_timeout);
    config.write_timeout = Some(args.request_timeout);
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: MachinesArgs,
    }

    #[test]
    fn delays_are_go_durations() {
        let cli = Cli::try_parse_from([
            "x",
            "--kubeconfig",
            "kc",
            "--provision-delay",
            "1m30s",
            "--tick",
            "100ms",
        ])
        .unwrap();
        let timing = cli.args.timing();
        assert_eq!(timing.machine_provision, Duration::from_secs(90));
        assert_eq!(timing.machine_deprovision, Duration::from_secs(1));
        assert_eq!(timing.tick, Duration::from_millis(100));
        assert!(Cli::try_parse_from(["x", "--kubeconfig", "kc", "--tick", "soon"]).is_err());
    }

    #[test]
    fn real_controllers_are_named_by_api() {
        let parse =
            |v: &str| Cli::try_parse_from(["x", "--kubeconfig", "kc", "--real-controllers", v]);
        assert_eq!(
            parse("openshift").unwrap().args.real_controllers,
            vec![Flavor::OpenShift]
        );
        assert_eq!(
            parse("openshift,cluster-api")
                .unwrap()
                .args
                .real_controllers,
            vec![Flavor::OpenShift, Flavor::ClusterApi]
        );
        let err = parse("capi").err().unwrap().to_string();
        assert!(err.contains("openshift's or cluster-api's"), "{err}");
        let none = Cli::try_parse_from(["x", "--kubeconfig", "kc"]).unwrap();
        assert!(none.args.real_controllers.is_empty());
    }
}
