//! Which Machine APIs a server serves, from its API group list: OpenShift's
//! `machine.openshift.io/v1beta1`, and Cluster API at `v1beta2`, the version Cluster API
//! 1.11 and later prefer and the only one whose shapes the machine controller writes. A
//! group served at other versions only is skipped with a note saying why.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIGroupList};

use crate::machine_api::MachineApi;
use crate::settings::Flavor;

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// The Machine APIs to run a controller for.
    pub apis: Vec<MachineApi>,
    /// Why a Machine API group that is there is not used.
    pub notes: Vec<String>,
}

/// The Machine APIs of `groups` this controller can serve.
pub fn served(groups: &APIGroupList) -> Served {
    let mut out = Served::default();
    for flavor in [Flavor::OpenShift, Flavor::ClusterApi] {
        let api = MachineApi::of(flavor);
        let Some(group) = groups.groups.iter().find(|g| g.name == api.group) else {
            continue;
        };
        let versions: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
        if versions.contains(&api.version) {
            if let Some(preferred) = preferred(group).filter(|p| *p != api.version) {
                out.notes.push(format!(
                    "{} prefers {preferred}; writing {}, which it also serves",
                    api.group, api.version
                ));
            }
            out.apis.push(api);
        } else {
            out.notes.push(format!(
                "{} is served at {} only; this controller writes {}: skipped",
                api.group,
                versions.join(", "),
                api.version
            ));
        }
    }
    out
}

fn preferred(group: &APIGroup) -> Option<&str> {
    group.preferred_version.as_ref().map(|v| v.version.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(groups: serde_json::Value) -> APIGroupList {
        serde_json::from_value(json!({"groups": groups})).unwrap()
    }

    fn group(name: &str, versions: &[&str]) -> serde_json::Value {
        let vs: Vec<_> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
            .collect();
        json!({"name": name, "versions": vs, "preferredVersion": vs[0]})
    }

    #[test]
    fn both_apis_at_their_versions() {
        let s = served(&list(json!([
            group("apps", &["v1"]),
            group("machine.openshift.io", &["v1beta1"]),
            group("cluster.x-k8s.io", &["v1beta2", "v1beta1"]),
        ])));
        let found: Vec<String> = s.apis.iter().map(MachineApi::api_version).collect();
        assert_eq!(
            found,
            ["machine.openshift.io/v1beta1", "cluster.x-k8s.io/v1beta2"]
        );
        assert!(s.notes.is_empty(), "{:?}", s.notes);
    }

    #[test]
    fn cluster_api_without_v1beta2_is_skipped_with_a_reason() {
        let s = served(&list(json!([group("cluster.x-k8s.io", &["v1beta1"])])));
        assert!(s.apis.is_empty());
        assert!(
            s.notes[0].contains("served at v1beta1 only"),
            "{:?}",
            s.notes
        );
        assert_eq!(served(&list(json!([]))), Served::default());
    }

    #[test]
    fn a_preferred_older_version_is_noted() {
        let s = served(&list(json!([group(
            "cluster.x-k8s.io",
            &["v1beta1", "v1beta2"]
        )])));
        assert_eq!(s.apis.len(), 1);
        assert!(s.notes[0].contains("prefers v1beta1"));
    }
}
