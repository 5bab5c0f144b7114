#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The hub's serving under load nobody authorized (docs/hub.md, "Serving"): hundreds of
//! connections that never finish their TLS handshake or their request's head keep neither
//! the kubelet's probes nor a valid client out (they take turns being closed, and each is
//! closed after a few seconds anyway).

use crate::e2e_support;
use crate::hub_serving::served;
use crate::serving_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use e2e_support::*;
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
