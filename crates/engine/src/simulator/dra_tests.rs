//! Pods with ResourceClaims, through whole passes: where their devices make the engine
//! scale, and where not (upstream's DRA scale-up tests in pkg/core/scaleup and the Cluster
//! API provider's scale-from-zero slice).

use serde_json::{Value, json};

use crate::fixtures::{group_node, machineset, node, pod, snapshot};
use crate::plan::{Outcome, Plan};
use crate::reason::ReasonCode;
use crate::{EngineState, Settings, run_once};

const DRIVER: &str = "gpu.example.com";
const GPU_GROUP: &str = "MachineSet.machine.openshift.io/openshift-machine-api/gpu";

fn plan(items: Vec<Value>) -> Plan {
    run_once(
        &snapshot(items),
        &mut EngineState::default(),
        &Settings::default(),
        "2026-11-22T10:00:00Z".parse().unwrap(),
    )
}

fn scaled(p: &Plan) -> Vec<(String, u64)> {
    p.scale_up
        .iter()
        .map(|a| (a.node_group.to_string(), a.to - a.from))
        .collect()
}

fn codes(p: &Plan, pod: &str) -> (Outcome, Vec<ReasonCode>) {
    let e = p.pending_pods.iter().find(|e| &*e.pod.name == pod).unwrap();
    (e.outcome, e.reasons.iter().map(|r| r.code).collect())
}

fn device_class(name: &str, selector: Option<&str>) -> Value {
    let selectors: Vec<Value> = selector
        .into_iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": name}, "spec": {"selectors": selectors}})
}

fn slice(node: &str, gpus: usize, model: &str) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| {
            json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": model}},
            "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-{DRIVER}")},
        "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

fn template(name: &str, class: &str, count: i64) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": class, "count": count}}]}}}})
}

fn claim(name: &str, class: &str, allocated_on: Option<(&str, &str)>) -> Value {
    let mut c = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}});
    if let Some((node, device)) = allocated_on {
        c["status"] = json!({"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    }
    c
}

fn with_claims(mut p: Value, claims: Value) -> Value {
    p["spec"]["resourceClaims"] = claims;
    p
}

/// A pending pod of one CPU whose claim `gpu` is made from the template `template`.
fn claiming(name: &str, template: &str) -> Value {
    with_claims(
        pod(name).cpu("1").unschedulable().json(),
        json!([{"name": "gpu", "resourceClaimTemplateName": template}]),
    )
}

/// A pending pod asking for one GPU from the template `one-gpu`.
fn gpu_pod(name: &str) -> Value {
    claiming(name, "one-gpu")
}

/// The plan scales the GPU group alone, by `nodes`.
fn assert_gpu_scaled(p: &Plan, nodes: u64) {
    assert_eq!(
        scaled(p),
        [(GPU_GROUP.to_string(), nodes)],
        "{:?}",
        p.pending_pods
    );
}

/// A CPU group and a GPU group, each with one ready node; the GPU node's one A100 is taken
/// by a running pod's allocated claim.
fn cluster() -> Vec<Value> {
    let mut items = vec![
        machineset("cpu", 0, 5, 1).json(),
        machineset("gpu", 0, 5, 1).json(),
        device_class(DRIVER, Some("device.driver == 'gpu.example.com'")),
        template("one-gpu", DRIVER, 1),
        slice("gpu-0", 1, "A100"),
        claim("trainer-0-gpu", DRIVER, Some(("gpu-0", "gpu-0"))),
    ];
    items.extend(group_node("cpu-0", "cpu", node("cpu-0").cpu("8")));
    items.extend(group_node("gpu-0", "gpu", node("gpu-0").cpu("8")));
    let mut trainer = with_claims(
        pod("trainer-0").cpu("1").on("gpu-0").json(),
        json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
    );
    trainer["status"]["resourceClaimStatuses"] =
        json!([{"name": "gpu", "resourceClaimName": "trainer-0-gpu"}]);
    items.push(trainer);
    items
}

/// Issue 24, point 2: without the DRA objects nothing is bought and the pod says why
/// (upstream without `--enable-dynamic-resource-allocation` would buy a CPU node).
#[test]
fn a_pod_with_resource_claims_buys_no_node_it_could_not_use() {
    let items = vec![
        machineset("cpu", 0, 5, 1).json(),
        pod("fill").cpu("8").on("cpu-0").json(),
    ];
    let mut items: Vec<Value> = items
        .into_iter()
        .chain(group_node("cpu-0", "cpu", node("cpu-0").cpu("8")))
        .collect();
    items.push(gpu_pod("gpu-job"));
    let p = plan(items.clone());
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    assert_eq!(
        codes(&p, "gpu-job"),
        (Outcome::NoScaleUp, vec![ReasonCode::NotSimulated])
    );
    // Listed, with the template, but no group has devices: still nothing, by devices.
    items.push(device_class(DRIVER, None));
    items.push(template("one-gpu", DRIVER, 1));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (outcome, codes) = codes(&p, "gpu-job");
    assert_eq!(outcome, Outcome::NoScaleUp);
    assert!(codes.contains(&ReasonCode::DevicesUnavailable), "{codes:?}");
    assert!(!codes.contains(&ReasonCode::NotSimulated), "{codes:?}");
}

#[test]
fn a_gpu_in_use_scales_the_gpu_group_only() {
    let mut items = cluster();
    items.push(gpu_pod("job-0"));
    let p = plan(items);
    assert_gpu_scaled(&p, 1);
}

#[test]
fn a_free_gpu_on_a_node_needs_no_new_node() {
    let mut items = cluster();
    items.push(slice("gpu-0", 2, "A100"));
    // The newer generation of the pool has two devices: one is free.
    items.last_mut().unwrap()["spec"]["pool"]["generation"] = json!(2);
    items.push(gpu_pod("job-0"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    assert_eq!(codes(&p, "job-0").0, Outcome::FitsExisting);
}

#[test]
fn each_claim_from_a_template_takes_its_own_device() {
    let mut items = cluster();
    for i in 0..3 {
        items.push(gpu_pod(&format!("job-{i}")));
    }
    let p = plan(items);
    assert_gpu_scaled(&p, 3);
}

#[test]
fn a_shared_claim_is_allocated_once() {
    let mut items = cluster();
    items.push(claim("shared", DRIVER, None));
    for i in 0..2 {
        items.push(with_claims(
            pod(&format!("job-{i}")).cpu("1").unschedulable().json(),
            json!([{"name": "gpu", "resourceClaimName": "shared"}]),
        ));
    }
    let p = plan(items);
    assert_gpu_scaled(&p, 1);
}

#[test]
fn a_selector_no_device_matches_buys_nothing() {
    let mut items = cluster();
    items.push(device_class(
        "h100",
        Some("device.attributes['gpu.example.com'].model == 'H100'"),
    ));
    items.push(template("one-h100", "h100", 1));
    items.push(claiming("job-0", "one-h100"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (outcome, codes) = codes(&p, "job-0");
    assert_eq!(outcome, Outcome::NoScaleUp);
    assert!(codes.contains(&ReasonCode::DevicesUnavailable), "{codes:?}");
}

#[test]
fn what_does_not_exist_holds_the_pod_everywhere() {
    let mut items = cluster();
    items.push(with_claims(
        pod("no-claim").cpu("1").unschedulable().json(),
        json!([{"name": "gpu", "resourceClaimName": "nowhere"}]),
    ));
    items.push(template("no-class", "missing-class", 1));
    items.push(claiming("no-class", "no-class"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (_, c) = codes(&p, "no-claim");
    assert_eq!(c[0], ReasonCode::DeviceClaimMissing, "{:?}", p.pending_pods);
    let (_, c) = codes(&p, "no-class");
    assert_eq!(c[0], ReasonCode::DeviceClassMissing, "{:?}", p.pending_pods);
}

#[test]
fn an_allocated_claim_pins_its_pods_to_its_node() {
    let mut items = cluster();
    items.push(pod("fill").cpu("7").on("gpu-0").json());
    items.push(with_claims(
        pod("helper").cpu("1").unschedulable().json(),
        json!([{"name": "gpu", "resourceClaimName": "trainer-0-gpu"}]),
    ));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (outcome, codes) = codes(&p, "helper");
    assert_eq!(outcome, Outcome::NoScaleUp);
    assert!(
        codes.contains(&ReasonCode::DeviceClaimAllocatedElsewhere),
        "{codes:?}"
    );
}

#[test]
fn a_match_attribute_constraint_takes_devices_of_one_value() {
    let mut items = cluster();
    // gpu-0 now has three GPUs on two NUMA nodes; gpu-0 (NUMA 0) is in use, so the two free
    // ones are on different NUMA nodes: a pair on one NUMA node needs a new node.
    let mut numa = slice("gpu-0", 3, "A100");
    numa["spec"]["pool"]["generation"] = json!(2);
    for (i, n) in [0, 0, 1].iter().enumerate() {
        numa["spec"]["devices"][i]["attributes"]["numa"] = json!({"int": n});
    }
    items.push(numa);
    let mut t = template("pair", DRIVER, 2);
    t["spec"]["spec"]["devices"]["constraints"] =
        json!([{"matchAttribute": "gpu.example.com/numa", "requests": ["gpu"]}]);
    items.push(t);
    items.push(claiming("pair-0", "pair"));
    let p = plan(items.clone());
    assert_gpu_scaled(&p, 1);
    // Without the constraint the two free GPUs do.
    let t = items
        .iter_mut()
        .find(|i| i["metadata"]["name"] == "pair")
        .unwrap();
    t["spec"]["spec"]["devices"]["constraints"] = json!([]);
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
}

#[test]
fn an_unsimulated_constraint_buys_nothing_and_says_which() {
    let mut items = cluster();
    let mut t = template("spread", DRIVER, 2);
    t["spec"]["spec"]["devices"]["constraints"] =
        json!([{"distinctAttribute": "gpu.example.com/numa"}]);
    items.push(t);
    items.push(claiming("spread-0", "spread"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let e = p
        .pending_pods
        .iter()
        .find(|e| &*e.pod.name == "spread-0")
        .unwrap();
    assert_eq!(e.reasons[0].code, ReasonCode::NotSimulated);
    assert!(
        e.reasons[0].message.contains("distinctAttribute"),
        "{:?}",
        e.reasons
    );
}

/// Upstream's clusterapi nodegroup test "When the NodeGroup can scale from zero and DRA is
/// enabled": the `dra-driver` annotation and the GPU count make a slice of `gpu-N` devices
/// with `type: "gpu"`.
#[test]
fn a_group_at_zero_with_the_dra_driver_annotation_scales() {
    let mut items = vec![
        machineset("gpu", 0, 5, 0)
            .capacity("8", "32Gi")
            .annotation("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "2")
            .annotation(
                "capacity.cluster-autoscaler.kubernetes.io/dra-driver",
                DRIVER,
            )
            .json(),
        machineset("cpu", 0, 5, 0).capacity("8", "32Gi").json(),
        device_class(
            DRIVER,
            Some(
                "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'",
            ),
        ),
        template("one-gpu", DRIVER, 1),
    ];
    for i in 0..3 {
        items.push(gpu_pod(&format!("job-{i}")));
    }
    let p = plan(items);
    assert_gpu_scaled(&p, 2);
}

#[test]
fn first_available_takes_the_first_alternative_a_node_has() {
    let mut items = cluster();
    items.push(device_class(
        "h100",
        Some("device.attributes['gpu.example.com'].model == 'H100'"),
    ));
    items.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "best-gpu", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "h100", "deviceClassName": "h100"},
            {"name": "any", "deviceClassName": DRIVER}]}]}}}}),
    );
    items.push(claiming("job-0", "best-gpu"));
    let p = plan(items);
    assert_gpu_scaled(&p, 1);
}

#[test]
fn all_devices_of_a_node_need_none_in_use() {
    let mut items = cluster();
    // gpu-0 now has two GPUs, one of them in use: `All` cannot be had there.
    items.push(slice("gpu-0", 2, "A100"));
    items.last_mut().unwrap()["spec"]["pool"]["generation"] = json!(2);
    let mut t = template("all-gpus", DRIVER, 1);
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"] =
        json!({"deviceClassName": DRIVER, "allocationMode": "All"});
    items.push(t);
    items.push(claiming("job-0", "all-gpus"));
    let p = plan(items);
    assert_gpu_scaled(&p, 1);
}

/// A device for all nodes (network-attached) is one device however many nodes are added:
/// taken, no new node brings another.
#[test]
fn a_shared_device_in_use_is_not_multiplied_by_new_nodes() {
    let mut items = cluster();
    items.push(device_class(
        "fpga",
        Some("device.driver == 'fpga.example.com'"),
    ));
    items.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {"driver": "fpga.example.com", "allNodes": true,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "fpga-0"}]}}),
    );
    let mut taken = claim("fpga-a", "fpga", None);
    taken["status"] = json!({"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "fpga.example.com", "pool": "fabric", "device": "fpga-0"}]}}});
    items.push(taken);
    items.push(claim("fpga-b", "fpga", None));
    items.push(with_claims(
        pod("fpga-job").cpu("1").unschedulable().json(),
        json!([{"name": "fpga", "resourceClaimName": "fpga-b"}]),
    ));
    let p = plan(items.clone());
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (_, held) = codes(&p, "fpga-job");
    assert!(held.contains(&ReasonCode::DevicesUnavailable), "{held:?}");
    // Free, it can be had from any node: the pod fits an existing one.
    let taken = items
        .iter_mut()
        .find(|i| i["metadata"]["name"] == "fpga-a")
        .unwrap();
    taken["status"] = json!({});
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    assert_eq!(codes(&p, "fpga-job").0, Outcome::FitsExisting);
}

/// Upstream's DraCustomResourcesProcessor: a node of the GPU group that has not published
/// its slices yet is still starting, not a node without GPUs: the pod waits for it instead
/// of buying another node, and it is never the group's template.
#[test]
fn a_node_whose_driver_has_not_published_yet_is_waited_for() {
    let mut items = cluster();
    items[1] = machineset("gpu", 0, 5, 2).json();
    // Registered five minutes ago, within the startup time.
    let fresh = node("gpu-1").cpu("8").created("2026-11-22T09:55:00Z");
    items.extend(group_node("gpu-1", "gpu", fresh));
    items.push(gpu_pod("job-0"));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    let (outcome, _) = codes(&p, "job-0");
    assert_eq!(outcome, Outcome::FitsUpcoming, "{:?}", p.pending_pods);
}

/// gpu-0's A100 as a whole device and two halves, all taking from one counter set.
fn partitioned_slice() -> Value {
    let mem =
        |q: &str| json!([{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": q}}}]);
    let half = |name: &str| {
        json!({"name": name, "attributes": {"profile": {"string": "half"}},
        "consumesCounters": mem("40Gi")})
    };
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "gpu-0-partitions"},
        "spec": {"driver": DRIVER, "nodeName": "gpu-0",
            "pool": {"name": "gpu-0", "generation": 2, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}],
            "devices": [
                {"name": "gpu-0", "attributes": {"profile": {"string": "whole"}}, "consumesCounters": mem("80Gi")},
                half("gpu-0-half-0"), half("gpu-0-half-1")]}})
}

fn half_pod(name: &str) -> Value {
    with_claims(
        pod(name).cpu("1").unschedulable().json(),
        json!([{"name": "gpu", "resourceClaimTemplateName": "half-gpu"}]),
    )
}

/// Partitionable devices: the whole GPU in use leaves nothing of its counters for its
/// halves, so a pod asking for a half needs a new node; on a new node, two halves fit.
#[test]
fn partitions_take_from_their_shared_counters() {
    let mut items = cluster();
    items.push(partitioned_slice());
    items.push(device_class(
        "half",
        Some("device.attributes['gpu.example.com'].profile == 'half'"),
    ));
    items.push(template("half-gpu", "half", 1));
    for i in 0..3 {
        items.push(half_pod(&format!("half-{i}")));
    }
    let p = plan(items);
    // Three halves: two on one new node, the third on another.
    assert_gpu_scaled(&p, 2);
}

#[test]
fn a_tainted_device_is_not_allocated() {
    let mut items = cluster();
    let mut tainted = slice("gpu-0", 2, "A100");
    tainted["spec"]["pool"]["generation"] = json!(2);
    tainted["spec"]["devices"][1]["taints"] =
        json!([{"key": "example.com/unhealthy", "effect": "NoSchedule"}]);
    items.push(tainted);
    items.push(gpu_pod("job-0"));
    let p = plan(items);
    // gpu-1 is free but tainted: a new node (whose copy is tainted too: its other GPU).
    assert_gpu_scaled(&p, 1);
}

#[path = "dra_removal_tests.rs"]
mod removal;

/// Upstream's "scale-up: pods requesting a shared, unallocated claim": the claim is
/// allocated once, on the first new node; the pods that share it can only go there, so
/// those that do not fit it by CPU buy nothing more.
#[test]
fn pods_sharing_a_claim_fill_one_new_node_only() {
    let mut items = cluster();
    items.push(claim("shared", DRIVER, None));
    for i in 0..10 {
        items.push(with_claims(
            pod(&format!("job-{i}")).cpu("2").unschedulable().json(),
            json!([{"name": "gpu", "resourceClaimName": "shared"}]),
        ));
    }
    let p = plan(items);
    // 8 CPUs a node: four pods of two CPUs on the new node.
    let up = &p.scale_up;
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!((up[0].to - up[0].from, up[0].pods.len()), (1, 4), "{up:?}");
    let waiting = p
        .pending_pods
        .iter()
        .filter(|e| e.outcome == Outcome::NoScaleUp)
        .count();
    assert_eq!(waiting, 6, "{:?}", p.pending_pods);
}

/// Upstream's "no scale-up: pods requesting multiple different devices, but they're on
/// different nodes": a GPU group and a NIC group; a pod needing both fits neither.
#[test]
fn devices_of_two_groups_do_not_add_up() {
    let mut items = cluster();
    items.push(machineset("nic", 0, 5, 1).json());
    items.extend(group_node("nic-0", "nic", node("nic-0").cpu("8")));
    items.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "nic-0-nic"},
        "spec": {"driver": "nic.example.com", "nodeName": "nic-0",
            "pool": {"name": "nic-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "nic-0"}]}}),
    );
    items.push(device_class(
        "nic",
        Some("device.driver == 'nic.example.com'"),
    ));
    items.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-and-nic", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRIVER}},
            {"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}}),
    );
    items.push(with_claims(
        pod("both-0").cpu("1").unschedulable().json(),
        json!([{"name": "devs", "resourceClaimTemplateName": "gpu-and-nic"}]),
    ));
    let p = plan(items);
    assert!(p.scale_up.is_empty(), "{:?}", p.scale_up);
    assert_eq!(codes(&p, "both-0").0, Outcome::NoScaleUp);
}

/// Upstream's "scale from 0 nodes ... with pods on the template nodes consuming DRA
/// resources": a device a DaemonSet pod holds on the template's source node is held on
/// every new node too.
#[test]
fn devices_held_by_daemonset_pods_are_held_on_new_nodes() {
    let mut items = cluster();
    let mut two = slice("gpu-0", 2, "A100");
    two["spec"]["pool"]["generation"] = json!(2);
    items.push(two);
    items.push(claim("monitor-gpu", DRIVER, Some(("gpu-0", "gpu-1"))));
    items.push(with_claims(
        pod("monitor-x1")
            .cpu("100m")
            .owner("DaemonSet", "monitor")
            .on("gpu-0")
            .json(),
        json!([{"name": "gpu", "resourceClaimName": "monitor-gpu"}]),
    ));
    items.push(gpu_pod("job-0"));
    items.push(gpu_pod("job-1"));
    let p = plan(items);
    // Each new node has one GPU free: two nodes, not one.
    assert_gpu_scaled(&p, 2);
}

/// Without the DRA objects read, the `dra-driver` annotation holds no node as starting.
#[test]
fn without_the_dra_objects_no_node_waits_for_its_driver() {
    let mut items = vec![
        machineset("gpu", 0, 5, 1)
            .annotation("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "1")
            .annotation(
                "capacity.cluster-autoscaler.kubernetes.io/dra-driver",
                DRIVER,
            )
            .json(),
        pod("busy").cpu("8").on("gpu-0").json(),
    ];
    items.extend(group_node(
        "gpu-0",
        "gpu",
        node("gpu-0").cpu("8").resource("nvidia.com/gpu", "1"),
    ));
    let p = plan(items);
    let group = p
        .node_groups
        .iter()
        .find(|g| g.id.to_string() == GPU_GROUP)
        .unwrap();
    assert_eq!(
        group.template,
        crate::template::TemplateSource::Node,
        "{group:?}"
    );
    assert_eq!(group.ready, 1, "{group:?}");
}
