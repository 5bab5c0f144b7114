//! The versions of `resource.k8s.io` read, and how an object of each is put in v1's shape,
//! for the dump parser and the hub alike (one conversion, so the two cannot differ).

use serde_json::Value;

/// The versions read, most preferred first: v1 (Kubernetes ≥ 1.34), v1beta2 (the same
/// shape), v1beta1 (converted, `from_v1beta1`).
pub const VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1beta1"];

/// An object of `version` in v1's shape (its `apiVersion` made `resource.k8s.io/v1`), or
/// `None` for a version not read.
pub fn as_v1(value: Value, version: &str) -> Option<Value> {
    let mut value = match version {
        "v1" | "v1beta2" => value,
        "v1beta1" => from_v1beta1(value),
        _ => return None,
    };
    if let Some(map) = value.as_object_mut() {
        let v1 = format!("{}/v1", super::GROUP);
        map.insert("apiVersion".into(), Value::String(v1));
    }
    Some(value)
}

/// A `resource.k8s.io/v1beta1` object in v1's shape: a device's `basic` fields are the
/// device's own, and a request's class, selectors and count move into `exactly` (unless it
/// has `firstAvailable`). Anything else is already where v1 has it.
fn from_v1beta1(mut value: Value) -> Value {
    if let Some(devices) = value
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    {
        for d in devices.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(Value::Object(basic)) = d.remove("basic") {
                d.extend(basic);
            }
        }
    }
    for at in ["/spec/devices/requests", "/spec/spec/devices/requests"] {
        let Some(requests) = value.pointer_mut(at).and_then(Value::as_array_mut) else {
            continue;
        };
        for r in requests.iter_mut().filter_map(Value::as_object_mut) {
            if r.contains_key("firstAvailable") || r.contains_key("exactly") {
                continue;
            }
            let moved: serde_json::Map<String, Value> = [
                "deviceClassName",
                "selectors",
                "allocationMode",
                "count",
                "adminAccess",
                "tolerations",
                "capacity",
            ]
            .iter()
            .filter_map(|k| Some((k.to_string(), r.remove(*k)?)))
            .collect();
            r.insert("exactly".into(), Value::Object(moved));
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_v1beta1_request_moves_into_exactly_and_basic_devices_unfold() {
        let claim = json!({"apiVersion": "resource.k8s.io/v1beta1", "spec": {"devices": {
            "requests": [{"name": "gpu", "deviceClassName": "gpu.example.com", "count": 2}]}}});
        let v1 = as_v1(claim, "v1beta1").unwrap();
        assert_eq!(v1["apiVersion"], "resource.k8s.io/v1");
        assert_eq!(
            v1["spec"]["devices"]["requests"][0],
            json!({"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}})
        );
        let slice = json!({"spec": {"devices": [{"name": "gpu-0", "basic": {"attributes": {}}}]}});
        let v1 = as_v1(slice, "v1beta1").unwrap();
        assert_eq!(
            v1["spec"]["devices"][0],
            json!({"name": "gpu-0", "attributes": {}})
        );
    }

    #[test]
    fn v1beta2_is_v1_and_an_unknown_version_is_not_read() {
        let class = json!({"apiVersion": "resource.k8s.io/v1beta2", "spec": {}});
        assert_eq!(
            as_v1(class.clone(), "v1beta2").unwrap()["apiVersion"],
            "resource.k8s.io/v1"
        );
        assert_eq!(as_v1(class, "v1alpha3"), None);
    }
}
