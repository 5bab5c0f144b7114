//! What ProvisioningRequests ask of a scale-up pass (the decisions about the requests
//! themselves are `crate::provisioning`'s): pods consuming a request left out, booked
//! capacity placed, the other pods told to wait while a request has its turn, and one
//! request's pods served: checked against existing and upcoming nodes (check-capacity), or
//! given all the nodes they need from one group at once, or none (best-effort-atomic).

use std::collections::HashMap;

use super::{Pass, Pending, ScaleOption, sort_pending};
use crate::expander::SeededRng;
use crate::plan::Outcome;
use crate::reason::{Reason, ReasonCode};
use crate::simulator::{SimNodeKind, Simulator};
use fleetscaler_model::pod::Pod;

/// One request's pods, served in place of the pending pods.
pub struct RequestRun<'a> {
    /// `ns/name`, for the reasons.
    pub name: String,
    pub pods: &'a [Pod],
    /// Best-effort-atomic: scale up for the pods no node fits. Check-capacity: only check.
    pub scale_up: bool,
}

/// What became of a request's pods.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestOutcome {
    pub pods: usize,
    /// Pods that fit existing or upcoming nodes.
    pub fit: usize,
    /// The others got their nodes from a scale-up (the pass's one action).
    pub scaled: bool,
    /// Why the others have no place: the existing nodes' summary and, for a scale-up, each
    /// group's reason.
    pub reasons: Vec<Reason>,
}

impl<'a> Pass<'a, '_> {
    /// Pods consuming a request that no existing or upcoming node fits: the request is to
    /// give them room, so they trigger nothing themselves (upstream filters them after its
    /// filter-out-schedulable, and tells each pod so in an event).
    pub(super) fn leave_out_consumers(&mut self, remaining: Vec<Pending<'a>>) -> Vec<Pending<'a>> {
        if !self.extra.consumers_left_out {
            return remaining;
        }
        let mut keep = Vec::new();
        for p in remaining {
            let Some(request) = &p.pod.extras().consumes else {
                keep.push(p);
                continue;
            };
            let message = format!(
                "consumes ProvisioningRequest {}/{request}: the request provides its capacity, so the pod triggers no scale-up of its own",
                p.pod.id.namespace
            );
            let reason = Reason::new(ReasonCode::ConsumesProvisioningRequest, message);
            self.explain(p.pod, Outcome::NoScaleUp, None, None, vec![reason]);
        }
        keep
    }

    /// Places the booked pods where they fit, first fit, as upstream's `bookCapacity` does
    /// (those that fit nowhere are simply not booked). Remembers those on existing nodes:
    /// scale-down keeps the space they hold.
    pub(super) fn book(&mut self) {
        let mut cursor: HashMap<usize, usize> = HashMap::new();
        for (i, pod) in self.extra.booked.iter().enumerate() {
            let p = self.pending(pod);
            let monotonic = Simulator::failures_are_monotonic(&p.shape);
            let start = if monotonic {
                cursor.get(&p.class).copied().unwrap_or(0)
            } else {
                0
            };
            let nodes = self.sim.nodes().len();
            let found = (start..nodes).find(|&n| self.sim.fits(&p.shape, n).is_ok());
            if monotonic {
                cursor.insert(p.class, found.unwrap_or(nodes));
            }
            let Some(node) = found else { continue };
            self.sim.place(&p.shape, node);
            let n = self.sim.node(node);
            if matches!(n.kind, SimNodeKind::Existing(_)) {
                self.booked_on.push((i, n.name.clone()));
            }
        }
    }

    /// A request has this pass: the pending pods no node fits wait for the next one.
    pub(super) fn explain_yield(&mut self, remaining: &[Pending<'a>], request: &str) {
        let message = format!(
            "this pass serves ProvisioningRequest {request}; pending pods are considered in the next pass (passes alternate between ProvisioningRequests and other pods, as upstream's)"
        );
        for p in remaining {
            let mut reasons = vec![Reason::new(ReasonCode::ProvisioningRequestTurn, &*message)];
            reasons.extend(self.existing_summary.get(&p.class).cloned());
            self.explain(p.pod, Outcome::NoScaleUp, None, None, reasons);
        }
    }

    /// The request's pods on existing and upcoming nodes; for a best-effort-atomic request,
    /// one scale-up of one group for all those left, or none.
    pub(super) fn serve_request(
        &mut self,
        run: &RequestRun<'a>,
        rng: &mut SeededRng,
    ) -> RequestOutcome {
        let mut pods: Vec<Pending<'a>> = run.pods.iter().map(|p| self.pending(p)).collect();
        sort_pending(&mut pods);
        let total = pods.len();
        let remaining = self.filter_out_schedulable(pods);
        let mut outcome = RequestOutcome {
            pods: total,
            fit: total - remaining.len(),
            scaled: false,
            reasons: Vec::new(),
        };
        let Some(first) = remaining.first() else {
            return outcome;
        };
        let summary = self.existing_summary.get(&first.class).cloned();
        if run.scale_up && !self.input.cluster.healthy() {
            let why = self.input.cluster.unhealthy_reason();
            outcome
                .reasons
                .push(Reason::new(ReasonCode::ClusterUnhealthy, why));
        } else if run.scale_up {
            outcome.scaled = self.scale_up_atomically(run, &remaining, &mut outcome.reasons, rng);
        }
        outcome.reasons.extend(summary);
        outcome
    }

    /// Upstream's orchestrator with `allOrNothing`: an option that leaves a pod out is
    /// rejected, and a commit that places fewer than all is undone.
    fn scale_up_atomically(
        &mut self,
        run: &RequestRun,
        remaining: &[Pending<'a>],
        reasons: &mut Vec<Reason>,
        rng: &mut SeededRng,
    ) -> bool {
        self.all_or_nothing = true;
        let fit = self.fit_matrix(remaining, false);
        let open = self.open_groups();
        let options: Vec<ScaleOption> = (0..self.targets.len())
            .filter_map(|gi| self.option_for(gi, remaining, &fit, &open))
            .collect();
        let (whole, partial): (Vec<ScaleOption>, Vec<ScaleOption>) = options
            .into_iter()
            .partition(|o| o.estimate.placed.len() == remaining.len());
        if whole.is_empty() {
            reasons.extend(self.all_or_nothing_reasons(remaining, &partial));
            return false;
        }
        let (chosen, how) = self.choose(&whole, remaining, rng);
        let placed = self.commit(&whole[chosen], remaining, &how);
        if placed.len() < remaining.len() {
            self.actions.clear();
            reasons.push(Reason::new(
                ReasonCode::AllOrNothing,
                format!(
                    "the chosen option placed {} of {} pods when committed: no scale-up",
                    placed.len(),
                    remaining.len()
                ),
            ));
            return false;
        }
        for a in &mut self.actions {
            a.reason = format!(
                "ProvisioningRequest {} (best-effort-atomic-scale-up), all of its {} pods without room at once: {}",
                run.name,
                remaining.len(),
                a.reason
            );
            // The pods are the request's, made up here: no pod of the cluster is meant.
            a.pods.clear();
        }
        true
    }

    /// Per group, why it cannot take all the pods in one scale-up.
    fn all_or_nothing_reasons(
        &mut self,
        remaining: &[Pending<'a>],
        partial: &[ScaleOption],
    ) -> Vec<Reason> {
        let fit = self.fit_matrix(remaining, true);
        let mut out = Vec::new();
        for gi in 0..self.targets.len() {
            let id = self.input.groups.groups[gi].id.clone();
            if let Some(o) = partial.iter().find(|o| o.group == gi) {
                let capped = o
                    .cap_reason
                    .as_ref()
                    .map_or(String::new(), |u| format!(" ({}: {})", u.code, u.message));
                let message = format!(
                    "not all pods would fit and scale-up is using all-or-nothing strategy: {} node(s) would place {} of {} pods{capped}",
                    o.estimate.node_count,
                    o.estimate.placed.len(),
                    remaining.len()
                );
                out.push(Reason::for_group(&id, ReasonCode::AllOrNothing, message));
                continue;
            }
            let unfit = remaining
                .iter()
                .find_map(|p| fit.get(&(p.class, gi)).and_then(|r| r.clone().err()))
                .or_else(|| self.group_block(gi));
            if let Some(u) = unfit {
                out.push(Reason::for_group(&id, u.code, u.message));
            }
        }
        if self.targets.is_empty() {
            out.push(Reason::new(
                ReasonCode::NoNodeGroups,
                "the cluster has no autoscaled node groups",
            ));
        }
        out
    }
}
