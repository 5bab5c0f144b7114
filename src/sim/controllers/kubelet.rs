//! The simulated kubelets (all nodes of a cluster in one loop): a registered node reports
//! Ready after its boot delay (unless its group is set never to be ready), a bound pod runs
//! after its start delay once its node is Ready, a pod marked for deletion is removed after
//! the termination delay, and pods of nodes that no longer exist are removed as the pod
//! garbage collector does.

use std::time::Duration;

use tokio::time::Instant;

use super::index::Index;
use crate::sim::api::resources::Resource;
use crate::sim::machine_api::set_node_ready;
use crate::sim::registry::{State, now_rfc3339};
use crate::sim::settings::Timing;
use crate::sim::store::Key;
use crate::sim::workload::set_running;

/// The kubelets' memory: the index revision at which nothing was left waiting on a delay.
#[derive(Debug, Default)]
pub struct Kubelets {
    quiet_at: Option<u64>,
}

impl Kubelets {
    /// The index revision at which nothing was left waiting, if it is quiet.
    pub fn quiet_at(&self) -> Option<u64> {
        self.quiet_at
    }

    /// One pass of every kubelet; skipped while nothing changed since a pass that found
    /// nothing waiting.
    pub fn step(&mut self, state: &mut State, index: &Index, timing: &Timing, now: Instant) {
        if self.quiet_at == Some(index.revision) {
            return;
        }
        let waiting = step(state, index, timing, now);
        self.quiet_at = (!waiting).then_some(index.revision);
    }
}

/// One pass of every kubelet; returns whether something waits on a delay still running.
fn step(state: &mut State, index: &Index, timing: &Timing, now: Instant) -> bool {
    let mut waiting = false;
    let due = |since: Instant, delay: Duration| now.saturating_duration_since(since) >= delay;
    let stamp = now_rfc3339();
    for (name, node) in &index.nodes {
        if !node.ready && !node.never_ready {
            if due(node.since, timing.node_boot) {
                let _ = state.modify(Resource::Nodes, &Key::cluster(name), |v| {
                    set_node_ready(v, true, &stamp)
                });
            } else {
                waiting = true;
            }
        }
    }
    let mut purge = Vec::new();
    let mut start = Vec::new();
    for (key, pod) in &index.pods {
        if pod.terminating {
            if due(pod.since, timing.pod_termination) {
                purge.push(key);
            } else {
                waiting = true;
            }
            continue;
        }
        if pod.node.is_empty() {
            continue;
        }
        match index.nodes.get(&pod.node) {
            None => purge.push(key),
            Some(node) if node.ready && pod.phase == "Pending" => {
                if due(pod.since, timing.pod_start) {
                    start.push((key, node.ip.as_str()));
                } else {
                    waiting = true;
                }
            }
            Some(_) => {}
        }
    }
    for key in purge {
        state.purge(Resource::Pods, key);
    }
    for (key, ip) in start {
        let _ = state.modify(Resource::Pods, key, |v| set_running(v, ip, &stamp));
    }
    waiting
}
