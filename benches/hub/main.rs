//! Hub figures against a simulated fleet running in a separate process (so that the hub's
//! memory is measured alone): time to sync every cluster, hub memory per pod and per node,
//! decision latency from a pod turning Unschedulable to its node group being patched (p50,
//! p99), and per-cluster pass times. `docs/performance.md` records them.
//!
//! Size with HUB_BENCH_CLUSTERS, HUB_BENCH_NODES_PER_GROUP, HUB_BENCH_PODS_PER_NODE,
//! HUB_BENCH_ROUNDS and HUB_BENCH_RATE (default 10 clusters × 3×333 workers × 30 pods, 20
//! rounds of one pending pod per cluster, 10 above 10 clusters, 5 pending pods a second
//! across the fleet). Without `--bench` (as `cargo test --all-targets` runs it) a
//! small fleet checks that the bench still works. HUB_BENCH_TRACES=1 turns traces on (every
//! pass, to an OTLP/HTTP sink in this process), to compare pass times with them off.
//!
//! A full run pins the hub to core 0 and the simulated fleet to the others (`HUB_BENCH_PIN=0`
//! shares the cores as before), so that the hub's own limit is what is measured.
//!
//! HUB_BENCH_SHAPE=breadth measures a wide fleet of small clusters instead (`breadth.rs`);
//! the quick run (`cargo test`) runs a small one of each shape.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../hub_support/mod.rs"]
mod hub_support;
#[path = "../support/mod.rs"]
mod support;

mod breadth;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetscaler::config::hub::HubConfig;
use fleetscaler::config::{ClusterConfig, FleetConfig};
use fleetscaler::engine::settings::SettingsPatch;
use hub_support::{Seen, create_round, describe, latencies, start_sim, watch_clusters};
use support::{cpu_seconds, env, peak_rss_mib, rss_mib};
use tokio::time::Instant;

fn fleet_config(kubeconfig: &Path, clusters: usize) -> FleetConfig {
    FleetConfig {
        hub: HubConfig {
            kubeconfigs: vec![kubeconfig.to_path_buf()],
            ..HubConfig::default()
        },
        fleet: Default::default(),
        defaults: SettingsPatch::default(),
        clusters: (1..=clusters)
            .map(|i| ClusterConfig::named(&format!("sim-{i}")))
            .collect(),
        ..FleetConfig::default()
    }
}

/// As the binary: the hub's memory and speed are measured with its allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let full = hub_support::full_run();
    hub_support::pin(full);
    match std::env::var("HUB_BENCH_SHAPE").as_deref() {
        Ok("breadth") => hub_support::run(breadth::bench(full)),
        Ok("depth") => hub_support::run(bench(full)),
        Err(_) if full => hub_support::run(bench(full)),
        // The quick run checks that both shapes still work.
        Err(_) => hub_support::run(async {
            bench(full).await;
            breadth::bench(full).await;
        }),
        Ok(other) => panic!("HUB_BENCH_SHAPE is depth (the default) or breadth, not {other:?}"),
    }
}

async fn bench(full: bool) {
    let clusters = env("HUB_BENCH_CLUSTERS", if full { 10 } else { 2 });
    let per_group = env("HUB_BENCH_NODES_PER_GROUP", if full { 333 } else { 3 });
    let pods_per_node = env("HUB_BENCH_PODS_PER_NODE", if full { 30 } else { 10 });
    let rounds = env(
        "HUB_BENCH_ROUNDS",
        if !full {
            2
        } else if clusters > 10 {
            10
        } else {
            20
        },
    );
    let sim = start_sim(clusters, per_group, pods_per_node);
    let (telemetry, received) = telemetry().await;

    let before = rss_mib();
    let sim_pid = sim.child.id();
    let cpu_before = (cpu_seconds(None), cpu_seconds(Some(sim_pid)));
    let started = Instant::now();
    let cancel = tokio_util::sync::CancellationToken::new();
    let hub = fleetscaler::hub::start(
        fleet_config(&sim.kubeconfig, clusters),
        None,
        cancel.clone(),
    )
    .await
    .unwrap();
    loop {
        let reports = hub.view.reports();
        if reports.iter().all(|r| r.last_pass.is_some()) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "clusters never synced"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let synced = started.elapsed();
    let peak_at_sync = peak_rss_mib();
    let sync_cpu = (
        cpu_seconds(None) - cpu_before.0,
        cpu_seconds(Some(sim_pid)) - cpu_before.1,
    );
    // A few passes, so the engine's and the status writer's memory is counted too.
    tokio::time::sleep(Duration::from_secs(if full { 25 } else { 3 })).await;
    let after = rss_mib();
    let reports = hub.view.reports();
    let pods: usize = reports.iter().map(|r| r.cache.pods).sum();
    let nodes: usize = reports.iter().map(|r| r.cache.nodes).sum();
    let hub_mib = after - before;
    let budget_mib = (pods as f64 * 1.5 + nodes as f64 * 8.0) / 1024.0;
    println!("hub against {clusters} simulated clusters: {nodes} nodes, {pods} pods cached");
    println!(
        "  every cluster listed and planned once: {:.1} s (peak RSS by then {:.0} MiB, {:.0} MiB above the start)",
        synced.as_secs_f64(),
        peak_at_sync,
        peak_at_sync - before
    );
    println!(
        "  CPU while syncing: the hub {:.1} s, the simulated fleet (serving the lists) {:.1} s",
        sync_cpu.0, sync_cpu.1
    );
    println!(
        "  hub memory (RSS growth): {hub_mib:.0} MiB = {:.2} KiB per pod overall; budget 1.5 KiB/pod + 8 KiB/node = {budget_mib:.0} MiB ({:.0} % used)",
        hub_mib * 1024.0 / pods.max(1) as f64,
        100.0 * hub_mib / budget_mib
    );

    // Decision latency: one pending pod per cluster and round.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (clients, watches) = watch_clusters(&sim.kubeconfig, clusters, &seen).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut pass_ms: BTreeMap<(String, String), (f64, f64, f64)> = BTreeMap::new();
    let rounds_started = (
        Instant::now(),
        cpu_seconds(None),
        cpu_seconds(Some(sim_pid)),
    );
    let causes_before = hub_support::causes(&hub.view);
    let round_gap = hub_support::round_gap(full, clusters);
    for round in 0..rounds {
        create_round(&clients, round, round_gap).await;
        for r in hub.view.reports() {
            if let Some(p) = r.last_pass {
                pass_ms.insert(
                    (r.name.to_string(), p.at.to_string()),
                    (p.took_ms, p.engine_ms, p.queued_ms),
                );
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let wall = rounds_started.0.elapsed().as_secs_f64();
    println!(
        "  CPU during the rounds ({wall:.0} s): the hub and the bench's watches {:.0} %, the simulated fleet {:.0} % (of one core)",
        100.0 * (cpu_seconds(None) - rounds_started.1) / wall,
        100.0 * (cpu_seconds(Some(sim_pid)) - rounds_started.2) / wall
    );
    println!(
        "  passes run during the rounds, by cause: {}",
        hub_support::causes_since(&hub.view, &causes_before)
    );
    let latencies = latencies(&seen.lock().unwrap());
    println!(
        "  {}",
        describe(
            "decision latency, pod Unschedulable to node group patched",
            latencies.clone()
        )
    );
    let missed = rounds * clusters - latencies.len();
    if missed > 0 {
        println!("  ({missed} pods got no scale-up within the bench)");
    }
    let whole: Vec<f64> = pass_ms.values().map(|p| p.0).collect();
    let engine: Vec<f64> = pass_ms.values().map(|p| p.1).collect();
    let queued: Vec<f64> = pass_ms.values().map(|p| p.2).collect();
    println!(
        "  {}",
        describe("per-cluster pass (engine, writes, status)", whole)
    );
    println!("  {}", describe("per-cluster pass, engine alone", engine));
    println!(
        "  {}",
        describe("per-cluster pass, waiting for a turn on the pool", queued)
    );
    cancel.cancel();
    hub.wait().await;
    telemetry.shutdown(Duration::from_secs(5)).await;
    if let Some(received) = received {
        println!(
            "  traces on: {:.0} KiB of OTLP/HTTP received",
            received.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0
        );
    }
    for w in &watches {
        w.abort();
    }
    drop(sim);
}

/// HUB_BENCH_TRACES=1: traces on (every pass), sent over OTLP/HTTP to a sink in this
/// process that counts the bytes; else logs only, as the hub runs by default.
async fn telemetry() -> (
    fleetscaler::telemetry::Telemetry,
    Option<Arc<std::sync::atomic::AtomicUsize>>,
) {
    use fleetscaler::config::tracing::{TracingConfig, TracingState, resolve};
    if env("HUB_BENCH_TRACES", 0) == 0 {
        return (
            fleetscaler::telemetry::init("warn", None, "bench").unwrap(),
            None,
        );
    }
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let config = TracingConfig {
        endpoint: Some(otlp_sink(received.clone()).await),
        ..TracingConfig::default()
    };
    let TracingState::On(on) = resolve(&config, &|_| None).unwrap() else {
        panic!("traces with an endpoint are on");
    };
    let telemetry = fleetscaler::telemetry::init("warn", Some(&on.export()), "bench").unwrap();
    (telemetry, Some(received))
}

async fn otlp_sink(received: Arc<std::sync::atomic::AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let received = received.clone();
            let service =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let received = received.clone();
                    async move {
                        let body = http_body_util::BodyExt::collect(req.into_body()).await;
                        let len = body.map(|b| b.to_bytes().len()).unwrap_or(0);
                        received.fetch_add(len, std::sync::atomic::Ordering::Relaxed);
                        let empty = http_body_util::Full::new(bytes::Bytes::new());
                        Ok::<_, std::convert::Infallible>(http::Response::new(empty))
                    }
                });
            let io = hyper_util::rt::TokioIo::new(stream);
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
        }
    });
    endpoint
}
