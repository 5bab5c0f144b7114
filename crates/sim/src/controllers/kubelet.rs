//! The simulated kubelets (all nodes of a cluster in one loop): a registered node reports
//! Ready after its boot delay (unless its group is set never to be ready), a bound pod runs
//! after its start delay once its node is Ready, a pod marked for deletion is removed after
//! the termination delay, and pods of nodes that no longer exist are removed as the pod
//! garbage collector does (their CSINodes and ResourceSlices too; a pod's claims are
//! released: `dra`). A node turning Ready registers the CSI driver (`csi`) and its DRA
//! driver, if its group runs one. A pass looks only at the index's work sets.

use std::time::Duration;

use tokio::time::Instant;

use super::index::Index;
use crate::api::resources::Resource;
use crate::registry::{State, now_rfc3339};
use crate::settings::Timing;
use crate::store::Key;
use crate::workload::set_running;

/// The kubelets' memory between passes.
#[derive(Debug, Default)]
pub struct Kubelets {
    /// The index's count of removed nodes when orphaned pods were last collected.
    collected: u64,
}

impl Kubelets {
    /// One pass of every kubelet.
    pub fn step(&mut self, state: &mut State, index: &Index, timing: &Timing, now: Instant) {
        let due = |since: Instant, delay: Duration| now.saturating_duration_since(since) >= delay;
        let stamp = now_rfc3339();
        for name in &index.not_ready {
            if index
                .nodes
                .get(name)
                .is_some_and(|n| due(n.since, timing.node_boot))
            {
                let _ = crate::csi::node_ready(state, name, &stamp);
            }
        }
        let mut purge: Vec<&Key> = index
            .terminating
            .iter()
            .filter(|k| {
                index
                    .pods
                    .get(*k)
                    .is_some_and(|p| due(p.since, timing.pod_termination))
            })
            .collect();
        if self.collected != index.nodes_removed {
            // A node went away: its pods and CSINode are collected (a rare, whole-cluster
            // pass).
            self.collected = index.nodes_removed;
            crate::csi::collect(state, |n| index.nodes.contains_key(n));
            crate::dra::collect(state, |n| index.nodes.contains_key(n));
            purge.extend(
                index
                    .pods
                    .iter()
                    .filter(|(_, p)| !p.node.is_empty() && !index.nodes.contains_key(&p.node))
                    .map(|(k, _)| k),
            );
        }
        let mut start = Vec::new();
        for key in &index.starting {
            let Some(pod) = index.pods.get(key) else {
                continue;
            };
            match index.nodes.get(&pod.node) {
                None => purge.push(key),
                Some(node) if node.ready && due(pod.since, timing.pod_start) => {
                    start.push((key, node.ip.as_str()))
                }
                Some(_) => {}
            }
        }
        for key in purge {
            state.purge(Resource::Pods, key);
            crate::dra::release(state, key);
        }
        for (key, ip) in start {
            let _ = state.modify(Resource::Pods, key, |v| set_running(v, ip, &stamp));
        }
    }
}
