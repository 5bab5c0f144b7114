//! The layering of one cluster's settings, lowest first: upstream's defaults, fleet.toml's
//! `[defaults]`, the cluster's own `ClusterAutoscaler` (when its `use_cluster_autoscaler`
//! allows), the cluster's `overrides` with its `node_groups` (the per-group bounds), then
//! flags or a what-if's bare keys on top. Every effective value keeps the layer it came from
//! (`SettingSource`). One place, so that a pass, a what-if (`cluster::what_if`), `plan` and
//! `check-config` can never layer differently; what a node group's own
//! `autoscaling-options-*` annotations change is the engine's (`engine::nodegroups`).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::runner::RunnerSpec;
use super::what_if::Proposal;
use crate::config::ClusterConfig;
use crate::engine::settings::{SETTING_KEYS, SettingWarning, Settings, SettingsPatch};
use crate::model::ClusterSnapshot;
use crate::model::autoscaler::ClusterAutoscalerSpec;

/// Where an effective setting came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SettingSource {
    /// The upstream autoscaler's default.
    Default,
    /// fleet.toml `[defaults]`.
    FleetDefaults,
    /// The cluster's own `ClusterAutoscaler` resource.
    ClusterAutoscaler,
    /// fleet.toml `[[clusters]] overrides`.
    ClusterOverrides,
    /// A command-line flag.
    Flags,
}

impl fmt::Display for SettingSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SettingSource::Default => "default",
            SettingSource::FleetDefaults => "fleet defaults",
            SettingSource::ClusterAutoscaler => "ClusterAutoscaler",
            SettingSource::ClusterOverrides => "cluster overrides",
            SettingSource::Flags => "flags",
        })
    }
}

/// The settings one cluster runs with, each value's source, and what was set aside.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EffectiveSettings {
    pub settings: Settings,
    pub sources: BTreeMap<&'static str, SettingSource>,
    pub warnings: Vec<SettingWarning>,
}

impl EffectiveSettings {
    /// `{key: {value, source}}` for every setting, as `plan -o json` and the API show them.
    pub fn with_sources(&self) -> serde_json::Value {
        let values = serde_json::to_value(&self.settings).unwrap_or_default();
        let mut out = serde_json::Map::new();
        for (key, source) in &self.sources {
            let value = values.get(*key).cloned().unwrap_or(serde_json::Value::Null);
            out.insert(
                key.to_string(),
                serde_json::json!({"value": value, "source": source}),
            );
        }
        serde_json::Value::Object(out)
    }
}

/// The layers of one cluster's settings, lowest first; each may be absent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layers<'a> {
    pub fleet_defaults: Option<&'a SettingsPatch>,
    /// The cluster's own ClusterAutoscaler (or one proposed in its place): read only when
    /// `cluster` allows it.
    pub cluster_autoscaler: Option<&'a ClusterAutoscalerSpec>,
    /// The cluster's entry of fleet.toml: its overrides, its node groups, and whether its
    /// ClusterAutoscaler is read. Without one (`plan` without `--cluster`), no overrides and
    /// the ClusterAutoscaler is read.
    pub cluster: Option<&'a ClusterConfig>,
    /// Flags, or a what-if's bare keys: above every other layer.
    pub flags: Option<&'a SettingsPatch>,
}

/// The settings the layers make, each value with its source. Problems of a layer are
/// warnings, the value left to the layer below; a ClusterAutoscaler's come last.
pub fn layer(layers: Layers) -> EffectiveSettings {
    let mut settings = Settings::default();
    let mut sources: BTreeMap<&'static str, SettingSource> = SETTING_KEYS
        .iter()
        .map(|k| (*k, SettingSource::Default))
        .collect();
    let mut warnings = Vec::new();
    let mut apply = |patch: &SettingsPatch, source: SettingSource| {
        let (set, problems) = patch.apply_to(&mut settings);
        for key in set {
            sources.insert(key, source);
        }
        warnings.extend(problems);
    };
    if let Some(p) = layers.fleet_defaults {
        apply(p, SettingSource::FleetDefaults);
    }
    let read_own = layers.cluster.is_none_or(|c| c.use_cluster_autoscaler);
    let ca_problems = layers.cluster_autoscaler.filter(|_| read_own).map(|ca| {
        let (patch, problems) = SettingsPatch::from_cluster_autoscaler(ca);
        apply(&patch, SettingSource::ClusterAutoscaler);
        problems
    });
    if let Some(c) = layers.cluster {
        apply(&overrides_with_groups(c), SettingSource::ClusterOverrides);
    }
    if let Some(p) = layers.flags {
        apply(p, SettingSource::Flags);
    }
    warnings.extend(ca_problems.into_iter().flatten());
    EffectiveSettings {
        settings,
        sources,
        warnings,
    }
}

/// A cluster's overrides with its `node_groups` in them (unless the overrides name theirs).
fn overrides_with_groups(c: &ClusterConfig) -> SettingsPatch {
    let mut patch = c.overrides.clone();
    if !c.node_groups.is_empty() && patch.node_groups.is_none() {
        patch.node_groups = Some(c.node_groups.clone());
    }
    patch
}

/// The settings of one running cluster as the hub layers them at each pass (its
/// ClusterAutoscaler read from `snapshot`), with a what-if's proposal on them when given:
/// its `defaults.KEY` over fleet.toml's `[defaults]`, its ClusterAutoscaler in place of the
/// cluster's own, its bare keys on top.
pub fn for_cluster(
    spec: &RunnerSpec,
    snapshot: &ClusterSnapshot,
    proposal: Option<&Proposal>,
) -> EffectiveSettings {
    let defaults = match proposal {
        Some(p) => p.defaults.over(&spec.defaults),
        None => spec.defaults.clone(),
    };
    let own = snapshot.cluster_autoscaler().map(|c| &c.spec);
    let proposed = proposal.and_then(|p| p.cluster_autoscaler.as_ref());
    layer(Layers {
        fleet_defaults: Some(&defaults),
        cluster_autoscaler: proposed.or(own),
        cluster: Some(&spec.cluster),
        flags: proposal.map(|p| &p.top),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;
    use crate::engine::settings::Range;

    const EXAMPLE: &str = r#"
[defaults]
balance_similar_node_groups = true
expanders = ["priority", "least-waste"]

[[clusters]]
name = "prod-east"
context = "prod-east-admin"

[clusters.overrides]
max_nodes_total = 50
cores = { min = 8, max = 256 }

[[clusters]]
name = "lab"
use_cluster_autoscaler = false
"#;

    fn ca(max_nodes: i64) -> ClusterAutoscalerSpec {
        ClusterAutoscalerSpec {
            pod_priority_threshold: Some(-5),
            resource_limits: Some(crate::model::autoscaler::ResourceLimitsSpec {
                max_nodes_total: Some(max_nodes),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn layers_with_sources() {
        let cfg = FleetConfig::parse(EXAMPLE, "fleet.toml").unwrap();
        let east = cfg.cluster("prod-east").unwrap();
        let ca = ca(20);
        let eff = layer(Layers {
            fleet_defaults: Some(&cfg.defaults),
            cluster_autoscaler: Some(&ca),
            cluster: Some(east),
            flags: None,
        });
        assert_eq!(eff.settings.max_nodes_total, Some(50));
        assert_eq!(
            eff.sources["max_nodes_total"],
            SettingSource::ClusterOverrides
        );
        assert_eq!(eff.settings.pod_priority_threshold, -5);
        assert_eq!(
            eff.sources["pod_priority_threshold"],
            SettingSource::ClusterAutoscaler
        );
        assert!(eff.settings.balance_similar_node_groups);
        assert_eq!(
            eff.sources["balance_similar_node_groups"],
            SettingSource::FleetDefaults
        );
        assert_eq!(
            eff.settings.cores,
            Range {
                min: 8,
                max: Some(256)
            }
        );
        assert_eq!(eff.sources["seed"], SettingSource::Default);
    }

    #[test]
    fn a_cluster_that_does_not_use_its_cluster_autoscaler_never_reads_it() {
        let cfg = FleetConfig::parse(EXAMPLE, "fleet.toml").unwrap();
        let lab = cfg.cluster("lab").unwrap();
        let ca = ca(20);
        let eff = layer(Layers {
            cluster_autoscaler: Some(&ca),
            cluster: Some(lab),
            ..Layers::default()
        });
        assert_eq!(eff.settings.max_nodes_total, None);
        assert_eq!(eff.sources["max_nodes_total"], SettingSource::Default);
        // Without a cluster's entry (`plan` of a dump alone), it is read.
        let eff = layer(Layers {
            cluster_autoscaler: Some(&ca),
            ..Layers::default()
        });
        assert_eq!(
            eff.sources["max_nodes_total"],
            SettingSource::ClusterAutoscaler
        );
    }

    #[test]
    fn node_groups_of_fleet_toml_are_overrides_unless_the_overrides_name_theirs() {
        let group = |name: &str| crate::engine::settings::NodeGroupSpec {
            kind: "MachineSet".into(),
            namespace: "openshift-machine-api".into(),
            name: name.into(),
            api_group: None,
            min: 0,
            max: 3,
        };
        let mut c = ClusterConfig::named("east");
        c.node_groups = vec![group("a")];
        let eff = layer(Layers {
            cluster: Some(&c),
            ..Layers::default()
        });
        assert_eq!(eff.settings.node_groups.len(), 1);
        assert_eq!(eff.sources["node_groups"], SettingSource::ClusterOverrides);
        c.overrides.node_groups = Some(vec![group("b"), group("c")]);
        let eff = layer(Layers {
            cluster: Some(&c),
            ..Layers::default()
        });
        assert_eq!(eff.settings.node_groups.len(), 2);
    }
}
