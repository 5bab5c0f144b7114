use serde_json::{Value, json};

use super::*;
use crate::engine::fixtures::{machine, machineset, node, pod, snapshot};
use crate::engine::{EngineState, Settings, run_once};

/// Group `a` with `nodes` nodes (a pod on each, so none is removable), and `pending` pods
/// no node can take.
fn plan(nodes: usize, pending: usize) -> Arc<Plan> {
    let mut items = vec![machineset("a", 1, 5, nodes as u64).json()];
    for i in 0..nodes {
        let name = format!("a-{i:04}");
        items.push(node(&name).label("pool", "a").json());
        items.push(machine(&format!("{name}-m"), "a", Some(&name)));
        items.push(pod(&format!("busy-{i:04}")).cpu("3").on(&name).json());
    }
    for i in 0..pending {
        let huge = pod(&format!("huge-{i:05}")).cpu("64").unschedulable();
        items.push(huge.json());
    }
    let now = "2026-11-22T10:00:00Z".parse().unwrap();
    let mut state = EngineState::default();
    Arc::new(run_once(
        &snapshot(items),
        &mut state,
        &Settings::default(),
        now,
    ))
}

fn answer(plan: &Plan, query: &str) -> Value {
    let body = build(plan, &read_query(query).unwrap()).unwrap();
    serde_json::from_slice(&body).unwrap()
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_small_plan_is_answered_as_it_is() {
    let p = plan(3, 4);
    assert_eq!(p.pending_pods.len(), 4);
    assert!(!p.not_removable.is_empty());
    assert_eq!(answer(&p, ""), serde_json::to_value(&*p).unwrap());
}

#[test]
fn long_lists_are_cut_to_a_page_and_say_what_they_left_out() {
    let p = plan(2, SHOWN + 200);
    let whole = serde_json::to_value(&*p).unwrap();
    let mut first = answer(&p, "");
    assert_eq!(first["pendingPods"].as_array().unwrap().len(), SHOWN);
    assert_eq!(first["pendingPodsOmitted"], 200);
    assert_eq!(first["pendingPods"][0], whole["pendingPods"][0]);
    // The rest as it is: every field of the plan, nothing renamed.
    let obj = first.as_object_mut().unwrap();
    obj.remove("pendingPodsOmitted");
    obj.insert("pendingPods".into(), whole["pendingPods"].clone());
    assert_eq!(first, whole);

    let next = answer(&p, "offset=500&limit=150");
    let pods = names(&next["pendingPods"], "pod");
    assert_eq!(pods.len(), 150);
    assert_eq!(pods[0], p.pending_pods[500].pod.to_string());
    assert_eq!(next["pendingPodsOmitted"], SHOWN + 200 - 150);
    let past = answer(&p, "offset=100000");
    assert_eq!(past["pendingPods"], json!([]));
    assert_eq!(past["pendingPodsOmitted"], SHOWN + 200);
}

#[test]
fn a_pod_or_a_node_is_asked_for_by_name() {
    let p = plan(3, SHOWN + 10);
    let wanted = p.pending_pods[SHOWN + 3].pod.to_string();
    let one = answer(&p, &format!("pod={wanted}"));
    assert_eq!(
        names(&one["pendingPods"], "pod"),
        std::slice::from_ref(&wanted)
    );
    assert_eq!(one["pendingPodsOmitted"], SHOWN + 9);
    assert_eq!(
        one["pendingPods"][0],
        serde_json::to_value(&p.pending_pods[SHOWN + 3]).unwrap()
    );
    let none = answer(&p, "pod=default/nobody");
    assert_eq!(none["pendingPods"], json!([]));

    let kept = p.not_removable[1].node.to_string();
    let node = answer(&p, &format!("node={kept}"));
    assert_eq!(names(&node["notRemovable"], "node"), [kept]);
    assert_eq!(node["notRemovableOmitted"], p.not_removable.len() - 1);
    // The pods keep their default page.
    assert_eq!(node["pendingPods"].as_array().unwrap().len(), SHOWN);
}

#[test]
fn a_wrong_query_is_named() {
    assert_eq!(read_query("").unwrap(), Query::default());
    let e = read_query("limit=501").unwrap_err();
    assert!(e.contains("at most 500"), "{e}");
    let e = read_query("offset=-1").unwrap_err();
    assert!(e.starts_with("offset=\"-1\": not a number"), "{e}");
    let e = read_query("page=2").unwrap_err();
    assert!(e.starts_with("unknown parameter \"page\""), "{e}");
    let q = read_query("pod=ns%2Fweb&node=n-1&limit=10").unwrap();
    assert_eq!(q.pod.as_deref(), Some("ns/web"));
    assert_eq!((q.node.as_deref(), q.limit), (Some("n-1"), 10));
}

/// Every request for a plan shares one answer, built once; the next plan gets its own, and
/// the answer of a plan gone goes with it.
#[tokio::test]
async fn the_default_answer_is_built_once_per_plan() {
    let plans = Plans::default();
    let first = plan(1, 3);
    let a = plans.shared("c", &first).await.unwrap();
    let b = plans.shared("c", &first).await.unwrap();
    assert_eq!(a.as_ptr(), b.as_ptr(), "the same bytes");
    let second = plan(1, 2);
    let c = plans.shared("c", &second).await.unwrap();
    assert_ne!(a.as_ptr(), c.as_ptr());
    let v: Value = serde_json::from_slice(&c).unwrap();
    assert_eq!(v["pendingPods"].as_array().unwrap().len(), 2);

    let other = plan(1, 1);
    plans.shared("d", &other).await.unwrap();
    assert_eq!(plans.held(), 2);
    drop(other);
    plans.shared("c", &second).await.unwrap();
    assert_eq!(plans.held(), 1, "the answer of a plan gone is dropped");
}
