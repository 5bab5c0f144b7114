//! `check-capacity.autoscaling.x-k8s.io` (upstream's `checkcapacity/provisioningclass.go`):
//! the request's pods simulated onto the cluster's nodes, nothing scaled. All fit:
//! Provisioned=True, and the capacity is booked from the next pass on. Not all: Provisioned=False
//! and a retry later, or, with `noRetry: "true"`, Failed (which Kueue retries on).
//! Accepted=True either way, as upstream writes it before checking.

use fleetscaler_model::provisioning::{
    ConditionStatus, FAILED, NO_RETRY_PARAMETER, PROVISIONED, ProvisioningRequest,
};

use super::conditions::{self as c, ConditionWrite};
use super::{Decision, RequestDecision};
use crate::scale_up::RequestOutcome;

pub(super) fn decide(r: &ProvisioningRequest, outcome: &RequestOutcome) -> RequestDecision {
    let accepted = ConditionWrite::accepted(r);
    if outcome.fit == outcome.pods {
        let found = ConditionWrite::new(
            r,
            PROVISIONED,
            ConditionStatus::True,
            c::CAPACITY_IS_FOUND_REASON,
            c::CAPACITY_IS_FOUND_MSG,
        );
        let why = format!(
            "all {} pod(s) fit the cluster's nodes: capacity found, booked for 10 minutes",
            outcome.pods
        );
        return RequestDecision::new(r, Decision::CapacityFound, why)
            .writing(r, vec![accepted, found]);
    }
    let short = describe_shortfall(outcome);
    let no_retry = r.parameter(NO_RETRY_PARAMETER) == Some("true");
    let write = if no_retry {
        ConditionWrite::new(
            r,
            FAILED,
            ConditionStatus::True,
            c::CAPACITY_IS_NOT_FOUND_REASON,
            c::NOT_FOUND_NO_RETRY_MSG,
        )
    } else {
        ConditionWrite::new(
            r,
            PROVISIONED,
            ConditionStatus::False,
            c::CAPACITY_IS_NOT_FOUND_REASON,
            c::NOT_FOUND_RETRY_MSG,
        )
    };
    let then = if no_retry {
        "noRetry is \"true\": it fails"
    } else {
        "tried again later"
    };
    RequestDecision::new(r, Decision::CapacityNotFound, format!("{short}; {then}"))
        .writing(r, vec![accepted, write])
}

/// `3 of 8 pod(s) fit; the others: <first reason>`.
pub(super) fn describe_shortfall(outcome: &RequestOutcome) -> String {
    let reasons: Vec<String> = outcome.reasons.iter().map(ToString::to_string).collect();
    let mut s = format!("{} of {} pod(s) fit", outcome.fit, outcome.pods);
    if !reasons.is_empty() {
        s.push_str("; the others: ");
        s.push_str(&reasons.join("; "));
    }
    s
}
