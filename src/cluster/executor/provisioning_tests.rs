use serde_json::json;

use super::*;
use crate::cluster::error::Category;
use crate::engine::nodegroups::NodeGroupId;
use crate::engine::provisioning::conditions::CAPACITY_IS_PROVISIONED_REASON;
use crate::model::provisioning::ACCEPTED;

fn write(type_: &'static str, status: ConditionStatus, reason: &'static str) -> ConditionWrite {
    ConditionWrite {
        type_,
        status,
        reason,
        message: "m".into(),
        observed_generation: 2,
    }
}

fn group() -> NodeGroupId {
    NodeGroupId::new(
        crate::model::MachineApiGroup::OpenShift,
        crate::model::ScalableKind::MachineSet,
        &ObjectKey::new("ns", "a"),
    )
}

fn scaled_up() -> RequestDecision {
    RequestDecision {
        request: ObjectKey::new("batch", "train"),
        api_version: "autoscaling.x-k8s.io/v1".into(),
        class: "best-effort-atomic-scale-up.autoscaling.x-k8s.io".into(),
        decision: Decision::ScaledUp,
        reason: "r".into(),
        conditions: vec![
            write(ACCEPTED, ConditionStatus::True, "Accepted"),
            write(
                PROVISIONED,
                ConditionStatus::True,
                CAPACITY_IS_PROVISIONED_REASON,
            ),
        ],
        pods: 3,
        node_group: Some(group()),
        retry_at: None,
    }
}

fn scale_up(outcome: &str) -> Entry {
    let action = Action::ScaleUp {
        group: group(),
        from: 1,
        to: 4,
    };
    match outcome {
        "done" => Entry::done(action, "ok"),
        "failed" => Entry::failed(action, "quota", Category::Other),
        _ => Entry::skipped(action, "dry run"),
    }
}

/// As `meta.SetStatusCondition`: a status unchanged keeps its transition time, a status
/// changed moves it, a new type is appended, other types are left as they are.
#[test]
fn conditions_are_merged_as_set_status_condition_does() {
    let now = json!("2026-02-02T00:00:00Z");
    let existing = vec![
        json!({"type": "Accepted", "status": "True", "reason": "Accepted", "message": "old",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        json!({"type": "Provisioned", "status": "False", "reason": "CapacityIsNotFound",
            "message": "old", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        json!({"type": "Other", "status": "True", "reason": "X", "message": "x",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    ];
    let writes = [
        write(ACCEPTED, ConditionStatus::True, "Accepted"),
        write(PROVISIONED, ConditionStatus::True, "CapacityIsFound"),
        write("BookingExpired", ConditionStatus::False, "Y"),
    ];
    let out = merged(existing, &writes, &now);
    assert_eq!(out.len(), 4);
    assert_eq!(out[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    assert_eq!(out[0]["message"], "m");
    assert_eq!(out[0]["observedGeneration"], 2);
    assert_eq!(out[1]["status"], "True");
    assert_eq!(out[1]["reason"], "CapacityIsFound");
    assert_eq!(out[1]["lastTransitionTime"], now);
    assert_eq!(out[2]["reason"], "X");
    assert_eq!(out[3]["type"], "BookingExpired");
    assert_eq!(out[3]["lastTransitionTime"], now);
    // Written again: nothing moves.
    let again = merged(out.clone(), &writes, &json!("2026-03-03T00:00:00Z"));
    assert_eq!(again, out);
}

/// Provisioned=True only once the scale-up was written; a failed one is CapacityIsNotFound,
/// a skipped one writes nothing.
#[test]
fn an_atomic_request_is_provisioned_only_once_its_scale_up_was_written() {
    let d = scaled_up();
    let (conditions, held) = gated(&d, &[scale_up("done")]);
    assert_eq!((conditions, held), (d.conditions.clone(), None));

    let (conditions, held) = gated(&d, &[scale_up("failed")]);
    assert_eq!(held, None);
    assert_eq!(conditions[0], d.conditions[0]);
    assert_eq!(conditions[1].status, ConditionStatus::False);
    assert_eq!(conditions[1].reason, CAPACITY_IS_NOT_FOUND_REASON);
    assert_eq!(&*conditions[1].message, NOT_FOUND_RETRY_MSG);

    let (_, held) = gated(&d, &[scale_up("skipped")]);
    assert!(held.unwrap().contains("dry run"));
    let (_, held) = gated(&d, &[]);
    assert!(held.unwrap().starts_with("no scale-up of"));

    let check = RequestDecision {
        decision: Decision::CapacityFound,
        node_group: None,
        ..scaled_up()
    };
    assert_eq!(gated(&check, &[]), (check.conditions.clone(), None));
}
