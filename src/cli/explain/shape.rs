//! A pending pod's explanation: as the hub's plan has it (`pendingPods[]`,
//! docs/plan-format.md), and as `explain --output json` prints it, every key present (`null`
//! when it does not apply), so that scripts need not guess.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One entry of the plan's `pendingPods`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PodDoc {
    pub pod: String,
    pub outcome: String,
    pub node_group: Option<String>,
    pub node: Option<String>,
    #[serde(default)]
    pub reasons: Vec<ReasonDoc>,
}

/// One reason: a code and its message, about a node group or not.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReasonDoc {
    pub node_group: Option<String>,
    pub code: String,
    pub message: String,
}

/// What `explain` found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Explanation {
    pub server: String,
    pub cluster: String,
    /// `namespace/name`.
    pub pod: String,
    /// When the hub's pass that explained it ran, by the hub's clock.
    pub plan_at: Timestamp,
    /// `scaleUp`, `fitsExisting`, `fitsUpcoming`, `noScaleUp` or `belowPriorityCutoff`.
    pub outcome: String,
    /// For `scaleUp` and `fitsUpcoming`: the group.
    pub node_group: Option<String>,
    /// For `fitsExisting` and `fitsUpcoming`: the node.
    pub node: Option<String>,
    /// In the plan's order: one per node group for `noScaleUp`, then those about no group.
    pub reasons: Vec<ReasonDoc>,
}

impl Explanation {
    pub(super) fn new(server: &str, cluster: &str, plan_at: Timestamp, pod: PodDoc) -> Self {
        Explanation {
            server: server.to_string(),
            cluster: cluster.to_string(),
            pod: pod.pod,
            plan_at,
            outcome: pod.outcome,
            node_group: pod.node_group,
            node: pod.node,
            reasons: pod.reasons,
        }
    }

    /// The reasons under their node groups, in the order the groups first come; those about
    /// no group last, under `None`.
    pub(super) fn by_group(&self) -> Vec<(Option<&str>, Vec<&ReasonDoc>)> {
        let mut groups: Vec<(Option<&str>, Vec<&ReasonDoc>)> = Vec::new();
        for r in &self.reasons {
            let key = r.node_group.as_deref();
            match groups.iter_mut().find(|(g, _)| *g == key) {
                Some((_, list)) => list.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        groups.sort_by_key(|(g, _)| g.is_none());
        groups
    }
}
