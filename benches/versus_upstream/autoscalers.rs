//! The two contenders as processes: upstream cluster-autoscaler (one per cluster, its
//! Cluster API provider on OpenShift's Machine API) and fleetscaler's hub (one for all),
//! configured with the same scan interval, unneeded time and delays; and what they cost
//! (peak resident memory and CPU time, read from /proc).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The settings both run with.
pub const SCAN_INTERVAL: &str = "10s";
pub const UNNEEDED_TIME: &str = "30s";
pub const DELAY_AFTER_ADD: &str = "30s";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    Upstream,
    Fleetscaler,
}

impl Contender {
    pub fn name(self) -> &'static str {
        match self {
            Contender::Upstream => "cluster-autoscaler",
            Contender::Fleetscaler => "fleetscaler",
        }
    }

    /// The namespace its status ConfigMap lands in (its sign of life).
    pub fn status_namespace(self) -> &'static str {
        match self {
            Contender::Upstream => "kube-system",
            Contender::Fleetscaler => "openshift-machine-api",
        }
    }
}

/// The running processes of one contender.
pub struct Running {
    children: Vec<Child>,
}

/// Starts `who` for the clusters whose admin kubeconfigs are `kubeconfigs` (context
/// `vs-<i>`), logging into `dir`.
pub fn start(who: Contender, bin_dir: &Path, kubeconfigs: &[PathBuf], dir: &Path) -> Running {
    let clusters: Vec<Cluster> = kubeconfigs
        .iter()
        .enumerate()
        .map(|(i, kc)| Cluster {
            kubeconfig: kc.clone(),
            context: format!("vs-{i}"),
        })
        .collect();
    start_with(who, bin_dir, &clusters, dir, false)
}

/// One cluster as a contender reaches it.
pub struct Cluster {
    pub kubeconfig: PathBuf,
    pub context: String,
}

/// As [`start`], for `clusters`; `balance`: both split a scale-up among node groups alike
/// but for their zone (`--balance-similar-node-groups`).
pub fn start_with(
    who: Contender,
    bin_dir: &Path,
    clusters: &[Cluster],
    dir: &Path,
    balance: bool,
) -> Running {
    let children = match who {
        Contender::Upstream => clusters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                upstream(
                    bin_dir,
                    &c.kubeconfig,
                    &dir.join(format!("ca-{i}.log")),
                    balance,
                )
            })
            .collect(),
        Contender::Fleetscaler => vec![hub(clusters, dir, balance)],
    };
    Running { children }
}

/// A free port on loopback, for a process that serves one (its metrics and health).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn upstream(bin_dir: &Path, kubeconfig: &Path, log: &Path, balance: bool) -> Child {
    let mut command = Command::new(bin_dir.join("cluster-autoscaler"));
    if balance {
        command.arg("--balance-similar-node-groups");
    }
    command
        .env("CAPI_GROUP", "machine.openshift.io")
        // Each on a port of its own (the default, :8085, is one for all).
        .arg(format!("--address=127.0.0.1:{}", free_port()))
        .arg("--cloud-provider=clusterapi")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cloud-config={}", kubeconfig.display()))
        .args([
            "--namespace=kube-system",
            "--leader-elect=false",
            "--expander=least-waste",
            "--skip-nodes-with-local-storage=false",
            "--skip-nodes-with-system-pods=false",
            "--scale-down-delay-after-delete=0s",
            "--scale-down-delay-after-failure=3m",
            "--max-node-provision-time=15m",
            "--v=2",
        ])
        .arg(format!("--scan-interval={SCAN_INTERVAL}"))
        .arg(format!("--scale-down-unneeded-time={UNNEEDED_TIME}"))
        .arg(format!("--scale-down-delay-after-add={DELAY_AFTER_ADD}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn hub(clusters: &[Cluster], dir: &Path, balance: bool) -> Child {
    let mut toml = format!(
        "[hub]\nscan_interval = \"{SCAN_INTERVAL}\"\n\n[defaults]\n\
         expanders = [\"least-waste\"]\nskip_nodes_with_local_storage = false\n\
         skip_nodes_with_system_pods = false\nscale_down_delay_after_delete = \"0s\"\n\
         scale_down_delay_after_failure = \"3m\"\nmax_node_provision_time = \"15m\"\n\
         scale_down_unneeded_time = \"{UNNEEDED_TIME}\"\n\
         scale_down_delay_after_add = \"{DELAY_AFTER_ADD}\"\n"
    );
    if balance {
        toml.push_str("balance_similar_node_groups = true\n");
    }
    for (i, c) in clusters.iter().enumerate() {
        toml.push_str(&format!(
            "\n[[clusters]]\nname = \"c{i}\"\ncontext = \"{}\"\nkubeconfig = \"{}\"\n\
             use_cluster_autoscaler = false\n",
            c.context,
            c.kubeconfig.display()
        ));
    }
    let config = dir.join("fleet.toml");
    std::fs::write(&config, toml).unwrap();
    Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        // As the chart's Deployment runs it.
        .env("MIMALLOC_ALLOW_THP", "0")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("hub.log")).unwrap())
        .spawn()
        .unwrap()
}

/// Peak resident memory (MiB) and CPU seconds, summed over the processes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    pub peak_rss_mib: f64,
    pub cpu_secs: f64,
}

impl Running {
    /// What the processes have cost so far (read before they exit).
    pub fn cost(&self) -> Cost {
        let mut total = Cost::default();
        for c in &self.children {
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", c.id())).unwrap_or_default();
            let hwm_kb: f64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            total.peak_rss_mib += hwm_kb / 1024.0;
            total.cpu_secs += cpu_secs(c.id());
        }
        total
    }

    /// Whether every process is still alive (a crash voids the run).
    pub fn alive(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn stop(mut self) {
        for c in &self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
        }
        for c in &mut self.children {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.children.clear();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// utime + stime of a process, in seconds (fields 14 and 15 of /proc/PID/stat, in clock
/// ticks of 1/100 s on Linux).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its closing ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    (ticks(11) + ticks(12)) / 100.0
}
