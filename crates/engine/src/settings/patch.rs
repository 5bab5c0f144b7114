//! `SettingsPatch`: what one configuration layer says. Each setting is declared once in the
//! macro below: its patch field (fleet.toml key), its check, and its place in `SETTING_KEYS`.
//! Applying a patch sets the valid values, reports the invalid ones by key, and leaves the
//! rest to the layers below.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    ExpanderError, ExpanderKind, GpuLimit, NodeGroupSpec, NodeGroupSpecError, Range, Settings,
    opt_duration_serde,
};
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

/// Why a setting's value is refused; the warning names the key beside it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("must be at least 1")]
    Zero,
    #[error("{0} is not between 0 and 1")]
    NotAFraction(f64),
    #[error("{0} is not a percentage")]
    NotAPercentage(f64),
    #[error("must be longer than 0s")]
    NoDuration,
    #[error("{0:?} is not a namespace name (an RFC 1123 label)")]
    NotANamespace(String),
    #[error("min is negative")]
    NegativeMin,
    #[error("max is negative")]
    NegativeMax,
    #[error("min {min} is greater than max {max}")]
    MinAboveMax { min: u64, max: u64 },
    #[error("gpu type {0:?} has no max")]
    GpuWithoutMax(String),
    #[error("a GPU limit has an empty type")]
    GpuWithoutType,
    #[error("GPU type {gpu_type}: min {min} is greater than max {max}")]
    GpuMinAboveMax {
        gpu_type: String,
        min: u64,
        max: u64,
    },
    #[error(transparent)]
    Expanders(#[from] ExpanderError),
    #[error(transparent)]
    Priorities(#[from] PrioritiesError),
    #[error(transparent)]
    NodeGroup(#[from] NodeGroupSpecError),
}

/// Why the priority expander's map is refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PrioritiesError {
    #[error("priority {0:?} is not an integer")]
    NotAnInteger(String),
    #[error("priority {priority}: regex {pattern:?} is invalid: {source}")]
    Regex {
        priority: String,
        pattern: String,
        #[source]
        source: regex::Error,
    },
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
                        let check: fn(&$ty) -> Result<_, SettingError> = $check;
                        match check(v) {
                            Ok(value) => {
                                s.$field = value;
                                set.push(stringify!($field));
                            }
                            Err(e) => warnings.push(SettingWarning {
                                key: stringify!($field).to_string(),
                                message: e.to_string(),
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

fn any<T: Clone>(v: &T) -> Result<T, SettingError> {
    Ok(v.clone())
}

fn at_least_one(v: &u64) -> Result<u64, SettingError> {
    if *v == 0 {
        Err(SettingError::Zero)
    } else {
        Ok(*v)
    }
}

fn check_namespace(v: &str) -> Result<String, SettingError> {
    if fleetscaler_model::meta::is_dns_label(v) {
        Ok(v.to_string())
    } else {
        Err(SettingError::NotANamespace(v.to_string()))
    }
}

fn fraction(v: &f64) -> Result<f64, SettingError> {
    if (0.0..=1.0).contains(v) {
        Ok(*v)
    } else {
        Err(SettingError::NotAFraction(*v))
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
    priorities: BTreeMap<String, Vec<String>> => |v| Ok(Some(parse_priorities_map(v)?)),
    /// The one namespace the priority expander's ConfigMap is read from.
    priority_config_namespace: String => |v| check_namespace(v).map(Some),
    balance_similar_node_groups: bool => any,
    balancing_ignored_labels: Vec<String> => any,
    node_groups: Vec<NodeGroupSpec> => |v| { v.iter().try_for_each(NodeGroupSpec::check)?; Ok(v.clone()) },
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
    blocking_system_pod_disruption_timeout: Duration => any,
    skip_nodes_with_custom_controller_pods: bool => any,
    min_replica_count: u64 => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_pod_grace_period: Duration => any,
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    max_pod_eviction_time: Duration => any,
    daemonset_eviction_for_occupied_nodes: bool => any,
    daemonset_eviction_for_empty_nodes: bool => any,
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
    max_total_unready_percentage: f64 => |v| if (0.0..=100.0).contains(v) { Ok(*v) } else { Err(SettingError::NotAPercentage(*v)) },
    #[serde(default, with = "opt_duration_serde", skip_serializing_if = "Option::is_none")]
    initial_node_group_backoff: Duration => |v| if v.is_zero() { Err(SettingError::NoDuration) } else { Ok(*v) },
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
                Err(e) => warn("expanders", e.to_string()),
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
    let range = |r: &RangeSpec| -> Result<Range, SettingError> {
        let min = u64::try_from(r.min.unwrap_or(0)).map_err(|_| SettingError::NegativeMin)?;
        let max = r
            .max
            .map(u64::try_from)
            .transpose()
            .map_err(|_| SettingError::NegativeMax)?;
        check_range(&Range { min, max })
    };
    if let Some(c) = &limits.cores {
        match range(c) {
            Ok(r) => patch.cores = Some(r),
            Err(e) => warn("resourceLimits.cores", e.to_string()),
        }
    }
    if let Some(m) = &limits.memory {
        match range(m) {
            Ok(r) => patch.memory_gib = Some(r),
            Err(e) => warn("resourceLimits.memory", e.to_string()),
        }
    }
    if !limits.gpus.is_empty() {
        let gpus: Result<Vec<GpuLimit>, SettingError> = limits
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
                        .ok_or_else(|| SettingError::GpuWithoutMax(g.type_.clone()))?,
                })
            })
            .collect();
        match gpus.and_then(|g| check_gpus(&g)) {
            Ok(g) => patch.gpus = Some(g),
            Err(e) => warn("resourceLimits.gpus", e.to_string()),
        }
    }
}

fn check_range(r: &Range) -> Result<Range, SettingError> {
    match r.max {
        Some(max) if max < r.min => Err(SettingError::MinAboveMax { min: r.min, max }),
        _ => Ok(*r),
    }
}

fn check_gpus(gpus: &[GpuLimit]) -> Result<Vec<GpuLimit>, SettingError> {
    for g in gpus {
        if g.gpu_type.is_empty() {
            return Err(SettingError::GpuWithoutType);
        }
        if g.max < g.min {
            return Err(SettingError::GpuMinAboveMax {
                gpu_type: g.gpu_type.to_string(),
                min: g.min,
                max: g.max,
            });
        }
    }
    Ok(gpus.to_vec())
}

fn check_expanders(chain: &[ExpanderKind]) -> Result<Vec<ExpanderKind>, SettingError> {
    let names: Vec<&str> = chain.iter().map(|e| e.as_str()).collect();
    Ok(ExpanderKind::parse_chain(&names.join(","))?)
}

/// Reads a priority map whose keys are integers written as strings.
pub fn parse_priorities_map(
    map: &BTreeMap<String, Vec<String>>,
) -> Result<BTreeMap<i32, Vec<String>>, PrioritiesError> {
    map.iter()
        .map(|(k, v)| {
            let p = k
                .trim()
                .parse::<i32>()
                .map_err(|_| PrioritiesError::NotAnInteger(k.clone()))?;
            if let Some((pat, e)) = v
                .iter()
                .find_map(|pat| regex::Regex::new(pat).err().map(|e| (pat, e)))
            {
                return Err(PrioritiesError::Regex {
                    priority: k.clone(),
                    pattern: pat.clone(),
                    source: e,
                });
            }
            Ok((p, v.clone()))
        })
        .collect()
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
