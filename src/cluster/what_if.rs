//! What-if for one cluster: a proposed change of settings (fleet.toml keys, or a
//! ClusterAutoscaler as it would be applied), layered on the settings in force by
//! `cluster::layering` as every pass's are, and both passes run on the same snapshot, memory,
//! fleet policy and time; what differs is the settings changed (with the layer that set
//! each), what the proposal cannot reach, and the two plans compared by `engine::what_if`.
//! Read only: nothing here writes, and the engine's memory is cloned for each pass. `fleetscaler what-if` calls
//! it on snapshots it reads; a running hub's runners call it on their caches
//! (`/api/v1/what-if`).

use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::layering::{self, EffectiveSettings, SettingSource};
use super::runner::RunnerSpec;
use super::what_if_over::{OverLimit, over_limits};
use crate::config::assign::{AssignError, parse_assignments};
use crate::engine::settings::{Settings, SettingsPatch};
use crate::engine::what_if::{Change, Diff, compare};
use crate::engine::{EngineState, FleetPolicy, run_once_with};
use crate::model::ClusterSnapshot;
use crate::model::autoscaler::ClusterAutoscalerSpec;

/// Assignments per proposal, at most (a hostile query string cannot make it large).
pub const MAX_ASSIGNMENTS: usize = 64;

/// A proposed change of settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proposal {
    /// Bare `KEY=VALUE`: the value every cluster evaluated would run with, above every
    /// layer (as `plan --set`).
    pub top: SettingsPatch,
    /// `defaults.KEY=VALUE`: fleet.toml's `[defaults]` as proposed, below each cluster's
    /// ClusterAutoscaler and overrides, as the hub layers them.
    pub defaults: SettingsPatch,
    /// A ClusterAutoscaler as it would be applied: it stands for each cluster's own.
    pub cluster_autoscaler: Option<ClusterAutoscalerSpec>,
    /// What was asked, as written.
    pub asked: Vec<String>,
}

impl Proposal {
    /// Reads `KEY=VALUE` assignments (`defaults.KEY` for fleet.toml's `[defaults]`), naming
    /// the one that is wrong, and refuses values the settings would set aside.
    pub fn from_assignments(
        assignments: &[String],
        cluster_autoscaler: Option<ClusterAutoscalerSpec>,
    ) -> Result<Proposal, AssignError> {
        if assignments.len() > MAX_ASSIGNMENTS {
            return Err(AssignError {
                assignment: format!("{} assignments", assignments.len()),
                message: format!("at most {MAX_ASSIGNMENTS} are evaluated at once"),
            });
        }
        let (mut top, mut defaults) = (Vec::new(), Vec::new());
        for a in assignments {
            check_scope(a)?;
            match a.trim_start().strip_prefix("defaults.") {
                Some(rest) => defaults.push((a, rest.to_string())),
                None => top.push((a, a.clone())),
            }
        }
        let proposal = Proposal {
            top: layer(&top)?,
            defaults: layer(&defaults)?,
            cluster_autoscaler,
            asked: assignments.to_vec(),
        };
        Ok(proposal)
    }

    pub fn is_empty(&self) -> bool {
        self.top.keys().is_empty()
            && self.defaults.keys().is_empty()
            && self.cluster_autoscaler.is_none()
    }
}

/// The ClusterAutoscaler a file (or a request) proposes, as `oc apply -f` would take it:
/// one `autoscaling.openshift.io` ClusterAutoscaler named `default` (the only one the
/// operator honours), YAML or JSON.
pub fn read_cluster_autoscaler(text: &str, source: &str) -> Result<ClusterAutoscalerSpec, String> {
    let mut builder = crate::model::dump::SnapshotBuilder::default();
    builder.add_text(text, source).map_err(|e| e.to_string())?;
    let (snapshot, report) = builder.finish();
    let mut found = snapshot.cluster_autoscalers;
    let others = report.objects.saturating_sub(found.len());
    match (found.len(), others) {
        (1, 0) => {}
        (0, _) => {
            return Err(format!(
                "{source}: no ClusterAutoscaler (autoscaling.openshift.io/v1) in it"
            ));
        }
        (n, _) => {
            return Err(format!(
                "{source}: one ClusterAutoscaler is expected, and nothing else ({n} ClusterAutoscaler(s), {others} other object(s))"
            ));
        }
    }
    let ca = found.remove(0);
    if ca.name != crate::model::autoscaler::CLUSTER_AUTOSCALER_NAME {
        return Err(format!(
            "{source}: the ClusterAutoscaler is named {:?}; the operator only honours one named \"default\"",
            ca.name
        ));
    }
    Ok(ca.spec)
}

/// Keys of the hub and of the fleet change how the hub runs, not what a pass decides.
fn check_scope(assignment: &str) -> Result<(), AssignError> {
    let key = assignment.split('=').next().unwrap_or_default().trim();
    let refuse = |message: String| {
        Err(AssignError {
            assignment: assignment.to_string(),
            message,
        })
    };
    if key.starts_with("hub.") || key.starts_with("fleet.") {
        return refuse(format!(
            "{key} changes how the hub runs, not what a pass decides: what-if evaluates the \
             settings of decisions ([defaults] and the cluster keys of docs/configuration.md)"
        ));
    }
    if key.starts_with("clusters.") {
        return refuse(
            "to propose a value for one cluster, give KEY=VALUE with --cluster NAME (or \
             cluster=NAME)"
                .into(),
        );
    }
    Ok(())
}

/// One layer from `(as written, as parsed)` pairs: errors name the assignment as written,
/// and a value the settings would set aside is refused rather than silently ignored.
fn layer(items: &[(&String, String)]) -> Result<SettingsPatch, AssignError> {
    let parsed: Vec<String> = items.iter().map(|(_, p)| p.clone()).collect();
    let named = |e: AssignError| {
        let written = items.iter().find(|(_, p)| *p == e.assignment);
        AssignError {
            assignment: written.map_or(e.assignment.clone(), |(w, _)| (*w).clone()),
            message: e.message,
        }
    };
    let patch = parse_assignments(&parsed).map_err(named)?;
    let (_, problems) = patch.apply_to(&mut Settings::default());
    if let Some(p) = problems.first() {
        let written = items
            .iter()
            .find(|(_, a)| a.split('=').next().map(str::trim) == Some(p.key.as_str()));
        return Err(AssignError {
            assignment: written.map_or(p.key.clone(), |(w, _)| (*w).clone()),
            message: p.message.clone(),
        });
    }
    Ok(patch)
}

/// One cluster's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAnswer {
    pub name: String,
    /// Why the cluster could not be evaluated (not connected, not synced, no answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The settings whose value the proposal changes here.
    pub settings: Vec<SettingChange>,
    /// What the proposal does not reach here, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Proposed limits the cluster is already at or over: nothing would be added until it
    /// is back under, whether or not a decision changes now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub over_limits: Vec<OverLimit>,
    #[serde(flatten)]
    pub diff: Diff,
}

impl ClusterAnswer {
    /// A cluster that could not be evaluated, and why.
    pub fn failed(name: &str, why: impl Into<String>) -> Self {
        ClusterAnswer {
            name: name.to_string(),
            error: Some(why.into()),
            ..ClusterAnswer::default()
        }
    }
}

/// A setting whose effective value differs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SettingChange {
    pub key: &'static str,
    pub current: serde_json::Value,
    pub proposed: serde_json::Value,
    /// Where the proposed value comes from.
    pub source: SettingSource,
}

/// The fleet's answer: every cluster evaluated, and what differs in total.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetAnswer {
    /// The proposal as asked (`KEY=VALUE` each; `clusterAutoscaler` when one was given).
    pub proposal: Vec<String>,
    pub at: Timestamp,
    pub summary: Summary,
    /// What the answer does not take into account, when it was made away from the hub.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub clusters: Vec<ClusterAnswer>,
}

/// Totals over the clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub clusters: usize,
    /// Clusters where a decision differs.
    pub changed: usize,
    /// Clusters that could not be evaluated.
    pub errors: usize,
    pub scale_ups_changed: usize,
    pub removals_changed: usize,
    pub pods_changed: usize,
    /// Clusters already at or over a limit the proposal sets.
    pub over_limits: usize,
}

impl FleetAnswer {
    pub fn new(proposal: &Proposal, at: Timestamp, clusters: Vec<ClusterAnswer>) -> Self {
        let mut summary = Summary {
            clusters: clusters.len(),
            ..Summary::default()
        };
        for c in &clusters {
            summary.errors += usize::from(c.error.is_some());
            summary.changed += usize::from(!c.diff.changes.is_empty());
            summary.over_limits += usize::from(!c.over_limits.is_empty());
            summary.pods_changed += c.diff.pods_changed;
            for change in &c.diff.changes {
                match change {
                    Change::ScaleUp { .. } => summary.scale_ups_changed += 1,
                    Change::Removal { .. } => summary.removals_changed += 1,
                    _ => {}
                }
            }
        }
        let mut asked = proposal.asked.clone();
        if proposal.cluster_autoscaler.is_some() {
            asked.push("clusterAutoscaler".into());
        }
        FleetAnswer {
            proposal: asked,
            at,
            summary,
            notes: Vec::new(),
            clusters,
        }
    }
}

/// A what-if asked of a running cluster's runner, answered between its passes.
#[derive(Debug)]
pub struct Ask {
    pub proposal: Arc<Proposal>,
    pub reply: oneshot::Sender<ClusterAnswer>,
}

/// Where a cluster's what-ifs wait for its runner. It outlives the runner (a restarted
/// runner takes it over), and holds one at most: a second waits for the first.
#[derive(Clone, Debug)]
pub struct Inbox(Arc<tokio::sync::Mutex<mpsc::Receiver<Ask>>>);

/// A cluster's inbox and the sender the hub asks through.
pub fn inbox() -> (mpsc::Sender<Ask>, Inbox) {
    let (tx, rx) = mpsc::channel(1);
    (tx, Inbox(Arc::new(tokio::sync::Mutex::new(rx))))
}

impl Inbox {
    /// The receiving end, for the runner that is running now; `None` if another holds it.
    pub fn take(&self) -> Option<tokio::sync::OwnedMutexGuard<mpsc::Receiver<Ask>>> {
        self.0.clone().try_lock_owned().ok()
    }
}

/// Evaluates `proposal` on one cluster: both passes, compared. Nothing is run when no
/// setting changes (the engine decides the same from the same inputs).
pub fn evaluate(
    name: &str,
    spec: &RunnerSpec,
    snapshot: &ClusterSnapshot,
    state: &EngineState,
    policy: &FleetPolicy,
    proposal: &Proposal,
    now: Timestamp,
) -> ClusterAnswer {
    let current = layering::for_cluster(spec, snapshot, None);
    let proposed = layering::for_cluster(spec, snapshot, Some(proposal));
    let settings = setting_changes(&current, &proposed);
    let notes = notes(spec, proposal, &proposed);
    let (diff, over_limits) = if settings.is_empty() {
        (Diff::default(), Vec::new())
    } else {
        let run = |s: &Settings| run_once_with(snapshot, &mut state.clone(), s, policy, now);
        let (before, after) = (run(&current.settings), run(&proposed.settings));
        (
            compare(&before, &after),
            over_limits(&before.limits, &after.limits),
        )
    };
    ClusterAnswer {
        name: name.to_string(),
        error: None,
        settings,
        notes,
        over_limits,
        diff,
    }
}

fn setting_changes(
    current: &EffectiveSettings,
    proposed: &EffectiveSettings,
) -> Vec<SettingChange> {
    let before = serde_json::to_value(&current.settings).unwrap_or_default();
    let after = serde_json::to_value(&proposed.settings).unwrap_or_default();
    proposed
        .sources
        .iter()
        .filter(|(key, _)| before.get(**key) != after.get(**key))
        .map(|(key, source)| SettingChange {
            key,
            current: before.get(*key).cloned().unwrap_or_default(),
            proposed: after.get(*key).cloned().unwrap_or_default(),
            source: *source,
        })
        .collect()
}

/// What the proposal says that does not reach this cluster: a higher layer sets the key, or
/// the cluster's ClusterAutoscaler is not read at all.
fn notes(spec: &RunnerSpec, proposal: &Proposal, proposed: &EffectiveSettings) -> Vec<String> {
    let mut notes = Vec::new();
    for key in proposal.defaults.keys() {
        let source = proposed.sources.get(key).copied();
        if source != Some(SettingSource::FleetDefaults) && source != Some(SettingSource::Flags) {
            let by = source.map_or("another layer".into(), |s| format!("its {s}"));
            notes.push(format!(
                "defaults.{key} does not reach this cluster: {by} sets {key}"
            ));
        }
    }
    let Some(ca) = &proposal.cluster_autoscaler else {
        return notes;
    };
    if !spec.cluster.use_cluster_autoscaler {
        notes.push(
            "use_cluster_autoscaler = false: this cluster's ClusterAutoscaler is not read, nor \
             would the proposed one be"
                .into(),
        );
        return notes;
    }
    let (patch, problems) = SettingsPatch::from_cluster_autoscaler(ca);
    for key in patch.keys() {
        let source = proposed.sources.get(key).copied();
        if source != Some(SettingSource::ClusterAutoscaler) {
            let by = source.map_or("another layer".into(), |s| s.to_string());
            notes.push(format!(
                "the proposed ClusterAutoscaler's {key} does not reach this cluster: {by} sets it"
            ));
        }
    }
    notes.extend(
        problems
            .iter()
            .map(|p| format!("the proposed ClusterAutoscaler: {p}")),
    );
    notes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::ClusterConfig;
    use crate::engine::fixtures::{group_node, machineset, node, pod, snapshot};

    fn spec(defaults: SettingsPatch) -> RunnerSpec {
        RunnerSpec {
            cluster: ClusterConfig::named("east"),
            defaults,
            dry_run: false,
        }
    }

    /// One full 4-core worker (group max 5), `n` pending 1-core pods, and a ClusterAutoscaler
    /// `default` with `max_nodes`, if given.
    fn cluster(n: usize, max_nodes: Option<u64>) -> ClusterSnapshot {
        let mut items = vec![machineset("workers", 1, 5, 1).json()];
        items.extend(group_node("w1", "workers", node("w1").cpu("4")));
        items.push(pod("filler").cpu("4").on("w1").json());
        items.extend((0..n).map(|i| pod(&format!("web-{i}")).cpu("1").unschedulable().json()));
        if let Some(max) = max_nodes {
            items.push(json!({"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
                "metadata": {"name": "default"}, "spec": {"resourceLimits": {"maxNodesTotal": max}}}));
        }
        snapshot(items)
    }

    fn proposal(sets: &[&str]) -> Proposal {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Proposal::from_assignments(&sets, None).unwrap()
    }

    fn evaluate_on(s: &ClusterSnapshot, spec: &RunnerSpec, p: &Proposal) -> ClusterAnswer {
        let now = Timestamp::UNIX_EPOCH;
        evaluate(
            "east",
            spec,
            s,
            &EngineState::default(),
            &FleetPolicy::none(),
            p,
            now,
        )
    }

    #[test]
    fn a_bare_key_caps_the_scale_up_and_says_which_setting_changed() {
        let a = evaluate_on(
            &cluster(8, None),
            &spec(SettingsPatch::default()),
            &proposal(&["max_nodes_total=2"]),
        );
        assert_eq!(a.settings.len(), 1);
        let s = &a.settings[0];
        assert_eq!(
            (s.key, &s.proposed, s.source),
            ("max_nodes_total", &json!(2), SettingSource::Flags)
        );
        assert!(
            a.diff
                .changes
                .iter()
                .any(|c| matches!(c, Change::ScaleUp { .. }))
        );
        assert_eq!(a.diff.pods_changed, 4);
    }

    #[test]
    fn a_proposed_limit_the_cluster_is_already_over_is_said_with_no_change() {
        // Three nodes and nothing pending: a maximum of 2 changes no scale-up now.
        let mut items = vec![machineset("workers", 1, 5, 3).json()];
        for n in ["w1", "w2", "w3"] {
            items.extend(group_node(n, "workers", node(n).cpu("4")));
        }
        let p = proposal(&["max_nodes_total=2"]);
        let a = evaluate_on(&snapshot(items), &spec(SettingsPatch::default()), &p);
        assert!(
            !a.diff
                .changes
                .iter()
                .any(|c| matches!(c, Change::ScaleUp { .. } | Change::Limit { .. })),
            "{a:?}"
        );
        let over = &a.over_limits[0];
        assert_eq!(
            (over.limit.as_str(), over.used, over.current, over.proposed),
            ("maxNodesTotal", 3.0, None, 2)
        );
        let fleet = FleetAnswer::new(&p, Timestamp::UNIX_EPOCH, vec![a]);
        assert_eq!(fleet.summary.over_limits, 1);
        // A limit with room is not said.
        let a = evaluate_on(&cluster(0, None), &spec(SettingsPatch::default()), &p);
        assert!(a.over_limits.is_empty(), "{a:?}");
    }

    #[test]
    fn a_proposed_default_under_the_clusters_own_autoscaler_changes_nothing_and_says_why() {
        let s = cluster(8, Some(50));
        let a = evaluate_on(
            &s,
            &spec(SettingsPatch::default()),
            &proposal(&["defaults.max_nodes_total=2"]),
        );
        assert!(a.settings.is_empty() && a.diff.changes.is_empty(), "{a:?}");
        assert_eq!(
            a.notes,
            [
                "defaults.max_nodes_total does not reach this cluster: its ClusterAutoscaler sets max_nodes_total"
            ]
        );
        // Without a ClusterAutoscaler of its own, the proposed default applies.
        let a = evaluate_on(
            &cluster(8, None),
            &spec(SettingsPatch::default()),
            &proposal(&["defaults.max_nodes_total=2"]),
        );
        assert_eq!(a.settings[0].source, SettingSource::FleetDefaults);
        assert!(!a.diff.changes.is_empty());
    }

    #[test]
    fn a_proposed_cluster_autoscaler_stands_for_the_clusters_own() {
        let s = cluster(8, Some(50));
        let ca = ClusterAutoscalerSpec {
            resource_limits: serde_json::from_value(json!({"maxNodesTotal": 2})).unwrap(),
            ..Default::default()
        };
        let p = Proposal::from_assignments(&[], Some(ca)).unwrap();
        let a = evaluate_on(&s, &spec(SettingsPatch::default()), &p);
        let change = &a.settings[0];
        assert_eq!(
            (change.key, &change.current, &change.proposed),
            ("max_nodes_total", &json!(50), &json!(2))
        );
        let mut lab = spec(SettingsPatch::default());
        lab.cluster.use_cluster_autoscaler = false;
        let a = evaluate_on(&s, &lab, &p);
        assert!(a.settings.is_empty());
        assert!(
            a.notes[0].starts_with("use_cluster_autoscaler = false"),
            "{:?}",
            a.notes
        );
    }

    #[test]
    fn bad_proposals_are_refused_naming_the_assignment() {
        let refuse = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            Proposal::from_assignments(&sets, None).unwrap_err()
        };
        let e = refuse(&["defaults.max_nodes_per_scaleup=0"]);
        assert_eq!(e.assignment, "defaults.max_nodes_per_scaleup=0");
        assert_eq!(e.message, "must be at least 1");
        let e = refuse(&["max_nodes_total=1", "defaults.nope=1"]);
        assert_eq!(e.assignment, "defaults.nope=1");
        assert!(
            refuse(&["hub.scan_interval=1s"])
                .message
                .contains("how the hub runs")
        );
        assert!(refuse(&["clusters.a.seed=1"]).message.contains("--cluster"));
        let many: Vec<String> = (0..=MAX_ASSIGNMENTS).map(|i| format!("seed={i}")).collect();
        assert!(Proposal::from_assignments(&many, None).is_err());
        assert!(proposal(&[]).is_empty());
    }

    #[test]
    fn a_cluster_autoscaler_is_read_as_applied() {
        let yaml = "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nmetadata:\n  name: default\nspec:\n  resourceLimits:\n    maxNodesTotal: 7\n";
        let spec = read_cluster_autoscaler(yaml, "ca.yaml").unwrap();
        assert_eq!(spec.resource_limits.unwrap().max_nodes_total, Some(7));
        let other = yaml.replace("name: default", "name: other");
        let e = read_cluster_autoscaler(&other, "ca.yaml").unwrap_err();
        assert!(e.contains("named \"other\""), "{e}");
        let e = read_cluster_autoscaler(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
            "ca.yaml",
        )
        .unwrap_err();
        assert!(e.starts_with("ca.yaml: no ClusterAutoscaler"), "{e}");
        assert!(
            read_cluster_autoscaler("{", "ca.yaml")
                .unwrap_err()
                .contains("ca.yaml")
        );
    }
}
