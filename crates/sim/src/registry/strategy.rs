//! Per-resource strategies, as the API server's registry has them: checks of an incoming
//! object's type, name and (for core kinds) schema, defaults filled on create, and what
//! counts as a spec change.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::api::status::ApiError;

pub(super) fn check_type(resource: Resource, object: &Value) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request is not a JSON object",
        ));
    }
    let want = resource.api_version();
    if let Some(v) = object.get("apiVersion").and_then(Value::as_str)
        && v != want
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({want})"
        )));
    }
    let kind = resource.def().kind;
    if let Some(k) = object.get("kind").and_then(Value::as_str)
        && k != kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({kind})"
        )));
    }
    Ok(())
}

pub(super) fn validate_name(kind: &str, name: &str) -> Result<(), ApiError> {
    let ok = name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            kind,
            name,
            format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ))
    }
}

/// Core resources are checked against their k8s-openapi types, so a field of the wrong
/// shape is refused as a real API server refuses it; custom resources are schemaless here.
pub(super) fn check_schema(resource: Resource, object: &Value, name: &str) -> Result<(), ApiError> {
    // Scalable resources declare `spec.replicas` as an int32 in their CRDs.
    if resource.def().scale
        && let Some(r) = object["spec"].get("replicas")
        && !r
            .as_i64()
            .is_some_and(|r| (0..=i64::from(i32::MAX)).contains(&r))
    {
        return Err(ApiError::invalid(
            resource.def().kind,
            name,
            format!("spec.replicas: Invalid value: {r}: must be a non-negative 32-bit integer"),
        ));
    }
    use k8s_openapi::api::{apps, batch, coordination, core, events, policy, resource, storage};
    let result = match resource {
        Resource::Pods => core::v1::Pod::deserialize(object).map(drop),
        Resource::Nodes => core::v1::Node::deserialize(object).map(drop),
        Resource::Namespaces => core::v1::Namespace::deserialize(object).map(drop),
        Resource::ConfigMaps => core::v1::ConfigMap::deserialize(object).map(drop),
        Resource::Events => core::v1::Event::deserialize(object).map(drop),
        Resource::EventsV1 => events::v1::Event::deserialize(object).map(drop),
        Resource::Leases => coordination::v1::Lease::deserialize(object).map(drop),
        Resource::PodDisruptionBudgets => {
            policy::v1::PodDisruptionBudget::deserialize(object).map(drop)
        }
        Resource::Secrets => core::v1::Secret::deserialize(object).map(drop),
        Resource::ReplicationControllers => {
            core::v1::ReplicationController::deserialize(object).map(drop)
        }
        Resource::ReplicaSets => apps::v1::ReplicaSet::deserialize(object).map(drop),
        Resource::StatefulSets => apps::v1::StatefulSet::deserialize(object).map(drop),
        Resource::Jobs => batch::v1::Job::deserialize(object).map(drop),
        Resource::PersistentVolumeClaims => {
            core::v1::PersistentVolumeClaim::deserialize(object).map(drop)
        }
        Resource::PersistentVolumes => core::v1::PersistentVolume::deserialize(object).map(drop),
        Resource::StorageClasses => storage::v1::StorageClass::deserialize(object).map(drop),
        Resource::CsiNodes => storage::v1::CSINode::deserialize(object).map(drop),
        Resource::PodTemplates => core::v1::PodTemplate::deserialize(object).map(drop),
        Resource::ResourceClaims => resource::v1::ResourceClaim::deserialize(object).map(drop),
        Resource::ResourceClaimTemplates => {
            resource::v1::ResourceClaimTemplate::deserialize(object).map(drop)
        }
        Resource::ResourceSlices => resource::v1::ResourceSlice::deserialize(object).map(drop),
        Resource::DeviceClasses => resource::v1::DeviceClass::deserialize(object).map(drop),
        _ => Ok(()),
    };
    result.map_err(|e| ApiError::invalid(resource.def().kind, name, e.to_string()))
}

pub(super) fn apply_defaults(resource: Resource, object: &mut Value) {
    match resource {
        Resource::Pods => {
            let spec = &mut object["spec"];
            if spec.get("schedulerName").is_none() {
                spec["schedulerName"] = json!("default-scheduler");
            }
            if spec.get("restartPolicy").is_none() {
                spec["restartPolicy"] = json!("Always");
            }
            if spec.get("terminationGracePeriodSeconds").is_none() {
                spec["terminationGracePeriodSeconds"] = json!(30);
            }
            if object["status"].get("phase").is_none() {
                object["status"]["phase"] = json!("Pending");
            }
        }
        Resource::Namespaces if object["status"].get("phase").is_none() => {
            object["status"]["phase"] = json!("Active");
        }
        Resource::Secrets if object.get("type").is_none() => {
            object["type"] = json!("Opaque");
        }
        _ => {}
    }
}

/// What the API server does to an incoming object of every write (its conversion to the
/// internal type): a Secret's `stringData` is written into `data`, base64-encoded, over the
/// keys of the same name, and is never stored.
pub(super) fn normalize(resource: Resource, object: &mut Value) {
    if resource != Resource::Secrets {
        return;
    }
    let Some(string_data) = object.as_object_mut().and_then(|o| o.remove("stringData")) else {
        return;
    };
    let Some(pairs) = string_data.as_object() else {
        return;
    };
    use base64::Engine as _;
    for (key, value) in pairs {
        let text = value.as_str().unwrap_or_default();
        object["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

/// Whether anything besides metadata and status differs (what bumps `generation`).
pub(super) fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return true;
    };
    let keys = o
        .keys()
        .chain(n.keys())
        .filter(|k| !matches!(k.as_str(), "metadata" | "status"));
    keys.into_iter().any(|k| o.get(k) != n.get(k))
}
