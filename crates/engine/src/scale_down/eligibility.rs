//! Which nodes are scale-down candidates: autoscaled, not protected, not being removed, and
//! underutilized. Utilization is requests over allocatable, the larger of CPU and memory;
//! on a GPU node, GPU requests over GPU allocatable alone (with its own threshold).

use std::sync::Arc;

use jiff::Timestamp;

use super::ScaleDownInput;
use crate::cluster_state::NodeReadiness;
use crate::plan::NotRemovable;
use crate::reason::ReasonCode;
use crate::template::GPU_LABEL;
use fleetscaler_model::node::Node;
use fleetscaler_model::pod::Pod;
use fleetscaler_model::resources::Resources;

/// A node that may be removed if its pods can go elsewhere.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    /// Index in `snapshot.nodes`.
    pub node: usize,
    pub group: usize,
    pub utilization: f64,
    /// What utilization was measured on (`cpu`, `memory`, `GPU`), and the threshold it met.
    pub measured_on: &'static str,
    pub threshold: f64,
    pub ready: bool,
}

/// A node whose utilization cannot be measured: nothing to divide by.
#[derive(Debug, thiserror::Error)]
#[error("node {node} reports no allocatable CPU or memory")]
pub(super) struct NoAllocatable {
    node: Arc<str>,
}

/// Utilization of a node, and what it was measured on (`cpu`, `memory`, `GPU`).
/// Pods below the priority cutoff do not count: they never keep a node.
pub(super) fn utilization(
    node: &Node,
    pods: &[&Pod],
    ignore_daemonsets: bool,
    priority_threshold: i32,
    now: Timestamp,
) -> Result<(f64, &'static str), NoAllocatable> {
    let mut requested = Resources::default();
    let mut daemons = Resources::default();
    // As upstream's utilization.Calculate: a long-terminating pod is as good as gone.
    for p in pods
        .iter()
        .filter(|p| !p.is_expendable(priority_threshold) && !p.is_long_terminating(now))
    {
        if p.is_daemonset() && ignore_daemonsets {
            daemons.add(p.requests());
        } else {
            requested.add(p.requests());
        }
    }
    let gpu_node = node.allocatable.gpu_count() > 0 || node.labels.contains_key(GPU_LABEL);
    if gpu_node {
        let alloc = node.allocatable.gpu_count();
        // A GPU node whose GPUs are not reported yet counts as unused.
        let used = if alloc > 0 {
            requested.gpu_count() as f64 / alloc as f64
        } else {
            0.0
        };
        return Ok((used, "GPU"));
    }
    let mut alloc = node.allocatable.clone();
    alloc.sub(&daemons);
    if alloc.cpu_milli <= 0 || alloc.memory <= 0 {
        return Err(NoAllocatable {
            node: node.name.clone(),
        });
    }
    let cpu = requested.cpu_milli as f64 / alloc.cpu_milli as f64;
    let mem = requested.memory as f64 / alloc.memory as f64;
    Ok(if cpu >= mem {
        (cpu, "cpu")
    } else {
        (mem, "memory")
    })
}

/// Splits the nodes into candidates and nodes that stay (with why).
pub(super) fn candidates(
    input: &ScaleDownInput,
    pods_on: &[Vec<&Pod>],
) -> (Vec<Candidate>, Vec<NotRemovable>) {
    let mut out = Vec::new();
    let mut stays = Vec::new();
    // Once per group, not per node: a group of a thousand nodes has one rollout state.
    let rollouts: Vec<Option<String>> = input
        .groups
        .groups
        .iter()
        .map(|g| super::rollout::rolling_out(input.snapshot, g))
        .collect();
    for (i, node) in input.snapshot.nodes.iter().enumerate() {
        match check(input, i, node, &pods_on[i], &rollouts) {
            Ok(Some(c)) => out.push(c),
            Ok(None) => {}
            Err((code, message)) => stays.push(NotRemovable {
                node: node.name.clone(),
                code,
                message,
            }),
        }
    }
    (out, stays)
}

fn check(
    input: &ScaleDownInput,
    i: usize,
    node: &Node,
    pods: &[&Pod],
    rollouts: &[Option<String>],
) -> Result<Option<Candidate>, (ReasonCode, String)> {
    let settings = input.settings;
    match input.cluster.readiness[i] {
        NodeReadiness::Deleting => {
            return Err((
                ReasonCode::CurrentlyBeingDeleted,
                "the node is already being removed".into(),
            ));
        }
        // Not started yet: neither a candidate nor worth a reason.
        NodeReadiness::NotStarted => return Ok(None),
        NodeReadiness::Ready | NodeReadiness::Unready => {}
    }
    let Some(group) = input.groups.group_of_node[i] else {
        return Err((
            ReasonCode::NotAutoscaled,
            "the node belongs to no autoscaled node group".into(),
        ));
    };
    // As upstream's pre-filter: a group at its min offers no candidates at all, so its
    // nodes are neither unneeded nor counted as scale-down candidates.
    let (g, gs) = (&input.groups.groups[group], &input.cluster.groups[group]);
    if gs.target.saturating_sub(gs.deleting) <= g.min {
        return Err((
            ReasonCode::NodeGroupMinSizeReached,
            format!("its node group {} is at its min size {}", g.id, g.min),
        ));
    }
    if let Some(why) = &rollouts[group] {
        return Err((ReasonCode::NodeGroupRollingOut, why.clone()));
    }
    if node.scale_down_disabled {
        return Err((
            ReasonCode::ScaleDownDisabledAnnotation,
            "the node is annotated cluster-autoscaler.kubernetes.io/scale-down-disabled: \"true\""
                .into(),
        ));
    }
    if let Some(why) = &input.cluster.groups[group].scale_down_block {
        return Err((ReasonCode::NodeGroupSizeUnexplained, why.clone()));
    }
    let (used, on) = utilization(
        node,
        pods,
        g.options.ignore_daemonsets_utilization(settings),
        settings.pod_priority_threshold,
        input.now,
    )
    .map_err(|e| (ReasonCode::UtilizationUnknown, e.to_string()))?;
    let threshold = if on == "GPU" {
        g.options.gpu_utilization_threshold(settings)
    } else {
        g.options.utilization_threshold(settings)
    };
    if used > threshold {
        return Err((
            ReasonCode::NotUnderutilized,
            format!("utilization {used:.2} ({on}) is above the threshold {threshold}"),
        ));
    }
    Ok(Some(Candidate {
        node: i,
        group,
        utilization: used,
        measured_on: on,
        threshold,
        ready: input.cluster.readiness[i] == NodeReadiness::Ready,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{node, pod, snapshot};

    #[test]
    fn upstream_example_daemonset_utilization() {
        // 1000m node, 100m app pod + 500m DaemonSet pod.
        let s = snapshot([
            node("n").cpu("1").mem("1Gi").json(),
            pod("app").cpu("100m").on("n").json(),
            pod("ds")
                .cpu("500m")
                .owner("DaemonSet", "agent")
                .on("n")
                .json(),
        ]);
        let pods: Vec<&Pod> = s.pods.iter().collect();
        let (ignoring, _) =
            utilization(&s.nodes[0], &pods, true, -10, Timestamp::UNIX_EPOCH).unwrap();
        assert!((ignoring - 0.2).abs() < 1e-9, "100/(1000-500)");
        let (counting, on) =
            utilization(&s.nodes[0], &pods, false, -10, Timestamp::UNIX_EPOCH).unwrap();
        assert!((counting - 0.6).abs() < 1e-9);
        assert_eq!(on, "cpu");
    }

    #[test]
    fn pods_below_the_priority_cutoff_do_not_count() {
        let s = snapshot([
            node("n").json(),
            pod("batch").cpu("3").priority(-100).on("n").json(),
        ]);
        let pods: Vec<&Pod> = s.pods.iter().collect();
        assert_eq!(
            utilization(&s.nodes[0], &pods, false, -10, Timestamp::UNIX_EPOCH)
                .unwrap()
                .0,
            0.0
        );
        assert_eq!(
            utilization(&s.nodes[0], &pods, false, -200, Timestamp::UNIX_EPOCH)
                .unwrap()
                .0,
            0.75
        );
    }

    #[test]
    fn gpu_nodes_use_gpu_utilization_and_memory_can_dominate() {
        let s = snapshot([
            node("gpu").resource("nvidia.com/gpu", "4").json(),
            pod("train")
                .cpu("4")
                .request("nvidia.com/gpu", "1")
                .on("gpu")
                .json(),
        ]);
        let pods: Vec<&Pod> = s.pods.iter().collect();
        assert_eq!(
            utilization(&s.nodes[0], &pods, false, -10, Timestamp::UNIX_EPOCH).unwrap(),
            (0.25, "GPU")
        );
        let s = snapshot([
            node("n").json(),
            pod("big").cpu("1").mem("12Gi").on("n").json(),
        ]);
        let pods: Vec<&Pod> = s.pods.iter().collect();
        assert_eq!(
            utilization(&s.nodes[0], &pods, false, -10, Timestamp::UNIX_EPOCH).unwrap(),
            (0.75, "memory")
        );
        let s = snapshot([node("empty").cpu("0").json()]);
        assert!(utilization(&s.nodes[0], &[], false, -10, Timestamp::UNIX_EPOCH).is_err());
    }

    /// Upstream's `utilization.Calculate` leaves DaemonSet pods out with
    /// --ignore-daemonsets-utilization, whatever makes them DaemonSet pods: the owner or
    /// the `daemonset-pod: "true"` annotation.
    #[test]
    fn a_pod_marked_as_a_daemonset_pod_is_left_out_with_ignore_daemonsets() {
        let mut marked = pod("agent").cpu("2").on("n").json();
        marked["metadata"]["annotations"] =
            serde_json::json!({"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"});
        let s = snapshot(vec![node("n").cpu("8").json(), marked]);
        let pods: Vec<&Pod> = s.pods.iter().collect();
        let (counted, _) =
            utilization(&s.nodes[0], &pods, false, 0, Timestamp::UNIX_EPOCH).unwrap();
        let (ignored, _) = utilization(&s.nodes[0], &pods, true, 0, Timestamp::UNIX_EPOCH).unwrap();
        assert!((counted - 0.25).abs() < 1e-9, "{counted}");
        assert_eq!(ignored, 0.0);
    }

    /// Upstream's utilization.Calculate skips long-terminating pods.
    #[test]
    fn a_long_terminating_pod_does_not_count() {
        let mut going = pod("going").cpu("4").on("n").json();
        going["metadata"]["deletionTimestamp"] = serde_json::json!("2026-11-22T10:00:00Z");
        going["spec"]["terminationGracePeriodSeconds"] = serde_json::json!(0);
        let s = snapshot(vec![node("n").cpu("8").json(), going]);
        let pods: Vec<&Pod> = s.pods.iter().collect();
        let at = |t: &str| t.parse::<Timestamp>().unwrap();
        let (soon, _) =
            utilization(&s.nodes[0], &pods, false, 0, at("2026-11-22T10:00:20Z")).unwrap();
        let (late, _) =
            utilization(&s.nodes[0], &pods, false, 0, at("2026-11-22T10:00:40Z")).unwrap();
        assert!((soon - 0.5).abs() < 1e-9, "{soon}");
        assert_eq!(late, 0.0);
    }
}
