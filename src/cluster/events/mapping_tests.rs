use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;
use crate::cluster::error::Category;
use crate::cluster::events::{Admission, EventFilter, FilterSettings};
use crate::engine::fixtures::{machine, machineset, node, pod, snapshot};
use crate::engine::policy::{CapacityKey, FleetPolicy, INSTANCE_TYPE_LABEL, SharedFailure};
use crate::engine::reason::Reason;
use crate::engine::{EngineState, Settings, run_once_with};
use crate::model::ObjectKey;

const NS: &str = "openshift-machine-api";

fn at() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
}

fn with_uid(mut v: Value, uid: &str) -> Value {
    v["metadata"]["uid"] = json!(uid);
    v
}

/// A ready m5.2xlarge node of machine set `set` (in zone us-east-1`set`), with a uid.
fn group_node(name: &str, set: &str) -> Vec<Value> {
    vec![
        with_uid(
            node(name)
                .label("pool", set)
                .label(INSTANCE_TYPE_LABEL, "m5.2xlarge")
                .zone(&format!("us-east-1{set}"))
                .provider_id(&format!("test:///{name}"))
                .json(),
            &format!("uid-{name}"),
        ),
        machine(&format!("{name}-machine"), set, Some(name)),
    ]
}

/// Groups `a` (2 full nodes, max 5) and `b` (1 empty node, max 1); pending pods `web`
/// (fits a new node of `a`) and `huge` (fits nothing).
fn cluster() -> (ClusterSnapshot, Plan) {
    cluster_with(&FleetPolicy::none(), at())
}

fn cluster_with(policy: &FleetPolicy, now: Timestamp) -> (ClusterSnapshot, Plan) {
    let mut items = vec![
        machineset("a", 1, 5, 2).json(),
        machineset("b", 0, 1, 1).json(),
    ];
    items.extend(group_node("a-1", "a"));
    items.extend(group_node("a-2", "a"));
    items.extend(group_node("b-1", "b"));
    items.push(pod("busy-1").cpu("3").on("a-1").json());
    items.push(pod("busy-2").cpu("3").on("a-2").json());
    let web = pod("web").cpu("3").node_selector("pool", "a");
    items.push(with_uid(web.unschedulable().json(), "uid-web"));
    items.push(with_uid(
        pod("huge").cpu("64").unschedulable().json(),
        "uid-huge",
    ));
    let s = snapshot(items);
    let mut state = EngineState::default();
    let plan = run_once_with(&s, &mut state, &Settings::default(), policy, now);
    (s, plan)
}

fn status_ref() -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: NS.into(),
        name: "cluster-autoscaler-status".into(),
        uid: Some("uid-cm".into()),
    }
}

fn group(name: &str) -> NodeGroupId {
    NodeGroupId::new(
        crate::model::MachineApiGroup::OpenShift,
        crate::model::ScalableKind::MachineSet,
        &ObjectKey::new(NS, name),
    )
}

fn reasons(events: &[EventSpec]) -> Vec<(&str, &str, &str)> {
    events
        .iter()
        .map(|e| (&*e.object.kind, &*e.object.name, e.reason))
        .collect()
}

fn scale_up_entry(plan: &Plan) -> Action {
    let a = &plan.scale_up[0];
    Action::ScaleUp {
        group: a.node_group.clone(),
        from: a.from,
        to: a.to,
    }
}

#[test]
fn a_scale_up_done_is_told_on_the_status_and_on_its_pods() {
    let (s, plan) = cluster();
    assert_eq!(plan.scale_up.len(), 1, "{:#?}", plan.pending_pods);
    let entries = [Entry::done(scale_up_entry(&plan), "replicas 2 -> 3")];
    let events = events_for(&plan, &entries, &s, &status_ref());
    let a = group("a");
    assert_eq!(
        reasons(&events),
        [
            ("ConfigMap", "cluster-autoscaler-status", "ScaledUpGroup"),
            ("ConfigMap", "cluster-autoscaler-status", "ScaledUpGroup"),
            ("Pod", "web", "TriggeredScaleUp"),
        ]
    );
    assert_eq!(
        events[0].message,
        format!("Scale-up: setting group {a} size to 3 instead of 2 (max: 5)")
    );
    assert_eq!(
        events[1].message,
        format!("Scale-up: group {a} size set to 3 instead of 2 (max: 5)")
    );
    let pod = &events[2];
    assert_eq!(
        pod.message,
        format!("pod triggered scale-up: [{{{a} 2->3 (max: 5)}}]")
    );
    assert_eq!(pod.object.uid.as_deref(), Some("uid-web"));
    assert_eq!(&*pod.object.namespace, "default");
    assert_eq!(events[0].object.uid.as_deref(), Some("uid-cm"));
    // A scale-up was tried: the pod nothing can be done for waits for a quieter pass.
    assert!(!events.iter().any(|e| e.reason == "NotTriggerScaleUp"));
}

#[test]
fn a_failed_scale_up_is_a_warning_and_triggers_no_pod() {
    let (s, plan) = cluster();
    let entries = [Entry::failed(
        scale_up_entry(&plan),
        "patch replicas: 409",
        Category::Conflict,
    )];
    let events = events_for(&plan, &entries, &s, &status_ref());
    assert_eq!(
        reasons(&events),
        [
            ("ConfigMap", "cluster-autoscaler-status", "ScaledUpGroup"),
            (
                "ConfigMap",
                "cluster-autoscaler-status",
                "FailedToScaleUpGroup"
            ),
        ]
    );
    assert_eq!(events[1].event_type, EventType::Warning);
    assert!(events[1].message.ends_with(": patch replicas: 409"));
}

#[test]
fn a_skipped_scale_up_makes_no_event_and_pods_learn_why_nothing_happened() {
    let (s, plan) = cluster();
    let entries = [Entry::skipped(scale_up_entry(&plan), "dry run")];
    let events = events_for(&plan, &entries, &s, &status_ref());
    assert_eq!(reasons(&events), [("Pod", "huge", "NotTriggerScaleUp")]);
    let e = &events[0];
    assert_eq!(e.object.uid.as_deref(), Some("uid-huge"));
    assert_eq!(e.event_type, EventType::Normal);
    // Neither group's nodes have the cpu: counted across groups, as upstream does.
    assert_eq!(e.message, "pod didn't trigger scale-up: 2 Insufficient cpu");
}

#[test]
fn scale_down_steps_are_told_on_the_status_the_node_and_evicted_pods() {
    let (s, plan) = cluster();
    let a = group("a");
    let node: Arc<str> = "a-1".into();
    let busy = s.pods.iter().find(|p| &*p.id.name == "busy-1").unwrap();
    let entries = [
        Entry::done(
            Action::MarkNode {
                group: a.clone(),
                node: node.clone(),
                empty: false,
            },
            "tainted",
        ),
        Entry::failed(
            Action::RemoveNode {
                group: a.clone(),
                node: node.clone(),
                empty: false,
                unready: false,
                evicted: vec![busy.id.clone()],
                not_evicted: Vec::new(),
            },
            "eviction refused",
            Category::TooManyRequests,
        ),
        Entry::done(
            Action::RemoveNode {
                group: group("b"),
                node: "b-1".into(),
                empty: true,
                unready: false,
                evicted: Vec::new(),
                not_evicted: Vec::new(),
            },
            "machine deleted",
        ),
    ];
    let events = events_for(&plan, &entries, &s, &status_ref());
    assert_eq!(
        reasons(&events),
        [
            ("ConfigMap", "cluster-autoscaler-status", "ScaleDown"),
            ("ConfigMap", "cluster-autoscaler-status", "ScaleDownEmpty"),
            ("Node", "a-1", "ScaleDown"),
            ("Node", "a-1", "ScaleDownFailed"),
            ("Node", "b-1", "ScaleDown"),
            ("Pod", "busy-1", "ScaleDown"),
            // No scale-up was tried: the pod nothing can be done for hears why.
            ("Pod", "huge", "NotTriggerScaleUp"),
        ]
    );
    assert!(
        events[0]
            .message
            .starts_with("Scale-down: removing node a-1, utilization: "),
        "{}",
        events[0].message
    );
    assert_eq!(events[1].message, "Scale-down: empty node b-1 removed");
    assert_eq!(
        events[2].message,
        "marked the node as toBeDeleted/unschedulable"
    );
    assert_eq!(events[2].object.uid.as_deref(), Some("uid-a-1"));
    assert_eq!(events[2].object.event_namespace(), "default");
    assert_eq!(
        events[3].message,
        "failed to drain and delete node: eviction refused"
    );
    assert_eq!(events[4].message, "nodes removed by cluster autoscaler");
    assert_eq!(events[5].message, "deleting pod for node scale down");
}

#[test]
fn observations_of_the_engine_are_told_whatever_was_written() {
    let (s, mut plan) = cluster();
    plan.health.cluster.healthy = false;
    plan.health.cluster.reason = Some("5 of 8 nodes are unready".into());
    plan.timed_out.push(plan::TimedOut {
        node_group: group("a"),
        nodes: 2,
        since: "2026-01-01T00:00:00Z".parse().unwrap(),
        within: "15m".into(),
    });
    let events = events_for(&plan, &[], &s, &status_ref());
    let cm: Vec<_> = events
        .iter()
        .filter(|e| &*e.object.kind == "ConfigMap")
        .map(|e| (e.reason, e.message.as_str(), e.event_type))
        .collect();
    assert_eq!(
        cm,
        [
            (
                "ClusterUnhealthy",
                "Cluster is unhealthy: 5 of 8 nodes are unready",
                EventType::Warning
            ),
            (
                "ScaleUpTimedOut",
                "Nodes added to group MachineSet.machine.openshift.io/openshift-machine-api/a failed to register: 2 node(s) asked for since 2026-01-01T00:00:00Z did not register within 15m",
                EventType::Warning
            ),
        ]
    );
}

#[test]
fn machine_deletions_are_told_on_the_status() {
    let (s, plan) = cluster();
    let m = ObjectKey::new(NS, "a-x");
    let entries = [
        Entry::done(
            Action::DeleteMachine {
                group: group("a"),
                machine: m.clone(),
                why: MachineDeletionKind::Unregistered,
                lower_replicas: true,
            },
            "marked",
        ),
        Entry::failed(
            Action::DeleteMachine {
                group: group("a"),
                machine: m,
                why: MachineDeletionKind::Unregistered,
                lower_replicas: true,
            },
            "forbidden",
            Category::Forbidden,
        ),
    ];
    let events = events_for(&plan, &entries, &s, &status_ref());
    let got: Vec<_> = events
        .iter()
        .take(2)
        .map(|e| (e.reason, e.event_type))
        .collect();
    assert_eq!(
        got,
        [
            ("DeleteUnregistered", EventType::Normal),
            ("DeleteUnregisteredFailed", EventType::Warning)
        ]
    );
    assert!(events[1].message.ends_with(": forbidden"));
}

#[test]
fn reasons_read_like_upstreams() {
    let g = group("a");
    let r = |code, message: &str| Reason::for_group(&g, code, message);
    let cases = [
        (
            vec![
                r(
                    ReasonCode::InsufficientResources,
                    "memory requested 8Gi, only 1Gi free",
                ),
                r(
                    ReasonCode::UntoleratedTaint,
                    "untolerated taint gpu=true:NoSchedule",
                ),
                r(ReasonCode::NodeGroupBackedOff, "in backoff until ..."),
            ],
            Some(
                "1 Insufficient memory, 1 in backoff after failed scale-up, 1 node(s) had untolerated taint gpu=true:NoSchedule",
            ),
        ),
        (
            vec![r(ReasonCode::MaxNodesTotalReached, "maxNodesTotal 10")],
            Some("max total nodes in cluster reached"),
        ),
        (
            vec![Reason::new(ReasonCode::PodTooNew, "created at ...")],
            None,
        ),
        (
            vec![Reason::new(
                ReasonCode::ClusterUnhealthy,
                "4 of 6 nodes are unready",
            )],
            Some("4 of 6 nodes are unready"),
        ),
    ];
    for (reasons, want) in cases {
        assert_eq!(not_triggered(&reasons).as_deref(), want);
    }
}

/// Cluster `east` found no m5.2xlarge in us-east-1a two minutes before `at()`.
fn east_failed() -> FleetPolicy {
    let t = at();
    FleetPolicy {
        shared_failures: vec![SharedFailure {
            cluster: "east".into(),
            node_group: NodeGroupId::parse(
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
            scope: Default::default(),
            reason: "InsufficientInstanceCapacity: no m5.2xlarge here".into(),
            at: t - jiff::SignedDuration::from_mins(2),
            until: t + jiff::SignedDuration::from_mins(3),
            trace: None,
        }],
        ..FleetPolicy::none()
    }
}

fn fleet_backoff_events(events: &[EventSpec]) -> Vec<&EventSpec> {
    events
        .iter()
        .filter(|e| e.reason == "FleetBackoff")
        .collect()
}

#[test]
fn a_fleet_backoff_is_a_warning_on_the_status_and_pods_hear_of_it() {
    let policy = east_failed();
    let (s, plan) = cluster_with(&policy, at());
    assert!(plan.scale_up.is_empty(), "{:#?}", plan.scale_up);
    let events = events_for(&plan, &[], &s, &status_ref());
    let fleet = fleet_backoff_events(&events);
    assert_eq!(fleet.len(), 1, "{events:#?}");
    assert_eq!(fleet[0].event_type, EventType::Warning);
    assert_eq!(fleet[0].object, status_ref());
    assert_eq!(
        fleet[0].message,
        format!(
            "Node group {} backed off: m5.2xlarge in us-east-1a failed in cluster east at \
             2026-11-22T09:58:00Z (machine openshift-machine-api/workers-a-x7k2p): \
             InsufficientInstanceCapacity: no m5.2xlarge here; until 2026-11-22T10:03:00Z",
            group("a")
        )
    );
    // No scale-up was tried: the pods hear why. `web` would have had a node of `a`, backed
    // off by the fleet; `huge` fits no node of `a` anyway, which it is told (as with a
    // group's own backoff: what could never work comes first).
    let pods: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| &*e.object.kind == "Pod")
        .map(|e| (&*e.object.name, e.message.as_str()))
        .collect();
    assert_eq!(
        pods,
        [
            ("huge", "pod didn't trigger scale-up: 2 Insufficient cpu"),
            (
                "web",
                "pod didn't trigger scale-up: 1 in backoff after failed scale-up in another cluster, 1 node(s) didn't match Pod's node affinity/selector"
            ),
        ]
    );
    // Between passes (a removal ending), only what was done is told.
    assert!(fleet_backoff_events(&events_for_entries(&plan, &[], &s, &status_ref())).is_empty());
}

#[test]
fn a_fleet_backoff_is_one_event_across_passes() {
    let policy = east_failed();
    let (s, first) = cluster_with(&policy, at());
    let (_, later) = cluster_with(&policy, at() + jiff::SignedDuration::from_secs(30));
    let first = events_for(&first, &[], &s, &status_ref());
    let later = events_for(&later, &[], &s, &status_ref());
    assert_eq!(fleet_backoff_events(&first), fleet_backoff_events(&later));
    let mut filter = EventFilter::new(FilterSettings::default(), 0);
    let t0 = tokio::time::Instant::now();
    let event = fleet_backoff_events(&first)[0];
    assert!(matches!(filter.admit(event, t0), Admission::New { .. }));
    let again = fleet_backoff_events(&later)[0];
    let t1 = t0 + std::time::Duration::from_secs(30);
    assert_eq!(filter.admit(again, t1), Admission::Duplicate);
    // Once the failure's backoff is over, nothing more is said.
    let (s, over) = cluster_with(&policy, at() + jiff::SignedDuration::from_mins(3));
    assert!(fleet_backoff_events(&events_for(&over, &[], &s, &status_ref())).is_empty());
}

/// A request's conditions written are one event each on the request; a write that failed
/// or was skipped makes none.
#[test]
fn request_conditions_written_are_events_on_the_request() {
    use crate::engine::provisioning::conditions::ConditionWrite;
    use crate::model::provisioning::ConditionStatus;
    let (s, plan) = cluster();
    let action = Action::WriteRequestStatus {
        request: ObjectKey::new("batch", "train"),
        api_version: "autoscaling.x-k8s.io/v1".into(),
        conditions: vec![ConditionWrite {
            type_: "Provisioned",
            status: ConditionStatus::True,
            reason: "CapacityIsProvisioned",
            message: "Capacity is found in the cluster".into(),
            observed_generation: 1,
        }],
    };
    let entries = vec![
        Entry::done(action.clone(), "written"),
        Entry::failed(action.clone(), "boom", Category::Other),
        Entry::skipped(action, "dry run"),
    ];
    let events = events_for(&plan, &entries, &s, &status_ref());
    let on_requests: Vec<_> = events
        .iter()
        .filter(|e| &*e.object.kind == "ProvisioningRequest")
        .collect();
    assert_eq!(on_requests.len(), 1, "{events:?}");
    assert_eq!(on_requests[0].reason, "CapacityIsProvisioned");
    assert_eq!(on_requests[0].event_type, EventType::Normal);
    assert_eq!(&*on_requests[0].object.name, "train");
}
