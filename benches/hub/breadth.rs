//! `HUB_BENCH_SHAPE=breadth`: a wide fleet of small clusters under one hub, as a management
//! hub of many edge or team clusters holds them. Each simulated cluster has 3 control-plane
//! nodes and 2 to 10 workers (drawn per cluster), about 40 pods per worker, odd clusters on
//! OpenShift's Machine API and even ones on Cluster API. The figures: time until every
//! cluster is listed and planned, the hub's memory per cluster, its CPU while the fleet is
//! idle and while pending pods arrive at a fixed rate across the fleet, decision latency,
//! and requests per second sent to the API servers.
//!
//! Size with HUB_BENCH_CLUSTERS (default 1,000; 6 in the quick run), HUB_BENCH_PODS_PER_NODE
//! (default 40), HUB_BENCH_SETTLE_SECS (the wait before the idle window, default 660),
//! HUB_BENCH_IDLE_SECS (the idle window, default 300), HUB_BENCH_RATE (pending pods a second
//! across the fleet, default 5) and HUB_BENCH_LOAD_SECS (default 60).
//!
//! The defaults measure the idle fleet a hub holds for days, but for the ends of its long
//! watches: by 11 minutes the first scale-ups' cooldowns (10 minutes) have ended and every
//! watch has resumed once (the first after a list lasts 1 to 2 minutes), which spreads a
//! cluster's bookmarks over the minute; a 5-minute window holds one periodic full pass of
//! every cluster. The watches after those last 30 to 60 minutes: a window that holds their
//! ends too needs HUB_BENCH_SETTLE_SECS=3900.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetscaler::cluster::http::requests_sent;
use tokio::time::Instant;

use crate::hub_support::{self, Seen, describe, latencies, start_sim_with};
use crate::support::{cpu_seconds, env, rss_mib};

pub async fn bench(full: bool) {
    let clusters = env("HUB_BENCH_CLUSTERS", if full { 1000 } else { 6 });
    let pods_per_node = env("HUB_BENCH_PODS_PER_NODE", 40).to_string();
    let sim = start_sim_with(clusters, &hub_support::breadth_args(&pods_per_node));
    let before = rss_mib();
    let requests_before = requests_sent();
    let started = Instant::now();
    let cancel = tokio_util::sync::CancellationToken::new();
    let config = crate::fleet_config(&sim.kubeconfig, clusters);
    let hub = fleetscaler::hub::start(config, None, cancel.clone())
        .await
        .unwrap();
    let synced = synced(&hub.view, started).await;
    let sync_requests = requests_sent() - requests_before;
    // Settle: the scale-ups the first passes made (the generated workloads start a little
    // above the workers) take 30 s to become Ready nodes running their pods; until then
    // the fleet is not idle.
    let settle = env("HUB_BENCH_SETTLE_SECS", if full { 660 } else { 3 });
    tokio::time::sleep(Duration::from_secs(settle as u64)).await;
    let reports = hub.view.reports();
    let pods: usize = reports.iter().map(|r| r.cache.pods).sum();
    let nodes: usize = reports.iter().map(|r| r.cache.nodes).sum();
    let per_cluster_kib = (rss_mib() - before) * 1024.0 / clusters as f64;
    println!("hub against {clusters} small simulated clusters: {nodes} nodes, {pods} pods cached");
    println!(
        "  every cluster listed and planned once: {synced:.1} s, {sync_requests} requests sent"
    );
    println!(
        "  hub memory (RSS growth): {per_cluster_kib:.0} KiB per cluster, {:.0} MiB in all",
        per_cluster_kib * clusters as f64 / 1024.0
    );
    let window = env("HUB_BENCH_IDLE_SECS", if full { 300 } else { 3 });
    let idle = idle(&hub.view, Duration::from_secs(window as u64)).await;
    let (p50, p99) = under_load(&sim.kubeconfig, clusters, full).await;
    println!(
        "fleet breadth: {clusters} clusters, sync {synced:.1} s, memory {per_cluster_kib:.0} KiB per cluster, idle CPU {idle:.1} %, decision p50 {p50:.0} ms, p99 {p99:.0} ms"
    );
    cancel.cancel();
    hub.wait().await;
    drop(sim);
}

/// Seconds until every cluster's first pass.
async fn synced(view: &fleetscaler::hub::FleetView, started: Instant) -> f64 {
    loop {
        let reports = view.reports();
        if reports.iter().all(|r| r.last_pass.is_some()) {
            return started.elapsed().as_secs_f64();
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "clusters never synced"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Passes run and passes skipped as idle, over the fleet.
fn passes(view: &fleetscaler::hub::FleetView) -> (u64, u64) {
    view.reports().iter().fold((0, 0), |(run, skipped), r| {
        let c = &r.counters;
        let ran = c.durations.get("main").map_or(0, |h| h.count);
        (run + ran, skipped + c.idle_skips)
    })
}

/// The hub's CPU, in % of one core, over `window` with nothing happening in the fleet.
async fn idle(view: &fleetscaler::hub::FleetView, window: Duration) -> f64 {
    let (cpu, requests, passes_before) = (cpu_seconds(None), requests_sent(), passes(view));
    let causes_before = hub_support::causes(view);
    let began = jiff::Timestamp::now();
    tokio::time::sleep(window).await;
    let secs = window.as_secs_f64();
    let used = 100.0 * (cpu_seconds(None) - cpu) / secs;
    let after = passes(view);
    let why = hub_support::causes_since(view, &causes_before);
    println!(
        "  idle for {secs:.0} s: CPU {used:.1} % of one core, {:.1} requests/s, {} passes run ({}), {} skipped as idle",
        (requests_sent() - requests) as f64 / secs,
        after.0 - passes_before.0,
        why,
        after.1 - passes_before.1
    );
    println!(
        "  clusters not settled, by what their last pass waits on: {}",
        waiting(view)
    );
    println!(
        "  the last pass in the window of each cluster that ran one, by cause: {}",
        last_causes(view, began)
    );
    used
}

/// The causes of the clusters' last passes since `since`, most common first.
fn last_causes(view: &fleetscaler::hub::FleetView, since: jiff::Timestamp) -> String {
    tally(
        view.reports()
            .into_iter()
            .filter_map(|r| r.last_pass.filter(|p| p.at >= since).map(|p| p.cause)),
    )
}

/// What the clusters' last passes wait on (counts in the reasons made `N`), most common
/// first.
fn waiting(view: &fleetscaler::hub::FleetView) -> String {
    tally(view.reports().into_iter().filter_map(|r| {
        let why = r.last_pass?.waits_on?;
        Some(why.chars().filter(|c| !c.is_ascii_digit()).collect())
    }))
}

/// `N ×what` for each distinct `what`, most common first; `none` when there is nothing.
fn tally(items: impl Iterator<Item = String>) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for item in items {
        *by.entry(item).or_default() += 1;
    }
    let mut by: Vec<(String, usize)> = by.into_iter().collect();
    by.sort_by_key(|b| std::cmp::Reverse(b.1));
    let text: Vec<String> = by.iter().map(|(w, n)| format!("{n} ×{w}")).collect();
    if text.is_empty() {
        "none".into()
    } else {
        text.join(", ")
    }
}

/// Pending pods at HUB_BENCH_RATE a second, each in the next of a sample of the fleet's
/// OpenShift clusters (spread over the whole fleet), for HUB_BENCH_LOAD_SECS: CPU,
/// requests and the latency from a pod turning Unschedulable to its cluster's group raised.
async fn under_load(kubeconfig: &std::path::Path, clusters: usize, full: bool) -> (f64, f64) {
    let rate = env("HUB_BENCH_RATE", 5).max(1);
    let secs = env("HUB_BENCH_LOAD_SECS", if full { 60 } else { 6 });
    let sample = hub_support::sample(clusters);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (clients, watches) = hub_support::watch_some(kubeconfig, &sample, &seen).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu, requests, started) = (cpu_seconds(None), requests_sent(), Instant::now());
    let total = rate * secs;
    for n in 0..total {
        let client = clients[n % clients.len()].clone();
        let name = format!("breadth-{n}");
        tokio::spawn(async move {
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(client, "default");
            if let Err(e) = pods
                .create(&Default::default(), &hub_support::big_pod(&name))
                .await
            {
                eprintln!("creating {name}: {e}");
            }
        });
        tokio::time::sleep(Duration::from_secs(1) / rate as u32).await;
    }
    // The last pods' decisions.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let wall = started.elapsed().as_secs_f64();
    println!(
        "  load: {rate} pending pods a second across {} clusters for {secs} s: hub CPU {:.0} % of one core, {:.1} requests/s",
        sample.len(),
        100.0 * (cpu_seconds(None) - cpu) / wall,
        (requests_sent() - requests) as f64 / wall
    );
    let mut ms = latencies(&seen.lock().unwrap());
    println!(
        "  {}",
        describe(
            "decision latency, pod Unschedulable to node group patched",
            ms.clone()
        )
    );
    if ms.len() < total {
        println!(
            "  ({} pods got no scale-up within the bench)",
            total - ms.len()
        );
    }
    for w in &watches {
        w.abort();
    }
    ms.sort_by(f64::total_cmp);
    (
        hub_support::percentile(&ms, 0.5),
        hub_support::percentile(&ms, 0.99),
    )
}
