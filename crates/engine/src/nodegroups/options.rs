//! Per-group autoscaling options: `<API group>/autoscaling-options-<key>` annotations on a
//! MachineSet or MachineDeployment override the cluster's settings for that group alone, as
//! upstream's clusterapi provider reads them (`GetOptions`). A value that cannot be read,
//! or a key upstream does not honour per group, is warned about and the cluster's applies.

use fleetscaler_model::{Warning, WarningCode};
use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::NodeGroupId;
use crate::settings::Settings;
use fleetscaler_model::duration::{DurationError, format_go_duration, parse_go_duration};
use fleetscaler_model::machine::ScalableResource;
use fleetscaler_model::machine_api::MachineApiGroup;

/// What a group's annotations override; `None` leaves the cluster's setting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupOptions {
    pub scale_down_utilization_threshold: Option<f64>,
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    pub scale_down_unneeded_time: Option<Duration>,
    pub scale_down_unready_time: Option<Duration>,
    pub max_node_provision_time: Option<Duration>,
    pub max_node_startup_time: Option<Duration>,
    pub ignore_daemonsets_utilization: Option<bool>,
    /// Per setting key (fleet.toml's name): the value and the annotation it came from.
    pub overrides: BTreeMap<&'static str, GroupOverride>,
}

/// One overridden setting, as the plan shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupOverride {
    pub value: serde_json::Value,
    /// The annotation that set it.
    pub source: String,
}

/// Why an option annotation is ignored (the warning names the group and the annotation).
#[derive(Debug, thiserror::Error)]
enum OptionError {
    #[error(
        "{option:?} is not an option fleetscaler (or upstream's clusterapi provider) honours per group; it is ignored (per-group options: {})",
        known_options()
    )]
    Unknown { option: String },
    #[error("not a number between 0 and 1; the cluster's value applies")]
    NotAFraction,
    #[error("{0}; the cluster's value applies")]
    Duration(#[source] DurationError),
    #[error("neither true nor false; the cluster's value applies")]
    NotABool,
}

fn known_options() -> String {
    let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
    known.join(", ")
}

/// (annotation key suffix, the setting it overrides).
const KEYS: [(&str, &str); 7] = [
    (
        "scaledownutilizationthreshold",
        "scale_down_utilization_threshold",
    ),
    (
        "scaledowngpuutilizationthreshold",
        "scale_down_gpu_utilization_threshold",
    ),
    ("scaledownunneededtime", "scale_down_unneeded_time"),
    ("scaledownunreadytime", "scale_down_unready_time"),
    ("maxnodeprovisiontime", "max_node_provision_time"),
    ("maxnodestartuptime", "max_node_startup_time"),
    (
        "ignoredaemonsetsutilization",
        "ignore_daemonsets_utilization",
    ),
];

impl GroupOptions {
    /// Reads the resource's own API group's prefix, and the other group's as well (the
    /// prefix people copy from Cluster API docs onto an OpenShift MachineSet); its own wins.
    pub fn parse(r: &ScalableResource, id: &NodeGroupId, warnings: &mut Vec<Warning>) -> Self {
        let mut out = GroupOptions::default();
        let other = match r.api {
            MachineApiGroup::OpenShift => MachineApiGroup::ClusterApi,
            MachineApiGroup::ClusterApi => MachineApiGroup::OpenShift,
        };
        for domain in [other.domain(), r.api.domain()] {
            let prefix = format!("{domain}/autoscaling-options-");
            for (key, value) in &r.annotations {
                if let Some(option) = key.strip_prefix(prefix.as_str())
                    && let Err(e) = out.set(option, value.trim(), key)
                {
                    warnings.push(Warning::about(
                        WarningCode::InvalidGroupOption,
                        id,
                        format!("annotation {key}={value:?}: {e}"),
                    ));
                }
            }
        }
        out
    }

    fn set(&mut self, option: &str, value: &str, annotation: &str) -> Result<(), OptionError> {
        let Some(&(_, setting)) = KEYS.iter().find(|(k, _)| k.eq_ignore_ascii_case(option)) else {
            return Err(OptionError::Unknown {
                option: option.to_string(),
            });
        };
        let fraction = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..=1.0).contains(v))
                .ok_or(OptionError::NotAFraction)
        };
        let duration = || parse_go_duration(value).map_err(OptionError::Duration);
        // Each arm sets the typed value and returns it as the plan shows it.
        let shown: serde_json::Value = match setting {
            "scale_down_utilization_threshold" => {
                let v = fraction()?;
                self.scale_down_utilization_threshold = Some(v);
                v.into()
            }
            "scale_down_gpu_utilization_threshold" => {
                let v = fraction()?;
                self.scale_down_gpu_utilization_threshold = Some(v);
                v.into()
            }
            "scale_down_unneeded_time" => {
                let d = duration()?;
                self.scale_down_unneeded_time = Some(d);
                format_go_duration(d).into()
            }
            "scale_down_unready_time" => {
                let d = duration()?;
                self.scale_down_unready_time = Some(d);
                format_go_duration(d).into()
            }
            "max_node_provision_time" => {
                let d = duration()?;
                self.max_node_provision_time = Some(d);
                format_go_duration(d).into()
            }
            "max_node_startup_time" => {
                let d = duration()?;
                self.max_node_startup_time = Some(d);
                format_go_duration(d).into()
            }
            _ => {
                let b = value.parse::<bool>().map_err(|_| OptionError::NotABool)?;
                self.ignore_daemonsets_utilization = Some(b);
                b.into()
            }
        };
        let source = format!("annotation {annotation}");
        self.overrides.insert(
            setting,
            GroupOverride {
                value: shown,
                source,
            },
        );
        Ok(())
    }

    pub fn unneeded_time(&self, s: &Settings) -> Duration {
        self.scale_down_unneeded_time
            .unwrap_or(s.scale_down_unneeded_time)
    }

    pub fn unready_time(&self, s: &Settings) -> Duration {
        self.scale_down_unready_time
            .unwrap_or(s.scale_down_unready_time)
    }

    pub fn utilization_threshold(&self, s: &Settings) -> f64 {
        self.scale_down_utilization_threshold
            .unwrap_or(s.scale_down_utilization_threshold)
    }

    pub fn gpu_utilization_threshold(&self, s: &Settings) -> f64 {
        self.scale_down_gpu_utilization_threshold
            .unwrap_or(s.scale_down_gpu_utilization_threshold)
    }

    pub fn provision_time(&self, s: &Settings) -> Duration {
        self.max_node_provision_time
            .unwrap_or(s.max_node_provision_time)
    }

    pub fn startup_time(&self, s: &Settings) -> Duration {
        self.max_node_startup_time
            .unwrap_or(s.max_node_startup_time)
    }

    pub fn ignore_daemonsets_utilization(&self, s: &Settings) -> bool {
        self.ignore_daemonsets_utilization
            .unwrap_or(s.ignore_daemonsets_utilization)
    }

    /// The overridden settings with their values and sources, for the plan.
    pub fn report(&self) -> BTreeMap<&'static str, GroupOverride> {
        self.overrides.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscaler_model::ScalableKind;
    use fleetscaler_model::meta::ObjectKey;

    fn resource(api: MachineApiGroup, annotations: &[(&str, &str)]) -> ScalableResource {
        ScalableResource {
            api,
            kind: ScalableKind::MachineSet,
            key: ObjectKey::new("ns", "w"),
            uid: "u".into(),
            resource_version: None,
            replicas: 1,
            status_replicas: None,
            owner: None,
            annotations: annotations
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            template_labels: Default::default(),
            template_taints: Vec::new(),
            provider_zone: None,
            provider_instance_type: None,
            platform: None,
            infrastructure_ref: None,
            created: None,
        }
    }

    #[test]
    fn own_prefix_wins_and_each_value_keeps_its_source() {
        let r = resource(
            MachineApiGroup::OpenShift,
            &[
                (
                    "machine.openshift.io/autoscaling-options-scaledownunneededtime",
                    "5m",
                ),
                (
                    "cluster.x-k8s.io/autoscaling-options-scaledownunneededtime",
                    "7m",
                ),
                (
                    "cluster.x-k8s.io/autoscaling-options-scaledownutilizationthreshold",
                    "0.7",
                ),
                (
                    "machine.openshift.io/autoscaling-options-ignoredaemonsetsutilization",
                    "true",
                ),
            ],
        );
        let id = NodeGroupId::new(r.api, r.kind, &r.key);
        let mut warnings = Vec::new();
        let o = GroupOptions::parse(&r, &id, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        let s = Settings::default();
        assert_eq!(o.unneeded_time(&s), Duration::from_secs(300));
        assert_eq!(o.utilization_threshold(&s), 0.7);
        assert!(o.ignore_daemonsets_utilization(&s));
        assert_eq!(o.unready_time(&s), s.scale_down_unready_time);
        let report = o.report();
        assert_eq!(
            report["scale_down_unneeded_time"].source,
            "annotation machine.openshift.io/autoscaling-options-scaledownunneededtime"
        );
        assert_eq!(report["scale_down_unneeded_time"].value, "5m0s");
        assert_eq!(report.len(), 3);
    }

    #[test]
    fn bad_values_and_unknown_keys_are_warned_about() {
        let r = resource(
            MachineApiGroup::ClusterApi,
            &[
                (
                    "cluster.x-k8s.io/autoscaling-options-scaledownutilizationthreshold",
                    "1.5",
                ),
                (
                    "cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime",
                    "soon",
                ),
                (
                    "cluster.x-k8s.io/autoscaling-options-zeroormaxnodescaling",
                    "true",
                ),
            ],
        );
        let id = NodeGroupId::new(r.api, r.kind, &r.key);
        let mut warnings = Vec::new();
        let o = GroupOptions::parse(&r, &id, &mut warnings);
        assert_eq!(o, GroupOptions::default());
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.to_string().contains("not a number between 0 and 1"))
        );
        assert!(warnings.iter().any(|w| {
            w.to_string()
                .contains("\"zeroormaxnodescaling\" is not an option")
        }));
    }
}
