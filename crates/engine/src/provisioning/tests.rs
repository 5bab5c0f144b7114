//! Upstream's cases (checkcapacity/provisioningclass_test.go, orchestrator_test.go,
//! processor_test.go, injector_test.go, pods_filter_test.go, supported_class_test.go)
//! rebuilt on whole passes.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::conditions as c;
use super::{Decision, RequestDecision};
use crate::fixtures::{group_node, machineset, node, pod, snapshot};
use crate::plan::Outcome;
use crate::reason::ReasonCode;
use crate::{EngineState, Plan, Settings, run_once};
use fleetscaler_model::provisioning::{
    BEST_EFFORT_ATOMIC, CHECK_CAPACITY, CONSUME_ANNOTATION, ConditionStatus,
};

const T0: &str = "2026-11-27T10:00:00Z";

pub(super) fn at(minutes: i64) -> Timestamp {
    let t0: Timestamp = T0.parse().unwrap();
    t0.checked_add(jiff::SignedDuration::from_mins(minutes))
        .unwrap()
}

pub(super) fn template(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": cpu}}}]}}})
}

/// A request created at T0 for `count` pods of the template `worker`.
pub(super) fn request(name: &str, class: &str, count: u32, conditions: Value) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "generation": 1, "creationTimestamp": T0},
        "spec": {"provisioningClassName": class,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": count}]},
        "status": {"conditions": conditions}})
}

pub(super) fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    minute: i64,
) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": at(minute).to_string(), "observedGeneration": 1})
}

/// Group `workers` (max `max`) with one 4-core node running `used` cores.
pub(super) fn cluster(max: u64, used: &str) -> Vec<Value> {
    let mut items = vec![machineset("workers", 1, max, 1).json()];
    items.extend(group_node("w1", "workers", node("w1").cpu("4")));
    items.push(pod("filler").cpu(used).on("w1").json());
    items.push(template("worker", "1"));
    items
}

pub(super) fn pass(items: &[Value], state: &mut EngineState, minute: i64) -> Plan {
    run_once(
        &snapshot(items.to_vec()),
        state,
        &Settings::default(),
        at(minute),
    )
}

pub(super) fn decision<'a>(p: &'a Plan, name: &str) -> &'a RequestDecision {
    p.provisioning_requests
        .iter()
        .find(|d| &*d.request.name == name)
        .unwrap()
}

pub(super) fn writes(d: &RequestDecision) -> Vec<(&str, ConditionStatus, &str, &str)> {
    d.conditions
        .iter()
        .map(|w| (w.type_, w.status, w.reason, &*w.message))
        .collect()
}

#[test]
fn check_capacity_finds_room_on_existing_nodes() {
    let mut items = cluster(5, "1");
    items.push(request("fits", CHECK_CAPACITY, 3, json!([])));
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "fits");
    assert_eq!(d.decision, Decision::CapacityFound, "{}", d.reason);
    assert_eq!(
        writes(d),
        [
            (
                "Accepted",
                ConditionStatus::True,
                c::ACCEPTED_REASON,
                c::ACCEPTED_MSG
            ),
            (
                "Provisioned",
                ConditionStatus::True,
                "CapacityIsFound",
                "Capacity is found in the cluster"
            ),
        ]
    );
    assert!(p.scale_up.is_empty(), "check-capacity never scales");
    // Upstream's ScaleUpSuccessful: scale-down waits scale_down_delay_after_add.
    let paused = p.scale_down_paused.as_deref().unwrap_or_default();
    assert!(paused.contains("scale_down_delay_after_add"), "{paused}");
}

#[test]
fn check_capacity_without_room_retries_or_fails_with_no_retry() {
    let mut items = cluster(5, "3");
    items.push(request("short", CHECK_CAPACITY, 3, json!([])));
    let mut no_retry = request("once", CHECK_CAPACITY, 3, json!([]));
    no_retry["spec"]["parameters"] = json!({"noRetry": "true"});
    no_retry["metadata"]["creationTimestamp"] = json!(at(-1).to_string());
    items.push(no_retry);
    let mut state = EngineState::default();
    // The older request is served first, one per pass.
    let p = pass(&items, &mut state, 1);
    let d = decision(&p, "once");
    assert_eq!(d.decision, Decision::CapacityNotFound);
    assert_eq!(
        writes(d)[1],
        (
            "Failed",
            ConditionStatus::True,
            "CapacityIsNotFound",
            "CA could not find requested capacity"
        )
    );
    assert!(d.reason.contains("1 of 3 pod(s) fit"), "{}", d.reason);
    assert_eq!(decision(&p, "short").decision, Decision::Waiting);
    assert!(p.scale_up.is_empty());

    // Next pass (the dump now showing the first answer) serves the other one.
    items[6]["status"]["conditions"] = json!([condition(
        "Failed",
        "True",
        "CapacityIsNotFound",
        "CA could not find requested capacity",
        1
    )]);
    let p = pass(&items, &mut state, 2);
    assert_eq!(decision(&p, "once").decision, Decision::Finished);
    let d = decision(&p, "short");
    assert_eq!(
        writes(d)[1],
        (
            "Provisioned",
            ConditionStatus::False,
            "CapacityIsNotFound",
            "Capacity is not found, CA will try to find it later."
        )
    );
}

#[test]
fn a_request_without_capacity_is_retried_after_a_doubling_wait() {
    let not_found = condition(
        "Provisioned",
        "False",
        "CapacityIsNotFound",
        c::NOT_FOUND_RETRY_MSG,
        0,
    );
    let mut items = cluster(5, "3");
    items.push(request("short", CHECK_CAPACITY, 3, json!([not_found])));
    let mut state = EngineState::default();
    let p = pass(&items, &mut state, 0);
    let d = decision(&p, "short");
    assert_eq!(d.decision, Decision::RetryLater);
    assert_eq!(d.retry_at, Some(at(1)));
    // Due after a minute: tried, not found again, nothing new to write.
    let d = decision(&pass(&items, &mut state, 2), "short").clone();
    assert_eq!(d.decision, Decision::CapacityNotFound);
    assert_eq!(
        writes(&d).len(),
        1,
        "only Accepted is new: {:?}",
        writes(&d)
    );
    // The wait doubles: two minutes after the attempt at minute 2.
    let d = decision(&pass(&items, &mut state, 3), "short").clone();
    assert_eq!(
        (d.decision, d.retry_at),
        (Decision::RetryLater, Some(at(4)))
    );
    let d = decision(&pass(&items, &mut state, 5), "short").clone();
    assert_eq!(d.decision, Decision::CapacityNotFound);
}

#[test]
fn booked_capacity_holds_its_node_and_expires_after_ten_minutes() {
    let provisioned = condition(
        "Provisioned",
        "True",
        "CapacityIsFound",
        c::CAPACITY_IS_FOUND_MSG,
        0,
    );
    // w2 is empty: unneeded, unless the booking holds it.
    let mut items = cluster(5, "4");
    items.extend(group_node("w2", "workers", node("w2").cpu("4")));
    items[0]["spec"]["replicas"] = json!(2);
    items.push(request("booked", CHECK_CAPACITY, 2, json!([provisioned])));
    let mut state = EngineState::default();
    let p = pass(&items, &mut state, 5);
    let d = decision(&p, "booked");
    assert_eq!(d.decision, Decision::Booked, "{}", d.reason);
    assert!(d.conditions.is_empty());
    let kept = p.not_removable.iter().find(|n| &*n.node == "w2").unwrap();
    assert_eq!(kept.code, ReasonCode::HoldsMovedPods);
    assert!(
        kept.message
            .starts_with("capacity is booked here for ProvisioningRequest default/booked"),
        "{}",
        kept.message
    );
    let p = pass(&items, &mut state, 11);
    let d = decision(&p, "booked");
    assert_eq!(d.decision, Decision::BookingExpired);
    assert_eq!(
        writes(d),
        [(
            "BookingExpired",
            ConditionStatus::True,
            "CapacityReservationTimeExpired",
            "Capacity reservation time is expired"
        )]
    );
    assert!(p.unneeded.iter().any(|u| &*u.node == "w2"));
}

#[test]
fn a_booking_is_consumed_once_its_pods_are_scheduled() {
    let provisioned = condition("Provisioned", "True", "CapacityIsFound", "", 0);
    let mut items = cluster(5, "1");
    items.push(request("used", BEST_EFFORT_ATOMIC, 2, json!([provisioned])));
    for i in 0..2 {
        let mut p = pod(&format!("job-{i}")).cpu("1").on("w1").json();
        p["metadata"]["annotations"] = json!({CONSUME_ANNOTATION: "used"});
        items.push(p);
    }
    let p = pass(&items, &mut EngineState::default(), 3);
    let d = decision(&p, "used");
    assert_eq!(d.decision, Decision::BookingConsumed);
    assert_eq!(writes(d)[0].2, "CapacityBookingConsumed");
    assert_eq!(
        writes(d)[0].3,
        "Capacity booking consumed: all pods scheduled"
    );
}

#[test]
fn a_request_not_provisioned_within_seven_days_fails() {
    let mut items = cluster(5, "3");
    items.push(request("old", CHECK_CAPACITY, 3, json!([])));
    let p = pass(&items, &mut EngineState::default(), 7 * 24 * 60 + 1);
    let d = decision(&p, "old");
    assert_eq!(d.decision, Decision::Expired);
    assert_eq!(
        writes(d),
        [(
            "Failed",
            ConditionStatus::True,
            "Expired",
            "ProvisioningRequest is expired"
        )]
    );
}

#[test]
fn a_request_finished_over_seven_days_ago_is_deleted() {
    let failed = condition("Failed", "True", "Expired", c::EXPIRED_MSG, 0);
    let mut items = cluster(5, "1");
    items.push(request("gone", "some.other.class", 1, json!([failed])));
    let p = pass(&items, &mut EngineState::default(), 7 * 24 * 60 + 1);
    assert_eq!(decision(&p, "gone").decision, Decision::Delete);
    let p = pass(&items, &mut EngineState::default(), 60);
    assert_eq!(decision(&p, "gone").decision, Decision::UnsupportedClass);
}

#[test]
fn a_missing_pod_template_fails_the_request_with_upstreams_message() {
    let mut items = cluster(5, "1");
    let mut r = request("lost", CHECK_CAPACITY, 1, json!([]));
    r["spec"]["podSets"] = json!([{"podTemplateRef": {"name": "worker"}, "count": 1},
        {"podTemplateRef": {"name": "nowhere"}, "count": 1}]);
    items.push(r);
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "lost");
    assert_eq!(d.decision, Decision::FailedToCreatePods);
    assert_eq!(
        writes(d),
        [(
            "Failed",
            ConditionStatus::True,
            "FailedToCreatePods",
            "missing pod templates, 2 pod templates were referenced, 1 templates were missing: nowhere"
        )]
    );
}

#[test]
fn unsupported_classes_and_processor_instances_are_left_alone() {
    let mut items = cluster(5, "1");
    items.push(request("other", "queued-provisioning.gke.io", 1, json!([])));
    let mut named = request("named", CHECK_CAPACITY, 1, json!([]));
    named["spec"]["parameters"] = json!({"processorInstance": "inst"});
    items.push(named);
    let p = pass(&items, &mut EngineState::default(), 1);
    for name in ["other", "named"] {
        let d = decision(&p, name);
        assert_eq!(d.decision, Decision::UnsupportedClass);
        assert!(d.conditions.is_empty());
    }
    assert!(decision(&p, "named").reason.contains("processorInstance"));
}

#[test]
fn consumer_pods_trigger_no_scale_up_of_their_own() {
    let mut items = cluster(5, "4");
    items.push(request(
        "train",
        BEST_EFFORT_ATOMIC,
        2,
        json!([condition(
            "Provisioned",
            "True",
            "CapacityIsProvisioned",
            "",
            0
        )]),
    ));
    let mut consumer = pod("job-0").cpu("1").unschedulable().json();
    consumer["metadata"]["annotations"] =
        json!({"cluster-autoscaler.kubernetes.io/consume-provisioning-request": "train"});
    items.push(consumer);
    let p = pass(&items, &mut EngineState::default(), 1);
    let e = p
        .pending_pods
        .iter()
        .find(|e| &*e.pod.name == "job-0")
        .unwrap();
    assert_eq!(e.outcome, Outcome::NoScaleUp);
    assert_eq!(e.reasons[0].code, ReasonCode::ConsumesProvisioningRequest);
    assert!(
        e.reasons[0]
            .message
            .starts_with("consumes ProvisioningRequest default/train")
    );
    assert!(p.scale_up.is_empty());
}

#[test]
fn without_the_crd_the_feature_is_off() {
    let mut items: Vec<Value> = cluster(5, "4")
        .into_iter()
        .filter(|v| v["kind"] != "PodTemplate")
        .collect();
    let mut consumer = pod("job-0").cpu("1").unschedulable().json();
    consumer["metadata"]["annotations"] = json!({CONSUME_ANNOTATION: "train"});
    items.push(consumer);
    let p = pass(&items, &mut EngineState::default(), 1);
    assert!(p.provisioning_requests.is_empty());
    assert_eq!(
        p.scale_up.len(),
        1,
        "an ordinary pending pod without the CRD"
    );
    let json = serde_json::to_value(&p).unwrap();
    assert!(json.get("provisioningRequests").is_none());
}

#[test]
fn supported_classes_as_upstream() {
    let req = |class: &str, instance: Option<&str>| {
        let mut r = request("r", class, 1, json!([]));
        if let Some(i) = instance {
            r["spec"]["parameters"] = json!({"processorInstance": i});
        }
        let s = snapshot([r]);
        s.provisioning.requests[0].clone()
    };
    assert!(super::supported(&req(CHECK_CAPACITY, None)));
    assert!(super::supported(&req(BEST_EFFORT_ATOMIC, None)));
    assert!(!super::supported(&req(CHECK_CAPACITY, Some("inst"))));
    assert!(!super::supported(&req(
        "check-capacity.autoscaling.x-k8s.io.v2",
        None
    )));
}

#[test]
fn booked_capacity_is_not_found_again_by_another_request() {
    // w1 has 3 free cores; "booked" holds 2 of them.
    let provisioned = condition("Provisioned", "True", "CapacityIsFound", "", 0);
    let mut items = cluster(5, "1");
    items.push(request("asks", CHECK_CAPACITY, 2, json!([])));
    let p = pass(&items, &mut EngineState::default(), 1);
    assert_eq!(decision(&p, "asks").decision, Decision::CapacityFound);
    let mut booked = request("booked", CHECK_CAPACITY, 2, json!([provisioned]));
    booked["metadata"]["creationTimestamp"] = json!(at(-5).to_string());
    items.push(booked);
    let p = pass(&items, &mut EngineState::default(), 1);
    assert_eq!(decision(&p, "booked").decision, Decision::Booked);
    let d = decision(&p, "asks");
    assert_eq!(d.decision, Decision::CapacityNotFound, "{}", d.reason);
    assert!(d.reason.contains("1 of 2 pod(s) fit"), "{}", d.reason);
}

#[test]
fn the_pods_of_a_request_are_named_and_owned_as_upstreams() {
    let mut items = cluster(5, "1");
    let mut r = request("train", CHECK_CAPACITY, 2, json!([]));
    r["spec"]["podSets"] = json!([{"podTemplateRef": {"name": "worker"}, "count": 2},
        {"podTemplateRef": {"name": "worker"}, "count": 1}]);
    items.push(r);
    let s = snapshot(items);
    let classified = super::classify(&s, &Default::default(), at(1));
    let c = classified.candidate.unwrap();
    let names: Vec<String> = c.pods.iter().map(|p| p.id.to_string()).collect();
    assert_eq!(
        names,
        [
            "default/train-0-0",
            "default/train-0-1",
            "default/train-1-0"
        ]
    );
    let p = &c.pods[0];
    assert_eq!(&*p.uid, "default/train-0-0");
    assert_eq!(p.extras().consumes.as_deref(), Some("train"));
    assert_eq!(
        p.owner.as_ref().map(|o| &*o.kind),
        Some("ProvisioningRequest")
    );
    assert_eq!(p.labels.get("app"), Some("worker"));
    assert_eq!(p.created, Some(at(0)));
}

#[test]
fn a_booking_partly_consumed_stays_booked() {
    let provisioned = condition("Provisioned", "True", "CapacityIsFound", "", 0);
    let mut items = cluster(5, "1");
    items.push(request("used", CHECK_CAPACITY, 2, json!([provisioned])));
    let mut p = pod("job-0").cpu("1").on("w1").json();
    p["metadata"]["annotations"] = json!({CONSUME_ANNOTATION: "used"});
    items.push(p);
    let plan = pass(&items, &mut EngineState::default(), 3);
    let d = decision(&plan, "used");
    assert_eq!(d.decision, Decision::Booked);
    assert!(d.reason.contains("(1 are)"), "{}", d.reason);
}

#[test]
fn provisioned_unknown_is_left_alone_and_an_old_provisioned_request_deleted() {
    let unknown = condition("Provisioned", "Unknown", "Pending", "", 0);
    let mut items = cluster(5, "1");
    items.push(request("unsure", CHECK_CAPACITY, 1, json!([unknown])));
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "unsure");
    assert_eq!(d.decision, Decision::LeftAlone);
    assert!(d.conditions.is_empty());
    let p = pass(&items, &mut EngineState::default(), 7 * 24 * 60 + 1);
    assert_eq!(decision(&p, "unsure").decision, Decision::Delete);
}

#[test]
fn the_retry_timing_survives_the_state_file() {
    let mut items = cluster(5, "3");
    items.push(request("short", CHECK_CAPACITY, 3, json!([])));
    let mut state = EngineState::default();
    let p = pass(&items, &mut state, 1);
    assert_eq!(decision(&p, "short").decision, Decision::CapacityNotFound);
    let retry = &state.provisioning.retries["uid-short"];
    assert_eq!(
        (retry.last_attempt, retry.wait),
        (at(1), super::INITIAL_RETRY)
    );
    let json = state.to_json();
    assert!(json.contains("\"provisioning\""), "{json}");
    let back = EngineState::from_json(&json).unwrap();
    assert_eq!(back.provisioning, state.provisioning);
    // A request gone from the cluster is forgotten.
    let mut state = back;
    items.pop();
    pass(&items, &mut state, 2);
    assert!(state.provisioning.retries.is_empty());
}

#[test]
fn at_most_twenty_expiries_are_written_per_pass() {
    let provisioned = condition("Provisioned", "True", "CapacityIsFound", "", 0);
    let mut items = cluster(5, "1");
    for i in 0..25 {
        items.push(request(
            &format!("r{i:02}"),
            CHECK_CAPACITY,
            1,
            json!([provisioned.clone()]),
        ));
    }
    let p = pass(&items, &mut EngineState::default(), 11);
    let expired = p
        .provisioning_requests
        .iter()
        .filter(|d| d.decision == Decision::BookingExpired)
        .count();
    assert_eq!(expired, super::MAX_UPDATED);
    let booked = p
        .provisioning_requests
        .iter()
        .filter(|d| d.decision == Decision::Booked)
        .count();
    assert_eq!(booked, 5, "the rest wait for the next pass");
}
