//! Engine settings with the upstream autoscaler's defaults, and `SettingsPatch`: a partial
//! set of settings that each configuration layer (fleet.toml, a cluster's own
//! ClusterAutoscaler resource, command-line flags) produces and that is applied in order.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::autoscaler::ClusterAutoscalerSpec;
use crate::model::duration::parse_go_duration;

/// A min/max pair; `max` of `None` means unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    #[serde(default)]
    pub min: u64,
    pub max: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuLimit {
    /// The GPU type: a node's `cluster-api/accelerator` label value, or a GPU resource name.
    #[serde(rename = "type")]
    pub gpu_type: String,
    #[serde(default)]
    pub min: u64,
    pub max: u64,
}

/// How the scale-up option is chosen when several node groups could help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpanderKind {
    LeastWaste,
    MostPods,
    LeastNodes,
    Random,
    Priority,
}

impl ExpanderKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "least-waste" | "LeastWaste" => Some(ExpanderKind::LeastWaste),
            "most-pods" | "MostPods" => Some(ExpanderKind::MostPods),
            "least-nodes" | "LeastNodes" => Some(ExpanderKind::LeastNodes),
            "random" | "Random" => Some(ExpanderKind::Random),
            "priority" | "Priority" => Some(ExpanderKind::Priority),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExpanderKind::LeastWaste => "least-waste",
            ExpanderKind::MostPods => "most-pods",
            ExpanderKind::LeastNodes => "least-nodes",
            ExpanderKind::Random => "random",
            ExpanderKind::Priority => "priority",
        }
    }

    /// Parses a chain such as `priority,least-waste`; duplicates are rejected, as upstream does.
    pub fn parse_chain(text: &str) -> Result<Vec<ExpanderKind>, String> {
        let mut chain = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let kind = ExpanderKind::parse(part).ok_or_else(|| {
                format!(
                    "unknown expander {:?} (least-waste, most-pods, least-nodes, random, priority)",
                    part.trim()
                )
            })?;
            if chain.contains(&kind) {
                return Err(format!("expander {} is listed twice", kind.as_str()));
            }
            chain.push(kind);
        }
        if chain.is_empty() {
            return Err("the expander list is empty".to_string());
        }
        Ok(chain)
    }
}

impl fmt::Display for ExpanderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the engine's decisions depend on besides the snapshot, the state and the time.
/// Serialized with the same snake_case keys as fleet.toml, so a report names the key to set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// Pods with a priority below this never cause a scale-up and never block a scale-down.
    pub pod_priority_threshold: i32,
    /// Total nodes, control plane included; `None` is unlimited.
    pub max_nodes_total: Option<u64>,
    /// Total cores over all nodes.
    pub cores: Range,
    /// Total memory over all nodes, in GiB.
    pub memory_gib: Range,
    pub gpus: Vec<GpuLimit>,
    /// Cap on the nodes one scale-up option may add (a latency guard, as upstream).
    pub max_nodes_per_scaleup: u64,
    pub expanders: Vec<ExpanderKind>,
    /// Priority expander configuration (`priority → [regex]`); when unset the cluster's
    /// `cluster-autoscaler-priority-expander` ConfigMap is used.
    pub priorities: Option<BTreeMap<i32, Vec<String>>>,
    pub balance_similar_node_groups: bool,
    /// Labels ignored when comparing node groups, beside the built-in zone/hostname ones.
    pub balancing_ignored_labels: Vec<String>,
    /// How long a new node may take to register before its scale-up counts as failed.
    #[serde(with = "duration_serde")]
    pub max_node_provision_time: Duration,
    /// Seed of the random expander and tie-breaks, so a plan can be reproduced.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pod_priority_threshold: -10,
            max_nodes_total: None,
            cores: Range {
                min: 0,
                max: Some(320_000),
            },
            memory_gib: Range {
                min: 0,
                max: Some(6_400_000),
            },
            gpus: Vec::new(),
            max_nodes_per_scaleup: 1000,
            expanders: vec![ExpanderKind::LeastWaste],
            priorities: None,
            balance_similar_node_groups: false,
            balancing_ignored_labels: Vec::new(),
            max_node_provision_time: Duration::from_secs(15 * 60),
            seed: 0,
        }
    }
}

pub mod duration_serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    use crate::model::duration::{format_go_duration, parse_go_duration};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_go_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        parse_go_duration(&text).map_err(serde::de::Error::custom)
    }
}

pub mod opt_duration_serde {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration_serde::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::duration_serde::deserialize(d).map(Some)
    }
}

/// A partial set of settings: what one configuration layer says. Unset fields leave the
/// value from the layers below. In fleet.toml it is written in snake_case.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    pub pod_priority_threshold: Option<i32>,
    /// 0 means unlimited, as the upstream flag.
    pub max_nodes_total: Option<u64>,
    pub cores: Option<Range>,
    pub memory_gib: Option<Range>,
    pub gpus: Option<Vec<GpuLimit>>,
    pub max_nodes_per_scaleup: Option<u64>,
    pub expanders: Option<Vec<ExpanderKind>>,
    /// Priority expander map, keys are priorities as strings (TOML keys are strings).
    pub priorities: Option<BTreeMap<String, Vec<String>>>,
    pub balance_similar_node_groups: Option<bool>,
    pub balancing_ignored_labels: Option<Vec<String>>,
    #[serde(
        default,
        with = "opt_duration_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_node_provision_time: Option<Duration>,
    pub seed: Option<u64>,
}

/// Every setting's key, as written in fleet.toml.
pub const SETTING_KEYS: [&str; 12] = [
    "pod_priority_threshold",
    "max_nodes_total",
    "cores",
    "memory_gib",
    "gpus",
    "max_nodes_per_scaleup",
    "expanders",
    "priorities",
    "balance_similar_node_groups",
    "balancing_ignored_labels",
    "max_node_provision_time",
    "seed",
];

/// A problem with one setting, named by its key; the setting keeps its previous value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SettingWarning {
    pub key: String,
    pub message: String,
}

impl fmt::Display for SettingWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl SettingsPatch {
    /// Applies this layer; returns the names of the settings it set (for provenance) and the
    /// problems found. A value that is invalid is skipped, never half-applied.
    pub fn apply_to(&self, s: &mut Settings) -> (Vec<&'static str>, Vec<SettingWarning>) {
        let mut set = Vec::new();
        let mut warnings = Vec::new();
        macro_rules! take {
            ($field:ident, $key:literal, $conv:expr) => {
                if let Some(v) = &self.$field {
                    match $conv(v) {
                        Ok(value) => {
                            s.$field = value;
                            set.push($key);
                        }
                        Err(message) => warnings.push(SettingWarning {
                            key: $key.to_string(),
                            message,
                        }),
                    }
                }
            };
        }
        take!(
            pod_priority_threshold,
            "pod_priority_threshold",
            |v: &i32| Ok::<_, String>(*v)
        );
        take!(
            max_nodes_total,
            "max_nodes_total",
            |v: &u64| Ok::<_, String>((*v > 0).then_some(*v))
        );
        take!(cores, "cores", check_range);
        take!(memory_gib, "memory_gib", check_range);
        take!(gpus, "gpus", check_gpus);
        take!(
            max_nodes_per_scaleup,
            "max_nodes_per_scaleup",
            |v: &u64| if *v == 0 {
                Err("must be at least 1".to_string())
            } else {
                Ok(*v)
            }
        );
        take!(expanders, "expanders", check_expanders);
        take!(priorities, "priorities", |v: &BTreeMap<
            String,
            Vec<String>,
        >| parse_priorities_map(v)
            .map(Some));
        take!(
            balance_similar_node_groups,
            "balance_similar_node_groups",
            |v: &bool| Ok::<_, String>(*v)
        );
        take!(
            balancing_ignored_labels,
            "balancing_ignored_labels",
            |v: &Vec<String>| Ok::<_, String>(v.clone())
        );
        take!(
            max_node_provision_time,
            "max_node_provision_time",
            |v: &Duration| Ok::<_, String>(*v)
        );
        take!(seed, "seed", |v: &u64| Ok::<_, String>(*v));
        (set, warnings)
    }

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
            match parse_go_duration(text) {
                Ok(d) => patch.max_node_provision_time = Some(d),
                Err(e) => warn("maxNodeProvisionTime", e.to_string()),
            }
        }
        if let Some(limits) = &spec.resource_limits {
            resource_limits_patch(limits, &mut patch, &mut warn);
        }
        if let Some(b) = spec.balance_similar_node_groups {
            patch.balance_similar_node_groups = Some(b);
        }
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

fn resource_limits_patch(
    limits: &crate::model::autoscaler::ResourceLimitsSpec,
    patch: &mut SettingsPatch,
    warn: &mut impl FnMut(&str, String),
) {
    if let Some(n) = limits.max_nodes_total {
        match u64::try_from(n) {
            Ok(v) => patch.max_nodes_total = Some(v),
            Err(_) => warn("resourceLimits.maxNodesTotal", format!("{n} is negative")),
        }
    }
    let range = |r: &crate::model::autoscaler::RangeSpec| -> Result<Range, String> {
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
                let r = range(&crate::model::autoscaler::RangeSpec {
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
            k.trim()
                .parse::<i32>()
                .map(|p| (p, v.clone()))
                .map_err(|_| format!("priority {k:?} is not an integer"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::autoscaler::ClusterAutoscaler;

    #[test]
    fn defaults_match_upstream() {
        let s = Settings::default();
        assert_eq!(s.pod_priority_threshold, -10);
        assert_eq!(s.max_nodes_per_scaleup, 1000);
        assert_eq!(s.expanders, vec![ExpanderKind::LeastWaste]);
        assert_eq!(s.max_node_provision_time, Duration::from_secs(900));
        assert_eq!(s.cores.max, Some(320_000));
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
            "resourceLimits": {"maxNodesTotal": 24, "cores": {"min": 64, "max": 8}, "memory": {"max": 256}},
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
        let keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "ClusterAutoscaler.spec.maxNodeProvisionTime",
                "ClusterAutoscaler.spec.resourceLimits.cores"
            ]
        );
        assert!(set.contains(&"max_nodes_total") && !set.contains(&"cores"));
    }

    #[test]
    fn setting_keys_cover_every_patch_field() {
        let full: SettingsPatch = serde_json::from_value(serde_json::json!({
            "pod_priority_threshold": 0, "max_nodes_total": 1, "cores": {"max": 2}, "memory_gib": {"max": 2},
            "gpus": [], "max_nodes_per_scaleup": 5, "expanders": ["random"], "priorities": {"1": ["x"]},
            "balance_similar_node_groups": true, "balancing_ignored_labels": [], "max_node_provision_time": "1m",
            "seed": 3
        }))
        .unwrap();
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
