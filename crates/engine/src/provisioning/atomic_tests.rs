//! Upstream's best-effort-atomic cases (orchestrator_test.go, wrapper_orchestrator_test.go)
//! rebuilt on whole passes.

use serde_json::json;

use super::super::Decision;
use super::super::tests::{at, cluster, decision, pass, request, writes};
use crate::fixtures::{pod, snapshot};
use crate::reason::ReasonCode;
use crate::{EngineState, Settings, run_once};
use fleetscaler_model::provisioning::{BEST_EFFORT_ATOMIC, ConditionStatus};

#[test]
fn atomic_scales_up_one_group_for_all_pods() {
    let mut items = cluster(5, "4");
    items.push(request("train", BEST_EFFORT_ATOMIC, 6, json!([])));
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "train");
    assert_eq!(d.decision, Decision::ScaledUp, "{}", d.reason);
    assert_eq!(
        writes(d)[1],
        (
            "Provisioned",
            ConditionStatus::True,
            "CapacityIsProvisioned",
            "Capacity is found in the cluster"
        )
    );
    assert_eq!(p.scale_up.len(), 1);
    let a = &p.scale_up[0];
    assert_eq!((a.from, a.to), (1, 3));
    assert!(
        a.pods.is_empty(),
        "the request's pods are not the cluster's"
    );
    assert!(
        a.reason.starts_with("ProvisioningRequest default/train"),
        "{}",
        a.reason
    );
    assert_eq!(d.node_group.as_ref(), Some(&a.node_group));
}

#[test]
fn atomic_too_big_for_the_group_scales_nothing() {
    let mut items = cluster(3, "4");
    // 10 one-core pods need 3 new nodes; the group has room for 2.
    items.push(request("huge", BEST_EFFORT_ATOMIC, 10, json!([])));
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "huge");
    assert_eq!(d.decision, Decision::CapacityNotFound);
    assert_eq!(
        writes(d)[1],
        (
            "Provisioned",
            ConditionStatus::False,
            "CapacityIsNotFound",
            "Capacity is not found, CA will try to find it later."
        )
    );
    assert!(p.scale_up.is_empty(), "all or nothing: {:?}", p.scale_up);
    assert!(d.reason.contains("not all pods would fit"), "{}", d.reason);
}

#[test]
fn atomic_pods_that_fit_existing_nodes_need_no_scale_up() {
    let mut items = cluster(5, "1");
    items.push(request("small", BEST_EFFORT_ATOMIC, 2, json!([])));
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "small");
    assert_eq!(d.decision, Decision::CapacityFound);
    assert_eq!(writes(d)[1].2, "CapacityIsFound");
    assert!(p.scale_up.is_empty());
}

#[test]
fn passes_alternate_between_pending_pods_and_a_request() {
    let mut items = cluster(10, "4");
    items.push(pod("web").cpu("1").unschedulable().json());
    items.push(request("train", BEST_EFFORT_ATOMIC, 4, json!([])));
    let mut state = EngineState::default();
    // First the pending pods; the request waits.
    let p = pass(&items, &mut state, 1);
    assert_eq!(decision(&p, "train").decision, Decision::Waiting);
    assert_eq!(p.scale_up[0].pods.len(), 1);
    // Then the request; the pending pod waits (as if still pending).
    let p = pass(&items, &mut state, 2);
    assert_eq!(decision(&p, "train").decision, Decision::ScaledUp);
    let e = p
        .pending_pods
        .iter()
        .find(|e| &*e.pod.name == "web")
        .unwrap();
    assert_eq!(e.reasons[0].code, ReasonCode::ProvisioningRequestTurn);
}

#[test]
fn an_atomic_request_counts_the_nodes_already_coming() {
    let mut items = cluster(10, "4");
    items[0]["spec"]["replicas"] = json!(3);
    for k in 1..3 {
        items.push(crate::fixtures::pending_machine(
            &format!("workers-m{k}"),
            "workers",
            &at(-1).to_string(),
        ));
    }
    items.push(request("train", BEST_EFFORT_ATOMIC, 6, json!([])));
    let p = pass(&items, &mut EngineState::default(), 1);
    let d = decision(&p, "train");
    assert_eq!(d.decision, Decision::CapacityFound, "{}", d.reason);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
}

#[test]
fn atomic_respects_the_clusters_max_nodes() {
    // Six one-core pods need two new 4-core nodes; max_nodes_total leaves room for one.
    let mut items = cluster(10, "4");
    items.push(request("train", BEST_EFFORT_ATOMIC, 6, json!([])));
    let settings = Settings {
        max_nodes_total: Some(2),
        ..Settings::default()
    };
    let s = snapshot(items.clone());
    let p = run_once(&s, &mut EngineState::default(), &settings, at(1));
    let d = decision(&p, "train");
    assert_eq!(d.decision, Decision::CapacityNotFound, "{}", d.reason);
    assert!(p.scale_up.is_empty());
    assert!(d.reason.contains("MaxNodesTotalReached"), "{}", d.reason);
    let settings = Settings {
        max_nodes_total: Some(3),
        ..Settings::default()
    };
    let p = run_once(&s, &mut EngineState::default(), &settings, at(1));
    assert_eq!(decision(&p, "train").decision, Decision::ScaledUp);
}
