//! A DRA GPU driver, as a node group whose template declares it runs one (upstream's Cluster
//! API annotation `capacity.cluster-autoscaler.kubernetes.io/dra-driver` beside a GPU count):
//! a node of such a group that turns Ready publishes one ResourceSlice of that driver, local
//! to it, with a device per GPU (`gpu-0`, `gpu-1`, ..., each with the attribute `type: gpu`,
//! as upstream's scale-from-zero template has them), and a node gone takes its slice with it.
//! The simulated scheduler allocates these devices (`controllers::allocate`); a pod gone
//! releases its claims, as the resource claim controller and the garbage collector do.

use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::registry::State;
use crate::store::Key;

/// The annotation naming a group's DRA driver (upstream's Cluster API one).
pub const DRIVER_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/dra-driver";
/// Node annotations the simulated kubelet reads to run the driver: its name and how many
/// GPUs it publishes.
pub const NODE_DRIVER: &str = "sim.fleetscaler.io/dra-driver";
pub const NODE_DEVICES: &str = "sim.fleetscaler.io/dra-devices";
/// At most this many devices per slice (the API's limit).
const MAX_DEVICES: i64 = 128;

/// Publishes the slice of the driver `node` runs, if it runs one and has not yet.
pub fn publish(state: &mut State, node: &Value) -> Result<(), ApiError> {
    let annotations = &node["metadata"]["annotations"];
    let (Some(driver), Some(name)) = (
        annotations[NODE_DRIVER].as_str(),
        node["metadata"]["name"].as_str(),
    ) else {
        return Ok(());
    };
    let count = annotations[NODE_DEVICES]
        .as_str()
        .and_then(|c| c.parse::<i64>().ok())
        .unwrap_or(0)
        .clamp(0, MAX_DEVICES);
    let slice = slice_name(name, driver);
    if count == 0
        || state
            .store
            .get(Resource::ResourceSlices, &Key::cluster(&slice))
            .is_some()
    {
        return Ok(());
    }
    let devices: Vec<Value> = (0..count)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
        .collect();
    let object = json!({
        "metadata": {"name": slice, "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
            "name": name, "uid": node["metadata"]["uid"], "controller": true}]},
        "spec": {"driver": driver, "nodeName": name, "devices": devices,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}
    });
    state.seed(Resource::ResourceSlices, "", object).map(drop)
}

fn slice_name(node: &str, driver: &str) -> String {
    format!("{node}-{}", driver.replace('.', "-"))
}

/// Removes the slices whose node is gone, as the garbage collector does.
pub fn collect(state: &mut State, exists: impl Fn(&str) -> bool) {
    let gone: Vec<Key> = state
        .store
        .range(Resource::ResourceSlices, None, None)
        .filter(|s| {
            let v = s.value();
            v["spec"]["nodeName"].as_str().is_some_and(|n| !exists(n))
        })
        .map(|s| s.key.clone())
        .collect();
    for key in gone {
        state.purge(Resource::ResourceSlices, &key);
    }
}

/// A pod gone: the claims made for it go (their owner), and it is no longer a consumer of
/// the others, which are freed once nothing uses them.
pub fn release(state: &mut State, pod: &Key) {
    let mut owned = Vec::new();
    let mut reserved = Vec::new();
    for s in state
        .store
        .range(Resource::ResourceClaims, Some(&*pod.namespace), None)
    {
        let v = s.value();
        let owner = v["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["kind"] == "Pod" && o["name"].as_str() == Some(&*pod.name));
        let user = v["status"]["reservedFor"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["name"].as_str() == Some(&*pod.name));
        if owner {
            owned.push(s.key.clone());
        } else if user {
            reserved.push(s.key.clone());
        }
    }
    for key in owned {
        state.purge(Resource::ResourceClaims, &key);
    }
    for key in reserved {
        let _ = state.modify(Resource::ResourceClaims, &key, |c| {
            if let Some(users) = c["status"]["reservedFor"].as_array_mut() {
                users.retain(|r| r["name"].as_str() != Some(&*pod.name));
                if users.is_empty() {
                    c["status"] = json!({});
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, driver: Option<&str>, devices: &str) -> Value {
        let mut n = json!({"metadata": {"name": name, "uid": format!("uid-{name}"),
            "annotations": {}}});
        if let Some(d) = driver {
            n["metadata"]["annotations"][NODE_DRIVER] = json!(d);
            n["metadata"]["annotations"][NODE_DEVICES] = json!(devices);
        }
        n
    }

    fn slices(state: &State) -> Vec<Value> {
        state
            .store
            .range(Resource::ResourceSlices, None, None)
            .map(|s| s.value())
            .collect()
    }

    #[test]
    fn a_node_with_a_driver_publishes_one_slice_once_and_takes_it_when_gone() {
        let mut state = State::new(100, 7);
        publish(&mut state, &node("plain", None, "")).unwrap();
        publish(&mut state, &node("n0", Some("gpu.example.com"), "0")).unwrap();
        assert!(slices(&state).is_empty());
        for _ in 0..2 {
            publish(&mut state, &node("n1", Some("gpu.example.com"), "2")).unwrap();
        }
        let s = slices(&state);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0]["metadata"]["name"], "n1-gpu-example-com");
        assert_eq!(s[0]["spec"]["nodeName"], "n1");
        assert_eq!(s[0]["spec"]["devices"][1]["name"], "gpu-1");
        assert_eq!(
            s[0]["spec"]["devices"][0]["attributes"]["type"]["string"],
            "gpu"
        );
        collect(&mut state, |n| n == "n1");
        assert_eq!(slices(&state).len(), 1);
        collect(&mut state, |_| false);
        assert!(slices(&state).is_empty());
    }

    #[test]
    fn a_pod_gone_releases_its_claims() {
        let mut state = State::new(100, 7);
        let ns = json!({"metadata": {"name": "ml"}});
        state.seed(Resource::Namespaces, "", ns).unwrap();
        let made = json!({"metadata": {"name": "p-gpu", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]},
            "spec": {}, "status": {"reservedFor": [{"resource": "pods", "name": "p"}]}});
        let shared = json!({"metadata": {"name": "shared"}, "spec": {},
            "status": {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "p"}]}});
        state.seed(Resource::ResourceClaims, "ml", made).unwrap();
        state.seed(Resource::ResourceClaims, "ml", shared).unwrap();
        release(&mut state, &Key::new("ml", "p"));
        let left: Vec<Value> = state
            .store
            .range(Resource::ResourceClaims, None, None)
            .map(|s| s.value())
            .collect();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["metadata"]["name"], "shared");
        assert!(left[0]["status"]["allocation"].is_null());
    }
}
