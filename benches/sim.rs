//! Simulated-fleet figures: start-up time and memory (RSS) of a fleet, stored bytes per pod,
//! latency of listing every pod of one cluster (raw and through kube's typed client), and
//! watch event throughput to a kube client. Prints the figures; `docs/performance.md` records
//! them. Size with SIM_BENCH_CLUSTERS, SIM_BENCH_NODES_PER_GROUP, SIM_BENCH_PODS_PER_NODE
//! (default 20 clusters × 3×333 workers × 30 pods).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use support::{cpu_seconds, env, rss_mib};

use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use fleetscaler::sim::store::{EventType, Key};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use serde_json::json;

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "p50 {:.1} ms, min {:.1} ms, max {:.1} ms ({} runs)",
        ms(samples[samples.len() / 2]),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
        samples.len()
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then a small fleet checks that the bench still works without taking minutes.
    let full = std::env::args().any(|a| a == "--bench");
    if !full {
        println!("(quick run: not started by cargo bench)");
    }
    let clusters = env("SIM_BENCH_CLUSTERS", if full { 20 } else { 1 });
    let per_group = env("SIM_BENCH_NODES_PER_GROUP", if full { 333 } else { 3 });
    let pods_per_node = env("SIM_BENCH_PODS_PER_NODE", if full { 30 } else { 10 });
    let rss_before = rss_mib();
    let start = Instant::now();
    let fleet = Fleet::start(FleetSettings {
        clusters,
        shape: Shape {
            nodes_per_group: per_group,
            pods_per_node,
            ..Shape::default()
        },
        // Waves off by default (one per day): the figures are those of a quiet fleet.
        // SIM_BENCH_WAVE_SECS=600 gives the demo's churn.
        timing: Timing {
            wave_period: Duration::from_secs(env("SIM_BENCH_WAVE_SECS", 86_400) as u64),
            ..Timing::demo()
        },
        history_window: 50_000,
        ..FleetSettings::default()
    })
    .await
    .unwrap();
    let startup = start.elapsed();
    // Let the first controller passes (index build, budget status) settle.
    tokio::time::sleep(Duration::from_secs(if full { 3 } else { 0 })).await;
    let rss_after = rss_mib();
    // CPU the fleet burns while nobody talks to it: controllers ticking, waves moving.
    let (cpu0, t0) = (cpu_seconds(None), Instant::now());
    tokio::time::sleep(Duration::from_secs(if full { 10 } else { 1 })).await;
    let idle_cpu = (cpu_seconds(None) - cpu0) / t0.elapsed().as_secs_f64();
    let (mut nodes, mut pods, mut pod_bytes, mut all_bytes) = (0usize, 0usize, 0usize, 0usize);
    for c in fleet.clusters() {
        let state = c.state();
        nodes += state.store.table(Resource::Nodes).objects.len();
        let table = state.store.table(Resource::Pods);
        pods += table.objects.len();
        pod_bytes += table.objects.values().map(|o| o.bytes.len()).sum::<usize>();
        for r in Resource::ALL {
            all_bytes += state
                .store
                .table(r)
                .objects
                .values()
                .map(|o| o.bytes.len())
                .sum::<usize>();
        }
    }
    println!("simulated fleet: {clusters} clusters, {nodes} nodes, {pods} pods");
    println!("  start-up: {:.1} s", startup.as_secs_f64());
    println!(
        "  CPU while idle (controllers only): {:.0}% of one core",
        idle_cpu * 100.0
    );
    println!(
        "  RSS: {:.0} MiB after start ({:.0} MiB before), {:.0} bytes per pod overall",
        rss_after,
        rss_before,
        (rss_after - rss_before) * 1048576.0 / pods.max(1) as f64
    );
    println!(
        "  stored JSON: {:.0} MiB in all, {:.0} bytes per pod on average",
        all_bytes as f64 / 1048576.0,
        pod_bytes as f64 / pods.max(1) as f64
    );

    let sim1 = fleet.cluster(1).unwrap();
    // For comparison: the same pods held as serde_json::Value trees.
    let pod_count = {
        let before = rss_mib();
        let trees: Vec<serde_json::Value> = sim1
            .state()
            .store
            .range(Resource::Pods, None, None)
            .map(|o| o.value())
            .collect();
        let grown = rss_mib() - before;
        println!(
            "  the same {} pods as serde_json::Value trees would take {:.0} bytes each",
            trees.len(),
            grown * 1048576.0 / trees.len().max(1) as f64
        );
        trees.len()
    };
    let _ = pod_count;
    let mut config = sim1.kube_config().await.unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let cluster_pods = sim1.state().store.table(Resource::Pods).objects.len();
    let mut raw = Vec::new();
    let mut size = 0;
    for _ in 0..7 {
        let t = Instant::now();
        let req = http::Request::builder()
            .uri("/api/v1/pods")
            .body(Vec::new())
            .unwrap();
        let text = client.request_text(req).await.unwrap();
        raw.push(t.elapsed());
        size = text.len();
    }
    println!(
        "  list all {cluster_pods} pods of sim-1, raw HTTPS ({:.1} MiB): {}",
        size as f64 / 1048576.0,
        summary(raw)
    );
    let api: Api<Pod> = Api::all(client.clone());
    let mut typed = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let list = api.list(&ListParams::default()).await.unwrap();
        typed.push(t.elapsed());
        assert!(list.items.len().abs_diff(cluster_pods) < cluster_pods / 10);
    }
    println!(
        "  list all pods of sim-1 through kube's typed client: {}",
        summary(typed)
    );
    let lean: Api<fleetscaler::cluster::cache::lean::LeanPod> = Api::all(client.clone());
    let mut lean_times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let list = lean.list(&ListParams::default()).await.unwrap();
        lean_times.push(t.elapsed());
        assert!(list.items.len().abs_diff(cluster_pods) < cluster_pods / 10);
    }
    println!(
        "  the same, decoded as the hub's cache does (only the fields it projects): {}",
        summary(lean_times)
    );
    let on_node = api
        .list(&ListParams::default().fields(&format!(
                "spec.nodeName={}",
                sim1.list(Resource::Nodes)[5]["metadata"]["name"]
                    .as_str()
                    .unwrap()
            )))
        .await
        .unwrap();
    let mut by_node = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let node = on_node
            .items
            .first()
            .and_then(|p| p.spec.as_ref()?.node_name.clone())
            .unwrap_or_default();
        api.list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .unwrap();
        by_node.push(t.elapsed());
    }
    println!(
        "  list the pods of one node (field selector spec.nodeName): {}",
        summary(by_node)
    );

    // Watch throughput: writes straight into the store, events through HTTPS to kube.
    let events = env("SIM_BENCH_WATCH_EVENTS", if full { 40_000 } else { 1_000 });
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(290), &rv)
        .await
        .unwrap()
        .boxed();
    let writer = sim1.clone();
    let t = Instant::now();
    let write = tokio::task::spawn_blocking(move || {
        for i in 0..events {
            let mut state = writer.state();
            let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("bench-{}", i % 500), "namespace": "default"}, "data": {"i": i.to_string()}});
            state.store.put(
                Resource::ConfigMaps,
                Key::new("default", &format!("bench-{}", i % 500)),
                &mut cm,
                EventType::Modified,
            );
        }
    });
    let mut seen = 0usize;
    while seen < events {
        match tokio::time::timeout(Duration::from_secs(60), stream.next()).await {
            Ok(Some(Ok(WatchEvent::Modified(_) | WatchEvent::Added(_)))) => seen += 1,
            Ok(Some(Ok(_))) => {}
            other => panic!("watch ended after {seen} events: {other:?}"),
        }
    }
    write.await.unwrap();
    let elapsed = t.elapsed();
    println!(
        "  watch: {events} events to one kube watcher in {:.2} s = {:.0} events/s",
        elapsed.as_secs_f64(),
        events as f64 / elapsed.as_secs_f64()
    );
    fleet.shutdown().await;
}
