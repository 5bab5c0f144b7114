//! The removal simulation: can every pod of a candidate go elsewhere? Its movable pods are
//! taken off and placed on other nodes with the scheduler's predicates. A success is kept:
//! the candidate leaves the set of destinations and its pods stay where they were placed, so
//! two candidates never count on the same free space (seed 001: if A's pods take X's room,
//! B must find another node, while C, moving to Y, is unaffected). A failure is reverted.

use std::collections::HashMap;
use std::sync::Arc;

use super::ScaleDownInput;
use super::drain::{Drain, DrainRules};
use super::eligibility::Candidate;
use crate::cluster_state::NodeReadiness;
use crate::plan::{NotRemovable, PodMove};
use crate::reason::ReasonCode;
use crate::simulator::{PodShape, SimNodeKind, Simulator};
use fleetscaler_model::pod::Pod;

pub(super) struct Removal<'a, 's> {
    /// The pass's base simulation: successes are kept in it, failures reverted.
    sim: &'s mut Simulator,
    /// Snapshot node → simulator node.
    sim_of: Vec<Option<usize>>,
    /// Simulator nodes no pod may move to: removed nodes, and the candidate being tried.
    closed: Vec<bool>,
    /// Simulator nodes that take pods from elsewhere (moved here, or pending pods expected
    /// here): they stay, as their own removal was not simulated with those pods. The reason.
    receivers: Vec<Option<String>>,
    /// Per pod class, the first destination worth trying.
    cursors: HashMap<(usize, usize, usize), usize>,
    /// Disruptions each PodDisruptionBudget still allows.
    pdb_left: Vec<i32>,
    rules: DrainRules<'a>,
}

/// A candidate whose pods all fit elsewhere.
pub(super) struct Removable {
    pub candidate: Candidate,
    pub moves: Vec<PodMove>,
    /// Why its pods need more disruptions of a PodDisruptionBudget than the budget allows
    /// at once (upstream's `IsRisky`), when they do: it drains alone, evictions retried.
    pub at_risk: Option<String>,
}

impl<'a, 's> Removal<'a, 's> {
    /// `sim`: the pass's base simulation (`Simulator::base`).
    pub fn new(input: &'a ScaleDownInput, pods_on: &[Vec<&Pod>], sim: &'s mut Simulator) -> Self {
        let s = input.snapshot;
        let sim_of = sim.existing_index(s.nodes.len());
        let rules = DrainRules::new(s, input.settings, input.now);
        let nodes = sim.nodes().len();
        let mut removal = Removal {
            sim,
            sim_of,
            closed: vec![false; nodes],
            receivers: vec![None; nodes],
            cursors: HashMap::new(),
            pdb_left: s.pdbs.iter().map(|p| p.disruptions_allowed).collect(),
            rules,
        };
        removal.expect_pending(input);
        removal.rehome_draining(input, pods_on);
        removal
    }

    /// Pending pods that fit an existing node will be scheduled there: they hold its space,
    /// and the node stays.
    fn expect_pending(&mut self, input: &ScaleDownInput) {
        for (pod, node) in &input.expected {
            let Some(n) = input
                .snapshot
                .nodes
                .iter()
                .position(|x| x.name == *node)
                .and_then(|i| self.sim_of[i])
            else {
                continue;
            };
            self.sim.place_pod(pod, n);
            self.receivers[n].get_or_insert_with(|| expected_here(pod));
        }
    }

    /// Pods of nodes already being drained need homes first: they go where they fit, before
    /// any candidate counts on that room.
    fn rehome_draining(&mut self, input: &ScaleDownInput, pods_on: &[Vec<&Pod>]) {
        for (i, pods) in pods_on.iter().enumerate() {
            if input.cluster.readiness[i] != NodeReadiness::Deleting {
                continue;
            }
            let moving: Vec<&Pod> = pods
                .iter()
                .copied()
                .filter(|p| self.rules.classify(p) == Drain::Move)
                .collect();
            for p in moving {
                let shape = self.sim.shape(p);
                if let Some(dest) = self.destination(&shape) {
                    self.sim.place(&shape, dest);
                    let from = &input.snapshot.nodes[i].name;
                    self.receivers[dest].get_or_insert_with(|| {
                        format!("pods of {from}, being removed, are moving here")
                    });
                }
            }
        }
    }

    /// Tries to remove a candidate; on success its pods stay moved and it stays closed.
    pub fn try_remove(
        &mut self,
        c: Candidate,
        name: &Arc<str>,
        pods: &[&Pod],
    ) -> Result<Removable, NotRemovable> {
        let stays = |code, message| NotRemovable {
            node: name.clone(),
            code,
            message,
        };
        let Some(n) = self.sim_of[c.node] else {
            return Err(stays(
                ReasonCode::CurrentlyBeingDeleted,
                "the node is not in the simulation".into(),
            ));
        };
        if let Some(why) = &self.receivers[n] {
            return Err(stays(ReasonCode::HoldsMovedPods, why.clone()));
        }
        let mut moving = Vec::new();
        for p in pods {
            match self.rules.classify(p) {
                Drain::Skip => {}
                Drain::Move => moving.push(*p),
                Drain::Block(code, message) => return Err(stays(code, message)),
            }
        }
        let mark = self.sim.mark();
        let cursors = self.cursors.clone();
        let pdbs = self.pdb_left.clone();
        let receivers = self.receivers.clone();
        self.closed[n] = true;
        match self.move_all(n, &moving) {
            Ok((moves, at_risk)) => Ok(Removable {
                candidate: c,
                moves,
                at_risk,
            }),
            Err((code, message)) => {
                self.sim.revert(mark);
                self.cursors = cursors;
                self.pdb_left = pdbs;
                self.receivers = receivers;
                self.closed[n] = false;
                Err(stays(code, message))
            }
        }
    }

    /// The pods' new places, and whether the node is at risk.
    fn move_all(
        &mut self,
        from: usize,
        pods: &[&Pod],
    ) -> Result<(Vec<PodMove>, Option<String>), (ReasonCode, String)> {
        let at_risk = self.take_disruptions(pods)?;
        for p in pods {
            self.sim.remove_pod(&self.sim.shape(p), from);
        }
        let mut moves = Vec::with_capacity(pods.len());
        for p in pods {
            let shape = self.sim.shape(p);
            let dest = self.destination(&shape).ok_or_else(|| {
                (
                    ReasonCode::NoPlaceToMovePods,
                    format!("pod {} fits no other node", p.id),
                )
            })?;
            self.sim.place(&shape, dest);
            if self.receivers[dest].is_none() {
                let from = self.sim.node(from).name.clone();
                self.receivers[dest] =
                    Some(format!("pods of {from}, also unneeded, are to move here"));
            }
            moves.push(PodMove {
                pod: p.id.clone(),
                destination: self.sim.node(dest).name.clone(),
            });
        }
        Ok((moves, at_risk))
    }

    /// Upstream's remaining-budget tracker (`core/scaledown/pdb/basic.go`, `CanRemovePods`
    /// then `RemovePods`): a pod covered by a PodDisruptionBudget with no disruption left keeps
    /// its node; pods that need more disruptions of one budget than it has left make the node
    /// at risk, not unremovable (the Eviction API lets them go one by one as replacements get
    /// ready). Either way the budgets are charged for every pod, so later candidates see what
    /// this one takes.
    fn take_disruptions(&mut self, pods: &[&Pod]) -> Result<Option<String>, (ReasonCode, String)> {
        let mut needed: Vec<(usize, i32)> = Vec::new();
        for p in pods {
            for i in self.rules.pdbs_of(p) {
                if self.pdb_left[i] < 1 {
                    return Err(self.no_disruption_left(p, i));
                }
                match needed.iter_mut().find(|(j, _)| *j == i) {
                    Some((_, n)) => *n = n.saturating_add(1),
                    None => needed.push((i, 1)),
                }
            }
        }
        let at_risk = needed
            .iter()
            .find(|&&(i, n)| n > self.pdb_left[i])
            .map(|&(i, n)| {
                format!(
                    "its pods need {n} disruptions of PodDisruptionBudget {}, which allows {} now",
                    self.rules.pdb(i).key,
                    self.pdb_left[i]
                )
            });
        for (i, n) in needed {
            self.pdb_left[i] = self.pdb_left[i].saturating_sub(n);
        }
        Ok(at_risk)
    }

    fn no_disruption_left(&self, pod: &Pod, i: usize) -> (ReasonCode, String) {
        let pdb = self.rules.pdb(i);
        let allowed = pdb.disruptions_allowed;
        let why = if self.pdb_left[i] < allowed {
            format!("nodes found unneeded before this one take the {allowed} it allows")
        } else {
            format!("{allowed} allowed now")
        };
        (
            ReasonCode::NotEnoughPdb,
            format!(
                "pod {} is covered by PodDisruptionBudget {}, which allows no more disruptions: {why}",
                pod.id, pdb.key
            ),
        )
    }

    /// The first open, real node the pod fits. Classes whose failures cannot turn into
    /// successes skip the nodes they already failed on.
    fn destination(&mut self, shape: &PodShape) -> Option<usize> {
        let key = (
            Arc::as_ptr(&shape.spec) as usize,
            shape.labels.as_ptr(),
            Arc::as_ptr(&shape.namespace) as *const u8 as usize,
        );
        let monotonic = !shape.spec.has_pod_affinity() && shape.spec.spread.is_empty();
        let start = if monotonic {
            self.cursors.get(&key).copied().unwrap_or(0)
        } else {
            0
        };
        for n in start..self.sim.nodes().len() {
            let open = !self.closed[n] && matches!(self.sim.node(n).kind, SimNodeKind::Existing(_));
            if open && self.sim.fits(shape, n).is_ok() {
                return Some(n);
            }
            if monotonic && (open || self.closed[n]) {
                self.cursors.insert(key, n + 1);
            }
        }
        None
    }
}

/// Why a node that is to receive `pod` stays: a pending pod expected there, or the
/// capacity a ProvisioningRequest booked (its made-up pods, as upstream's booked pods hold
/// their nodes).
fn expected_here(pod: &Pod) -> String {
    let booked = pod
        .owner
        .as_ref()
        .is_some_and(|o| &*o.kind == "ProvisioningRequest");
    match &pod.extras().consumes {
        Some(request) if booked => format!(
            "capacity is booked here for ProvisioningRequest {}/{request} (its pod {})",
            pod.id.namespace, pod.id.name
        ),
        _ => format!("pending pod {} is expected to be scheduled here", pod.id),
    }
}
