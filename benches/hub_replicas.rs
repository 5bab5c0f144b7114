//! Hub replicas sharing one simulated fleet through Leases (`[hub.sharding]`), as the chart
//! runs them: `fleetscaler run` child processes, the Leases on the fleet's first cluster.
//! Figures: time until every cluster is run by one replica and planned, each replica's
//! share, memory and CPU, and the decision latency (pod Unschedulable to node group
//! patched) of the clusters each replica runs. `docs/performance.md` records them.
//!
//! Size with HUB_BENCH_REPLICAS, HUB_BENCH_CLUSTERS, HUB_BENCH_NODES_PER_GROUP,
//! HUB_BENCH_PODS_PER_NODE, HUB_BENCH_ROUNDS and HUB_BENCH_RATE (default 3 replicas, 30
//! clusters of 3×333 workers × 30 pods, 10 rounds, 5 pending pods a second across the
//! fleet). `HUB_BENCH_SHAPE=breadth` shares the hub bench's wide fleet instead (1,000 small
//! clusters, 3 rounds over a sample of 100) and ends with the breadth figures: sync, memory
//! per cluster, idle CPU of all replicas, decision latency; HUB_BENCH_SETTLE_SECS sets the
//! wait before the idle window. Without `--bench` (as `cargo
//! test --all-targets` runs it) a small fleet checks that the bench still works.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod hub_support;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hub_support::{Seen, create_round, describe, latencies_by_cluster, start_sim, watch_some};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use serde_json::Value;
use support::{cpu_seconds, env, process_mib};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// Where the replicas keep their Leases (on `sim-1`).
const NAMESPACE: &str = "fleetscaler";

struct Replica {
    identity: String,
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Replica {
    fn start(dir: &Path, identity: String, kubeconfig: &Path, clusters: usize) -> Replica {
        // A free port, taken back at once: the replica binds it a moment later.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let config = dir.join(format!("fleetscaler-bench-{identity}.toml"));
        std::fs::write(&config, fleet_toml(kubeconfig, clusters, &identity)).unwrap();
        let log = dir.join(format!("fleetscaler-bench-{identity}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .args(["run", "--listen", &addr.to_string(), "--config"])
            .arg(&config)
            .env("RUST_LOG", "warn")
            .env("POD_IP", "127.0.0.1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start fleetscaler run");
        Replica {
            identity,
            child,
            addr,
            log,
        }
    }

    /// Its `/api/v1/fleet`, once it answers.
    async fn fleet(&self) -> Option<Value> {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await.ok()?;
        let request = "GET /api/v1/fleet HTTP/1.0\r\nHost: bench\r\n\r\n";
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let ok = head.split(' ').nth(1) == Some("200");
        ok.then(|| serde_json::from_str(body).ok()).flatten()
    }
}

/// The clusters a replica's API says it runs, with their last pass (`None` before one).
fn passes(fleet: &Value) -> BTreeMap<String, Option<(f64, f64, f64, String)>> {
    let clusters = fleet["clusters"].as_array().cloned().unwrap_or_default();
    clusters
        .iter()
        .map(|c| {
            let pass = &c["lastPass"];
            let summary = pass.is_object().then(|| {
                (
                    pass["tookMs"].as_f64().unwrap_or(0.0),
                    pass["engineMs"].as_f64().unwrap_or(0.0),
                    pass["queuedMs"].as_f64().unwrap_or(0.0),
                    pass["at"].as_str().unwrap_or("").to_string(),
                )
            });
            (c["name"].as_str().unwrap_or("").to_string(), summary)
        })
        .collect()
}

fn fleet_toml(kubeconfig: &Path, clusters: usize, identity: &str) -> String {
    let list: String = (1..=clusters)
        .map(|i| format!("[[clusters]]\nname = \"sim-{i}\"\n"))
        .collect();
    format!(
        "[hub]\nkubeconfigs = [\"{}\"]\n\n[hub.sharding]\nenabled = true\ncontext = \"sim-1\"\nnamespace = \"{NAMESPACE}\"\nidentity = \"{identity}\"\n\n{list}",
        kubeconfig.display()
    )
}

/// Which replica holds each cluster's Lease (cluster number → identity).
async fn owners(leases: &Api<Lease>, clusters: usize) -> BTreeMap<usize, String> {
    let held: BTreeMap<String, String> = leases
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|l| {
            let holder = l.spec?.holder_identity?;
            Some((l.metadata.name?, holder))
        })
        .collect();
    (1..=clusters)
        .filter_map(|i| {
            let name =
                fleetscaler::hub::shard::lease_name("fleetscaler", "cluster", &format!("sim-{i}"));
            held.get(&name).map(|h| (i, h.clone()))
        })
        .collect()
}

fn main() {
    hub_support::run(bench());
}

/// The fleet the replicas share: deep (`start_sim`'s groups of big clusters) or, with
/// HUB_BENCH_SHAPE=breadth, a thousand small clusters as the hub bench's breadth shape.
struct Shape {
    breadth: bool,
    clusters: usize,
    rounds: usize,
    /// Time for the first passes' scale-ups to land before anything is measured.
    settle: Duration,
}

impl Shape {
    fn from_env(full: bool) -> Shape {
        let breadth = matches!(std::env::var("HUB_BENCH_SHAPE").as_deref(), Ok("breadth"));
        let clusters = match (breadth, full) {
            (true, true) => 1000,
            (false, true) => 30,
            _ => 3,
        };
        Shape {
            breadth,
            clusters: env("HUB_BENCH_CLUSTERS", clusters),
            rounds: env(
                "HUB_BENCH_ROUNDS",
                if !full {
                    2
                } else if breadth {
                    3
                } else {
                    10
                },
            ),
            settle: Duration::from_secs(env(
                "HUB_BENCH_SETTLE_SECS",
                match (breadth, full) {
                    (true, true) => 120,
                    (false, true) => 25,
                    _ => 3,
                },
            ) as u64),
        }
    }

    fn start_sim(&self, full: bool) -> hub_support::Sim {
        if self.breadth {
            let pods_per_node = env("HUB_BENCH_PODS_PER_NODE", 40).to_string();
            return hub_support::start_sim_with(
                self.clusters,
                &hub_support::breadth_args(&pods_per_node),
            );
        }
        let per_group = env("HUB_BENCH_NODES_PER_GROUP", if full { 333 } else { 3 });
        let pods_per_node = env("HUB_BENCH_PODS_PER_NODE", if full { 30 } else { 10 });
        start_sim(self.clusters, per_group, pods_per_node)
    }

    /// The clusters the rounds put pending pods in: all of a deep fleet, a sample of a wide
    /// one (as the breadth shape's load).
    fn loaded(&self) -> Vec<usize> {
        if self.breadth {
            hub_support::sample(self.clusters)
        } else {
            (1..=self.clusters).collect()
        }
    }
}

async fn bench() {
    let full = hub_support::full_run();
    let replicas = env("HUB_BENCH_REPLICAS", if full { 3 } else { 2 });
    let shape = Shape::from_env(full);
    let (clusters, rounds) = (shape.clusters, shape.rounds);
    let sim = shape.start_sim(full);
    let kubeconfig = kube::config::Kubeconfig::read_from(&sim.kubeconfig).unwrap();
    let management = hub_support::client(&kubeconfig, "sim-1").await;
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}));
    Api::<Namespace>::all(management.clone())
        .create(&Default::default(), &namespace.unwrap())
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(management, NAMESPACE);

    let dir = std::env::temp_dir();
    let sim_pid = sim.child.id();
    let sim_cpu = cpu_seconds(Some(sim_pid));
    let started = Instant::now();
    let hubs: Vec<Replica> = (1..=replicas)
        .map(|i| Replica::start(&dir, format!("replica-{i}"), &sim.kubeconfig, clusters))
        .collect();
    let limit = Duration::from_secs(if full { 900 } else { 120 });
    let synced = wait_synced(&hubs, clusters, started, limit).await;
    println!("{replicas} hub replicas sharing {clusters} simulated clusters through Leases");
    println!(
        "  every cluster run by one replica and planned: {:.1} s (the simulated fleet used {:.1} s of CPU serving)",
        synced.as_secs_f64(),
        cpu_seconds(Some(sim_pid)) - sim_cpu
    );
    // A few passes, so every replica's engine and status writer are counted too.
    tokio::time::sleep(shape.settle).await;
    let idle_cpu = idle(&hubs, if full { 30 } else { 3 }).await;

    let seen = Arc::new(Mutex::new(Seen::default()));
    let (clients, watches) = watch_some(&sim.kubeconfig, &shape.loaded(), &seen).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = owners(&leases, clusters).await;
    let cpu_before: Vec<f64> = hubs
        .iter()
        .map(|h| cpu_seconds(Some(h.child.id())))
        .collect();
    let rounds_started = Instant::now();
    let mut pass_ms: BTreeMap<(String, String), (String, f64)> = BTreeMap::new();
    let round_gap = hub_support::round_gap(full, clients.len());
    for round in 0..rounds {
        create_round(&clients, round, round_gap).await;
        sample_passes(&hubs, &mut pass_ms).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let wall = rounds_started.elapsed().as_secs_f64();
    let after = owners(&leases, clusters).await;
    if before != after {
        println!("  (some clusters changed hands during the rounds: latencies by the owner after)");
    }
    let by_cluster = latencies_by_cluster(&seen.lock().unwrap());
    let mut rss_all = 0.0;
    for (i, hub) in hubs.iter().enumerate() {
        let runs: BTreeSet<usize> = after
            .iter()
            .filter(|(_, h)| **h == hub.identity)
            .map(|(c, _)| *c)
            .collect();
        let pods: u64 = hub.fleet().await.map_or(0, |f| cached_pods(&f));
        let (rss, peak) = process_mib(hub.child.id());
        rss_all += rss;
        let cpu = cpu_seconds(Some(hub.child.id())) - cpu_before[i];
        println!(
            "  {}: clusters run: {}, {pods} pods, RSS {rss:.0} MiB (peak {peak:.0} MiB, {:.0} KiB per cluster), CPU idle {:.1} %, during the rounds {:.0} % of one core",
            hub.identity,
            runs.len(),
            rss * 1024.0 / runs.len().max(1) as f64,
            idle_cpu[i],
            100.0 * cpu / wall
        );
        let mine: Vec<f64> = by_cluster
            .iter()
            .filter(|(c, _)| runs.contains(c))
            .map(|(_, ms)| *ms)
            .collect();
        println!(
            "    {}",
            describe(
                "decision latency, pod Unschedulable to node group patched",
                mine
            )
        );
        let passes: Vec<f64> = pass_ms
            .values()
            .filter(|(who, _)| *who == hub.identity)
            .map(|(_, ms)| *ms)
            .collect();
        println!("    {}", describe("per-cluster pass", passes));
    }
    let mut all: Vec<f64> = by_cluster.iter().map(|(_, ms)| *ms).collect();
    println!(
        "  {}",
        describe("decision latency, all replicas", all.clone())
    );
    all.sort_by(f64::total_cmp);
    println!(
        "fleet over {replicas} replicas: {clusters} clusters, sync {:.1} s, memory {:.0} KiB per cluster, idle CPU {:.1} %, decision p50 {:.0} ms, p99 {:.0} ms",
        synced.as_secs_f64(),
        rss_all * 1024.0 / clusters as f64,
        idle_cpu.iter().sum::<f64>(),
        hub_support::percentile(&all, 0.5),
        hub_support::percentile(&all, 0.99),
    );
    let missed = rounds * clients.len() - by_cluster.len();
    if missed > 0 {
        println!("  ({missed} pods got no scale-up within the bench)");
    }
    for w in &watches {
        w.abort();
    }
    drop(hubs);
    drop(sim);
}

/// Waits until the replicas have settled who runs what (each runs exactly the clusters whose
/// Lease it holds, every cluster held once) and have planned every cluster; returns the
/// time since `started`.
async fn wait_synced(
    hubs: &[Replica],
    clusters: usize,
    started: Instant,
    limit: Duration,
) -> Duration {
    loop {
        let (mut planned, mut held, mut settled) = (0, 0, true);
        for hub in hubs {
            let Some(fleet) = hub.fleet().await else {
                settled = false;
                continue;
            };
            let runs = passes(&fleet);
            let writing: BTreeSet<String> = fleet["hub"]["sharding"]["writing"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect();
            settled &= runs.keys().cloned().collect::<BTreeSet<_>>() == writing;
            held += writing.len();
            planned += runs.values().filter(|p| p.is_some()).count();
        }
        if settled && held == clusters && planned == clusters {
            return started.elapsed();
        }
        if started.elapsed() > limit {
            for hub in hubs {
                let log = std::fs::read_to_string(&hub.log).unwrap_or_default();
                eprintln!("--- {} ---\n{log}", hub.identity);
            }
            panic!("after {limit:?}: {held} of {clusters} clusters held, {planned} planned");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each replica's CPU, in % of one core, over `secs` with nothing happening in the fleet.
async fn idle(hubs: &[Replica], secs: u64) -> Vec<f64> {
    let before: Vec<f64> = hubs
        .iter()
        .map(|h| cpu_seconds(Some(h.child.id())))
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    hubs.iter()
        .zip(before)
        .map(|(h, b)| 100.0 * (cpu_seconds(Some(h.child.id())) - b) / secs as f64)
        .collect()
}

/// Each replica's latest pass of each cluster it runs, keyed so a pass is counted once.
async fn sample_passes(hubs: &[Replica], out: &mut BTreeMap<(String, String), (String, f64)>) {
    for hub in hubs {
        let Some(fleet) = hub.fleet().await else {
            continue;
        };
        for (name, pass) in passes(&fleet) {
            if let Some((took, _, _, at)) = pass {
                out.insert((name, at), (hub.identity.clone(), took));
            }
        }
    }
}

fn cached_pods(fleet: &Value) -> u64 {
    let clusters = fleet["clusters"].as_array().cloned().unwrap_or_default();
    clusters
        .iter()
        .map(|c| c["cache"]["pods"].as_u64().unwrap_or(0))
        .sum()
}
