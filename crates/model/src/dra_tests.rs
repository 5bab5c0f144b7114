use super::*;

fn project<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_gpu_slice_keeps_its_devices_attributes_and_capacity() {
    let s: resourcev1::ResourceSlice = project(serde_json::json!({
        "metadata": {"name": "worker-a-gpu.example.com-x1"},
        "spec": {"driver": "gpu.example.com", "nodeName": "worker-a",
            "pool": {"name": "worker-a", "generation": 2, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0",
                "attributes": {"model": {"string": "A100"}, "driverVersion": {"version": "1.2.3"},
                    "gpu.example.com/index": {"int": 0}, "mig": {"bool": false}},
                "capacity": {"memory": {"value": "40Gi"}}}]}
    }));
    let s = ResourceSlice::from_k8s(&s, &mut Projector::default()).unwrap();
    assert_eq!(s.node_local_to(), Some("worker-a"));
    assert_eq!((s.generation, s.slice_count), (2, 1));
    let d = &s.devices[0];
    assert!(
        d.attributes
            .contains(&("model".into(), AttributeValue::String("A100".into())))
    );
    assert!(d.attributes.contains(&(
        "driverVersion".into(),
        AttributeValue::Version("1.2.3".into())
    )));
    assert_eq!(d.capacity[0].1, Quantity::parse("40Gi").unwrap());
}

#[test]
fn a_slice_for_no_node_is_refused_by_field() {
    let s: resourcev1::ResourceSlice = project(serde_json::json!({
        "metadata": {"name": "s"},
        "spec": {"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}
    }));
    let err = ResourceSlice::from_k8s(&s, &mut Projector::default()).unwrap_err();
    assert!(err.to_string().contains("nodeName"), "{err}");
}

#[test]
fn claims_read_requests_alternatives_and_allocation() {
    let c: resourcev1::ResourceClaim = project(serde_json::json!({
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {"devices": {"requests": [
            {"name": "one", "exactly": {"deviceClassName": "gpu.example.com",
                "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'A100'"}}]}},
            {"name": "any", "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu.example.com", "count": 2},
                {"name": "all", "deviceClassName": "gpu.example.com", "allocationMode": "All"}]}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "one", "driver": "gpu.example.com", "pool": "worker-a", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["worker-a"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "u"}]}
    }));
    let c = ResourceClaim::from_k8s(&c, &mut Projector::default()).unwrap();
    assert_eq!(c.spec.requests.len(), 2);
    assert_eq!(c.spec.requests[0].choices[0].selectors.len(), 1);
    let modes: Vec<AllocationMode> = c.spec.requests[1].choices.iter().map(|c| c.mode).collect();
    assert_eq!(modes, [AllocationMode::ExactCount(2), AllocationMode::All]);
    assert!(c.spec.unsimulated.is_none());
    let a = c.allocation.unwrap();
    assert_eq!(&*a.devices[0].device, "gpu-0");
    let sel = a.node_selector.unwrap();
    assert!(sel.matches(&crate::labels::Labels::default(), "worker-a"));
    assert!(!sel.matches(&crate::labels::Labels::default(), "worker-b"));
    assert_eq!(&*c.reserved_for[0], "train-0");
}

#[test]
fn match_attribute_is_read_and_distinct_attribute_named_unsimulated() {
    let t: resourcev1::ResourceClaimTemplate = project(serde_json::json!({
        "metadata": {"name": "pair", "namespace": "ml"},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "a", "exactly": {"deviceClassName": "c", "count": 2}}],
            "constraints": [{"matchAttribute": "gpu.example.com/numa", "requests": ["a"]}]}}}
    }));
    let t = ResourceClaimTemplate::from_k8s(&t, &mut Projector::default()).unwrap();
    assert!(t.spec.unsimulated.is_none());
    let c = &t.spec.constraints[0];
    assert!(c.binds("a") && !c.binds("b"));
    let d: resourcev1::ResourceClaim = project(serde_json::json!({
        "metadata": {"name": "x", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [{"name": "a", "exactly": {"deviceClassName": "c", "adminAccess": true}}],
            "constraints": [{"distinctAttribute": "gpu.example.com/numa"}]}}
    }));
    let d = ResourceClaim::from_k8s(&d, &mut Projector::default()).unwrap();
    assert!(d.spec.unsimulated.unwrap().contains("distinctAttribute"));
}

#[test]
fn attributes_are_found_by_qualified_name() {
    let d = Device {
        name: "gpu-0".into(),
        attributes: vec![
            ("numa".into(), AttributeValue::Int(1)),
            (
                "pci.example.com/root".into(),
                AttributeValue::String("r0".into()),
            ),
        ],
        capacity: Vec::new(),
        nodes: None,
        allow_multiple: false,
        consumes: Vec::new(),
        tainted: false,
    };
    assert_eq!(
        d.attribute("gpu.example.com", "gpu.example.com/numa"),
        Some(&AttributeValue::Int(1))
    );
    assert_eq!(
        d.attribute("other.example.com", "gpu.example.com/numa"),
        None
    );
    assert!(
        d.attribute("gpu.example.com", "pci.example.com/root")
            .is_some()
    );
}

#[test]
fn a_count_out_of_range_names_its_field() {
    let c: resourcev1::ResourceClaim = project(serde_json::json!({
        "metadata": {"name": "x", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "c", "count": 0}}]}}
    }));
    let err = ResourceClaim::from_k8s(&c, &mut Projector::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.devices.requests[0].exactly.count"),
        "{err}"
    );
}

#[test]
fn pod_claims_and_their_generated_names() {
    let pod: corev1::Pod = project(serde_json::json!({
        "metadata": {"name": "train-0", "namespace": "ml"},
        "spec": {"containers": [], "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "shared", "resourceClaimName": "team-gpu"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-0-gpu-x7k2p"}]}
    }));
    let mut p = Projector::default();
    let claims = pod_claims(pod.spec.as_ref().unwrap(), &mut p).unwrap();
    assert_eq!(claims[0].source, PodClaimSource::Template("one-gpu".into()));
    assert_eq!(claims[1].source, PodClaimSource::Claim("team-gpu".into()));
    let statuses = claim_statuses(pod.status.as_ref(), &mut p);
    assert_eq!(&*statuses[0].1, "train-0-gpu-x7k2p");
}

#[test]
fn partitions_and_taints_are_read() {
    let s: resourcev1::ResourceSlice = project(serde_json::json!({
        "metadata": {"name": "n1-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
            "devices": [
                {"name": "half-0", "consumesCounters": [
                    {"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]},
                {"name": "half-1", "taints": [{"key": "k", "effect": "NoExecute"}]},
                {"name": "half-2", "taints": [{"key": "k", "effect": "None"}]}]}
    }));
    let s = ResourceSlice::from_k8s(&s, &mut Projector::default()).unwrap();
    assert_eq!(&*s.counter_sets[0].name, "gpu-0");
    assert_eq!(
        s.counter_sets[0].counters[0].1,
        Quantity::parse("80Gi").unwrap()
    );
    assert_eq!(&*s.devices[0].consumes[0].name, "gpu-0");
    let tainted: Vec<bool> = s.devices.iter().map(|d| d.tainted).collect();
    assert_eq!(tainted, [false, true, false]);
}
