use serde_json::{Value, json};

use super::*;

const CLASS: &str = "gpu.example.com";

fn state() -> State {
    let mut state = State::new(100, 7);
    state
        .seed(
            Resource::Namespaces,
            "",
            json!({"metadata": {"name": "ml"}}),
        )
        .unwrap();
    let class = json!({"metadata": {"name": CLASS}, "spec": {"selectors": [{"cel": {
        "expression": "device.driver == \"gpu.example.com\" && device.attributes[\"gpu.example.com\"].type == \"gpu\""}}]}});
    state.seed(Resource::DeviceClasses, "", class).unwrap();
    let template = json!({"metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}});
    state
        .seed(Resource::ResourceClaimTemplates, "ml", template)
        .unwrap();
    state
}

fn slice(state: &mut State, node: &str, driver: &str, devices: usize) {
    let devices: Vec<Value> = (0..devices)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
        .collect();
    let s = json!({"metadata": {"name": format!("{node}-{driver}")}, "spec": {"driver": driver,
        "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": devices}});
    state.seed(Resource::ResourceSlices, "", s).unwrap();
}

fn pod(state: &mut State, name: &str) -> (Key, Value) {
    let spec = json!({"containers": [{"name": "c", "image": "i"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    let p = json!({"metadata": {"name": name}, "spec": spec});
    state.seed(Resource::Pods, "ml", p).unwrap();
    (Key::new("ml", name), spec)
}

/// A pod claiming a GPU from a template gets its claim made and named in its status; it
/// fits only the node whose slice has a free device of the class; binding allocates the
/// claim there; the next pod finds the device taken.
#[test]
fn a_claim_is_allocated_on_the_node_with_a_free_device_only() {
    let mut state = state();
    slice(&mut state, "gpu-node", CLASS, 1);
    slice(&mut state, "other-node", "other.example.com", 4);
    let (key, spec) = pod(&mut state, "train-0");
    make_claims(&mut state, &key, &spec);
    make_claims(&mut state, &key, &spec);
    let p = state.store.get(Resource::Pods, &key).unwrap().value();
    assert_eq!(
        p["status"]["resourceClaimStatuses"],
        json!([{"name": "gpu", "resourceClaimName": "train-0-gpu"}]),
        "made once"
    );
    let mut d = Devices::read(&state);
    let needs = d.needs(&state, &key, &spec).unwrap();
    assert_eq!(d.pick(&needs, "cpu-node").unwrap_err(), CANNOT_ALLOCATE);
    assert_eq!(d.pick(&needs, "other-node").unwrap_err(), CANNOT_ALLOCATE);
    let picked = d.pick(&needs, "gpu-node").unwrap();
    d.allocate(&mut state, &key, "gpu-node", &needs, picked);
    let claim = state
        .store
        .get(Resource::ResourceClaims, &Key::new("ml", "train-0-gpu"))
        .unwrap()
        .value();
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(result["device"], "gpu-0");
    assert_eq!(result["pool"], "gpu-node");
    assert_eq!(
        claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
            [0],
        "gpu-node"
    );
    assert_eq!(claim["status"]["reservedFor"][0]["name"], "train-0");
    assert_eq!(claim["metadata"]["ownerReferences"][0]["name"], "train-0");
    // The same pass, and a later one reading the claims again: the device is taken.
    let (key1, spec1) = pod(&mut state, "train-1");
    make_claims(&mut state, &key1, &spec1);
    let needs1 = d.needs(&state, &key1, &spec1).unwrap();
    assert_eq!(d.pick(&needs1, "gpu-node").unwrap_err(), CANNOT_ALLOCATE);
    let again = Devices::read(&state);
    assert_eq!(
        again.pick(&needs1, "gpu-node").unwrap_err(),
        CANNOT_ALLOCATE
    );
    // The first pod's claim, allocated, holds it to its node.
    let needs0 = again.needs(&state, &key, &spec).unwrap();
    assert!(again.pick(&needs0, "gpu-node").is_ok());
    assert!(again.pick(&needs0, "other-node").is_err());
}

/// What this scheduler cannot evaluate keeps the pod pending, never bound on a guess.
#[test]
fn what_is_not_understood_is_never_placed() {
    let mut state = state();
    let odd = json!({"metadata": {"name": "odd"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS,
            "selectors": [{"cel": {"expression": "device.capacity[\"x\"].memory > 1"}}]}}]}}}});
    state
        .seed(Resource::ResourceClaimTemplates, "ml", odd)
        .unwrap();
    let all = json!({"metadata": {"name": "all"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS,
            "allocationMode": "All"}}]}}}});
    state
        .seed(Resource::ResourceClaimTemplates, "ml", all)
        .unwrap();
    let d = Devices::read(&state);
    for (template, why) in [
        ("odd", "is not evaluated"),
        ("all", "is not one the simulated scheduler allocates"),
        ("missing", "resourceclaimtemplate missing not found"),
    ] {
        let spec = json!({"containers": [{"name": "c", "image": "i"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]});
        let p = json!({"metadata": {"name": template}, "spec": spec});
        state.seed(Resource::Pods, "ml", p).unwrap();
        let key = Key::new("ml", template);
        make_claims(&mut state, &key, &spec);
        let err = d.needs(&state, &key, &spec).unwrap_err();
        assert!(err.contains(why), "{template}: {err}");
    }
}

#[test]
fn the_selectors_understood_are_driver_and_string_attribute_equality() {
    let d = Device {
        driver: "gpu.example.com".into(),
        pool: "n".into(),
        name: "gpu-0".into(),
        attributes: json!({"type": {"string": "gpu"}, "other.io/model": {"string": "a100"}}),
    };
    assert!(holds("device.driver == 'gpu.example.com'", &d));
    assert!(!holds("device.driver == \"x\"", &d));
    assert!(holds(
        "device.attributes[\"other.io\"].model == \"a100\"",
        &d
    ));
    assert!(!holds(
        "device.attributes[\"other.io\"].type == \"gpu\"",
        &d
    ));
    assert!(!understood(
        "device.driver == \"a\" || device.driver == \"b\""
    ));
    assert!(!understood("device.driver != \"a\""));
}
