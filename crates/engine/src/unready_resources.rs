//! Nodes that are up but whose special resources are not: upstream's custom resources
//! processors (`FilterOutNodesWithUnreadyResources`) count them as not ready, so that they
//! are neither copied into a template nor removed as idle while a driver installs, and
//! scale-up waits for them as nodes still starting.
//!
//! GPUs, as upstream's `GpuCustomResourcesProcessor`: a node with the Cluster API GPU label
//! (`cluster-api/accelerator`) but no GPU in its allocatable. fleetscaler also counts a node
//! whose group declares GPUs in its scale-from-zero annotations (`gpu-count`, OpenShift's
//! `machine.openshift.io/GPU`) or its infrastructure template: OpenShift's GPU nodes seldom
//! carry the label, and without this a GPU-less node would be copied into the group's
//! template, so that GPU pods would trigger nothing.

use std::sync::Arc;

use fleetscaler_model::node::Node;
use fleetscaler_model::resources::is_gpu_resource;
use fleetscaler_model::{ClusterSnapshot, Warning, WarningCode};

use super::cluster_state::NodeReadiness;
use super::limits::NodeUsage;
use super::nodegroups::{NodeGroup, NodeGroups};
use super::template::{CAPACITY_PREFIX, GPU_LABEL, annotated_resources};
use super::unready_devices::Published;

/// Per snapshot node: whether it should have GPUs and advertises none yet (or DRA devices
/// its group's nodes publish, `unready_devices`, and has no slices of them), and what it
/// counts for against the cluster's limits: a node whose GPUs are pending counts the GPUs its
/// group declares, as upstream's `GetNodeGpuTarget` reads them from the group's template.
pub fn assess(snapshot: &ClusterSnapshot, groups: &NodeGroups) -> (Vec<bool>, Vec<NodeUsage>) {
    let declared: Vec<Option<(Arc<str>, i64)>> = groups
        .groups
        .iter()
        .map(|g| declared_gpus(snapshot, g))
        .collect();
    let published = Published::index(snapshot);
    let drivers: Vec<Vec<Arc<str>>> = groups
        .groups
        .iter()
        .map(|g| published.expected(snapshot, g))
        .collect();
    let mut pending = Vec::with_capacity(snapshot.nodes.len());
    let mut usage = Vec::with_capacity(snapshot.nodes.len());
    for (node, g) in snapshot.nodes.iter().zip(&groups.group_of_node) {
        let declared = g.and_then(|g| declared[g].as_ref());
        let expected = g.map_or(&[][..], |g| &drivers[g][..]);
        let waiting = gpus_pending(node, declared.is_some()) || published.pending(node, expected);
        let mut u = NodeUsage::of_node(node);
        if let Some((name, count)) = declared.filter(|_| waiting) {
            u = u.with_gpus(node.labels.get_arc(GPU_LABEL).unwrap_or(name), *count);
        }
        pending.push(waiting);
        usage.push(u);
    }
    (pending, usage)
}

/// Whether the group's nodes are declared to have GPUs.
pub fn declares_gpus(snapshot: &ClusterSnapshot, group: &NodeGroup) -> bool {
    declared_gpus(snapshot, group).is_some()
}

/// The GPUs the group declares its nodes have: the resource and how many.
fn declared_gpus(snapshot: &ClusterSnapshot, group: &NodeGroup) -> Option<(Arc<str>, i64)> {
    let resources = annotated_resources(snapshot, group);
    let count = |value: &str| value.trim().parse::<i64>().ok().filter(|n| *n > 0);
    let annotated = resources.iter().find_map(|r| {
        let n = r
            .annotation(&format!("{CAPACITY_PREFIX}gpu-count"))
            .or_else(|| r.annotation("machine.openshift.io/GPU"))
            .and_then(count)?;
        let kind = r
            .annotation(&format!("{CAPACITY_PREFIX}gpu-type"))
            .map_or("nvidia.com/gpu", str::trim);
        Some((Arc::from(kind), n))
    });
    annotated.or_else(|| {
        resources
            .iter()
            .filter_map(|r| r.infrastructure_ref.as_ref())
            .filter_map(|reference| snapshot.infrastructure_template(reference))
            .flat_map(|t| &t.capacity)
            .find(|(name, q)| is_gpu_resource(name) && q.units_ceil() > 0)
            .map(|(name, q)| (name.clone(), q.units_ceil()))
    })
}

/// The node should have GPUs and advertises none yet: its driver is still installing.
pub fn gpus_pending(node: &Node, group_declares_gpus: bool) -> bool {
    (group_declares_gpus || node.labels.contains_key(GPU_LABEL))
        && node.allocatable.gpu_count() == 0
}

/// Nodes listed by name in one warning, at most.
const NAMED: usize = 5;

/// One warning per group with nodes still without their GPUs past the startup time: they
/// count as unready (and may be removed as such), which the user must hear about.
pub fn gpus_still_missing(
    snapshot: &ClusterSnapshot,
    groups: &NodeGroups,
    readiness: &[NodeReadiness],
    pending: &[bool],
) -> Vec<Warning> {
    let mut by_group: Vec<Vec<&str>> = vec![Vec::new(); groups.groups.len()];
    for (i, node) in snapshot.nodes.iter().enumerate() {
        if let Some(g) = groups.group_of_node[i]
            && pending[i]
            && readiness[i] == NodeReadiness::Unready
        {
            by_group[g].push(&node.name);
        }
    }
    groups
        .groups
        .iter()
        .zip(by_group)
        .filter(|(_, names)| !names.is_empty())
        .map(|(g, names)| {
            let shown = names.iter().take(NAMED).copied().collect::<Vec<_>>().join(", ");
            let more = names.len().saturating_sub(NAMED);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            Warning::about(
                WarningCode::ResourcesNotReady,
                &g.id,
                format!(
                    "{} node(s) ({shown}{more}) should have GPUs (the {GPU_LABEL} label or the group's declared GPUs) or DRA devices (the ResourceSlices of the drivers the group's other nodes publish) but advertise none past the startup time: they count as unready, are never copied into the group's template, and may be removed as unready; check the GPU or DRA driver (operator) on them, or the group's capacity annotations",
                    names.len()
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::fixtures::{group_node, machineset, node, snapshot};
    use crate::{EngineState, Settings, run_once};
    use jiff::Timestamp;

    const NOW: &str = "2026-11-22T10:00:00Z";

    fn plan(items: Vec<serde_json::Value>) -> crate::Plan {
        run_once(
            &snapshot(items),
            &mut EngineState::default(),
            &Settings::default(),
            NOW.parse().unwrap(),
        )
    }

    fn minutes_ago(m: i64) -> String {
        let now: Timestamp = NOW.parse().unwrap();
        (now - jiff::SignedDuration::from_mins(m)).to_string()
    }

    /// A GPU group with one node Ready since `age` minutes whose GPU is not advertised.
    fn installing(
        age: i64,
        group: crate::fixtures::MachineSetBuilder,
        labelled: bool,
    ) -> crate::Plan {
        let mut n = node("gpu-0").created(&minutes_ago(age));
        if labelled {
            n = n.label("cluster-api/accelerator", "nvidia-t4");
        }
        let mut items = vec![group.json()];
        items.extend(group_node("gpu-0", "gpu", n));
        plan(items)
    }

    fn gpu_group() -> crate::fixtures::MachineSetBuilder {
        machineset("gpu", 0, 4, 1)
            .capacity("4", "16Gi")
            .annotation("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "1")
    }

    #[test]
    fn a_labelled_node_without_its_gpus_is_starting_not_a_template() {
        let p = installing(5, machineset("gpu", 0, 4, 1), true);
        assert_eq!(p.health.cluster.not_started, 1);
        assert_eq!(p.health.cluster.ready, 0);
        // No annotations either: no template at all rather than a GPU-less one.
        assert!(
            p.node_groups[0].template != crate::template::TemplateSource::Node,
            "{:?}",
            p.node_groups[0]
        );
        assert!(p.unneeded.is_empty(), "{:?}", p.unneeded);
    }

    #[test]
    fn the_groups_declared_gpus_count_without_the_label() {
        let p = installing(5, gpu_group(), false);
        assert_eq!(p.health.cluster.not_started, 1);
        assert_eq!(
            p.node_groups[0].template,
            crate::template::TemplateSource::Annotations
        );
    }

    #[test]
    fn a_node_advertising_its_gpus_is_ready() {
        let mut items = vec![gpu_group().json()];
        let n = node("gpu-0")
            .created(&minutes_ago(5))
            .label("cluster-api/accelerator", "nvidia-t4")
            .resource("nvidia.com/gpu", "1");
        items.extend(group_node("gpu-0", "gpu", n));
        let p = plan(items);
        assert_eq!(p.health.cluster.ready, 1);
        assert_eq!(
            p.node_groups[0].template,
            crate::template::TemplateSource::Node
        );
    }

    #[test]
    fn past_the_startup_time_it_is_unready_and_said_so() {
        let p = installing(30, gpu_group(), true);
        assert_eq!(p.health.cluster.unready, 1);
        let warnings: Vec<String> = p.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("1 node(s) (gpu-0) should have GPUs")
                    && w.contains("MachineSet.machine.openshift.io/openshift-machine-api/gpu")),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_cpu_group_is_untouched() {
        let mut items = vec![machineset("cpu", 0, 4, 1).json()];
        items.extend(group_node(
            "cpu-0",
            "cpu",
            node("cpu-0").created(&minutes_ago(5)),
        ));
        let p = plan(items);
        assert_eq!(p.health.cluster.ready, 1);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }
}
