//! The conditions upstream writes on ProvisioningRequests, with its exact reasons and
//! messages (`pkg/provisioningrequest/conditions/conditions.go`, and the messages its
//! classes write inline), so that Kueue and other readers read ours the same.
//!
//! Upstream's `AddOrUpdateCondition` replaces a condition every time it writes it, with a
//! new `lastTransitionTime`. Here a condition already written with the same status, reason
//! and message is not written again: its `lastTransitionTime` stays the time it really
//! changed, and the executor's writes are idempotent. Retry timing, which upstream reads
//! off that time, is kept in the engine's memory instead (`EngineState::provisioning`).

use std::sync::Arc;

use serde::Serialize;

use fleetscaler_model::provisioning::{
    ACCEPTED, BOOKING_EXPIRED, ConditionStatus, FAILED, PROVISIONED, ProvisioningRequest,
};

pub const ACCEPTED_REASON: &str = "Accepted";
pub const ACCEPTED_MSG: &str = "ProvisioningRequest is accepted by ClusterAutoscaler";
pub const CAPACITY_IS_NOT_FOUND_REASON: &str = "CapacityIsNotFound";
pub const CAPACITY_IS_FOUND_REASON: &str = "CapacityIsFound";
pub const CAPACITY_IS_FOUND_MSG: &str = "Capacity is found in the cluster";
pub const CAPACITY_IS_PROVISIONED_REASON: &str = "CapacityIsProvisioned";
/// Upstream's `CapacityIsProvisionedMsg` reads the same as `CapacityIsFoundMsg`.
pub const CAPACITY_IS_PROVISIONED_MSG: &str = "Capacity is found in the cluster";
pub const FAILED_TO_CREATE_PODS_REASON: &str = "FailedToCreatePods";
pub const FAILED_TO_BOOK_CAPACITY_REASON: &str = "FailedToBookCapacity";
pub const CAPACITY_RESERVATION_TIME_EXPIRED_REASON: &str = "CapacityReservationTimeExpired";
pub const CAPACITY_RESERVATION_TIME_EXPIRED_MSG: &str = "Capacity reservation time is expired";
pub const CAPACITY_BOOKING_CONSUMED_REASON: &str = "CapacityBookingConsumed";
pub const CAPACITY_BOOKING_CONSUMED_MSG: &str = "Capacity booking consumed: all pods scheduled";
pub const EXPIRED_REASON: &str = "Expired";
pub const EXPIRED_MSG: &str = "ProvisioningRequest is expired";
/// Written inline by upstream's classes when no capacity is found and the request retries.
pub const NOT_FOUND_RETRY_MSG: &str = "Capacity is not found, CA will try to find it later.";
/// Written inline by check-capacity with `noRetry: "true"` (as `Failed`).
pub const NOT_FOUND_NO_RETRY_MSG: &str = "CA could not find requested capacity";

/// A condition to write: the executor sets `lastTransitionTime` when it writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionWrite {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: Arc<str>,
    /// The request's `metadata.generation`, as upstream's `AddOrUpdateCondition` sets it.
    pub observed_generation: i64,
}

impl ConditionWrite {
    pub fn new(
        r: &ProvisioningRequest,
        type_: &'static str,
        status: ConditionStatus,
        reason: &'static str,
        message: impl Into<Arc<str>>,
    ) -> Self {
        ConditionWrite {
            type_,
            status,
            reason,
            message: message.into(),
            observed_generation: r.generation,
        }
    }

    /// `Accepted=True`, written when a request's pods are taken up (upstream's injector).
    pub fn accepted(r: &ProvisioningRequest) -> Self {
        Self::new(
            r,
            ACCEPTED,
            ConditionStatus::True,
            ACCEPTED_REASON,
            ACCEPTED_MSG,
        )
    }

    /// Already written as it would be: status, reason and message equal.
    fn is_written(&self, r: &ProvisioningRequest) -> bool {
        r.condition(self.type_).is_some_and(|c| {
            c.status == self.status && &*c.reason == self.reason && c.message == self.message
        })
    }
}

/// The writes that change something, in order; those already written are left out.
pub fn changed(r: &ProvisioningRequest, writes: Vec<ConditionWrite>) -> Vec<ConditionWrite> {
    writes.into_iter().filter(|w| !w.is_written(r)).collect()
}

/// Upstream's `ShouldCapacityBeBooked` (the class checked by the caller): Provisioned,
/// and neither Failed nor BookingExpired.
pub fn capacity_booked(r: &ProvisioningRequest) -> bool {
    !(r.is_true(FAILED) || r.is_true(BOOKING_EXPIRED)) && r.is_true(PROVISIONED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscaler_model::provisioning::Condition;

    fn request(conditions: Vec<(&str, ConditionStatus, &str, &str)>) -> ProvisioningRequest {
        ProvisioningRequest {
            key: fleetscaler_model::ObjectKey::new("ml", "r"),
            uid: "u".into(),
            version: "v1".into(),
            generation: 3,
            created: None,
            class: fleetscaler_model::provisioning::CHECK_CAPACITY.into(),
            pod_sets: Vec::new(),
            parameters: Default::default(),
            conditions: conditions
                .into_iter()
                .map(|(t, s, r, m)| Condition {
                    type_: t.into(),
                    status: s,
                    reason: r.into(),
                    message: m.into(),
                    last_transition: None,
                    observed_generation: Some(1),
                })
                .collect(),
            class_details: Default::default(),
            problem: None,
        }
    }

    #[test]
    fn a_condition_written_alike_is_not_written_again() {
        let r = request(vec![(
            ACCEPTED,
            ConditionStatus::True,
            ACCEPTED_REASON,
            ACCEPTED_MSG,
        )]);
        let found = ConditionWrite::new(
            &r,
            PROVISIONED,
            ConditionStatus::True,
            CAPACITY_IS_FOUND_REASON,
            CAPACITY_IS_FOUND_MSG,
        );
        let writes = changed(&r, vec![ConditionWrite::accepted(&r), found.clone()]);
        assert_eq!(writes, vec![found]);
        assert_eq!(writes[0].observed_generation, 3);
    }

    #[test]
    fn a_condition_with_another_status_or_message_is_rewritten() {
        let r = request(vec![(
            PROVISIONED,
            ConditionStatus::False,
            CAPACITY_IS_NOT_FOUND_REASON,
            NOT_FOUND_RETRY_MSG,
        )]);
        let found = ConditionWrite::new(
            &r,
            PROVISIONED,
            ConditionStatus::True,
            CAPACITY_IS_FOUND_REASON,
            CAPACITY_IS_FOUND_MSG,
        );
        assert_eq!(changed(&r, vec![found]).len(), 1);
        let again = ConditionWrite::new(
            &r,
            PROVISIONED,
            ConditionStatus::False,
            CAPACITY_IS_NOT_FOUND_REASON,
            NOT_FOUND_RETRY_MSG,
        );
        assert!(changed(&r, vec![again]).is_empty());
    }

    #[test]
    fn booked_while_provisioned_and_neither_failed_nor_expired() {
        let t = ConditionStatus::True;
        assert!(capacity_booked(&request(vec![(PROVISIONED, t, "", "")])));
        assert!(!capacity_booked(&request(vec![
            (PROVISIONED, t, "", ""),
            (BOOKING_EXPIRED, t, "", "")
        ])));
        assert!(!capacity_booked(&request(vec![
            (PROVISIONED, t, "", ""),
            (FAILED, t, "", "")
        ])));
        assert!(!capacity_booked(&request(vec![(
            PROVISIONED,
            ConditionStatus::False,
            "",
            ""
        )])));
    }
}
