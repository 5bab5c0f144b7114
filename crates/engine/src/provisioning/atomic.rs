//! `best-effort-atomic-scale-up.autoscaling.x-k8s.io` (upstream's
//! `besteffortatomic/provisioning_class.go`): the pods that fit no existing or upcoming
//! node get all their nodes in one scale-up of one group, or none. All fit already:
//! Provisioned=True (CapacityIsFound). Scaled: Provisioned=True (CapacityIsProvisioned),
//! "best effort" since the workload is admitted before the nodes start. Otherwise
//! Provisioned=False (CapacityIsNotFound) and a retry later. Accepted=True is written with
//! it, as upstream's injector writes it when it takes the request up.

use fleetscaler_model::provisioning::{ConditionStatus, PROVISIONED, ProvisioningRequest};

use super::check_capacity::describe_shortfall;
use super::conditions::{self as c, ConditionWrite};
use super::{Decision, RequestDecision, Served};

pub(super) fn decide(r: &ProvisioningRequest, served: &Served) -> RequestDecision {
    let outcome = &served.outcome;
    let accepted = ConditionWrite::accepted(r);
    let provisioned = |reason, message| {
        ConditionWrite::new(r, PROVISIONED, ConditionStatus::True, reason, message)
    };
    if outcome.fit == outcome.pods {
        let why = format!(
            "all {} pod(s) fit existing or upcoming nodes: no scale-up needed",
            outcome.pods
        );
        let write = provisioned(c::CAPACITY_IS_FOUND_REASON, c::CAPACITY_IS_FOUND_MSG);
        return RequestDecision::new(r, Decision::CapacityFound, why)
            .writing(r, vec![accepted, write]);
    }
    if outcome.scaled {
        let group = served
            .node_group
            .as_ref()
            .map_or_else(String::new, |g| format!(" of {g}"));
        let why = format!(
            "{} pod(s) fit existing or upcoming nodes; the other {} get their nodes in one scale-up{group}",
            outcome.fit,
            outcome.pods - outcome.fit
        );
        let write = provisioned(
            c::CAPACITY_IS_PROVISIONED_REASON,
            c::CAPACITY_IS_PROVISIONED_MSG,
        );
        let mut d =
            RequestDecision::new(r, Decision::ScaledUp, why).writing(r, vec![accepted, write]);
        d.node_group = served.node_group.clone();
        return d;
    }
    let write = ConditionWrite::new(
        r,
        PROVISIONED,
        ConditionStatus::False,
        c::CAPACITY_IS_NOT_FOUND_REASON,
        c::NOT_FOUND_RETRY_MSG,
    );
    let why = format!(
        "{}; no scale-up, tried again later",
        describe_shortfall(outcome)
    );
    RequestDecision::new(r, Decision::CapacityNotFound, why).writing(r, vec![accepted, write])
}

#[cfg(test)]
#[path = "atomic_tests.rs"]
mod tests;
