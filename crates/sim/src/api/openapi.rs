//! A minimal OpenAPI v3 surface: the `/openapi/v3` index and, per group version, a document
//! listing each resource's paths with their `x-kubernetes-group-version-kind` and the
//! `fieldValidation` query parameter. That is what kubectl reads to learn that the server
//! validates fields itself (so `kubectl apply` needs no schemas); it advertises no
//! strategic-merge schema, so kubectl computes strategic patches from its built-in types
//! and merge patches for custom resources, as it does against CRDs.

use serde_json::{Map, Value, json};

use super::resources::{Resource, group_versions};
use super::status::ApiError;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: where each group version's document is.
pub fn index() -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions() {
        let p = gv_path(group, version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=sim")}),
        );
    }
    json!({"paths": paths})
}

/// The document of the group version at `path` (`api/v1`, `apis/<group>/<version>`).
pub fn document(path: &str) -> Result<Value, ApiError> {
    let (group, version) = match path
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["api", v] => (String::new(), (*v).to_string()),
        ["apis", g, v] => ((*g).to_string(), (*v).to_string()),
        _ => return Err(super::discovery::not_found()),
    };
    let mut paths = Map::new();
    for r in Resource::ALL {
        let d = r.def();
        if d.group != group || d.version != version {
            continue;
        }
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        let params = json!([{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}]);
        let op = |body: &str| {
            json!({"x-kubernetes-group-version-kind": gvk, "parameters": params,
                   "requestBody": {"content": {body: {"schema": {"type": "object"}}}},
                   "responses": {"200": {"description": "OK"}}})
        };
        let base = format!("/{}", gv_path(d.group, d.version));
        let (collection, item) = if d.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", d.plural),
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", d.plural),
            )
        } else {
            (
                format!("{base}/{}", d.plural),
                format!("{base}/{}/{{name}}", d.plural),
            )
        };
        paths.insert(collection, json!({"post": op("application/json")}));
        paths.insert(
            item,
            json!({"put": op("application/json"), "patch": op("application/merge-patch+json")}),
        );
    }
    if paths.is_empty() {
        return Err(super::discovery::not_found());
    }
    Ok(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.34.0"}, "paths": paths, "components": {}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_carry_gvk_and_field_validation() {
        let doc = document("apis/machine.openshift.io/v1beta1").unwrap();
        let item = &doc["paths"]["/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machinesets/{name}"]
            ["patch"];
        assert_eq!(
            item["x-kubernetes-group-version-kind"]["kind"],
            "MachineSet"
        );
        assert_eq!(item["parameters"][0]["name"], "fieldValidation");
        assert!(index()["paths"]["api/v1"]["serverRelativeURL"].is_string());
        assert!(document("apis/nope/v1").is_err());
    }
}
