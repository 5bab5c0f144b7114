//! The workload generator at run time: each simulated ReplicaSet keeps as many live pods as
//! its wave asks for now (creating pending pods for the scheduler, deleting the surplus,
//! unscheduled ones first), so evicted pods come back as new pending pods; each DaemonSet
//! keeps one pod pinned to every node.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use super::index::Index;
use crate::sim::api::resources::Resource;
use crate::sim::registry::{DeleteOptions, State, now_rfc3339};
use crate::sim::store::Key;
use crate::sim::workload::{DaemonSetSpec, Placement, ReplicaSetSpec, pod};

/// The simulated ReplicaSets and DaemonSets of a cluster.
#[derive(Debug)]
pub struct Workloads {
    pub replica_sets: Vec<ReplicaSetSpec>,
    pub daemon_sets: Vec<DaemonSetSpec>,
    started: Instant,
    /// The index revision and wanted replica counts of the last pass that changed nothing.
    quiet: Option<(u64, Vec<usize>)>,
}

/// The node a pending DaemonSet pod is pinned to (its required `metadata.name` affinity).
pub fn pinned_node(spec: &serde_json::Value) -> Option<&str> {
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"][0]
        ["values"][0]
        .as_str()
}

impl Workloads {
    pub fn new(
        replica_sets: Vec<ReplicaSetSpec>,
        daemon_sets: Vec<DaemonSetSpec>,
        started: Instant,
    ) -> Self {
        Workloads {
            replica_sets,
            daemon_sets,
            started,
            quiet: None,
        }
    }

    /// One pass: replica counts to their wave, daemon pods to the nodes.
    pub fn step(&mut self, state: &mut State, index: &Index, wave_period: Duration, now: Instant) {
        let phase = now.saturating_duration_since(self.started).as_secs_f64()
            / wave_period.as_secs_f64().max(1e-3);
        let wanted: Vec<usize> = self
            .replica_sets
            .iter()
            .map(|rs| rs.replicas_at(phase))
            .collect();
        if self
            .quiet
            .as_ref()
            .is_some_and(|(rev, w)| *rev == index.revision && *w == wanted)
        {
            return;
        }
        let revision_before = state.store.rv();
        let mut live: HashMap<&str, Vec<(&Key, bool)>> = HashMap::new();
        for (key, p) in &index.pods {
            if !p.terminating && !p.owner_uid.is_empty() {
                live.entry(p.owner_uid.as_str())
                    .or_default()
                    .push((key, p.node.is_empty()));
            }
        }
        let stamp = now_rfc3339();
        for (rs, &want) in self.replica_sets.iter().zip(&wanted) {
            let mut pods = live.remove(rs.uid.as_str()).unwrap_or_default();
            if pods.len() < want {
                for _ in pods.len()..want {
                    let name =
                        state.fresh_name(Resource::Pods, &rs.namespace, &format!("{}-", rs.name));
                    let object = pod(
                        &name,
                        &rs.namespace,
                        ("ReplicaSet", &rs.name, &rs.uid),
                        &rs.template,
                        Placement::Unbound,
                        &stamp,
                    );
                    let _ = state.create(Resource::Pods, &rs.namespace, object);
                }
            } else if pods.len() > want {
                // Unscheduled pods go first, then the newest names (a stable order).
                pods.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(a.0)));
                let excess = pods.len() - want;
                for (key, _) in pods.into_iter().take(excess) {
                    let _ = state.delete(Resource::Pods, key, &DeleteOptions::default());
                }
            }
        }
        // Which nodes each DaemonSet already covers (bound, or pinned and pending).
        let mut covered: HashSet<(&str, &str)> = HashSet::new();
        let mut stranded = Vec::new();
        for (key, p) in &index.pods {
            if p.terminating || p.owner_uid.is_empty() {
                continue;
            }
            let node = if p.node.is_empty() {
                p.spec.as_deref().and_then(pinned_node)
            } else {
                Some(p.node.as_str())
            };
            if let Some(node) = node {
                covered.insert((p.owner_uid.as_str(), node));
                if p.node.is_empty() && !index.nodes.contains_key(node) {
                    stranded.push(key);
                }
            }
        }
        for key in stranded {
            let _ = state.delete(Resource::Pods, key, &DeleteOptions::default());
        }
        for ds in &self.daemon_sets {
            for node in index.nodes.keys() {
                if covered.contains(&(ds.uid.as_str(), node.as_str())) {
                    continue;
                }
                let name =
                    state.fresh_name(Resource::Pods, &ds.namespace, &format!("{}-", ds.name));
                let object = pod(
                    &name,
                    &ds.namespace,
                    ("DaemonSet", &ds.name, &ds.uid),
                    &ds.template,
                    Placement::Pinned(node),
                    &stamp,
                );
                let _ = state.create(Resource::Pods, &ds.namespace, object);
            }
        }
        // Nothing written: nothing to do until the pods, nodes or wave move.
        self.quiet = (state.store.rv() == revision_before).then_some((index.revision, wanted));
    }
}
