//! fleetscaler beside upstream cluster-autoscaler, on the same real control planes
//! (`scripts/real-cluster.sh`) with the same workload: N clusters (N = 1, 5, 10; set with
//! VERSUS_CLUSTERS) of two OpenShift MachineSets, 4-CPU workers (`a`) and 8-CPU workers
//! (`b`), each at its minimum of one; then a Deployment of 12 pods of 1500m per cluster,
//! and once they all run, none. Each contender runs alone on fresh control planes: N
//! cluster-autoscaler processes, then one hub. For each it reports seconds from the pods'
//! creation to the first node group patched and to all pods running, the nodes added per
//! group, seconds to scale back down, peak RSS and CPU seconds. docs/performance.md records
//! the figures.
//!
//! The last line is `versus upstream: latency ratio X.X, memory ratio Y.Y, decisions agree
//! K/M`: ratios are upstream / fleetscaler at the largest N (latency: mean seconds to the
//! first patch; memory: peak RSS of all of upstream's processes against the hub's), and a
//! decision agrees when both add the same nodes to the same groups of one cluster.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it), N = 1 only, then a small run
//! of the scale mode. `VERSUS_SCALE=1` runs the scale mode alone (scale.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../tests/real/real_support/mod.rs"]
mod real_support;
#[path = "../../tests/support/tempdir_support/mod.rs"]
mod tempdir_support;

mod autoscalers;
mod observe;
mod scale;
mod scale_bed;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use autoscalers::{Contender, Cost};
use real_support::{ControlPlane, TempDir, deployment, eventually, is_ready};
use tokio::time::Instant;

const LOAD: &str = "load";
const PODS: usize = 12;
/// Generous bounds: a contender that misses them has failed the run.
const SCALE_UP_LIMIT: Duration = Duration::from_secs(300);
const SCALE_DOWN_LIMIT: Duration = Duration::from_secs(600);

/// What one contender did in one cluster.
#[derive(Clone, Debug)]
struct ClusterResult {
    first_patch: f64,
    all_running: f64,
    added: BTreeMap<String, i64>,
    scale_down: f64,
}

struct RunResult {
    clusters: Vec<ClusterResult>,
    cost: Cost,
}

fn machine_set(cluster: &str, name: &str, cpu: u32) -> String {
    real_support::openshift_machine_set(cluster, name, 1, 1, 10, cpu)
}

/// Fresh control planes with both groups at one Ready node each: OpenShift clusters as most
/// are, without Cluster API (ten idle Cluster API managers would take CPU from both
/// contenders for nothing).
fn control_planes(n: usize) -> Vec<ControlPlane> {
    let names: Vec<String> = (0..n).map(|i| format!("vs-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let cps = real_support::up(&refs, &["--provision-delay", "2s", "--no-cluster-api"]);
    for cp in &cps {
        cp.apply(&machine_set(&cp.name, "a", 4));
        cp.apply(&machine_set(&cp.name, "b", 8));
    }
    for cp in &cps {
        eventually(Duration::from_secs(120), "two Ready workers", || {
            let ready = cp.items(&["nodes"]).iter().filter(|n| is_ready(n)).count();
            (ready == 2).then_some(())
        });
    }
    cps
}

/// Each cluster's status ConfigMap says `Running`: the contender has synced and made a
/// whole pass (upstream writes `Initializing` at start, before its first loop).
fn wait_started(cps: &[ControlPlane], who: Contender, running: &mut autoscalers::Running) {
    for cp in cps {
        let ns = who.status_namespace();
        eventually(
            Duration::from_secs(300),
            "the autoscaler's first pass",
            || {
                assert!(running.alive(), "{} exited", who.name());
                let status = cp
                    .try_kubectl(&[
                        "get",
                        "configmap",
                        "-n",
                        ns,
                        "cluster-autoscaler-status",
                        "-o",
                        "jsonpath={.data.status}",
                    ])
                    .ok()?;
                status.contains("autoscalerStatus: Running").then_some(())
            },
        );
    }
}

/// Seconds from `since` to `at` (0 when `at` came first: a patch before kubectl returned).
fn secs(since: Instant, at: Option<Instant>) -> f64 {
    at.map_or(f64::NAN, |t| {
        t.saturating_duration_since(since).as_secs_f64()
    })
}

async fn run(who: Contender, n: usize, bin_dir: &std::path::Path) -> RunResult {
    let cps = tokio::task::block_in_place(|| control_planes(n));
    let dir = TempDir::new(&format!("versus-{}", who.name()));
    let kubeconfigs: Vec<PathBuf> = cps.iter().map(ControlPlane::kubeconfig).collect();
    let mut running = autoscalers::start(who, bin_dir, &kubeconfigs, dir.path());
    tokio::task::block_in_place(|| wait_started(&cps, who, &mut running));
    let mut seen = Vec::new();
    for cp in &cps {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        seen.push(observe::watch(
            kube::Client::try_from(config).unwrap(),
            LOAD,
        ));
    }
    let load = deployment(LOAD, PODS as u32, "1500m");
    // Each cluster's clock starts when its Deployment exists (kubectl has returned): ten
    // applies at once on two cores take a while, and that is the bench's time, not the
    // contender's.
    let created: Vec<Instant> = tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let applies: Vec<_> = cps
                .iter()
                .map(|cp| {
                    s.spawn(|| {
                        cp.apply(&load);
                        Instant::now()
                    })
                })
                .collect();
            applies.into_iter().map(|a| a.join().unwrap()).collect()
        })
    });
    let mut results: Vec<ClusterResult> = Vec::new();
    let mut all_running = vec![None; n];
    let deadline = Instant::now() + SCALE_UP_LIMIT;
    while all_running.iter().any(Option::is_none) {
        assert!(
            Instant::now() < deadline,
            "{}: pods not all running in {SCALE_UP_LIMIT:?}",
            who.name()
        );
        assert!(running.alive(), "{} exited", who.name());
        for (i, s) in seen.iter().enumerate() {
            if all_running[i].is_none() && s.lock().unwrap().running() == PODS {
                all_running[i] = Some(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (i, s) in seen.iter().enumerate() {
        let s = s.lock().unwrap();
        results.push(ClusterResult {
            first_patch: secs(created[i], s.first_patch),
            all_running: secs(created[i], all_running[i]),
            added: s.replicas.iter().map(|(g, r)| (g.clone(), r - 1)).collect(),
            scale_down: f64::NAN,
        });
    }
    // The load goes; every group returns to its minimum.
    let gone = Instant::now();
    tokio::task::block_in_place(|| {
        for cp in &cps {
            cp.kubectl(&[
                "scale",
                "deployment",
                LOAD,
                "-n",
                "default",
                "--replicas",
                "0",
            ]);
        }
    });
    let deadline = Instant::now() + SCALE_DOWN_LIMIT;
    loop {
        let mut pending = 0;
        for (i, s) in seen.iter().enumerate() {
            let at_min = s.lock().unwrap().replicas.values().all(|r| *r == 1);
            if at_min && results[i].scale_down.is_nan() {
                results[i].scale_down = gone.elapsed().as_secs_f64();
            }
            pending += usize::from(results[i].scale_down.is_nan());
        }
        if pending == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}: no scale-down in {SCALE_DOWN_LIMIT:?}",
            who.name()
        );
        assert!(running.alive(), "{} exited", who.name());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cost = running.cost();
    running.stop();
    RunResult {
        clusters: results,
        cost,
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn report(who: Contender, n: usize, r: &RunResult) {
    let c = &r.clusters;
    println!(
        "N={n:<2} {:<18} first patch {:>5.1} s, all running {:>5.1} s, scale-down {:>5.1} s, \
         peak RSS {:>6.1} MiB, CPU {:>6.2} s; added {}",
        who.name(),
        mean(c.iter().map(|x| x.first_patch)),
        mean(c.iter().map(|x| x.all_running)),
        mean(c.iter().map(|x| x.scale_down)),
        r.cost.peak_rss_mib,
        r.cost.cpu_secs,
        describe_added(&c[0].added)
    );
}

fn describe_added(added: &BTreeMap<String, i64>) -> String {
    added
        .iter()
        .map(|(g, n)| format!("{g} +{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn bin_dir() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/real-cluster.sh");
    let out = Command::new(script)
        .args(["build", "--upstream"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building the test bed failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

async fn bench() {
    let full = std::env::args().any(|a| a == "--bench");
    if !full {
        println!("(quick run: not started by cargo bench; N = 1)");
    }
    let sizes: Vec<usize> = match std::env::var("VERSUS_CLUSTERS") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) if full => vec![1, 5, 10],
        Err(_) => vec![1],
    };
    let bin = tokio::task::block_in_place(bin_dir);
    let (mut agree, mut scenarios) = (0, 0);
    let mut last = (f64::NAN, f64::NAN);
    for &n in &sizes {
        let upstream = run(Contender::Upstream, n, &bin).await;
        report(Contender::Upstream, n, &upstream);
        let ours = run(Contender::Fleetscaler, n, &bin).await;
        report(Contender::Fleetscaler, n, &ours);
        for (u, f) in upstream.clusters.iter().zip(&ours.clusters) {
            scenarios += 1;
            if u.added == f.added {
                agree += 1;
            } else {
                println!(
                    "N={n}: decisions differ: upstream {}, fleetscaler {}",
                    describe_added(&u.added),
                    describe_added(&f.added)
                );
            }
        }
        last = (
            mean(upstream.clusters.iter().map(|c| c.first_patch))
                / mean(ours.clusters.iter().map(|c| c.first_patch)),
            upstream.cost.peak_rss_mib / ours.cost.peak_rss_mib,
        );
    }
    println!(
        "versus upstream: latency ratio {:.1}, memory ratio {:.1}, decisions agree {agree}/{scenarios}",
        last.0, last.1
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let full = std::env::args().any(|a| a == "--bench");
    runtime.block_on(async {
        if std::env::var_os("VERSUS_SCALE").is_some_and(|v| v == "1") {
            scale::bench(full).await;
        } else {
            bench().await;
            if !full {
                scale::bench(false).await;
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
}
