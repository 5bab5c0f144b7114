//! fleet.toml `[membership]`: clusters the hub finds in the management cluster's inventory,
//! beside fleet.toml's own `[[clusters]]`. Three sources, each on or off: Secrets carrying a
//! label and a kubeconfig (and Argo CD's cluster Secrets), SIG-Multicluster ClusterProfiles
//! reached through an access provider's credential plugin, and Open Cluster Management's
//! ManagedClusters with a ManagedServiceAccount's token.
//!
//! A cluster found there carries its kubeconfig in memory ([`InlineKubeconfig`]): it is
//! never written to disk, serialized or printed.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use super::ConfigIssue;
use super::hub::is_dns_label;
use crate::engine::settings::duration_serde;
use crate::model::duration::format_go_duration;

/// Below this, a resync would list the whole inventory in a busy loop.
const MIN_RESYNC: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MembershipConfig {
    /// Off by default: fleet.toml's clusters only.
    pub enabled: bool,
    /// Kubeconfig context (in `hub.kubeconfigs`) of the management cluster; in-cluster
    /// when absent, as leader election.
    pub context: Option<String>,
    /// Namespaces of the Secrets and ClusterProfiles read; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Every source is listed again this often (changes seen by a watch come sooner).
    #[serde(with = "duration_serde")]
    pub resync: Duration,
    pub secrets: SecretsSource,
    pub cluster_profiles: ClusterProfilesSource,
    pub managed_clusters: ManagedClustersSource,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        MembershipConfig {
            enabled: false,
            context: None,
            namespaces: Vec::new(),
            resync: Duration::from_secs(30),
            secrets: SecretsSource::default(),
            cluster_profiles: ClusterProfilesSource::default(),
            managed_clusters: ManagedClustersSource::default(),
        }
    }
}

/// Secrets with a label, holding a kubeconfig; Argo CD's cluster Secrets when asked.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecretsSource {
    pub enabled: bool,
    /// The label key that marks a Secret as a cluster; its value names the cluster (the
    /// Secret's name when empty).
    pub label: String,
    /// Also Argo CD's cluster Secrets (`argocd.argoproj.io/secret-type: cluster`).
    pub argocd: bool,
    /// Run the credential plugins (`exec`) that Secrets name. Off: whoever may write such a
    /// Secret could otherwise run a command of their choice in the hub.
    pub allow_exec: bool,
}

impl Default for SecretsSource {
    fn default() -> Self {
        SecretsSource {
            enabled: true,
            label: "fleetscaler.io/cluster".into(),
            argocd: false,
            allow_exec: false,
        }
    }
}

/// SIG-Multicluster ClusterProfiles (`multicluster.x-k8s.io/v1alpha1`): each names, in
/// `status.accessProviders`, the server and CA of the cluster per access provider; the hub
/// supplies the provider's credential plugin, as the ClusterProfile credentials KEP says.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterProfilesSource {
    pub enabled: bool,
    /// Access provider name → the credential plugin that gives a token for it.
    pub providers: BTreeMap<String, ExecPlugin>,
}

/// A client-go exec credential plugin, as a kubeconfig's `users[].user.exec`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecPlugin {
    pub command: String,
    pub args: Vec<String>,
    /// Values may be credentials: configuration printouts show the names only.
    #[serde(serialize_with = "names_only")]
    pub env: BTreeMap<String, String>,
    pub api_version: String,
    /// Hand the plugin the cluster's server, CA and the provider's exec extension
    /// (`KUBERNETES_EXEC_INFO`).
    pub provide_cluster_info: bool,
}

fn names_only<S: Serializer>(env: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(env.keys().map(|k| (k, "<redacted>")))
}

impl Default for ExecPlugin {
    fn default() -> Self {
        ExecPlugin {
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            api_version: "client.authentication.k8s.io/v1".into(),
            provide_cluster_info: false,
        }
    }
}

/// Open Cluster Management / ACM ManagedClusters
/// (`cluster.open-cluster-management.io/v1`), reached with the token of a
/// ManagedServiceAccount of this name in each cluster's namespace.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ManagedClustersSource {
    pub enabled: bool,
    pub service_account: String,
}

impl Default for ManagedClustersSource {
    fn default() -> Self {
        ManagedClustersSource {
            enabled: false,
            service_account: "fleetscaler".into(),
        }
    }
}

impl MembershipConfig {
    /// One line: where the inventory is read, how often, and which sources.
    pub fn describe(&self) -> String {
        if !self.enabled {
            return "off: fleet.toml's clusters only".into();
        }
        let on = self
            .context
            .as_deref()
            .unwrap_or("the in-cluster service account");
        let place = if self.namespaces.is_empty() {
            "every namespace".to_string()
        } else {
            format!("namespaces {}", self.namespaces.join(", "))
        };
        let mut sources = Vec::new();
        if self.secrets.enabled {
            let argocd = if self.secrets.argocd {
                " and Argo CD's cluster Secrets"
            } else {
                ""
            };
            sources.push(format!("Secrets labelled {}{argocd}", self.secrets.label));
        }
        if self.cluster_profiles.enabled {
            let names: Vec<&str> = self
                .cluster_profiles
                .providers
                .keys()
                .map(String::as_str)
                .collect();
            sources.push(format!(
                "ClusterProfiles through providers {}",
                names.join(", ")
            ));
        }
        if self.managed_clusters.enabled {
            sources.push(format!(
                "ManagedClusters with ManagedServiceAccount {}",
                self.managed_clusters.service_account
            ));
        }
        format!(
            "read with {on} in {place}, every {}: {}",
            format_go_duration(self.resync),
            sources.join("; ")
        )
    }

    pub fn validate(&self, issues: &mut Vec<ConfigIssue>) {
        let mut bad = |key: &str, message: String| {
            issues.push(ConfigIssue {
                key: format!("membership.{key}"),
                message,
            })
        };
        if self.resync < MIN_RESYNC {
            bad(
                "resync",
                format!(
                    "{} would list the inventory in a busy loop: at least {}",
                    format_go_duration(self.resync),
                    format_go_duration(MIN_RESYNC)
                ),
            );
        }
        if self.context.as_deref().is_some_and(str::is_empty) {
            bad(
                "context",
                "must not be empty (leave it out for in-cluster)".into(),
            );
        }
        for (i, ns) in self.namespaces.iter().enumerate() {
            if !is_dns_label(ns) {
                bad(
                    &format!("namespaces[{i}]"),
                    format!("{ns:?} is not a namespace name"),
                );
            }
        }
        if let Err(why) = check_label_key(&self.secrets.label) {
            bad("secrets.label", format!("{:?} {why}", self.secrets.label));
        }
        for (name, plugin) in &self.cluster_profiles.providers {
            if plugin.command.trim().is_empty() {
                bad(
                    &format!("cluster_profiles.providers.{name}.command"),
                    "must name the plugin to run".into(),
                );
            }
        }
        if !is_dns_subdomain(&self.managed_clusters.service_account) {
            bad(
                "managed_clusters.service_account",
                format!(
                    "{:?} is not a ManagedServiceAccount name",
                    self.managed_clusters.service_account
                ),
            );
        }
        if !self.enabled {
            return;
        }
        let sources = [
            self.secrets.enabled,
            self.cluster_profiles.enabled,
            self.managed_clusters.enabled,
        ];
        if !sources.contains(&true) {
            bad(
                "enabled",
                "no source is on: turn on secrets, cluster_profiles or managed_clusters".into(),
            );
        }
        if self.cluster_profiles.enabled && self.cluster_profiles.providers.is_empty() {
            bad(
                "cluster_profiles.providers",
                "no access provider has a plugin: no ClusterProfile could be reached".into(),
            );
        }
    }
}

/// A DNS-1123 subdomain: what most object names must be.
pub(crate) fn is_dns_subdomain(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    (1..=253).contains(&name.len())
        && name.chars().all(ok)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// characters (letters, digits, `-`, `_`, `.`, starting and ending with a letter or digit).
fn check_label_key(key: &str) -> Result<(), &'static str> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return Err("has a prefix that is not a DNS subdomain");
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let valid = (1..=63).contains(&name.len())
        && name.chars().all(ok)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err("is not a label key")
    }
}

/// A kubeconfig held in memory (JSON), built from what the inventory holds for one cluster.
/// Two are equal when their text is: a changed credential restarts the cluster. Never
/// printed: its `Debug` shows its size only.
#[derive(Clone, PartialEq, Eq)]
pub struct InlineKubeconfig {
    text: Arc<str>,
}

impl InlineKubeconfig {
    pub fn new(text: String) -> Self {
        InlineKubeconfig { text: text.into() }
    }

    /// The kubeconfig's text; it holds credentials.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for InlineKubeconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InlineKubeconfig({} bytes, not shown)", self.text.len())
    }
}

/// A cluster found in the management cluster: where, and how it is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovered {
    /// The object it came from: `Secret fleet/prod-east`, `ClusterProfile ns/name`,
    /// `ManagedCluster name`.
    pub source: String,
    pub kubeconfig: InlineKubeconfig,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetConfig;

    fn issues(text: &str) -> Vec<String> {
        match FleetConfig::parse(text, "f") {
            Ok(_) => Vec::new(),
            Err(e) => e.issues.into_iter().map(|i| i.key).collect(),
        }
    }

    #[test]
    fn off_by_default_and_each_source_read() {
        let config = FleetConfig::parse("", "f").unwrap();
        assert!(!config.membership.enabled);
        let text = r#"
[membership]
enabled = true
context = "management"
namespaces = ["fleet"]
resync = "10s"
[membership.secrets]
argocd = true
[membership.cluster_profiles]
enabled = true
[membership.cluster_profiles.providers.open-cluster-management]
command = "/bin/cp-creds"
args = ["--x"]
env = { A = "b" }
[membership.managed_clusters]
enabled = true
service_account = "hub"
"#;
        let config = FleetConfig::parse(text, "f").unwrap();
        let m = &config.membership;
        assert!(m.secrets.enabled && m.secrets.argocd && !m.secrets.allow_exec);
        assert_eq!(m.secrets.label, "fleetscaler.io/cluster");
        let plugin = &m.cluster_profiles.providers["open-cluster-management"];
        assert_eq!(plugin.command, "/bin/cp-creds");
        assert_eq!(plugin.api_version, "client.authentication.k8s.io/v1");
        assert_eq!(m.managed_clusters.service_account, "hub");
        assert_eq!(m.resync, Duration::from_secs(10));
    }

    #[test]
    fn mistakes_name_their_key() {
        let text = r#"
[membership]
enabled = true
context = ""
namespaces = ["Fleet"]
resync = "10ms"
[membership.secrets]
enabled = false
label = "-bad"
[membership.cluster_profiles]
enabled = true
[membership.managed_clusters]
service_account = "Not A Name"
"#;
        assert_eq!(
            issues(text),
            [
                "membership.resync",
                "membership.context",
                "membership.namespaces[0]",
                "membership.secrets.label",
                "membership.managed_clusters.service_account",
                "membership.cluster_profiles.providers",
            ]
        );
        let none = "[membership]\nenabled = true\n[membership.secrets]\nenabled = false\n";
        assert_eq!(issues(none), ["membership.enabled"]);
        let blank = "[membership.cluster_profiles.providers.p]\ncommand = \" \"\n";
        assert_eq!(
            issues(blank),
            ["membership.cluster_profiles.providers.p.command"]
        );
        assert_eq!(
            issues("[membership]\nsecret = {}\n"),
            ["membership.secret"],
            "unknown keys are errors"
        );
    }

    #[test]
    fn label_keys() {
        for good in ["fleetscaler.io/cluster", "cluster", "a.b/c_d.e-f"] {
            assert!(check_label_key(good).is_ok(), "{good}");
        }
        for bad in ["", "/x", "a/", "Bad_/x", "x/-y", &"a".repeat(64)] {
            assert!(check_label_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plugin_env_values_are_never_printed_and_the_description_names_the_sources() {
        let text = r#"
[membership]
enabled = true
namespaces = ["fleet"]
[membership.secrets]
argocd = true
[membership.cluster_profiles]
enabled = true
[membership.cluster_profiles.providers.ocm]
command = "cp-creds"
env = { TOKEN = "hunter2" }
"#;
        let config = FleetConfig::parse(text, "f").unwrap();
        let shown = serde_json::to_string(&config.membership).unwrap();
        assert!(
            shown.contains("TOKEN") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert_eq!(
            config.membership.describe(),
            "read with the in-cluster service account in namespaces fleet, every 30s: \
             Secrets labelled fleetscaler.io/cluster and Argo CD's cluster Secrets; \
             ClusterProfiles through providers ocm"
        );
        assert_eq!(
            MembershipConfig::default().describe(),
            "off: fleet.toml's clusters only"
        );
    }

    #[test]
    fn an_inline_kubeconfig_never_shows_its_text() {
        let k = InlineKubeconfig::new("token: hunter2".into());
        let shown = format!(
            "{:?}",
            Discovered {
                source: "Secret a/b".into(),
                kubeconfig: k
            }
        );
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("Secret a/b"), "{shown}");
    }
}
