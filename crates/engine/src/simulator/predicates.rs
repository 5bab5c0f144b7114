//! The scheduler's filter predicates, in the order of their cost: node state, pod count,
//! resources, node selection, taints, host ports, then the topology predicates (inter-pod
//! affinity, anti-affinity both ways, topology spread) read from the topology index.

use super::placed::Placed;
use super::topology::Topology;
use super::{PodShape, SimNode};
use crate::reason::{ReasonCode, Unfit};
use fleetscaler_model::resources::Shortfall;
use fleetscaler_model::scheduling::untolerated_taint;

pub(super) fn check_static(pod: &PodShape, node: &SimNode, explain: bool) -> Result<(), Unfit> {
    let spec = &pod.spec;
    let fail = |code, message: &dyn Fn() -> String| Err(Unfit::lazy(code, explain, message));
    if node.unschedulable {
        return fail(ReasonCode::NodeUnschedulable, &|| {
            "node is cordoned (unschedulable)".into()
        });
    }
    if node.pods >= node.max_pods {
        return fail(ReasonCode::TooManyPods, &|| {
            format!("node already runs {} of {} pods", node.pods, node.max_pods)
        });
    }
    if let Some((name, requested, free)) = spec
        .requests
        .first_short(&node.allocatable, &node.requested)
    {
        return fail(ReasonCode::InsufficientResources, &|| {
            let short = Shortfall {
                resource: name.into(),
                requested,
                available: free.max(0),
            };
            short.describe()
        });
    }
    for (k, v) in spec.node_selector.iter() {
        let actual = node.labels.get(k);
        if actual != Some(v) {
            return fail(ReasonCode::NodeSelectorMismatch, &|| {
                let has = actual.map_or_else(|| format!("no {k} label"), |a| format!("{k}={a}"));
                format!("nodeSelector {k}={v} does not match (node has {has})")
            });
        }
    }
    if let Some(affinity) = &spec.node_affinity
        && !affinity.matches(&node.labels, &node.name)
    {
        return fail(ReasonCode::NodeAffinityMismatch, &|| {
            let first = affinity.terms.first().map(|t| {
                let reqs: Vec<String> = t
                    .match_labels
                    .iter()
                    .chain(&t.match_name)
                    .map(|r| r.to_string())
                    .collect();
                reqs.join(", ")
            });
            format!(
                "required node affinity ({}) does not match the node's labels",
                first.unwrap_or_default()
            )
        });
    }
    if let Some(taint) = untolerated_taint(&node.taints, &spec.tolerations) {
        return fail(ReasonCode::UntoleratedTaint, &|| {
            format!("untolerated taint {taint}")
        });
    }
    if let Some(port) = spec
        .host_ports
        .iter()
        .find(|p| node.host_ports.iter().any(|q| q.conflicts_with(p)))
    {
        return fail(ReasonCode::HostPortConflict, &|| {
            format!("host port {port} is already taken")
        });
    }
    if let Some(volumes) = &pod.volumes
        && let Err((code, message)) = volumes.check(node)
    {
        return fail(code, &|| message.clone());
    }
    Ok(())
}

pub(super) fn check_topology(
    pod: &PodShape,
    node_idx: usize,
    nodes: &[SimNode],
    pods_on: &Placed,
    topology: &mut Topology,
    explain: bool,
) -> Result<(), Unfit> {
    let spec = &pod.spec;
    let uses_index = !spec.affinity.is_empty()
        || !spec.anti_affinity.is_empty()
        || !spec.spread.is_empty()
        || !topology.anti.is_empty();
    if !uses_index {
        return Ok(());
    }
    let node = &nodes[node_idx];
    topology.resolve(pod, nodes, pods_on);
    let topology = &*topology;
    let Some(shape) = topology.shape(pod) else {
        return Ok(());
    };
    let lazy = |code, message: &dyn Fn() -> String| Err(Unfit::lazy(code, explain, message));
    // The first pod of a group that requires itself may go anywhere, as the scheduler
    // allows: when no pod matches any of its terms, and it matches all of them itself.
    let first_of_its_kind = shape
        .affinity
        .iter()
        .all(|&ci| topology.counters[ci].total == 0)
        && spec.affinity.iter().all(|t| topology.term_matches(t, pod));
    for (term, &ci) in spec.affinity.iter().zip(&shape.affinity) {
        let counter = &topology.counters[ci];
        let Some(domain) = node.label(&term.topology_key) else {
            return lazy(ReasonCode::PodAffinityUnsatisfied, &|| {
                format!(
                    "node has no {} label for pod affinity ({})",
                    term.topology_key,
                    describe(&term.selector)
                )
            });
        };
        let here = counter.counts.get(domain).copied().unwrap_or(0);
        if here == 0 && !first_of_its_kind {
            return lazy(ReasonCode::PodAffinityUnsatisfied, &|| {
                format!(
                    "no pod matching {} runs in {}={domain}",
                    describe(&term.selector),
                    term.topology_key
                )
            });
        }
    }
    for (term, &ci) in spec.anti_affinity.iter().zip(&shape.anti_affinity) {
        let Some(domain) = node.label(&term.topology_key) else {
            continue;
        };
        if topology.counters[ci]
            .counts
            .get(domain)
            .copied()
            .unwrap_or(0)
            > 0
        {
            return lazy(ReasonCode::PodAntiAffinityConflict, &|| {
                format!(
                    "a pod matching {} already runs in {}={domain}",
                    describe(&term.selector),
                    term.topology_key
                )
            });
        }
    }
    for &ai in &shape.symmetric {
        let owner = &topology.anti[ai];
        let Some(domain) = node.label(&owner.term.topology_key) else {
            continue;
        };
        if owner.counts.get(domain).copied().unwrap_or(0) > 0 {
            return lazy(ReasonCode::PodAntiAffinityConflict, &|| {
                format!(
                    "an existing pod's anti-affinity ({}) keeps matching pods out of {}={domain}",
                    describe(&owner.term.selector),
                    owner.term.topology_key
                )
            });
        }
    }
    for &si in &shape.spread {
        let counter = &topology.spreads[si];
        let c = &counter.constraint;
        let Some(domain) = node.label(&c.topology_key) else {
            return lazy(ReasonCode::TopologySpreadViolated, &|| {
                format!(
                    "node has no {} label, required by a topology spread constraint",
                    c.topology_key
                )
            });
        };
        let self_match = u32::from(c.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)));
        let here = counter.count(domain) + self_match;
        let min = counter.global_min();
        if i64::from(here) - i64::from(min) > i64::from(c.max_skew) {
            return lazy(ReasonCode::TopologySpreadViolated, &|| {
                format!(
                    "{}={domain} would hold {here} matching pods against a minimum of {min} (maxSkew {})",
                    c.topology_key, c.max_skew
                )
            });
        }
    }
    Ok(())
}

fn describe(selector: &Option<fleetscaler_model::LabelSelector>) -> String {
    selector
        .as_ref()
        .map_or("<none>".to_string(), |s| s.to_string())
}
