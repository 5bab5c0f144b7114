use jiff::Timestamp;

use crate::fixtures::{group_node, machine, machineset, node, pod, snapshot};
use crate::plan::{Outcome, PodExplanation};
use crate::reason::ReasonCode;
use crate::settings::{ExpanderKind, Range};
use crate::{EngineState, Plan, Settings, run_once};
use fleetscaler_model::ClusterSnapshot;

fn plan(s: &ClusterSnapshot, settings: &Settings) -> Plan {
    run_once(
        s,
        &mut EngineState::default(),
        settings,
        Timestamp::UNIX_EPOCH,
    )
}

fn explanation<'a>(p: &'a Plan, name: &str) -> &'a PodExplanation {
    p.pending_pods
        .iter()
        .find(|e| &*e.pod.name == name)
        .unwrap()
}

fn codes(e: &PodExplanation) -> Vec<ReasonCode> {
    e.reasons.iter().map(|r| r.code).collect()
}

/// One full 4-core worker in group `workers` (max 5) and `n` pending 1-core pods.
fn full_cluster(n: usize) -> Vec<serde_json::Value> {
    let mut items = vec![machineset("workers", 1, 5, 1).json()];
    items.extend(group_node("w1", "workers", node("w1").cpu("4")));
    items.push(pod("filler").cpu("4").on("w1").json());
    items.extend((0..n).map(|i| pod(&format!("web-{i}")).cpu("1").unschedulable().json()));
    items
}

#[test]
fn pending_pods_trigger_a_scale_up_sized_by_binpacking() {
    let p = plan(&snapshot(full_cluster(6)), &Settings::default());
    assert_eq!(p.scale_up.len(), 1);
    let a = &p.scale_up[0];
    assert_eq!(
        (a.node_group.as_str(), a.from, a.to),
        (
            "MachineSet.machine.openshift.io/openshift-machine-api/workers",
            1,
            3
        )
    );
    assert_eq!(a.pods.len(), 6);
    assert!(
        a.reason
            .starts_with("2 new node(s) for 6 pending pod(s): the only option"),
        "{}",
        a.reason
    );
    assert!(p.pending_pods.iter().all(|e| e.outcome == Outcome::ScaleUp));
    let g = &p.node_groups[0];
    assert_eq!((g.registered, g.ready, g.upcoming), (1, 1, 0));
}

#[test]
fn pods_below_the_priority_cutoff_cause_nothing() {
    let mut items = full_cluster(0);
    items.push(pod("batch").cpu("1").priority(-20).unschedulable().json());
    let p = plan(&snapshot(items), &Settings::default());
    assert!(p.scale_up.is_empty());
    let e = explanation(&p, "batch");
    assert_eq!(e.outcome, Outcome::BelowPriorityCutoff);
    assert!(
        e.reasons[0]
            .message
            .contains("priority -20 is below podPriorityThreshold -10")
    );
}

#[test]
fn pods_that_fit_upcoming_nodes_do_not_trigger_more() {
    let mut items = vec![machineset("workers", 1, 5, 2).json()];
    items.extend(group_node("w1", "workers", node("w1").cpu("4")));
    items.push(machine("w2-machine", "workers", None));
    items.push(pod("filler").cpu("4").on("w1").json());
    items.push(pod("web").cpu("2").unschedulable().json());
    let p = plan(&snapshot(items), &Settings::default());
    assert!(p.scale_up.is_empty());
    let e = explanation(&p, "web");
    assert_eq!(e.outcome, Outcome::FitsUpcoming);
    assert_eq!(
        e.node_group.as_ref().unwrap().as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/workers"
    );
    assert_eq!(p.node_groups[0].upcoming, 1);
}

#[test]
fn pods_that_fit_existing_nodes_need_no_new_node() {
    let mut items = full_cluster(0);
    items.extend(group_node("w2", "workers", node("w2").cpu("4")));
    items.push(pod("web").cpu("2").unschedulable().json());
    let p = plan(&snapshot(items), &Settings::default());
    assert!(p.scale_up.is_empty());
    let e = explanation(&p, "web");
    assert_eq!(
        (e.outcome, e.node.as_deref()),
        (Outcome::FitsExisting, Some("w2"))
    );
}

#[test]
fn pods_needing_different_groups_are_all_served_in_one_pass() {
    let mut items = full_cluster(2);
    items.push(
        machineset("gpu", 0, 4, 0)
            .capacity("8", "32Gi")
            .annotation("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "1")
            .annotation(
                "capacity.cluster-autoscaler.kubernetes.io/gpu-type",
                "nvidia.com/gpu",
            )
            .json(),
    );
    items.push(
        pod("trainer")
            .cpu("2")
            .request("nvidia.com/gpu", "1")
            .unschedulable()
            .json(),
    );
    let p = plan(&snapshot(items), &Settings::default());
    let mut groups: Vec<(&str, u64, u64)> = p
        .scale_up
        .iter()
        .map(|a| (a.node_group.as_str(), a.from, a.to))
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        vec![
            (
                "MachineSet.machine.openshift.io/openshift-machine-api/gpu",
                0,
                1
            ),
            (
                "MachineSet.machine.openshift.io/openshift-machine-api/workers",
                1,
                2
            )
        ]
    );
    assert_eq!(
        explanation(&p, "trainer")
            .node_group
            .as_ref()
            .unwrap()
            .as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/gpu"
    );
    // Each pod is in exactly one action.
    let total: usize = p.scale_up.iter().map(|a| a.pods.len()).sum();
    assert_eq!(total, 3);
}

#[test]
fn a_group_at_max_and_a_group_without_template_explain_themselves() {
    let mut items = vec![
        machineset("workers", 1, 1, 1).json(),
        machineset("empty", 0, 3, 0).json(),
    ];
    items.extend(group_node("w1", "workers", node("w1").cpu("4")));
    items.push(pod("filler").cpu("4").on("w1").json());
    items.push(pod("web").cpu("1").unschedulable().json());
    let p = plan(&snapshot(items), &Settings::default());
    assert!(p.scale_up.is_empty());
    let e = explanation(&p, "web");
    assert_eq!(e.outcome, Outcome::NoScaleUp);
    assert_eq!(
        codes(e),
        vec![
            ReasonCode::NoTemplate,
            ReasonCode::MaxSizeReached,
            ReasonCode::InsufficientResources
        ]
    );
    assert!(
        e.reasons[2]
            .message
            .starts_with("none of the 1 existing and upcoming nodes fits: 1 InsufficientResources")
    );
    let empty = p
        .node_groups
        .iter()
        .find(|g| g.id.as_str().ends_with("/empty"))
        .unwrap();
    assert!(
        empty
            .reason
            .as_ref()
            .unwrap()
            .contains("no ready node to copy")
    );
}

#[test]
fn predicate_failures_on_templates_are_per_group() {
    let mut items = full_cluster(0);
    items.push(
        pod("picky")
            .cpu("1")
            .node_selector("disk", "ssd")
            .unschedulable()
            .json(),
    );
    items.push(pod("huge").cpu("64").unschedulable().json());
    let p = plan(&snapshot(items), &Settings::default());
    let picky = explanation(&p, "picky");
    assert_eq!(picky.reasons[0].code, ReasonCode::NodeSelectorMismatch);
    assert_eq!(
        picky.reasons[0].node_group.as_ref().unwrap().as_str(),
        "MachineSet.machine.openshift.io/openshift-machine-api/workers"
    );
    assert_eq!(
        explanation(&p, "huge").reasons[0].code,
        ReasonCode::InsufficientResources
    );
}

/// Seed of issue 22: a node claiming 9.2e15 cores made every limit "reached" and blocked
/// every scale-up. It now counts as nothing, named in a warning; the cluster goes on; and the
/// skipped scale-up events upstream counts are counted for the groups a max starves.
#[test]
fn a_node_claiming_more_than_any_machine_counts_as_nothing_against_the_limits() {
    let settings = Settings {
        cores: Range {
            min: 0,
            max: Some(12),
        },
        ..Settings::default()
    };
    let mut items = full_cluster(2);
    // Cordoned: the scheduler, real or simulated, would otherwise place the pods there.
    let mut broken = node("broken").cpu("9200000000000000").json();
    broken["spec"]["unschedulable"] = serde_json::json!(true);
    items.push(broken);
    let p = plan(&snapshot(items), &settings);
    assert_eq!((p.scale_up[0].from, p.scale_up[0].to), (1, 2));
    assert_eq!(p.limits.cores.used, 8.0, "4 for w1, 4 for the new node");
    let warned: Vec<String> = p.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        warned
            .iter()
            .any(|w| w.starts_with("node broken: reports 9200000000000000 cores")),
        "{warned:?}"
    );
    assert_eq!(p.skipped_scale_events.up.cpu, 0);

    // With the max already taken, the group is starved: one skipped event, for cores.
    let tight = Settings {
        cores: Range {
            min: 0,
            max: Some(4),
        },
        ..Settings::default()
    };
    let p = plan(&snapshot(full_cluster(2)), &tight);
    assert!(p.scale_up.is_empty());
    assert_eq!(p.skipped_scale_events.up.cpu, 1);
    assert_eq!(p.skipped_scale_events.up.memory, 0);
}

/// A group scaled by hand above its max is named in a warning.
#[test]
fn replicas_above_the_max_are_warned_about() {
    let mut items = vec![machineset("workers", 1, 2, 3).json()];
    items.extend(group_node("w1", "workers", node("w1")));
    let p = plan(&snapshot(items), &Settings::default());
    let warned: Vec<String> = p.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("replicas 3 are above its max 2")),
        "{warned:?}"
    );
}

#[test]
fn cores_limit_caps_the_scale_up_and_names_the_limit() {
    let settings = Settings {
        cores: Range {
            min: 0,
            max: Some(12),
        },
        ..Settings::default()
    };
    // 4 cores used; 8-core room: two more 4-core nodes, not the three the pods want.
    let p = plan(&snapshot(full_cluster(12)), &settings);
    assert_eq!((p.scale_up[0].from, p.scale_up[0].to), (1, 3));
    let waiting: Vec<&PodExplanation> = p
        .pending_pods
        .iter()
        .filter(|e| e.outcome == Outcome::NoScaleUp)
        .collect();
    assert_eq!(waiting.len(), 4);
    assert_eq!(waiting[0].reasons[0].code, ReasonCode::ResourceLimitReached);
    assert_eq!(p.limits.cores.used, 12.0);
}

#[test]
fn max_nodes_total_counts_every_node() {
    let settings = Settings {
        max_nodes_total: Some(2),
        ..Settings::default()
    };
    let mut items = full_cluster(8);
    items.push(
        node("control-plane")
            .taint("node-role.kubernetes.io/master", "", "NoSchedule")
            .json(),
    );
    let p = plan(&snapshot(items), &settings);
    assert!(p.scale_up.is_empty());
    assert!(
        explanation(&p, "web-0")
            .reasons
            .iter()
            .any(|r| r.code == ReasonCode::MaxNodesTotalReached)
    );
}

#[test]
fn daemonset_and_unsimulated_features_are_named() {
    let mut items = full_cluster(0);
    items.push(
        pod("agent")
            .owner("DaemonSet", "agent")
            .unschedulable()
            .json(),
    );
    let mut pvc = pod("db").cpu("1").unschedulable().json();
    pvc["spec"]["volumes"] =
        serde_json::json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    items.push(pvc);
    let p = plan(&snapshot(items), &Settings::default());
    assert_eq!(
        codes(explanation(&p, "agent")),
        vec![ReasonCode::DaemonSetPod]
    );
    let db = explanation(&p, "db");
    assert_eq!(db.outcome, Outcome::ScaleUp);
    assert_eq!(codes(db), vec![ReasonCode::NotSimulated]);
    assert!(db.reasons[0].message.contains("PersistentVolumeClaims"));
}

fn zone_groups(sizes: [u64; 3], balance: bool) -> (ClusterSnapshot, Settings) {
    let mut items = Vec::new();
    for (z, size) in ["a", "b", "c"].iter().zip(sizes) {
        let ms = format!("workers-{z}");
        items.push(
            machineset(&ms, 0, 10, size)
                .node_label("topology.kubernetes.io/zone", z)
                .json(),
        );
        for i in 0..size {
            let name = format!("{z}{i}");
            items.extend(group_node(&name, &ms, node(&name).cpu("4").zone(z)));
            items.push(pod(&format!("fill-{name}")).cpu("4").on(&name).json());
        }
    }
    let settings = Settings {
        balance_similar_node_groups: balance,
        expanders: vec![ExpanderKind::MostPods],
        ..Settings::default()
    };
    (snapshot(items), settings)
}

#[test]
fn balancing_evens_out_similar_groups_seed_example() {
    // A=1, B=3, C=6 and pods for 4 new nodes: A gets 3, B gets 1.
    let (mut s, settings) = zone_groups([1, 3, 6], true);
    let extra = snapshot((0..4).map(|i| pod(&format!("web-{i}")).cpu("4").unschedulable().json()));
    s.pods.extend(extra.pods);
    let p = plan(&s, &settings);
    let mut ups: Vec<(String, u64, u64)> = p
        .scale_up
        .iter()
        .map(|a| (a.node_group.to_string(), a.from, a.to))
        .collect();
    ups.sort();
    assert_eq!(
        ups,
        vec![
            (
                "MachineSet.machine.openshift.io/openshift-machine-api/workers-a".to_string(),
                1,
                4
            ),
            (
                "MachineSet.machine.openshift.io/openshift-machine-api/workers-b".to_string(),
                3,
                4
            )
        ]
    );
    assert!(
        p.scale_up[0].reason.contains("balanced over"),
        "{}",
        p.scale_up[0].reason
    );
}

/// Upstream's `ComputeSimilarNodeGroups`: a similar group is balanced with only if it can
/// schedule every pod group the chosen group can, whether or not the chosen option places
/// them all ("similar node groups can schedule different/no pods"). Here the cap of one node
/// a pass leaves the zone-a pod out of zone a's option (two 2-CPU pods fill the node first),
/// yet zone b, which could not take it, is not balanced with: zone a gets the node.
#[test]
fn balancing_needs_every_pod_the_chosen_group_can_take() {
    let (mut s, mut settings) = zone_groups([2, 1, 1], true);
    settings.max_nodes_per_scaleup = 1;
    settings.expanders = vec![ExpanderKind::Priority];
    settings.priorities = Some([(10, vec![".*workers-a".to_string()])].into());
    let mut pending: Vec<_> = (0..2)
        .map(|i| pod(&format!("web-{i}")).cpu("2").unschedulable().json())
        .collect();
    pending.push(
        pod("only-a")
            .cpu("1")
            .node_selector("topology.kubernetes.io/zone", "a")
            .unschedulable()
            .json(),
    );
    s.pods.extend(snapshot(pending).pods);
    let p = plan(&s, &settings);
    let ups: Vec<(String, u64, u64)> = p
        .scale_up
        .iter()
        .map(|a| (a.node_group.to_string(), a.from, a.to))
        .collect();
    assert_eq!(
        ups,
        vec![(
            "MachineSet.machine.openshift.io/openshift-machine-api/workers-a".to_string(),
            2,
            3
        )],
        "not balanced onto workers-b (smaller, but it cannot take only-a)"
    );
    assert!(
        !p.scale_up[0].reason.contains("balanced over"),
        "{}",
        p.scale_up[0].reason
    );
}

#[test]
fn zone_spread_pods_are_served_by_each_zone_group() {
    let (mut s, settings) = zone_groups([1, 1, 1], false);
    let extra = snapshot((0..6).map(|i| {
        pod(&format!("web-{i}"))
            .cpu("2")
            .label("app", "web")
            .spread(1, "topology.kubernetes.io/zone", "web")
            .unschedulable()
            .json()
    }));
    s.pods.extend(extra.pods);
    let p = plan(&s, &settings);
    let mut ups: Vec<(String, u64)> = p
        .scale_up
        .iter()
        .map(|a| (a.node_group.to_string(), a.to - a.from))
        .collect();
    ups.sort();
    let per_zone: Vec<u64> = ups.iter().map(|(_, n)| *n).collect();
    assert_eq!(per_zone, vec![1, 1, 1], "{ups:?}");
    assert!(p.pending_pods.iter().all(|e| e.outcome == Outcome::ScaleUp));
}

#[test]
fn memory_and_extended_resources_and_namespaces_count() {
    let mut items = vec![machineset("workers", 0, 5, 1).json()];
    items.extend(group_node(
        "w1",
        "workers",
        node("w1")
            .cpu("4")
            .mem("8Gi")
            .resource("example.com/dongle", "1"),
    ));
    items.push(pod("big-mem").ns("shop").mem("12Gi").unschedulable().json());
    items.push(
        pod("dongle")
            .ns("shop")
            .request("example.com/dongle", "2")
            .unschedulable()
            .json(),
    );
    let p = plan(&snapshot(items), &Settings::default());
    let e = explanation(&p, "big-mem");
    assert_eq!(e.pod.to_string(), "shop/big-mem");
    assert!(
        e.reasons[0]
            .message
            .starts_with("memory requested 12Gi, only 8Gi free"),
        "{:?}",
        e.reasons
    );
    assert!(
        explanation(&p, "dongle").reasons[0]
            .message
            .starts_with("example.com/dongle requested 2, only 1 free")
    );
}

#[test]
fn an_unready_node_is_not_a_template() {
    let mut items = vec![machineset("workers", 0, 5, 1).json()];
    items.extend(group_node("w1", "workers", node("w1").not_ready()));
    items.push(pod("web").cpu("1").unschedulable().json());
    let p = plan(&snapshot(items), &Settings::default());
    assert_eq!(
        p.node_groups[0].template,
        crate::template::TemplateSource::None
    );
    assert_eq!(
        explanation(&p, "web").reasons[0].code,
        ReasonCode::NoTemplate
    );
}

#[test]
fn nodes_not_started_count_against_limits_even_when_their_group_is_backed_off() {
    let settings = Settings {
        cores: Range {
            min: 0,
            max: Some(16),
        },
        ..Settings::default()
    };
    let mut items = full_cluster(2);
    items.push(machineset("slow", 0, 5, 3).json());
    for n in ["slow-0", "slow-1"] {
        items.extend(group_node(
            n,
            "slow",
            node(n).cpu("4").not_ready().created("2026-11-22T09:59:00Z"),
        ));
    }
    items.push(crate::fixtures::failed_machine(
        "slow-2",
        "slow",
        "2026-11-22T09:59:00Z",
        "no capacity",
    ));
    let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
    let p = run_once(
        &snapshot(items),
        &mut EngineState::default(),
        &settings,
        now,
    );
    // 12 cores are real (1 ready + 2 not started); the max of 16 leaves room for one 4-core node.
    assert_eq!(p.limits.cores.used, 16.0);
    let added: u64 = p.scale_up.iter().map(|a| a.to - a.from).sum();
    assert_eq!(added, 1);
}

#[test]
fn young_pods_wait_their_scale_up_delay() {
    let settings = Settings {
        new_pod_scale_up_delay: std::time::Duration::from_secs(30),
        ..Settings::default()
    };
    let mut young = pod("young").cpu("1").unschedulable().json();
    young["metadata"]["creationTimestamp"] = serde_json::json!("2026-11-22T09:59:50Z");
    let mut patient = pod("patient").cpu("1").unschedulable().json();
    patient["metadata"]["creationTimestamp"] = serde_json::json!("2026-11-22T09:58:00Z");
    patient["metadata"]["annotations"] =
        serde_json::json!({"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "5m"});
    let mut old = pod("old").cpu("1").unschedulable().json();
    old["metadata"]["creationTimestamp"] = serde_json::json!("2026-11-22T09:59:00Z");
    let mut items = full_cluster(0);
    items.extend([young, patient, old]);
    let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
    let p = run_once(
        &snapshot(items),
        &mut EngineState::default(),
        &settings,
        now,
    );
    assert_eq!(explanation(&p, "old").outcome, Outcome::ScaleUp);
    for name in ["young", "patient"] {
        let e = explanation(&p, name);
        assert_eq!(
            (e.outcome, e.reasons[0].code),
            (Outcome::NoScaleUp, ReasonCode::PodTooNew),
            "{name}"
        );
    }
    assert!(
        explanation(&p, "patient").reasons[0]
            .message
            .contains("after 5m0s")
    );
}

/// What `run_once` gives scale-up, for tests that drive a pass's parts themselves.
struct Parts {
    groups: crate::nodegroups::NodeGroups,
    templates: Vec<Result<crate::template::TemplateNode, crate::template::TemplateError>>,
    cluster: crate::cluster_state::ClusterState,
}

impl Parts {
    fn of(s: &ClusterSnapshot, settings: &Settings) -> Parts {
        let mut state = EngineState::default();
        let groups = crate::nodegroups::discover(s, &[]);
        let (templates, _) = crate::template::build_all(s, &groups.groups, settings);
        let now = Timestamp::UNIX_EPOCH;
        let cluster = crate::cluster_state::assess(s, &groups, &mut state, settings, now);
        Parts {
            groups,
            templates,
            cluster,
        }
    }

    fn input<'a>(
        &'a self,
        s: &'a ClusterSnapshot,
        settings: &'a Settings,
    ) -> super::ScaleUpInput<'a> {
        super::ScaleUpInput {
            snapshot: s,
            groups: &self.groups,
            cluster: &self.cluster,
            templates: &self.templates,
            settings,
            priorities: None,
            now: Timestamp::UNIX_EPOCH,
        }
    }
}

/// Seed of issue 12: `replicas: 10000000` (a typo away) once made ten million simulated
/// nodes (3 GB). Upcoming nodes are counted; only as many are simulated as pods pend.
#[test]
fn a_huge_target_is_counted_not_materialised() {
    let mut items = vec![machineset("workers", 1, 5, 10_000_000).json()];
    items.extend(group_node("w1", "workers", node("w1").cpu("4")));
    items.push(pod("filler").cpu("4").on("w1").json());
    items.extend((0..3).map(|i| pod(&format!("web-{i}")).cpu("1").unschedulable().json()));
    let s = snapshot(items);
    let settings = Settings::default();
    let parts = Parts::of(&s, &settings);
    let input = parts.input(&s, &settings);
    let extra = super::Extra::default();
    let pods_on = crate::simulator::pods_by_node(&s);
    let mut sim = super::base(&input, &pods_on);
    let pass = super::Pass::new(&input, &extra, &mut sim);
    assert_eq!(pass.upcoming[0], 9_999_999, "the count is kept");
    assert_eq!(
        pass.sim.nodes().len(),
        1 + 3,
        "w1 and one copy per pending pod"
    );
    let p = plan(&s, &settings);
    assert!(
        p.pending_pods
            .iter()
            .all(|e| e.outcome == Outcome::FitsUpcoming)
    );
    assert_eq!(p.limits.max_nodes_total.used, 10_000_000.0);
}

/// Scale-down starts from the simulation scale-up worked in: every node, placement and
/// removal of scale-up's must be gone from it when scale-up returns.
#[test]
fn scale_up_leaves_the_pass_simulation_as_it_found_it() {
    let mut items = vec![machineset("workers", 1, 5, 2).json()];
    for (n, used) in [("w1", "4"), ("w2", "2")] {
        items.extend(group_node(n, "workers", node(n).cpu("4")));
        items.push(pod(&format!("on-{n}")).cpu(used).on(n).json());
    }
    items.extend((0..6).map(|i| pod(&format!("web-{i}")).cpu("1").unschedulable().json()));
    let s = snapshot(items);
    let settings = Settings::default();
    let parts = Parts::of(&s, &settings);
    let input = parts.input(&s, &settings);
    let pods_on = crate::simulator::pods_by_node(&s);
    let mut sim = super::base(&input, &pods_on);
    let seen = |sim: &crate::simulator::Simulator| -> Vec<(String, String, i64)> {
        let nodes = sim.nodes().iter();
        nodes
            .map(|n| (n.name.to_string(), format!("{:?}", n.requested), n.pods))
            .collect()
    };
    let before = seen(&sim);
    let mark = sim.mark();
    let out = super::plan_with(
        &input,
        &super::Extra::default(),
        &mut sim,
        &mut crate::expander::SeededRng::new(0),
    );
    assert_eq!(out.actions.len(), 1, "two pods fit w2, four need new nodes");
    assert_eq!(sim.mark(), mark);
    assert_eq!(seen(&sim), before);
}
