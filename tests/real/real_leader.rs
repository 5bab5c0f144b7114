//! Two replicas of the hub's real binary with leader election on a real Lease in a real
//! management control plane: one leads and acts, the other plans as a standby and writes
//! nothing; killed without a chance to release the Lease (SIGKILL), the leader is replaced
//! once the Lease expires, and the new leader acts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::path::Path;
use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

fn replica_toml(identity: &str, mgmt: &Path, managed: &Path) -> String {
    format!(
        r#"{HUB_SECTION}kubeconfigs = ["{}"]

[hub.leader_election]
enabled = true
context = "mgmt"
namespace = "fleetscaler"
lease_name = "fleetscaler"
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
"#,
        mgmt.display(),
        managed.display()
    )
}

fn holder(mgmt: &ControlPlane) -> Option<String> {
    mgmt.try_kubectl(&[
        "get",
        "lease",
        "-n",
        "fleetscaler",
        "fleetscaler",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
    .ok()
    .filter(|h| !h.is_empty())
}

/// Replicas added by the scale-ups a replica reports done in cluster m1.
fn raised_by(hub: &HubProcess) -> i64 {
    let cluster = hub.api("/api/v1/clusters/m1");
    cluster["recent"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h["action"]["type"] == "scaleUp" && h["outcome"]["result"] == "done")
        .map(|h| h["action"]["to"].as_i64().unwrap() - h["action"]["from"].as_i64().unwrap())
        .sum()
}

fn replicas(m1: &ControlPlane) -> i64 {
    m1.get(&[
        "machinesets.machine.openshift.io",
        "-n",
        "openshift-machine-api",
        "w",
    ])["spec"]["replicas"]
        .as_i64()
        .unwrap()
}

fn has_passed(hub: &HubProcess) -> bool {
    let c: Value = hub.api("/api/v1/clusters/m1");
    c["phase"] == "running" && !c["lastPass"].is_null()
}

#[test]
fn two_replicas_share_a_real_lease_and_the_standby_takes_over() {
    let cps = up(&["mgmt", "m1"], &["--provision-delay", "1s"]);
    let (mgmt, m1) = (&cps[0], &cps[1]);
    mgmt.kubectl(&["create", "namespace", "fleetscaler"]);
    m1.apply(&openshift_machine_set("m1", "w", 1, 1, 8, 4));
    eventually(LONG, "one Ready worker", || {
        (m1.items(&["nodes"]).iter().filter(|n| is_ready(n)).count() == 1).then_some(())
    });
    let dir = TempDir::new("real-leader");
    let toml = |id| replica_toml(id, &mgmt.kubeconfig(), &m1.kubeconfig());
    let a = HubProcess::start(dir.path(), "a", &toml("a"));
    eventually(LONG, "a holding the Lease", || {
        (holder(mgmt).as_deref() == Some("a")).then_some(())
    });
    let b = HubProcess::start(dir.path(), "b", &toml("b"));
    eventually(LONG, "b planning as a standby", || {
        has_passed(&b).then_some(())
    });
    assert_eq!(b.api("/api/v1/fleet")["hub"]["leading"], false);
    assert_eq!(a.api("/api/v1/fleet")["hub"]["leading"], true);

    // Four pods of 1500m: one more worker. Only the leader writes it.
    m1.apply(&deployment("first", 4, "1500m"));
    eventually(LONG, "the first pods running", || {
        (running_pods(m1, "first") == 4).then_some(())
    });
    let added = replicas(m1) - 1;
    assert!(added >= 1);
    assert_eq!(
        added,
        raised_by(&a),
        "every replica added is one the leader reports"
    );
    assert_eq!(raised_by(&b), 0, "the standby wrote nothing");

    // The leader dies without releasing the Lease: b takes over once it expires.
    a.kill();
    eventually(LONG, "b holding the Lease", || {
        (holder(mgmt).as_deref() == Some("b")).then_some(())
    });
    assert_eq!(b.api("/api/v1/fleet")["hub"]["leading"], true);
    m1.apply(&deployment("second", 4, "1500m"));
    eventually(LONG, "the second pods running", || {
        (running_pods(m1, "second") == 4).then_some(())
    });
    assert!(raised_by(&b) >= 1, "the new leader scaled up");
    assert!(b.stop().success());
    // A clean stop gives the Lease up at once.
    assert_eq!(holder(mgmt), None);
}
