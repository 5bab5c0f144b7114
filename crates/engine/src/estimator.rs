//! The binpacking estimator: how many new nodes of a group the pending pods need, by
//! first-fit decreasing onto fresh copies of the group's template.
//!
//! Pods are taken largest first (score = cpu/allocatable cpu + memory/allocatable memory of
//! the template). Each pod tries the nodes already added in this estimate, else a new one.
//! For pods whose failures cannot turn into successes later (no pod affinity, no spread),
//! a cursor per pod class skips the nodes that class already failed on, so an estimate costs
//! about pods + nodes checks instead of pods × nodes.

use std::sync::Arc;

use super::simulator::{PodShape, SimNode, SimNodeKind, Simulator};
use super::template::TemplateNode;

/// A pending pod as the estimator sees it.
pub struct Candidate<'a> {
    /// Position in the caller's pending list.
    pub index: usize,
    /// Pods with the same class are interchangeable for scheduling.
    pub class: usize,
    pub shape: &'a PodShape,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// New nodes that received at least one pod.
    pub node_count: u64,
    /// `Candidate::index` of the pods placed, and of those left over.
    pub placed: Vec<usize>,
    pub unplaced: Vec<usize>,
    /// True when pods were left over because `cap` nodes were reached.
    pub capped: bool,
    /// Simulator indices of the nodes added.
    pub nodes: Vec<usize>,
}

/// Packs `candidates` onto at most `cap` new nodes of `group`. The nodes and placements stay
/// in the simulator: mark before and revert after to only evaluate.
pub fn estimate(
    sim: &mut Simulator,
    group: usize,
    group_name: &str,
    template: &TemplateNode,
    candidates: &[Candidate],
    cap: u64,
) -> Estimate {
    let order = decreasing(candidates, template);
    let classes = candidates.iter().map(|c| c.class + 1).max().unwrap_or(0);
    let mut cursor = vec![0usize; classes];
    let mut stopped = vec![false; classes];
    let mut out = Estimate::default();
    for c in order {
        if stopped[c.class] {
            out.unplaced.push(c.index);
            continue;
        }
        let monotonic = Simulator::failures_are_monotonic(c.shape);
        match place_on_added(sim, &out.nodes, c, monotonic, &mut cursor[c.class]) {
            Some(_) => out.placed.push(c.index),
            None if out.nodes.len() as u64 >= cap => {
                out.capped = true;
                out.unplaced.push(c.index);
            }
            None => {
                let mark = sim.mark();
                let name: Arc<str> = format!("{group_name}-new-{}", out.nodes.len() + 1).into();
                let node = sim.add_node(SimNode::from_template(
                    template,
                    name,
                    SimNodeKind::New(group),
                ));
                if sim.fits(c.shape, node).is_ok() {
                    sim.place(c.shape, node);
                    out.nodes.push(node);
                    out.placed.push(c.index);
                } else {
                    // Not even a fresh node takes it: adding more would not help this class.
                    sim.revert(mark);
                    stopped[c.class] = true;
                    out.unplaced.push(c.index);
                }
            }
        }
    }
    out.node_count = out.nodes.len() as u64;
    out
}

/// Packs `candidates` first-fit decreasing onto the given nodes only (a committed scale-up,
/// possibly split over several groups). Returns `(candidate index, node)` for each pod
/// placed, and the candidate indices of those that found no room.
pub fn pack_onto(
    sim: &mut Simulator,
    nodes: &[usize],
    template: &TemplateNode,
    candidates: &[Candidate],
) -> (Vec<(usize, usize)>, Vec<usize>) {
    let classes = candidates.iter().map(|c| c.class + 1).max().unwrap_or(0);
    let mut cursor = vec![0usize; classes];
    let (mut placed, mut unplaced) = (Vec::new(), Vec::new());
    for c in decreasing(candidates, template) {
        let monotonic = Simulator::failures_are_monotonic(c.shape);
        match place_on_added(sim, nodes, c, monotonic, &mut cursor[c.class]) {
            Some(node) => placed.push((c.index, node)),
            None => unplaced.push(c.index),
        }
    }
    (placed, unplaced)
}

/// Largest first: score = cpu/allocatable cpu + memory/allocatable memory of the template.
/// Stable, so equal scores keep the caller's order (priority, then age).
fn decreasing<'c, 'a>(
    candidates: &'c [Candidate<'a>],
    template: &TemplateNode,
) -> Vec<&'c Candidate<'a>> {
    let score = |c: &Candidate| {
        let alloc = &template.allocatable;
        let r = &c.shape.spec.requests;
        ratio(r.cpu_milli, alloc.cpu_milli) + ratio(r.memory, alloc.memory)
    };
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by(|a, b| score(b).total_cmp(&score(a)));
    order
}

fn place_on_added(
    sim: &mut Simulator,
    added: &[usize],
    c: &Candidate,
    monotonic: bool,
    cursor: &mut usize,
) -> Option<usize> {
    let start = if monotonic { *cursor } else { 0 };
    for (k, &node) in added.iter().enumerate().skip(start) {
        if sim.fits(c.shape, node).is_ok() {
            sim.place(c.shape, node);
            return Some(node);
        }
        if monotonic {
            *cursor = k + 1;
        }
    }
    None
}

fn ratio(a: i64, b: i64) -> f64 {
    if b <= 0 { 0.0 } else { a as f64 / b as f64 }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::fixtures::{pod, snapshot};
    use crate::template::TemplateSource;
    use fleetscaler_model::resources::Resources;

    fn template(cpu_milli: i64, mem_gib: i64) -> TemplateNode {
        let alloc = Resources::new(cpu_milli, mem_gib << 30);
        TemplateNode {
            source: TemplateSource::Annotations,
            from: None,
            labels: Default::default(),
            platform: None,
            taints: Arc::from([]),
            capacity: alloc.clone(),
            allocatable: alloc,
            max_pods: 110,
            daemon_requests: Resources::new(100, 0),
            daemon_pods: 1,
            daemon_ports: vec![],
            attach_limits: Arc::from([]),
            dra_devices: Default::default(),
        }
    }

    fn shapes(specs: &[(&str, &str)]) -> Vec<PodShape> {
        let s = snapshot(specs.iter().enumerate().map(|(i, (cpu, app))| {
            pod(&format!("p{i}"))
                .cpu(cpu)
                .label("app", app)
                .unschedulable()
                .json()
        }));
        s.pods.iter().map(PodShape::from).collect()
    }

    #[test]
    fn first_fit_decreasing_with_daemonset_overhead() {
        // 4 cores, 100m taken by a DaemonSet: 1950m + 1950m fill one node; 3 x 1000m need a second.
        let shapes = shapes(&[
            ("1000m", "a"),
            ("1950m", "b"),
            ("1000m", "a"),
            ("1950m", "b"),
            ("1000m", "a"),
        ]);
        let candidates: Vec<Candidate> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| Candidate {
                index: i,
                class: usize::from(i % 2 == 1),
                shape: s,
            })
            .collect();
        let mut sim = Simulator::new(HashMap::new());
        let e = estimate(&mut sim, 0, "g", &template(4000, 16), &candidates, 10);
        assert_eq!(e.node_count, 2);
        assert_eq!(e.placed.len(), 5);
        assert!(!e.capped);
        assert_eq!(sim.node(e.nodes[0]).requested.cpu_milli, 4000);
    }

    #[test]
    fn cap_leaves_pods_unplaced() {
        let shapes = shapes(&[("3", "a"), ("3", "a"), ("3", "a")]);
        let candidates: Vec<Candidate> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| Candidate {
                index: i,
                class: 0,
                shape: s,
            })
            .collect();
        let mut sim = Simulator::new(HashMap::new());
        let mark = sim.mark();
        let e = estimate(&mut sim, 0, "g", &template(4000, 16), &candidates, 2);
        assert_eq!(
            (e.node_count, e.placed.len(), e.unplaced.len(), e.capped),
            (2, 2, 1, true)
        );
        sim.revert(mark);
        assert!(sim.nodes().is_empty());
    }

    #[test]
    fn pods_that_fit_no_fresh_node_do_not_add_nodes() {
        let shapes = shapes(&[("8", "a"), ("1", "b")]);
        let candidates: Vec<Candidate> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| Candidate {
                index: i,
                class: i,
                shape: s,
            })
            .collect();
        let mut sim = Simulator::new(HashMap::new());
        let e = estimate(&mut sim, 0, "g", &template(4000, 16), &candidates, 10);
        assert_eq!(
            (e.node_count, e.placed.clone(), e.unplaced.clone()),
            (1, vec![1], vec![0])
        );
    }
}
