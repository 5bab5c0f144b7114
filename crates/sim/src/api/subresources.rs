//! The subresources with behaviour of their own: `scale` (an `autoscaling/v1 Scale` view of
//! `spec.replicas`), `pods/binding` (what a scheduler posts) and `pods/eviction` (a delete
//! that honours PodDisruptionBudgets, refusing with `429` as the API server does).

use std::sync::Arc;

use http::Method;
use serde_json::{Value, json};

use super::handler::{ApiRequest, Reply, parse_body};
use super::patch::{self, PatchType};
use super::resources::Resource;
use super::selector::labels_of;
use super::status::{ApiError, success_status};
use crate::cluster::Cluster;
use crate::registry::{DeleteOptions, State, WriteMode, now_rfc3339};
use crate::store::{Key, Stored};

/// The `Scale` view of a scalable object.
pub fn scale_of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let selector: Vec<String> = object["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]
        },
        "spec": {"replicas": object["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": object["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector.join(",")}
    })
}

/// GET, PUT and PATCH of `<resource>/<name>/scale`.
pub fn scale(
    cluster: &Arc<Cluster>,
    resource: Resource,
    key: &Key,
    req: &ApiRequest,
) -> Result<Reply, ApiError> {
    let def = resource.def();
    let mut state = cluster.lock();
    let current = state
        .store
        .get(resource, key)
        .map(|o| o.value())
        .ok_or_else(|| ApiError::not_found(def.group, def.plural, &key.name))?;
    let current_scale = scale_of(&current);
    let wanted = match req.method {
        Method::GET => return Ok(Reply::Json(200, current_scale)),
        Method::PUT => parse_body(&req.body)?,
        Method::PATCH => patch::apply(
            &current_scale,
            PatchType::from_content_type(&req.content_type)?,
            &req.body,
        )?,
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "{} is not allowed on scale",
                req.method
            )));
        }
    };
    let replicas = match &wanted["spec"]["replicas"] {
        Value::Number(n) => n.as_i64().filter(|r| (0..=i64::from(i32::MAX)).contains(r)),
        _ => None,
    }
    .ok_or_else(|| {
        ApiError::invalid(
            "Scale",
            &key.name,
            format!(
                "spec.replicas: Invalid value: {}: must be a non-negative integer",
                wanted["spec"]["replicas"]
            ),
        )
    })?;
    let mut updated = current;
    // A resourceVersion in the Scale is a precondition on the scaled object.
    updated["metadata"]["resourceVersion"] = wanted["metadata"]["resourceVersion"].clone();
    if !updated["metadata"]["resourceVersion"].is_string() {
        updated["metadata"]["resourceVersion"] = json!("");
    }
    updated["spec"]["replicas"] = json!(replicas);
    let stored = state.update(resource, key, updated, WriteMode::Main)?;
    Ok(Reply::Json(200, scale_of(&stored.value())))
}

/// POST `pods/<name>/binding`: assigns the pod to a node, once.
pub fn bind(cluster: &Arc<Cluster>, key: &Key, body: &[u8]) -> Result<Reply, ApiError> {
    let binding = parse_body(body)?;
    let Some(node) = binding["target"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return Err(ApiError::invalid(
            "Binding",
            &key.name,
            "target.name: Required value",
        ));
    };
    let mut state = cluster.lock();
    bind_pod(&mut state, key, node)?;
    Ok(Reply::Json(201, success_status(201)))
}

/// Binds the pod at `key` to `node`, as the binding subresource does (and the scheduler).
pub fn bind_pod(state: &mut State, key: &Key, node: &str) -> Result<Arc<Stored>, ApiError> {
    let Some(pod) = state.store.get(Resource::Pods, key) else {
        return Err(ApiError::not_found("", "pods", &key.name));
    };
    let mut pod = pod.value();
    if let Some(current) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(ApiError::conflict(
            "",
            "pods",
            &key.name,
            &format!("pod {} is already assigned to node {current:?}", key.name),
        ));
    }
    pod["spec"]["nodeName"] = json!(node);
    set_condition(&mut pod, "PodScheduled", "True", None, None);
    state.update(Resource::Pods, key, pod, WriteMode::Internal)
}

/// Sets (or replaces) the condition `kind` in `object.status.conditions`.
pub fn set_condition(
    object: &mut Value,
    kind: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
) {
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    let mut condition = json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": now_rfc3339()});
    if let Some(r) = reason {
        condition["reason"] = json!(r);
    }
    if let Some(m) = message {
        condition["message"] = json!(m);
    }
    if let Some(list) = object["status"]["conditions"].as_array_mut() {
        match list.iter_mut().find(|c| c["type"] == kind) {
            Some(existing) => {
                if existing["status"] == status {
                    // An unchanged status keeps its transition time.
                    condition["lastTransitionTime"] = existing["lastTransitionTime"].clone();
                }
                *existing = condition;
            }
            None => list.push(condition),
        }
    }
}

/// POST `pods/<name>/eviction`.
pub fn evict(cluster: &Arc<Cluster>, key: &Key, body: &[u8]) -> Result<Reply, ApiError> {
    let eviction = parse_body(body)?;
    if eviction["metadata"]["name"]
        .as_str()
        .is_some_and(|n| n != &*key.name)
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let opts: DeleteOptions = match eviction.get("deleteOptions") {
        Some(o) if !o.is_null() => serde_json::from_value(o.clone())
            .map_err(|e| ApiError::bad_request(format!("invalid deleteOptions: {e}")))?,
        _ => DeleteOptions::default(),
    };
    let mut state = cluster.lock();
    let Some(pod) = state.store.get(Resource::Pods, key).cloned() else {
        return Err(ApiError::not_found("", "pods", &key.name));
    };
    let pod_value = pod.value();
    let phase = pod_value["status"]["phase"].as_str().unwrap_or_default();
    let terminating = pod_value["metadata"].get("deletionTimestamp").is_some();
    // As the API server: pods that are not running cannot disrupt anything.
    if terminating || matches!(phase, "Succeeded" | "Failed" | "Pending") {
        state.delete(Resource::Pods, key, &opts)?;
        return Ok(Reply::Json(201, success_status(201)));
    }
    let labels = labels_of(&pod.bytes);
    let budgets: Vec<Arc<Stored>> = state
        .store
        .range(Resource::PodDisruptionBudgets, Some(&key.namespace), None)
        .filter(|pdb| {
            let selector = &pdb.value()["spec"]["selector"];
            crate::controllers::disruption::selector_matches(selector, &labels)
        })
        .cloned()
        .collect();
    if budgets.len() > 1 {
        // A plain error in the API server's eviction code: a 500 without a reason.
        return Err(ApiError::plain_500(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    if let Some(pdb) = budgets.first() {
        let mut pdb_value = pdb.value();
        let allowed = pdb_value["status"]["disruptionsAllowed"]
            .as_i64()
            .unwrap_or(0);
        if allowed <= 0 {
            let desired = pdb_value["status"]["desiredHealthy"].as_i64().unwrap_or(0);
            let current = pdb_value["status"]["currentHealthy"].as_i64().unwrap_or(0);
            return Err(ApiError::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
                .with_cause("DisruptionBudget", format!("The disruption budget {} needs {desired} healthy pods and has {current} currently", pdb.key.name)));
        }
        pdb_value["status"]["disruptionsAllowed"] = json!(allowed - 1);
        pdb_value["status"]["disruptedPods"][&*key.name] = json!(now_rfc3339());
        state.update(
            Resource::PodDisruptionBudgets,
            &pdb.key,
            pdb_value,
            WriteMode::Internal,
        )?;
    }
    state.delete(Resource::Pods, key, &opts)?;
    Ok(Reply::Json(201, success_status(201)))
}
