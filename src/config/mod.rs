//! `fleet.toml`: the fleet's configuration, read with the `config` crate (with
//! `FLEETSCALER_<TABLE>__<KEY>` environment overrides) and validated with every problem
//! reported at once with its key path. How a cluster's settings are layered from it (and
//! from its ClusterAutoscaler) is `cluster::layering`'s.

use crate::model::ClusterName;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::settings::{Settings, SettingsPatch};

pub mod assign;
mod env;
pub mod fleet;
pub mod hub;
pub mod membership;
pub mod serving;
mod suggest;
pub mod tracing;

pub use fleet::{FleetHealthConfig, SharedFailuresConfig};
pub use hub::{HubConfig, LeaderElection};
pub use membership::MembershipConfig;

/// The file as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    #[serde(default)]
    pub hub: HubConfig,
    /// When the fleet as a whole is degraded, and what then pauses.
    #[serde(default)]
    pub fleet: FleetHealthConfig,
    /// Settings for every cluster, below each cluster's own.
    #[serde(default)]
    pub defaults: SettingsPatch,
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// Clusters found in the management cluster's inventory, beside `clusters`.
    #[serde(default)]
    pub membership: MembershipConfig,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub name: ClusterName,
    /// The kubeconfig context; the cluster's name when absent.
    pub context: Option<String>,
    /// A kubeconfig file for this cluster, instead of the hub's.
    pub kubeconfig: Option<PathBuf>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Whether the cluster's own `ClusterAutoscaler` resource may set its settings.
    #[serde(default = "yes")]
    pub use_cluster_autoscaler: bool,
    /// Plan and report without writing to this cluster (`hub.dry_run` when absent).
    pub dry_run: Option<bool>,
    /// Node groups named here rather than by annotations; their bounds win.
    #[serde(default)]
    pub node_groups: Vec<crate::engine::settings::NodeGroupSpec>,
    #[serde(default)]
    pub overrides: SettingsPatch,
    /// Set for a cluster found in the management cluster's inventory, never from the file:
    /// where it was found, and its kubeconfig, in memory only.
    #[serde(skip)]
    pub discovered: Option<membership::Discovered>,
}

impl ClusterConfig {
    /// A cluster reached through the context of its name, with every default.
    pub fn named(name: &str) -> Self {
        ClusterConfig {
            name: ClusterName::new(name),
            context: None,
            kubeconfig: None,
            enabled: true,
            use_cluster_autoscaler: true,
            dry_run: None,
            node_groups: Vec::new(),
            overrides: SettingsPatch::default(),
            discovered: None,
        }
    }

    /// Where this cluster is configured: `fleet.toml`, or the inventory object it was
    /// found in (`Secret fleet/prod-east`).
    pub fn source(&self) -> &str {
        self.discovered
            .as_ref()
            .map_or("fleet.toml", |d| d.source.as_str())
    }

    /// The kubeconfig context this cluster is reached through.
    pub fn context(&self) -> &str {
        self.context.as_deref().unwrap_or(&self.name)
    }
}

fn yes() -> bool {
    true
}

/// One problem in the configuration, with its key path (`clusters[2].overrides.cores`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    pub key: String,
    pub message: String,
}

/// Everything wrong with a configuration, found in one go.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub source_name: String,
    pub issues: Vec<ConfigIssue>,
}

/// The longest key and message an issue keeps: fleet.toml may hold a key or a value of any
/// size, and parsers quote what they refuse; the error lands in logs and `hub.lastReload`.
const MAX_ISSUE_KEY_BYTES: usize = 256;
const MAX_ISSUE_MESSAGE_BYTES: usize = 512;

impl ConfigIssue {
    /// The issue with its key and message bounded.
    fn bounded(self) -> Self {
        let cut = |s: String, max| {
            if s.len() <= max {
                s
            } else {
                crate::model::bounded(&s, max).into_owned()
            }
        };
        ConfigIssue {
            key: cut(self.key, MAX_ISSUE_KEY_BYTES),
            message: cut(self.message, MAX_ISSUE_MESSAGE_BYTES),
        }
    }
}

impl ConfigError {
    /// Every issue bounded (see [`ConfigIssue::bounded`]).
    pub fn new(source_name: &str, issues: Vec<ConfigIssue>) -> Self {
        ConfigError {
            source_name: source_name.to_string(),
            issues: issues.into_iter().map(ConfigIssue::bounded).collect(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} problem(s)", self.source_name, self.issues.len())?;
        for i in &self.issues {
            write!(f, "\n  {}: {}", i.key, i.message)?;
        }
        Ok(())
    }
}

impl FleetConfig {
    /// Reads a fleet.toml file, with environment overrides, and validates it.
    pub fn load(path: &Path) -> Result<FleetConfig, ConfigError> {
        let name = path.display().to_string();
        let text =
            crate::files::read_text(path, crate::files::CONFIG).map_err(|e| ConfigError {
                source_name: name.clone(),
                issues: vec![ConfigIssue {
                    key: "<file>".into(),
                    message: format!("cannot read it: {e}"),
                }],
            })?;
        FleetConfig::parse(&text, &name)
    }

    /// Parses fleet.toml text, with environment overrides, and validates it.
    pub fn parse(text: &str, name: &str) -> Result<FleetConfig, ConfigError> {
        strict_types(text, name)?;
        let source = config::File::from_str(text, config::FileFormat::Toml);
        FleetConfig::build(config::Config::builder().add_source(source), name)
    }

    fn build(
        builder: config::ConfigBuilder<config::builder::DefaultState>,
        name: &str,
    ) -> Result<FleetConfig, ConfigError> {
        let fail = |key: String, message: String| {
            ConfigError::new(name, vec![ConfigIssue { key, message }])
        };
        let mut builder = builder;
        for (key, value) in env::overrides(std::env::vars()) {
            let variable = env::variable_of(&key);
            if key.split('.').any(str::is_empty) {
                return Err(fail(
                    variable,
                    "does not name a fleet.toml key: write FLEETSCALER_<TABLE>__<KEY> (e.g. FLEETSCALER_HUB__SCAN_INTERVAL=5s)".into(),
                ));
            }
            builder = builder
                .set_override(&key, value)
                .map_err(|e| fail(variable, format!("cannot override {key}: {e}")))?;
        }
        let built = builder
            .build()
            .map_err(|e| fail("<file>".into(), e.to_string()))?;
        let parsed: FleetConfig = serde_path_to_error::deserialize(built).map_err(|e| {
            let key = e.path().to_string();
            let message = with_suggestion(&key, e.into_inner().to_string());
            fail(if key == "." { "<root>".into() } else { key }, message)
        })?;
        let issues = parsed.validate();
        if issues.is_empty() {
            Ok(parsed)
        } else {
            Err(ConfigError::new(name, issues))
        }
    }

    /// Every semantic problem: duplicate or empty names, invalid ranges, bad expander chains.
    pub fn validate(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        self.hub.validate(&mut issues);
        self.fleet.validate(&mut issues);
        self.membership.validate(&mut issues);
        check_patch(&self.defaults, "defaults", &mut issues);
        let mut seen = HashSet::new();
        for (i, c) in self.clusters.iter().enumerate() {
            let at = format!("clusters[{i}]");
            if c.name.trim().is_empty() {
                issues.push(ConfigIssue {
                    key: format!("{at}.name"),
                    message: "must not be empty".into(),
                });
            } else if !seen.insert(c.name.as_str()) {
                issues.push(ConfigIssue {
                    key: format!("{at}.name"),
                    message: format!("duplicate cluster name {:?}", c.name),
                });
            }
            check_patch(&c.overrides, &format!("{at}.overrides"), &mut issues);
            for (j, g) in c.node_groups.iter().enumerate() {
                if let Err(e) = g.check() {
                    issues.push(ConfigIssue {
                        key: format!("{at}.node_groups[{j}]"),
                        message: e.to_string(),
                    });
                }
            }
        }
        issues
    }

    pub fn cluster(&self, name: &str) -> Option<&ClusterConfig> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

/// The file as TOML says it, before the `config` crate reads it: that crate turns
/// `max_nodes_total = 1.9` into 2 and `nan` into 0 without a word, and names neither the key
/// nor the line of an integer past i64. Syntax errors are told here too, with their line.
fn strict_types(text: &str, name: &str) -> Result<(), ConfigError> {
    let line_of = |span: Option<std::ops::Range<usize>>| {
        span.map(|s| text[..s.start.min(text.len())].lines().count().max(1))
    };
    let issue = |key: String, message: String, line: Option<usize>| {
        let at = line.map_or(String::new(), |l| format!(" (line {l})"));
        Err(ConfigError::new(
            name,
            vec![ConfigIssue {
                key,
                message: format!("{message}{at}"),
            }],
        ))
    };
    let de = match toml::Deserializer::parse(text) {
        Ok(de) => de,
        Err(e) => {
            let line = line_of(e.span()).or_else(|| last_header_line(text));
            return issue("<file>".into(), e.message().to_string(), line);
        }
    };
    let Err(e) = serde_path_to_error::deserialize::<_, FleetConfig>(de) else {
        // The `config` crate holds integers as i64: one past it (read above as a u64) is
        // refused there with no place; TOML's own values name its line.
        return match toml::from_str::<toml::Table>(text) {
            Ok(_) => Ok(()),
            Err(e) => {
                let message = match e.message() {
                    m if m.contains("too large") => {
                        format!("integer too large: at most {} here", i64::MAX)
                    }
                    m => m.to_string(),
                };
                issue("<file>".into(), message, line_of(e.span()))
            }
        };
    };
    let inner = e.inner();
    // A TOML date where something else is expected: a type error of the key, not toml's
    // private field name.
    const DATETIME: &str = "$__toml_private_datetime";
    let key = e.path().to_string();
    let (key, message) = match key.strip_suffix(&format!(".{DATETIME}")) {
        Some(parent) => (
            parent.to_string(),
            "a date or time is not valid here".to_string(),
        ),
        None => {
            let message = with_suggestion(&key, inner.message().to_string());
            (key, message)
        }
    };
    issue(key, message, line_of(inner.span()))
}

/// The parser's message about the key at `path`, naming the valid key closest to an unknown
/// one: a setting's under `[defaults]` and `overrides`, any other table's key elsewhere.
fn with_suggestion(path: &str, message: String) -> String {
    let table = path.rsplit_once('.').map_or("", |(table, _)| table);
    let noun = if table == "defaults" || table.ends_with(".overrides") {
        "setting"
    } else {
        "key"
    };
    suggest::unknown_key(&message, noun).unwrap_or(message)
}

/// The line of the last table header, for a syntax error the parser gives no place for
/// (a header nested past its recursion limit).
fn last_header_line(text: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with('['))
        .map(|(i, _)| i + 1)
        .last()
}

/// The problems of a cluster's `overrides` (or `[defaults]`), each keyed under `at`.
pub fn check_patch(patch: &SettingsPatch, at: &str, issues: &mut Vec<ConfigIssue>) {
    let (_, warnings) = patch.apply_to(&mut Settings::default());
    issues.extend(warnings.into_iter().map(|w| ConfigIssue {
        key: format!("{at}.{}", w.key),
        message: w.message,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_reported_with_its_key_path() {
        let bad = r#"
[defaults]
cores = { min = 9, max = 3 }
expanders = ["random", "random"]

[[clusters]]
name = "a"
[[clusters]]
name = "a"
[clusters.overrides]
memory_gib = { min = 100, max = 10 }
"#;
        let err = FleetConfig::parse(bad, "fleet.toml").unwrap_err();
        let keys: Vec<&str> = err.issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "defaults.cores",
                "defaults.expanders",
                "clusters[1].name",
                "clusters[1].overrides.memory_gib"
            ]
        );
        assert!(err.to_string().starts_with("fleet.toml: 4 problem(s)"));
    }

    #[test]
    fn unknown_keys_and_bad_durations_name_the_key() {
        let err = FleetConfig::parse(
            "[[clusters]]\nname = \"a\"\n[clusters.overrides]\nmax_nodes_totl = 3\n",
            "f",
        )
        .unwrap_err();
        assert_eq!(err.issues[0].key, "clusters[0].overrides.max_nodes_totl");
        assert_eq!(
            err.issues[0].message,
            "unknown setting `max_nodes_totl`; did you mean `max_nodes_total`? (line 3)"
        );
        let err = FleetConfig::parse(
            "[defaults]\nmax_node_provision_time = \"15 minutes\"\n",
            "f",
        )
        .unwrap_err();
        assert_eq!(err.issues[0].key, "defaults.max_node_provision_time");
        let err = FleetConfig::parse("[defaults\n", "f").unwrap_err();
        assert_eq!(err.issues[0].key, "<file>");
    }

    #[test]
    fn an_unknown_key_names_the_closest_valid_one() {
        let message = |text: &str| FleetConfig::parse(text, "f").unwrap_err().issues[0].clone();
        let i = message("[defaults]\nscale_down_unneded_time = \"5m\"\n");
        assert_eq!(i.key, "defaults.scale_down_unneded_time");
        assert_eq!(
            i.message,
            "unknown setting `scale_down_unneded_time`; did you mean `scale_down_unneeded_time`? (line 1)"
        );
        // Any table's keys, not only the settings.
        let i = message("[hub]\nscan_intervall = \"5s\"\n");
        assert_eq!(
            i.message,
            "unknown key `scan_intervall`; did you mean `scan_interval`? (line 1)"
        );
        let i = message("[[clusters]]\nname = \"a\"\ncontxt = \"b\"\n");
        assert!(i.message.contains("did you mean `context`?"), "{i:?}");
        // Nothing near: the valid keys are listed.
        let i = message("[defaults]\nnothing_like_it = 1\n");
        assert!(
            i.message
                .starts_with("unknown setting `nothing_like_it`, expected one of `"),
            "{i:?}"
        );
    }
}
