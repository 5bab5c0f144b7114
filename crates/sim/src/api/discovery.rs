//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/<group>` and the resource list
//! of each group version, from the resource table. Clients (kubectl, kube's discovery) find
//! kinds, short names, verbs and subresources (`machinesets/scale` → `autoscaling/v1 Scale`)
//! here.

use serde_json::{Value, json};

use super::resources::{Resource, group_versions};
use super::status::ApiError;

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "34", "gitVersion": "v1.34.0-fleetscaler-sim",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`: the core group's versions.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_doc(group: &str) -> Option<Value> {
    let versions: Vec<Value> = group_versions()
        .into_iter()
        .filter(|(g, _)| *g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first()?.clone();
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions, "preferredVersion": preferred}),
    )
}

/// `/apis`: every named group.
pub fn groups() -> Value {
    let mut names: Vec<&str> = Vec::new();
    for (g, _) in group_versions() {
        if !g.is_empty() && !names.contains(&g) {
            names.push(g);
        }
    }
    let groups: Vec<Value> = names.into_iter().filter_map(group_doc).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(name: &str) -> Result<Value, ApiError> {
    group_doc(name).ok_or_else(not_found)
}

/// The `APIResourceList` of `group/version`.
pub fn resource_list(group: &str, version: &str) -> Result<Value, ApiError> {
    let mut resources = Vec::new();
    for r in Resource::ALL {
        let d = r.def();
        if d.group != group || d.version != version {
            continue;
        }
        resources.push(json!({
            "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": d.short_names,
        }));
        let sub = |name: &str, group: &str, version: &str, kind: &str, verbs: &[&str]| {
            json!({"name": format!("{}/{name}", d.plural), "singularName": "", "namespaced": d.namespaced,
                   "group": group, "version": version, "kind": kind, "verbs": verbs})
        };
        if d.status {
            resources.push(sub(
                "status",
                d.group,
                d.version,
                d.kind,
                &["get", "patch", "update"],
            ));
        }
        if d.scale {
            resources.push(sub(
                "scale",
                "autoscaling",
                "v1",
                "Scale",
                &["get", "patch", "update"],
            ));
        }
        if r == Resource::Pods {
            resources.push(sub("binding", "", "v1", "Binding", &["create"]));
            resources.push(sub("eviction", "policy", "v1", "Eviction", &["create"]));
        }
    }
    if resources.is_empty() {
        return Err(not_found());
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

/// The API server's answer to a path it does not serve.
pub fn not_found() -> ApiError {
    ApiError::not_found("", "", "").with_message("the server could not find the requested resource")
}

impl ApiError {
    /// The same error with another message.
    pub fn with_message(mut self, message: &str) -> Self {
        self.message = message.to_string();
        self.details = None;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_subresource_is_discoverable() {
        let list = resource_list("machine.openshift.io", "v1beta1").unwrap();
        let scale = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "machinesets/scale")
            .unwrap();
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["kind"], "Scale");
    }

    #[test]
    fn groups_have_a_preferred_version() {
        let g = group("autoscaling.openshift.io").unwrap();
        assert_eq!(g["preferredVersion"]["version"], "v1");
        assert!(group("nope.example.com").is_err());
        assert!(resource_list("", "v2").is_err());
        assert!(
            groups()["groups"]
                .as_array()
                .unwrap()
                .iter()
                .all(|g| g["name"] != "")
        );
    }
}
