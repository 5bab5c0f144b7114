//! Hub replicas as a user runs them: `fleetscaler run` child processes sharing a simulated
//! fleet through Leases on a management cluster (`[hub.sharding]`). Each replica listens on a
//! free port and advertises `127.0.0.1:<port>` (`POD_IP`, as the chart sets it), so the
//! others, the API's `hub.sharding.replicas` and the dashboard's links all reach it. Its log
//! goes to a file, whose last lines are printed when a test fails. Each test crate includes
//! `e2e_support` beside it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::e2e_support::{eventually, http_request};

/// One hub replica, a child process.
pub struct Replica {
    pub identity: &'static str,
    child: Option<Child>,
    log: PathBuf,
    pub addr: SocketAddr,
}

impl Replica {
    /// Starts `fleetscaler run` with `toml` as its fleet.toml (in `dir`), and waits until it
    /// serves.
    pub async fn start(dir: &Path, identity: &'static str, toml: &str) -> Replica {
        let config = dir.join(format!("{identity}.toml"));
        std::fs::write(&config, toml).unwrap();
        let log = dir.join(format!("{identity}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .args(["run", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("RUST_LOG", "info")
            .env("POD_IP", "127.0.0.1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let addr = eventually(Duration::from_secs(30), "the replica's address", || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let addr = text
                .split("serving http://")
                .nth(1)
                .and_then(|rest| rest.split('/').next())
                .and_then(|a| a.parse().ok());
            async move { addr }
        })
        .await;
        Replica {
            identity,
            child: Some(child),
            log,
            addr,
        }
    }

    /// Its `/api/v1/fleet`, when it answers 200.
    pub async fn fleet(&self) -> Option<Value> {
        let (status, body) = http_request(self.addr, "GET", "/api/v1/fleet").await;
        (status == 200).then(|| serde_json::from_str(&body).unwrap())
    }

    /// The clusters whose Lease this replica holds, as it says.
    pub async fn writing(&self) -> BTreeSet<String> {
        let Some(fleet) = self.fleet().await else {
            return BTreeSet::new();
        };
        strings(&fleet["hub"]["sharding"]["writing"])
    }

    /// Stops it without a chance to let go (SIGKILL): its Leases expire.
    pub fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("--- {} (last lines) ---", self.identity);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// The strings of a JSON array (none when it is not one).
pub fn strings(list: &Value) -> BTreeSet<String> {
    let items = list.as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect()
}

/// The namespace the replicas' Leases live in, created in the management cluster.
pub async fn lease_namespace(management: &fleetscaler::sim::fleet::ClusterHandle) {
    let client = management.client().await.unwrap();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": "fleetscaler"}}));
    namespaces
        .create(&Default::default(), &ns.unwrap())
        .await
        .unwrap();
}

/// fleet.toml of a replica sharing clusters `sim-1`..`sim-<clusters>` through Leases on
/// `sim-<clusters + 1>`, with timings short enough for a test (a 4 s lease).
pub fn fleet_toml(kubeconfig: &Path, clusters: usize, identity: &str) -> String {
    let list: String = (1..=clusters)
        .map(|i| format!("[[clusters]]\nname = \"sim-{i}\"\nuse_cluster_autoscaler = false\n"))
        .collect();
    format!(
        r#"[hub]
scan_interval = "1s"
debounce = "50ms"
request_timeout = "2s"
kubeconfigs = ["{}"]

[hub.sharding]
enabled = true
context = "sim-{}"
identity = "{identity}"
lease_duration = "4s"
renew_deadline = "3s"
retry_period = "500ms"

[defaults]
scale_down_enabled = false

{list}"#,
        kubeconfig.display(),
        clusters + 1
    )
}
