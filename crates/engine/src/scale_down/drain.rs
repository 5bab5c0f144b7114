//! Which pods block the removal of their node, which must move, and which can simply go
//! (seed 000's list, in upstream's order; the first decisive rule wins).

use std::sync::Arc;

use jiff::Timestamp;

use super::controllers::ControllerIndex;
use crate::reason::ReasonCode;
use crate::settings::Settings;
use fleetscaler_model::ClusterSnapshot;
use fleetscaler_model::controller::Controllers;
use fleetscaler_model::pod::{DAEMONSET_POD, Pod, SafeToEvict};
use fleetscaler_model::workload::{DaemonSet, PodDisruptionBudget};

/// What removing a pod's node means for the pod.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Drain {
    /// Nothing to do: mirror, DaemonSet, finished, terminating or expendable pods.
    Skip,
    /// It must find a place on another node.
    Move,
    /// It keeps its node.
    Block(ReasonCode, String),
}

pub(super) struct DrainRules<'a> {
    settings: &'a Settings,
    /// Long-terminating pods are measured against it.
    now: Timestamp,
    pdbs: &'a [PodDisruptionBudget],
    /// The budgets whose selector could not be read (almost always none): found once, not
    /// once per pod.
    unreadable_pdbs: Vec<&'a PodDisruptionBudget>,
    /// Where a pod's controller is looked up.
    controllers: ControllerIndex<'a>,
}

impl<'a> DrainRules<'a> {
    pub fn new(snapshot: &'a ClusterSnapshot, settings: &'a Settings, now: Timestamp) -> Self {
        let controllers = ControllerIndex::new(&snapshot.daemonsets, &snapshot.controllers);
        DrainRules::of(settings, now, &snapshot.pdbs, controllers)
    }

    fn of(
        settings: &'a Settings,
        now: Timestamp,
        pdbs: &'a [PodDisruptionBudget],
        controllers: ControllerIndex<'a>,
    ) -> Self {
        DrainRules {
            settings,
            now,
            pdbs,
            unreadable_pdbs: pdbs.iter().filter(|b| b.unreadable.is_some()).collect(),
            controllers,
        }
    }

    /// A kube-system pod without a PodDisruptionBudget older than upstream's
    /// blocking-system-pod disruption timeout may be evicted after all. One whose creation
    /// time is unknown never is.
    fn old_enough_to_disrupt(&self, pod: &Pod) -> bool {
        let timeout = self.settings.blocking_system_pod_disruption_timeout;
        pod.created
            .is_some_and(|created| crate::state::add(created, timeout) <= self.now)
    }

    /// Whether any PodDisruptionBudget covers the pod (without collecting which).
    fn covered(&self, pod: &Pod) -> bool {
        self.pdbs
            .iter()
            .any(|b| b.covers(&pod.id.namespace, &pod.labels))
    }

    /// The PodDisruptionBudgets (indices) that cover a pod.
    pub fn pdbs_of(&self, pod: &Pod) -> Vec<usize> {
        (0..self.pdbs.len())
            .filter(|&i| self.pdbs[i].covers(&pod.id.namespace, &pod.labels))
            .collect()
    }

    pub fn pdb(&self, i: usize) -> &PodDisruptionBudget {
        &self.pdbs[i]
    }

    pub fn classify(&self, pod: &Pod) -> Drain {
        let id = &pod.id;
        // Upstream's mirror and long-terminating rules; finished pods upstream never sees
        // (its lister of scheduled pods leaves them out). A pod terminating within its grace
        // period is not gone yet: it must find a place like any other.
        if pod.mirror || pod.is_terminal() || pod.is_long_terminating(self.now) {
            return Drain::Skip;
        }
        // Pods below the priority cutoff never block a scale-down: they are just evicted
        // (upstream leaves them out before any rule).
        if pod.is_expendable(self.settings.pod_priority_threshold) {
            return Drain::Skip;
        }
        // Upstream's replicacount rule, before the others and only with this setting (its
        // rules.go): a controller gone, or asking for too few replicas.
        if self.settings.skip_nodes_with_custom_controller_pods
            && let Some((code, why)) = self
                .controllers
                .blocks(pod, self.settings.min_replica_count)
        {
            return Drain::Block(code, why);
        }
        // Upstream reads any other value as "not a DaemonSet pod" and may move the pod;
        // a value that says something else was meant leaves that in doubt: keep the node.
        if let Some(value) = pod.odd_daemonset_annotation() {
            return Drain::Block(
                ReasonCode::UnexpectedError,
                format!(
                    "pod {id}: annotation {DAEMONSET_POD}={value:?} is neither \"true\" nor absent; the node stays until it is one or the other"
                ),
            );
        }
        // Upstream's daemonset rule: a DaemonSet pod goes with its node (whether its
        // DaemonSet is still there was asked above).
        if pod.is_daemonset() {
            return Drain::Skip;
        }
        match &pod.extras().safe_to_evict {
            Some(SafeToEvict::True) => return Drain::Move,
            Some(SafeToEvict::OnCompletion) => {
                return Drain::Block(
                    ReasonCode::NotSafeToEvictAnnotation,
                    format!(
                        "pod {id} is annotated safe-to-evict: on-completion and is still running"
                    ),
                );
            }
            _ => {}
        }
        let Some(owner) = &pod.owner else {
            return Drain::Block(
                ReasonCode::NotReplicated,
                format!("pod {id} has no controller: nothing would recreate it elsewhere"),
            );
        };
        // As upstream's replicated rule: only the built-in controllers are known to recreate
        // a pod elsewhere; an operator's own kind may not (or may lose state doing it).
        if self.settings.skip_nodes_with_custom_controller_pods
            && !REPLICATED_KINDS.contains(&&*owner.kind)
        {
            return Drain::Block(
                ReasonCode::NotReplicated,
                format!(
                    "pod {id} is controlled by {} {}, not a ReplicaSet, ReplicationController, Job or StatefulSet (skip_nodes_with_custom_controller_pods)",
                    owner.kind, owner.name
                ),
            );
        }
        if self.settings.skip_nodes_with_system_pods
            && &*id.namespace == "kube-system"
            && !self.old_enough_to_disrupt(pod)
            && !self.covered(pod)
        {
            return Drain::Block(
                ReasonCode::UnmovableKubeSystemPod,
                format!(
                    "pod {id} runs in kube-system without a PodDisruptionBudget and is younger than {} (blocking_system_pod_disruption_timeout)",
                    fleetscaler_model::duration::format_go_duration(
                        self.settings.blocking_system_pod_disruption_timeout
                    )
                ),
            );
        }
        if pod.extras().safe_to_evict == Some(SafeToEvict::False) {
            return Drain::Block(
                ReasonCode::NotSafeToEvictAnnotation,
                format!(
                    "pod {id} is annotated cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\""
                ),
            );
        }
        if self.settings.skip_nodes_with_local_storage
            && let Some(volume) = pod
                .spec
                .local_volumes
                .iter()
                .find(|v| !pod.extras().safe_to_evict_local_volumes.contains(v))
        {
            return Drain::Block(
                ReasonCode::LocalStorageRequested,
                format!("pod {id} has local storage (volume {volume}) that would be lost"),
            );
        }
        // Upstream's pdb rule blocks every pod when a budget's selector cannot be read; a
        // budget only ever covers pods of its own namespace, so those keep their nodes.
        if let Some(pdb) = self
            .unreadable_pdbs
            .iter()
            .find(|b| b.key.namespace == id.namespace)
        {
            let why = pdb.unreadable.as_deref().unwrap_or_default();
            return Drain::Block(
                ReasonCode::UnexpectedError,
                format!(
                    "PodDisruptionBudget {} cannot be read ({why}): whether it covers pod {id} is unknown",
                    pdb.key
                ),
            );
        }
        Drain::Move
    }
}

/// The controllers upstream counts on to recreate a pod elsewhere
/// (`simulator/drainability/rules/replicated`).
const REPLICATED_KINDS: [&str; 4] = ["ReplicationController", "Job", "ReplicaSet", "StatefulSet"];

/// The drain rules, owning what they read, for the executor: pods that arrive on a node
/// after the plan chose it are checked again before anything is evicted (as upstream
/// re-runs its pod list on a fresh snapshot before draining).
#[derive(Clone, Debug)]
pub struct DrainCheck {
    settings: Settings,
    pdbs: Vec<PodDisruptionBudget>,
    /// Shared: each node's removal holds a clone, and a cluster may have tens of thousands
    /// of ReplicaSets.
    daemonsets: Arc<[DaemonSet]>,
    controllers: Arc<Controllers>,
}

impl DrainCheck {
    pub fn new(snapshot: &ClusterSnapshot, settings: &Settings) -> Self {
        DrainCheck {
            settings: settings.clone(),
            pdbs: snapshot.pdbs.clone(),
            daemonsets: snapshot.daemonsets.as_slice().into(),
            controllers: Arc::new(snapshot.controllers.clone()),
        }
    }

    /// Why the first pod that must keep its node does, if one does, at `now`.
    pub fn blocker<'p>(
        &self,
        pods: impl IntoIterator<Item = &'p Pod>,
        now: Timestamp,
    ) -> Option<String> {
        let controllers = ControllerIndex::new(&self.daemonsets, &self.controllers);
        let rules = DrainRules::of(&self.settings, now, &self.pdbs, controllers);
        pods.into_iter().find_map(|p| match rules.classify(p) {
            Drain::Block(_, why) => Some(why),
            Drain::Skip | Drain::Move => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{pod, snapshot};

    #[test]
    fn the_executors_check_blocks_what_the_plan_would_have() {
        let mut unsafe_pod = pod("db").on("n").json();
        unsafe_pod["metadata"]["annotations"] =
            serde_json::json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"});
        let s = snapshot(vec![pod("web").on("n").json(), unsafe_pod]);
        let check = DrainCheck::new(&s, &Settings::default());
        assert_eq!(check.blocker(&s.pods[..1], Timestamp::UNIX_EPOCH), None);
        let why = check.blocker(&s.pods, Timestamp::UNIX_EPOCH).unwrap();
        assert!(why.contains("db") && why.contains("safe-to-evict"), "{why}");
    }

    fn rule(json: serde_json::Value, extra: Vec<serde_json::Value>) -> Drain {
        let mut items = vec![json];
        items.extend(extra);
        let s = snapshot(items);
        let settings = Settings::default();
        DrainRules::new(&s, &settings, Timestamp::UNIX_EPOCH).classify(&s.pods[0])
    }

    fn code(d: Drain) -> Option<ReasonCode> {
        match d {
            Drain::Block(c, _) => Some(c),
            _ => None,
        }
    }

    #[test]
    fn seed_000_blocking_pods() {
        let mut bare = pod("bare").on("n").json();
        bare["metadata"]["ownerReferences"] = serde_json::json!([]);
        assert_eq!(
            code(rule(bare.clone(), vec![])),
            Some(ReasonCode::NotReplicated)
        );
        bare["metadata"]["annotations"] =
            serde_json::json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"});
        assert_eq!(
            rule(bare, vec![]),
            Drain::Move,
            "safe-to-evict: true overrides"
        );

        let system = pod("dns").ns("kube-system").on("n").json();
        assert_eq!(
            code(rule(system.clone(), vec![])),
            Some(ReasonCode::UnmovableKubeSystemPod)
        );
        let pdb = serde_json::json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "dns", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": "dns"}}}, "status": {"disruptionsAllowed": 1}});
        let mut labelled = system;
        labelled["metadata"]["labels"] = serde_json::json!({"app": "dns"});
        assert_eq!(rule(labelled, vec![pdb]), Drain::Move);

        let mut unsafe_pod = pod("db").on("n").json();
        unsafe_pod["metadata"]["annotations"] =
            serde_json::json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"});
        assert_eq!(
            code(rule(unsafe_pod, vec![])),
            Some(ReasonCode::NotSafeToEvictAnnotation)
        );

        let mut local = pod("cache").on("n").json();
        local["spec"]["volumes"] = serde_json::json!([{"name": "scratch", "emptyDir": {}}]);
        assert_eq!(
            code(rule(local.clone(), vec![])),
            Some(ReasonCode::LocalStorageRequested)
        );
        local["metadata"]["annotations"] = serde_json::json!({"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "scratch"});
        assert_eq!(rule(local, vec![]), Drain::Move);
    }

    fn rule_with(json: serde_json::Value, settings: &Settings) -> Drain {
        let s = snapshot(vec![json]);
        DrainRules::new(&s, settings, Timestamp::UNIX_EPOCH).classify(&s.pods[0])
    }

    /// Upstream's replicated rule (`simulator/drainability/rules/replicated/rule_test.go`):
    /// with `skip_nodes_with_custom_controller_pods`, only the built-in controllers count;
    /// without it, any controller does; safe-to-evict "true" moves the pod either way.
    #[test]
    fn pods_of_custom_controllers_keep_their_node_unless_allowed() {
        let on = Settings::default();
        assert!(
            on.skip_nodes_with_custom_controller_pods,
            "upstream's default"
        );
        let off = Settings {
            skip_nodes_with_custom_controller_pods: false,
            ..Settings::default()
        };
        for kind in ["ReplicaSet", "ReplicationController", "Job", "StatefulSet"] {
            let p = pod("p").owner(kind, "c").on("n").json();
            assert_eq!(rule_with(p, &on), Drain::Move, "{kind}");
        }
        for kind in ["TaskRun", "VirtualMachineInstance", "CronJob", "Deployment"] {
            let p = pod("p").owner(kind, "c").on("n").json();
            let Drain::Block(code, why) = rule_with(p.clone(), &on) else {
                panic!("{kind}: a custom controller's pod keeps its node");
            };
            assert_eq!(code, ReasonCode::NotReplicated, "{kind}");
            assert!(
                why.contains(kind) && why.contains("skip_nodes_with_custom_controller_pods"),
                "{why}"
            );
            assert_eq!(
                rule_with(p.clone(), &off),
                Drain::Move,
                "{kind}, setting off"
            );
            let mut safe = p;
            safe["metadata"]["annotations"] =
                serde_json::json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"});
            assert_eq!(rule_with(safe, &on), Drain::Move, "{kind}, safe-to-evict");
        }
    }

    /// Upstream's `IsDaemonSetPod` (`utils/pod`) and its daemonset and replicacount rules:
    /// `daemonset-pod: "true"` makes any pod a DaemonSet pod, which simply goes with its node
    /// (only a real DaemonSet owner is looked up). Another value is not a mark upstream
    /// honours; the hub keeps the node rather than guess.
    #[test]
    fn the_daemonset_pod_annotation_marks_a_daemonset_pod() {
        let marked = |value: &str, kind: &str| {
            let mut p = pod("agent").owner(kind, "agent").on("n").json();
            p["metadata"]["annotations"] =
                serde_json::json!({"cluster-autoscaler.kubernetes.io/daemonset-pod": value});
            p
        };
        let some_daemonset = serde_json::json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "other", "namespace": "default", "uid": "other-uid"},
            "spec": {"selector": {}, "template": {"spec": {"containers": []}}}});
        let settings = Settings::default();
        for kind in ["ReplicaSet", "CustomDaemonSet"] {
            let s = snapshot(vec![marked("true", kind), some_daemonset.clone()]);
            assert!(s.pods[0].is_daemonset(), "{kind}");
            assert_eq!(
                DrainRules::new(&s, &settings, Timestamp::UNIX_EPOCH).classify(&s.pods[0]),
                Drain::Skip,
                "{kind}: goes with its node, its owner not looked up as a DaemonSet"
            );
        }
        for odd in ["yes", "True", ""] {
            let p = marked(odd, "ReplicaSet");
            let s = snapshot(vec![p.clone()]);
            assert!(!s.pods[0].is_daemonset(), "{odd:?} is not upstream's mark");
            let Drain::Block(code, why) = rule_with(p, &settings) else {
                panic!("{odd:?}: in doubt, the node stays");
            };
            assert_eq!(code, ReasonCode::UnexpectedError);
            assert!(
                why.contains("daemonset-pod") && why.contains("default/agent"),
                "{why}"
            );
        }
    }

    /// Upstream's longterminating rule and its tests (`rules/longterminating/rule_test.go`):
    /// deleted longer ago than the pod's grace period (30 s by default) plus 30 s, the pod is
    /// as good as gone; before that it must still find a place (or block, as any pod).
    #[test]
    fn long_terminating_pods_are_gone_and_terminating_ones_still_move() {
        let deleted = |grace: Option<i64>, owner: bool| {
            let mut p = pod("p").on("n").json();
            p["metadata"]["deletionTimestamp"] = serde_json::json!("2026-11-22T10:00:00Z");
            if let Some(g) = grace {
                p["spec"]["terminationGracePeriodSeconds"] = serde_json::json!(g);
            }
            if !owner {
                p["metadata"]["ownerReferences"] = serde_json::json!([]);
            }
            p
        };
        let at = |secs: i64| {
            "2026-11-22T10:00:00Z".parse::<Timestamp>().unwrap()
                + jiff::SignedDuration::from_secs(secs)
        };
        let settings = Settings::default();
        let classify = |p: serde_json::Value, now: Timestamp| {
            let s = snapshot(vec![p]);
            DrainRules::new(&s, &settings, now).classify(&s.pods[0])
        };
        // Grace 0: gone 30 s after deletion.
        assert_eq!(classify(deleted(Some(0), true), at(29)), Drain::Move);
        assert_eq!(classify(deleted(Some(0), true), at(31)), Drain::Skip);
        // No grace period given: the API's 30 s, then 30 s more.
        assert_eq!(classify(deleted(None, true), at(59)), Drain::Move);
        assert_eq!(classify(deleted(None, true), at(61)), Drain::Skip);
        // An extended grace period.
        assert_eq!(classify(deleted(Some(600), true), at(600)), Drain::Move);
        assert_eq!(classify(deleted(Some(600), true), at(631)), Drain::Skip);
        // Still terminating, the other rules apply: a pod without a controller blocks.
        assert_eq!(
            code(classify(deleted(Some(0), false), at(10))),
            Some(ReasonCode::NotReplicated)
        );
        assert_eq!(classify(deleted(Some(0), false), at(31)), Drain::Skip);
    }

    /// Upstream's system rule with `--blocking-system-pod-distruption-timeout` (1 h): a
    /// kube-system pod without a PodDisruptionBudget keeps its node while it is younger than
    /// the timeout, since its creation; older, it moves like any other.
    #[test]
    fn kube_system_pods_without_a_pdb_move_once_old_enough() {
        let mut p = pod("metrics").ns("kube-system").on("n").json();
        p["metadata"]["creationTimestamp"] = serde_json::json!("2026-11-22T09:00:00Z");
        let at = |t: &str| t.parse::<Timestamp>().unwrap();
        let s = snapshot(vec![p.clone()]);
        let settings = Settings::default();
        let young = DrainRules::new(&s, &settings, at("2026-11-22T09:59:00Z")).classify(&s.pods[0]);
        let Drain::Block(blocked, why) = young else {
            panic!("younger than an hour: blocks");
        };
        assert_eq!(blocked, ReasonCode::UnmovableKubeSystemPod);
        assert!(why.contains("1h0m0s"), "{why}");
        let old = DrainRules::new(&s, &settings, at("2026-11-22T10:00:00Z")).classify(&s.pods[0]);
        assert_eq!(old, Drain::Move);
        let patient = Settings {
            blocking_system_pod_disruption_timeout: std::time::Duration::from_secs(7200),
            ..Settings::default()
        };
        assert_eq!(
            code(DrainRules::new(&s, &patient, at("2026-11-22T10:00:00Z")).classify(&s.pods[0])),
            Some(ReasonCode::UnmovableKubeSystemPod)
        );
        let off = Settings {
            skip_nodes_with_system_pods: false,
            ..Settings::default()
        };
        assert_eq!(
            DrainRules::new(&s, &off, at("2026-11-22T09:01:00Z")).classify(&s.pods[0]),
            Drain::Move
        );
        // Without a creation time, the pod's age is unknown: it blocks.
        p["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("creationTimestamp");
        let s = snapshot(vec![p]);
        assert_eq!(
            code(DrainRules::new(&s, &settings, at("2030-01-01T00:00:00Z")).classify(&s.pods[0])),
            Some(ReasonCode::UnmovableKubeSystemPod)
        );
    }

    #[test]
    fn pods_that_never_block() {
        assert_eq!(
            rule(pod("batch").priority(-100).on("n").json(), vec![]),
            Drain::Skip
        );
        assert_eq!(
            rule(
                pod("agent").owner("DaemonSet", "agent").on("n").json(),
                vec![]
            ),
            Drain::Skip
        );
        let mut mirror = pod("etcd").on("n").json();
        mirror["metadata"]["annotations"] = serde_json::json!({"kubernetes.io/config.mirror": "x"});
        mirror["metadata"]["ownerReferences"] = serde_json::json!([]);
        assert_eq!(rule(mirror, vec![]), Drain::Skip);
        assert_eq!(rule(pod("web").on("n").json(), vec![]), Drain::Move);
    }

    /// Upstream's rules.go: the replicacount rule runs before safe-to-evict and only with
    /// `skip_nodes_with_custom_controller_pods`, `min_replica_count` with it.
    #[test]
    fn a_gone_controller_keeps_the_node_before_safe_to_evict_and_only_with_the_setting() {
        let rs = serde_json::json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "web-uid"},
            "spec": {"replicas": 1}});
        let mut orphan = pod("p").owner("ReplicaSet", "gone").on("n").json();
        orphan["metadata"]["annotations"] =
            serde_json::json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"});
        let s = snapshot(vec![
            orphan,
            pod("q").owner("ReplicaSet", "web").on("n").json(),
            rs,
        ]);
        let strict = Settings {
            min_replica_count: 2,
            ..Settings::default()
        };
        let rules = DrainRules::new(&s, &strict, Timestamp::UNIX_EPOCH);
        assert_eq!(
            code(rules.classify(&s.pods[0])),
            Some(ReasonCode::ControllerNotFound)
        );
        assert_eq!(
            code(rules.classify(&s.pods[1])),
            Some(ReasonCode::MinReplicasReached)
        );
        let off = Settings {
            skip_nodes_with_custom_controller_pods: false,
            ..strict.clone()
        };
        let rules = DrainRules::new(&s, &off, Timestamp::UNIX_EPOCH);
        assert_eq!(rules.classify(&s.pods[0]), Drain::Move);
        assert_eq!(rules.classify(&s.pods[1]), Drain::Move);
        let why = DrainCheck::new(&s, &strict)
            .blocker(&s.pods, Timestamp::UNIX_EPOCH)
            .unwrap();
        assert!(
            why.contains("ReplicaSet gone is not in the cluster"),
            "{why}"
        );
    }

    #[test]
    fn a_daemonset_pod_whose_daemonset_is_gone_blocks() {
        let ds = serde_json::json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "other", "namespace": "default", "uid": "other-uid"}, "spec": {"selector": {}, "template": {}}});
        let orphan = pod("agent").owner("DaemonSet", "agent").on("n").json();
        assert_eq!(
            code(rule(orphan, vec![ds])),
            Some(ReasonCode::ControllerNotFound)
        );
    }

    /// A budget whose selector cannot be read leaves in doubt whether it covers the pods of
    /// its namespace: they keep their nodes; other namespaces' pods are unaffected.
    #[test]
    fn an_unreadable_budget_keeps_the_nodes_of_its_namespaces_pods() {
        let mut s = snapshot(vec![
            pod("web").on("n").json(),
            pod("api").ns("other").on("n").json(),
        ]);
        s.pdbs.push(PodDisruptionBudget {
            key: fleetscaler_model::ObjectKey::new("default", "broken"),
            selector: None,
            disruptions_allowed: 0,
            unreadable: Some("spec.selector.matchExpressions[0]: operator \"Near\" is not one of In, NotIn, Exists, DoesNotExist".into()),
        });
        let settings = Settings::default();
        let rules = DrainRules::new(&s, &settings, Timestamp::UNIX_EPOCH);
        match rules.classify(&s.pods[0]) {
            Drain::Block(ReasonCode::UnexpectedError, why) => {
                assert!(
                    why.contains("default/broken") && why.contains("Near"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(rules.classify(&s.pods[1]), Drain::Move);
    }
}
