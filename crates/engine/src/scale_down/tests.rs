use jiff::Timestamp;

use crate::fixtures::{group_node, machineset, node, pod, snapshot};
use crate::plan::Plan;
use crate::reason::ReasonCode;
use crate::settings::Range;
use crate::{EngineState, Settings, run_once};
use fleetscaler_model::ClusterSnapshot;

fn at(minutes: i64) -> Timestamp {
    "2026-11-22T10:00:00Z".parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_mins(minutes)
}

fn run(s: &ClusterSnapshot, state: &mut EngineState, settings: &Settings, minute: i64) -> Plan {
    run_once(s, state, settings, at(minute))
}

fn removed(p: &Plan) -> Vec<&str> {
    p.scale_down.iter().map(|a| &*a.node).collect()
}

fn stays(p: &Plan, node: &str) -> Option<ReasonCode> {
    p.not_removable
        .iter()
        .find(|n| &*n.node == node)
        .map(|n| n.code)
}

fn unneeded(p: &Plan) -> Vec<&str> {
    p.unneeded.iter().map(|u| &*u.node).collect()
}

/// Seed 001: A's pods (400m) move to X (450m free); then B's (350m) no longer fit X and
/// fit nowhere else, while C's (300m) go to Y, which nobody touched.
fn seed_001() -> ClusterSnapshot {
    let mut items = vec![machineset("w", 0, 10, 5).json()];
    for (name, cpu, pods) in [
        ("a", "2", 1),
        ("b", "1", 1),
        ("c", "750m", 1),
        ("x", "1", 110),
        ("y", "1", 110),
    ] {
        items.extend(group_node(name, "w", node(name).cpu(cpu).pods(pods)));
    }
    items.push(pod("a-pod").cpu("400m").on("a").json());
    items.push(pod("b-pod").cpu("350m").on("b").json());
    items.push(pod("c-pod").cpu("300m").on("c").json());
    items.push(pod("x-load").cpu("550m").on("x").json());
    items.push(pod("y-load").cpu("700m").on("y").json());
    snapshot(items)
}

#[test]
fn seed_001_destinations_are_remembered_across_candidates() {
    let p = run(
        &seed_001(),
        &mut EngineState::default(),
        &Settings::default(),
        0,
    );
    assert_eq!(unneeded(&p), vec!["a", "c"]);
    assert_eq!(stays(&p, "b"), Some(ReasonCode::NoPlaceToMovePods));
    assert_eq!(stays(&p, "x"), Some(ReasonCode::NotUnderutilized));
    assert!(p.scale_down.is_empty(), "not unneeded long enough yet");
}

#[test]
fn unneeded_for_9_minutes_is_kept_and_for_11_removed_one_drain_at_a_time() {
    let s = seed_001();
    let settings = Settings::default();
    let mut state = EngineState::default();
    run(&s, &mut state, &settings, 0);
    let p9 = run(&s, &mut state, &settings, 9);
    assert!(p9.scale_down.is_empty());
    assert_eq!(p9.unneeded[0].since, at(0));
    assert_eq!(p9.unneeded[0].removable_at, at(10));
    let p11 = run(&s, &mut state, &settings, 11);
    assert_eq!(removed(&p11), vec!["a"]);
    let a = &p11.scale_down[0];
    assert!(!a.empty);
    assert_eq!(
        (&*a.pods[0].pod.name, &*a.pods[0].destination),
        ("a-pod", "x")
    );
    assert!(
        a.reason.contains("unneeded since 2026-11-22T10:00:00Z"),
        "{}",
        a.reason
    );
    // One drain at a time: c waits for a later pass.
    assert_eq!(stays(&p11, "c"), Some(ReasonCode::DeletionBudgetReached));
    assert_eq!(state.last_scale_down_delete, Some(at(11)));
}

fn empty_nodes(n: usize, min: u64) -> ClusterSnapshot {
    let mut items = vec![machineset("w", min, 20, n as u64).json()];
    for i in 0..n {
        let name = format!("n{i:02}");
        items.extend(group_node(&name, "w", node(&name)));
        items.push(
            pod(&format!("agent-{i}"))
                .cpu("100m")
                .owner("DaemonSet", "agent")
                .on(&name)
                .json(),
        );
    }
    snapshot(items)
}

#[test]
fn empty_nodes_go_in_parallel_up_to_the_limit_and_never_below_min() {
    let settings = Settings::default();
    let mut state = EngineState::default();
    run(&empty_nodes(14, 2), &mut state, &settings, 0);
    let p = run(&empty_nodes(14, 2), &mut state, &settings, 10);
    assert_eq!(p.scale_down.len(), 10);
    assert!(
        p.scale_down
            .iter()
            .all(|a| a.empty && a.reason.contains("no pod needs to move"))
    );
    let budget = p
        .not_removable
        .iter()
        .filter(|n| n.code == ReasonCode::DeletionBudgetReached)
        .count();
    assert_eq!(
        budget, 4,
        "14 empty nodes, 10 at once: {:?}",
        p.not_removable
    );
    let mut state = EngineState::default();
    run(&empty_nodes(5, 3), &mut state, &settings, 0);
    let p = run(&empty_nodes(5, 3), &mut state, &settings, 10);
    assert_eq!(p.scale_down.len(), 2);
    let at_min = p
        .not_removable
        .iter()
        .filter(|n| n.code == ReasonCode::NodeGroupMinSizeReached)
        .count();
    assert_eq!(at_min, 3);
}

/// Upstream's pre-filter: a group at its min has no scale-down candidates, so its empty
/// nodes are not unneeded (the status ConfigMap says NoCandidates, the unneeded count is 0),
/// and each says why it stays.
#[test]
fn nodes_of_a_group_at_its_min_are_not_unneeded() {
    let settings = Settings::default();
    let mut state = EngineState::default();
    run(&empty_nodes(2, 2), &mut state, &settings, 0);
    let p = run(&empty_nodes(2, 2), &mut state, &settings, 30);
    assert!(unneeded(&p).is_empty(), "{:?}", p.unneeded);
    assert!(removed(&p).is_empty());
    for n in ["n00", "n01"] {
        assert_eq!(stays(&p, n), Some(ReasonCode::NodeGroupMinSizeReached));
    }
    let why = &p.not_removable[0].message;
    assert!(why.contains("at its min size 2"), "{why}");
}

#[test]
fn cluster_min_limits_hold() {
    let settings = Settings {
        cores: Range { min: 12, max: None },
        ..Settings::default()
    };
    let mut state = EngineState::default();
    run(&empty_nodes(4, 0), &mut state, &settings, 0);
    // 4 nodes x 4 cores = 16; the min of 12 allows one removal.
    let p = run(&empty_nodes(4, 0), &mut state, &settings, 10);
    assert_eq!(p.scale_down.len(), 1);
    let limited = p
        .not_removable
        .iter()
        .filter(|n| n.code == ReasonCode::MinimalResourceLimitExceeded)
        .count();
    assert_eq!(limited, 3);
}

#[test]
fn no_scale_down_within_delay_after_add_of_a_scale_up() {
    let settings = Settings::default();
    let mut state = EngineState::default();
    state.record_scale_up(
        &crate::nodegroups::NodeGroupId::parse(
            "MachineSet.machine.openshift.io/openshift-machine-api/other",
        )
        .unwrap(),
        1,
        at(5),
    );
    run(&empty_nodes(3, 0), &mut state, &settings, 0);
    let p = run(&empty_nodes(3, 0), &mut state, &settings, 14);
    assert!(p.scale_down.is_empty());
    assert!(
        p.scale_down_paused
            .as_ref()
            .unwrap()
            .contains("no scale-down within scale_down_delay_after_add (10m0s)")
    );
    assert_eq!(
        p.unneeded.len(),
        3,
        "the unneeded clocks keep running in cooldown"
    );
    assert_eq!(
        run(&empty_nodes(3, 0), &mut state, &settings, 15)
            .scale_down
            .len(),
        3
    );
}

#[test]
fn blocking_pods_and_annotations_keep_their_node() {
    let mut items = vec![machineset("w", 0, 10, 4).json()];
    for name in ["pdb", "bare", "protected", "roomy"] {
        items.extend(group_node(name, "w", node(name)));
    }
    items.push(
        pod("web-0")
            .label("app", "web")
            .cpu("100m")
            .on("pdb")
            .json(),
    );
    items.push(serde_json::json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 0}}));
    let mut bare = pod("bare-0").cpu("100m").on("bare").json();
    bare["metadata"]["ownerReferences"] = serde_json::json!([]);
    items.push(bare);
    let s = snapshot(items);
    let mut s = s;
    let protected = s
        .nodes
        .iter_mut()
        .find(|n| &*n.name == "protected")
        .unwrap();
    protected.scale_down_disabled = true;
    let p = run(&s, &mut EngineState::default(), &Settings::default(), 0);
    assert_eq!(stays(&p, "pdb"), Some(ReasonCode::NotEnoughPdb));
    assert_eq!(stays(&p, "bare"), Some(ReasonCode::NotReplicated));
    assert_eq!(
        stays(&p, "protected"),
        Some(ReasonCode::ScaleDownDisabledAnnotation)
    );
    assert_eq!(unneeded(&p), vec!["roomy"]);
}

#[test]
fn unready_nodes_wait_the_unready_time() {
    let mut items = vec![machineset("w", 0, 10, 2).json()];
    items.extend(group_node("up", "w", node("up")));
    items.extend(group_node(
        "down",
        "w",
        node("down").not_ready().created("2026-11-01T00:00:00Z"),
    ));
    let s = snapshot(items);
    let settings = Settings::default();
    let mut state = EngineState::default();
    run(&s, &mut state, &settings, 0);
    let p = run(&s, &mut state, &settings, 15);
    assert_eq!(removed(&p), vec!["up"]);
    let down = p.unneeded.iter().find(|u| &*u.node == "down").unwrap();
    assert_eq!(down.removable_at, at(20));
}

#[test]
fn a_node_that_stops_being_unneeded_starts_over() {
    let settings = Settings::default();
    let mut state = EngineState::default();
    run(&empty_nodes(2, 0), &mut state, &settings, 0);
    // At minute 5 a pod takes most of n00: it is needed.
    let mut busy = empty_nodes(2, 0);
    busy.pods
        .extend(snapshot([pod("job").cpu("3").on("n00").json()]).pods);
    let p5 = run(&busy, &mut state, &settings, 5);
    assert_eq!(stays(&p5, "n00"), Some(ReasonCode::NotUnderutilized));
    assert_eq!(unneeded(&p5), vec!["n01"]);
    // At minute 11 it is empty again: its clock starts at 11, while n01's kept running.
    let p11 = run(&empty_nodes(2, 0), &mut state, &settings, 11);
    let since = |n: &str| p11.unneeded.iter().find(|u| &*u.node == n).unwrap().since;
    assert_eq!((since("n00"), since("n01")), (at(11), at(0)));
    assert_eq!(removed(&p11), vec!["n01"]);
}

#[test]
fn a_node_expecting_a_pending_pod_stays() {
    let mut s = empty_nodes(2, 0);
    s.pods
        .extend(snapshot([pod("new").cpu("1").unschedulable().json()]).pods);
    let p = run(&s, &mut EngineState::default(), &Settings::default(), 0);
    let fits = p
        .pending_pods
        .iter()
        .find(|e| &*e.pod.name == "new")
        .unwrap();
    let node = fits.node.as_deref().unwrap();
    assert_eq!(stays(&p, node), Some(ReasonCode::HoldsMovedPods));
    assert!(
        p.not_removable
            .iter()
            .any(|n| n.message.contains("pending pod default/new"))
    );
    assert_eq!(unneeded(&p).len(), 1);
}

/// Node a is being drained (tainted at `tainted`); b and c take no more pods.
fn draining(tainted: i64) -> ClusterSnapshot {
    let now = at(tainted).as_second().to_string();
    let mut items = vec![machineset("w", 0, 10, 5).json()];
    items.extend(group_node(
        "a",
        "w",
        node("a").taint("ToBeDeletedByClusterAutoscaler", &now, "NoSchedule"),
    ));
    // b and c take no more pods (max 1 each).
    items.extend(group_node("b", "w", node("b").pods(1)));
    items.extend(group_node("c", "w", node("c").pods(1)));
    items.extend(group_node("x", "w", node("x")));
    items.extend(group_node("y", "w", node("y")));
    items.push(pod("pa").cpu("1500m").on("a").json());
    items.push(pod("pb").cpu("1500m").on("b").json());
    items.push(pod("pc").cpu("500m").on("c").json());
    items.push(pod("x-load").cpu("2200m").on("x").json());
    items.push(pod("y-load").cpu("3000m").on("y").json());
    snapshot(items)
}

#[test]
fn a_drain_under_way_rehomes_its_pods_first_and_uses_the_drain_budget() {
    let mut state = EngineState::default();
    let p = run(&draining(0), &mut state, &Settings::default(), 0);
    // x's free 1800m goes to pa, whose node is being drained; pb then has nowhere to go.
    assert_eq!(stays(&p, "a"), Some(ReasonCode::CurrentlyBeingDeleted));
    assert_eq!(stays(&p, "b"), Some(ReasonCode::NoPlaceToMovePods));
    assert_eq!(unneeded(&p), vec!["c"], "pc fits y");
    // Eleven minutes on, c is due, but a's drain (tainted a minute ago) takes the drain slot.
    let p = run(&draining(10), &mut state, &Settings::default(), 11);
    assert!(p.scale_down.is_empty());
    let c = p.not_removable.iter().find(|n| &*n.node == "c").unwrap();
    assert_eq!(c.code, ReasonCode::DeletionBudgetReached);
    assert!(c.message.contains("max_drain_parallelism"));
}

#[test]
fn the_gpu_minimum_holds_across_removals() {
    let settings = Settings {
        gpus: vec![crate::settings::GpuLimit {
            gpu_type: "t4".into(),
            min: 1,
            max: 8,
        }],
        ..Settings::default()
    };
    let mut items = vec![machineset("g", 0, 10, 2).json()];
    for n in ["g0", "g1"] {
        items.extend(group_node(
            n,
            "g",
            node(n)
                .resource("nvidia.com/gpu", "1")
                .label("cluster-api/accelerator", "t4"),
        ));
    }
    let s = snapshot(items);
    let mut state = EngineState::default();
    run(&s, &mut state, &settings, 0);
    let p = run(&s, &mut state, &settings, 11);
    assert_eq!(p.scale_down.len(), 1);
    assert!(
        p.scale_down[0].reason.contains("(GPU) ≤ 0.5"),
        "{}",
        p.scale_down[0].reason
    );
    let kept = p
        .not_removable
        .iter()
        .find(|n| n.code == ReasonCode::MinimalResourceLimitExceeded)
        .unwrap();
    assert!(
        kept.message
            .contains("t4 GPUs would fall to 0 below the min 1"),
        "{}",
        kept.message
    );
}

/// Nodes `a` and `b` run two `web` pods each; a PodDisruptionBudget allows one disruption;
/// `x` and `y` are busy but have room. `plain` runs one pod of its own.
fn pdb_at_risk(allowed: i32) -> ClusterSnapshot {
    let mut items = vec![machineset("w", 0, 10, 5).json()];
    // The busy nodes first: moved pods go to the first node they fit.
    for name in ["x", "y", "a", "b", "plain"] {
        items.extend(group_node(name, "w", node(name)));
    }
    for (i, on) in ["a", "a", "b", "b"].iter().enumerate() {
        let web = pod(&format!("web-{i}")).label("app", "web").cpu("100m");
        items.push(web.on(on).json());
    }
    items.push(pod("solo").cpu("100m").on("plain").json());
    items.push(pod("x-load").cpu("2500m").on("x").json());
    items.push(pod("y-load").cpu("2500m").on("y").json());
    items.push(
        serde_json::json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": allowed}}),
    );
    snapshot(items)
}

/// Upstream's remaining-budget tracker (`core/scaledown/pdb/basic.go`) and planner: a node
/// whose pods need more disruptions than a budget allows, but at least one, is removable and
/// at risk; the budget is charged for all its pods, so the next node it covers keeps its node.
#[test]
fn a_node_whose_pods_need_more_than_a_budget_allows_is_at_risk_not_kept() {
    let s = pdb_at_risk(1);
    let settings = Settings::default();
    let mut state = EngineState::default();
    let p = run(&s, &mut state, &settings, 0);
    assert_eq!(unneeded(&p), vec!["plain", "a"]);
    assert_eq!(stays(&p, "b"), Some(ReasonCode::NotEnoughPdb));
    let why = &p
        .not_removable
        .iter()
        .find(|n| &*n.node == "b")
        .unwrap()
        .message;
    assert!(
        why.contains("nodes found unneeded before this one take the 1"),
        "{why}"
    );

    // One drain at a time by default: the node not at risk goes first.
    let p = run(&s, &mut state, &settings, 11);
    assert_eq!(removed(&p), vec!["plain"]);

    // With room for two drains the node at risk still drains alone.
    let two = Settings {
        max_drain_parallelism: 2,
        ..Settings::default()
    };
    let p = run(&s, &mut EngineState::default(), &two, 0);
    assert_eq!(unneeded(&p), vec!["plain", "a"]);
    let mut state = EngineState::default();
    run(&s, &mut state, &two, 0);
    let p = run(&s, &mut state, &two, 11);
    assert_eq!(removed(&p), vec!["plain"]);
    assert_eq!(stays(&p, "a"), Some(ReasonCode::DeletionBudgetReached));
    let why = &p
        .not_removable
        .iter()
        .find(|n| &*n.node == "a")
        .unwrap()
        .message;
    assert!(
        why.contains("drains alone") && why.contains("PodDisruptionBudget default/web"),
        "{why}"
    );
}

#[test]
fn a_node_at_risk_alone_is_removed_with_why_and_a_budget_of_none_blocks() {
    let mut s = pdb_at_risk(1);
    s.pods.retain(|p| &*p.id.name != "solo");
    let settings = Settings::default();
    let mut state = EngineState::default();
    run(&s, &mut state, &settings, 0);
    let p = run(&s, &mut state, &settings, 11);
    // `plain` is empty now: empty nodes have no pods to disrupt and go beside it.
    assert_eq!(removed(&p), vec!["plain", "a"]);
    let a = p.scale_down.iter().find(|d| &*d.node == "a").unwrap();
    assert!(
        a.reason.contains("at risk") && a.reason.contains("max_pod_eviction_time"),
        "{}",
        a.reason
    );

    let none = pdb_at_risk(0);
    let p = run(&none, &mut EngineState::default(), &settings, 0);
    assert_eq!(stays(&p, "a"), Some(ReasonCode::NotEnoughPdb));
    assert_eq!(stays(&p, "b"), Some(ReasonCode::NotEnoughPdb));
}
