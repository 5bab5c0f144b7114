//! The two Machine APIs and their versions: OpenShift's `machine.openshift.io` and Cluster
//! API's `cluster.x-k8s.io`, each read and written at the version the cluster serves and
//! prefers among those the hub understands.
//!
//! The version is data, chosen once per cluster from discovery ([`MachineApis`]), and it
//! travels with every watch and every write: Cluster API ≥ 1.11 stores v1beta2 and converts
//! every v1beta1 read through a webhook, and may serve v1beta2 alone.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// Which Machine API a resource belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum MachineApiGroup {
    /// `machine.openshift.io` (OpenShift Machine API).
    #[serde(rename = "machine.openshift.io")]
    OpenShift,
    /// `cluster.x-k8s.io` (Cluster API).
    #[serde(rename = "cluster.x-k8s.io")]
    ClusterApi,
}

impl MachineApiGroup {
    pub const ALL: [MachineApiGroup; 2] = [MachineApiGroup::OpenShift, MachineApiGroup::ClusterApi];

    /// The group of an `apiVersion` (`cluster.x-k8s.io/v1beta2`), whatever its version.
    pub fn from_api_version(api_version: &str) -> Option<Self> {
        Self::from_domain(api_version.split_once('/')?.0)
    }

    /// The group named by its domain (`cluster.x-k8s.io`).
    pub fn from_domain(domain: &str) -> Option<Self> {
        MachineApiGroup::ALL
            .into_iter()
            .find(|g| g.domain() == domain)
    }

    pub fn domain(self) -> &'static str {
        match self {
            MachineApiGroup::OpenShift => "machine.openshift.io",
            MachineApiGroup::ClusterApi => "cluster.x-k8s.io",
        }
    }

    /// The versions of this group the hub reads and writes, most preferred first.
    pub fn understood(self) -> &'static [MachineApiVersion] {
        match self {
            MachineApiGroup::OpenShift => &[MachineApiVersion::V1beta1],
            MachineApiGroup::ClusterApi => {
                &[MachineApiVersion::V1beta2, MachineApiVersion::V1beta1]
            }
        }
    }

    /// Whether the hub understands `version` of this group.
    pub fn understands(self, version: &str) -> Option<MachineApiVersion> {
        self.understood()
            .iter()
            .copied()
            .find(|v| v.as_str() == version)
    }

    pub fn min_size_annotation(self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-group-min-size",
            self.domain()
        )
    }

    pub fn max_size_annotation(self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-group-max-size",
            self.domain()
        )
    }

    /// The annotation that tells the MachineSet controller which machine to remove first.
    pub fn delete_machine_annotation(self) -> String {
        format!("{}/delete-machine", self.domain())
    }

    pub fn paused_annotation(self) -> String {
        format!("{}/paused", self.domain())
    }
}

impl fmt::Display for MachineApiGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.domain())
    }
}

/// A version of a Machine API the hub understands. The fields the hub reads exist in both
/// (moved ones are read from either place), so projections do not depend on it; requests do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum MachineApiVersion {
    #[serde(rename = "v1beta1")]
    V1beta1,
    #[serde(rename = "v1beta2")]
    V1beta2,
}

impl MachineApiVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            MachineApiVersion::V1beta1 => "v1beta1",
            MachineApiVersion::V1beta2 => "v1beta2",
        }
    }
}

impl fmt::Display for MachineApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Machine API group at the version it is reached through: `cluster.x-k8s.io/v1beta2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MachineApi {
    pub group: MachineApiGroup,
    pub version: MachineApiVersion,
}

impl MachineApi {
    /// The `apiVersion` of its objects.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group.domain(), self.version.as_str())
    }
}

impl fmt::Display for MachineApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group.domain(), self.version.as_str())
    }
}

/// The version chosen for each Machine API group a cluster serves in a version the hub
/// understands. A group missing here is not served (or only in versions the hub cannot read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineApis(BTreeMap<MachineApiGroup, MachineApiVersion>);

impl MachineApis {
    pub fn insert(&mut self, group: MachineApiGroup, version: MachineApiVersion) {
        self.0.insert(group, version);
    }

    pub fn with(mut self, group: MachineApiGroup, version: MachineApiVersion) -> Self {
        self.insert(group, version);
        self
    }

    /// The group at its chosen version, if the cluster serves it in one the hub understands.
    pub fn get(&self, group: MachineApiGroup) -> Option<MachineApi> {
        let version = *self.0.get(&group)?;
        Some(MachineApi { group, version })
    }

    /// Every served group at its chosen version.
    pub fn iter(&self) -> impl Iterator<Item = MachineApi> + '_ {
        self.0
            .iter()
            .map(|(&group, &version)| MachineApi { group, version })
    }
}

/// What a cluster's discovery says of one Machine API group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionChoice {
    /// The cluster does not serve the group.
    Absent,
    /// The version to read and write.
    Chosen(MachineApiVersion),
    /// Served only in versions the hub does not understand (listed as served).
    Unsupported(Vec<String>),
}

impl MachineApiGroup {
    /// The version to use, from the versions a cluster serves of this group and the one it
    /// prefers: the preferred one when the hub understands it (the cluster reads and writes
    /// it without conversion), else the first understood one served.
    pub fn choose_version(self, served: &[&str], preferred: Option<&str>) -> VersionChoice {
        if served.is_empty() {
            return VersionChoice::Absent;
        }
        let preferred = preferred
            .filter(|p| served.contains(p))
            .and_then(|p| self.understands(p));
        let first_understood = || {
            self.understood()
                .iter()
                .copied()
                .find(|v| served.contains(&v.as_str()))
        };
        match preferred.or_else(first_understood) {
            Some(v) => VersionChoice::Chosen(v),
            None => VersionChoice::Unsupported(served.iter().map(|s| s.to_string()).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPI: MachineApiGroup = MachineApiGroup::ClusterApi;

    #[test]
    fn cluster_api_prefers_v1beta2_when_served_and_preferred() {
        assert_eq!(
            CAPI.choose_version(&["v1beta2", "v1beta1"], Some("v1beta2")),
            VersionChoice::Chosen(MachineApiVersion::V1beta2)
        );
        assert_eq!(
            CAPI.choose_version(&["v1beta2"], Some("v1beta2")),
            VersionChoice::Chosen(MachineApiVersion::V1beta2)
        );
    }

    #[test]
    fn the_clusters_preferred_version_wins_when_understood() {
        assert_eq!(
            CAPI.choose_version(&["v1beta1", "v1beta2"], Some("v1beta1")),
            VersionChoice::Chosen(MachineApiVersion::V1beta1)
        );
    }

    #[test]
    fn an_unknown_preferred_version_falls_back_to_the_best_understood() {
        assert_eq!(
            CAPI.choose_version(&["v1", "v1beta2", "v1beta1"], Some("v1")),
            VersionChoice::Chosen(MachineApiVersion::V1beta2)
        );
        assert_eq!(
            CAPI.choose_version(&["v1beta1"], None),
            VersionChoice::Chosen(MachineApiVersion::V1beta1)
        );
    }

    #[test]
    fn only_unknown_versions_are_named() {
        assert_eq!(
            CAPI.choose_version(&["v1alpha4", "v1"], Some("v1")),
            VersionChoice::Unsupported(vec!["v1alpha4".into(), "v1".into()])
        );
        assert_eq!(
            MachineApiGroup::OpenShift.choose_version(&["v1beta2"], Some("v1beta2")),
            VersionChoice::Unsupported(vec!["v1beta2".into()])
        );
        assert_eq!(CAPI.choose_version(&[], None), VersionChoice::Absent);
    }

    #[test]
    fn a_machine_api_names_its_api_version() {
        let apis = MachineApis::default().with(CAPI, MachineApiVersion::V1beta2);
        let capi = apis.get(CAPI).unwrap();
        assert_eq!(capi.api_version(), "cluster.x-k8s.io/v1beta2");
        assert_eq!(apis.get(MachineApiGroup::OpenShift), None);
        assert_eq!(
            MachineApiGroup::from_api_version("machine.openshift.io/v1beta1"),
            Some(MachineApiGroup::OpenShift)
        );
    }
}
