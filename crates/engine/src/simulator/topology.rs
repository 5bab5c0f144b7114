//! Pods indexed by topology domain, for inter-pod affinity, anti-affinity and topology spread.
//!
//! Upstream's affinity predicate rescans pods on every check and is its known slow path.
//! Here each distinct term gets a counter of matching pods per domain, built once from the
//! pods already placed and then kept up to date as pods are placed and removed, so a check
//! is a hash lookup. Counters are never dropped; reverting placements brings their counts back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::placed::Placed;
use super::{PodShape, SimNode};
use fleetscaler_model::labels::Labels;
use fleetscaler_model::pod::PodSpec;
use fleetscaler_model::scheduling::{
    AffinityTerm, NamespaceScope, SpreadConstraint, SpreadPolicy, untolerated_taint,
};

/// Matching pods per domain value, for one affinity term.
pub(super) struct TermCounter {
    pub term: AffinityTerm,
    pub counts: HashMap<Arc<str>, u32>,
    /// Matching pods on nodes that have the topology label (as the scheduler counts them).
    pub total: u32,
}

/// Domains holding pods that carry a given required anti-affinity term (symmetry: those
/// pods keep matching newcomers out of their domain).
pub(super) struct AntiOwner {
    pub term: AffinityTerm,
    pub counts: HashMap<Arc<str>, u32>,
}

/// Matching pods per domain over the nodes a pod's spread constraint considers, with a
/// histogram of counts so the global minimum is cheap to read.
pub(super) struct SpreadCounter {
    pub namespace: Arc<str>,
    pub constraint: SpreadConstraint,
    /// The spec whose node selection decides which nodes count (`nodeAffinityPolicy: Honor`).
    filter: Arc<PodSpec>,
    eligible: Vec<bool>,
    domain_nodes: HashMap<Arc<str>, u32>,
    pub counts: HashMap<Arc<str>, u32>,
    histogram: BTreeMap<u32, u32>,
}

/// The counters one pod shape uses, resolved once.
#[derive(Default)]
pub(super) struct ShapeTopology {
    pub affinity: Vec<usize>,
    pub anti_affinity: Vec<usize>,
    pub spread: Vec<usize>,
    /// Anti-affinity owners whose term matches this shape.
    pub symmetric: Vec<usize>,
    anti_seen: usize,
}

/// Identity of a pod shape: the same interned spec, namespace and label set. Holding the
/// Arcs keeps the addresses the key hashes from being reused while the key exists.
#[derive(Clone)]
pub(super) struct ShapeKey {
    spec: Arc<PodSpec>,
    namespace: Arc<str>,
    labels: Labels,
}

impl PartialEq for ShapeKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.spec, &other.spec)
            && Arc::ptr_eq(&self.namespace, &other.namespace)
            && self.labels.ptr_eq(&other.labels)
    }
}

impl Eq for ShapeKey {}

impl std::hash::Hash for ShapeKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (Arc::as_ptr(&self.spec) as usize).hash(h);
        (Arc::as_ptr(&self.namespace) as *const u8 as usize).hash(h);
        self.labels.as_ptr().hash(h);
    }
}

#[derive(Default)]
pub(super) struct Topology {
    /// Namespace labels, for `namespaceSelector`; empty when the snapshot has none.
    namespaces: HashMap<Arc<str>, Labels>,
    pub counters: Vec<TermCounter>,
    counter_index: HashMap<AffinityTerm, usize>,
    pub anti: Vec<AntiOwner>,
    anti_index: HashMap<AffinityTerm, usize>,
    pub spreads: Vec<SpreadCounter>,
    spread_index: HashMap<(ShapeKey, usize), usize>,
    shapes: HashMap<ShapeKey, ShapeTopology>,
}

pub(super) fn shape_key(pod: &PodShape) -> ShapeKey {
    ShapeKey {
        spec: pod.spec.clone(),
        namespace: pod.namespace.clone(),
        labels: pod.labels.clone(),
    }
}

impl Topology {
    pub fn new(namespaces: HashMap<Arc<str>, Labels>) -> Self {
        Topology {
            namespaces,
            ..Topology::default()
        }
    }

    pub fn term_matches(&self, term: &AffinityTerm, pod: &PodShape) -> bool {
        term_matches(&self.namespaces, term, pod)
    }

    /// The counters of a shape already resolved.
    pub fn shape(&self, pod: &PodShape) -> Option<&ShapeTopology> {
        self.shapes.get(&shape_key(pod))
    }

    /// Resolves the counters of a shape, creating any that do not exist yet from the current
    /// placements.
    pub fn resolve(&mut self, pod: &PodShape, nodes: &[SimNode], pods_on: &Placed) {
        let key = shape_key(pod);
        if !self.shapes.contains_key(&key) {
            let key = key.clone();
            let mut st = ShapeTopology::default();
            for term in &pod.spec.affinity {
                st.affinity.push(self.counter_for(term, nodes, pods_on));
            }
            for term in &pod.spec.anti_affinity {
                st.anti_affinity
                    .push(self.counter_for(term, nodes, pods_on));
            }
            for i in 0..pod.spec.spread.len() {
                st.spread
                    .push(self.spread_for(pod, &key, i, nodes, pods_on));
            }
            self.shapes.insert(key, st);
        }
        // New anti-affinity owners may have appeared since the shape was resolved.
        let anti_len = self.anti.len();
        let seen = self.shapes.get(&key).map_or(anti_len, |s| s.anti_seen);
        let matching: Vec<usize> = (seen..anti_len)
            .filter(|&i| self.term_matches(&self.anti[i].term, pod))
            .collect();
        let st = self.shapes.entry(key).or_default();
        st.symmetric.extend(matching);
        st.anti_seen = anti_len;
    }

    fn counter_for(&mut self, term: &AffinityTerm, nodes: &[SimNode], pods_on: &Placed) -> usize {
        if let Some(&i) = self.counter_index.get(term) {
            return i;
        }
        let mut counter = TermCounter {
            term: term.clone(),
            counts: HashMap::new(),
            total: 0,
        };
        for (i, node) in nodes.iter().enumerate() {
            for _ in pods_on.on(i).filter(|p| self.term_matches(term, p)) {
                if let Some(v) = node.label(&term.topology_key) {
                    counter.total += 1;
                    *counter.counts.entry(v.clone()).or_default() += 1;
                }
            }
        }
        self.counters.push(counter);
        self.counter_index
            .insert(term.clone(), self.counters.len() - 1);
        self.counters.len() - 1
    }

    fn spread_for(
        &mut self,
        pod: &PodShape,
        key: &ShapeKey,
        index: usize,
        nodes: &[SimNode],
        pods_on: &Placed,
    ) -> usize {
        if let Some(&i) = self.spread_index.get(&(key.clone(), index)) {
            return i;
        }
        let mut counter = SpreadCounter {
            namespace: pod.namespace.clone(),
            constraint: pod.spec.spread[index].clone(),
            filter: pod.spec.clone(),
            eligible: Vec::with_capacity(nodes.len()),
            domain_nodes: HashMap::new(),
            counts: HashMap::new(),
            histogram: BTreeMap::new(),
        };
        for node in nodes {
            counter.add_node(node);
        }
        for (n, node) in nodes.iter().enumerate() {
            for p in pods_on.on(n) {
                counter.place(p, node, n, 1);
            }
        }
        self.spreads.push(counter);
        self.spread_index
            .insert((key.clone(), index), self.spreads.len() - 1);
        self.spreads.len() - 1
    }

    pub fn add_node(&mut self, node: &SimNode) {
        for s in &mut self.spreads {
            s.add_node(node);
        }
    }

    pub fn remove_last_node(&mut self, node: &SimNode) {
        for s in &mut self.spreads {
            s.remove_last_node(node);
        }
    }

    /// Counts a placement (`delta` 1) or its removal (`delta` -1) everywhere it matters.
    pub fn place(&mut self, pod: &PodShape, node: &SimNode, node_idx: usize, delta: i32) {
        for c in &mut self.counters {
            if term_matches(&self.namespaces, &c.term, pod)
                && let Some(v) = node.label(&c.term.topology_key)
            {
                c.total = c.total.saturating_add_signed(delta);
                bump(&mut c.counts, v, delta);
            }
        }
        for term in &pod.spec.anti_affinity {
            let i = match self.anti_index.get(term) {
                Some(&i) => i,
                None => {
                    self.anti.push(AntiOwner {
                        term: term.clone(),
                        counts: HashMap::new(),
                    });
                    self.anti_index.insert(term.clone(), self.anti.len() - 1);
                    self.anti.len() - 1
                }
            };
            if let Some(v) = node.label(&term.topology_key) {
                bump(&mut self.anti[i].counts, v, delta);
            }
        }
        for s in &mut self.spreads {
            s.place(pod, node, node_idx, delta);
        }
    }
}

fn term_matches(
    namespaces: &HashMap<Arc<str>, Labels>,
    term: &AffinityTerm,
    pod: &PodShape,
) -> bool {
    term.selector
        .as_ref()
        .is_some_and(|s| s.matches(&pod.labels))
        && in_scope(namespaces, &term.namespaces, &pod.namespace)
}

/// Whether namespace `ns` is in a term's scope. Without Namespace objects a selector can
/// only be resolved to the pod's own namespace (and the explicitly listed ones).
fn in_scope(namespaces: &HashMap<Arc<str>, Labels>, scope: &NamespaceScope, ns: &str) -> bool {
    match scope {
        NamespaceScope::Names(names) => names.iter().any(|n| **n == *ns),
        NamespaceScope::Selector {
            names,
            selector,
            own,
        } => {
            names.iter().any(|n| **n == *ns)
                || selector.is_empty()
                || if namespaces.is_empty() {
                    **own == *ns
                } else {
                    namespaces.get(ns).is_some_and(|l| selector.matches(l))
                }
        }
    }
}

fn bump(map: &mut HashMap<Arc<str>, u32>, key: &Arc<str>, delta: i32) {
    let entry = map.entry(key.clone()).or_default();
    *entry = entry.saturating_add_signed(delta);
}

impl SpreadCounter {
    fn counts_node(&self, node: &SimNode) -> bool {
        let spec = &self.filter;
        let c = &self.constraint;
        if c.node_affinity_policy == SpreadPolicy::Honor
            && !spec.selects_node(&node.labels, &node.name)
        {
            return false;
        }
        if c.node_taints_policy == SpreadPolicy::Honor
            && untolerated_taint(&node.taints, &spec.tolerations).is_some()
        {
            return false;
        }
        node.label(&c.topology_key).is_some()
    }

    fn add_node(&mut self, node: &SimNode) {
        let eligible = self.counts_node(node);
        self.eligible.push(eligible);
        if let Some(v) = node
            .label(&self.constraint.topology_key)
            .filter(|_| eligible)
        {
            let n = self.domain_nodes.entry(v.clone()).or_default();
            *n += 1;
            if *n == 1 {
                let count = self.counts.get(v).copied().unwrap_or(0);
                *self.histogram.entry(count).or_default() += 1;
            }
        }
    }

    fn remove_last_node(&mut self, node: &SimNode) {
        let eligible = self.eligible.pop().unwrap_or(false);
        if let Some(v) = node
            .label(&self.constraint.topology_key)
            .filter(|_| eligible)
        {
            let n = self.domain_nodes.entry(v.clone()).or_default();
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.domain_nodes.remove(v);
                let count = self.counts.get(v).copied().unwrap_or(0);
                histogram_remove(&mut self.histogram, count);
            }
        }
    }

    fn place(&mut self, pod: &PodShape, node: &SimNode, node_idx: usize, delta: i32) {
        if !self.eligible.get(node_idx).copied().unwrap_or(false)
            || *pod.namespace != *self.namespace
        {
            return;
        }
        if !self
            .constraint
            .selector
            .as_ref()
            .is_some_and(|s| s.matches(&pod.labels))
        {
            return;
        }
        let Some(v) = node.label(&self.constraint.topology_key) else {
            return;
        };
        let old = self.counts.get(v).copied().unwrap_or(0);
        let new = old.saturating_add_signed(delta);
        self.counts.insert(v.clone(), new);
        if self.domain_nodes.contains_key(v) {
            histogram_remove(&mut self.histogram, old);
            *self.histogram.entry(new).or_default() += 1;
        }
    }

    /// The smallest count over the eligible domains, 0 when fewer than `minDomains` exist.
    pub fn global_min(&self) -> u32 {
        let domains = self.domain_nodes.len();
        if self
            .constraint
            .min_domains
            .is_some_and(|m| domains < usize::try_from(m).unwrap_or(0))
        {
            return 0;
        }
        self.histogram.keys().next().copied().unwrap_or(0)
    }

    pub fn count(&self, domain: &str) -> u32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }
}

fn histogram_remove(h: &mut BTreeMap<u32, u32>, count: u32) {
    if let Some(n) = h.get_mut(&count) {
        *n -= 1;
        if *n == 0 {
            h.remove(&count);
        }
    }
}
