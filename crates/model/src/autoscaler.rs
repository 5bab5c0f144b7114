//! OpenShift's autoscaler resources: the cluster-wide `ClusterAutoscaler`
//! (`autoscaling.openshift.io/v1`) and the per-MachineSet `MachineAutoscaler`
//! (`autoscaling.openshift.io/v1beta1`).
//!
//! The ClusterAutoscaler spec is kept as written (strings for durations and the threshold),
//! so the engine can validate each field on its own and report a bad one without losing the rest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::meta::{FieldError, ObjectKey, Projector, key_of};

/// The name of the one ClusterAutoscaler the operator honours.
pub const CLUSTER_AUTOSCALER_NAME: &str = "default";

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterAutoscalerSpec {
    pub pod_priority_threshold: Option<i64>,
    pub max_pod_grace_period: Option<i64>,
    pub max_node_provision_time: Option<String>,
    pub resource_limits: Option<ResourceLimitsSpec>,
    pub scale_down: Option<ScaleDownSpec>,
    pub scale_up: Option<ScaleUpSpec>,
    pub balance_similar_node_groups: Option<bool>,
    pub balancing_ignored_labels: Vec<String>,
    pub ignore_daemonsets_utilization: Option<bool>,
    pub skip_nodes_with_local_storage: Option<bool>,
    pub expanders: Vec<String>,
    pub log_verbosity: Option<i64>,
    /// `Enabled` / `Disabled`.
    pub enforce_node_group_min_size: Option<String>,
    /// Taint keys a node carries until it is ready for workloads (e.g. a CNI agent's).
    pub startup_taints: Vec<String>,
    /// Fields this version does not know, kept so that the plan can warn about each.
    #[serde(flatten, skip_serializing)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceLimitsSpec {
    pub max_nodes_total: Option<i64>,
    pub cores: Option<RangeSpec>,
    /// GiB.
    pub memory: Option<RangeSpec>,
    pub gpus: Vec<GpuLimitSpec>,
    #[serde(flatten, skip_serializing)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct RangeSpec {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct GpuLimitSpec {
    #[serde(rename = "type")]
    pub type_: String,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScaleDownSpec {
    pub enabled: Option<bool>,
    pub delay_after_add: Option<String>,
    pub delay_after_delete: Option<String>,
    pub delay_after_failure: Option<String>,
    pub unneeded_time: Option<String>,
    pub utilization_threshold: Option<String>,
    /// `Enabled` / `Disabled`.
    pub cordon_node_before_terminating: Option<String>,
    #[serde(flatten, skip_serializing)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScaleUpSpec {
    pub new_pod_scale_up_delay: Option<String>,
    #[serde(flatten, skip_serializing)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

impl ClusterAutoscalerSpec {
    /// The paths (`scaleDown.foo`) of the fields this version does not know.
    pub fn unknown_fields(&self) -> Vec<String> {
        let nested = |prefix: &str, map: Option<&BTreeMap<String, serde_json::Value>>| {
            map.into_iter()
                .flat_map(|m| m.keys())
                .map(|k| format!("{prefix}{k}"))
                .collect::<Vec<_>>()
        };
        let mut out = nested("", Some(&self.unknown));
        out.extend(nested(
            "resourceLimits.",
            self.resource_limits.as_ref().map(|r| &r.unknown),
        ));
        out.extend(nested(
            "scaleDown.",
            self.scale_down.as_ref().map(|r| &r.unknown),
        ));
        out.extend(nested(
            "scaleUp.",
            self.scale_up.as_ref().map(|r| &r.unknown),
        ));
        out
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterAutoscaler {
    pub name: String,
    pub spec: ClusterAutoscalerSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterAutoscalerWire {
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    spec: ClusterAutoscalerSpec,
}

impl ClusterAutoscaler {
    pub fn from_json(value: serde_json::Value) -> Result<Self, FieldError> {
        let wire: ClusterAutoscalerWire = deserialize(value)?;
        Ok(ClusterAutoscaler {
            name: wire.metadata.name.unwrap_or_default(),
            spec: wire.spec,
        })
    }
}

/// A MachineAutoscaler: min/max replicas for one MachineSet in its namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineAutoscaler {
    pub key: ObjectKey,
    pub min_replicas: Option<i64>,
    pub max_replicas: Option<i64>,
    pub target_api_version: String,
    pub target_kind: String,
    pub target_name: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct MachineAutoscalerWire {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: MachineAutoscalerSpecWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct MachineAutoscalerSpecWire {
    min_replicas: Option<i64>,
    max_replicas: Option<i64>,
    scale_target_ref: TargetRefWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct TargetRefWire {
    api_version: String,
    kind: String,
    name: String,
}

impl MachineAutoscaler {
    pub fn from_json(value: serde_json::Value, p: &mut Projector) -> Result<Self, FieldError> {
        let wire: MachineAutoscalerWire = deserialize(value)?;
        let target = wire.spec.scale_target_ref;
        Ok(MachineAutoscaler {
            key: key_of(&wire.metadata, p),
            min_replicas: wire.spec.min_replicas,
            max_replicas: wire.spec.max_replicas,
            target_api_version: target.api_version,
            target_kind: target.kind,
            target_name: target.name,
        })
    }
}

fn deserialize<T: for<'de> Deserialize<'de>>(value: serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| FieldError::new(e.path().to_string(), e.inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_autoscaler_reads_the_seed_example() {
        let ca = ClusterAutoscaler::from_json(serde_json::json!({
            "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "metadata": {"name": "default"},
            "spec": {"podPriorityThreshold": -10,
                "resourceLimits": {"maxNodesTotal": 24, "cores": {"min": 8, "max": 128}, "memory": {"min": 4, "max": 256},
                    "gpus": [{"type": "nvidia.com/gpu", "min": 0, "max": 16}]},
                "logVerbosity": 4,
                "scaleDown": {"enabled": true, "delayAfterAdd": "10m", "utilizationThreshold": "0.4"}}
        }))
        .unwrap();
        assert_eq!(ca.name, "default");
        let limits = ca.spec.resource_limits.unwrap();
        assert_eq!(limits.max_nodes_total, Some(24));
        assert_eq!(limits.gpus[0].max, Some(16));
        assert_eq!(
            ca.spec.scale_down.unwrap().utilization_threshold.as_deref(),
            Some("0.4")
        );
    }

    #[test]
    fn machine_autoscaler_and_bad_types() {
        let ma = MachineAutoscaler::from_json(
            serde_json::json!({"metadata": {"name": "ma", "namespace": "openshift-machine-api"},
                "spec": {"minReplicas": 1, "maxReplicas": 12,
                    "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "worker-a"}}}),
            &mut Projector::default(),
        )
        .unwrap();
        assert_eq!((ma.min_replicas, ma.max_replicas), (Some(1), Some(12)));
        let err = ClusterAutoscaler::from_json(
            serde_json::json!({"spec": {"resourceLimits": {"maxNodesTotal": "many"}}}),
        )
        .unwrap_err();
        assert_eq!(err.path, "spec.resourceLimits.maxNodesTotal");
    }
}
