//! The patch types the API server accepts: JSON merge patch (RFC 7386), JSON patch
//! (RFC 6902), strategic merge patch, and apply patches.
//!
//! Strategic merge is implemented for what the hub and kubectl send: lists merged by their
//! patch merge key (`containers` by `name`, `conditions` by `type`, ...), primitive lists
//! such as `finalizers` merged as sets, the `$patch: delete|replace` directive and
//! `$setElementOrder`/`$retainKeys` directives accepted. The merge key is chosen by the
//! field's name, not its full schema path; for the served resources that is the same.
//! An apply patch (server-side apply) is applied as a merge patch: no field ownership.

use serde_json::{Map, Value};

use super::status::ApiError;

/// A patch's type, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    /// The patch type of `content_type` (parameters such as `charset` ignored).
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        match content_type.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// `current` with `body` applied.
pub fn apply(current: &Value, patch_type: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    let bad =
        |e: &dyn std::fmt::Display| ApiError::bad_request(format!("error decoding patch: {e}"));
    match patch_type {
        PatchType::Json => {
            let patch: json_patch::Patch = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            let mut doc = current.clone();
            json_patch::patch(&mut doc, &patch).map_err(|e| {
                ApiError::invalid("", "", format!("the JSON patch could not be applied: {e}"))
            })?;
            Ok(doc)
        }
        PatchType::Merge | PatchType::Strategic | PatchType::Apply => {
            let patch: Value = if patch_type == PatchType::Apply {
                // YAML is a superset of JSON; kube sends JSON, kubectl sends YAML.
                serde_saphyr::from_slice(body).map_err(|e| bad(&e))?
            } else {
                serde_json::from_slice(body).map_err(|e| bad(&e))?
            };
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: the patch is not a JSON object",
                ));
            }
            let mut doc = current.clone();
            if patch_type == PatchType::Strategic {
                strategic_merge(&mut doc, &patch, "");
            } else {
                json_patch::merge(&mut doc, &patch);
            }
            Ok(doc)
        }
    }
}

/// The merge key of a list field, by field name.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses" => "name",
        "conditions" | "addresses" => "type",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "ownerReferences" => "uid",
        _ => return None,
    })
}

/// Lists of primitives that strategic merge treats as sets.
fn is_primitive_set(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(doc: &mut Value, patch: &Value, _field: &str) {
    let Some(patch_map) = patch.as_object() else {
        *doc = patch.clone();
        return;
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch_map.clone();
        replaced.remove("$patch");
        *doc = Value::Object(replaced);
        return;
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(doc_map) = doc.as_object_mut() else {
        return;
    };
    for (key, value) in patch_map {
        if key.starts_with("$setElementOrder/") || key == "$retainKeys" || key == "$patch" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) =
                (doc_map.get_mut(field), value.as_array())
            {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        match value {
            Value::Null => {
                doc_map.remove(key);
            }
            Value::Object(_) => {
                let slot = doc_map.entry(key.clone()).or_insert(Value::Null);
                strategic_merge(slot, value, key);
            }
            Value::Array(items) => {
                let slot = doc_map
                    .entry(key.clone())
                    .or_insert(Value::Array(Vec::new()));
                if let (Some(mk), Value::Array(existing)) = (merge_key(key), &mut *slot) {
                    merge_list_by_key(existing, items, mk);
                } else if let (true, Value::Array(existing)) = (is_primitive_set(key), &mut *slot) {
                    for item in items {
                        if !existing.contains(item) {
                            existing.push(item.clone());
                        }
                    }
                } else {
                    *slot = value.clone();
                }
            }
            _ => {
                doc_map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_list_by_key(existing: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        let id = item.get(key).cloned();
        let directive = item.get("$patch").and_then(Value::as_str);
        let pos = id
            .as_ref()
            .and_then(|id| existing.iter().position(|e| e.get(key) == Some(id)));
        match (directive, pos) {
            (Some("delete"), Some(i)) => {
                existing.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => strategic_merge(&mut existing[i], item, ""),
            (_, None) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item, "");
                existing.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
               "spec": {"containers": [{"name": "c", "image": "i:1"}, {"name": "d", "image": "j"}]},
               "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    }

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let body =
            br#"{"metadata":{"labels":{"a":null,"b":"2"}},"spec":{"containers":[{"name":"z"}]}}"#;
        let out = apply(&pod(), PatchType::Merge, body).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn json_patch_and_failed_test_op() {
        let body = br#"[{"op":"replace","path":"/spec/containers/0/image","value":"i:2"}]"#;
        let out = apply(&pod(), PatchType::Json, body).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "i:2");
        let failing = br#"[{"op":"test","path":"/metadata/name","value":"q"}]"#;
        assert_eq!(
            apply(&pod(), PatchType::Json, failing).unwrap_err().code,
            422
        );
    }

    #[test]
    fn strategic_merge_by_key_and_directives() {
        let body = br#"{"$setElementOrder/containers":[{"name":"c"},{"name":"d"}],
            "metadata":{"finalizers":["y"]},
            "spec":{"containers":[{"name":"c","image":"i:2"},{"name":"d","$patch":"delete"}]},
            "status":{"conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]}}"#;
        let out = apply(&pod(), PatchType::Strategic, body).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c", "image": "i:2"}])
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(out["status"]["conditions"][0]["status"], "True");
        assert_eq!(out["status"]["conditions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn malformed_patches_are_bad_requests() {
        assert_eq!(apply(&pod(), PatchType::Merge, b"{").unwrap_err().code, 400);
        assert_eq!(
            apply(&pod(), PatchType::Merge, b"[1]").unwrap_err().code,
            400
        );
        assert_eq!(apply(&pod(), PatchType::Json, b"{}").unwrap_err().code, 400);
        assert_eq!(
            PatchType::from_content_type("text/plain").unwrap_err().code,
            415
        );
    }

    #[test]
    fn apply_patches_read_yaml() {
        let out = apply(
            &pod(),
            PatchType::Apply,
            b"metadata:\n  labels:\n    c: '3'\n",
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"]["c"], "3");
    }
}
