//! `fieldValidation=Strict`, as kubectl sends it: a field the object's type does not have
//! is refused (400) instead of dropped. Core types are checked against their k8s-openapi
//! types (what the type cannot hold is what the real API server would not know); custom
//! resources are schemaless here, so nothing of theirs is refused.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::resources::Resource;
use super::status::ApiError;

/// Refuses `object` if it holds a field its type does not, as a real API server does
/// under `fieldValidation=Strict`.
pub fn check_strict(resource: Resource, object: &Value) -> Result<(), ApiError> {
    use k8s_openapi::api::{apps, batch, coordination, core, events, policy, resource, storage};
    let unknown = match resource {
        Resource::Pods => unknown::<core::v1::Pod>(object),
        Resource::Nodes => unknown::<core::v1::Node>(object),
        Resource::Namespaces => unknown::<core::v1::Namespace>(object),
        Resource::ConfigMaps => unknown::<core::v1::ConfigMap>(object),
        Resource::Events => unknown::<core::v1::Event>(object),
        Resource::EventsV1 => unknown::<events::v1::Event>(object),
        Resource::Leases => unknown::<coordination::v1::Lease>(object),
        Resource::PodDisruptionBudgets => unknown::<policy::v1::PodDisruptionBudget>(object),
        Resource::Secrets => unknown::<core::v1::Secret>(object),
        Resource::ReplicationControllers => unknown::<core::v1::ReplicationController>(object),
        Resource::ReplicaSets => unknown::<apps::v1::ReplicaSet>(object),
        Resource::StatefulSets => unknown::<apps::v1::StatefulSet>(object),
        Resource::Jobs => unknown::<batch::v1::Job>(object),
        Resource::PersistentVolumeClaims => unknown::<core::v1::PersistentVolumeClaim>(object),
        Resource::PersistentVolumes => unknown::<core::v1::PersistentVolume>(object),
        Resource::StorageClasses => unknown::<storage::v1::StorageClass>(object),
        Resource::CsiNodes => unknown::<storage::v1::CSINode>(object),
        Resource::PodTemplates => unknown::<core::v1::PodTemplate>(object),
        Resource::ResourceClaims => unknown::<resource::v1::ResourceClaim>(object),
        Resource::ResourceClaimTemplates => unknown::<resource::v1::ResourceClaimTemplate>(object),
        Resource::ResourceSlices => unknown::<resource::v1::ResourceSlice>(object),
        Resource::DeviceClasses => unknown::<resource::v1::DeviceClass>(object),
        _ => Vec::new(),
    };
    let Some(first) = unknown.first() else {
        return Ok(());
    };
    let def = resource.def();
    Err(ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: unknown field \"{first}\"",
        kind = def.kind,
        version = def.version,
    )))
}

/// The paths of the fields of `object` that do not survive a trip through `T`. A type the
/// object does not fit at all is `check_schema`'s to refuse; nothing is reported here.
fn unknown<T: DeserializeOwned + Serialize>(object: &Value) -> Vec<String> {
    let Ok(typed) = serde_json::from_value::<T>(object.clone()) else {
        return Vec::new();
    };
    let Ok(back) = serde_json::to_value(typed) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    lost("", object, &back, &mut out);
    out
}

fn lost(path: &str, sent: &Value, kept: &Value, out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, value) in s {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match k.get(key) {
                    Some(kv) => lost(&here, value, kv, out),
                    // An explicit null is an absent value, never a field of its own.
                    None if !value.is_null() => out.push(here),
                    None => {}
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, (sv, kv)) in s.iter().zip(k).enumerate() {
                lost(&format!("{path}[{i}]"), sv, kv, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_the_type_lacks_is_refused_and_known_ones_pass() {
        let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a",
            "labels": {"x": "y"}}, "data": {"k": "v"}, "binaryData": null});
        assert!(check_strict(Resource::ConfigMaps, &ok).is_ok());
        let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "bogus": 1});
        let e = check_strict(Resource::ConfigMaps, &bad).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("unknown field \"bogus\""),
            "{}",
            e.message
        );
        let nested = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "imagePullPolicyy": "Always"}]}});
        let e = check_strict(Resource::Pods, &nested).unwrap_err();
        assert!(
            e.message.contains("spec.containers[0].imagePullPolicyy"),
            "{}",
            e.message
        );
    }

    #[test]
    fn custom_resources_are_not_refused() {
        let ms = json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
            "metadata": {"name": "a"}, "anything": true});
        assert!(check_strict(Resource::OcpMachineSets, &ms).is_ok());
    }
}
