//! Fleet policy: what the hub decides for every cluster and hands each cluster's engine as an
//! input of its pass, so that a plan made with it is replayable offline (`fleetscaler plan
//! --fleet-policy FILE`) exactly as the hub made it.

use serde::{Deserialize, Serialize};

/// The fleet's decisions one cluster's pass takes into account.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetPolicy {
    /// Why scale-down is held back on every cluster (a degraded fleet), while it is: the
    /// pass still finds the unneeded nodes and keeps their timers, and removes none of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_hold: Option<String>,
}

impl FleetPolicy {
    /// A cluster on its own: the fleet holds nothing back.
    pub fn none() -> Self {
        FleetPolicy::default()
    }

    /// Reads a policy as `fleetscaler plan --fleet-policy` takes it (JSON), naming the field
    /// that is wrong.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            format!("{path}: {}", e.inner())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_read_from_json_and_unknown_fields_are_named() {
        let p = FleetPolicy::from_json(r#"{"scaleDownHold": "fleet degraded"}"#).unwrap();
        assert_eq!(p.scale_down_hold.as_deref(), Some("fleet degraded"));
        assert_eq!(FleetPolicy::from_json("{}").unwrap(), FleetPolicy::none());
        let e = FleetPolicy::from_json(r#"{"scaleDownHeld": "x"}"#).unwrap_err();
        assert!(e.contains("scaleDownHeld"), "{e}");
        let e = FleetPolicy::from_json(r#"{"scaleDownHold": 3}"#).unwrap_err();
        assert!(e.starts_with("scaleDownHold"), "{e}");
    }
}
