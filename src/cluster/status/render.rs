//! The status document, rendered from a [`Plan`]: upstream's `ClusterAutoscalerStatus` as
//! the cluster-autoscaler ≥ 1.30 writes it (`clusterstate/api/types.go`), field for field and
//! in the same order, so tools that read upstream's ConfigMap read ours.
//!
//! Pure: the plan, the memory of earlier passes and the time in, a document out. The memory
//! ([`StatusMemory`]) is what keeps `lastTransitionTime` still while a condition holds.

use std::collections::HashMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::engine::plan::{ClusterHealth, GroupHealth, NodeGroupStatus, Plan};

/// Upstream cuts a backoff's error message to this many characters.
const MAX_ERROR_MESSAGE: usize = 500;
const TRUNCATED: &str = "<truncated>";
/// The error code of a backoff for another cluster's capacity failure: upstream has none
/// (it sees one cluster), so one in the style of its short camelCase codes.
const FLEET_BACKOFF_ERROR_CODE: &str = "fleetBackoff";
/// The note the status carries in dry-run mode.
pub const DRY_RUN_NOTE: &str =
    "Dry run: fleetscaler plans and reports but does not change this cluster.";

/// `autoscalerStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    Initializing,
    Running,
}

/// The statuses upstream's conditions take (one type, as upstream has).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ConditionStatus {
    Healthy,
    Unhealthy,
    InProgress,
    NoActivity,
    Backoff,
    CandidatesPresent,
    NoCandidates,
}

/// The whole document under the ConfigMap's `status` key.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerStatus {
    /// Go's `2006-01-02 15:04:05.999999999 -0700 MST`, as upstream.
    pub time: String,
    pub autoscaler_status: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Absent while initializing, as upstream's zero struct is omitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_wide: Option<ClusterWide>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<NodeGroupEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWide {
    pub health: HealthCondition,
    pub scale_up: ScaleUpCondition,
    pub scale_down: ScaleDownCondition,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCondition {
    pub status: ConditionStatus,
    pub node_counts: NodeCounts,
    pub last_probe_time: Timestamp,
    pub last_transition_time: Timestamp,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    pub registered: RegisteredCounts,
    pub long_unregistered: u64,
    pub unregistered: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredCounts {
    pub total: u64,
    pub ready: u64,
    pub not_started: u64,
    /// Omitted when 0, as upstream (`omitempty`).
    #[serde(skip_serializing_if = "is_zero")]
    pub being_deleted: u64,
    pub unready: UnreadyCounts,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnreadyCounts {
    pub total: u64,
    /// Nodes unready for want of a resource (a GPU not yet advertised). The engine does not
    /// tell these apart, so this is 0.
    pub resource_unready: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUpCondition {
    pub status: ConditionStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_info: Option<BackoffInfo>,
    pub last_probe_time: Timestamp,
    pub last_transition_time: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackoffInfo {
    pub error_code: String,
    pub error_message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownCondition {
    pub status: ConditionStatus,
    /// Omitted when 0, as upstream (`omitempty`).
    #[serde(skip_serializing_if = "is_zero")]
    pub candidates: u64,
    pub last_probe_time: Timestamp,
    pub last_transition_time: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupEntry {
    pub name: String,
    pub health: GroupHealthCondition,
    pub scale_up: ScaleUpCondition,
    pub scale_down: ScaleDownCondition,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupHealthCondition {
    pub status: ConditionStatus,
    pub node_counts: NodeCounts,
    pub cloud_provider_target: u64,
    pub min_size: u64,
    pub max_size: u64,
    pub last_probe_time: Timestamp,
    pub last_transition_time: Timestamp,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What each condition's status was and since when, from one pass to the next.
#[derive(Clone, Debug, Default)]
pub struct StatusMemory {
    since: HashMap<String, (ConditionStatus, Timestamp)>,
}

/// One render's view of the memory: reads the old map, builds the next one, so conditions
/// of groups that are gone are forgotten.
struct Transitions<'a> {
    old: &'a HashMap<String, (ConditionStatus, Timestamp)>,
    next: HashMap<String, (ConditionStatus, Timestamp)>,
    now: Timestamp,
}

impl Transitions<'_> {
    /// When `key` took `status`: kept while the status holds, `now` when it changes.
    fn since(&mut self, key: String, status: ConditionStatus) -> Timestamp {
        let at = match self.old.get(&key) {
            Some((old, at)) if *old == status => *at,
            _ => self.now,
        };
        self.next.insert(key, (status, at));
        at
    }
}

/// Knobs of the rendering that do not come from the plan.
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderOptions {
    /// Add [`DRY_RUN_NOTE`] to `message`.
    pub dry_run: bool,
}

/// The document written at start-up, before the first pass: upstream's `Initializing`.
pub fn initializing(options: RenderOptions, now: Timestamp) -> AutoscalerStatus {
    AutoscalerStatus {
        time: go_time(now),
        autoscaler_status: Phase::Initializing,
        message: options.dry_run.then(|| DRY_RUN_NOTE.to_string()),
        cluster_wide: None,
        node_groups: Vec::new(),
    }
}

/// The document for a pass's plan; updates `memory`.
pub fn render(
    plan: &Plan,
    memory: &mut StatusMemory,
    options: RenderOptions,
    now: Timestamp,
) -> AutoscalerStatus {
    let mut t = Transitions {
        old: &memory.since,
        next: HashMap::new(),
        now,
    };
    let cluster_wide = cluster_wide(plan, &mut t);
    let node_groups = plan
        .health
        .node_groups
        .iter()
        .filter_map(|g| {
            let status = plan.node_groups.iter().find(|s| s.id == g.id)?;
            Some(group_entry(plan, g, status, &mut t))
        })
        .collect();
    memory.since = t.next;
    AutoscalerStatus {
        time: go_time(now),
        autoscaler_status: Phase::Running,
        message: message(&plan.health.cluster, options),
        cluster_wide: Some(cluster_wide),
        node_groups,
    }
}

/// Upstream's messages for an empty cluster, and the dry-run note.
fn message(c: &ClusterHealth, options: RenderOptions) -> Option<String> {
    let registered = c.ready + c.unready + c.not_started + c.deleting;
    let mut parts = Vec::new();
    if registered == 0 {
        parts.push("Cluster has no nodes.");
    } else if c.ready == 0 {
        parts.push("Cluster has no ready nodes.");
    }
    if options.dry_run {
        parts.push(DRY_RUN_NOTE);
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn cluster_wide(plan: &Plan, t: &mut Transitions<'_>) -> ClusterWide {
    let c = &plan.health.cluster;
    let health = if c.healthy {
        ConditionStatus::Healthy
    } else {
        ConditionStatus::Unhealthy
    };
    let scaling = !plan.scale_up.is_empty()
        || plan
            .health
            .node_groups
            .iter()
            .any(|g| g.scale_up_in_flight.is_some());
    let scale_up = if scaling {
        ConditionStatus::InProgress
    } else {
        ConditionStatus::NoActivity
    };
    let candidates = plan.unneeded.len() as u64;
    let counts = counts(
        c.ready,
        c.unready,
        c.not_started,
        c.deleting,
        c.unregistered,
        c.long_unregistered,
    );
    ClusterWide {
        health: HealthCondition {
            status: health,
            node_counts: counts,
            last_probe_time: t.now,
            last_transition_time: t.since("health".into(), health),
        },
        scale_up: ScaleUpCondition {
            status: scale_up,
            backoff_info: None,
            last_probe_time: t.now,
            last_transition_time: t.since("scaleUp".into(), scale_up),
        },
        scale_down: scale_down(candidates, "scaleDown".into(), t),
    }
}

fn group_entry(
    plan: &Plan,
    g: &GroupHealth,
    status: &NodeGroupStatus,
    t: &mut Transitions<'_>,
) -> NodeGroupEntry {
    let id = g.id.as_str();
    let health = if g.healthy {
        ConditionStatus::Healthy
    } else {
        ConditionStatus::Unhealthy
    };
    let (scale_up, backoff_info) = group_scale_up(plan, g);
    let candidates = plan
        .unneeded
        .iter()
        .filter(|u| u.node_group == g.id)
        .count() as u64;
    NodeGroupEntry {
        name: id.to_string(),
        health: GroupHealthCondition {
            status: health,
            node_counts: counts(
                g.ready,
                g.unready,
                g.not_started,
                g.deleting,
                g.unregistered,
                g.long_unregistered,
            ),
            cloud_provider_target: status.target.unwrap_or(0),
            min_size: status.min.unwrap_or(0),
            max_size: status.max.unwrap_or(0),
            last_probe_time: t.now,
            last_transition_time: t.since(format!("{id}/health"), health),
        },
        scale_up: ScaleUpCondition {
            status: scale_up,
            backoff_info,
            last_probe_time: t.now,
            last_transition_time: t.since(format!("{id}/scaleUp"), scale_up),
        },
        scale_down: scale_down(candidates, format!("{id}/scaleDown"), t),
    }
}

/// Upstream's order: a scale-up under way wins, then an unhealthy group, then a backoff: the
/// group's own, else the fleet's (another cluster's failure, which the engine never puts on a
/// group backed off on its own).
fn group_scale_up(plan: &Plan, g: &GroupHealth) -> (ConditionStatus, Option<BackoffInfo>) {
    let scaling =
        g.scale_up_in_flight.is_some() || plan.scale_up.iter().any(|a| a.node_group == g.id);
    let backoff = |code: &str, message: &str| {
        let info = BackoffInfo {
            error_code: code.to_string(),
            error_message: truncate(message, MAX_ERROR_MESSAGE),
        };
        (ConditionStatus::Backoff, Some(info))
    };
    if scaling {
        (ConditionStatus::InProgress, None)
    } else if !g.healthy {
        (ConditionStatus::Unhealthy, None)
    } else if g.backoff_until.is_some() {
        let reason = g.backoff_reason.as_deref().unwrap_or_default();
        backoff(g.backoff_kind.unwrap_or_default().error_code(), reason)
    } else if let Some(f) = &g.fleet_backoff {
        backoff(FLEET_BACKOFF_ERROR_CODE, &f.explain())
    } else {
        (ConditionStatus::NoActivity, None)
    }
}

fn scale_down(candidates: u64, key: String, t: &mut Transitions<'_>) -> ScaleDownCondition {
    let status = if candidates > 0 {
        ConditionStatus::CandidatesPresent
    } else {
        ConditionStatus::NoCandidates
    };
    ScaleDownCondition {
        status,
        candidates,
        last_probe_time: t.now,
        last_transition_time: t.since(key, status),
    }
}

fn counts(
    ready: u64,
    unready: u64,
    not_started: u64,
    deleting: u64,
    unregistered: u64,
    long_unregistered: u64,
) -> NodeCounts {
    NodeCounts {
        registered: RegisteredCounts {
            total: ready + unready + not_started + deleting,
            ready,
            not_started,
            being_deleted: deleting,
            unready: UnreadyCounts {
                total: unready,
                resource_unready: 0,
            },
        },
        long_unregistered,
        unregistered,
    }
}

/// At most `max` characters, the cut marked as upstream marks it.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(TRUNCATED.len());
    let mut out: String = s.chars().take(keep).collect();
    out.push_str(TRUNCATED);
    out
}

impl AutoscalerStatus {
    /// The document with its probe times blanked: two passes that differ only in these
    /// have nothing new to say.
    pub fn content(&self) -> AutoscalerStatus {
        let mut c = self.clone();
        c.time.clear();
        if let Some(w) = &mut c.cluster_wide {
            w.health.last_probe_time = Timestamp::UNIX_EPOCH;
            w.scale_up.last_probe_time = Timestamp::UNIX_EPOCH;
            w.scale_down.last_probe_time = Timestamp::UNIX_EPOCH;
        }
        for g in &mut c.node_groups {
            g.health.last_probe_time = Timestamp::UNIX_EPOCH;
            g.scale_up.last_probe_time = Timestamp::UNIX_EPOCH;
            g.scale_down.last_probe_time = Timestamp::UNIX_EPOCH;
        }
        c
    }

    /// The YAML written under the ConfigMap's `status` key.
    pub fn to_yaml(&self) -> Result<String, serde_saphyr::SerializeError> {
        serde_saphyr::to_string(self)
    }
}

/// Go's `2006-01-02 15:04:05.999999999 -0700 MST` in UTC: the format of upstream's `time`
/// field and `last-updated` annotation (trailing zeros of the fraction dropped).
pub fn go_time(t: Timestamp) -> String {
    let base = t.strftime("%Y-%m-%d %H:%M:%S");
    let nanos = t.subsec_nanosecond().unsigned_abs();
    if nanos == 0 {
        format!("{base} +0000 UTC")
    } else {
        let frac = format!("{nanos:09}");
        format!("{base}.{} +0000 UTC", frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
