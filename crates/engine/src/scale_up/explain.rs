//! Explanations: for every pending pod, its outcome and the reasons, group by group.

use fleetscaler_model::{Warning, WarningCode};
use std::sync::Arc;

use super::{Pass, Pending};
use crate::plan::{Outcome, PodExplanation};
use crate::reason::{Reason, ReasonCode};
use crate::simulator::PodShape;
use fleetscaler_model::ScalableKind;
use fleetscaler_model::pod::{Pod, Unsimulated};

impl<'a> Pass<'a, '_> {
    /// `none of the 12 existing and upcoming nodes fits: 10 InsufficientResources (e.g. cpu
    /// requested 2, only 1 free), 2 UntoleratedTaint (e.g. ...)`. Checks were run without
    /// messages; one node per code is checked again to give an example.
    pub(super) fn summarize(
        &mut self,
        pod: &PodShape,
        nodes: usize,
        failures: &[(ReasonCode, usize)],
    ) -> Reason {
        let mut by_code: Vec<(ReasonCode, usize, usize)> = Vec::new();
        for &(code, node) in failures {
            match by_code.iter_mut().find(|(c, _, _)| *c == code) {
                Some(entry) => entry.1 += 1,
                None => by_code.push((code, 1, node)),
            }
        }
        by_code.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let parts: Vec<String> = by_code
            .iter()
            .map(|&(code, n, node)| {
                let example = self
                    .sim
                    .check(pod, node)
                    .err()
                    .map_or_else(String::new, |u| u.message);
                format!("{n} {code} (e.g. {example})")
            })
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

    pub(super) fn explain(
        &mut self,
        pod: &Pod,
        outcome: Outcome,
        group: Option<usize>,
        node: Option<Arc<str>>,
        mut reasons: Vec<Reason>,
    ) {
        let has_namespaces = !self.input.snapshot.namespaces.is_empty();
        let dra_listed = self.input.snapshot.dra.listed;
        for u in &pod.spec.unsimulated {
            let simulated = (has_namespaces && *u == Unsimulated::NamespaceSelector)
                || (dra_listed && *u == Unsimulated::DynamicResources);
            if !simulated {
                reasons.push(Reason::new(ReasonCode::NotSimulated, u.describe()));
            }
        }
        if !pod.spec.claims.is_empty() && !self.input.snapshot.storage.listed {
            let u = Unsimulated::VolumeBinding;
            reasons.push(Reason::new(ReasonCode::NotSimulated, u.describe()));
        }
        self.explanations.push(PodExplanation {
            pod: pod.id.clone(),
            outcome,
            node_group: group.map(|g| self.input.groups.groups[g].id.clone()),
            node,
            reasons,
        });
    }

    /// Pods younger than their scale-up delay wait (once they fit no existing node).
    pub(super) fn hold_young_pods(&mut self, pending: Vec<Pending<'a>>) -> Vec<Pending<'a>> {
        let base = self.input.settings.new_pod_scale_up_delay;
        let now = self.input.now;
        let mut keep = Vec::new();
        for p in pending {
            let own = match &p.pod.extras().scale_up_delay {
                Some(Ok(d)) => *d,
                Some(Err(text)) => {
                    self.warnings.push(Warning::about(
                        WarningCode::InvalidPodAnnotation,
                        format_args!("pod {}", p.pod.id),
                        format!(
                            "annotation {}={text:?} is not a duration; ignored",
                            fleetscaler_model::pod::POD_SCALE_UP_DELAY
                        ),
                    ));
                    std::time::Duration::ZERO
                }
                None => std::time::Duration::ZERO,
            };
            let delay = base.max(own);
            let until = p.pod.created.map(|c| crate::state::add(c, delay));
            match until.filter(|u| *u > now && !delay.is_zero()) {
                Some(until) => {
                    let message = format!(
                        "created at {}: it may trigger a scale-up after {} (until {until})",
                        p.pod.created.map_or_else(String::new, |c| c.to_string()),
                        fleetscaler_model::duration::format_go_duration(delay)
                    );
                    self.explain(
                        p.pod,
                        Outcome::NoScaleUp,
                        None,
                        None,
                        vec![Reason::new(ReasonCode::PodTooNew, message)],
                    );
                }
                None => keep.push(p),
            }
        }
        keep
    }

    /// Too many unready nodes: no pod gets a scale-up, and each says why.
    pub(super) fn explain_unhealthy_cluster(&mut self, remaining: &[Pending<'a>]) {
        let why = self.input.cluster.unhealthy_reason();
        for p in remaining {
            let mut reasons = vec![Reason::new(ReasonCode::ClusterUnhealthy, why.clone())];
            reasons.extend(self.existing_summary.get(&p.class).cloned());
            self.explain(p.pod, Outcome::NoScaleUp, None, None, reasons);
        }
    }

    pub(super) fn explain_leftovers(&mut self, remaining: &[Pending<'a>]) {
        let fit = self.fit_matrix(remaining, true);
        let groups = &self.input.groups;
        for p in remaining {
            let mut reasons = Vec::new();
            if groups.groups.is_empty() && groups.ineligible.is_empty() {
                reasons.push(Reason::new(
                    ReasonCode::NoNodeGroups,
                    format!(
                        "the cluster has no autoscaled node groups: annotate a {} with min/max size, or create a MachineAutoscaler",
                        ScalableKind::names()
                    ),
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
                    None => self.warnings.push(Warning::about(
                        WarningCode::ScaleUp,
                        &p.pod.id,
                        format!("fits {} but no scale-up option was formed", g.id),
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
