//! The hub's real binary against real control planes (kube-apiserver, etcd,
//! controller-manager, scheduler, kwok, the Machine API controllers production runs, the
//! test bed's cloud): an OpenShift cluster and a Cluster API cluster served as v1beta2 only,
//! at once. Pending pods make both scale up; once the load is gone the extra node is
//! drained through the real Eviction API under a PodDisruptionBudget and removed — the
//! node the hub chose, and no other, by the real MachineSet controllers; users see it all
//! with kubectl in
//! the status ConfigMap and the Events. The hub reaches both clusters as users are told to
//! set it up: through a ServiceAccount token bound to exactly docs/managed-cluster-rbac.yaml,
//! and the apiserver's audit log shows no request of it refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);

fn fleet_toml(ocp: &std::path::Path, capi: &std::path::Path) -> String {
    format!(
        r#"{HUB_SECTION}
[defaults]
scale_down_unneeded_time = "5s"
scale_down_delay_after_add = "5s"
scale_down_delay_after_delete = "0s"
scale_down_delay_after_failure = "5s"
node_delete_delay_after_taint = "1s"
max_pod_eviction_time = "60s"
max_node_provision_time = "2m"

[[clusters]]
name = "ocp"
kubeconfig = "{}"
use_cluster_autoscaler = false

[[clusters]]
name = "capi"
kubeconfig = "{}"
use_cluster_autoscaler = false
"#,
        ocp.display(),
        capi.display()
    )
}

/// `spec.replicas` of a group, read with kubectl.
fn replicas(cp: &ControlPlane, resource: &str, namespace: &str, name: &str) -> i64 {
    cp.get(&[resource, "-n", namespace, name])["spec"]["replicas"]
        .as_i64()
        .unwrap_or(-1)
}

fn events_with_reason(cp: &ControlPlane, namespace: &str, reason: &str) -> Vec<Value> {
    cp.items(&[
        "events",
        "-n",
        namespace,
        "--field-selector",
        &format!("reason={reason}"),
    ])
}

/// The nodes the hub marked for deletion, by its events on them (upstream's words).
fn nodes_marked_for_deletion(cp: &ControlPlane) -> Vec<String> {
    let mut names: Vec<String> = events_with_reason(cp, "default", "ScaleDown")
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "Node")
        .filter(|e| e["message"] == "marked the node as toBeDeleted/unschedulable")
        .filter_map(|e| e["involvedObject"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    names
}

struct Group {
    resource: &'static str,
    namespace: &'static str,
    name: &'static str,
}

const OCP_GROUP: Group = Group {
    resource: "machinesets.machine.openshift.io",
    namespace: "openshift-machine-api",
    name: "ocp-worker-a",
};

const CAPI_GROUP: Group = Group {
    resource: "machinedeployments.cluster.x-k8s.io",
    namespace: "openshift-cluster-api",
    name: "capi-md-a",
};

fn group_replicas(cp: &ControlPlane, g: &Group) -> i64 {
    replicas(cp, g.resource, g.namespace, g.name)
}

#[test]
fn pending_pods_scale_up_and_idle_nodes_drain_on_real_clusters() {
    let cps = up(&["ocp", "capi"], &["--provision-delay", "1s"]);
    let (ocp, capi) = (&cps[0], &cps[1]);
    // One 4-CPU worker each (3.5 CPU allocatable: two pods of 1500m).
    ocp.apply(&openshift_machine_set("ocp", OCP_GROUP.name, 1, 1, 6, 4));
    capi.apply(&capi_machine_deployment(
        "capi",
        CAPI_GROUP.name,
        1,
        1,
        6,
        4,
    ));
    for cp in &cps {
        eventually(LONG, "the first worker Ready", || {
            (ready_nodes(cp) == 1).then_some(())
        });
    }
    let dir = TempDir::new("real-hub");
    let kubeconfigs = [
        dir.path().join("ocp.kubeconfig"),
        dir.path().join("capi.kubeconfig"),
    ];
    managed_kubeconfig(ocp, &kubeconfigs[0]);
    managed_kubeconfig(capi, &kubeconfigs[1]);
    let hub = HubProcess::start(
        dir.path(),
        "hub",
        &fleet_toml(&kubeconfigs[0], &kubeconfigs[1]),
    );

    // Scale-up: six pods of 1500m need three workers.
    for cp in &cps {
        cp.apply(&deployment("web", 6, "1500m"));
    }
    for (cp, g) in [(ocp, &OCP_GROUP), (capi, &CAPI_GROUP)] {
        eventually(LONG, "six web pods running", || {
            (running_pods(cp, "web") == 6).then_some(())
        });
        assert_eq!(group_replicas(cp, g), 3, "{}: one group, 1 → 3", cp.name);
        assert_eq!(ready_nodes(cp), 3);
        let triggered = events_with_reason(cp, "default", "TriggeredScaleUp");
        assert!(
            !triggered.is_empty(),
            "{}: no TriggeredScaleUp event on the pods",
            cp.name
        );
        let message = triggered[0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(g.name),
            "{}: event says {message}",
            cp.name
        );
    }

    let before: Vec<Vec<String>> = cps.iter().map(node_names).collect();
    // Scale-down through a budget: three pods left, one per node (the ReplicaSet removes
    // pods where they are most crowded), which fit on two nodes; at most one of them away
    // at a time. One node is drained through the Eviction API and its pod moves.
    for cp in &cps {
        cp.apply(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: default}\n\
             spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}\n",
        );
        keep_one_pod_per_node(cp, "web");
        cp.kubectl(&[
            "scale",
            "deployment/web",
            "-n",
            "default",
            "--replicas",
            "3",
        ]);
    }
    for ((cp, g), before) in [(ocp, &OCP_GROUP), (capi, &CAPI_GROUP)]
        .into_iter()
        .zip(&before)
    {
        eventually(LONG, "one node drained and removed", || {
            (group_replicas(cp, g) == 2 && node_names(cp).len() == 2).then_some(())
        });
        // The real controllers removed the node the hub chose, and no other: the hub marked
        // its Machine, and the MachineSet controller deleted the marked one.
        let after = node_names(cp);
        let removed: Vec<&String> = before.iter().filter(|n| !after.contains(n)).collect();
        let chosen = nodes_marked_for_deletion(cp);
        assert_eq!(removed.len(), 1, "{}: removed {removed:?}", cp.name);
        assert_eq!(
            chosen,
            vec![removed[0].clone()],
            "{}: the hub chose {chosen:?}",
            cp.name
        );
        assert!(
            after.iter().all(|n| before.contains(n)),
            "{}: a new node {after:?}",
            cp.name
        );
        eventually(LONG, "the three web pods running", || {
            (running_pods(cp, "web") == 3).then_some(())
        });
        let nodes = cp.items(&["nodes"]);
        assert!(
            nodes.iter().all(|n| n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|t| t["key"] != "ToBeDeletedByClusterAutoscaler")),
            "{}: a deletion taint was left behind",
            cp.name
        );
        assert!(
            !events_with_reason(cp, "default", "ScaleDown").is_empty()
                || !events_with_reason(cp, "", "ScaleDown").is_empty(),
            "{}: no ScaleDown event",
            cp.name
        );
        assert!(
            audited(cp, "pods", Some("eviction"), 201) >= 1,
            "{}: no pod was evicted through the Eviction API",
            cp.name
        );
        // The status users read, as upstream writes it.
        let status = cp.kubectl(&[
            "get",
            "configmap",
            "cluster-autoscaler-status",
            "-n",
            "openshift-machine-api",
            "-o",
            "jsonpath={.data.status}",
        ]);
        assert!(status.contains("autoscalerStatus: Running"), "{status}");
        assert!(
            status.contains(g.name),
            "{}: status lacks the group: {status}",
            cp.name
        );
    }
    for cp in &cps {
        assert!(hub_requests(cp) > 0, "{}: the hub made no request", cp.name);
        assert_eq!(
            refused_hub_requests(cp),
            Vec::<String>::new(),
            "{}: refused",
            cp.name
        );
    }
    // Each decrement waited for a watch served from the API server's watch cache to show
    // its Machine's mark (`mark_seen`): on a real API server one does.
    let unseen: Vec<String> = hub
        .log_text()
        .lines()
        .filter(|l| l.contains("no watch showed the mark"))
        .map(str::to_string)
        .collect();
    assert_eq!(unseen, Vec::<String>::new(), "decrements lowered unseen");
    let fleet = hub.api("/api/v1/fleet");
    for c in fleet["clusters"].as_array().unwrap() {
        assert_eq!(c["healthy"], true, "{}", c["name"]);
        assert_eq!(c["phase"], "running", "{}", c["name"]);
    }
    assert!(hub.stop().success());
    // A clean stop removes the status ConfigMap it wrote.
    for cp in &cps {
        assert!(
            cp.try_kubectl(&[
                "get",
                "configmap",
                "cluster-autoscaler-status",
                "-n",
                "openshift-machine-api"
            ])
            .is_err()
        );
    }
}
