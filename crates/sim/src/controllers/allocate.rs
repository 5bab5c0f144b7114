//! The simulated scheduler's DRA half, kept simple and never wrong in the direction of
//! binding: a pod with `resourceClaims` binds only to a node whose own ResourceSlices
//! (`nodeName` = the node) offer enough free devices for every request of every claim, each
//! request an `exactly` of `ExactCount` whose class and selectors this understands
//! (`device.driver == "..."` and `device.attributes["domain"].name == "..."` joined by
//! `&&`). Anything else (firstAvailable, `All`, constraints, admin access, capacity,
//! tolerations, another CEL expression, a claim allocated elsewhere than to one node) keeps
//! the pod pending: the real scheduler might place it, this one never guesses. Devices are
//! picked first-fit; binding writes the allocation (devices, the node as its selector) and
//! the pod as the claim's consumer. `make_claims` plays the resource claim controller: a
//! pending pod's claims of templates are made as soon as the scheduler sees it
//! (`<pod>-<claim>`, owned by the pod, named in the pod's status).

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::registry::State;
use crate::store::Key;

/// The real DRA plugin's word for a node without the devices.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";

/// One device a slice publishes.
#[derive(Clone, Debug)]
struct Device {
    driver: String,
    pool: String,
    name: String,
    attributes: Value,
}

impl Device {
    fn id(&self) -> (String, String, String) {
        (self.driver.clone(), self.pool.clone(), self.name.clone())
    }
}

/// The cluster's devices and which are taken, read once per scheduler pass that needs them.
#[derive(Debug, Default)]
pub struct Devices {
    by_node: HashMap<String, Vec<Device>>,
    taken: HashSet<(String, String, String)>,
    /// DeviceClasses: their selectors.
    classes: HashMap<String, Vec<String>>,
}

/// One request of a pod's claim: how many devices of what.
#[derive(Clone, Debug)]
struct Request {
    name: String,
    selectors: Vec<String>,
    count: i64,
}

/// One claim of a pod, as the scheduler must satisfy it.
#[derive(Clone, Debug)]
pub struct Need {
    claim: String,
    requests: Vec<Request>,
    /// Already allocated: the node it is usable from (`None`: any node).
    allocated: Option<Option<String>>,
}

/// Devices picked for a pod on one node: per need, (request, device).
pub type Picked = Vec<Vec<(String, (String, String, String))>>;

impl Devices {
    pub fn read(state: &State) -> Devices {
        let mut out = Devices::default();
        for s in state.store.range(Resource::ResourceSlices, None, None) {
            let v = s.value();
            let spec = &v["spec"];
            let (Some(node), Some(driver)) = (spec["nodeName"].as_str(), spec["driver"].as_str())
            else {
                continue;
            };
            let pool = spec["pool"]["name"].as_str().unwrap_or_default();
            let devices = spec["devices"].as_array().into_iter().flatten();
            let list = out.by_node.entry(node.to_string()).or_default();
            list.extend(devices.filter_map(|d| {
                Some(Device {
                    driver: driver.to_string(),
                    pool: pool.to_string(),
                    name: d["name"].as_str()?.to_string(),
                    attributes: d["attributes"].clone(),
                })
            }));
        }
        for s in state.store.range(Resource::ResourceClaims, None, None) {
            let v = s.value();
            let results = v["status"]["allocation"]["devices"]["results"].as_array();
            for r in results.into_iter().flatten() {
                let field = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                out.taken
                    .insert((field("driver"), field("pool"), field("device")));
            }
        }
        for s in state.store.range(Resource::DeviceClasses, None, None) {
            let v = s.value();
            out.classes
                .insert(s.key.name.to_string(), cel_list(&v["spec"]["selectors"]));
        }
        out
    }

    /// What the claims of the pod at `key` (spec `spec`) need, or why this scheduler will not
    /// place it.
    pub fn needs(&self, state: &State, key: &Key, spec: &Value) -> Result<Vec<Need>, String> {
        let statuses = state
            .store
            .get(Resource::Pods, key)
            .map(|p| p.value()["status"]["resourceClaimStatuses"].clone())
            .unwrap_or(Value::Null);
        let mut out = Vec::new();
        for c in spec["resourceClaims"].as_array().into_iter().flatten() {
            let pod_claim = c["name"].as_str().unwrap_or_default().to_string();
            let made = statuses
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["name"] == pod_claim.as_str())
                .and_then(|s| s["resourceClaimName"].as_str());
            let need = match (c["resourceClaimName"].as_str(), made) {
                (Some(name), _) | (None, Some(name)) => self.existing(state, key, name)?,
                // `make_claims` made it, unless its template is missing.
                (None, None) => match c["resourceClaimTemplateName"].as_str() {
                    Some(t) => return Err(format!("resourceclaimtemplate {t} not found")),
                    None => return Err(format!("claim {pod_claim} names no claim or template")),
                },
            };
            out.push(need);
        }
        Ok(out)
    }

    fn existing(&self, state: &State, pod: &Key, name: &str) -> Result<Need, String> {
        let Some(claim) = state
            .store
            .get(Resource::ResourceClaims, &Key::new(&pod.namespace, name))
        else {
            return Err(format!("resourceclaim {name} not found"));
        };
        let v = claim.value();
        let allocation = &v["status"]["allocation"];
        let allocated = if allocation.is_object() {
            Some(allocated_node(allocation)?)
        } else {
            None
        };
        Ok(Need {
            claim: name.to_string(),
            requests: match allocated {
                Some(_) => Vec::new(),
                None => self.requests(&v["spec"])?,
            },
            allocated,
        })
    }

    /// A claim spec's requests, if this scheduler allocates every one of them.
    fn requests(&self, spec: &Value) -> Result<Vec<Request>, String> {
        let devices = &spec["devices"];
        if devices["constraints"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
        {
            return Err("device constraints are not allocated by the simulated scheduler".into());
        }
        let mut out = Vec::new();
        for r in devices["requests"].as_array().into_iter().flatten() {
            let name = r["name"].as_str().unwrap_or_default().to_string();
            let e = &r["exactly"];
            let unsupported = !e.is_object()
                || ["adminAccess", "capacity", "tolerations"]
                    .iter()
                    .any(|k| !e[*k].is_null() && e[*k] != json!(false) && e[*k] != json!([]))
                || e["allocationMode"]
                    .as_str()
                    .is_some_and(|m| m != "ExactCount");
            if unsupported {
                return Err(format!(
                    "request {name} is not one the simulated scheduler allocates"
                ));
            }
            let class = e["deviceClassName"].as_str().unwrap_or_default();
            let Some(class_selectors) = self.classes.get(class) else {
                return Err(format!("deviceclass {class} not found"));
            };
            let mut selectors = class_selectors.clone();
            selectors.extend(cel_list(&e["selectors"]));
            if let Some(s) = selectors.iter().find(|s| !understood(s)) {
                return Err(format!(
                    "selector {s:?} is not evaluated by the simulated scheduler"
                ));
            }
            let count = e["count"].as_i64().unwrap_or(1);
            out.push(Request {
                name,
                selectors,
                count,
            });
        }
        Ok(out)
    }

    /// The devices for `needs` on `node`, or why not.
    pub fn pick(&self, needs: &[Need], node: &str) -> Result<Picked, &'static str> {
        let mut used: HashSet<(String, String, String)> = HashSet::new();
        let devices = self
            .by_node
            .get(node)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut out = Vec::new();
        for need in needs {
            if let Some(at) = &need.allocated {
                if at.as_deref().is_some_and(|n| n != node) {
                    return Err("node(s) didn't match the claim's allocation");
                }
                out.push(Vec::new());
                continue;
            }
            let mut picked = Vec::new();
            for r in &need.requests {
                for _ in 0..r.count {
                    let free = devices.iter().find(|d| {
                        let id = d.id();
                        !self.taken.contains(&id)
                            && !used.contains(&id)
                            && r.selectors.iter().all(|s| holds(s, d))
                    });
                    let Some(d) = free else {
                        return Err(CANNOT_ALLOCATE);
                    };
                    used.insert(d.id());
                    picked.push((r.name.clone(), d.id()));
                }
            }
            out.push(picked);
        }
        Ok(out)
    }

    /// Writes the claims as allocated to the pod on `node`, the pod their consumer. The
    /// devices are taken for the rest of the pass.
    pub fn allocate(
        &mut self,
        state: &mut State,
        pod: &Key,
        node: &str,
        needs: &[Need],
        picked: Picked,
    ) {
        let uid = pod_uid(state, pod);
        for (need, devices) in needs.iter().zip(picked) {
            let results: Vec<Value> = devices
                .iter()
                .map(|(request, (driver, pool, device))| {
                    json!({"request": request, "driver": driver, "pool": pool, "device": device})
                })
                .collect();
            for (_, id) in &devices {
                self.taken.insert(id.clone());
            }
            let consumer = json!({"resource": "pods", "name": &*pod.name, "uid": uid});
            let key = Key::new(&pod.namespace, &need.claim);
            let _ = state.modify(Resource::ResourceClaims, &key, |c| {
                if need.allocated.is_none() {
                    c["status"]["allocation"] = json!({"devices": {"results": results},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}});
                }
                match c["status"]["reservedFor"].as_array_mut() {
                    Some(users) => users.push(consumer),
                    None => c["status"]["reservedFor"] = json!([consumer]),
                }
            });
        }
    }
}

fn pod_uid(state: &State, pod: &Key) -> Value {
    state
        .store
        .get(Resource::Pods, pod)
        .map_or(Value::Null, |p| p.value()["metadata"]["uid"].clone())
}

/// The resource claim controller's part: each claim of the pod at `key` that names a
/// template and is not made yet is made (`<pod>-<claim>`, the template's spec, owned by
/// the pod) and named in the pod's `status.resourceClaimStatuses`. A template missing makes
/// nothing (the scheduler then says so).
pub fn make_claims(state: &mut State, key: &Key, spec: &Value) {
    let Some(pod) = state.store.get(Resource::Pods, key).map(|p| p.value()) else {
        return;
    };
    let mut statuses = pod["status"]["resourceClaimStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let before = statuses.len();
    for c in spec["resourceClaims"].as_array().into_iter().flatten() {
        let (Some(name), Some(t)) = (c["name"].as_str(), c["resourceClaimTemplateName"].as_str())
        else {
            continue;
        };
        if statuses.iter().any(|s| s["name"] == name) {
            continue;
        }
        let template_key = Key::new(&key.namespace, t);
        let Some(template) = state
            .store
            .get(Resource::ResourceClaimTemplates, &template_key)
        else {
            continue;
        };
        let made = format!("{}-{name}", key.name);
        let claim = json!({"metadata": {"name": made,
            "annotations": {"resource.kubernetes.io/pod-claim-name": name},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": &*key.name,
                "uid": pod["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
            "spec": template.value()["spec"]["spec"]});
        if state
            .seed(Resource::ResourceClaims, &key.namespace, claim)
            .is_ok()
        {
            statuses.push(json!({"name": name, "resourceClaimName": made}));
        }
    }
    if statuses.len() > before {
        let _ = state.modify(Resource::Pods, key, |p| {
            p["status"]["resourceClaimStatuses"] = Value::Array(statuses);
        });
    }
}

/// The node an allocation is usable from: one named by `metadata.name`, or any (`None`, no
/// selector). Another selector is not evaluated here.
fn allocated_node(allocation: &Value) -> Result<Option<String>, String> {
    let selector = &allocation["nodeSelector"];
    if selector.is_null() {
        return Ok(None);
    }
    let terms = selector["nodeSelectorTerms"].as_array();
    let only = match terms.map(Vec::as_slice) {
        Some([term]) if term["matchExpressions"].is_null() => term["matchFields"].as_array(),
        _ => None,
    };
    match only.map(Vec::as_slice) {
        Some([f]) if f["key"] == "metadata.name" && f["operator"] == "In" => {
            match f["values"].as_array().map(Vec::as_slice) {
                Some([Value::String(node)]) => Ok(Some(node.clone())),
                _ => Err("an allocation for several nodes is not evaluated".into()),
            }
        }
        _ => Err("an allocation's node selector is not evaluated".into()),
    }
}

fn cel_list(selectors: &Value) -> Vec<String> {
    selectors
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            s["cel"]["expression"]
                .as_str()
                .unwrap_or("<no cel>")
                .to_string()
        })
        .collect()
}

/// One `&&` clause: `device.driver == "d"`, or `device.attributes["domain"].name == "v"`.
fn clause(c: &str) -> Option<(Option<(&str, &str)>, &str)> {
    let (left, right) = c.split_once("==")?;
    let value = unquote(right.trim())?;
    let left = left.trim();
    if left == "device.driver" {
        return Some((None, value));
    }
    let rest = left.strip_prefix("device.attributes[")?;
    let (domain, name) = rest.split_once("].")?;
    Some((Some((unquote(domain)?, name)), value))
}

fn unquote(s: &str) -> Option<&str> {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .filter(|v| !v.contains(['"', '\'']))
}

fn understood(expression: &str) -> bool {
    expression.split("&&").all(|c| clause(c).is_some())
}

/// Whether the device satisfies the (understood) expression.
fn holds(expression: &str, d: &Device) -> bool {
    expression.split("&&").all(|c| match clause(c) {
        Some((None, driver)) => d.driver == driver,
        Some((Some((domain, name)), value)) => {
            // A bare attribute name is in the driver's domain.
            let bare = (domain == d.driver).then(|| &d.attributes[name]);
            let full = &d.attributes[format!("{domain}/{name}").as_str()];
            [bare, Some(full)]
                .into_iter()
                .flatten()
                .any(|a| a["string"].as_str() == Some(value))
        }
        None => false,
    })
}

#[cfg(test)]
#[path = "allocate_tests.rs"]
mod tests;
