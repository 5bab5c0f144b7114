//! Pods with ResourceClaims in scale-down: where their claims let them move.

use serde_json::{Value, json};

use super::*;

#[test]
fn a_node_whose_pod_holds_devices_is_kept() {
    let mut items = cluster();
    // The GPU node is nearly empty, and the CPU node has room for its pod but not its GPU.
    items.push(pod("fill").cpu("6").on("cpu-0").json());
    let p = plan(items);
    let unneeded: Vec<&str> = p.unneeded.iter().map(|u| &*u.node).collect();
    assert!(!unneeded.contains(&"gpu-0"), "{unneeded:?}");
    let kept = p.not_removable.iter().find(|n| &*n.node == "gpu-0");
    assert!(
        kept.is_some_and(|n| n.code == ReasonCode::NoPlaceToMovePods),
        "{:?}",
        p.not_removable
    );
}

#[test]
fn without_the_dra_objects_a_node_running_a_claimant_is_kept() {
    // The same cluster with no resource.k8s.io objects: trainer-0 could move by CPU alone.
    let items: Vec<Value> = cluster()
        .into_iter()
        .filter(|i| i["apiVersion"] != "resource.k8s.io/v1")
        .chain([pod("fill").cpu("6").on("cpu-0").json()])
        .collect();
    let p = plan(items);
    let kept = p.not_removable.iter().find(|n| &*n.node == "gpu-0");
    assert!(
        kept.is_some_and(|n| n.code == ReasonCode::NoPlaceToMovePods),
        "{:?}",
        p.not_removable
    );
}

/// A scheduled pod holding the GPUs `gpus` of `node`, through a claim made for it.
fn holder(name: &str, node: &str, gpus: &[usize]) -> Vec<Value> {
    let made = format!("{name}-gpu-x1");
    let results: Vec<Value> = gpus
        .iter()
        .map(|i| json!({"request": "gpu", "driver": DRIVER, "pool": node, "device": format!("gpu-{i}")}))
        .collect();
    let mut c = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": made, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": DRIVER, "count": gpus.len()}}]}}});
    c["status"] = json!({"allocation": {"devices": {"results": results},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": "u"}]});
    let mut p = with_claims(
        pod(name).cpu("1").on(node).json(),
        json!([{"name": "gpu", "resourceClaimTemplateName": "any-gpu"}]),
    );
    p["status"]["resourceClaimStatuses"] = json!([{"name": "gpu", "resourceClaimName": made}]);
    vec![c, p]
}

/// Upstream's "scale-down: single-device nodes with drain" (static_autoscaler_dra_test.go):
/// three nodes of three GPUs; two hold a pod with two GPUs each, the third two pods with
/// one each. The third goes (its pods' claims allocated again on the others' free GPUs);
/// the first two stay.
#[test]
fn a_node_goes_when_its_pods_claims_can_be_allocated_elsewhere() {
    let mut items = vec![
        machineset("gpu", 0, 5, 3).json(),
        device_class(DRIVER, None),
        template("any-gpu", DRIVER, 1),
    ];
    for i in 0..3 {
        let n = format!("gpu-{i}");
        items.extend(group_node(&n, "gpu", node(&n).cpu("8")));
        items.push(slice(&n, 3, "A100"));
    }
    items.extend(holder("two-0", "gpu-0", &[0, 1]));
    items.extend(holder("two-1", "gpu-1", &[0, 1]));
    items.extend(holder("one-0", "gpu-2", &[0]));
    items.extend(holder("one-1", "gpu-2", &[1]));
    let p = plan(items);
    let unneeded: Vec<&str> = p.unneeded.iter().map(|u| &*u.node).collect();
    assert_eq!(unneeded, ["gpu-2"], "{:?}", p.not_removable);
}
