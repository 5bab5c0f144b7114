//! ProvisioningRequests (issue 24, point 4) on a real control plane: the CRD from the
//! autoscaler's own `apis` module (served as `v1` and `v1beta1`, as upstream's current
//! manifest), PodTemplates, OpenShift's real MachineSet and nodelink controllers, kwok, and
//! the real kube-scheduler binding the consuming pods onto the capacity the hub bought.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;
use crate::tempdir_support::TempDir;

use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
const NS: &str = "openshift-machine-api";
const CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";
const ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
const CONSUME: &str = "autoscaling.x-k8s.io/consume-provisioning-request";

/// A PodTemplate `name` whose pod asks `cpu`, and a ProvisioningRequest `name` of `class`
/// for `count` such pods, written at `version` of the API.
fn request(name: &str, class: &str, count: u32, cpu: &str, version: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: PodTemplate
metadata:
  name: {name}
  namespace: default
template:
  metadata:
    labels: {{app: {name}}}
  spec:
    containers:
    - name: app
      image: busybox
      resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}
---
apiVersion: autoscaling.x-k8s.io/{version}
kind: ProvisioningRequest
metadata:
  name: {name}
  namespace: default
spec:
  provisioningClassName: {class}
  podSets:
  - podTemplateRef: {{name: {name}}}
    count: {count}
"#
    )
}

/// The request's `Provisioned` condition once the hub wrote it: (status, reason).
fn provisioned(cp: &ControlPlane, name: &str) -> (String, String) {
    eventually(LONG, &format!("{name} Provisioned written"), || {
        let r = cp.get(&[
            "provisioningrequests.v1.autoscaling.x-k8s.io",
            "-n",
            "default",
            name,
        ]);
        let conditions = r["status"]["conditions"].as_array()?.clone();
        let c = conditions.iter().find(|c| c["type"] == "Provisioned")?;
        Some((
            c["status"].as_str()?.to_string(),
            c["reason"].as_str()?.to_string(),
        ))
    })
}

fn replicas(cp: &ControlPlane) -> Option<i64> {
    cp.get(&["machinesets.machine.openshift.io", "-n", NS, "workers"])["spec"]["replicas"].as_i64()
}

/// One control plane with a 4-CPU OpenShift MachineSet `workers` (one node, at most four)
/// and the hub autoscaling it; the control planes' turn is held while they live.
fn one_group(name: &str) -> (Vec<ControlPlane>, HubProcess, TempDir) {
    let cps = up(&[name], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    cp.apply(&openshift_machine_set(name, "workers", 1, 1, 4, 4));
    eventually(LONG, "the first worker Ready", || {
        (ready_nodes(cp) == 1).then_some(())
    });
    let (hub, dir) = hub_for(cp, "");
    (cps, hub, dir)
}

/// The events the apiserver holds for object `name`, as their reasons.
fn event_reasons(cp: &ControlPlane, name: &str) -> Vec<String> {
    let selector = format!("involvedObject.name={name},involvedObject.kind=ProvisioningRequest");
    cp.items(&["events", "-n", "default", "--field-selector", &selector])
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect()
}

/// Check-capacity requests answered from a simulation, one through each served version:
/// two 1-CPU pods fit the worker (`CapacityIsFound`, with an event on the request), ten
/// 3-CPU pods do not fit even at the group's maximum (`CapacityIsNotFound`); neither buys
/// a node.
#[test]
fn check_capacity_requests_are_answered_without_buying() {
    let (cps, hub, _dir) = one_group("provcheck");
    let cp = &cps[0];
    cp.apply(&request("small", CHECK_CAPACITY, 2, "1", "v1"));
    assert_eq!(
        provisioned(cp, "small"),
        ("True".into(), "CapacityIsFound".into())
    );
    eventually(LONG, "the CapacityIsFound event on the request", || {
        event_reasons(cp, "small")
            .contains(&"CapacityIsFound".to_string())
            .then_some(())
    });
    cp.apply(&request("huge", CHECK_CAPACITY, 10, "3", "v1beta1"));
    assert_eq!(
        provisioned(cp, "huge"),
        ("False".into(), "CapacityIsNotFound".into())
    );
    assert_eq!(replicas(cp), Some(1));
    let refused = refused_hub_requests(cp);
    assert!(refused.is_empty(), "refused: {refused:?}");
    hub.stop();
}

/// A best-effort-atomic request for two 3-CPU pods buys both nodes in one scale-up (the
/// worker's 3.5 allocatable CPUs, 2 of them in use, hold neither) and is
/// `Provisioned=True` once written; the pods that then consume it are left out of the
/// hub's scale-up and the real scheduler binds them onto the bought nodes.
#[test]
fn an_atomic_request_buys_all_its_nodes_and_its_pods_run_there() {
    let (cps, hub, _dir) = one_group("provatomic");
    let cp = &cps[0];
    cp.apply(&deployment("load", 1, "2"));
    eventually(LONG, "the load running", || {
        (running_pods(cp, "load") == 1).then_some(())
    });
    let before = node_names(cp);
    cp.apply(&request("train", ATOMIC, 2, "3", "v1"));
    assert_eq!(
        provisioned(cp, "train"),
        ("True".into(), "CapacityIsProvisioned".into())
    );
    assert_eq!(replicas(cp), Some(3));
    let consumers = deployment("train", 2, "3").replacen(
        "      labels:\n        app: train\n",
        &format!(
            "      labels:\n        app: train\n      annotations:\n        {CONSUME}: train\n"
        ),
        1,
    );
    assert!(consumers.contains(CONSUME), "{consumers}");
    cp.apply(&consumers);
    let pods = eventually(LONG, "both consumers running", || {
        let pods = cp.items(&["pods", "-n", "default", "-l", "app=train"]);
        let running = pods.iter().filter(|p| p["status"]["phase"] == "Running");
        (running.count() == 2).then_some(pods)
    });
    let hosts: Vec<&Value> = pods.iter().map(|p| &p["spec"]["nodeName"]).collect();
    for host in &hosts {
        let host = host.as_str().unwrap().to_string();
        assert!(!before.contains(&host), "{host} is not a bought node");
    }
    assert_ne!(hosts[0], hosts[1]);
    assert_eq!(replicas(cp), Some(3), "the consumers bought nothing more");
    let refused = refused_hub_requests(cp);
    assert!(refused.is_empty(), "refused: {refused:?}");
    hub.stop();
}
