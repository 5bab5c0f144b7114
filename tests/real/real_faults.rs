//! Real control-plane faults under the hub's real binary: etcd compacted under live watches
//! and restarted (the apiserver's watches resume from compacted revisions, and the hub's
//! watches get a 410 Gone), then the apiserver restarted in the middle of a drain held by a
//! PodDisruptionBudget. Nothing the cluster did meanwhile is
//! lost, and no scale-down is left half-done: no taint without a removal, no machine marked
//! without its decrement.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::path::Path;
use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(180);
const GROUP: &str = "w";

fn hub_toml(kubeconfig: &Path) -> String {
    format!(
        r#"{HUB_SECTION}
[defaults]
scale_down_unneeded_time = "3s"
scale_down_delay_after_add = "3s"
scale_down_delay_after_delete = "0s"
scale_down_delay_after_failure = "3s"
node_delete_delay_after_taint = "3s"
max_pod_eviction_time = "5m"
max_node_provision_time = "2m"

[[clusters]]
name = "faults"
kubeconfig = "{}"
use_cluster_autoscaler = false
"#,
        kubeconfig.display()
    )
}

fn machines(cp: &ControlPlane) -> Vec<Value> {
    cp.items(&[
        "machines.machine.openshift.io",
        "-n",
        "openshift-machine-api",
    ])
}

fn replicas(cp: &ControlPlane) -> i64 {
    cp.get(&[
        "machinesets.machine.openshift.io",
        "-n",
        "openshift-machine-api",
        GROUP,
    ])["spec"]["replicas"]
        .as_i64()
        .unwrap()
}

/// Nothing half-done: the group's replicas equal its machines not being deleted, no such
/// machine carries the delete mark, and no node carries the deletion taint.
fn settled(cp: &ControlPlane) -> Option<()> {
    let alive: Vec<Value> = machines(cp)
        .into_iter()
        .filter(|m| m["metadata"]["deletionTimestamp"].is_null())
        .collect();
    let marked = alive
        .iter()
        .any(|m| !m["metadata"]["annotations"]["machine.openshift.io/delete-machine"].is_null());
    (alive.len() as i64 == replicas(cp) && !marked && tainted_for_deletion(cp).is_empty())
        .then_some(())
}

fn set_min_available(cp: &ControlPlane, n: u32) {
    cp.apply(&format!(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web, namespace: default}}\n\
         spec: {{minAvailable: {n}, selector: {{matchLabels: {{app: web}}}}}}\n"
    ));
}

#[test]
fn compaction_and_apiserver_restarts_lose_nothing_and_leave_nothing_half_done() {
    let cps = up(
        &["faults"],
        &["--provision-delay", "1s", "--no-watch-cache"],
    );
    let cp = &cps[0];
    cp.apply(&openshift_machine_set("faults", GROUP, 1, 1, 6, 4));
    eventually(LONG, "one Ready worker", || {
        (cp.items(&["nodes"]).iter().filter(|n| is_ready(n)).count() == 1).then_some(())
    });
    let dir = TempDir::new("real-faults");
    let hub = HubProcess::start(dir.path(), "hub", &hub_toml(&cp.kubeconfig()));
    cp.apply(&deployment("web", 6, "1500m"));
    eventually(LONG, "six web pods running", || {
        (running_pods(cp, "web") == 6).then_some(())
    });
    assert_eq!(replicas(cp), 3);

    // Writes the hub's quiet watches never see move etcd on; compaction then removes every
    // revision they hold. etcd restarts under the apiserver, whose watches (served from
    // etcd here, no watch cache) resume from where they were: compacted, so the hub's live
    // watches get a 410 Gone and list again.
    for i in 0..20 {
        cp.kubectl(&[
            "create",
            "configmap",
            &format!("churn-{i}"),
            "-n",
            "default",
        ]);
    }
    assert!(cp.compact() > 0);
    cp.restart("etcd");
    eventually(LONG, "a live watch of the hub answered 410 Gone", || {
        let log = hub.log_text();
        log.lines()
            .any(|l| l.contains("watch of") && (l.contains("too old") || l.contains("Expired")))
            .then_some(())
    });
    // Nothing lost: pods made after the 410 are seen, and get their nodes.
    cp.apply(&deployment("more", 4, "1500m"));
    eventually(LONG, "four more pods running", || {
        (running_pods(cp, "more") == 4).then_some(())
    });
    assert_eq!(replicas(cp), 5);

    // A drain under a budget, and the apiserver restarted in its middle: three web pods
    // left, one per node.
    cp.kubectl(&["delete", "deployment", "more", "-n", "default"]);
    eventually(LONG, "the empty workers removed", || {
        settled(cp)?;
        (replicas(cp) == 3).then_some(())
    });
    // One pod may go at a time; the ReplicaSet keeps one pod per node.
    set_min_available(cp, 2);
    keep_one_pod_per_node(cp, "web");
    cp.kubectl(&[
        "scale",
        "deployment/web",
        "-n",
        "default",
        "--replicas",
        "3",
    ]);
    // The removal waits 3 s after the taint before it drains: the apiserver goes down in
    // that window, under the drain, the mark and the decrement.
    eventually(LONG, "a node tainted for removal", || {
        tainted_for_deletion(cp).into_iter().next()
    });
    cp.restart("kube-apiserver");
    // The removal finishes, or is undone (or repaired) and done again, on that node or
    // another: three pods of 1500m need two workers.
    eventually(LONG, "two workers left, nothing half-done", || {
        settled(cp)?;
        (replicas(cp) == 2).then_some(())
    });
    eventually(LONG, "the web pods running", || {
        (running_pods(cp, "web") == 3).then_some(())
    });
    let fleet = hub.api("/api/v1/fleet");
    assert_eq!(fleet["clusters"][0]["phase"], "running", "{fleet}");
    assert!(hub.stop().success());
}
