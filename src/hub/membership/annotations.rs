//! A found cluster's own settings, from annotations on the object it was found in: what
//! `[[clusters]]` says in fleet.toml, checked exactly as fleet.toml is.

use std::collections::BTreeMap;

use crate::config::membership::Discovered;
use crate::config::{ClusterConfig, ConfigIssue, check_patch};
use crate::engine::settings::SettingsPatch;

pub(super) const ENABLED: &str = "fleetscaler.io/enabled";
pub(super) const DRY_RUN: &str = "fleetscaler.io/dry-run";
pub(super) const USE_CLUSTER_AUTOSCALER: &str = "fleetscaler.io/use-cluster-autoscaler";
/// The cluster's `[clusters.overrides]`, as TOML (or JSON).
pub(super) const OVERRIDES: &str = "fleetscaler.io/overrides";

/// Overrides are a few lines; a larger annotation is refused before it is parsed.
const MAX_OVERRIDES_BYTES: usize = 16 * 1024;
/// Cluster names appear in URLs, metric labels and logs.
const MAX_NAME: usize = 253;

/// Why a found cluster's name or annotations are refused.
#[derive(Debug, thiserror::Error)]
pub enum AnnotationError {
    /// At most 80 characters of the name.
    #[error(
        "cluster name {0:?} is not valid: letters, digits, '-', '_' and '.', at most {MAX_NAME}, starting and ending with a letter or digit"
    )]
    InvalidName(String),
    /// At most 40 characters of the value.
    #[error("annotation {key}: {value:?} is neither true nor false")]
    NotAFlag { key: &'static str, value: String },
    #[error("annotation {OVERRIDES}: {0}")]
    Overrides(#[source] OverridesError),
}

/// Why the overrides annotation is refused.
#[derive(Debug, thiserror::Error)]
pub enum OverridesError {
    #[error("{0} bytes, more than the {max} KiB allowed", max = MAX_OVERRIDES_BYTES / 1024)]
    TooLarge(usize),
    #[error("as JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// toml's own message, without the excerpt of the text it appends.
    #[error("{message}{}", line.map_or(String::new(), |l| format!(" (line {l})")))]
    Toml {
        message: String,
        line: Option<usize>,
    },
    /// What fleet.toml's checks say of them, each `key: message`.
    #[error("{}", told(.0))]
    Invalid(Vec<ConfigIssue>),
}

fn told(issues: &[ConfigIssue]) -> String {
    let told: Vec<String> = issues
        .iter()
        .map(|i| format!("{}: {}", i.key, i.message))
        .collect();
    told.join("; ")
}

/// The cluster `name` found with `found`, with what `annotations` set.
pub(super) fn cluster(
    name: &str,
    annotations: Option<&BTreeMap<String, String>>,
    found: Discovered,
) -> Result<ClusterConfig, AnnotationError> {
    check_name(name)?;
    let mut cluster = ClusterConfig::named(name);
    let none = BTreeMap::new();
    let annotations = annotations.unwrap_or(&none);
    if let Some(v) = flag(annotations, ENABLED)? {
        cluster.enabled = v;
    }
    cluster.dry_run = flag(annotations, DRY_RUN)?;
    if let Some(v) = flag(annotations, USE_CLUSTER_AUTOSCALER)? {
        cluster.use_cluster_autoscaler = v;
    }
    if let Some(text) = annotations.get(OVERRIDES) {
        cluster.overrides = overrides(text).map_err(AnnotationError::Overrides)?;
    }
    cluster.discovered = Some(found);
    Ok(cluster)
}

/// Letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit: a name
/// that is safe in a URL path, a metric label and a log line.
pub(super) fn check_name(name: &str) -> Result<(), AnnotationError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let valid = (1..=MAX_NAME).contains(&name.len())
        && name.chars().all(ok)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(AnnotationError::InvalidName(
            name.chars().take(80).collect(),
        ))
    }
}

fn flag(
    annotations: &BTreeMap<String, String>,
    key: &'static str,
) -> Result<Option<bool>, AnnotationError> {
    match annotations.get(key).map(|v| v.trim()) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(other) => Err(AnnotationError::NotAFlag {
            key,
            value: other.chars().take(40).collect(),
        }),
    }
}

/// `[clusters.overrides]` as TOML, or JSON when it is an object, checked as fleet.toml's.
fn overrides(text: &str) -> Result<SettingsPatch, OverridesError> {
    if text.len() > MAX_OVERRIDES_BYTES {
        return Err(OverridesError::TooLarge(text.len()));
    }
    let patch = if text.trim_start().starts_with('{') {
        serde_json::from_str::<SettingsPatch>(text).map_err(OverridesError::Json)?
    } else {
        toml::from_str::<SettingsPatch>(text).map_err(|e| OverridesError::Toml {
            message: e.message().trim().to_string(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1)),
        })?
    };
    let mut issues: Vec<ConfigIssue> = Vec::new();
    check_patch(&patch, "overrides", &mut issues);
    if issues.is_empty() {
        return Ok(patch);
    }
    Err(OverridesError::Invalid(issues))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::membership::InlineKubeconfig;

    fn found() -> Discovered {
        Discovered {
            source: "Secret fleet/east".into(),
            kubeconfig: InlineKubeconfig::new("{}".into()),
        }
    }

    fn with(pairs: &[(&str, &str)]) -> Result<ClusterConfig, AnnotationError> {
        let a: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        cluster("east", Some(&a), found())
    }

    #[test]
    fn annotations_set_what_fleet_toml_would() {
        let c = with(&[
            (ENABLED, "false"),
            (DRY_RUN, "true"),
            (USE_CLUSTER_AUTOSCALER, "false"),
            (
                OVERRIDES,
                "max_nodes_total = 7\nscale_down_unneeded_time = \"5m\"",
            ),
        ])
        .unwrap();
        assert!(!c.enabled && !c.use_cluster_autoscaler);
        assert_eq!(c.dry_run, Some(true));
        assert_eq!(c.overrides.max_nodes_total, Some(7));
        assert_eq!(c.source(), "Secret fleet/east");
        let json = with(&[(OVERRIDES, r#"{"max_nodes_total": 9}"#)]).unwrap();
        assert_eq!(json.overrides.max_nodes_total, Some(9));
        let plain = cluster("east", None, found()).unwrap();
        assert!(plain.enabled && plain.use_cluster_autoscaler && plain.dry_run.is_none());
    }

    #[test]
    fn each_bad_annotation_is_named() {
        for (pairs, want) in [
            (
                vec![(DRY_RUN, "maybe")],
                "fleetscaler.io/dry-run: \"maybe\"",
            ),
            (vec![(ENABLED, "yes")], "fleetscaler.io/enabled"),
            (
                vec![(USE_CLUSTER_AUTOSCALER, "1")],
                "use-cluster-autoscaler",
            ),
            (vec![(OVERRIDES, "max_nodes_totl = 3")], "max_nodes_totl"),
            (
                vec![(OVERRIDES, "max_nodes_total = 1.5")],
                "fleetscaler.io/overrides",
            ),
            (
                vec![(OVERRIDES, "cores = { min = 9, max = 3 }")],
                "overrides.cores",
            ),
            (vec![(OVERRIDES, "[x\n")], "(line 1)"),
            (vec![(OVERRIDES, "{\"max_nodes_total\": \"a\"}")], "as JSON"),
        ] {
            let err = with(&pairs).unwrap_err().to_string();
            assert!(err.contains(want), "{pairs:?}: {err}");
        }
        let big = format!("# {}", "x".repeat(MAX_OVERRIDES_BYTES));
        assert!(
            with(&[(OVERRIDES, &big)])
                .unwrap_err()
                .to_string()
                .contains("KiB")
        );
    }

    #[test]
    fn names_are_checked() {
        for good in ["east", "prod-East_1.a", "a"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a b", "a/b", "é", &"a".repeat(254)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
