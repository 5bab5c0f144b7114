//! Scale-up fidelity (issue 24) on a real control plane, with OpenShift's real MachineSet and
//! nodelink controllers, the real kube-scheduler and kwok; the project plays only the cloud
//! (and, here, the GPU operator's device plugin).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
const NS: &str = "openshift-machine-api";

/// An 8-CPU OpenShift MachineSet of one-GPU nodes at zero whose nodes come up with the
/// accelerator label and their driver still installing (no GPU advertised).
fn gpu_machine_set(cluster: &str) -> String {
    openshift_machine_set(cluster, "gpu", 0, 0, 2, 8)
        .replacen(
            "  annotations:\n",
            "  annotations:\n    capacity.cluster-autoscaler.kubernetes.io/gpu-count: \"1\"\n    capacity.cluster-autoscaler.kubernetes.io/gpu-type: nvidia.com/gpu\n    sim.fleetscaler.io/failure-mode: gpu-driver-installing\n",
            1,
        )
        .replacen(
            "          node-role.kubernetes.io/worker: \"\"\n",
            "          node-role.kubernetes.io/worker: \"\"\n          cluster-api/accelerator: nvidia-t4\n",
            1,
        )
}

/// A Deployment of one pod asking one GPU.
fn trainer() -> String {
    deployment("train", 1, "2").replacen(
        "            memory: 256Mi\n",
        "            memory: 256Mi\n            nvidia.com/gpu: \"1\"\n          limits:\n            nvidia.com/gpu: \"1\"\n",
        1,
    )
}

fn group<'a>(plan: &'a Value, id: &str) -> Option<&'a Value> {
    plan["nodeGroups"]
        .as_array()?
        .iter()
        .find(|g| g["id"] == id)
}

fn group_health<'a>(plan: &'a Value, id: &str) -> Option<&'a Value> {
    plan["health"]["nodeGroups"]
        .as_array()?
        .iter()
        .find(|g| g["id"] == id)
}

/// Issue 24, point 3: a Ready GPU node whose driver is still installing is a node starting,
/// as upstream's GpuCustomResourcesProcessor has it. The hub buys one node for the GPU pod,
/// never a second while the first installs, never models the group on the GPU-less node,
/// never removes it as idle; once the device plugin advertises the GPU, the real scheduler
/// binds the pod to it.
#[test]
fn a_gpu_node_still_installing_its_driver_is_waited_for_not_copied_nor_doubled() {
    let cps = up(&["gpu"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    cp.apply(&gpu_machine_set("gpu"));
    let (hub, _dir) = hub_for(
        cp,
        "[defaults]\nscale_down_unneeded_time = \"2s\"\nscale_down_delay_after_add = \"0s\"\n",
    );
    let id = "MachineSet.machine.openshift.io/openshift-machine-api/gpu";
    cp.apply(&trainer());

    let node = eventually(LONG, "the GPU node Ready, without its GPU", || {
        let nodes = cp.items(&["nodes", "-l", "cluster-api/accelerator=nvidia-t4"]);
        let n = nodes.iter().find(|n| is_ready(n))?;
        assert!(n["status"]["allocatable"].get("nvidia.com/gpu").is_none());
        Some(name(n))
    });
    // Passes that saw the Ready node: it is starting, the template is the annotations'.
    let seen = eventually(LONG, "a plan counting the node as starting", || {
        let plan = hub.plan("gpu")?;
        let health = group_health(&plan, id)?;
        (health["notStarted"] == 1 && health["ready"] == 0).then_some(plan)
    });
    assert_eq!(
        group(&seen, id).unwrap()["template"],
        "annotations",
        "{seen}"
    );
    let pod = seen["pendingPods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["pod"]
                .as_str()
                .is_some_and(|n| n.starts_with("default/train"))
        })
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(pod["outcome"], "fitsUpcoming", "{pod}");
    // Ten more scan intervals of passes: still one node asked for, nothing removed.
    let first: jiff::Timestamp = seen["now"].as_str().unwrap().parse().unwrap();
    eventually(LONG, "ten more passes", || {
        let plan = hub.plan("gpu")?;
        let now: jiff::Timestamp = plan["now"].as_str()?.parse().ok()?;
        (now.duration_since(first).as_secs() >= 20).then_some(())
    });
    let replicas =
        cp.get(&["machinesets.machine.openshift.io", "-n", NS, "gpu"])["spec"]["replicas"].as_i64();
    assert_eq!(
        replicas,
        Some(1),
        "a second node was bought while the first installs"
    );
    assert!(
        tainted_for_deletion(cp).is_empty(),
        "the installing node was marked"
    );

    // The device plugin advertises the GPU: the scheduler binds the pod there.
    cp.kubectl(&[
        "patch",
        "node",
        &node,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"capacity":{"nvidia.com/gpu":"1"},"allocatable":{"nvidia.com/gpu":"1"}}}"#,
    ]);
    eventually(LONG, "the trainer running on the GPU node", || {
        let pods = cp.items(&["pods", "-n", "default", "-l", "app=train"]);
        let p = pods.first()?;
        (p["status"]["phase"] == "Running" && p["spec"]["nodeName"] == node.as_str()).then_some(())
    });
    eventually(LONG, "the group modelled on its ready GPU node", || {
        let plan = hub.plan("gpu")?;
        (group(&plan, id)?["template"] == "node" && group_health(&plan, id)?["ready"] == 1)
            .then_some(())
    });
    let refused = refused_hub_requests(cp);
    assert!(refused.is_empty(), "refused: {refused:?}");
    hub.stop();
}

fn priority_config_map(namespace: &str, first: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-autoscaler-priority-expander\n  namespace: {namespace}\ndata:\n  priorities: |\n    50:\n    - .*/{first}$\n    10:\n    - .*\n"
    )
}

/// Issue 24, point 6: the priority expander reads its ConfigMap from the autoscaler's own
/// namespace (openshift-machine-api on OpenShift) only; a tenant's copy elsewhere steers
/// nothing and is warned about.
#[test]
fn a_tenants_priority_config_map_steers_nothing() {
    let cps = up(&["prio"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    for set in ["cheap", "dear"] {
        cp.apply(&openshift_machine_set("prio", set, 0, 0, 2, 4));
    }
    cp.kubectl(&["create", "namespace", "team-a"]);
    cp.apply(&priority_config_map(NS, "cheap"));
    cp.apply(&priority_config_map("team-a", "dear"));
    let (hub, _dir) = hub_for(
        cp,
        "[defaults]\nexpanders = [\"priority\", \"least-waste\"]\n",
    );
    cp.apply(&deployment("web", 1, "2"));
    eventually(LONG, "the web pod running", || {
        (running_pods(cp, "web") == 1).then_some(())
    });
    let replicas = |set: &str| {
        cp.get(&["machinesets.machine.openshift.io", "-n", NS, set])["spec"]["replicas"].as_i64()
    };
    assert_eq!((replicas("cheap"), replicas("dear")), (Some(1), Some(0)));
    let plan = hub.plan("prio").unwrap();
    let warned = plan["warnings"].as_array().into_iter().flatten().any(|w| {
        w.as_str().is_some_and(|w| {
            w.contains("ConfigMap team-a/cluster-autoscaler-priority-expander is ignored")
        })
    });
    assert!(warned, "{}", plan["warnings"]);
    hub.stop();
}
