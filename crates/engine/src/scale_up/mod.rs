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

mod commit;
mod explain;
mod min_size;
mod options;
mod request;
mod similar;

use fleetscaler_model::{Warning, WarningCode};
use std::collections::HashMap;
use std::sync::Arc;

use super::cluster_state::{ClusterState, NodeReadiness};
use super::estimator::Estimate;
use super::expander::{Priorities, SeededRng};
use super::limits::{Limits, LimitsReport, NodeUsage, SkippedByLimit};
use super::nodegroups::NodeGroups;
use super::plan::{Outcome, PodExplanation, ScaleUpAction};
use super::reason::{Reason, ReasonCode, Unfit};
use super::settings::Settings;
use super::simulator::{Mark, PodShape, SimNode, SimNodeKind, Simulator};
use super::template::TemplateNode;
use commit::retain_unplaced;
use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::pod::{Pod, Unsimulated};
use similar::Similar;

pub struct ScaleUpInput<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub groups: &'a NodeGroups,
    /// Corrected targets, nodes coming up, blocked groups and the cluster gate.
    pub cluster: &'a ClusterState,
    pub templates: &'a [Result<TemplateNode, super::template::TemplateError>],
    pub settings: &'a Settings,
    pub priorities: Option<&'a Priorities>,
    pub now: jiff::Timestamp,
}

/// What a pass owes ProvisioningRequests (see `crate::provisioning`); `Extra::default()`
/// is a cluster without them.
#[derive(Default)]
pub struct Extra<'a> {
    /// ProvisioningRequests are served: pods consuming one are left out of scale-up once
    /// no existing or upcoming node fits them (upstream's `ProvisioningRequestPodsFilter`).
    pub consumers_left_out: bool,
    /// The pods of requests whose capacity is booked: placed where they fit after the
    /// pending pods that fit (upstream books after its pod list's filter-out-schedulable).
    pub booked: &'a [Pod],
    /// This pass is a ProvisioningRequest's turn (its name): pending pods are explained,
    /// none is served.
    pub yield_to: Option<String>,
    /// A request's pods to serve instead of pending pods.
    pub request: Option<request::RequestRun<'a>>,
}

pub use request::{RequestOutcome, RequestRun};

pub struct ScaleUpOutput {
    pub actions: Vec<ScaleUpAction>,
    pub pods: Vec<PodExplanation>,
    pub limits: LimitsReport,
    /// Groups a cores or memory max left no room for a single node.
    pub skipped: SkippedByLimit,
    /// Per group: nodes asked for that have not registered.
    pub upcoming: Vec<u64>,
    pub warnings: Vec<Warning>,
    /// Booked pods (index into `Extra::booked`) placed on an existing node, by its name.
    pub booked_on: Vec<(usize, Arc<str>)>,
    /// Pending pods no node fits were left after filtering (ones a scale-up could be for).
    pub waiting: bool,
    /// What became of `Extra::request`.
    pub request: Option<RequestOutcome>,
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
    /// The similar groups its nodes are split over when balancing: those fitting every
    /// pod class that fits this group (upstream's `ComputeSimilarNodeGroups`).
    peers: Vec<usize>,
    estimate: Estimate,
    /// What stopped the estimate adding more nodes, when something did.
    cap_reason: Option<Unfit>,
}

/// The state of one scale-up pass.
struct Pass<'a, 's> {
    input: &'a ScaleUpInput<'a>,
    extra: &'a Extra<'a>,
    /// The pass's base simulation; this pass's changes are above `start`.
    sim: &'s mut Simulator,
    start: Mark,
    limits: Limits,
    targets: Vec<u64>,
    added: u64,
    upcoming: Vec<u64>,
    /// The groups similar enough to balance with, found when first asked.
    similar: Similar<'a>,
    explanations: Vec<PodExplanation>,
    /// Per pod class: why no existing or upcoming node fits.
    existing_summary: HashMap<usize, Reason>,
    actions: Vec<ScaleUpAction>,
    /// New nodes committed so far in this pass; later pods try them before asking for more.
    committed: Vec<usize>,
    warnings: Vec<Warning>,
    booked_on: Vec<(usize, Arc<str>)>,
    /// Pod classes: (spec, namespace, labels, the pod when its claims are its own) → class.
    classes: HashMap<(usize, usize, usize, usize), usize>,
    /// A best-effort-atomic request's run: one option placing every pod, one group.
    all_or_nothing: bool,
}

pub fn plan(input: &ScaleUpInput, rng: &mut SeededRng) -> ScaleUpOutput {
    let mut sim = base(input, &crate::simulator::pods_by_node(input.snapshot));
    plan_with(input, &Extra::default(), &mut sim, rng)
}

/// The base simulation of a pass (see [`Simulator::base`]).
pub fn base(input: &ScaleUpInput, pods_on: &[Vec<&Pod>]) -> Simulator {
    Simulator::base(
        input.snapshot,
        pods_on,
        &input.cluster.readiness,
        input.settings.pod_priority_threshold,
    )
}

/// The pass with what ProvisioningRequests ask of it (upstream's wrapper orchestrator
/// runs either the pending pods or one request's pods through the same orchestrator),
/// on the pass's base simulation (from [`base`]), left as it was found.
pub fn plan_with<'a>(
    input: &'a ScaleUpInput<'a>,
    extra: &'a Extra<'a>,
    sim: &mut Simulator,
    rng: &mut SeededRng,
) -> ScaleUpOutput {
    let mut pass = Pass::new(input, extra, sim);
    let pending = pass.classify();
    let remaining = pass.filter_out_schedulable(pending);
    let remaining = pass.hold_young_pods(remaining);
    let remaining = pass.leave_out_consumers(remaining);
    pass.book();
    let waiting = !remaining.is_empty();
    let mut request = None;
    if let Some(run) = &extra.request {
        request = Some(pass.serve_request(run, rng));
    } else if !input.cluster.healthy() {
        pass.explain_unhealthy_cluster(&remaining);
    } else if let Some(name) = &extra.yield_to {
        // Min sizes wait too: the request's scale-up may grow the same group.
        pass.explain_yield(&remaining, name);
    } else {
        let remaining = pass.scale_up_loop(remaining, rng);
        pass.explain_leftovers(&remaining);
        pass.enforce_min_sizes();
    }
    for problem in pass.sim.dra_problems() {
        pass.warnings
            .push(Warning::general(WarningCode::ScaleUp, problem.clone()));
    }
    pass.sim.revert(pass.start);
    pass.explanations.sort_by(|a, b| a.pod.cmp(&b.pod));
    pass.actions.sort_by(|a, b| a.node_group.cmp(&b.node_group));
    ScaleUpOutput {
        actions: pass.actions,
        pods: pass.explanations,
        limits: pass.limits.report(),
        skipped: pass.limits.skipped(),
        upcoming: pass.upcoming,
        warnings: pass.warnings,
        booked_on: pass.booked_on,
        waiting,
        request,
    }
}

impl<'a, 's> Pass<'a, 's> {
    fn new(input: &'a ScaleUpInput<'a>, extra: &'a Extra<'a>, sim: &'s mut Simulator) -> Self {
        let mut limits = Limits::new(input.settings);
        // Limits count every node not being removed; not-started nodes are in them as the
        // real nodes they are, and out of the simulation (see `Simulator::base`).
        for (i, readiness) in input.cluster.readiness.iter().enumerate() {
            if *readiness != NodeReadiness::Deleting {
                limits.add(&input.cluster.usage[i], 1);
            }
        }
        let start = sim.mark();
        let mut pass = Pass {
            input,
            extra,
            sim,
            start,
            limits,
            targets: input.cluster.groups.iter().map(|g| g.target).collect(),
            added: 0,
            upcoming: vec![0; input.groups.groups.len()],
            similar: Similar::new(input.templates, &input.settings.balancing_ignored_labels),
            explanations: Vec::new(),
            existing_summary: HashMap::new(),
            actions: Vec::new(),
            committed: Vec::new(),
            warnings: Vec::new(),
            booked_on: Vec::new(),
            classes: HashMap::new(),
            all_or_nothing: false,
        };
        pass.add_upcoming_nodes();
        pass
    }

    /// Nodes a group is already asked for but that have not registered become template copies.
    /// A pod takes one node at most, so no more copies are made than there are pending pods:
    /// a target of ten million (a typo away) costs a count, not ten million nodes.
    fn add_upcoming_nodes(&mut self) {
        let pending = self
            .input
            .snapshot
            .pods
            .iter()
            .filter(|p| waits_for_a_node(p))
            .count() as u64;
        // Booked pods and a request's pods take upcoming nodes too.
        let extra =
            self.extra.booked.len() + self.extra.request.as_ref().map_or(0, |r| r.pods.len());
        let pending = pending + extra as u64;
        for (gi, g) in self.input.groups.groups.iter().enumerate() {
            let up = self.input.cluster.groups[gi].upcoming;
            self.upcoming[gi] = up;
            let Ok(template) = &self.input.templates[gi] else {
                if up > 0 {
                    self.warnings.push(Warning::about(
                        WarningCode::ScaleUp,
                        &g.id,
                        format!("{up} upcoming node(s) cannot be simulated without a template; pods they would take may cause extra scale-ups"),
                    ));
                }
                continue;
            };
            for k in 0..up.min(pending) {
                let name: Arc<str> = format!("{}-upcoming-{}", self.group_name(gi), k + 1).into();
                self.sim.add_node(SimNode::from_template(
                    template,
                    name,
                    SimNodeKind::Upcoming(gi),
                ));
            }
            // Not-started nodes are already counted as the real nodes they are.
            let unregistered = up.saturating_sub(self.input.cluster.groups[gi].not_started);
            self.limits
                .add(&NodeUsage::of_template(template), unregistered);
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
        let mut pending = Vec::new();
        let candidates = self
            .input
            .snapshot
            .pods
            .iter()
            .filter(|p| waits_for_a_node(p));
        for pod in candidates {
            if pod.is_expendable(settings.pod_priority_threshold) {
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
            } else if let Some(node) = &pod.extras().nominated_node {
                self.explain(pod, Outcome::FitsExisting, None, Some(node.clone()), vec![]);
            } else if !self.input.snapshot.dra.listed
                && pod
                    .spec
                    .unsimulated
                    .contains(&Unsimulated::DynamicResources)
            {
                // Its reason is the NotSimulated note `explain` adds.
                self.explain(pod, Outcome::NoScaleUp, None, None, vec![]);
            } else {
                pending.push(self.pending(pod));
            }
        }
        sort_pending(&mut pending);
        pending
    }

    /// A pod as the pass simulates it, in the class of the pods equal to it for scheduling.
    fn pending(&mut self, pod: &'a Pod) -> Pending<'a> {
        let shape = self.sim.shape(pod);
        // A pod whose claims were made for it (`resourceClaimStatuses`) may need other
        // devices than its replicas: a class of its own.
        let own = if pod.extras().claim_statuses.is_empty() {
            0
        } else {
            pod as *const Pod as usize
        };
        let key = (
            Arc::as_ptr(&pod.spec) as usize,
            Arc::as_ptr(&pod.id.namespace) as *const u8 as usize,
            pod.labels.as_ptr(),
            own,
        );
        let next = self.classes.len();
        let class = *self.classes.entry(key).or_insert(next);
        Pending { pod, shape, class }
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
            let mut failures: Vec<(ReasonCode, usize)> = Vec::new();
            let mut found = None;
            for node in start..nodes {
                match self.sim.fits(&p.shape, node) {
                    Ok(()) => {
                        found = Some(node);
                        break;
                    }
                    Err(u) => failures.push((u.code, node)),
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
                    if !self.existing_summary.contains_key(&p.class) {
                        let summary = self.summarize(&p.shape, nodes, &failures);
                        self.existing_summary.insert(p.class, summary);
                    }
                    remaining.push(p);
                }
            }
        }
        remaining
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
            let fit = self.fit_matrix(&remaining, false);
            // Whether each group can grow now: asked once per round, not once per peer.
            let open = self.open_groups();
            let options: Vec<ScaleOption> = (0..self.targets.len())
                .filter_map(|gi| self.option_for(gi, &remaining, &fit, &open))
                .collect();
            if options.is_empty() {
                break;
            }
            let (chosen, how) = self.choose(&options, &remaining, rng);
            let placed = self.commit(&options[chosen], &remaining, &how);
            if placed.is_empty() {
                self.warnings.push(Warning::about(
                    WarningCode::ScaleUp,
                    &self.input.groups.groups[options[chosen].group].id,
                    "the chosen scale-up placed no pod when committed; stopping this pass",
                ));
                break;
            }
            retain_unplaced(&mut remaining, &placed);
        }
        remaining
    }
}

/// Highest priority first, then oldest, then by name.
fn sort_pending(pending: &mut [Pending]) {
    pending.sort_by(|a, b| {
        let prio = |p: &Pending| p.pod.priority.unwrap_or(0);
        prio(b)
            .cmp(&prio(a))
            .then(a.pod.created.cmp(&b.pod.created))
            .then(a.pod.id.cmp(&b.pod.id))
    });
}

/// A pod the scheduler could not place, that is not finished or going: what a scale-up is for.
fn waits_for_a_node(p: &Pod) -> bool {
    p.unschedulable && p.node_name.is_none() && !p.is_terminal() && p.deleting.is_none()
}

#[cfg(test)]
mod tests;
