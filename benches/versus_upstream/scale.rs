//! The versus-upstream bench at upstream's scale (`VERSUS_SCALE=1 cargo bench --bench
//! versus-upstream`): one real control plane (`scripts/real-cluster.sh up --large`) of
//! 1,000 kwok nodes in four OpenShift MachineSets (4-CPU `general-us-east-1a`, `-1b`,
//! `-1c`, 300 nodes each, and 8-CPU `batch-us-east-1a`, 100 nodes labelled
//! `workload=batch`), each at its minimum, every node full with 30 running pods (its
//! `maxPods`: 30,000 pods, bound as made, of no controller). Then a burst of 3,000 pending
//! pods in three Deployments: `burst-web` (1,500 of 100m), `burst-spread` (900 of 100m,
//! spread over the zones with `maxSkew: 1`), `burst-batch` (600 of 200m, `nodeSelector:
//! workload=batch`); they need about 100 new nodes. Once they all run, the load goes.
//!
//! Each contender runs alone: upstream first, then fleetscaler on the same control plane
//! once upstream has scaled back down and the bed is reset to how it started (the burst's
//! Deployments deleted, exactly the bed's nodes left, autoscaler taints removed): filling
//! 1,000 nodes with 30,000 pods takes this machine most of half an hour. Both run with
//! `--balance-similar-node-groups` (the three general groups
//! are alike but for their zone, as OpenShift's ClusterAutoscaler is usually set), both
//! through a ServiceAccount bound to `cluster-admin`, so the apiserver's audit log records
//! every request each sends. Per contender: seconds from the burst (its Deployments
//! exist) to the first MachineSet patched, to every group at its final size (the last
//! change of any group's replicas before the burst all ran), to all burst pods running,
//! and from the load's removal until every group is back at its minimum; the nodes added
//! per group; peak RSS and CPU seconds; requests by verb.
//!
//! The last line is `versus upstream at scale: latency ratio X.X, memory ratio Y.Y,
//! decisions agree K/M`: latency is seconds to the first patch, as in the N-cluster line,
//! upstream / fleetscaler; memory is peak RSS, upstream / fleetscaler; M is the number of
//! MachineSets (4), K those to which both added the same number of nodes, the three
//! zones' general groups compared as a sorted list (which zone gets an odd node is a tie:
//! see `agreeing`).
//!
//! VERSUS_SCALE_ONLY=fleetscaler runs the hub alone on the bed (half the time, for trying a
//! change of the hub's; no ratio line). VERSUS_SCALE_NODES=N sizes the bed to N nodes (a tenth of them batch) and the burst to
//! 3 pods a node, for a machine that cannot hold 1,000. Without `--bench` (as `cargo test
//! --all-targets` runs it), a bed of 8 nodes and a burst of 60 pods, and no scale-down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::task::block_in_place;
use tokio::time::Instant;

use crate::autoscalers::{self, Cluster, Contender, Cost};
use crate::observe;
use crate::real_support::{self, ControlPlane, TempDir, eventually};
use crate::scale_bed::{self, BURST_APP, BURST_PARTS, Requests, Shape};

/// Generous bounds: a contender that misses one has its figure printed as NaN.
const SCALE_UP_LIMIT: Duration = Duration::from_secs(1200);
const SCALE_DOWN_LIMIT: Duration = Duration::from_secs(1800);

/// What one contender did.
struct Outcome {
    first_patch: f64,
    final_size: f64,
    all_running: f64,
    scale_down: f64,
    added: BTreeMap<String, i64>,
    cost: Cost,
    requests: Requests,
}

fn shape(full: bool) -> Shape {
    let nodes: u32 = match std::env::var("VERSUS_SCALE_NODES") {
        Ok(n) => n
            .trim()
            .parse()
            .expect("VERSUS_SCALE_NODES: a number of nodes"),
        Err(_) if full => 1000,
        Err(_) => {
            return Shape {
                general_per_zone: 2,
                batch_nodes: 2,
                web: 30,
                spread: 18,
                batch: 12,
            };
        }
    };
    let batch_nodes = (nodes / 10).max(1);
    Shape {
        general_per_zone: ((nodes - batch_nodes) / 3).max(1),
        batch_nodes,
        web: nodes * 3 / 2,
        spread: nodes * 9 / 10,
        batch: nodes * 6 / 10,
    }
}

/// The ServiceAccount a contender reaches the cluster as (in kube-system).
fn account(who: Contender) -> &'static str {
    match who {
        Contender::Upstream => "cluster-autoscaler",
        Contender::Fleetscaler => "fleetscaler",
    }
}

/// A fresh control plane holding the shape's nodes and background pods.
async fn bed(shape: &Shape) -> (Vec<ControlPlane>, kube::Client) {
    let cps = block_in_place(|| {
        real_support::up(
            &["vs-scale"],
            &["--provision-delay", "2s", "--no-cluster-api", "--large"],
        )
    });
    let cp = &cps[0];
    let nodes = block_in_place(|| scale_bed::nodes(cp, shape));
    let client = scale_bed::client(cp).await;
    let pods = scale_bed::background(cp, &client).await;
    println!(
        "  (bed: {} nodes Ready in {nodes:.0} s, {} background pods running in {pods:.0} s more)",
        shape.nodes(),
        shape.background_pods()
    );
    (cps, client)
}

/// `scale_down`: whether to remove the load and wait for the groups' minimum (the quick
/// run does not: the unneeded time and the delay after a scale-up alone would double it).
async fn run(
    who: Contender,
    shape: &Shape,
    bin: &Path,
    scale_down: bool,
    (cps, client): &(Vec<ControlPlane>, kube::Client),
) -> Outcome {
    let client = client.clone();
    let cp = &cps[0];
    let dir = TempDir::new(&format!("versus-scale-{}", who.name()));
    let kubeconfig = dir.path().join("contender.kubeconfig");
    block_in_place(|| {
        real_support::service_account_kubeconfig(
            cp,
            "kube-system",
            account(who),
            "cluster-admin",
            &kubeconfig,
        )
    });
    let clusters = [Cluster {
        kubeconfig,
        context: cp.name.clone(),
    }];
    let mut running = autoscalers::start_with(who, bin, &clusters, dir.path(), true);
    block_in_place(|| crate::wait_started(cps, who, &mut running));
    let seen = observe::watch(client, BURST_APP);
    let groups = scale_bed::groups(shape).len();
    block_in_place(|| {
        eventually(Duration::from_secs(30), "the MachineSets' watch", || {
            (seen.lock().unwrap().replicas.len() == groups).then_some(())
        })
    });
    let baseline = seen.lock().unwrap().replicas.clone();
    block_in_place(|| cp.apply(&scale_bed::burst(shape)));
    let created = Instant::now();
    let up = scale_up(who, shape, &seen, &mut running, created).await;
    let added: BTreeMap<String, i64> = up
        .sizes
        .iter()
        .map(|(g, r)| (g.clone(), r - baseline.get(g).copied().unwrap_or(0)))
        .collect();
    let scale_down = if scale_down {
        let gone = Instant::now();
        block_in_place(|| remove_load(cp));
        wait_scale_down(who, &seen, &baseline, &mut running, gone).await
    } else {
        f64::NAN
    };
    let cost = running.cost();
    running.stop();
    keep_log(who, dir.path());
    Outcome {
        first_patch: crate::secs(created, seen.lock().unwrap().first_patch),
        final_size: crate::secs(created, up.last_change),
        all_running: crate::secs(created, up.all_running),
        scale_down,
        added,
        cost,
        requests: scale_bed::requests(
            cp,
            &format!("system:serviceaccount:kube-system:{}", account(who)),
        ),
    }
}

struct ScaleUp {
    sizes: BTreeMap<String, i64>,
    last_change: Option<Instant>,
    all_running: Option<Instant>,
}

/// Until every burst pod runs: each change of the groups' sizes, as the watch sees it.
async fn scale_up(
    who: Contender,
    shape: &Shape,
    seen: &observe::Shared,
    running: &mut autoscalers::Running,
    created: Instant,
) -> ScaleUp {
    let want = shape.burst_pods() as usize;
    let mut up = ScaleUp {
        sizes: seen.lock().unwrap().replicas.clone(),
        last_change: None,
        all_running: None,
    };
    while up.all_running.is_none() {
        if created.elapsed() > SCALE_UP_LIMIT || !running.alive() {
            println!(
                "  {}: burst not all running in {SCALE_UP_LIMIT:?}",
                who.name()
            );
            break;
        }
        {
            let s = seen.lock().unwrap();
            if s.replicas != up.sizes {
                up.sizes = s.replicas.clone();
                up.last_change = Some(Instant::now());
            }
            if s.running() == want {
                up.all_running = Some(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    up
}

fn remove_load(cp: &ControlPlane) {
    for part in BURST_PARTS {
        cp.kubectl(&[
            "scale",
            "deployment",
            &format!("{BURST_APP}-{part}"),
            "-n",
            "default",
            "--replicas",
            "0",
        ]);
    }
}

/// Seconds from `gone` until every group is back at its size before the burst.
async fn wait_scale_down(
    who: Contender,
    seen: &observe::Shared,
    baseline: &BTreeMap<String, i64>,
    running: &mut autoscalers::Running,
    gone: Instant,
) -> f64 {
    loop {
        if seen.lock().unwrap().replicas == *baseline {
            return gone.elapsed().as_secs_f64();
        }
        if gone.elapsed() > SCALE_DOWN_LIMIT || !running.alive() {
            println!("  {}: no scale-down in {SCALE_DOWN_LIMIT:?}", who.name());
            return f64::NAN;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The contender's log, kept past its temporary directory (for the decisions to explain).
fn keep_log(who: Contender, dir: &Path) {
    let name = match who {
        Contender::Upstream => "ca-0.log",
        Contender::Fleetscaler => "hub.log",
    };
    let kept = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("versus-scale-{name}"));
    if std::fs::copy(dir.join(name), &kept).is_ok() {
        println!("  ({} log: {})", who.name(), kept.display());
    }
}

fn report(who: Contender, o: &Outcome) {
    println!(
        "{:<18} first patch {:>6.1} s, final size {:>6.1} s, all running {:>6.1} s, \
         scale-down {:>6.1} s, peak RSS {:>7.1} MiB, CPU {:>7.2} s",
        who.name(),
        o.first_patch,
        o.final_size,
        o.all_running,
        o.scale_down,
        o.cost.peak_rss_mib,
        o.cost.cpu_secs,
    );
    println!("{:<18} added {}", "", crate::describe_added(&o.added));
    println!("{:<18} requests {}", "", o.requests.describe());
}

/// How many groups both grew alike. The general groups are alike but for their zone and
/// the burst is even over the zones, so which zone gets an odd node is a tie that upstream
/// breaks at random (its balancing) and the hub by a seeded pick: their growths are
/// compared as a sorted list, the batch group by itself.
fn agreeing(
    groups: &[scale_bed::Group],
    upstream: &BTreeMap<String, i64>,
    ours: &BTreeMap<String, i64>,
) -> usize {
    let added = |of: &BTreeMap<String, i64>, batch: bool| -> Vec<i64> {
        let mut v: Vec<i64> = groups
            .iter()
            .filter(|g| g.batch == batch)
            .map(|g| of.get(&g.name).copied().unwrap_or(0))
            .collect();
        v.sort_unstable();
        v
    };
    let mut agree = 0;
    for batch in [false, true] {
        let (u, f) = (added(upstream, batch), added(ours, batch));
        agree += u.iter().zip(&f).filter(|(a, b)| a == b).count();
        if u != f {
            let kind = if batch { "batch" } else { "general (sorted)" };
            println!("decisions differ in {kind} groups: upstream {u:?}, fleetscaler {f:?}");
        }
    }
    agree
}

pub async fn bench(full: bool) {
    let shape = shape(full);
    if !full {
        println!("(quick run of the scale shape: not started by cargo bench; no scale-down)");
    }
    println!(
        "at scale: {} nodes in {} MachineSets, {} running pods; a burst of {} pods \
         (web {}, spread {}, batch {})",
        shape.nodes(),
        scale_bed::groups(&shape).len(),
        shape.background_pods(),
        shape.burst_pods(),
        shape.web,
        shape.spread,
        shape.batch
    );
    let bin = block_in_place(crate::bin_dir);
    let mut bed = bed(&shape).await;
    if std::env::var_os("VERSUS_SCALE_ONLY").is_some_and(|v| v == "fleetscaler") {
        let ours = run(Contender::Fleetscaler, &shape, &bin, full, &bed).await;
        report(Contender::Fleetscaler, &ours);
        println!("(upstream not run: VERSUS_SCALE_ONLY=fleetscaler; no ratios)");
        return;
    }
    let upstream = run(Contender::Upstream, &shape, &bin, full, &bed).await;
    report(Contender::Upstream, &upstream);
    // The full run's bed took most of half an hour to fill, and once upstream has scaled
    // down it holds exactly what it started with. The quick run's groups stay grown (and
    // which Machines a smaller MachineSet would drop is not ours to choose): a fresh one.
    if full {
        block_in_place(|| scale_bed::reset(&bed.0[0], &shape));
    } else {
        drop(bed);
        bed = self::bed(&shape).await;
    }
    let ours = run(Contender::Fleetscaler, &shape, &bin, full, &bed).await;
    report(Contender::Fleetscaler, &ours);
    let groups = scale_bed::groups(&shape);
    let agree = agreeing(&groups, &upstream.added, &ours.added);
    println!(
        "final-size ratio {:.1}, scale-down ratio {:.1}, CPU ratio {:.1}, requests ratio {:.1}",
        upstream.final_size / ours.final_size,
        upstream.scale_down / ours.scale_down,
        upstream.cost.cpu_secs / ours.cost.cpu_secs,
        upstream.requests.total() as f64 / ours.requests.total().max(1) as f64
    );
    println!(
        "versus upstream at scale: latency ratio {:.1}, memory ratio {:.1}, decisions agree {agree}/{}",
        upstream.first_patch / ours.first_patch,
        upstream.cost.peak_rss_mib / ours.cost.peak_rss_mib,
        groups.len()
    );
}
