//! The requests the test-bed world sends, built without a server so they can be checked:
//! URL paths per resource and version, list/create/replace/delete, and how a change to an
//! object splits into a write of the object and a write of its `status` subresource (a
//! custom resource with a status subresource ignores `status` on the main resource, and
//! everything but `status` on `/status`).

use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::Request;
use serde_json::Value;

use crate::api::resources::Resource;
use crate::store::Key;

/// Who the writes are from, in managedFields.
pub const FIELD_MANAGER: &str = "fleetscaler-sim-machines";

/// A resource at the version the server is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: Resource,
    pub version: &'static str,
}

impl Target {
    /// `/api/v1[/namespaces/<ns>]/<plural>` or `/apis/<group>/<version>[...]/<plural>`.
    pub fn url_path(&self, namespace: Option<&str>) -> String {
        let def = self.resource.def();
        let root = if def.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", def.group, self.version)
        };
        match namespace.filter(|ns| def.namespaced && !ns.is_empty()) {
            Some(ns) => format!("{root}/namespaces/{ns}/{}", def.plural),
            None => format!("{root}/{}", def.plural),
        }
    }

    /// `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        let group = self.resource.def().group;
        if group.is_empty() {
            self.version.to_string()
        } else {
            format!("{group}/{}", self.version)
        }
    }

    /// How an operation on `key` (`None`: the collection) is named in logs and errors.
    pub fn describe(&self, verb: &str, key: Option<&Key>, subresource: Option<&str>) -> String {
        let def = self.resource.def();
        let mut what = format!("{verb} {}", def.plural);
        if !def.group.is_empty() {
            what = format!("{what}.{}/{}", def.group, self.version);
        }
        if let Some(key) = key {
            let name = if key.namespace.is_empty() {
                key.name.to_string()
            } else {
                format!("{}/{}", key.namespace, key.name)
            };
            what = format!("{what} {name}");
        }
        if let Some(sub) = subresource {
            what = format!("{what} ({sub})");
        }
        what
    }

    fn request(&self, namespace: &str) -> Request {
        Request::new(self.url_path(Some(namespace)))
    }

    /// Every object, in all namespaces.
    pub fn list(&self) -> Result<http::Request<Vec<u8>>, BuildError> {
        Ok(Request::new(self.url_path(None)).list(&ListParams::default())?)
    }

    pub fn create(
        &self,
        namespace: &str,
        body: &Value,
    ) -> Result<http::Request<Vec<u8>>, BuildError> {
        Ok(self
            .request(namespace)
            .create(&post_params(), serde_json::to_vec(body)?)?)
    }

    /// A PUT of the object; its `metadata.resourceVersion` makes it conditional.
    pub fn replace(&self, key: &Key, body: &Value) -> Result<http::Request<Vec<u8>>, BuildError> {
        Ok(self.request(&key.namespace).replace(
            &key.name,
            &post_params(),
            serde_json::to_vec(body)?,
        )?)
    }

    /// A PUT of the object's `status` subresource, conditional like `replace`.
    pub fn replace_status(
        &self,
        key: &Key,
        body: &Value,
    ) -> Result<http::Request<Vec<u8>>, BuildError> {
        Ok(self.request(&key.namespace).replace_subresource(
            "status",
            &key.name,
            &post_params(),
            serde_json::to_vec(body)?,
        )?)
    }

    pub fn delete(&self, key: &Key) -> Result<http::Request<Vec<u8>>, BuildError> {
        Ok(self
            .request(&key.namespace)
            .delete(&key.name, &DeleteParams::default())?)
    }
}

/// Why a request could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Body(#[from] serde_json::Error),
    #[error(transparent)]
    Request(#[from] kube::core::request::Error),
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

/// Which writes a change from `old` to `new` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writes {
    /// A PUT of the object (metadata, spec, ...).
    pub main: bool,
    /// A PUT of `/status`.
    pub status: bool,
}

/// The writes that carry the change from `old` to `new` of `resource`.
pub fn writes(resource: Resource, old: &Value, new: &Value) -> Writes {
    let status_changed = old.get("status") != new.get("status");
    let rest_changed = match (old.as_object(), new.as_object()) {
        (Some(o), Some(n)) => o
            .keys()
            .chain(n.keys())
            .filter(|k| k.as_str() != "status")
            .any(|k| o.get(k) != n.get(k)),
        _ => old != new,
    };
    if resource.def().status {
        Writes {
            main: rest_changed,
            status: status_changed,
        }
    } else {
        Writes {
            main: rest_changed || status_changed,
            status: false,
        }
    }
}

/// Whether the server drops `status` from a created object (custom resources with a status
/// subresource do; a Node keeps the status it registers with).
pub fn status_dropped_on_create(resource: Resource) -> bool {
    resource.machine_group().is_some() && resource.def().status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MACHINES: Target = Target {
        resource: Resource::CapiMachines,
        version: "v1beta2",
    };

    #[test]
    fn paths_for_namespaced_cluster_scoped_and_all_namespaces() {
        assert_eq!(
            MACHINES.url_path(Some("ns")),
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines"
        );
        assert_eq!(
            MACHINES.url_path(None),
            "/apis/cluster.x-k8s.io/v1beta2/machines"
        );
        let nodes = Target {
            resource: Resource::Nodes,
            version: "v1",
        };
        assert_eq!(nodes.url_path(Some("ignored")), "/api/v1/nodes");
        assert_eq!(nodes.api_version(), "v1");
        assert_eq!(MACHINES.api_version(), "cluster.x-k8s.io/v1beta2");
    }

    #[test]
    fn status_goes_to_the_status_subresource() {
        let key = Key::new("ns", "m1");
        let body = json!({"metadata": {"name": "m1", "resourceVersion": "7"}, "status": {"phase": "Running"}});
        let put = MACHINES.replace_status(&key, &body).unwrap();
        assert_eq!(put.method(), "PUT");
        assert!(
            put.uri()
                .path()
                .ends_with("/namespaces/ns/machines/m1/status"),
            "{}",
            put.uri()
        );
        let sent: Value = serde_json::from_slice(put.body()).unwrap();
        assert_eq!(sent["metadata"]["resourceVersion"], "7", "conditional");
        let main = MACHINES.replace(&key, &body).unwrap();
        assert!(main.uri().path().ends_with("/machines/m1"));
        assert!(
            main.uri()
                .query()
                .unwrap_or_default()
                .contains("fieldManager=fleetscaler-sim-machines")
        );
        let post = MACHINES.create("ns", &body).unwrap();
        assert_eq!(post.method(), "POST");
        assert_eq!(
            post.uri().path(),
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines"
        );
        assert_eq!(MACHINES.delete(&key).unwrap().method(), "DELETE");
    }

    #[test]
    fn a_change_splits_into_main_and_status_writes() {
        let old = json!({"metadata": {"name": "m"}, "spec": {"a": 1}, "status": {"phase": "Provisioning"}});
        let mut status_only = old.clone();
        status_only["status"]["phase"] = json!("Running");
        let w = writes(Resource::CapiMachines, &old, &status_only);
        assert_eq!((w.main, w.status), (false, true));
        let mut both = status_only.clone();
        both["spec"]["providerID"] = json!("aws:///x");
        let w = writes(Resource::OcpMachines, &old, &both);
        assert_eq!((w.main, w.status), (true, true));
        let mut finalizers = old.clone();
        finalizers["metadata"]["finalizers"] = json!([]);
        let w = writes(Resource::CapiMachines, &old, &finalizers);
        assert_eq!((w.main, w.status), (true, false));
        // Without a status subresource the object carries its status.
        let w = writes(Resource::ConfigMaps, &old, &status_only);
        assert_eq!((w.main, w.status), (true, false));
        let w = writes(Resource::CapiMachines, &old, &old.clone());
        assert_eq!((w.main, w.status), (false, false));
    }

    #[test]
    fn operations_are_named() {
        let key = Key::new("ns", "m1");
        assert_eq!(
            MACHINES.describe("PUT", Some(&key), Some("status")),
            "PUT machines.cluster.x-k8s.io/v1beta2 ns/m1 (status)"
        );
        assert!(status_dropped_on_create(Resource::OcpMachines));
        assert!(!status_dropped_on_create(Resource::Nodes));
    }
}
