//! Which pass serves what: upstream's wrapper orchestrator alternates its scale-up between
//! the pending pods and one ProvisioningRequest's pods; a pass with only one of the two
//! serves it. Here the pending pods run first on every pass (they always get their
//! explanations); on a request's turn they are only explained, and the request's pods run
//! through the same scale-up next.

use jiff::Timestamp;

use fleetscaler_model::provisioning::BEST_EFFORT_ATOMIC;

use super::{Classified, ProvisioningMemory, RequestDecision, Served, candidate_decision};
use crate::expander::SeededRng;
use crate::scale_up::{self, Extra, RequestRun, ScaleUpInput, ScaleUpOutput};
use crate::simulator::Simulator;

/// The scale-up pass with what requests ask of it, and the requests' decisions.
pub fn scale_up<'a>(
    input: &'a ScaleUpInput<'a>,
    classified: &'a Classified<'a>,
    memory: &mut ProvisioningMemory,
    sim: &mut Simulator,
    rng: &mut SeededRng,
    now: Timestamp,
) -> (ScaleUpOutput, Vec<RequestDecision>) {
    let listed = input.snapshot.provisioning.listed;
    let candidate = classified.candidate.as_ref();
    let healthy = input.cluster.healthy();
    let name = candidate.map(|c| c.request.key.to_string());
    let first = healthy && candidate.is_some() && memory.request_turn;
    let extra = Extra {
        consumers_left_out: listed,
        booked: &classified.booked,
        yield_to: if first { name.clone() } else { None },
        request: None,
    };
    let mut out = scale_up::plan_with(input, &extra, sim, rng);
    let mut decisions = classified.decisions.clone();
    let Some(c) = candidate else {
        if out.waiting {
            memory.request_turn = true;
        }
        return (out, decisions);
    };
    let serve = healthy && (first || (!out.waiting && out.actions.is_empty()));
    let mut served = None;
    if serve {
        let run = Extra {
            consumers_left_out: listed,
            booked: &classified.booked,
            yield_to: None,
            request: Some(RequestRun {
                name: name.clone().unwrap_or_default(),
                pods: &c.pods,
                scale_up: &*c.request.class == BEST_EFFORT_ATOMIC,
            }),
        };
        let ran = scale_up::plan_with(input, &run, sim, rng);
        if let Some(outcome) = ran.request {
            let node_group = ran.actions.first().map(|a| a.node_group.clone());
            if outcome.scaled {
                out.actions.extend(ran.actions);
                out.actions.sort_by(|a, b| a.node_group.cmp(&b.node_group));
            }
            // The run went over the pending pods again: their warnings are said already.
            for w in ran.warnings {
                if !out.warnings.contains(&w) {
                    out.warnings.push(w);
                }
            }
            served = Some(Served {
                outcome,
                node_group,
            });
        }
    }
    let waiting = if healthy {
        "the other pending pods have this pass; the request has the next (passes alternate between them, as upstream's)".to_string()
    } else {
        format!(
            "no scale-up while the cluster is unhealthy: {}",
            input.cluster.unhealthy_reason()
        )
    };
    decisions.push(candidate_decision(
        c,
        served.as_ref(),
        &waiting,
        memory,
        now,
    ));
    decisions.sort_by(|a, b| a.request.cmp(&b.request));
    if healthy {
        memory.request_turn = !serve;
    }
    (out, decisions)
}
