//! Dynamic resource allocation (issue 24, point 2) on a real control plane: `resource.k8s.io/v1`
//! served by the real apiserver, claims made from their templates by the real
//! kube-controller-manager, devices allocated and pods bound by the real kube-scheduler,
//! OpenShift's real MachineSet and nodelink controllers, kwok. The project plays the cloud
//! and the DRA driver's kubelet plugin (the ResourceSlice it publishes for a node).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
const NS: &str = "openshift-machine-api";
const DRIVER: &str = "gpu.example.com";

/// Upstream's Cluster API scale-from-zero annotations for a group whose nodes run a DRA
/// driver with two GPUs each (`dra-driver`, `gpu-count`).
fn gpu_machine_set(cluster: &str) -> String {
    openshift_machine_set(cluster, "gpu", 0, 0, 2, 4).replace(
        "    capacity.cluster-autoscaler.kubernetes.io/maxPods: \"110\"\n",
        &format!(
            "    capacity.cluster-autoscaler.kubernetes.io/maxPods: \"110\"\n    \
             capacity.cluster-autoscaler.kubernetes.io/gpu-count: \"2\"\n    \
             capacity.cluster-autoscaler.kubernetes.io/dra-driver: {DRIVER}\n"
        ),
    )
}

/// The driver's DeviceClass, and a claim template `name` asking `count` of its devices.
fn class_and_template(name: &str, count: u32) -> String {
    format!(
        r#"apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {DRIVER}
spec:
  selectors:
  - cel:
      expression: device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {name}
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: {DRIVER}
          allocationMode: ExactCount
          count: {count}
"#
    )
}

/// A one-replica Deployment `app` of 1 CPU whose pod claims devices through `template`.
fn with_claim(app: &str, template: &str) -> String {
    deployment(app, 1, "1")
        .replacen(
            "      containers:\n",
            &format!(
                "      resourceClaims:\n      - name: gpu\n        resourceClaimTemplateName: {template}\n      containers:\n"
            ),
            1,
        )
        .replacen(
            "        resources:\n",
            "        resources:\n          claims:\n          - name: gpu\n",
            1,
        )
}

/// What the driver's kubelet plugin does once its node runs: one ResourceSlice with the
/// node's two GPUs, as upstream's template for the group describes them.
fn play_driver(cp: &ControlPlane, node: &str) {
    cp.apply(&format!(
        r#"apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: {node}-{DRIVER}
spec:
  driver: {DRIVER}
  nodeName: {node}
  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    attributes: {{type: {{string: gpu}}}}
  - name: gpu-1
    attributes: {{type: {{string: gpu}}}}
"#
    ));
}

fn replicas(cp: &ControlPlane, set: &str) -> Option<i64> {
    cp.get(&["machinesets.machine.openshift.io", "-n", NS, set])["spec"]["replicas"].as_i64()
}

/// The hub's entry for the pending pod of `app`, once its plan has one.
fn pending_entry(hub: &HubProcess, cluster: &str, app: &str) -> Value {
    eventually(LONG, &format!("the hub explaining {app}"), || {
        let plan = hub.plan(cluster)?;
        let pods = plan["pendingPods"].as_array()?.clone();
        let prefix = format!("default/{app}-");
        pods.into_iter()
            .find(|p| p["pod"].as_str().is_some_and(|n| n.starts_with(&prefix)))
    })
}

/// A pod whose claim needs a GPU makes the hub buy a node of the GPU group (at zero: its
/// template from upstream's DRA annotations), never of the CPU group that has room for its
/// CPU; once the driver publishes the node's devices, the real scheduler allocates the
/// claim there and binds the pod. A pod asking three GPUs, more than any node has, buys
/// nothing and is told why.
#[test]
fn a_pod_claiming_a_gpu_gets_a_node_of_the_gpu_group_and_runs_there() {
    let cps = up(&["dra"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    cp.apply(&openshift_machine_set("dra", "cpu", 1, 1, 3, 4));
    cp.apply(&gpu_machine_set("dra"));
    eventually(LONG, "the cpu worker Ready", || {
        (ready_nodes(cp) == 1).then_some(())
    });
    cp.apply(&class_and_template("one-gpu", 1));
    let (hub, _dir) = hub_for(cp, "");
    let before = node_names(cp);
    cp.apply(&with_claim("train", "one-gpu"));
    let node = eventually(LONG, "a Ready GPU node", || {
        cp.items(&["nodes"])
            .into_iter()
            .find(|n| is_ready(n) && !before.contains(&name(n)))
    });
    play_driver(cp, &name(&node));
    let pod = eventually(LONG, "the pod running", || {
        let pods = cp.items(&["pods", "-n", "default", "-l", "app=train"]);
        pods.into_iter().find(|p| p["status"]["phase"] == "Running")
    });
    assert_eq!(pod["spec"]["nodeName"], name(&node).as_str());
    let claims = cp.items(&["resourceclaims.resource.k8s.io", "-n", "default"]);
    let allocated = &claims[0]["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(allocated["driver"], DRIVER, "{claims:#?}");
    assert_eq!(
        (replicas(cp, "cpu"), replicas(cp, "gpu")),
        (Some(1), Some(1))
    );

    let template = class_and_template("three-gpus", 3);
    cp.apply(template.split("---\n").nth(1).unwrap());
    cp.apply(&with_claim("greedy", "three-gpus"));
    let entry = pending_entry(&hub, "dra", "greedy");
    assert_eq!(entry["outcome"], "noScaleUp", "{entry:#}");
    assert!(
        entry.to_string().contains("DevicesUnavailable"),
        "{entry:#}"
    );
    assert_eq!(
        (replicas(cp, "cpu"), replicas(cp, "gpu")),
        (Some(1), Some(1))
    );
    let plan = hub.plan("dra").unwrap();
    let warnings = plan["warnings"].to_string();
    assert!(!warnings.contains("resource.k8s.io"), "{warnings}");
    let refused = refused_hub_requests(cp);
    assert!(refused.is_empty(), "refused: {refused:?}");
    hub.stop();
}
