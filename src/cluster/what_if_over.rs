//! A proposed limit a cluster is already at or over (`max_nodes_total = 11` with 13 nodes).
//! With no pod pending, both plans decide the same now and the comparison says nothing, yet
//! with the proposal nothing would be added until the cluster is back under: the answer says
//! so apart from the changes.

use serde::Serialize;

use crate::engine::limits::{LimitEntry, LimitsReport};

/// One limit the proposal sets at or below what the cluster already has.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverLimit {
    /// As the plan's `limits` names it: `maxNodesTotal`, `cores`, `memoryGiB`, `gpus/<type>`.
    pub limit: String,
    /// What the cluster has now: nodes, cores, GiB of memory, GPUs of the type.
    pub used: f64,
    /// The maximum in force (null: none).
    pub current: Option<u64>,
    pub proposed: u64,
}

impl OverLimit {
    /// What `used` counts, in words.
    pub fn unit(&self) -> &str {
        match self.limit.as_str() {
            "maxNodesTotal" => "nodes",
            "cores" => "cores",
            "memoryGiB" => "GiB",
            other => other.strip_prefix("gpus/").unwrap_or(other),
        }
    }

    /// Over the limit, not just at it.
    pub fn over(&self) -> bool {
        self.used > self.proposed as f64
    }
}

/// The limits of the proposed plan that the cluster is already at or over, of those the
/// proposal changes (a limit it leaves as it is is not the proposal's doing).
pub fn over_limits(current: &LimitsReport, proposed: &LimitsReport) -> Vec<OverLimit> {
    let pairs = [
        (
            "maxNodesTotal",
            &current.max_nodes_total,
            &proposed.max_nodes_total,
        ),
        ("cores", &current.cores, &proposed.cores),
        ("memoryGiB", &current.memory_gib, &proposed.memory_gib),
    ];
    let mut out: Vec<OverLimit> = pairs
        .into_iter()
        .filter_map(|(name, c, p)| at_or_over(name, c, p))
        .collect();
    for g in &proposed.gpus {
        let before = current
            .gpus
            .iter()
            .find(|c| c.gpu_type == g.gpu_type)
            .map(|c| c.max);
        if before != Some(g.max) && g.used >= g.max {
            out.push(OverLimit {
                limit: format!("gpus/{}", g.gpu_type),
                used: g.used as f64,
                current: before,
                proposed: g.max,
            });
        }
    }
    out
}

fn at_or_over(name: &str, current: &LimitEntry, proposed: &LimitEntry) -> Option<OverLimit> {
    let max = proposed.max?;
    (proposed.max != current.max && proposed.used >= max as f64).then(|| OverLimit {
        limit: name.to_string(),
        used: proposed.used,
        current: current.max,
        proposed: max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::limits::GpuLimitEntry;

    fn entry(used: f64, max: Option<u64>) -> LimitEntry {
        LimitEntry {
            used,
            min: None,
            max,
            reached: false,
        }
    }

    fn report(nodes: f64, max_nodes: Option<u64>, gpus: Vec<GpuLimitEntry>) -> LimitsReport {
        LimitsReport {
            max_nodes_total: entry(nodes, max_nodes),
            cores: entry(52.0, None),
            memory_gib: entry(208.0, None),
            gpus,
        }
    }

    fn gpu(used: u64, max: u64) -> GpuLimitEntry {
        GpuLimitEntry {
            gpu_type: "nvidia.com/gpu".into(),
            used,
            min: 0,
            max,
            reached: false,
        }
    }

    #[test]
    fn a_proposed_maximum_below_what_the_cluster_has_is_said() {
        let over = over_limits(&report(13.0, None, vec![]), &report(13.0, Some(11), vec![]));
        assert_eq!(
            over,
            [OverLimit {
                limit: "maxNodesTotal".into(),
                used: 13.0,
                current: None,
                proposed: 11
            }]
        );
        assert!(over[0].over());
        assert_eq!(over[0].unit(), "nodes");
        // At the limit: nothing can be added either, but it is not over.
        let at = over_limits(
            &report(11.0, Some(20), vec![]),
            &report(11.0, Some(11), vec![]),
        );
        assert!(!at[0].over());
    }

    #[test]
    fn a_maximum_with_room_or_not_changed_by_the_proposal_is_not() {
        let room = over_limits(&report(9.0, None, vec![]), &report(9.0, Some(11), vec![]));
        assert_eq!(room, []);
        // Already over in force, and the proposal leaves it: not the proposal's doing.
        let same = over_limits(
            &report(13.0, Some(11), vec![]),
            &report(13.0, Some(11), vec![]),
        );
        assert_eq!(same, []);
    }

    #[test]
    fn gpus_are_limits_of_their_type() {
        let over = over_limits(
            &report(9.0, None, vec![]),
            &report(9.0, None, vec![gpu(4, 2)]),
        );
        assert_eq!(over[0].limit, "gpus/nvidia.com/gpu");
        assert_eq!((over[0].unit(), over[0].current), ("nvidia.com/gpu", None));
        let same = over_limits(
            &report(9.0, None, vec![gpu(4, 2)]),
            &report(9.0, None, vec![gpu(4, 2)]),
        );
        assert_eq!(same, []);
    }
}
