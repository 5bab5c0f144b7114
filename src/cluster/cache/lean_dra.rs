//! The DRA kinds as the cache reads them off lists and watches: only the key, the
//! resourceVersion, `spec` and `status` are kept (managed fields, labels, annotations and
//! owner references are skipped as they are parsed), as a dynamic object at the version
//! discovery chose. A cluster has a claim per pod using devices, each with the managed
//! fields of the scheduler's and the controller's writes; the projection
//! (`model::dra`) reads none of them.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use kube::api::{ApiResource, DynamicObject};
use serde::Deserialize;
use serde_json::Value;

use super::lean_storage::WireKey;

/// A `resource.k8s.io` object holding only what the projection reads.
#[derive(Clone, Debug)]
pub struct LeanDra(pub DynamicObject);

impl kube::Resource for LeanDra {
    type DynamicType = ApiResource;
    type Scope = kube::core::DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::kind(dt)
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::group(dt)
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::version(dt)
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::plural(dt)
    }
    fn meta(&self) -> &metav1::ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut metav1::ObjectMeta {
        &mut self.0.metadata
    }
}

#[derive(Deserialize)]
struct WireDra {
    #[serde(default)]
    metadata: WireKey,
    spec: Option<Value>,
    status: Option<Value>,
}

impl<'de> Deserialize<'de> for LeanDra {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireDra::deserialize(d)?;
        let mut data = serde_json::Map::new();
        for (field, value) in [("spec", w.spec), ("status", w.status)] {
            if let Some(v) = value.filter(|v| !v.is_null()) {
                data.insert(field.into(), v);
            }
        }
        Ok(LeanDra(DynamicObject {
            types: None,
            metadata: w.metadata.into_meta(),
            data: Value::Object(data),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_key_spec_and_status_are_kept() {
        let claim = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml", "resourceVersion": "7",
                "managedFields": [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}],
                "annotations": {"a": "b"}, "ownerReferences": [{"kind": "Pod", "name": "p"}]},
            "spec": {"devices": {"requests": []}},
            "status": {"reservedFor": [{"name": "p"}]}
        });
        let lean: LeanDra = serde_json::from_value(claim).unwrap();
        let m = &lean.0.metadata;
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref()),
            (Some("c"), Some("ml"))
        );
        assert_eq!(m.resource_version.as_deref(), Some("7"));
        assert!(m.managed_fields.is_none() && m.annotations.is_none());
        assert!(m.owner_references.is_none());
        assert_eq!(lean.0.data["status"]["reservedFor"][0]["name"], "p");
        let class: LeanDra = serde_json::from_value(json!({"metadata": {"name": "g"}})).unwrap();
        assert_eq!(class.0.data, json!({}));
    }
}
