use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::*;
use crate::engine::fixtures::{group_node, machineset, node, pod, snapshot};
use crate::engine::policy::{
    CapacityKey, FailureScope, FleetPolicy, INSTANCE_TYPE_LABEL, SharedFailure,
};
use crate::engine::{EngineState, Settings, run_once_with};

fn at(secs: i64) -> Timestamp {
    "2026-11-22T10:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(secs)
}

/// Two groups: `a` (2 ready nodes, a pending pod that needs a third) and `b` (idle, one
/// empty m5.2xlarge node in us-east-1a that is unneeded).
fn plan_at(secs: i64, pending: bool) -> Plan {
    plan_with(secs, pending, &FleetPolicy::none())
}

fn plan_with(secs: i64, pending: bool, policy: &FleetPolicy) -> Plan {
    let mut items = vec![
        machineset("a", 1, 5, 2).json(),
        machineset("b", 0, 3, 1).json(),
    ];
    items.extend(group_node("a-1", "a", node("a-1").label("pool", "a")));
    items.extend(group_node("a-2", "a", node("a-2").label("pool", "a")));
    let b_1 = node("b-1")
        .label(INSTANCE_TYPE_LABEL, "m5.2xlarge")
        .zone("us-east-1a");
    items.extend(group_node("b-1", "b", b_1));
    items.push(pod("busy-1").cpu("3").on("a-1").json());
    items.push(pod("busy-2").cpu("3").on("a-2").json());
    if pending {
        let web = pod("web").cpu("3").node_selector("pool", "a");
        items.push(web.unschedulable().json());
    }
    let mut state = EngineState::default();
    let settings = Settings::default();
    run_once_with(&snapshot(items), &mut state, &settings, policy, at(secs))
}

/// Cluster `east` found no m5.2xlarge in us-east-1a two minutes ago.
fn east_failed(reason: &str) -> FleetPolicy {
    FleetPolicy {
        shared_failures: vec![SharedFailure {
            cluster: "east".into(),
            node_group: crate::engine::nodegroups::NodeGroupId::parse(
                "MachineSet.machine.openshift.io/openshift-machine-api/workers-a",
            )
            .unwrap(),
            machine: Some("openshift-machine-api/workers-a-x7k2p".into()),
            key: CapacityKey {
                instance_type: "m5.2xlarge".into(),
                zone: Some("us-east-1a".into()),
                region: Some("us-east-1".into()),
                platform: Some("aws".into()),
            },
            scope: FailureScope::Zone,
            reason: reason.into(),
            at: at(-120),
            until: at(180),
            trace: None,
        }],
        ..FleetPolicy::none()
    }
}

fn yaml_value(s: &AutoscalerStatus) -> Value {
    serde_saphyr::from_str(&s.to_yaml().unwrap()).unwrap()
}

#[test]
fn the_document_has_upstreams_layout() {
    let plan = plan_at(0, true);
    let mut memory = StatusMemory::default();
    let status = render(&plan, &mut memory, RenderOptions::default(), at(0));
    let yaml = status.to_yaml().unwrap();
    let keys: Vec<&str> = yaml
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('-'))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["time", "autoscalerStatus", "clusterWide", "nodeGroups"]
    );
    let v = yaml_value(&status);
    assert_eq!(v["time"], "2026-11-22 10:00:00 +0000 UTC");
    assert_eq!(v["autoscalerStatus"], "Running");
    let health = &v["clusterWide"]["health"];
    assert_eq!(health["status"], "Healthy");
    assert_eq!(health["nodeCounts"]["registered"]["total"], 3);
    assert_eq!(health["nodeCounts"]["registered"]["ready"], 3);
    assert_eq!(health["nodeCounts"]["registered"]["unready"]["total"], 0);
    assert_eq!(
        health["nodeCounts"]["registered"]["unready"]["resourceUnready"],
        0
    );
    assert!(
        health["nodeCounts"]["registered"]
            .get("beingDeleted")
            .is_none()
    );
    assert_eq!(health["lastProbeTime"], "2026-11-22T10:00:00Z");
    assert_eq!(health["lastTransitionTime"], "2026-11-22T10:00:00Z");
    assert_eq!(v["clusterWide"]["scaleUp"]["status"], "InProgress");
    let groups = v["nodeGroups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let a = &groups[0];
    assert_eq!(
        a["name"],
        "MachineSet.machine.openshift.io/openshift-machine-api/a"
    );
    assert_eq!(a["health"]["cloudProviderTarget"], 2);
    assert_eq!(a["health"]["minSize"], 1);
    assert_eq!(a["health"]["maxSize"], 5);
    assert_eq!(a["health"]["nodeCounts"]["registered"]["ready"], 2);
    assert_eq!(a["scaleUp"]["status"], "InProgress");
    assert!(a["scaleUp"].get("backoffInfo").is_none());
    assert_eq!(a["scaleDown"]["status"], "NoCandidates");
    assert!(a["scaleDown"].get("candidates").is_none());
    assert_eq!(groups[1]["scaleUp"]["status"], "NoActivity");
}

#[test]
fn transition_times_move_only_when_a_status_changes() {
    let mut memory = StatusMemory::default();
    let first = render(
        &plan_at(0, true),
        &mut memory,
        RenderOptions::default(),
        at(0),
    );
    let again = render(
        &plan_at(10, true),
        &mut memory,
        RenderOptions::default(),
        at(10),
    );
    let w = again.cluster_wide.as_ref().unwrap();
    assert_eq!(w.scale_up.status, ConditionStatus::InProgress);
    assert_eq!(w.scale_up.last_transition_time, at(0));
    assert_eq!(w.scale_up.last_probe_time, at(10));
    assert_eq!(first.content(), again.content());
    // The pod is gone: no scale-up this pass, the condition turns and its time with it.
    let quiet = render(
        &plan_at(20, false),
        &mut memory,
        RenderOptions::default(),
        at(20),
    );
    let w = quiet.cluster_wide.as_ref().unwrap();
    assert_eq!(w.scale_up.status, ConditionStatus::NoActivity);
    assert_eq!(w.scale_up.last_transition_time, at(20));
    assert_eq!(w.health.last_transition_time, at(0));
    assert_ne!(quiet.content(), again.content());
}

#[test]
fn a_backoff_is_reported_with_its_code_and_a_bounded_message() {
    let mut plan = plan_at(0, false);
    let g = &mut plan.health.node_groups[1];
    g.backoff_until = Some(at(300));
    // The code comes from the kind, whatever the wording.
    g.backoff_reason = Some(format!("nodes never came: {}", "x".repeat(600)));
    g.backoff_kind = Some(crate::engine::reason::FailureKind::Timeout);
    let status = render(
        &plan,
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(0),
    );
    let up = &status.node_groups[1].scale_up;
    assert_eq!(up.status, ConditionStatus::Backoff);
    let info = up.backoff_info.as_ref().unwrap();
    assert_eq!(info.error_code, "timeout");
    assert_eq!(info.error_message.chars().count(), MAX_ERROR_MESSAGE);
    assert!(info.error_message.ends_with("<truncated>"));
    let v = yaml_value(&status);
    assert_eq!(
        v["nodeGroups"][1]["scaleUp"]["backoffInfo"]["errorCode"],
        "timeout"
    );
}

#[test]
fn a_group_backed_off_for_another_clusters_failure_says_whose() {
    let policy = east_failed("InsufficientInstanceCapacity: no m5.2xlarge here");
    let plan = plan_with(0, true, &policy);
    let failure = &policy.shared_failures[0];
    assert_eq!(
        plan.health.node_groups[1].fleet_backoff.as_ref(),
        Some(failure),
        "the engine backs b off: {:#?}",
        plan.health.node_groups
    );
    let status = render(
        &plan,
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(0),
    );
    // `a` scales up (its nodes are not of that type), `b` is backed off.
    assert_eq!(
        status.node_groups[0].scale_up.status,
        ConditionStatus::InProgress
    );
    let up = &status.node_groups[1].scale_up;
    assert_eq!(up.status, ConditionStatus::Backoff);
    let info = up.backoff_info.as_ref().unwrap();
    assert_eq!(info.error_code, "fleetBackoff");
    assert_eq!(info.error_message, failure.explain());
    assert_eq!(
        info.error_message,
        "m5.2xlarge in us-east-1a failed in cluster east at 2026-11-22T09:58:00Z \
         (machine openshift-machine-api/workers-a-x7k2p): InsufficientInstanceCapacity: no \
         m5.2xlarge here; backed off here too until 2026-11-22T10:03:00Z"
    );
    let yaml = status.to_yaml().unwrap();
    assert!(yaml.contains("errorCode: fleetBackoff"), "{yaml}");

    // A long error is cut as upstream cuts its own.
    let long = east_failed(&format!(
        "InsufficientInstanceCapacity: {}",
        "x".repeat(600)
    ));
    let status = render(
        &plan_with(0, true, &long),
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(0),
    );
    let info = status.node_groups[1].scale_up.backoff_info.clone().unwrap();
    assert_eq!(info.error_message.chars().count(), MAX_ERROR_MESSAGE);
    assert!(info.error_message.ends_with("<truncated>"));
}

#[test]
fn a_groups_own_backoff_wins_over_the_fleets() {
    let policy = east_failed("InsufficientInstanceCapacity");
    let mut plan = plan_with(0, true, &policy);
    let b = &mut plan.health.node_groups[1];
    b.backoff_until = Some(at(300));
    b.backoff_reason = Some("machine b-x failed: InsufficientInstanceCapacity".into());
    b.backoff_kind = Some(crate::engine::reason::FailureKind::MachineFailed);
    let status = render(
        &plan,
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(0),
    );
    let info = status.node_groups[1].scale_up.backoff_info.clone().unwrap();
    assert_eq!(info.error_code, "machineFailed");
    assert_eq!(
        info.error_message,
        "machine b-x failed: InsufficientInstanceCapacity"
    );
    // Over: the fleet's backoff ends with the failure's, and the group is quiet again.
    let status = render(
        &plan_with(200, false, &policy),
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(200),
    );
    assert_eq!(
        status.node_groups[1].scale_up.status,
        ConditionStatus::NoActivity
    );
}

#[test]
fn an_unhealthy_group_and_scale_down_candidates() {
    let mut plan = plan_at(0, false);
    plan.health.node_groups[0].healthy = false;
    plan.health.node_groups[0].unready = 2;
    plan.health.node_groups[0].deleting = 1;
    let b = plan.health.node_groups[1].id.clone();
    plan.unneeded.retain(|u| u.node_group == b);
    assert_eq!(plan.unneeded.len(), 1, "b-1 is empty: {:?}", plan.unneeded);
    let status = render(
        &plan,
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(0),
    );
    let a = &status.node_groups[0];
    assert_eq!(a.health.status, ConditionStatus::Unhealthy);
    assert_eq!(a.scale_up.status, ConditionStatus::Unhealthy);
    assert_eq!(a.health.node_counts.registered.being_deleted, 1);
    assert_eq!(a.health.node_counts.registered.total, 5);
    let w = status.cluster_wide.as_ref().unwrap();
    assert_eq!(w.scale_down.status, ConditionStatus::CandidatesPresent);
    assert_eq!(w.scale_down.candidates, 1);
    assert_eq!(status.node_groups[1].scale_down.candidates, 1);
    let v = yaml_value(&status);
    assert_eq!(
        v["nodeGroups"][0]["health"]["nodeCounts"]["registered"]["beingDeleted"],
        1
    );
    assert_eq!(v["clusterWide"]["scaleDown"]["candidates"], 1);
}

#[test]
fn messages_for_an_empty_cluster_and_dry_run() {
    let mut plan = plan_at(0, false);
    plan.health.cluster.ready = 0;
    plan.health.cluster.unready = 3;
    let dry = RenderOptions { dry_run: true };
    let status = render(&plan, &mut StatusMemory::default(), dry, at(0));
    assert_eq!(
        status.message.as_deref(),
        Some(format!("Cluster has no ready nodes. {DRY_RUN_NOTE}").as_str())
    );
    plan.health.cluster.unready = 0;
    let status = render(
        &plan,
        &mut StatusMemory::default(),
        RenderOptions::default(),
        at(0),
    );
    assert_eq!(status.message.as_deref(), Some("Cluster has no nodes."));
}

#[test]
fn initializing_is_time_and_phase_only() {
    let yaml = initializing(RenderOptions::default(), at(0))
        .to_yaml()
        .unwrap();
    let v: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"time": "2026-11-22 10:00:00 +0000 UTC", "autoscalerStatus": "Initializing"})
    );
}

#[test]
fn go_time_trims_the_fraction() {
    let t: Timestamp = "2020-11-25T08:19:44.090873082Z".parse().unwrap();
    assert_eq!(go_time(t), "2020-11-25 08:19:44.090873082 +0000 UTC");
    let t: Timestamp = "2020-11-25T08:19:44.5Z".parse().unwrap();
    assert_eq!(go_time(t), "2020-11-25 08:19:44.5 +0000 UTC");
}

#[test]
fn groups_that_are_gone_are_forgotten() {
    let mut memory = StatusMemory::default();
    render(
        &plan_at(0, true),
        &mut memory,
        RenderOptions::default(),
        at(0),
    );
    let groups = memory.since.keys().filter(|k| k.contains('/')).count();
    assert_eq!(groups, 6);
    let mut plan = plan_at(10, true);
    plan.health.node_groups.truncate(1);
    render(&plan, &mut memory, RenderOptions::default(), at(10));
    let groups = memory.since.keys().filter(|k| k.contains('/')).count();
    assert_eq!(groups, 3);
}

/// The text itself, as upstream's yaml.v2 writes it: declaration order, RFC 3339 probe
/// times quoted, `omitempty` fields left out.
#[test]
fn the_yaml_reads_like_upstreams() {
    let mut plan = plan_at(0, true);
    plan.health.node_groups[1].backoff_until = Some(at(300));
    plan.health.node_groups[1].backoff_reason = Some("machine x failed: boom".into());
    plan.health.node_groups[1].backoff_kind =
        Some(crate::engine::reason::FailureKind::MachineFailed);
    let dry = RenderOptions { dry_run: true };
    let yaml = render(&plan, &mut StatusMemory::default(), dry, at(0))
        .to_yaml()
        .unwrap();
    let head = r#"time: 2026-11-22 10:00:00 +0000 UTC
autoscalerStatus: Running
message: "Dry run: fleetscaler plans and reports but does not change this cluster."
clusterWide:
  health:
    status: Healthy
    nodeCounts:
      registered:
        total: 3
        ready: 3
        notStarted: 0
        unready:
          total: 0
          resourceUnready: 0
      longUnregistered: 0
      unregistered: 0
    lastProbeTime: "2026-11-22T10:00:00Z"
    lastTransitionTime: "2026-11-22T10:00:00Z"
  scaleUp:
    status: InProgress
    lastProbeTime: "2026-11-22T10:00:00Z"
    lastTransitionTime: "2026-11-22T10:00:00Z"
  scaleDown:
    status: CandidatesPresent
    candidates: 1
    lastProbeTime: "2026-11-22T10:00:00Z"
    lastTransitionTime: "2026-11-22T10:00:00Z"
nodeGroups:
- name: MachineSet.machine.openshift.io/openshift-machine-api/a
  health:
    status: Healthy
"#;
    assert!(yaml.starts_with(head), "{yaml}");
    let backoff = r#"  scaleUp:
    status: Backoff
    backoffInfo:
      errorCode: machineFailed
      errorMessage: "machine x failed: boom"
    lastProbeTime: "2026-11-22T10:00:00Z"
"#;
    assert!(yaml.contains(backoff), "{yaml}");
}
