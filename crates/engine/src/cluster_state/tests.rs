use jiff::Timestamp;

use crate::fixtures::{
    failed_machine, group_node, machineset, node, pending_machine, pod, snapshot,
};
use crate::plan::{Outcome, Plan};
use crate::reason::ReasonCode;
use crate::{EngineState, Settings, run_once};
use fleetscaler_model::ClusterSnapshot;

const T0: &str = "2026-11-22T10:00:00Z";

fn at(minutes: i64) -> Timestamp {
    T0.parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_mins(minutes)
}

fn ts(minutes: i64) -> String {
    at(minutes).to_string()
}

fn pass(s: &ClusterSnapshot, state: &mut EngineState, minute: i64) -> Plan {
    run_once(s, state, &Settings::default(), at(minute))
}

fn outcome(p: &Plan, pod: &str) -> Outcome {
    p.pending_pods
        .iter()
        .find(|e| &*e.pod.name == pod)
        .unwrap()
        .outcome
}

#[test]
fn readiness_categories_are_counted() {
    let mut items = vec![machineset("w", 0, 10, 7).json()];
    items.extend(group_node("ready", "w", node("ready")));
    items.extend(group_node(
        "sick",
        "w",
        node("sick").not_ready().created(&ts(-60)),
    ));
    items.extend(group_node(
        "booting",
        "w",
        node("booting").not_ready().created(&ts(-5)),
    ));
    let just_now = at(-1).as_second().to_string();
    items.extend(group_node(
        "leaving",
        "w",
        node("leaving").taint("ToBeDeletedByClusterAutoscaler", &just_now, "NoSchedule"),
    ));
    // A ToBeDeleted taint from long ago was left by an interrupted removal: stale.
    items.extend(group_node(
        "left-over",
        "w",
        node("left-over").taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"),
    ));
    items.push(pending_machine("fresh", "w", &ts(-5)));
    items.push(pending_machine("stuck", "w", &ts(-20)));
    let p = pass(&snapshot(items), &mut EngineState::default(), 0);
    let c = &p.health.cluster;
    assert_eq!(
        (
            c.ready,
            c.unready,
            c.not_started,
            c.deleting,
            c.unregistered,
            c.long_unregistered
        ),
        (2, 1, 1, 1, 1, 1)
    );
    assert!(c.healthy);
    assert_eq!(p.delete_unregistered.len(), 1);
    assert_eq!(p.delete_unregistered[0].machine.name.as_ref(), "stuck");
    assert!(p.delete_unregistered[0].lower_replicas);
}

#[test]
fn an_unhealthy_cluster_only_removes_unregistered_machines() {
    let mut items = vec![machineset("w", 0, 10, 7).json()];
    items.extend(group_node("ok", "w", node("ok")));
    for i in 0..4 {
        let name = format!("sick-{i}");
        items.extend(group_node(
            &name,
            "w",
            node(&name).not_ready().created(&ts(-60)),
        ));
    }
    items.push(pending_machine("stuck", "w", &ts(-20)));
    items.push(failed_machine("broken", "w", &ts(-2), "no capacity"));
    items.push(pod("web").cpu("8").unschedulable().json());
    let p = pass(&snapshot(items), &mut EngineState::default(), 0);
    assert!(!p.health.cluster.healthy);
    assert!(
        p.health
            .cluster
            .reason
            .as_ref()
            .unwrap()
            .contains("4 of 5 nodes are unready")
    );
    assert!(p.scale_up.is_empty() && p.delete_failed_machines.is_empty());
    assert_eq!(p.delete_unregistered.len(), 1);
    let e = p
        .pending_pods
        .iter()
        .find(|e| &*e.pod.name == "web")
        .unwrap();
    assert_eq!(e.reasons[0].code, ReasonCode::ClusterUnhealthy);
}

/// Two groups: `a` (preferred by the priority expander) and `b`, each with one full node.
fn two_groups(a_target: u64, extra: Vec<serde_json::Value>) -> ClusterSnapshot {
    let mut items = vec![
        machineset("a", 1, 10, a_target).json(),
        machineset("b", 1, 10, 1).json(),
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "openshift-machine-api"},
            "data": {"priorities": "10:\n- .*/b$\n50:\n- .*/a$\n"}}),
    ];
    for g in ["a", "b"] {
        let n = format!("{g}-0");
        items.extend(group_node(&n, g, node(&n).cpu("4")));
        items.push(pod(&format!("fill-{g}")).cpu("4").on(&n).json());
    }
    items.push(pod("web").cpu("2").unschedulable().json());
    items.extend(extra);
    snapshot(items)
}

fn priority_first() -> Settings {
    Settings {
        expanders: vec![crate::settings::ExpanderKind::Priority],
        ..Settings::default()
    }
}

#[test]
fn a_timed_out_scale_up_is_corrected_and_its_pods_go_elsewhere_in_the_same_pass() {
    let settings = priority_first();
    let mut state = EngineState::default();
    let p0 = run_once(&two_groups(1, vec![]), &mut state, &settings, at(0));
    assert_eq!(
        p0.scale_up[0].node_group.as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/a"
    );
    // 14 minutes on: a's machine is provisioning; the pod waits for it.
    let stuck = || vec![pending_machine("a-new", "a", &ts(0))];
    let p14 = run_once(&two_groups(2, stuck()), &mut state, &settings, at(14));
    assert_eq!(outcome(&p14, "web"), Outcome::FitsUpcoming);
    assert!(p14.scale_up.is_empty());
    // Minute 15: timed out. a is backed off, its machine deleted, and b takes the pod now.
    let p15 = run_once(&two_groups(2, stuck()), &mut state, &settings, at(15));
    assert_eq!(p15.delete_unregistered.len(), 1);
    assert!(
        p15.delete_unregistered[0]
            .reason
            .starts_with("scale-up timed out: 1 node(s)")
    );
    // The timeout as data, for the event that tells it: one record for group a.
    let timed_out: Vec<_> = p15
        .timed_out
        .iter()
        .map(|t| (t.node_group.as_str(), t.nodes))
        .collect();
    assert_eq!(
        timed_out,
        [("MachineSet.machine.openshift.io/openshift-machine-api/a", 1)]
    );
    assert!(p14.timed_out.is_empty());
    let a = &p15.health.node_groups[0];
    assert_eq!(a.backoff_until, Some(at(20)));
    assert_eq!(p15.scale_up.len(), 1);
    assert_eq!(
        p15.scale_up[0].node_group.as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/b"
    );
    let reasons = &p15.pending_pods[0].reasons;
    assert!(reasons.is_empty(), "{reasons:?}");
}

#[test]
fn machines_never_created_have_their_target_fixed() {
    let settings = priority_first();
    let mut state = EngineState::default();
    run_once(&two_groups(1, vec![]), &mut state, &settings, at(0));
    // The machine controller never created the machine: target 2, one machine.
    let p = run_once(&two_groups(2, vec![]), &mut state, &settings, at(15));
    assert_eq!(p.fix_target_size.len(), 1);
    let fix = &p.fix_target_size[0];
    assert_eq!((fix.from, fix.to), (2, 1));
    assert!(fix.reason.contains("1 machine(s) were never created"));
}

#[test]
fn a_failed_machine_backs_off_at_once_and_is_deleted() {
    let settings = priority_first();
    let mut state = EngineState::default();
    run_once(&two_groups(1, vec![]), &mut state, &settings, at(0));
    let failed = vec![failed_machine(
        "a-new",
        "a",
        &ts(0),
        "InsufficientInstanceCapacity",
    )];
    let p = run_once(&two_groups(2, failed.clone()), &mut state, &settings, at(2));
    assert_eq!(p.delete_failed_machines.len(), 1);
    assert!(
        p.delete_failed_machines[0]
            .reason
            .contains("InsufficientInstanceCapacity")
    );
    assert!(p.delete_failed_machines[0].lower_replicas);
    assert_eq!(p.health.node_groups[0].backoff_until, Some(at(7)));
    assert_eq!(
        p.scale_up[0].node_group.as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/b"
    );
    // Seen again while its deletion is under way: no second backoff.
    let again = run_once(&two_groups(2, failed), &mut state, &settings, at(3));
    assert_eq!(again.health.node_groups[0].backoff_until, Some(at(7)));
}

#[test]
fn after_a_restart_nodes_in_flight_are_timed_from_their_machines() {
    // No memory, target 2 with one registered node and a machine created 20 minutes ago.
    let s = two_groups(2, vec![pending_machine("a-new", "a", &ts(-20))]);
    let mut state = EngineState::default();
    let p = run_once(&s, &mut state, &priority_first(), at(0));
    assert_eq!(p.delete_unregistered.len(), 1);
    assert!(p.health.node_groups[0].backoff_until.is_some());
    assert_eq!(
        p.scale_up[0].node_group.as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/b"
    );
}

#[test]
fn an_unexplained_size_blocks_the_group() {
    // Target 2 with a fresh machine and nothing on record: wait, do not add more.
    let s = two_groups(2, vec![pending_machine("a-new", "a", &ts(-2))]);
    let mut state = EngineState::default();
    let p = run_once(&s, &mut state, &priority_first(), at(0));
    let inflight = p.health.node_groups[0].scale_up_in_flight.as_ref().unwrap();
    assert!(inflight.reconstructed);
    assert_eq!(inflight.deadline, at(13));
    // The pod fits the node coming up, so no scale-up is needed anyway.
    assert_eq!(outcome(&p, "web"), Outcome::FitsUpcoming);
}

#[test]
fn at_min_size_a_failed_machine_is_replaced_not_removed() {
    let mut items = vec![machineset("w", 1, 5, 1).json()];
    items.push(failed_machine("w-0", "w", &ts(-1), "quota exceeded"));
    let p = pass(&snapshot(items), &mut EngineState::default(), 0);
    assert!(!p.delete_failed_machines[0].lower_replicas);
    assert!(
        p.delete_failed_machines[0]
            .reason
            .contains("at its min size")
    );
}

#[test]
fn backoff_grows_over_passes_with_the_state_file_and_resets_after_three_hours() {
    let settings = Settings::default();
    let mut json = EngineState::default().to_json();
    let mut lengths = Vec::new();
    let mut minute = 0;
    for i in 0..6 {
        let items = vec![
            machineset("w", 0, 5, 1).json(),
            failed_machine(&format!("w-{i}"), "w", &ts(minute), "no capacity"),
        ];
        let mut state = EngineState::from_json(&json).unwrap();
        let p = run_once(&snapshot(items), &mut state, &settings, at(minute));
        let until = p.health.node_groups[0].backoff_until.unwrap();
        let length = (until.as_second() - at(minute).as_second()) / 60;
        lengths.push(length);
        json = state.to_json();
        // The next failure comes as this backoff ends; the last one, 3 hours after the one before.
        minute += if i == 4 { 30 + 180 } else { length };
    }
    assert_eq!(lengths, vec![5, 10, 20, 30, 30, 5]);
}

#[test]
fn an_unhealthy_pass_does_not_delay_a_timeout() {
    let settings = priority_first();
    let mut state = EngineState::default();
    run_once(&two_groups(1, vec![]), &mut state, &settings, at(0));
    // Minute 15: timed out, but four unready nodes make the cluster unhealthy: nothing is done
    // about the timeout, and nothing about it is forgotten.
    let mut sick = vec![];
    for i in 0..4 {
        let n = format!("sick-{i}");
        sick.push(node(&n).not_ready().created(&ts(-60)).json());
    }
    let p15 = run_once(&two_groups(2, sick), &mut state, &settings, at(15));
    assert!(!p15.health.cluster.healthy);
    assert!(p15.fix_target_size.is_empty() && p15.health.node_groups[0].backoff_until.is_none());
    // Minute 16, healthy again: the timeout fires at once.
    let p16 = run_once(&two_groups(2, vec![]), &mut state, &settings, at(16));
    assert_eq!(p16.fix_target_size.len(), 1, "{:?}", p16.health);
    assert_eq!(
        p16.scale_up[0].node_group.as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/b"
    );
}

#[test]
fn a_target_fix_never_goes_below_min() {
    // min 2, target 2, one node: the second machine was never created, and 20 minutes passed.
    let mut items = vec![machineset("w", 2, 5, 2).json()];
    items.extend(group_node("w-0", "w", node("w-0")));
    let mut state = EngineState::default();
    state.record_scale_up(
        &crate::nodegroups::NodeGroupId::parse(
            "MachineSet.machine.openshift.io/openshift-machine-api/w",
        )
        .unwrap(),
        1,
        at(-20),
    );
    let p = pass(&snapshot(items), &mut state, 0);
    assert!(p.fix_target_size.is_empty(), "{:?}", p.fix_target_size);
    assert!(
        p.health.node_groups[0].backoff_until.is_some(),
        "the timeout still backs off"
    );
}

#[test]
fn nodes_that_register_but_never_get_ready_still_time_out() {
    let settings = priority_first();
    let mut state = EngineState::default();
    run_once(&two_groups(1, vec![]), &mut state, &settings, at(0));
    // The node registered at minute 5 and is still not ready at 15 (not started until 20).
    let mut items = vec![];
    items.extend(group_node(
        "a-1",
        "a",
        node("a-1").not_ready().created(&ts(5)),
    ));
    let p = run_once(&two_groups(2, items), &mut state, &settings, at(15));
    assert_eq!(p.health.node_groups[0].backoff_until, Some(at(20)));
    assert!(
        p.fix_target_size.is_empty() && p.delete_unregistered.is_empty(),
        "the node exists"
    );
    assert_eq!(
        p.scale_up[0].node_group.as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/b"
    );
}

#[test]
fn a_groups_startup_time_applies_to_its_own_nodes_only() {
    // Upstream's clusterapi provider reads `maxnodestartuptime` per group (`GetOptions`),
    // and `updateReadinessStats` uses it to tell not-started nodes from unready ones.
    let slow = machineset("slow", 0, 10, 1).annotation(
        "machine.openshift.io/autoscaling-options-maxnodestartuptime",
        "1h",
    );
    let mut items = vec![slow.json(), machineset("plain", 0, 10, 1).json()];
    let booting = |name: &str| node(name).not_ready().created(&ts(-30));
    items.extend(group_node("gpu-0", "slow", booting("gpu-0")));
    items.extend(group_node("cpu-0", "plain", booting("cpu-0")));
    let p = pass(&snapshot(items), &mut EngineState::default(), 0);
    let c = &p.health.cluster;
    // 30 minutes in: within the slow group's hour, past the cluster's 15 minutes.
    assert_eq!((c.not_started, c.unready), (1, 1));
    let group = |name: &str| {
        p.health
            .node_groups
            .iter()
            .find(|g| g.id.to_string().contains(name))
            .unwrap()
    };
    assert_eq!(group("slow").not_started, 1);
    assert_eq!(group("plain").unready, 1);
}
