//! fleet.toml `[fleet]`: when the fleet as a whole counts as degraded, and what the hub
//! then holds back.
//!
//! Per cluster, the engine already halts when too many nodes are unready. Across a fleet, the
//! same idea one level up: when many clusters go wrong at once, the cause is rarely in each
//! cluster (a cloud region, a network path to the hub, a bad rollout), and removing capacity
//! from the clusters that still look fine is the riskier move.

use serde::{Deserialize, Serialize};

use super::ConfigIssue;

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetHealthConfig {
    /// Degraded when more than this percentage of the enabled clusters are unhealthy.
    pub max_unhealthy_percentage: f64,
    /// Degraded when more than this many clusters are unhealthy (off when absent).
    pub max_unhealthy_clusters: Option<u32>,
    /// Degraded when more than this percentage of all nodes in the fleet are unready (off
    /// when absent).
    pub max_unready_nodes_percentage: Option<f64>,
    /// While degraded, no cluster starts a scale-down (scale-ups and repairs go on).
    pub pause_scale_down_when_degraded: bool,
    /// `[fleet.shared_failures]`: capacity failures shared across clusters.
    pub shared_failures: SharedFailuresConfig,
}

/// A scale-up that fails in one cluster for want of capacity (a machine's capacity or quota
/// error, a provisioning timeout) backs off every other cluster's groups of the same
/// instance type in the same zone (or region), for as long.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SharedFailuresConfig {
    pub enabled: bool,
    /// `zone` (the same instance type in the same zone) or `region`.
    pub scope: crate::engine::policy::FailureScope,
}

impl Default for SharedFailuresConfig {
    fn default() -> Self {
        SharedFailuresConfig {
            enabled: true,
            scope: crate::engine::policy::FailureScope::Zone,
        }
    }
}

impl Default for FleetHealthConfig {
    fn default() -> Self {
        FleetHealthConfig {
            max_unhealthy_percentage: 50.0,
            max_unhealthy_clusters: None,
            max_unready_nodes_percentage: None,
            pause_scale_down_when_degraded: true,
            shared_failures: SharedFailuresConfig::default(),
        }
    }
}

impl FleetHealthConfig {
    pub fn validate(&self, issues: &mut Vec<ConfigIssue>) {
        let percentages = [
            (
                "max_unhealthy_percentage",
                Some(self.max_unhealthy_percentage),
            ),
            (
                "max_unready_nodes_percentage",
                self.max_unready_nodes_percentage,
            ),
        ];
        for (key, value) in percentages {
            if let Some(v) = value
                && !(0.0..=100.0).contains(&v)
            {
                issues.push(ConfigIssue {
                    key: format!("fleet.{key}"),
                    message: format!("{v} is not a percentage between 0 and 100"),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_outside_0_to_100_name_their_key() {
        let config = FleetHealthConfig {
            max_unhealthy_percentage: 120.0,
            max_unready_nodes_percentage: Some(-1.0),
            ..FleetHealthConfig::default()
        };
        let mut issues = Vec::new();
        config.validate(&mut issues);
        let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "fleet.max_unhealthy_percentage",
                "fleet.max_unready_nodes_percentage"
            ]
        );
        let mut none = Vec::new();
        FleetHealthConfig::default().validate(&mut none);
        assert!(none.is_empty());
    }
}
