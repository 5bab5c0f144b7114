//! Events on ProvisioningRequests: one `Normal` event per condition written, on the
//! request, its reason the condition's reason, so `kubectl describe provisioningrequest`
//! tells what the autoscaler decided. Upstream records none on requests (only on the pods
//! it leaves out of a scale-up); fleetscaler adds them because a hub's logs are not where
//! a request's owner looks. A write skipped or failed makes none.

use super::{EventSpec, EventType, ObjectRef};
use crate::engine::provisioning::conditions::ConditionWrite;
use crate::model::{ClusterSnapshot, ObjectKey};

/// The events of one request's conditions, written.
pub(super) fn written(
    request: &ObjectKey,
    api_version: &str,
    conditions: &[ConditionWrite],
) -> Vec<EventSpec> {
    conditions
        .iter()
        .map(|c| EventSpec {
            object: ObjectRef {
                api_version: api_version.into(),
                kind: "ProvisioningRequest".into(),
                namespace: request.namespace.clone(),
                name: request.name.clone(),
                uid: None,
            },
            event_type: EventType::Normal,
            reason: c.reason,
            message: format!("{}={}: {}", c.type_, c.status.as_str(), c.message),
        })
        .collect()
}

/// The events with their requests' uids, as the snapshot has them.
pub(super) fn with_uids(mut events: Vec<EventSpec>, snapshot: &ClusterSnapshot) -> Vec<EventSpec> {
    for e in &mut events {
        let o = &e.object;
        e.object.uid = snapshot
            .provisioning
            .requests
            .iter()
            .find(|r| r.key.namespace == o.namespace && r.key.name == o.name)
            .map(|r| r.uid.clone())
            .filter(|uid| !uid.is_empty());
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::provisioning::ConditionStatus;

    #[test]
    fn each_condition_written_is_a_normal_event_on_the_request() {
        let w = |type_, status, reason| ConditionWrite {
            type_,
            status,
            reason,
            message: "Capacity is found in the cluster".into(),
            observed_generation: 1,
        };
        let key = ObjectKey::new("batch", "train");
        let events = written(
            &key,
            "autoscaling.x-k8s.io/v1",
            &[
                w("Accepted", ConditionStatus::True, "Accepted"),
                w("Provisioned", ConditionStatus::True, "CapacityIsFound"),
            ],
        );
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["Accepted", "CapacityIsFound"]);
        let e = &events[1];
        assert_eq!(e.event_type, EventType::Normal);
        assert_eq!(&*e.object.kind, "ProvisioningRequest");
        assert_eq!(e.object.event_namespace(), "batch");
        assert_eq!(
            e.message,
            "Provisioned=True: Capacity is found in the cluster"
        );
        let none = with_uids(events, &ClusterSnapshot::default());
        assert!(none.iter().all(|e| e.object.uid.is_none()));
    }
}
