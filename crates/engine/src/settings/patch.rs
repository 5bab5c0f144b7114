//! `SettingsPatch`: what one configuration layer says. Each setting is declared once in the
//! macro below: its patch field (fleet.toml key), its check, and its place in `SETTING_KEYS`.
//! Applying a patch sets the valid values, reports the invalid ones by key, and leaves the
//! rest to the layers below.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ExpanderKind, GpuLimit, NodeGroupSpec, Range, Settings, opt_duration_serde};
use fleetscaler_model::autoscaler::{ClusterAutoscalerSpec, RangeSpec, ResourceLimitsSpec};
use fleetscaler_model::duration::parse_go_duration;

/// A problem with one setting, named by its key; the setting keeps its previous value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SettingWarning {
    pub key: String,
    pub message: String,
}

impl SettingWarning {
    /// As the plan says it: about `setting KEY`, wherever the plan is made.
    pub fn warning(&self) -> fleetscaler_model::Warning {
        fleetscaler_model::Warning::about(
            fleetscaler_model::WarningCode::InvalidSetting,
            format_args!("setting {}", self.key),
            self.message.clone(),
        )
    }
}

impl fmt::Display for SettingWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

macro_rules! settings_patch {
    ($( $(#[$attr:meta])* $field:ident : $ty:ty => $check:expr ),* $(,)?) => {
        /// A partial set of settings: what one configuration layer says. Unset fields leave the
        /// value from the layers below. In fleet.toml it is written in snake_case.
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct SettingsPatch {
            $( $(#[$attr])* pub $field: Option<$ty>, )*
        }

        /// Every setting's key, as written in fleet.toml.
        pub const SETTING_KEYS: &[&str] = &[ $( stringify!($field), )* ];

        impl SettingsPatch {
            /// Applies this layer; returns the keys it set (for provenance) and the problems
            /// found. An invalid value is skipped, never half-applied.
            pub fn apply_to(&self, s: &mut Settings) -> (Vec<&'static str>, Vec<SettingWarning>) {
                let mut set = Vec::new();
                let mut warnings = Vec::new();
                $(
                    if let Some(v) = &self.$field {
                        let check: fn(&$ty) -> Result<_, String> = $check;
                        match check(v) {
                            Ok(value) => {
                                s.$field = value;
                                set.push(stringify!($field));
                            }
                            Err(message) => warnings.push(SettingWarning {
                                key: stringify!($field).to_string(),
                                message,
                            }),
                        }
                    }
                )*
                (set, warnings)
            }

            /// This layer over `base`: what this one sets wins, the rest is `base`'s.
            pub fn over(&self, base: &SettingsPatch) -> SettingsPatch {
                SettingsPatch {
                    $( $field: self.$field.clone().or_else(|| base.$field.clone()), )*
                }
            }

            /// The keys this layer sets.
            pub fn keys(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $( if self.$field.is_some() { keys.push(stringify!($field)); } )*
                keys
            }
        }
    };
}

fn any<T: Clone>(v: &T) -> Result<T, String> {
    Ok(v.clone())
}

fn at_least_one(v: &u64) -> Result<u64, String> {
    if *v == 0 {
        Err("must be at least 1".into())
    } else {
        Ok(*v)
    }
}

fn fraction(v: &f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(v) {
        Ok(*v)
    } else {
        Err(format!("{v} is not between 0 and 1"))
    }
}

settings_patch! {
    pod_priority_threshold: i32 => any,
    /// 0 means unlimited, as the upstream flag.
    max_nodes_total: u64 => |v| Ok((*v > 0).then_some(*v)),
    cores: Range => check_range,
    memory_gib: Range => check_range,
    gpus: Vec<GpuLimit> => |v| check_gpus(v),
    max_nodes_per_scaleup: u64 => at_least_one,
    expanders: Vec<ExpanderKind> => |v| check_expanders(v),
    /// Priority expander map; keys are priorities written as strings (TOML keys are strings).
    priorities: BTreeMap<String, Vec<String>> => |v| parse_priorities_map(v).map(Some),
    balance_similar_node_groups: bool => any,
    balancing_ignored_labels: Vec<String> => any,
    node_groups: Vec<NodeGroupSpec> => |v| v.iter().try_for_each(NodeGroupSpec::check).map(|()| v.clone()),
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    new_pod_scale_up_delay: Duration => any,
    scale_down_enabled: bool => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    scale_down_delay_after_add: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    scale_down_delay_after_delete: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    scale_down_delay_after_failure: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    scale_down_unneeded_time: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    scale_down_unready_time: Duration => any,
    scale_down_utilization_threshold: f64 => fraction,
    scale_down_gpu_utilization_threshold: f64 => fraction,
    ignore_daemonsets_utilization: bool => any,
    skip_nodes_with_local_storage: bool => any,
    skip_nodes_with_system_pods: bool => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_pod_grace_period: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_pod_eviction_time: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    node_delete_delay_after_taint: Duration => any,
    cordon_node_before_terminating: bool => any,
    /// Raise a group whose target is below its min to the min, pods pending or not.
    enforce_node_group_min_size: bool => any,
    /// Taint keys that mean "not ready yet" (beside the `startup-taint.cluster-autoscaler.kubernetes.io/` prefix).
    startup_taints: Vec<String> => any,
    max_scale_down_parallelism: u64 => at_least_one,
    max_drain_parallelism: u64 => at_least_one,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_node_provision_time: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_node_startup_time: Duration => any,
    ok_total_unready_count: u64 => any,
    max_total_unready_percentage: f64 => |v| if (0.0..=100.0).contains(v) { Ok(*v) } else { Err(format!("{v} is not a percentage")) },
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    initial_node_group_backoff: Duration => |v| if v.is_zero() { Err("must be longer than 0s".into()) } else { Ok(*v) },
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_node_group_backoff: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    node_group_backoff_reset: Duration => any,
    seed: u64 => any,
}

impl SettingsPatch {
    /// What a cluster's `ClusterAutoscaler` resource says, as the OpenShift operator would pass
    /// it to the autoscaler. Fields that cannot be read are reported and left out.
    pub fn from_cluster_autoscaler(
        spec: &ClusterAutoscalerSpec,
    ) -> (SettingsPatch, Vec<SettingWarning>) {
        let mut patch = SettingsPatch::default();
        let mut warnings = Vec::new();
        let mut warn = |key: &str, message: String| {
            warnings.push(SettingWarning {
                key: format!("ClusterAutoscaler.spec.{key}"),
                message,
            })
        };
        if let Some(t) = spec.pod_priority_threshold {
            match i32::try_from(t) {
                Ok(v) => patch.pod_priority_threshold = Some(v),
                Err(_) => warn(
                    "podPriorityThreshold",
                    format!("{t} is not a 32-bit integer"),
                ),
            }
        }
        if let Some(text) = &spec.max_node_provision_time {
            patch.max_node_provision_time = duration(text, "maxNodeProvisionTime", &mut warn);
        }
        if let Some(secs) = spec.max_pod_grace_period {
            match u64::try_from(secs) {
                Ok(s) => patch.max_pod_grace_period = Some(Duration::from_secs(s)),
                Err(_) => warn("maxPodGracePeriod", format!("{secs} is negative")),
            }
        }
        if let Some(limits) = &spec.resource_limits {
            resource_limits_patch(limits, &mut patch, &mut warn);
        }
        if let Some(text) = spec
            .scale_up
            .as_ref()
            .and_then(|s| s.new_pod_scale_up_delay.as_ref())
        {
            patch.new_pod_scale_up_delay = duration(text, "scaleUp.newPodScaleUpDelay", &mut warn);
        }
        if let Some(sd) = &spec.scale_down {
            patch.scale_down_enabled = sd.enabled;
            let d = |text: &Option<String>, key: &str, warn: &mut dyn FnMut(&str, String)| {
                text.as_ref()
                    .and_then(|t| duration(t, &format!("scaleDown.{key}"), warn))
            };
            patch.scale_down_delay_after_add = d(&sd.delay_after_add, "delayAfterAdd", &mut warn);
            patch.scale_down_delay_after_delete =
                d(&sd.delay_after_delete, "delayAfterDelete", &mut warn);
            patch.scale_down_delay_after_failure =
                d(&sd.delay_after_failure, "delayAfterFailure", &mut warn);
            patch.scale_down_unneeded_time = d(&sd.unneeded_time, "unneededTime", &mut warn);
            if let Some(text) = &sd.cordon_node_before_terminating {
                patch.cordon_node_before_terminating =
                    mode(text, "scaleDown.cordonNodeBeforeTerminating", &mut warn);
            }
            if let Some(text) = &sd.utilization_threshold {
                match text
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| ())
                    .and_then(|v| fraction(&v).map_err(|_| ()))
                {
                    Ok(v) => patch.scale_down_utilization_threshold = Some(v),
                    Err(()) => warn(
                        "scaleDown.utilizationThreshold",
                        format!("{text:?} is not a number between 0 and 1"),
                    ),
                }
            }
        }
        if let Some(text) = &spec.enforce_node_group_min_size {
            patch.enforce_node_group_min_size = mode(text, "enforceNodeGroupMinSize", &mut warn);
        }
        if !spec.startup_taints.is_empty() {
            patch.startup_taints = Some(spec.startup_taints.clone());
        }
        if let Some(v) = spec.log_verbosity {
            warn(
                "logVerbosity",
                format!(
                    "{v} has no effect on fleetscaler: the hub's log level is set with RUST_LOG"
                ),
            );
        }
        for field in spec.unknown_fields() {
            warn(
                &field,
                "is not a field fleetscaler knows; it is ignored".into(),
            );
        }
        patch.ignore_daemonsets_utilization = spec.ignore_daemonsets_utilization;
        patch.skip_nodes_with_local_storage = spec.skip_nodes_with_local_storage;
        patch.balance_similar_node_groups = spec.balance_similar_node_groups;
        if !spec.balancing_ignored_labels.is_empty() {
            patch.balancing_ignored_labels = Some(spec.balancing_ignored_labels.clone());
        }
        if !spec.expanders.is_empty() {
            match ExpanderKind::parse_chain(&spec.expanders.join(",")) {
                Ok(chain) => patch.expanders = Some(chain),
                Err(e) => warn("expanders", e),
            }
        }
        (patch, warnings)
    }
}

/// The operator's `Enabled` / `Disabled` switches.
fn mode(text: &str, key: &str, warn: &mut dyn FnMut(&str, String)) -> Option<bool> {
    match text {
        "Enabled" => Some(true),
        "Disabled" => Some(false),
        _ => {
            warn(key, format!("{text:?} is neither Enabled nor Disabled"));
            None
        }
    }
}

fn duration(text: &str, key: &str, warn: &mut dyn FnMut(&str, String)) -> Option<Duration> {
    parse_go_duration(text)
        .map_err(|e| warn(key, e.to_string()))
        .ok()
}

fn resource_limits_patch(
    limits: &ResourceLimitsSpec,
    patch: &mut SettingsPatch,
    warn: &mut impl FnMut(&str, String),
) {
    if let Some(n) = limits.max_nodes_total {
        match u64::try_from(n) {
            Ok(v) => patch.max_nodes_total = Some(v),
            Err(_) => warn("resourceLimits.maxNodesTotal", format!("{n} is negative")),
        }
    }
    let range = |r: &RangeSpec| -> Result<Range, String> {
        let min = u64::try_from(r.min.unwrap_or(0)).map_err(|_| "min is negative".to_string())?;
        let max = r
            .max
            .map(u64::try_from)
            .transpose()
            .map_err(|_| "max is negative".to_string())?;
        check_range(&Range { min, max })
    };
    if let Some(c) = &limits.cores {
        match range(c) {
            Ok(r) => patch.cores = Some(r),
            Err(e) => warn("resourceLimits.cores", e),
        }
    }
    if let Some(m) = &limits.memory {
        match range(m) {
            Ok(r) => patch.memory_gib = Some(r),
            Err(e) => warn("resourceLimits.memory", e),
        }
    }
    if !limits.gpus.is_empty() {
        let gpus: Result<Vec<GpuLimit>, String> = limits
            .gpus
            .iter()
            .map(|g| {
                let r = range(&RangeSpec {
                    min: g.min,
                    max: g.max,
                })?;
                Ok(GpuLimit {
                    gpu_type: g.type_.clone(),
                    min: r.min,
                    max: r
                        .max
                        .ok_or_else(|| format!("gpu type {:?} has no max", g.type_))?,
                })
            })
            .collect();
        match gpus.and_then(|g| check_gpus(&g)) {
            Ok(g) => patch.gpus = Some(g),
            Err(e) => warn("resourceLimits.gpus", e),
        }
    }
}

fn check_range(r: &Range) -> Result<Range, String> {
    match r.max {
        Some(max) if max < r.min => Err(format!("min {} is greater than max {max}", r.min)),
        _ => Ok(*r),
    }
}

fn check_gpus(gpus: &[GpuLimit]) -> Result<Vec<GpuLimit>, String> {
    for g in gpus {
        if g.gpu_type.is_empty() {
            return Err("a GPU limit has an empty type".to_string());
        }
        if g.max < g.min {
            return Err(format!(
                "GPU type {}: min {} is greater than max {}",
                g.gpu_type, g.min, g.max
            ));
        }
    }
    Ok(gpus.to_vec())
}

fn check_expanders(chain: &[ExpanderKind]) -> Result<Vec<ExpanderKind>, String> {
    let names: Vec<&str> = chain.iter().map(|e| e.as_str()).collect();
    ExpanderKind::parse_chain(&names.join(","))
}

/// Reads a priority map whose keys are integers written as strings.
pub fn parse_priorities_map(
    map: &BTreeMap<String, Vec<String>>,
) -> Result<BTreeMap<i32, Vec<String>>, String> {
    map.iter()
        .map(|(k, v)| {
            let p = k
                .trim()
                .parse::<i32>()
                .map_err(|_| format!("priority {k:?} is not an integer"))?;
            if let Some((pat, e)) = v
                .iter()
                .find_map(|pat| regex::Regex::new(pat).err().map(|e| (pat, e)))
            {
                return Err(format!("priority {k}: regex {pat:?} is invalid: {e}"));
            }
            Ok((p, v.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscaler_model::autoscaler::ClusterAutoscaler;

    #[test]
    fn defaults_match_upstream() {
        let s = Settings::default();
        assert_eq!(s.pod_priority_threshold, -10);
        assert_eq!(s.max_nodes_per_scaleup, 1000);
        assert_eq!(s.expanders, vec![ExpanderKind::LeastWaste]);
        assert_eq!(s.max_node_provision_time, Duration::from_secs(900));
        assert_eq!(s.cores.max, Some(320_000));
        assert_eq!(s.scale_down_unneeded_time, Duration::from_secs(600));
        assert_eq!(s.scale_down_delay_after_failure, Duration::from_secs(180));
        assert_eq!(
            (s.max_scale_down_parallelism, s.max_drain_parallelism),
            (10, 1)
        );
        assert_eq!(s.node_group_backoff_reset, Duration::from_secs(3 * 3600));
    }

    #[test]
    fn a_layer_over_another_wins_where_it_says_something() {
        let base = SettingsPatch {
            max_nodes_total: Some(10),
            seed: Some(1),
            ..Default::default()
        };
        let top = SettingsPatch {
            max_nodes_total: Some(3),
            ..Default::default()
        };
        let merged = top.over(&base);
        assert_eq!((merged.max_nodes_total, merged.seed), (Some(3), Some(1)));
        assert_eq!(merged.keys(), ["max_nodes_total", "seed"]);
        assert!(SettingsPatch::default().keys().is_empty());
    }

    #[test]
    fn expander_chains() {
        assert_eq!(
            ExpanderKind::parse_chain("priority,least-waste").unwrap(),
            vec![ExpanderKind::Priority, ExpanderKind::LeastWaste]
        );
        assert!(ExpanderKind::parse_chain("random,random").is_err());
        assert!(
            ExpanderKind::parse_chain("cheapest")
                .unwrap_err()
                .contains("cheapest")
        );
    }

    #[test]
    fn cluster_autoscaler_patch_keeps_good_fields_and_reports_bad_ones() {
        let ca = ClusterAutoscaler::from_json(serde_json::json!({"metadata": {"name": "default"}, "spec": {
            "podPriorityThreshold": -5,
            "maxNodeProvisionTime": "ten minutes",
            "maxPodGracePeriod": 120,
            "resourceLimits": {"maxNodesTotal": 24, "cores": {"min": 64, "max": 8}, "memory": {"max": 256}},
            "scaleDown": {"enabled": true, "delayAfterAdd": "5m", "unneededTime": "soon", "utilizationThreshold": "0.4"},
            "expanders": ["Priority", "LeastWaste"]
        }}))
        .unwrap();
        let (patch, warnings) = SettingsPatch::from_cluster_autoscaler(&ca.spec);
        let mut s = Settings::default();
        let (set, apply_warnings) = patch.apply_to(&mut s);
        assert!(apply_warnings.is_empty());
        assert_eq!(s.pod_priority_threshold, -5);
        assert_eq!(s.max_nodes_total, Some(24));
        assert_eq!(
            s.memory_gib,
            Range {
                min: 0,
                max: Some(256)
            }
        );
        assert_eq!(s.cores.max, Some(320_000), "invalid range left out");
        assert_eq!(
            s.expanders,
            vec![ExpanderKind::Priority, ExpanderKind::LeastWaste]
        );
        assert_eq!(s.scale_down_delay_after_add, Duration::from_secs(300));
        assert_eq!(s.scale_down_utilization_threshold, 0.4);
        assert_eq!(s.max_pod_grace_period, Duration::from_secs(120));
        let keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "ClusterAutoscaler.spec.maxNodeProvisionTime",
                "ClusterAutoscaler.spec.resourceLimits.cores",
                "ClusterAutoscaler.spec.scaleDown.unneededTime"
            ]
        );
        assert!(set.contains(&"max_nodes_total") && !set.contains(&"cores"));
    }

    #[test]
    fn bad_thresholds_are_reported() {
        let ca = ClusterAutoscaler::from_json(
            serde_json::json!({"spec": {"scaleDown": {"enabled": false, "utilizationThreshold": "1.5"}}}),
        )
        .unwrap();
        let (patch, warnings) = SettingsPatch::from_cluster_autoscaler(&ca.spec);
        assert_eq!(
            warnings[0].key,
            "ClusterAutoscaler.spec.scaleDown.utilizationThreshold"
        );
        assert_eq!(patch.scale_down_enabled, Some(false));
        let patch = SettingsPatch {
            scale_down_utilization_threshold: Some(-0.1),
            max_drain_parallelism: Some(0),
            ..Default::default()
        };
        let (_, warnings) = patch.apply_to(&mut Settings::default());
        assert_eq!(warnings.len(), 2);
    }

    #[test]
    fn setting_keys_cover_every_patch_field() {
        let json: serde_json::Value = serde_json::json!({
            "pod_priority_threshold": 0, "max_nodes_total": 1, "cores": {"max": 2}, "memory_gib": {"max": 2},
            "gpus": [], "max_nodes_per_scaleup": 5, "expanders": ["random"], "priorities": {"1": ["x"]},
            "balance_similar_node_groups": true, "balancing_ignored_labels": [], "node_groups": [], "new_pod_scale_up_delay": "30s",
            "scale_down_enabled": false, "scale_down_delay_after_add": "1m", "scale_down_delay_after_delete": "1m",
            "scale_down_delay_after_failure": "1m", "scale_down_unneeded_time": "1m", "scale_down_unready_time": "1m",
            "scale_down_utilization_threshold": 0.3, "scale_down_gpu_utilization_threshold": 0.3,
            "ignore_daemonsets_utilization": true, "skip_nodes_with_local_storage": false,
            "skip_nodes_with_system_pods": false, "max_pod_grace_period": "30s", "max_scale_down_parallelism": 3,
            "max_pod_eviction_time": "1m", "node_delete_delay_after_taint": "1s", "cordon_node_before_terminating": false,
            "enforce_node_group_min_size": true, "startup_taints": ["node.cilium.io/agent-not-ready"],
            "max_drain_parallelism": 2, "max_node_provision_time": "1m", "max_node_startup_time": "1m",
            "ok_total_unready_count": 1, "max_total_unready_percentage": 10.0, "initial_node_group_backoff": "1m",
            "max_node_group_backoff": "2m", "node_group_backoff_reset": "1h", "seed": 3
        });
        assert_eq!(
            json.as_object().unwrap().len(),
            SETTING_KEYS.len(),
            "the test lists every key"
        );
        let full: SettingsPatch = serde_json::from_value(json).unwrap();
        let (mut set, warnings) = full.apply_to(&mut Settings::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        set.sort();
        let mut keys = SETTING_KEYS.to_vec();
        keys.sort();
        assert_eq!(set, keys);
    }

    #[test]
    fn zero_max_nodes_total_means_unlimited() {
        let mut s = Settings {
            max_nodes_total: Some(5),
            ..Settings::default()
        };
        let patch = SettingsPatch {
            max_nodes_total: Some(0),
            ..Default::default()
        };
        patch.apply_to(&mut s);
        assert_eq!(s.max_nodes_total, None);
    }
}
