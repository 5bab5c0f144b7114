//! Scale-up: which pending pods a new node would help, how many nodes of which group, and
//! why nothing can be done for the rest.
//!
//! The pass, as upstream: pending pods below the priority cutoff are set aside; the others
//! are first tried on existing and upcoming nodes (those fitting need no new node); for the
//! rest, every group that can grow estimates how many of its nodes they need, an expander
//! picks one option, balancing may spread it over similar groups, and limits cap it.
//! Upstream executes one option per loop and leaves other pods "awaiting evaluation"; here
//! the chosen option's pods are taken out and the choice repeats in the same pass, so pods
//! that need different groups are all served at once (never two options for the same pods).

use std::collections::HashMap;
use std::sync::Arc;

use super::balance::{self, SplitGroup};
use super::estimator::{self, Candidate, Estimate};
use super::expander::{self, OptionView, Priorities, SeededRng};
use super::limits::{Limits, LimitsReport, NodeUsage};
use super::nodegroups::NodeGroups;
use super::plan::{Outcome, PodExplanation, ScaleUpAction};
use super::reason::{Reason, ReasonCode, Unfit};
use super::settings::Settings;
use super::simulator::{PodShape, SimNode, SimNodeKind, Simulator};
use super::template::TemplateNode;
use crate::model::pod::{Pod, Unsimulated};
use crate::model::{ClusterSnapshot, Resources};

pub struct ScaleUpInput<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub groups: &'a NodeGroups,
    pub templates: &'a [Result<TemplateNode, String>],
    pub settings: &'a Settings,
    pub priorities: Option<&'a Priorities>,
}

pub struct ScaleUpOutput {
    pub actions: Vec<ScaleUpAction>,
    pub pods: Vec<PodExplanation>,
    pub limits: LimitsReport,
    /// Per group: nodes asked for that have not registered.
    pub upcoming: Vec<u64>,
    pub warnings: Vec<String>,
}

/// A pending pod still looking for a place.
struct Pending<'a> {
    pod: &'a Pod,
    shape: PodShape,
    class: usize,
}

/// One group's scale-up option, evaluated and reverted.
struct ScaleOption {
    group: usize,
    estimate: Estimate,
}

/// The state of one scale-up pass.
struct Pass<'a> {
    input: &'a ScaleUpInput<'a>,
    sim: Simulator,
    limits: Limits,
    targets: Vec<u64>,
    added: u64,
    upcoming: Vec<u64>,
    /// Per group, the groups similar enough to balance with.
    similar: Vec<Vec<usize>>,
    explanations: Vec<PodExplanation>,
    /// Per pod class: why no existing or upcoming node fits.
    existing_summary: HashMap<usize, Reason>,
    actions: Vec<ScaleUpAction>,
    /// New nodes committed so far in this pass; later pods try them before asking for more.
    committed: Vec<usize>,
    warnings: Vec<String>,
}

pub fn plan(input: &ScaleUpInput, rng: &mut SeededRng) -> ScaleUpOutput {
    let mut pass = Pass::new(input);
    let pending = pass.classify();
    let remaining = pass.filter_out_schedulable(pending);
    let remaining = pass.scale_up_loop(remaining, rng);
    pass.explain_leftovers(&remaining);
    pass.explanations.sort_by(|a, b| a.pod.cmp(&b.pod));
    ScaleUpOutput {
        actions: pass.actions,
        pods: pass.explanations,
        limits: pass.limits.report(),
        upcoming: pass.upcoming,
        warnings: pass.warnings,
    }
}

fn is_expendable(pod: &Pod, settings: &Settings) -> bool {
    pod.priority
        .is_some_and(|p| p < settings.pod_priority_threshold)
}

impl<'a> Pass<'a> {
    fn new(input: &'a ScaleUpInput<'a>) -> Self {
        let s = input.snapshot;
        let namespaces = s
            .namespaces
            .iter()
            .map(|n| (n.name.clone(), n.labels.clone()))
            .collect();
        let mut sim = Simulator::new(namespaces);
        let mut limits = Limits::new(input.settings);
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, node) in s.nodes.iter().enumerate().filter(|(_, n)| !n.deleting) {
            by_name.insert(&node.name, sim.add_node(SimNode::existing(i, node)));
            limits.add(&NodeUsage::of_node(node), 1);
        }
        // Pods below the cutoff do not hold space: pending pods may preempt them.
        let running = s
            .pods
            .iter()
            .filter(|p| !p.is_terminal() && !is_expendable(p, input.settings));
        for pod in running {
            if let Some(&node) = pod.node_name.as_deref().and_then(|n| by_name.get(n)) {
                sim.place(&PodShape::from(pod), node);
            }
        }
        let mut pass = Pass {
            input,
            sim,
            limits,
            targets: input.groups.groups.iter().map(|g| g.target).collect(),
            added: 0,
            upcoming: vec![0; input.groups.groups.len()],
            similar: similar_groups(input),
            explanations: Vec::new(),
            existing_summary: HashMap::new(),
            actions: Vec::new(),
            committed: Vec::new(),
            warnings: Vec::new(),
        };
        pass.add_upcoming_nodes();
        pass
    }

    /// Nodes a group is already asked for but that have not registered become template copies.
    fn add_upcoming_nodes(&mut self) {
        for (gi, g) in self.input.groups.groups.iter().enumerate() {
            let up = g.target.saturating_sub(g.nodes.len() as u64);
            self.upcoming[gi] = up;
            let Ok(template) = &self.input.templates[gi] else {
                if up > 0 {
                    self.warnings.push(format!(
                        "{}: {up} upcoming node(s) cannot be simulated without a template; pods they would take may cause extra scale-ups",
                        g.id
                    ));
                }
                continue;
            };
            for k in 0..up {
                let name: Arc<str> = format!("{}-upcoming-{}", self.group_name(gi), k + 1).into();
                self.sim.add_node(SimNode::from_template(
                    template,
                    name,
                    SimNodeKind::Upcoming(gi),
                ));
            }
            self.limits.add(&NodeUsage::of_template(template), up);
        }
    }

    fn group_name(&self, gi: usize) -> &str {
        &self.input.snapshot.scalables[self.input.groups.groups[gi].resource]
            .key
            .name
    }

    /// Sets aside the pods that cannot take part; returns the rest, highest priority first.
    fn classify(&mut self) -> Vec<Pending<'a>> {
        let settings = self.input.settings;
        let mut classes: HashMap<(usize, usize, usize), usize> = HashMap::new();
        let mut pending = Vec::new();
        let candidates = self.input.snapshot.pods.iter().filter(|p| {
            p.unschedulable && p.node_name.is_none() && !p.is_terminal() && p.deleting.is_none()
        });
        for pod in candidates {
            if is_expendable(pod, settings) {
                let message = format!(
                    "priority {} is below podPriorityThreshold {}: such pods never trigger a scale-up",
                    pod.priority.unwrap_or(0),
                    settings.pod_priority_threshold
                );
                self.explain(
                    pod,
                    Outcome::BelowPriorityCutoff,
                    None,
                    None,
                    vec![Reason::new(ReasonCode::BelowPriorityCutoff, message)],
                );
            } else if pod.is_daemonset() {
                let message = "a DaemonSet pod: every new node runs its own copy, so adding nodes cannot place this one";
                self.explain(
                    pod,
                    Outcome::NoScaleUp,
                    None,
                    None,
                    vec![Reason::new(ReasonCode::DaemonSetPod, message)],
                );
            } else if let Some(node) = &pod.nominated_node {
                self.explain(pod, Outcome::FitsExisting, None, Some(node.clone()), vec![]);
            } else {
                let shape = PodShape::from(pod);
                let key = (
                    Arc::as_ptr(&pod.spec) as usize,
                    Arc::as_ptr(&pod.id.namespace) as *const u8 as usize,
                    pod.labels.as_ptr(),
                );
                let next = classes.len();
                let class = *classes.entry(key).or_insert(next);
                pending.push(Pending { pod, shape, class });
            }
        }
        pending.sort_by(|a, b| {
            let prio = |p: &Pending| p.pod.priority.unwrap_or(0);
            prio(b)
                .cmp(&prio(a))
                .then(a.pod.created.cmp(&b.pod.created))
                .then(a.pod.id.cmp(&b.pod.id))
        });
        pending
    }

    fn explain(
        &mut self,
        pod: &Pod,
        outcome: Outcome,
        group: Option<usize>,
        node: Option<Arc<str>>,
        mut reasons: Vec<Reason>,
    ) {
        let has_namespaces = !self.input.snapshot.namespaces.is_empty();
        for u in &pod.spec.unsimulated {
            if !(has_namespaces && *u == Unsimulated::NamespaceSelector) {
                reasons.push(Reason::new(ReasonCode::NotSimulated, u.describe()));
            }
        }
        self.explanations.push(PodExplanation {
            pod: pod.id.clone(),
            outcome,
            node_group: group.map(|g| self.input.groups.groups[g].id.clone()),
            node,
            reasons,
        });
    }

    /// Places the pods that fit an existing or upcoming node; returns those that do not.
    fn filter_out_schedulable(&mut self, pending: Vec<Pending<'a>>) -> Vec<Pending<'a>> {
        let nodes = self.sim.nodes().len();
        let classes = pending.iter().map(|p| p.class + 1).max().unwrap_or(0);
        let mut cursor = vec![0usize; classes];
        let mut remaining = Vec::new();
        for p in pending {
            let monotonic = Simulator::failures_are_monotonic(&p.shape);
            let start = if monotonic { cursor[p.class] } else { 0 };
            let mut failures: Vec<Unfit> = Vec::new();
            let mut found = None;
            for node in start..nodes {
                match self.sim.check(&p.shape, node) {
                    Ok(()) => {
                        found = Some(node);
                        break;
                    }
                    Err(u) => failures.push(u),
                }
                if monotonic {
                    cursor[p.class] = node + 1;
                }
            }
            match found {
                Some(node) => {
                    self.sim.place(&p.shape, node);
                    let n = self.sim.node(node);
                    let (outcome, group) = match n.kind {
                        SimNodeKind::Upcoming(g) => (Outcome::FitsUpcoming, Some(g)),
                        _ => (Outcome::FitsExisting, None),
                    };
                    let name = n.name.clone();
                    self.explain(p.pod, outcome, group, Some(name), vec![]);
                }
                None => {
                    self.existing_summary
                        .entry(p.class)
                        .or_insert_with(|| summarize(nodes, &failures));
                    remaining.push(p);
                }
            }
        }
        remaining
    }

    /// Why a group cannot grow by even one node right now, if it cannot.
    fn group_block(&self, gi: usize) -> Option<Unfit> {
        let g = &self.input.groups.groups[gi];
        let template = match &self.input.templates[gi] {
            Ok(t) => t,
            Err(message) => return Some(Unfit::new(ReasonCode::NoTemplate, message.clone())),
        };
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
        let (room, binding) = self.limits.room(&NodeUsage::of_template(template), 1);
        if room == 0 {
            return binding;
        }
        None
    }

    /// Whether a pod fits a fresh node of the group, in the current state.
    fn fits_group(&mut self, gi: usize, shape: &PodShape) -> Result<(), Unfit> {
        let Ok(template) = &self.input.templates[gi] else {
            return Err(Unfit::new(ReasonCode::NoTemplate, "no template"));
        };
        let mark = self.sim.mark();
        let name: Arc<str> = format!("{}-template", self.group_name(gi)).into();
        let node = self
            .sim
            .add_node(SimNode::from_template(template, name, SimNodeKind::New(gi)));
        let result = self.sim.check(shape, node);
        self.sim.revert(mark);
        result
    }

    /// Per class (first pod of each) and group: does it fit a fresh node of the group.
    fn fit_matrix(&mut self, remaining: &[Pending]) -> HashMap<(usize, usize), Result<(), Unfit>> {
        let mut fit = HashMap::new();
        for p in remaining {
            for gi in 0..self.targets.len() {
                if let std::collections::hash_map::Entry::Vacant(e) = fit.entry((p.class, gi)) {
                    e.insert(self.fits_group(gi, &p.shape));
                }
            }
        }
        fit
    }

    fn scale_up_loop(
        &mut self,
        mut remaining: Vec<Pending<'a>>,
        rng: &mut SeededRng,
    ) -> Vec<Pending<'a>> {
        while !remaining.is_empty() {
            let joined = self.join_committed(&remaining);
            retain_unplaced(&mut remaining, &joined);
            if remaining.is_empty() {
                break;
            }
            let fit = self.fit_matrix(&remaining);
            let options: Vec<ScaleOption> = (0..self.targets.len())
                .filter_map(|gi| self.option_for(gi, &remaining, &fit))
                .collect();
            if options.is_empty() {
                break;
            }
            let (chosen, how) = self.choose(&options, &remaining, rng);
            let placed = self.commit(&options[chosen], &remaining, &fit, &how);
            if placed.is_empty() {
                self.warnings.push(format!(
                    "{}: the chosen scale-up placed no pod when committed; stopping this pass",
                    self.input.groups.groups[options[chosen].group].id
                ));
                break;
            }
            retain_unplaced(&mut remaining, &placed);
        }
        remaining
    }

    /// Places what fits on the new nodes already committed in this pass (a later round can
    /// make room: topology spread counts change as other zones grow). Returns pod indices.
    fn join_committed(&mut self, remaining: &[Pending<'a>]) -> Vec<usize> {
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
        let (placed, _) = estimator::pack_onto(&mut self.sim, &committed, &template, &candidates);
        for &(i, node) in &placed {
            if let SimNodeKind::New(g) = self.sim.node(node).kind {
                self.add_to_action(g, &remaining[i]);
                self.explain(remaining[i].pod, Outcome::ScaleUp, Some(g), None, vec![]);
            }
        }
        placed.into_iter().map(|(i, _)| i).collect()
    }

    fn add_to_action(&mut self, g: usize, p: &Pending) {
        let id = &self.input.groups.groups[g].id;
        if let Some(action) = self.actions.iter_mut().find(|a| &a.node_group == id) {
            action.pods.push(p.pod.id.clone());
            action.pods.sort();
        }
    }

    /// Groups to balance with: similar, able to grow, and fitting every class in `classes`.
    fn balance_peers(
        &self,
        gi: usize,
        classes: &[usize],
        fit: &HashMap<(usize, usize), Result<(), Unfit>>,
    ) -> Vec<usize> {
        if !self.input.settings.balance_similar_node_groups {
            return Vec::new();
        }
        self.similar[gi]
            .iter()
            .copied()
            .filter(|&peer| self.group_block(peer).is_none())
            .filter(|&peer| {
                classes
                    .iter()
                    .all(|c| fit.get(&(*c, peer)).is_some_and(|r| r.is_ok()))
            })
            .collect()
    }

    fn room(&self, gi: usize) -> u64 {
        self.input.groups.groups[gi]
            .max
            .saturating_sub(self.targets[gi])
    }

    /// The most nodes an option may add: the group's (and its balancing peers') room below
    /// max, capped by the cluster limits and by what this pass may still add. Pods left over
    /// by the cap are explained on the next round, when the group is found blocked.
    fn cap_for(&self, gi: usize, peers: &[usize]) -> u64 {
        let Ok(template) = &self.input.templates[gi] else {
            return 0;
        };
        let size_room: u64 = self.room(gi) + peers.iter().map(|&p| self.room(p)).sum::<u64>();
        let (by_limits, _) = self
            .limits
            .room(&NodeUsage::of_template(template), size_room);
        let pass_room = self
            .input
            .settings
            .max_nodes_per_scaleup
            .saturating_sub(self.added);
        size_room.min(by_limits).min(pass_room)
    }

    fn candidates<'p>(
        &self,
        gi: usize,
        remaining: &'p [Pending],
        fit: &HashMap<(usize, usize), Result<(), Unfit>>,
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

    fn option_for(
        &mut self,
        gi: usize,
        remaining: &[Pending],
        fit: &HashMap<(usize, usize), Result<(), Unfit>>,
    ) -> Option<ScaleOption> {
        if self.group_block(gi).is_some() {
            return None;
        }
        let candidates = self.candidates(gi, remaining, fit);
        if candidates.is_empty() {
            return None;
        }
        let classes: Vec<usize> = candidates.iter().map(|c| c.class).collect();
        let peers = self.balance_peers(gi, &classes, fit);
        let cap = self.cap_for(gi, &peers);
        let estimate = self.evaluate(gi, &candidates, cap)?;
        Some(ScaleOption {
            group: gi,
            estimate,
        })
    }

    /// Estimates and reverts: the option's size and pods, the simulation untouched.
    fn evaluate(&mut self, gi: usize, candidates: &[Candidate], cap: u64) -> Option<Estimate> {
        let template = self.input.templates[gi].as_ref().ok()?;
        let name = self.group_name(gi).to_string();
        let mark = self.sim.mark();
        let estimate = estimator::estimate(&mut self.sim, gi, &name, template, candidates, cap);
        self.sim.revert(mark);
        (!estimate.placed.is_empty()).then_some(estimate)
    }

    fn choose(
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

    /// Adds the chosen option's nodes (split over similar groups when balancing) and places
    /// its pods on them. Returns the indices (into `remaining`) of the pods placed.
    fn commit(
        &mut self,
        option: &ScaleOption,
        remaining: &[Pending<'a>],
        fit: &HashMap<(usize, usize), Result<(), Unfit>>,
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
        let classes: Vec<usize> = candidates.iter().map(|c| c.class).collect();
        let peers = self.balance_peers(gi, &classes, fit);
        let split = self.split(gi, &peers, option.estimate.node_count);
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
        let (placed, _) = estimator::pack_onto(&mut self.sim, &nodes, &template, &candidates);
        let landed: Vec<(usize, usize)> = placed
            .iter()
            .map(|&(i, node)| match self.sim.node(node).kind {
                SimNodeKind::New(g) => (i, g),
                _ => (i, gi),
            })
            .collect();
        self.record(option, &split, &landed, remaining, how);
        landed.into_iter().map(|(i, _)| i).collect()
    }

    fn split(&self, gi: usize, peers: &[usize], nodes: u64) -> Vec<(usize, u64)> {
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
    fn record(
        &mut self,
        option: &ScaleOption,
        split: &[(usize, u64)],
        landed: &[(usize, usize)],
        remaining: &[Pending<'a>],
        how: &str,
    ) {
        let mut pods_of: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(i, g) in landed {
            pods_of.entry(g).or_default().push(i);
        }
        let balanced = split.len() > 1;
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
            let reason = format!(
                "{} pending pod(s) need {} new node(s) of {}; {how}{}",
                landed.len(),
                option.estimate.node_count,
                self.input.groups.groups[option.group].id,
                if balanced {
                    format!(
                        "; balanced over {} similar groups, this one gets {k}",
                        split.len()
                    )
                } else {
                    String::new()
                }
            );
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

    fn explain_leftovers(&mut self, remaining: &[Pending<'a>]) {
        let fit = self.fit_matrix(remaining);
        let groups = &self.input.groups;
        for p in remaining {
            let mut reasons = Vec::new();
            if groups.groups.is_empty() && groups.ineligible.is_empty() {
                reasons.push(Reason::new(
                    ReasonCode::NoNodeGroups,
                    "the cluster has no autoscaled node groups: annotate a MachineSet or MachineDeployment with min/max size, or create a MachineAutoscaler",
                ));
            }
            reasons.extend(groups.ineligible.iter().map(|g| g.reason.clone()));
            for (gi, g) in groups.groups.iter().enumerate() {
                let unfit = match fit.get(&(p.class, gi)) {
                    Some(Err(u)) => Some(u.clone()),
                    _ => self.group_block(gi),
                };
                match unfit {
                    Some(u) => reasons.push(Reason::for_group(&g.id, u.code, u.message)),
                    None => self.warnings.push(format!(
                        "{}: fits {} but no scale-up option was formed",
                        p.pod.id, g.id
                    )),
                }
            }
            if let Some(summary) = self.existing_summary.get(&p.class) {
                reasons.push(summary.clone());
            }
            self.explain(p.pod, Outcome::NoScaleUp, None, None, reasons);
        }
    }
}

fn retain_unplaced(remaining: &mut Vec<Pending>, placed: &[usize]) {
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

/// `none of the 12 existing and upcoming nodes fits: 10 InsufficientResources (cpu ...), 2 UntoleratedTaint (...)`.
fn summarize(nodes: usize, failures: &[Unfit]) -> Reason {
    let mut by_code: Vec<(ReasonCode, usize, &str)> = Vec::new();
    for f in failures {
        match by_code.iter_mut().find(|(c, _, _)| *c == f.code) {
            Some(entry) => entry.1 += 1,
            None => by_code.push((f.code, 1, &f.message)),
        }
    }
    by_code.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let parts: Vec<String> = by_code
        .iter()
        .map(|(c, n, example)| format!("{n} {c} (e.g. {example})"))
        .collect();
    let code = by_code.first().map_or(ReasonCode::NoNodeGroups, |c| c.0);
    let message = if nodes == 0 {
        "the cluster has no nodes to place it on".to_string()
    } else {
        format!(
            "none of the {nodes} existing and upcoming nodes fits: {}",
            parts.join(", ")
        )
    };
    Reason::new(code, message)
}

fn similar_groups(input: &ScaleUpInput) -> Vec<Vec<usize>> {
    let n = input.groups.groups.len();
    let mut out = vec![Vec::new(); n];
    if !input.settings.balance_similar_node_groups {
        return out;
    }
    for (a, peers) in out.iter_mut().enumerate() {
        for b in (0..n).filter(|&b| b != a) {
            if let (Ok(ta), Ok(tb)) = (&input.templates[a], &input.templates[b])
                && balance::similar(ta, tb, &input.settings.balancing_ignored_labels).is_ok()
            {
                peers.push(b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
