use super::*;

fn machine(annotations: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "ns", "annotations": annotations}
    }))
    .unwrap()
}

#[test]
fn only_machines_the_set_controls_and_not_deleting_are_live() {
    let owned = |uid: &str, controller: bool, deleting: bool| {
        let mut v = json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns", "ownerReferences": [{
                "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                "name": "set", "uid": uid, "controller": controller}]}
        });
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value::<DynamicObject>(v).unwrap()
    };
    let machines = [
        owned("set-uid", true, false),
        owned("set-uid", true, false),
        owned("set-uid", true, true),
        owned("set-uid", false, false),
        owned("other-uid", true, false),
        machine(json!({})),
    ];
    assert_eq!(live_machines_of("set-uid", &machines), 2);
}

#[test]
fn the_mark_records_the_decrement_under_a_precondition() {
    let group = NodeGroupId::new(
        MachineApiGroup::ClusterApi,
        ScalableKind::MachineSet,
        &ObjectKey::new("ns", "a"),
    );
    let now = Timestamp::from_second(1_700_000_000).unwrap();
    let p = mark_patch(
        MachineApiGroup::ClusterApi,
        Some("42"),
        now,
        Some((5, &group)),
    );
    assert_eq!(
        p,
        json!({"metadata": {"resourceVersion": "42", "annotations": {
            "cluster.x-k8s.io/delete-machine": "2023-11-14T22:13:20Z",
            "fleetscaler.io/scale-down-from": "5",
            "fleetscaler.io/scale-down-group": "MachineSet.cluster.x-k8s.io/ns/a"}}})
    );
    let m = machine(p["metadata"]["annotations"].clone());
    assert!(is_marked(&m, MachineApiGroup::ClusterApi));
    assert!(!is_marked(&m, MachineApiGroup::OpenShift));
    assert_eq!(recorded_from(&m), Some(5));
    assert_eq!(recorded_group(&m), Some("MachineSet.cluster.x-k8s.io/ns/a"));
}

#[test]
fn unmarking_keeps_a_delete_mark_someone_else_put_there() {
    let p = unmark_patch(MachineApiGroup::OpenShift, true);
    let a = p["metadata"]["annotations"].as_object().unwrap();
    assert!(!a.contains_key("machine.openshift.io/delete-machine"));
    assert!(a[SCALE_DOWN_FROM_ANNOTATION].is_null());
    let p = unmark_patch(MachineApiGroup::OpenShift, false);
    assert!(p["metadata"]["annotations"]["machine.openshift.io/delete-machine"].is_null());
}

#[test]
fn an_unreadable_recorded_count_is_no_count() {
    assert_eq!(
        recorded_from(&machine(json!({SCALE_DOWN_FROM_ANNOTATION: "five"}))),
        None
    );
    assert_eq!(recorded_from(&machine(json!({}))), None);
}
