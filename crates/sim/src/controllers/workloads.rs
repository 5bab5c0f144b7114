//! The workload generator at run time: each simulated ReplicaSet keeps as many live pods as
//! its wave asks for now (creating pending pods for the scheduler, deleting the surplus,
//! unscheduled ones first), so evicted pods come back as new pending pods; each DaemonSet
//! keeps one pod pinned to every node.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use super::index::Index;
use crate::api::resources::Resource;
use crate::registry::{DeleteOptions, State, now_rfc3339};
use crate::store::Key;
use crate::workload::{DaemonSetSpec, Placement, ReplicaSetSpec, pod};

/// The simulated ReplicaSets and DaemonSets of a cluster.
#[derive(Debug)]
pub struct Workloads {
    pub replica_sets: Vec<ReplicaSetSpec>,
    pub daemon_sets: Vec<DaemonSetSpec>,
    started: Instant,
    /// The `spec.replicas` last written to each ReplicaSet's object (by position).
    published: Vec<Option<usize>>,
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
            published: vec![None; replica_sets.len()],
            replica_sets,
            daemon_sets,
            started,
        }
    }

    /// One pass: replica counts to their wave, daemon pods to the nodes.
    pub fn step(&mut self, state: &mut State, index: &Index, wave_period: Duration, now: Instant) {
        // A zero period holds every ReplicaSet at its base: a fleet that stays idle.
        let phase = if wave_period.is_zero() {
            0.0
        } else {
            now.saturating_duration_since(self.started).as_secs_f64() / wave_period.as_secs_f64()
        };
        let live = |uid: &str| index.live_by_owner.get(uid).copied().unwrap_or(0);
        let stamp = now_rfc3339();
        let mut surplus: HashMap<&str, usize> = HashMap::new();
        for (rs, published) in self.replica_sets.iter().zip(&mut self.published) {
            let (want, have) = (rs.replicas_at(phase), live(&rs.uid));
            if *published != Some(want) {
                // The served object asks for what the wave asks for (a write only when that
                // changes; the same value again writes nothing).
                let key = Key::new(&rs.namespace, &rs.name);
                let _ = state.modify(Resource::ReplicaSets, &key, |v| {
                    v["spec"]["replicas"] = serde_json::json!(want);
                });
                *published = Some(want);
            }
            for _ in have..want {
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
            if have > want {
                surplus.insert(rs.uid.as_str(), have - want);
            }
        }
        if !surplus.is_empty() {
            // Unscheduled pods go first, then the newest names (a stable order).
            let mut victims: Vec<(&str, bool, &Key)> = index
                .pods
                .iter()
                .filter(|(_, p)| !p.terminating && surplus.contains_key(p.owner_uid.as_str()))
                .map(|(k, p)| (p.owner_uid.as_str(), p.node.is_empty(), k))
                .collect();
            victims.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.2.cmp(a.2)));
            for (owner, _, key) in victims {
                if let Some(n) = surplus.get_mut(owner).filter(|n| **n > 0) {
                    *n -= 1;
                    let _ = state.delete(Resource::Pods, key, &DeleteOptions::default());
                }
            }
        }
        // DaemonSets: a full look only when a set's pod count differs from the node count.
        if self
            .daemon_sets
            .iter()
            .all(|ds| live(&ds.uid) == index.nodes.len())
        {
            return;
        }
        let mut covered: HashSet<(&str, &str)> = HashSet::new();
        let mut stranded = Vec::new();
        for (key, p) in &index.pods {
            if p.terminating || !self.daemon_sets.iter().any(|ds| ds.uid == p.owner_uid) {
                continue;
            }
            let node = if p.node.is_empty() {
                p.spec.as_deref().and_then(pinned_node)
            } else {
                Some(p.node.as_str())
            };
            if let Some(node) = node {
                if index.nodes.contains_key(node) {
                    covered.insert((p.owner_uid.as_str(), node));
                } else if p.node.is_empty() {
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
    }
}
