//! The scheduling simulation: the cluster's nodes (and the template copies the engine
//! imagines: upcoming nodes and new ones), with what is placed on them, and the scheduler's
//! filter predicates to ask whether a pod fits a node.
//!
//! Every change is an append (a node, a placement), so a [`Mark`] is two lengths and
//! [`Simulator::revert`] undoes everything after it in reverse: trying a node group's
//! scale-up costs only what it touches.

pub mod dra;
pub mod dra_cel;
mod placed;
mod predicates;
mod topology;
pub mod volumes;

use std::collections::HashMap;
use std::sync::Arc;

use fleetscaler_model::labels::Labels;
use fleetscaler_model::node::Node;
use fleetscaler_model::pod::{Pod, PodSpec};
use fleetscaler_model::resources::Resources;
use fleetscaler_model::scheduling::{HOSTNAME_LABEL, HostPort, Taint};

use super::cluster_state::NodeReadiness;
use super::csi::AttachLimits;
use super::dra_template::TemplateDevices;
use super::reason::Unfit;
use super::template::TemplateNode;
use dra::{DraIndex, DraNeeds};
use placed::Placed;
use topology::Topology;
use volumes::{VolumeIndex, VolumeNeeds};

/// Where a simulated node comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimNodeKind {
    /// A real node; the index is into `snapshot.nodes`.
    Existing(usize),
    /// A node its group is already asked for but that has not registered; index of the group.
    Upcoming(usize),
    /// A node a scale-up under evaluation would add; index of the group.
    New(usize),
}

#[derive(Clone, Debug)]
pub struct SimNode {
    pub name: Arc<str>,
    pub labels: Labels,
    /// The `kubernetes.io/hostname` domain: unique per node, also for template copies.
    pub hostname: Arc<str>,
    pub taints: Arc<[Taint]>,
    pub allocatable: Resources,
    pub requested: Resources,
    pub max_pods: i64,
    pub pods: i64,
    pub host_ports: Vec<HostPort>,
    pub unschedulable: bool,
    pub kind: SimNodeKind,
    /// Per CSI driver: how many of its volumes the node may attach.
    pub attach_limits: AttachLimits,
    /// Per CSI driver: the volumes of the pods placed on it.
    pub attached: Vec<(Arc<str>, i64)>,
    /// A template copy's node-local ResourceSlices (its source node's, or made from
    /// annotations); empty for a real node, whose slices the DRA index finds by name.
    pub dra_devices: Arc<TemplateDevices>,
}

impl SimNode {
    /// The node's value for a topology key; the hostname key is per node.
    pub fn label(&self, key: &str) -> Option<&Arc<str>> {
        if key == HOSTNAME_LABEL {
            Some(&self.hostname)
        } else {
            self.labels.get_arc(key)
        }
    }

    /// A real node, as it is now (its pods are placed separately).
    pub fn existing(index: usize, node: &Node) -> SimNode {
        SimNode {
            name: node.name.clone(),
            labels: node.labels.clone(),
            hostname: node
                .labels
                .get_arc(HOSTNAME_LABEL)
                .cloned()
                .unwrap_or_else(|| node.name.clone()),
            taints: node.taints.clone(),
            allocatable: node.allocatable.clone(),
            requested: Resources::default(),
            max_pods: node.max_pods,
            pods: 0,
            host_ports: Vec::new(),
            unschedulable: node.unschedulable,
            kind: SimNodeKind::Existing(index),
            attach_limits: Arc::from([]),
            attached: Vec::new(),
            dra_devices: Default::default(),
        }
    }

    /// A copy of a group's template: a fresh node running only its DaemonSet pods.
    pub fn from_template(template: &TemplateNode, name: Arc<str>, kind: SimNodeKind) -> SimNode {
        SimNode {
            hostname: name.clone(),
            name,
            labels: template.labels.clone(),
            taints: template.taints.clone(),
            allocatable: template.allocatable.clone(),
            requested: template.daemon_requests.clone(),
            max_pods: template.max_pods,
            pods: template.daemon_pods,
            host_ports: template.daemon_ports.clone(),
            unschedulable: false,
            kind,
            attach_limits: template.attach_limits.clone(),
            attached: Vec::new(),
            dra_devices: template.dra_devices.clone(),
        }
    }

    pub fn free(&self) -> Resources {
        let mut free = self.allocatable.clone();
        free.sub(&self.requested);
        free
    }
}

/// What the simulation needs of a pod: its namespace, labels and interned spec. Pods with
/// the same three are interchangeable for scheduling.
#[derive(Clone, Debug)]
pub struct PodShape {
    pub namespace: Arc<str>,
    pub labels: Labels,
    pub spec: Arc<PodSpec>,
    /// What its PersistentVolumeClaims ask of a node (`Simulator::shape` fills it in).
    pub volumes: Option<Arc<VolumeNeeds>>,
    /// What its ResourceClaims ask of a node (`Simulator::shape` fills it in).
    pub dra: Option<Arc<DraNeeds>>,
}

impl From<&Pod> for PodShape {
    fn from(p: &Pod) -> Self {
        PodShape {
            namespace: p.id.namespace.clone(),
            labels: p.labels.clone(),
            spec: p.spec.clone(),
            volumes: None,
            dra: None,
        }
    }
}

/// A point to return to with [`Simulator::revert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    nodes: usize,
    placed: usize,
}

/// The pods of the snapshot that are not finished, by the index of the node they are
/// bound to: built once per pass, for the base simulation and for scale-down.
pub fn pods_by_node(snapshot: &fleetscaler_model::ClusterSnapshot) -> Vec<Vec<&Pod>> {
    // Looked up once per pod of the cluster, every pass: foldhash, not SipHash.
    let index: HashMap<&str, usize, foldhash::fast::RandomState> = snapshot
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (&*n.name, i))
        .collect();
    let mut out = vec![Vec::new(); snapshot.nodes.len()];
    for p in snapshot.pods.iter().filter(|p| !p.is_terminal()) {
        if let Some(&i) = p.node_name.as_deref().and_then(|n| index.get(n)) {
            out[i].push(p);
        }
    }
    out
}

pub struct Simulator {
    nodes: Vec<SimNode>,
    /// Every placement (+1) and removal (-1) of a shape, in order; the topology index
    /// counts the net.
    log: Vec<(usize, usize, i32)>,
    /// The pods on each node now, for building new topology counters.
    placed: Placed,
    topology: Topology,
    volumes: VolumeIndex,
    dra: DraIndex,
    /// Existing nodes' attach limits, by node name (from their CSINodes).
    attach_limits: HashMap<Arc<str>, AttachLimits>,
}

impl Simulator {
    /// An empty simulation that knows the snapshot's namespace labels (for affinity terms
    /// with a namespace selector).
    pub fn for_snapshot(snapshot: &fleetscaler_model::ClusterSnapshot) -> Self {
        let mut sim = Simulator::new(
            snapshot
                .namespaces
                .iter()
                .map(|n| (n.name.clone(), n.labels.clone()))
                .collect(),
        );
        sim.volumes = VolumeIndex::build(snapshot);
        sim.dra = DraIndex::build(snapshot);
        sim.attach_limits = snapshot
            .storage
            .csi_nodes
            .iter()
            .map(|c| (c.name.clone(), crate::csi::limits_of(c)))
            .collect();
        sim
    }

    /// The cluster as both halves of a pass simulate it: every node that runs pods (ready or
    /// not; not nodes being removed, nor nodes not started yet, which scale-up counts as
    /// its upcoming template copies) with every pod on it that holds its space (pods below
    /// the priority cutoff do not: pending pods may preempt them). Built once per pass;
    /// scale-up works above a [`Mark`] and reverts to it, scale-down then starts from it.
    pub fn base(
        snapshot: &fleetscaler_model::ClusterSnapshot,
        pods_on: &[Vec<&Pod>],
        readiness: &[NodeReadiness],
        priority_cutoff: i32,
    ) -> Self {
        let mut sim = Simulator::for_snapshot(snapshot);
        for (i, node) in snapshot.nodes.iter().enumerate() {
            if !matches!(
                readiness.get(i),
                Some(NodeReadiness::Ready | NodeReadiness::Unready)
            ) {
                continue;
            }
            let at = sim.add_node(SimNode::existing(i, node));
            let holding = pods_on.get(i).into_iter().flatten();
            for pod in holding.filter(|p| !p.is_expendable(priority_cutoff)) {
                sim.place_pod(pod, at);
            }
        }
        sim
    }

    /// Snapshot node → simulator node, for a simulation made by [`Simulator::base`].
    pub fn existing_index(&self, snapshot_nodes: usize) -> Vec<Option<usize>> {
        let mut of = vec![None; snapshot_nodes];
        for (si, node) in self.nodes.iter().enumerate() {
            if let SimNodeKind::Existing(i) = node.kind
                && let Some(slot) = of.get_mut(i)
            {
                *slot = Some(si);
            }
        }
        of
    }

    /// The pod as the simulation sees it, its volumes' needs included.
    pub fn shape(&self, pod: &Pod) -> PodShape {
        PodShape {
            volumes: self.volumes.of(pod),
            dra: self.dra.of(pod),
            ..PodShape::from(pod)
        }
    }

    /// `namespaces`: namespace labels for affinity namespace selectors (may be empty).
    pub fn new(namespaces: HashMap<Arc<str>, Labels>) -> Self {
        Simulator {
            nodes: Vec::new(),
            log: Vec::new(),
            placed: Placed::default(),
            topology: Topology::new(namespaces),
            volumes: VolumeIndex::default(),
            dra: DraIndex::default(),
            attach_limits: HashMap::new(),
        }
    }

    /// What this pass's DRA selectors could not evaluate (each named once).
    pub fn dra_problems(&self) -> &[String] {
        self.dra.problems()
    }

    pub fn nodes(&self) -> &[SimNode] {
        &self.nodes
    }

    pub fn node(&self, idx: usize) -> &SimNode {
        &self.nodes[idx]
    }

    /// The pods on a node now (real and simulated).
    pub fn pods_on(&self, idx: usize) -> impl ExactSizeIterator<Item = &PodShape> {
        self.placed.on(idx)
    }

    pub fn add_node(&mut self, mut node: SimNode) -> usize {
        if let SimNodeKind::Existing(_) = node.kind
            && let Some(limits) = self.attach_limits.get(&node.name)
        {
            node.attach_limits = limits.clone();
        }
        self.topology.add_node(&node);
        self.nodes.push(node);
        self.placed.add_node();
        self.nodes.len() - 1
    }

    /// Places a pod without checking it fits (existing pods, or after a successful check).
    pub fn place(&mut self, pod: &PodShape, node: usize) {
        let id = self.placed.intern(pod);
        self.apply(id, node, 1);
        self.log.push((id, node, 1));
    }

    /// Places a pod of the cluster, as [`Simulator::place`] with its [`Simulator::shape`],
    /// without building the shape when one like it is placed already.
    pub fn place_pod(&mut self, pod: &Pod, node: usize) {
        let id = match self.placed.known_plain(pod) {
            Some(id) => id,
            None => {
                let shape = self.shape(pod);
                self.placed.intern(&shape)
            }
        };
        self.apply(id, node, 1);
        self.log.push((id, node, 1));
    }

    /// Takes a pod off its node (a scale-down moving it elsewhere). Reverted like a placement.
    pub fn remove_pod(&mut self, pod: &PodShape, node: usize) {
        let id = self.placed.intern(pod);
        self.apply(id, node, -1);
        self.log.push((id, node, -1));
    }

    fn apply(&mut self, id: usize, node: usize, delta: i32) {
        let pod = self.placed.shape(id);
        let n = &mut self.nodes[node];
        if let Some(v) = &pod.volumes {
            v.attach(&mut n.attached, i64::from(delta));
        }
        if let Some(d) = &pod.dra {
            self.dra.place(d, &self.nodes, node, delta);
        }
        let n = &mut self.nodes[node];
        if delta > 0 {
            n.requested.add(&pod.spec.requests);
            n.pods += 1;
            n.host_ports.extend(pod.spec.host_ports.iter().cloned());
        } else {
            n.requested.sub(&pod.spec.requests);
            n.pods -= 1;
            for port in &pod.spec.host_ports {
                if let Some(i) = n.host_ports.iter().position(|p| p == port) {
                    n.host_ports.swap_remove(i);
                }
            }
        }
        self.topology.place(pod, &self.nodes[node], node, delta);
        if delta > 0 {
            self.placed.add(node, id);
        } else {
            self.placed.remove(node, id);
        }
    }

    pub fn mark(&self) -> Mark {
        Mark {
            nodes: self.nodes.len(),
            placed: self.log.len(),
        }
    }

    /// Undoes every placement, removal and node added since `mark`, newest first.
    pub fn revert(&mut self, mark: Mark) {
        while self.log.len() > mark.placed {
            let Some((id, node, delta)) = self.log.pop() else {
                break;
            };
            self.apply(id, node, -delta);
        }
        while self.nodes.len() > mark.nodes {
            let Some(node) = self.nodes.pop() else { break };
            self.placed.remove_last_node();
            self.topology.remove_last_node(&node);
        }
    }

    /// Whether `pod` fits `node` now, or the first predicate that fails, with its message.
    pub fn check(&mut self, pod: &PodShape, node: usize) -> Result<(), Unfit> {
        self.run_predicates(pod, node, true)
    }

    /// As [`Simulator::check`], without formatting a message: for the hot loops, which only
    /// need to know whether, and by which code, a pod does not fit.
    pub fn fits(&mut self, pod: &PodShape, node: usize) -> Result<(), Unfit> {
        self.run_predicates(pod, node, false)
    }

    fn run_predicates(&mut self, pod: &PodShape, node: usize, explain: bool) -> Result<(), Unfit> {
        predicates::check_static(pod, &self.nodes[node], explain)?;
        if let Some(d) = &pod.dra
            && let Err((code, message)) = self.dra.check(d, &self.nodes, node)
        {
            return Err(Unfit::lazy(code, explain, || message));
        }
        predicates::check_topology(
            pod,
            node,
            &self.nodes,
            &self.placed,
            &mut self.topology,
            explain,
        )
    }

    /// Whether checks for this pod can skip nodes it already failed on: true unless it has
    /// pod affinity or spread constraints, which later placements can turn from failing to passing.
    pub fn failures_are_monotonic(pod: &PodShape) -> bool {
        pod.spec.affinity.is_empty() && pod.spec.spread.is_empty()
    }
}

#[cfg(test)]
mod tests;
