//! Scale-up options: which groups can grow, which pods fit a fresh node of each, and how
//! many nodes each group's option needs, evaluated in the simulator and reverted.

use std::sync::Arc;

use super::{Pass, Pending, ScaleOption};
use crate::estimator::{self, Candidate, Estimate};
use crate::expander::{self, OptionView, SeededRng};
use crate::limits::NodeUsage;
use crate::reason::{ReasonCode, Unfit};
use crate::simulator::{PodShape, SimNode, SimNodeKind};
use fleetscaler_model::Resources;

/// Per (pod class, group): whether the class fits a fresh node of the group. Dense: a
/// balancing pass looks it up for every peer of every option.
pub(super) struct FitMatrix {
    groups: usize,
    cells: Vec<Option<Result<(), Unfit>>>,
}

impl FitMatrix {
    pub(super) fn get(&self, &(class, group): &(usize, usize)) -> Option<&Result<(), Unfit>> {
        if group >= self.groups {
            return None;
        }
        self.cells.get(class * self.groups + group)?.as_ref()
    }
}

impl<'a> Pass<'a, '_> {
    /// Why a group cannot grow by even one node right now, if it cannot.
    pub(super) fn group_block(&self, gi: usize) -> Option<Unfit> {
        let g = &self.input.groups.groups[gi];
        let template = match &self.input.templates[gi] {
            Ok(t) => t,
            Err(e) => return Some(Unfit::new(ReasonCode::NoTemplate, e.to_string())),
        };
        if let Some(block) = &self.input.cluster.groups[gi].block {
            return Some(block.clone());
        }
        if self.targets[gi] >= g.max {
            return Some(Unfit::new(
                ReasonCode::MaxSizeReached,
                format!(
                    "the group is at its max size {} (target {})",
                    g.max, self.targets[gi]
                ),
            ));
        }
        if self.added >= self.input.settings.max_nodes_per_scaleup {
            return Some(Unfit::new(
                ReasonCode::ScaleUpCapReached,
                format!(
                    "this pass already adds {} nodes (max_nodes_per_scaleup)",
                    self.added
                ),
            ));
        }
        let (room, binding) = self
            .limits
            .room_for_one(gi, &NodeUsage::of_template(template));
        if room == 0 {
            return binding;
        }
        None
    }

    /// Whether a pod fits a fresh node of the group, in the current state.
    pub(super) fn fits_group(
        &mut self,
        gi: usize,
        shape: &PodShape,
        explain: bool,
    ) -> Result<(), Unfit> {
        let template = match &self.input.templates[gi] {
            Ok(t) => t,
            Err(e) => return Err(Unfit::new(ReasonCode::NoTemplate, e.to_string())),
        };
        let mark = self.sim.mark();
        let name: Arc<str> = format!("{}-template", self.group_name(gi)).into();
        let node = self
            .sim
            .add_node(SimNode::from_template(template, name, SimNodeKind::New(gi)));
        let result = if explain {
            self.sim.check(shape, node)
        } else {
            self.sim.fits(shape, node)
        };
        self.sim.revert(mark);
        result
    }

    /// Per class (first pod of each) and group: does it fit a fresh node of the group.
    pub(super) fn fit_matrix(&mut self, remaining: &[Pending], explain: bool) -> FitMatrix {
        let groups = self.targets.len();
        let classes = remaining.iter().map(|p| p.class + 1).max().unwrap_or(0);
        let mut fit = FitMatrix {
            groups,
            cells: vec![None; classes * groups],
        };
        for p in remaining {
            for gi in 0..groups {
                let cell = p.class * groups + gi;
                if fit.cells[cell].is_none() {
                    fit.cells[cell] = Some(self.fits_group(gi, &p.shape, explain));
                }
            }
        }
        fit
    }

    /// Per group, whether it can grow by a node right now.
    pub(super) fn open_groups(&self) -> Vec<bool> {
        (0..self.targets.len())
            .map(|gi| self.group_block(gi).is_none())
            .collect()
    }

    /// Groups to balance with: similar, able to grow (`open`), and fitting every class in
    /// `classes`.
    pub(super) fn balance_peers(
        &self,
        gi: usize,
        classes: &[usize],
        fit: &FitMatrix,
        open: &[bool],
    ) -> Vec<usize> {
        // An atomic request's nodes come from one group (see `request`).
        if !self.input.settings.balance_similar_node_groups || self.all_or_nothing {
            return Vec::new();
        }
        let mut classes = classes.to_vec();
        classes.sort_unstable();
        classes.dedup();
        self.similar
            .peers_of(gi)
            .filter(|&peer| open.get(peer).copied().unwrap_or(false))
            .filter(|&peer| {
                classes
                    .iter()
                    .all(|c| fit.get(&(*c, peer)).is_some_and(|r| r.is_ok()))
            })
            .collect()
    }

    pub(super) fn room(&self, gi: usize) -> u64 {
        self.input.groups.groups[gi]
            .max
            .saturating_sub(self.targets[gi])
    }

    /// The most nodes an option may add: the group's (and its balancing peers') room below
    /// max, capped by the cluster limits and by what this pass may still add; and which of
    /// those binds.
    pub(super) fn cap_for(&self, gi: usize, peers: &[usize]) -> (u64, Unfit) {
        let g = &self.input.groups.groups[gi];
        let mut cap: u64 = self.room(gi) + peers.iter().map(|&p| self.room(p)).sum::<u64>();
        let mut why = Unfit::new(
            ReasonCode::MaxSizeReached,
            format!("the group reaches its max size {}", g.max),
        );
        if let Ok(template) = &self.input.templates[gi] {
            let (by_limits, binding) = self.limits.room(&NodeUsage::of_template(template), cap);
            if let (true, Some(b)) = (by_limits < cap, binding) {
                cap = by_limits;
                why = b;
            }
        }
        let max_per_pass = self.input.settings.max_nodes_per_scaleup;
        let pass_room = max_per_pass.saturating_sub(self.added);
        if pass_room < cap {
            cap = pass_room;
            why = Unfit::new(
                ReasonCode::ScaleUpCapReached,
                format!("at most {max_per_pass} new nodes per pass (max_nodes_per_scaleup)"),
            );
        }
        (cap, why)
    }

    pub(super) fn candidates<'p>(
        &self,
        gi: usize,
        remaining: &'p [Pending],
        fit: &FitMatrix,
    ) -> Vec<Candidate<'p>> {
        remaining
            .iter()
            .enumerate()
            .filter(|(_, p)| fit.get(&(p.class, gi)).is_some_and(|r| r.is_ok()))
            .map(|(i, p)| Candidate {
                index: i,
                class: p.class,
                shape: &p.shape,
            })
            .collect()
    }

    pub(super) fn option_for(
        &mut self,
        gi: usize,
        remaining: &[Pending],
        fit: &FitMatrix,
        open: &[bool],
    ) -> Option<ScaleOption> {
        if !open.get(gi).copied().unwrap_or(false) {
            return None;
        }
        let candidates = self.candidates(gi, remaining, fit);
        if candidates.is_empty() {
            return None;
        }
        let classes: Vec<usize> = candidates.iter().map(|c| c.class).collect();
        let peers = self.balance_peers(gi, &classes, fit, open);
        let (cap, why) = self.cap_for(gi, &peers);
        let estimate = self.evaluate(gi, &candidates, cap)?;
        Some(ScaleOption {
            group: gi,
            peers,
            cap_reason: estimate.capped.then_some(why),
            estimate,
        })
    }

    /// Estimates and reverts: the option's size and pods, the simulation untouched.
    pub(super) fn evaluate(
        &mut self,
        gi: usize,
        candidates: &[Candidate],
        cap: u64,
    ) -> Option<Estimate> {
        let template = self.input.templates[gi].as_ref().ok()?;
        let name = self.group_name(gi).to_string();
        let mark = self.sim.mark();
        let estimate = estimator::estimate(self.sim, gi, &name, template, candidates, cap);
        self.sim.revert(mark);
        (!estimate.placed.is_empty()).then_some(estimate)
    }

    pub(super) fn choose(
        &self,
        options: &[ScaleOption],
        remaining: &[Pending],
        rng: &mut SeededRng,
    ) -> (usize, String) {
        let groups = &self.input.groups.groups;
        let views: Vec<OptionView> = options
            .iter()
            .filter_map(|o| {
                let template = self.input.templates[o.group].as_ref().ok()?;
                let mut requested = Resources::default();
                for &i in &o.estimate.placed {
                    requested.add(&remaining[i].shape.spec.requests);
                }
                Some(OptionView {
                    group: &groups[o.group].id,
                    node_count: o.estimate.node_count,
                    pod_count: o.estimate.placed.len(),
                    requested,
                    node_capacity: &template.capacity,
                })
            })
            .collect();
        expander::choose(
            &views,
            &self.input.settings.expanders,
            self.input.priorities,
            rng,
        )
    }
}
