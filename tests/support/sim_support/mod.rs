//! Shared helpers of the simulated-fleet integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::time::Duration;

use fleetscaler::sim::fleet::{ClusterHandle, Fleet};
use fleetscaler::sim::settings::{Flavor, FleetSettings, Shape, Timing};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};

/// A one-cluster fleet with fast timing; `workloads` off keeps the cluster quiet.
pub async fn fleet(flavor: Flavor, workloads: bool, history_window: usize) -> Fleet {
    Fleet::start(FleetSettings {
        clusters: 1,
        shape: Shape {
            flavor,
            nodes_per_group: 1,
            pods_per_node: 6,
            workloads,
            ..Shape::default()
        },
        // Waves slow enough that replica counts hold still during a test.
        timing: Timing {
            wave_period: Duration::from_secs(3600),
            ..Timing::fast()
        },
        history_window,
        ..FleetSettings::default()
    })
    .await
    .unwrap()
}

/// A kube client that reports 429s and 5xx at once instead of retrying them (kube's
/// default policy retries 429 up to 15 times), so tests see what the server said.
pub async fn client(cluster: &ClusterHandle) -> Client {
    let mut config = cluster.kube_config().await.unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

/// Polls `check` until it yields `Some`, for at most `limit`; panics with `what` otherwise.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A dynamic API for a Machine API kind, at the version the simulated fleet serves
/// (`v1beta1` for OpenShift, `v1beta2` for Cluster API).
pub fn machine_api(
    client: &Client,
    group: &str,
    kind: &str,
    plural: &str,
    ns: &str,
) -> Api<DynamicObject> {
    let version = if group == "cluster.x-k8s.io" {
        "v1beta2"
    } else {
        "v1beta1"
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// One plain HTTP/1.0 request with a body (empty for none): the status code and the body.
/// For the hub's server and the simulated fleet's admin endpoint alike.
pub async fn http_send(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let length = match body.len() {
        0 => String::new(),
        n => format!("Content-Length: {n}\r\n"),
    };
    let request = format!("{method} {path} HTTP/1.0\r\nHost: test\r\n{length}\r\n{body}");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}
