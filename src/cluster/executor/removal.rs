//! The long part of one node's scale-down, after `execute` tainted it: wait
//! `node_delete_delay_after_taint`, drain the node (an empty node that gained pods is not
//! removed), mark its Machine and lower its group by one. On failure the machine mark and
//! then the taint and cordon are taken off again, so the node takes pods again.
//!
//! The taint stays whenever the machine may still go: when its mark could not be removed
//! (start-up recovery finishes such a decrement), when it is already being deleted, and when
//! this replica lost the lease midway (it writes nothing more; the new leader's recovery
//! clears what is left).

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::Context;
use super::drain::{self, Evictions};
use super::failure::{Failure, Stop, entry_of};
use super::machines::{MachineDeletion, MachineRef};
use super::nodes;
use super::scale::ScaleTarget;
use crate::cluster::outcome::{Action, Entry};
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::plan::ScaleDownAction;
use crate::engine::scale_down::DrainCheck;
use crate::engine::settings::Settings;

/// The settings a removal reads, copied so it owns them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    delay_after_taint: Duration,
    max_grace: Duration,
    max_eviction_time: Duration,
    /// Whether DaemonSet pods are evicted from a node with other pods, and from an empty one.
    daemonsets_occupied: bool,
    daemonsets_empty: bool,
}

impl Limits {
    pub(super) fn of(settings: &Settings) -> Self {
        Limits {
            delay_after_taint: settings.node_delete_delay_after_taint,
            max_grace: settings.max_pod_grace_period,
            max_eviction_time: settings.max_pod_eviction_time,
            daemonsets_occupied: settings.daemonset_eviction_for_occupied_nodes,
            daemonsets_empty: settings.daemonset_eviction_for_empty_nodes,
        }
    }
}

/// The long part of one node's scale-down; owns everything it needs (`'static + Send`).
pub struct NodeRemoval {
    ctx: Context,
    node: Arc<str>,
    group: NodeGroupId,
    empty: bool,
    unready: bool,
    target: ScaleTarget,
    machine: MachineRef,
    limits: Limits,
    check: DrainCheck,
}

/// Why a removal stopped, and whether the machine still carries its mark.
struct Stopped {
    stop: Stop,
    mark_left: bool,
}

impl From<Stop> for Stopped {
    fn from(stop: Stop) -> Self {
        Stopped {
            stop,
            mark_left: false,
        }
    }
}

impl NodeRemoval {
    pub(super) fn new(
        ctx: Context,
        down: &ScaleDownAction,
        target: ScaleTarget,
        machine: MachineRef,
        limits: Limits,
        check: DrainCheck,
    ) -> Self {
        NodeRemoval {
            ctx,
            node: down.node.clone(),
            group: down.node_group.clone(),
            empty: down.empty,
            unready: down.unready,
            target,
            machine,
            limits,
            check,
        }
    }

    pub fn node(&self) -> &Arc<str> {
        &self.node
    }

    pub fn group(&self) -> &NodeGroupId {
        &self.group
    }

    /// The plan found no pod that needs to move (drain budgets count these apart).
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Drains the node, marks its machine and lowers its group by one; on failure undoes
    /// what it can. Returns the `RemoveNode` entry: Done, Failed (after rollback), or
    /// Skipped when this replica lost the lease midway or the machine was already going.
    pub async fn run(self) -> Entry {
        let span = tracing::info_span!(
            "node_removal",
            k8s.node.name = %self.node,
            node_group.id = %self.group
        );
        async move {
            let mut evictions = Evictions::default();
            let result = match self.carry_out(&mut evictions).await {
                Ok(detail) => Ok(detail),
                Err(stopped) => Err(self.roll_back(stopped).await),
            };
            let action = Action::RemoveNode {
                group: self.group.clone(),
                node: self.node.clone(),
                empty: self.empty,
                unready: self.unready,
                evicted: evictions.done.into_iter().map(|p| p.id).collect(),
                not_evicted: evictions.refused.into_iter().map(|p| p.id).collect(),
            };
            entry_of(action, result)
        }
        .instrument(span)
        .await
    }

    async fn carry_out(&self, evictions: &mut Evictions) -> Result<String, Stopped> {
        tokio::time::sleep(self.limits.delay_after_taint).await;
        let daemonsets = self.drain(evictions).await?;
        let lock = self.ctx.locks.of(&self.group);
        let _held = lock.lock().await;
        let deletion = MachineDeletion {
            target: &self.target,
            machine: &self.machine,
        };
        match deletion.mark_and_lower(&self.ctx).await {
            Ok(lowered) => Ok(format!(
                "node {} drained ({} pods evicted{}); {}",
                self.node,
                evictions.done.len(),
                match daemonsets {
                    0 => String::new(),
                    n => format!(", then {n} DaemonSet pods"),
                },
                lowered.detail(&self.machine)
            )),
            Err(u) => Err(Stopped {
                mark_left: u.mark_left,
                stop: u.stop,
            }),
        }
    }

    /// Evicts the pods that must move and waits for them to go, then its DaemonSet pods
    /// (how many of those were evicted is returned); an empty node that gained pods that must
    /// move since the plan is not drained at all.
    async fn drain(&self, evictions: &mut Evictions) -> Result<usize, Stop> {
        let pods = drain::list_pods(&self.ctx, &self.node).await?;
        if let Some(why) = drain::blocker(&pods, &self.check) {
            return Err(
                Failure::Changed(format!("node {} must stay after all: {why}", self.node)).into(),
            );
        }
        let to_evict = drain::to_evict(&pods, self.limits.max_grace);
        if self.empty && !to_evict.is_empty() {
            let names: Vec<String> = to_evict.iter().map(|p| p.id.to_string()).collect();
            return Err(Failure::Changed(format!(
                "node {} was empty when planned and now has pods that must move: {}",
                self.node,
                names.join(", ")
            ))
            .into());
        }
        let limit = self.limits.max_eviction_time;
        drain::evict_all(&self.ctx, &self.node, to_evict, limit, evictions).await?;
        drain::wait_gone(&self.ctx, &self.node, &evictions.done).await?;
        let by_default = if self.empty {
            self.limits.daemonsets_empty
        } else {
            self.limits.daemonsets_occupied
        };
        let daemonsets = drain::daemonsets_to_evict(&pods, by_default, self.limits.max_grace);
        Ok(drain::evict_best_effort(&self.ctx, &self.node, daemonsets, limit).await)
    }

    /// Takes the taint and cordon off after a failure, unless the node should stay marked.
    async fn roll_back(&self, stopped: Stopped) -> Stop {
        let node = &self.node;
        let keep = if stopped.mark_left {
            Some(format!(
                "node {node} stays tainted while its machine is marked"
            ))
        } else if matches!(stopped.stop, Stop::Skip(_)) {
            Some(format!("node {node} stays tainted"))
        } else if self.ctx.may_write().is_err() {
            Some(format!(
                "node {node} left tainted for the leader's recovery"
            ))
        } else {
            None
        };
        if let Some(note) = keep {
            tracing::warn!(reason = %stopped.stop, "node removal stopped; {note}");
            return stopped.stop.with_undo(note);
        }
        match nodes::unmark(&self.ctx, node).await {
            Ok(done) => stopped.stop.with_undo(done),
            Err(e) => stopped.stop.with_undo(format!(
                "the taint could not be removed from node {node}: {e}"
            )),
        }
    }
}

impl std::fmt::Debug for NodeRemoval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRemoval")
            .field("node", &self.node)
            .field("group", &self.group)
            .field("empty", &self.empty)
            .field("machine", &self.machine)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runner spawns removals: they and their futures must be `Send + 'static`.
    #[allow(dead_code)]
    fn spawnable(removal: NodeRemoval) {
        fn check<T: Send + 'static>(_: &T) {}
        check(&removal);
        check(&removal.run());
    }

    #[test]
    fn limits_come_from_the_settings() {
        let settings = Settings {
            node_delete_delay_after_taint: Duration::from_secs(7),
            ..Settings::default()
        };
        let l = Limits::of(&settings);
        assert_eq!(l.delay_after_taint, Duration::from_secs(7));
        assert_eq!(l.max_eviction_time, settings.max_pod_eviction_time);
        assert_eq!(l.max_grace, settings.max_pod_grace_period);
        assert!(
            l.daemonsets_occupied && !l.daemonsets_empty,
            "upstream's defaults"
        );
    }
}
