#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The hub's serving under load nobody authorized (docs/hub.md, "Serving", "HTTP API"):
//! hundreds of connections that never finish their TLS handshake or their request's head
//! keep neither the kubelet's probes nor a valid client out (they take turns being closed,
//! and each is closed after a few seconds anyway); a burst of requests for the plan of a
//! cluster with 20,000 pending pods shares one bounded answer, and the hub's memory stays
//! within the bound docs/hub.md states.

use crate::e2e_support;
use crate::hub_serving::{Running, free_port, served};
use crate::serving_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e_support::*;
use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::ClusterHandle;
use fleetscaler::sim::settings::Flavor;
use serde_json::json;
use serving_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// `n` connections to `addr` that send `head` (nothing, or a request head never finished)
/// and then nothing, each connecting again a moment after the hub closes it, until `stop`
/// fires; `closed` counts the closes.
fn squat(
    addr: SocketAddr,
    n: usize,
    head: &'static [u8],
    closed: &Arc<AtomicUsize>,
    stop: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let (closed, stop) = (closed.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = hold(addr, head) => {}
                    }
                    closed.fetch_add(1, Ordering::Relaxed);
                    // Back a moment later, as a client that retries (not in a busy loop).
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        })
        .collect()
}

/// Connects, sends `head` and reads until the hub closes the connection.
async fn hold(addr: SocketAddr, head: &[u8]) -> std::io::Result<()> {
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.write_all(head).await?;
    let mut sink = [0u8; 512];
    while tcp.read(&mut sink).await? > 0 {}
    Ok(())
}

/// How long the hub takes to close a connection that sends `head` and then nothing.
async fn closed_after(addr: SocketAddr, head: &[u8]) -> Duration {
    let started = Instant::now();
    let held = tokio::time::timeout(Duration::from_secs(8), hold(addr, head)).await;
    assert!(
        held.is_ok(),
        "{addr}: a silent connection still open after 8 s"
    );
    started.elapsed()
}

const UNFINISHED_HEAD: &[u8] = b"GET /livez HTTP/1.1\r\nHost: hub\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_keep_neither_the_probes_nor_a_client_out() {
    let s = served(|_| {}).await;
    let main = s.endpoints.main;
    let probes = s.endpoints.probes.expect("a probe port");
    assert_eq!(http_get(probes, "/livez").await.status, 200);

    // 300 connections on the main port (256 slots) that never send a ClientHello, 100 on the
    // probe port (32 slots) that never finish their head.
    let (closed, stop) = (Arc::new(AtomicUsize::new(0)), CancellationToken::new());
    let mut squatters = squat(main, 300, b"", &closed, &stop);
    squatters.extend(squat(probes, 100, UNFINISHED_HEAD, &closed, &stop));
    let surplus = (300 - 256) + (100 - 32);
    eventually(
        Duration::from_secs(30),
        "the hub closing the connections over its caps",
        || {
            let n = closed.load(Ordering::Relaxed);
            async move { (n >= surplus).then_some(()) }
        },
    )
    .await;

    // The kubelet's probes are answered, every time.
    for i in 0..20 {
        let tcp = TcpStream::connect(probes).await.unwrap();
        let a = exchange(tcp, get_request("/livez", None).as_bytes()).await;
        let a = a.unwrap_or_else(|e| panic!("probe {i}: {e}"));
        assert_eq!(a.status, 200, "probe {i}: {a:?}");
    }
    // A valid client is served.
    for i in 0..5 {
        let stream = connect_tls(main, &s.tls).await;
        let stream = stream.unwrap_or_else(|e| panic!("client {i}: no TLS handshake: {e}"));
        let request = get_request("/api/v1/fleet", Some("alice-token"));
        let a = exchange(stream, request.as_bytes()).await.unwrap();
        assert_eq!(a.status, 200, "client {i}: {a:?}");
    }
    stop.cancel();
    for t in squatters {
        t.await.unwrap();
    }

    // Alone, a silent connection is closed after the handshake's deadline (5 s), and one
    // that never finishes its head after the head's.
    let silent = closed_after(main, b"").await;
    let slow = closed_after(probes, UNFINISHED_HEAD).await;
    eprintln!("closed after: silent {silent:?}, unfinished head {slow:?}");
    assert!(silent >= Duration::from_secs(4), "{silent:?}");
    s.stop().await;
}

/// Unsecured, the probes share the main port's slots: connections that never finish their
/// head, more than it holds, keep neither the probes nor the API out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_port_half_open_connections_keep_the_probes_answered() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    let dir = TempDir::new("serving-one-port");
    let hub = Hub::start(fleet_config(&fleet, dir.path(), fast_settings())).await;
    let (addr, serving) = serve_http(&hub).await;
    let (closed, stop) = (Arc::new(AtomicUsize::new(0)), CancellationToken::new());
    let squatters = squat(addr, 300, UNFINISHED_HEAD, &closed, &stop);
    eventually(
        Duration::from_secs(30),
        "the hub closing the connections over its cap",
        || {
            let n = closed.load(Ordering::Relaxed);
            async move { (n >= 300 - 256).then_some(()) }
        },
    )
    .await;
    for path in ["/livez"; 20].into_iter().chain(["/api/v1/fleet"]) {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let a = exchange(tcp, get_request(path, None).as_bytes()).await;
        let a = a.unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(a.status, 200, "{path}: {a:?}");
    }
    stop.cancel();
    for t in squatters {
        t.await.unwrap();
    }
    serving.cancel();
    hub.stop().await;
    fleet.shutdown().await;
}

/// Pending pods in this test: as many as one plan of a busy cluster (or a tenant who may
/// create pods) holds.
const PENDING: usize = 20_000;
/// Concurrent requests in a burst.
const BURST: usize = 300;
/// The most the hub's memory (its peak resident set) may grow during a burst: docs/hub.md
/// ("HTTP API") states it.
const BURST_BOUND: u64 = 64 << 20;

/// `count` pods no node can take (1,000 cores each), straight into the cluster's store.
fn stuck_pods(cluster: &ClusterHandle, count: usize) {
    let mut state = cluster.state();
    for i in 0..count {
        let pod = json!({
            "metadata": {"name": format!("stuck-{i:05}"), "labels": {"app": "stuck"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "stuck", "uid": "uid-stuck", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1000", "memory": "1Gi"}}}]}
        });
        state.create(Resource::Pods, "default", pod).unwrap();
    }
}

/// A field of `/proc/<pid>/status`, in bytes.
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib << 10
}

/// The hub's peak resident set while `burst` runs, above its resident set before it.
async fn peak_growth<F: Future>(pid: u32, burst: F) -> (u64, F::Output) {
    // Resets the peak (VmHWM) to the current resident set.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = proc_status(pid, "VmRSS:");
    let out = burst.await;
    let peak = proc_status(pid, "VmHWM:");
    (peak.saturating_sub(before), out)
}

async fn burst(addr: SocketAddr, paths: Vec<String>) -> Vec<Answer> {
    let asks = paths.into_iter().map(|path| async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        exchange(tcp, get_request(&path, None).as_bytes())
            .await
            .unwrap()
    });
    futures::future::join_all(asks).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_plan_requests_shares_one_bounded_answer() {
    let fleet = quiet_fleet(1, Flavor::OpenShift).await;
    stuck_pods(&fleet.clusters()[0], PENDING);
    let dir = TempDir::new("plan-burst");
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    fleet.write_kubeconfig(&kubeconfig).unwrap();
    let addr = free_port();
    let file = dir.path().join("fleet.toml");
    std::fs::write(
        &file,
        format!(
            "[hub]\nlisten = \"{addr}\"\nkubeconfigs = [{kubeconfig:?}]\nscan_interval = \"10m\"\n\
             [hub.serving]\nmax_connections = 512\n\
             [[clusters]]\nname = \"sim-1\"\nuse_cluster_autoscaler = false\n"
        ),
    )
    .unwrap();
    let hub = Running(
        std::process::Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .args(["run", "--config"])
            .arg(&file)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let pid = hub.0.id();
    eventually(
        Duration::from_secs(120),
        "a plan with every pending pod",
        || async move {
            let tcp = TcpStream::connect(addr).await.ok()?;
            let request = get_request("/api/v1/clusters/sim-1", None);
            let a = exchange(tcp, request.as_bytes()).await.ok()?;
            (a.status == 200 && a.json()["pendingPods"] == PENDING).then_some(())
        },
    )
    .await;

    // One answer: the first page, and how many were left out.
    let one = http_get(addr, "/api/v1/clusters/sim-1/plan").await;
    assert_eq!(one.status, 200);
    let resident = proc_status(pid, "VmRSS:") >> 20;
    eprintln!(
        "the plan's answer: {} bytes; the hub: {resident} MiB",
        one.body.len()
    );
    assert!(one.body.len() < 1 << 20, "{} bytes", one.body.len());
    let plan = one.json();
    assert_eq!(plan["pendingPods"].as_array().unwrap().len(), 500);
    assert_eq!(plan["pendingPodsOmitted"], PENDING - 500);
    let page = http_get(addr, "/api/v1/clusters/sim-1/plan?offset=19990").await;
    let page = page.json();
    assert_eq!(page["pendingPods"].as_array().unwrap().len(), 10);
    assert_eq!(page["pendingPods"][9]["pod"], "default/stuck-19999");
    let pod = http_get(addr, "/api/v1/clusters/sim-1/plan?pod=default/stuck-12345").await;
    assert_eq!(pod.json()["pendingPods"][0]["pod"], "default/stuck-12345");

    // A burst of the same request: one answer, shared.
    let paths = vec!["/api/v1/clusters/sim-1/plan".to_string(); BURST];
    let (grew, answers) = peak_growth(pid, burst(addr, paths)).await;
    eprintln!(
        "{BURST} requests for the plan: the hub's peak grew by {} KiB",
        grew >> 10
    );
    assert!(
        answers
            .iter()
            .all(|a| a.status == 200 && a.body == one.body)
    );
    assert!(grew < BURST_BOUND, "the hub grew by {grew} bytes");

    // A burst of pages, each built for its request, in turn.
    let paths = (0..BURST)
        .map(|i| format!("/api/v1/clusters/sim-1/plan?offset={}", i * 60))
        .collect();
    let (grew, answers) = peak_growth(pid, burst(addr, paths)).await;
    let served = answers.iter().filter(|a| a.status == 200).count();
    eprintln!(
        "{BURST} pages: {served} served, the hub's peak grew by {} KiB",
        grew >> 10
    );
    for a in answers.iter().filter(|a| a.status != 200) {
        assert_eq!(a.status, 503, "{a:?}");
        assert_eq!(a.header("retry-after").as_deref(), Some("1"), "{a:?}");
    }
    assert!(served > 0);
    assert!(grew < BURST_BOUND, "the hub grew by {grew} bytes");
    drop(hub);
    fleet.shutdown().await;
}
