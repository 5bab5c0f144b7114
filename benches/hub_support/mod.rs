//! What the hub benches share: the simulated fleet in a child process, the bench's own
//! watches of each cluster (when a bench pod turns Unschedulable, when a node group is
//! raised), the pods that make scale-ups, and the figures made of them.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn describe(name: &str, mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!(
        "{name}: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} samples)",
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(f64::NAN),
        ms.len()
    )
}

pub struct Sim {
    pub child: Child,
    pub kubeconfig: PathBuf,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Starts `fleetscaler sim` and waits until it serves.
pub fn start_sim(clusters: usize, per_group: usize, pods_per_node: usize) -> Sim {
    let (per_group, pods_per_node) = (per_group.to_string(), pods_per_node.to_string());
    let shape = [
        "--nodes-per-group",
        &per_group,
        "--pods-per-node",
        &pods_per_node,
        "--history-window",
        "200000",
    ];
    start_sim_with(clusters, &shape)
}

/// The breadth shape's clusters (`sim` arguments): 3 control-plane nodes and 2 to 10
/// workers each, `pods_per_node` pods a worker, OpenShift and Cluster API mixed, their
/// workloads held still (a day-long wave over 1,000 clusters still resizes some
/// deployment several times a second: not an idle fleet).
pub fn breadth_args(pods_per_node: &str) -> [&str; 10] {
    [
        "--wave-period-secs",
        "0",
        "--workers",
        "2-10",
        "--pods-per-node",
        pods_per_node,
        "--flavor",
        "mixed",
        "--history-window",
        "5000",
    ]
}

/// Up to 100 OpenShift (odd-numbered) clusters spread evenly over the fleet: the breadth
/// shape's load goes to these.
pub fn sample(clusters: usize) -> Vec<usize> {
    let odd: Vec<usize> = (1..=clusters).step_by(2).collect();
    let step = odd.len().div_ceil(100).max(1);
    odd.into_iter().step_by(step).collect()
}

/// Starts `fleetscaler sim` with `clusters` clusters of the shape `args` give (workloads
/// steady: their waves a day long, unless `args` say otherwise) and waits until it serves.
pub fn start_sim_with(clusters: usize, args: &[&str]) -> Sim {
    let kubeconfig = std::env::temp_dir().join(format!(
        "fleetscaler-hub-bench-{}.kubeconfig",
        std::process::id()
    ));
    let waves: &[&str] = if args.contains(&"--wave-period-secs") {
        &[]
    } else {
        &["--wave-period-secs", "86400"]
    };
    let mut command = match SIM_CORES.get() {
        Some(cores) => {
            let mut taskset = Command::new("taskset");
            taskset.args(["-c", cores, env!("CARGO_BIN_EXE_fleetscaler")]);
            taskset
        }
        None => Command::new(env!("CARGO_BIN_EXE_fleetscaler")),
    };
    let mut child = command
        .args(["sim", "--timing", "demo"])
        .args(waves)
        .args(["--clusters", &clusters.to_string()])
        .args(args)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start fleetscaler sim");
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        if line.unwrap().starts_with("running") {
            break;
        }
    }
    Sim { child, kubeconfig }
}

/// When each bench pod was first seen Unschedulable, and when each cluster's node groups
/// were raised, as this process's watches saw them.
#[derive(Default)]
pub struct Seen {
    pub unschedulable: HashMap<(usize, String), Instant>,
    pub raised: BTreeMap<usize, Vec<Instant>>,
}

pub async fn watch_cluster(client: Client, cluster: usize, seen: Arc<Mutex<Seen>>) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let cfg = watcher::Config::default().labels("bench=hub");
    let seen_pods = seen.clone();
    // With backoff: a watch whose server is gone must wait between retries, not spin.
    let pod_events = watcher(pods, cfg).default_backoff().for_each(move |e| {
        if let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = e {
            let unschedulable = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                    })
                });
            if unschedulable {
                let name = p.metadata.name.unwrap_or_default();
                let mut s = seen_pods.lock().unwrap();
                s.unschedulable
                    .entry((cluster, name))
                    .or_insert_with(Instant::now);
            }
        }
        async {}
    });
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet");
    let sets: Api<DynamicObject> = Api::namespaced_with(
        client,
        "openshift-machine-api",
        &ApiResource::from_gvk_with_plural(&gvk, "machinesets"),
    );
    let mut replicas: HashMap<String, i64> = HashMap::new();
    let set_events = watcher(sets, watcher::Config::default())
        .default_backoff()
        .for_each(move |e| {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = e {
                let name = o.metadata.name.clone().unwrap_or_default();
                let now = o.data["spec"]["replicas"].as_i64().unwrap_or(0);
                if let Some(before) = replicas.insert(name, now)
                    && now > before
                {
                    seen.lock()
                        .unwrap()
                        .raised
                        .entry(cluster)
                        .or_default()
                        .push(Instant::now());
                }
            }
            async {}
        });
    futures::join!(pod_events, set_events);
}

/// A pod no running node has room for: each one makes a scale-up.
pub fn big_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"bench": "hub"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "bench", "uid": "uid-bench", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "7", "memory": "2Gi"}}}]}
    }))
    .unwrap()
}

/// For each bench pod: from its Unschedulable to the first raise of its cluster after it.
pub fn latencies(seen: &Seen) -> Vec<f64> {
    latencies_by_cluster(seen)
        .into_iter()
        .map(|(_, ms)| ms)
        .collect()
}

/// The same, with the cluster (1-based) of each.
pub fn latencies_by_cluster(seen: &Seen) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    for ((cluster, _), at) in &seen.unschedulable {
        let raised = seen.raised.get(cluster).into_iter().flatten();
        if let Some(first) = raised.filter(|t| *t >= at).min() {
            out.push((*cluster, first.duration_since(*at).as_secs_f64() * 1e3));
        }
    }
    out
}

/// Runs a bench on a multi-threaded runtime.
pub fn run(bench: impl std::future::Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench);
    // Tasks still running must not hold the process up once the figures are out.
    runtime.shutdown_timeout(Duration::from_secs(5));
}

/// The cores the simulated fleet is pinned to, once `pin` has pinned this process.
static SIM_CORES: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Pins this process (the hub, and the bench's own watches) to core 0 and the simulated
/// fleet it starts to the other cores, so that each one's limit is its own rather than the
/// other's load: on by default for a full run on a machine of two cores or more,
/// `HUB_BENCH_PIN=0` turns it off. Called before the runtime starts (its threads inherit
/// the affinity; the hub's pass pool and runtime size themselves to the one core).
pub fn pin(full: bool) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if crate::support::env("HUB_BENCH_PIN", usize::from(full)) != 1 || cores < 2 {
        return;
    }
    let pid = std::process::id().to_string();
    let pinned = Command::new("taskset")
        .args(["-a", "-p", "-c", "0", &pid])
        .stdout(Stdio::null())
        .status()
        .expect("taskset (util-linux) pins the bench");
    assert!(
        pinned.success(),
        "taskset could not pin the bench: {pinned}"
    );
    let sim = if cores == 2 {
        "1".to_string()
    } else {
        format!("1-{}", cores - 1)
    };
    println!(
        "pinned: the hub to core 0, the simulated fleet to core(s) {sim} (HUB_BENCH_PIN=0: not)"
    );
    let _ = SIM_CORES.set(sim);
}

/// Whether `cargo bench` started it; else (`cargo test --all-targets`) a small fleet checks
/// that the bench still works.
pub fn full_run() -> bool {
    let full = std::env::args().any(|a| a == "--bench");
    if !full {
        println!("(quick run: not started by cargo bench)");
    }
    full
}

/// A client per simulated cluster (`sim-1` .. `sim-<clusters>`), each watched for the
/// bench's pods and its MachineSets.
pub async fn watch_clusters(
    kubeconfig: &std::path::Path,
    clusters: usize,
    seen: &Arc<Mutex<Seen>>,
) -> (Vec<Client>, Vec<JoinHandle<()>>) {
    let all: Vec<usize> = (1..=clusters).collect();
    watch_some(kubeconfig, &all, seen).await
}

/// As `watch_clusters`, for the clusters numbered `which` (`sim-N`).
pub async fn watch_some(
    kubeconfig: &std::path::Path,
    which: &[usize],
    seen: &Arc<Mutex<Seen>>,
) -> (Vec<Client>, Vec<JoinHandle<()>>) {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let mut clients = Vec::new();
    let mut watches = Vec::new();
    for &i in which {
        let client = client(&kubeconfig, &format!("sim-{i}")).await;
        watches.push(tokio::spawn(watch_cluster(client.clone(), i, seen.clone())));
        clients.push(client);
    }
    (clients, watches)
}

/// A client for one context of the simulated fleet's kubeconfig.
pub async fn client(kubeconfig: &kube::config::Kubeconfig, context: &str) -> Client {
    let opts = kube::config::KubeConfigOptions {
        context: Some(context.to_string()),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &opts)
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// How long a round of one pending pod per cluster lasts: the fleet is offered
/// HUB_BENCH_RATE pending pods a second (default 5), never a round shorter than 2 s. A
/// latency is measured at a load the machine sustains; past it, passes queue up and the
/// figure is of the queue (100 clusters at 25 pods/s need more passes than two cores run).
pub fn round_gap(full: bool, clusters: usize) -> Duration {
    if !full {
        return Duration::from_secs(3);
    }
    let rate = crate::support::env("HUB_BENCH_RATE", 5).max(1);
    let gap = Duration::from_secs_f64((clusters as f64 / rate as f64).max(2.0));
    println!(
        "  load: one pending pod per cluster every {:.0} s, {:.1} a second across the fleet",
        gap.as_secs_f64(),
        clusters as f64 / gap.as_secs_f64()
    );
    gap
}

/// One round: a pod no node has room for in every cluster, spread over `gap`.
pub async fn create_round(clients: &[Client], round: usize, gap: Duration) {
    for client in clients {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let name = format!("bench-{round}");
        // Not awaited here: a slow answer must not stretch the round (the latency is
        // measured from the pod turning Unschedulable, whenever the create lands).
        tokio::spawn(async move {
            if let Err(e) = pods.create(&Default::default(), &big_pod(&name)).await {
                eprintln!("creating {name}: {e}");
            }
        });
        tokio::time::sleep(gap / clients.len() as u32).await;
    }
}

/// Passes run over the fleet, by why they ran (`fleetscaler_passes_total{cause}`).
pub fn causes(view: &fleetscaler::hub::FleetView) -> BTreeMap<&'static str, u64> {
    let mut by = BTreeMap::new();
    for r in view.reports() {
        for (cause, n) in &r.counters.passes_by_cause {
            *by.entry(*cause).or_default() += n;
        }
    }
    by
}

/// The passes run since `before` (a `causes` reading), by cause: `refresh 12, changed 3`.
pub fn causes_since(
    view: &fleetscaler::hub::FleetView,
    before: &BTreeMap<&'static str, u64>,
) -> String {
    let why: Vec<String> = causes(view)
        .into_iter()
        .map(|(cause, n)| (cause, n - before.get(cause).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .map(|(cause, n)| format!("{cause} {n}"))
        .collect();
    why.join(", ")
}
