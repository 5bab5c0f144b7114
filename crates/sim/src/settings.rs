//! Settings of a simulated fleet: how many clusters, their shape, and the timing of the
//! controllers (seconds for a demo a person watches, milliseconds for tests).

use std::time::Duration;

/// Which Machine API a cluster uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `machine.openshift.io/v1beta1` MachineSets in `openshift-machine-api`.
    OpenShift,
    /// `cluster.x-k8s.io/v1beta2` MachineDeployments (owning MachineSets) in `openshift-cluster-api`.
    ClusterApi,
}

/// The initial shape of each cluster.
#[derive(Clone, Debug)]
pub struct Shape {
    pub flavor: Flavor,
    /// Replicas of each of the three zonal worker groups at start.
    pub nodes_per_group: usize,
    /// Instead of `nodes_per_group`: each cluster's workers at start, drawn per cluster
    /// within this range (inclusive) and spread over the three zones, for fleets of
    /// clusters that differ as real ones do.
    pub workers: Option<(usize, usize)>,
    /// Pods per worker node the workload generator aims for at start.
    pub pods_per_node: usize,
    /// Start the workload generator (deployments in waves, daemonsets, PDBs).
    pub workloads: bool,
    /// Run the simulated machine controller. Off leaves Machines to a controller outside
    /// the simulation (`fleetscaler sim machines`); the other controllers still run.
    pub machine_controller: bool,
    /// Share of a worker's allocatable CPU the generated pods ask for at the middle of their
    /// waves (above it at the crests, below in the troughs).
    pub cpu_fill: f64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            flavor: Flavor::OpenShift,
            nodes_per_group: 2,
            workers: None,
            pods_per_node: 10,
            workloads: true,
            machine_controller: true,
            cpu_fill: 0.6,
        }
    }
}

/// Delays and rates of the simulated controllers.
#[derive(Clone, Debug)]
pub struct Timing {
    /// How often each controller looks at the cluster.
    pub tick: Duration,
    /// Machine created until its Node registers.
    pub machine_provision: Duration,
    /// Machine marked for deletion until it (and its Node) is gone.
    pub machine_deprovision: Duration,
    /// Node registered until it reports Ready.
    pub node_boot: Duration,
    /// Pod bound until it runs.
    pub pod_start: Duration,
    /// Pod marked for deletion until the kubelet removes it (whatever its grace period).
    pub pod_termination: Duration,
    /// Period of the replica waves of the generated deployments; zero holds each at its base.
    pub wave_period: Duration,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
}

impl Timing {
    /// Seconds: what a person watching a demo can follow.
    pub fn demo() -> Self {
        Timing {
            tick: Duration::from_millis(500),
            machine_provision: Duration::from_secs(20),
            machine_deprovision: Duration::from_secs(5),
            node_boot: Duration::from_secs(10),
            pod_start: Duration::from_secs(2),
            pod_termination: Duration::from_secs(2),
            wave_period: Duration::from_secs(600),
            bookmark_interval: Duration::from_secs(60),
        }
    }

    /// Milliseconds: for tests that wait on conditions.
    pub fn fast() -> Self {
        Timing {
            tick: Duration::from_millis(10),
            machine_provision: Duration::from_millis(50),
            machine_deprovision: Duration::from_millis(30),
            node_boot: Duration::from_millis(50),
            pod_start: Duration::from_millis(20),
            pod_termination: Duration::from_millis(20),
            wave_period: Duration::from_secs(30),
            bookmark_interval: Duration::from_millis(200),
        }
    }
}

/// Everything a fleet is started from.
#[derive(Clone, Debug)]
pub struct FleetSettings {
    pub clusters: usize,
    pub shape: Shape,
    /// Make every second cluster a Cluster API one (`sim-2`, `sim-4`, ...).
    pub mixed_flavors: bool,
    pub timing: Timing,
    pub seed: u64,
    /// Events kept per cluster for watches to resume from; older versions get 410.
    pub history_window: usize,
    /// Run the controllers (off for tests that want a static cluster).
    pub controllers: bool,
    /// Start each cluster's waves at a different phase (cluster i of n at i/n of a period),
    /// so that the clusters of a demo do not all move in step.
    pub stagger_waves: bool,
}

impl Default for FleetSettings {
    fn default() -> Self {
        FleetSettings {
            clusters: 1,
            shape: Shape::default(),
            mixed_flavors: false,
            timing: Timing::fast(),
            seed: 1,
            history_window: 10_000,
            controllers: true,
            stagger_waves: false,
        }
    }
}
