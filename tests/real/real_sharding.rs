//! Sharding on real control planes: two replicas of the hub's real binary share two real
//! clusters through real Leases in a real management control plane. Each runs and writes to
//! its own cluster (rendezvous hashing gives `m1` to `a` and `m2` to `b`); killed without a
//! chance to let go (SIGKILL), `a`'s cluster is taken over by `b` once `a`'s Leases expire,
//! and `b` scales it. The API server's audit log, which records every write with its
//! User-Agent, shows that `m1` heard from `a`, then from `b`, never from both in turn.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::path::Path;
use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

fn replica_toml(identity: &str, mgmt: &Path, m1: &Path, m2: &Path) -> String {
    format!(
        r#"{HUB_SECTION}kubeconfigs = ["{}"]

[hub.sharding]
enabled = true
context = "mgmt"
namespace = "fleetscaler"
identity = "{identity}"
lease_duration = "4s"
renew_deadline = "3s"
retry_period = "500ms"

[defaults]
scale_down_enabled = false

[[clusters]]
name = "m1"
kubeconfig = "{}"
use_cluster_autoscaler = false

[[clusters]]
name = "m2"
kubeconfig = "{}"
use_cluster_autoscaler = false
"#,
        mgmt.display(),
        m1.display(),
        m2.display()
    )
}

/// Who holds a cluster's Lease.
fn holder(mgmt: &ControlPlane, cluster: &str) -> Option<String> {
    mgmt.try_kubectl(&[
        "get",
        "lease",
        "-n",
        "fleetscaler",
        &format!("fleetscaler-cluster-{cluster}"),
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
    .ok()
    .filter(|h| !h.is_empty())
}

/// The replicas that wrote to a cluster, in order, as its audit log names them by their
/// User-Agent (each run of one replica's writes counted once).
fn writers(cp: &ControlPlane) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for e in audit(cp) {
        let write =
            ["create", "update", "patch", "delete"].contains(&e["verb"].as_str().unwrap_or(""));
        let agent = e["userAgent"].as_str().unwrap_or_default();
        let Some(replica) = agent.strip_prefix("fleetscaler/").and_then(|rest| {
            let id = rest.split(" (").nth(1)?.strip_suffix(')')?;
            Some(id.to_string())
        }) else {
            continue;
        };
        if write && runs.last() != Some(&replica) {
            runs.push(replica);
        }
    }
    runs
}

fn writing(hub: &HubProcess) -> Vec<Value> {
    let fleet = hub.api("/api/v1/fleet");
    fleet["hub"]["sharding"]["writing"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn replicas(cp: &ControlPlane) -> i64 {
    cp.get(&[
        "machinesets.machine.openshift.io",
        "-n",
        "openshift-machine-api",
        "w",
    ])["spec"]["replicas"]
        .as_i64()
        .unwrap()
}

#[test]
fn two_replicas_share_real_clusters_and_one_takes_over_the_others() {
    let cps = up(&["mgmt", "m1", "m2"], &["--provision-delay", "1s"]);
    let (mgmt, m1, m2) = (&cps[0], &cps[1], &cps[2]);
    mgmt.kubectl(&["create", "namespace", "fleetscaler"]);
    for (cp, name) in [(m1, "m1"), (m2, "m2")] {
        cp.apply(&openshift_machine_set(name, "w", 1, 1, 8, 4));
    }
    let dir = TempDir::new("real-sharding");
    let toml = |id| replica_toml(id, &mgmt.kubeconfig(), &m1.kubeconfig(), &m2.kubeconfig());
    let a = HubProcess::start(dir.path(), "a", &toml("a"));
    let b = HubProcess::start(dir.path(), "b", &toml("b"));
    eventually(LONG, "each replica holding its own cluster", || {
        let held = (holder(mgmt, "m1"), holder(mgmt, "m2"));
        (held == (Some("a".into()), Some("b".into()))).then_some(())
    });
    // Each says so in its API (looked at every second).
    eventually(LONG, "each replica's API saying what it writes to", || {
        let ok = writing(&a) == [Value::from("m1")] && writing(&b) == [Value::from("m2")];
        ok.then_some(())
    });

    // a has written to m1 (its first pass's status) before it dies: holding the lease is
    // not yet having written, and on a loaded machine the first pass comes later.
    eventually(LONG, "a writing to m1", || {
        (writers(m1) == ["a"]).then_some(())
    });
    // a dies without letting go: b takes m1 once a's Leases expire, and scales it.
    a.kill();
    eventually(LONG, "b holding m1", || {
        (holder(mgmt, "m1").as_deref() == Some("b")).then_some(())
    });
    m1.apply(&deployment("after", 4, "1500m"));
    eventually(LONG, "m1's pods running", || {
        (running_pods(m1, "after") == 4).then_some(())
    });
    assert!(replicas(m1) >= 2, "b scaled m1 up");
    assert_eq!(writers(m1), ["a", "b"], "m1's writers, in order");
    // a started first, alone, and ran both until it saw b.
    let m2_writers = writers(m2);
    assert!(
        m2_writers == ["b"] || m2_writers == ["a", "b"],
        "m2's writers: {m2_writers:?}"
    );
    assert!(b.stop().success());
    // A clean stop gives every Lease up at once, and deletes the replica's own.
    assert_eq!(holder(mgmt, "m1"), None);
    assert_eq!(holder(mgmt, "m2"), None);
    let left = mgmt.kubectl(&["get", "leases", "-n", "fleetscaler", "-o", "name"]);
    assert!(!left.contains("fleetscaler-replica-b"), "{left}");
}
