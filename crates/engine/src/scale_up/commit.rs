//! Committing a chosen option: its nodes (split over similar groups when balancing) join
//! the simulation, its pods are placed on them, and the actions are recorded.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Pass, Pending, ScaleOption};
use crate::balance::{self, SplitGroup};
use crate::estimator::{self, Candidate};
use crate::limits::NodeUsage;
use crate::plan::{Outcome, ScaleUpAction};
use crate::simulator::{SimNode, SimNodeKind};

impl<'a> Pass<'a, '_> {
    /// Places what fits on the new nodes already committed in this pass (a later round can
    /// make room: topology spread counts change as other zones grow). Returns pod indices.
    pub(super) fn join_committed(&mut self, remaining: &[Pending<'a>]) -> Vec<usize> {
        if self.committed.is_empty() {
            return Vec::new();
        }
        let candidates: Vec<Candidate> = remaining
            .iter()
            .enumerate()
            .map(|(i, p)| Candidate {
                index: i,
                class: p.class,
                shape: &p.shape,
            })
            .collect();
        let Some(gi) = self
            .sim
            .nodes()
            .get(self.committed[0])
            .and_then(|n| match n.kind {
                SimNodeKind::New(g) => Some(g),
                _ => None,
            })
        else {
            return Vec::new();
        };
        let Ok(template) = self.input.templates[gi].clone() else {
            return Vec::new();
        };
        let committed = self.committed.clone();
        let (placed, _) = estimator::pack_onto(self.sim, &committed, &template, &candidates);
        for &(i, node) in &placed {
            if let SimNodeKind::New(g) = self.sim.node(node).kind {
                self.add_to_action(g, &remaining[i]);
                self.explain(remaining[i].pod, Outcome::ScaleUp, Some(g), None, vec![]);
            }
        }
        placed.into_iter().map(|(i, _)| i).collect()
    }

    pub(super) fn add_to_action(&mut self, g: usize, p: &Pending) {
        let id = &self.input.groups.groups[g].id;
        if let Some(action) = self.actions.iter_mut().find(|a| &a.node_group == id) {
            action.pods.push(p.pod.id.clone());
            action.pods.sort();
            const LATER: &str = "; pods left by earlier rounds fit these new nodes too";
            if !action.reason.ends_with(LATER) {
                action.reason.push_str(LATER);
            }
        }
    }

    /// Adds the chosen option's nodes (split over similar groups when balancing) and places
    /// its pods on them. Returns the indices (into `remaining`) of the pods placed.
    pub(super) fn commit(
        &mut self,
        option: &ScaleOption,
        remaining: &[Pending<'a>],
        how: &str,
    ) -> Vec<usize> {
        let gi = option.group;
        let candidates: Vec<Candidate> = option
            .estimate
            .placed
            .iter()
            .map(|&i| Candidate {
                index: i,
                class: remaining[i].class,
                shape: &remaining[i].shape,
            })
            .collect();
        let peers = &option.peers;
        let split = self.split(gi, peers, option.estimate.node_count);
        let Ok(template) = self.input.templates[gi].clone() else {
            return Vec::new();
        };
        let mut nodes = Vec::new();
        for &(g, k) in &split {
            let Ok(t) = &self.input.templates[g] else {
                continue;
            };
            for n in 0..k {
                let name: Arc<str> =
                    format!("{}-new-{}", self.group_name(g), self.targets[g] + n + 1).into();
                nodes.push(
                    self.sim
                        .add_node(SimNode::from_template(t, name, SimNodeKind::New(g))),
                );
            }
        }
        self.committed.extend(&nodes);
        let (placed, _) = estimator::pack_onto(self.sim, &nodes, &template, &candidates);
        let landed: Vec<(usize, usize)> = placed
            .iter()
            .map(|&(i, node)| match self.sim.node(node).kind {
                SimNodeKind::New(g) => (i, g),
                _ => (i, gi),
            })
            .collect();
        let decision = Decision {
            how: how.to_string(),
            similar: peers.len() + 1,
        };
        self.record(option, &split, &landed, remaining, &decision);
        landed.into_iter().map(|(i, _)| i).collect()
    }

    pub(super) fn split(&self, gi: usize, peers: &[usize], nodes: u64) -> Vec<(usize, u64)> {
        if peers.is_empty() {
            return vec![(gi, nodes)];
        }
        let groups = &self.input.groups.groups;
        let mut members: Vec<SplitGroup> = std::iter::once(gi)
            .chain(peers.iter().copied())
            .map(|g| SplitGroup {
                index: g,
                current: self.targets[g],
                max: groups[g].max,
            })
            .collect();
        // The expander's choice first, then the others by id: ties go in that order.
        members[1..].sort_by(|a, b| groups[a.index].id.cmp(&groups[b.index].id));
        balance::split(nodes, &members)
    }

    /// Records the actions of a committed option; `landed` is (pod index, group) per pod placed.
    pub(super) fn record(
        &mut self,
        option: &ScaleOption,
        split: &[(usize, u64)],
        landed: &[(usize, usize)],
        remaining: &[Pending<'a>],
        decision: &Decision,
    ) {
        let mut pods_of: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(i, g) in landed {
            pods_of.entry(g).or_default().push(i);
        }
        for &(g, k) in split {
            let Ok(template) = &self.input.templates[g] else {
                continue;
            };
            let mut pods: Vec<_> = pods_of
                .get(&g)
                .into_iter()
                .flatten()
                .map(|&i| remaining[i].pod.id.clone())
                .collect();
            pods.sort();
            let reason = self.action_reason(option, g, pods.len(), k, decision);
            let id = &self.input.groups.groups[g].id;
            match self.actions.iter_mut().find(|a| &a.node_group == id) {
                // A later round grows a group again: one action, with both reasons.
                Some(action) => {
                    action.to += k;
                    action.pods.extend(pods);
                    action.pods.sort();
                    action.reason = format!("{}; then {reason}", action.reason);
                }
                None => self.actions.push(ScaleUpAction {
                    node_group: id.clone(),
                    from: self.targets[g],
                    to: self.targets[g] + k,
                    pods,
                    reason,
                }),
            }
            self.targets[g] += k;
            self.added += k;
            self.limits.add(&NodeUsage::of_template(template), k);
        }
        for (g, idxs) in pods_of {
            for i in idxs {
                self.explain(remaining[i].pod, Outcome::ScaleUp, Some(g), None, vec![]);
            }
        }
    }
}

/// How an option was chosen, for the actions' reasons.
pub(super) struct Decision {
    /// The expander's account (`chosen from 3 options: least-waste kept 1 of 3`).
    pub how: String,
    /// Groups the option was balanced over (1: no balancing).
    pub similar: usize,
}

impl Pass<'_, '_> {
    /// `2 new node(s) for 4 pending pod(s): chosen from 3 options: ...; capped by ...`.
    fn action_reason(
        &self,
        option: &ScaleOption,
        g: usize,
        pods: usize,
        k: u64,
        d: &Decision,
    ) -> String {
        let chosen = &self.input.groups.groups[option.group].id;
        let capped = option.cap_reason.as_ref().map_or(String::new(), |u| {
            format!("; capped by {} ({})", u.message, u.code)
        });
        let how = if g == option.group {
            d.how.clone()
        } else {
            format!("balancing the option of {chosen} ({})", d.how)
        };
        let balance = if d.similar > 1 {
            format!("; balanced over {} similar groups", d.similar)
        } else {
            String::new()
        };
        format!("{k} new node(s) for {pods} pending pod(s): {how}{capped}{balance}")
    }
}

pub(super) fn retain_unplaced(remaining: &mut Vec<Pending>, placed: &[usize]) {
    let mut gone = vec![false; remaining.len()];
    for &i in placed {
        gone[i] = true;
    }
    let mut i = 0;
    remaining.retain(|_| {
        i += 1;
        !gone[i - 1]
    });
}
