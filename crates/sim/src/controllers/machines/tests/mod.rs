//! The controller's logic against a recording fake world: what it creates, changes and
//! deletes, and in which part of each object (status changes must touch status alone, as
//! a real API server takes them through `/status`).

mod capacity;
mod fake;
mod infra;

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::*;
use crate::machine_api::NEVER_READY_ANNOTATION;
use fake::*;

#[test]
fn a_set_scaled_from_2_to_3_gets_one_machine_it_owns() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 3);
    running_machine(&mut world, &api, &set, "m1");
    running_machine(&mut world, &api, &set, "m2");
    let mut ctl = MachineController::new(api);
    ctl.step(&mut world, &timing(), Instant::now());
    let calls = world.writes();
    let made = creates(&calls, api.machines);
    assert_eq!(made.len(), 1, "{calls:?}");
    let m = world.get(api.machines, &made[0]).unwrap();
    assert_eq!(m["apiVersion"], "machine.openshift.io/v1beta1");
    assert!(
        m["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("infra-worker-a-")
    );
    let owner = &m["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("MachineSet"), Some("infra-worker-a"))
    );
    assert_eq!(
        (&owner["uid"], &owner["controller"]),
        (&set["metadata"]["uid"], &json!(true))
    );
    let labels = &m["metadata"]["labels"];
    assert_eq!(labels[api.set_label], "infra-worker-a");
    assert_eq!(
        labels[api.cluster_label], "infra",
        "read from the set's cluster label"
    );
    assert_eq!(labels["role"], "worker");
    assert_eq!(m["metadata"]["finalizers"], json!([api.finalizer]));
    assert_eq!(m["status"]["phase"], "Provisioning");
    // The set's status counts what the pass started from, written through status alone.
    let status_writes: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::Modify(..)))
        .collect();
    assert_eq!(status_writes.len(), 1);
    assert!(matches!(status_writes[0], Call::Modify(r, _, parts)
        if *r == api.machine_sets && parts.iter().eq(["status"])));
    let s = world
        .get(api.machine_sets, &Key::new(OCP_NS, "infra-worker-a"))
        .unwrap();
    assert_eq!(
        s["status"],
        json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2,
        "fullyLabeledReplicas": 2, "observedGeneration": 2})
    );
}

#[test]
fn scaling_down_deletes_the_marked_machine_first() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 2);
    let oldest = running_machine(&mut world, &api, &set, "m1");
    running_machine(&mut world, &api, &set, "m2");
    running_machine(&mut world, &api, &set, "m3");
    // Unmarked, the newest would go; marked, the oldest goes instead.
    world
        .modify(api.machines, &oldest, |m| {
            m["metadata"]["annotations"][api.delete_annotation()] = json!("yes")
        })
        .unwrap();
    world.writes();
    let mut ctl = MachineController::new(api);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    let deletes: Vec<Call> = world
        .writes()
        .into_iter()
        .filter(|c| matches!(c, Call::Delete(..)))
        .collect();
    assert_eq!(deletes, [Call::Delete(api.machines, oldest.clone())]);
    // It goes into phase Deleting, then takes its node with it.
    ctl.step(&mut world, &timing(), start + Duration::from_millis(10));
    assert_eq!(
        world.get(api.machines, &oldest).unwrap()["status"]["phase"],
        "Deleting"
    );
    ctl.step(&mut world, &timing(), start + Duration::from_secs(2));
    let calls = world.writes();
    assert!(
        calls.contains(&Call::DeleteNode("node-m1".into())),
        "{calls:?}"
    );
    assert!(
        world.get(api.machines, &oldest).is_none(),
        "the finalizer was removed"
    );
}

#[test]
fn cluster_api_deployments_make_v1beta2_sets_and_machines() {
    let api = MachineApi::of(Flavor::ClusterApi);
    let mut world = Fake::new();
    capi_deployment(&mut world, 1);
    let mut ctl = MachineController::new(api);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    let sets = world.all(api.machine_sets);
    assert_eq!(sets.len(), 1);
    let ms = &sets[0];
    assert_eq!(ms["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(
        ms["metadata"]["ownerReferences"][0]["apiVersion"],
        "cluster.x-k8s.io/v1beta2"
    );
    assert_eq!(ms["spec"]["clusterName"], "infra");
    assert_eq!(
        ms["spec"]["template"]["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"],
        "md-a"
    );
    // The next pass makes its machine, in v1beta2's shape.
    ctl.step(&mut world, &timing(), start);
    let machines = world.all(api.machines);
    assert_eq!(machines.len(), 1);
    let m = &machines[0];
    let name = m["metadata"]["name"].as_str().unwrap();
    assert_eq!(m["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(
        m["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
        "infra"
    );
    assert_eq!(
        m["metadata"]["labels"]["cluster.x-k8s.io/set-name"],
        ms["metadata"]["name"]
    );
    assert_eq!(m["spec"]["clusterName"], "infra");
    assert_eq!(
        m["spec"]["bootstrap"],
        json!({"dataSecretName": "md-a-bootstrap"})
    );
    assert_eq!(
        m["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io",
        "kind": "AWSMachine", "name": name})
    );
    // After the provisioning delay: a node, linked both ways, nodeRef by name alone.
    world.writes();
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let calls = world.writes();
    let nodes = creates(&calls, Resource::Nodes);
    assert_eq!(nodes.len(), 1, "{calls:?}");
    let node = world.get(Resource::Nodes, &nodes[0]).unwrap();
    assert_eq!(
        node["metadata"]["annotations"]["cluster.x-k8s.io/machine"],
        name
    );
    assert_eq!(
        node["metadata"]["annotations"]["cluster.x-k8s.io/cluster-name"],
        "infra"
    );
    let m = world.get(api.machines, &Key::new(CAPI_NS, name)).unwrap();
    assert_eq!(m["status"]["phase"], "Running");
    assert_eq!(
        m["status"]["nodeRef"],
        json!({"name": nodes[0].name.as_ref()})
    );
    assert_eq!(
        m["status"]["initialization"],
        json!({"bootstrapDataSecretCreated": true,
        "infrastructureProvisioned": true})
    );
    assert_eq!(m["spec"]["providerID"], node["spec"]["providerID"]);
}

/// As Cluster API's MachineDeployment controller: a set carries every annotation of its
/// deployment (the autoscaler's min/max ones too) but the deployment's bookkeeping, kept in
/// step when the deployment's change.
#[test]
fn a_deployments_annotations_are_copied_to_its_set_and_kept_in_step() {
    let api = MachineApi::of(Flavor::ClusterApi);
    let mut world = Fake::new();
    let mut md = capi_deployment(&mut world, 2);
    md["metadata"]["annotations"] = json!({
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "machinedeployment.clusters.x-k8s.io/revision": "3"});
    world.put(Resource::CapiMachineDeployments, md.clone());
    let mut ctl = MachineController::new(api);
    ctl.step(&mut world, &timing(), Instant::now());
    let annotations =
        |world: &Fake| world.all(api.machine_sets)[0]["metadata"]["annotations"].clone();
    assert_eq!(
        annotations(&world),
        json!({"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
            "machinedeployment.clusters.x-k8s.io/desired-replicas": "2",
            "machinedeployment.clusters.x-k8s.io/max-replicas": "3",
            "machinedeployment.clusters.x-k8s.io/revision": "1"})
    );
    md["metadata"]["annotations"] = json!({"team": "a"});
    world.put(Resource::CapiMachineDeployments, md);
    ctl.step(&mut world, &timing(), Instant::now());
    assert_eq!(
        annotations(&world),
        json!({"team": "a",
            "machinedeployment.clusters.x-k8s.io/desired-replicas": "2",
            "machinedeployment.clusters.x-k8s.io/max-replicas": "3",
            "machinedeployment.clusters.x-k8s.io/revision": "1"})
    );
}

#[test]
fn cluster_api_status_is_v1beta2_and_written_alone() {
    let api = MachineApi::of(Flavor::ClusterApi);
    let mut world = Fake::new();
    let md = capi_deployment(&mut world, 2);
    let mut ms = machine_set_for(&md, &api, &mut world.rng);
    ms["metadata"]["namespace"] = json!(CAPI_NS);
    let ms = world.put(api.machine_sets, ms);
    let mut ctl = MachineController::new(api);
    running_machine(&mut world, &api, &ms, "m1");
    running_machine(&mut world, &api, &ms, "m2");
    world.ready.remove("node-m2");
    world.writes();
    ctl.step(&mut world, &timing(), Instant::now());
    ctl.step(&mut world, &timing(), Instant::now());
    for call in world.writes() {
        if let Call::Modify(_, _, parts) = &call {
            assert!(
                parts.iter().eq(["status"]),
                "a status update changed more: {call:?}"
            );
        }
    }
    let ms = world.all(api.machine_sets).remove(0);
    assert_eq!(ms["status"]["replicas"], 2);
    assert_eq!(ms["status"]["readyReplicas"], 1);
    assert_eq!(ms["status"]["upToDateReplicas"], 2);
    assert!(
        ms["status"]["selector"]
            .as_str()
            .unwrap()
            .contains("cluster.x-k8s.io/deployment-name=md-a")
    );
    assert_eq!(
        ms["status"]["deprecated"]["v1beta1"]["fullyLabeledReplicas"],
        2
    );
    let md = world
        .get(Resource::CapiMachineDeployments, &key_of(&md))
        .unwrap();
    assert_eq!(md["status"]["replicas"], 2);
    assert_eq!(md["status"]["readyReplicas"], 1);
    assert_eq!(md["status"]["upToDateReplicas"], 2);
    assert_eq!(md["status"]["phase"], "Running");
    assert_eq!(
        md["status"]["deprecated"]["v1beta1"]["unavailableReplicas"],
        1
    );
    assert!(
        md["status"].get("updatedReplicas").is_none(),
        "v1beta1's field, not v1beta2's"
    );
}

#[test]
fn failure_modes_shape_the_machine_and_its_node() {
    let api = MachineApi::of(Flavor::ClusterApi);
    let mut world = Fake::new();
    let mut md = capi_deployment(&mut world, 2);
    md["metadata"]["annotations"] = json!({FAILURE_MODE_ANNOTATION: "fail"});
    world.put(Resource::CapiMachineDeployments, md.clone());
    let mut ctl = MachineController::new(api);
    let start = Instant::now();
    for _ in 0..2 {
        ctl.step(&mut world, &timing(), start);
    }
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    for m in world.all(api.machines) {
        // As Cluster API v1beta2: no phase Failed, the failure in the v1beta1 fields.
        assert_eq!(m["status"]["phase"], "Provisioning");
        let legacy = &m["status"]["deprecated"]["v1beta1"];
        assert!(
            legacy["failureMessage"]
                .as_str()
                .unwrap()
                .contains("InsufficientInstanceCapacity")
        );
        assert!(m["status"].get("failureMessage").is_none());
    }
    assert!(world.all(Resource::Nodes).is_empty());

    md["metadata"]["annotations"] = json!({FAILURE_MODE_ANNOTATION: "not-ready"});
    md["spec"]["replicas"] = json!(3);
    world.put(Resource::CapiMachineDeployments, md);
    for _ in 0..2 {
        ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    }
    ctl.step(&mut world, &timing(), start + Duration::from_secs(6));
    let nodes = world.all(Resource::Nodes);
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        nodes[0]["metadata"]["annotations"][NEVER_READY_ANNOTATION],
        "true"
    );
}

/// Issue 24, point 3: a GPU node whose driver is still installing comes up Ready with its
/// accelerator label and no GPU, until someone playing the GPU operator advertises it.
#[test]
fn a_gpu_node_whose_driver_installs_has_no_gpu_yet() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let mut set = ocp_set(&mut world, 1);
    set["metadata"]["annotations"] = json!({
        FAILURE_MODE_ANNOTATION: "gpu-driver-installing",
        "capacity.cluster-autoscaler.kubernetes.io/gpu-count": "1",
        "capacity.cluster-autoscaler.kubernetes.io/gpu-type": "nvidia.com/gpu"});
    set["spec"]["template"]["spec"]["metadata"] =
        json!({"labels": {"cluster-api/accelerator": "nvidia-t4"}});
    world.put(api.machine_sets, set);
    let mut ctl = MachineController::new(api);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let nodes = world.all(Resource::Nodes);
    assert_eq!(nodes.len(), 1);
    let node = &nodes[0];
    assert_eq!(
        node["metadata"]["labels"]["cluster-api/accelerator"],
        "nvidia-t4"
    );
    assert!(
        node["status"]["allocatable"]
            .get("nvidia.com/gpu")
            .is_none(),
        "{node}"
    );
    assert!(
        node["status"]["capacity"].get("nvidia.com/gpu").is_none(),
        "{node}"
    );
}

/// Issue 23, point 5: a providerSpec with no placement (vSphere, bare metal, hand-written)
/// still gets a Node, named after its Machine as those platforms name nodes; a Node the API
/// refuses fails the Machine with the API's words instead of a retry nobody sees.
#[test]
fn a_set_without_placement_gets_nodes_and_a_refused_node_fails_its_machine() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let mut set = ocp_set(&mut world, 1);
    set["spec"]["template"]["spec"]["providerSpec"]["value"] = json!({"numCPUs": 4});
    let set = world.put(api.machine_sets, set);
    let mut ctl = MachineController::new(api);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let machine = &world.all(api.machines)[0];
    let nodes = world.all(Resource::Nodes);
    assert_eq!(machine["status"]["phase"], "Running", "{machine}");
    assert_eq!(nodes[0]["metadata"]["name"], machine["metadata"]["name"]);
    assert_eq!(
        nodes[0]["spec"]["providerID"],
        machine["spec"]["providerID"]
    );
    assert!(
        machine["spec"]["providerID"]
            .as_str()
            .unwrap()
            .starts_with("aws:///i-0")
    );

    world.refuse = Some(Resource::Nodes);
    let mut grown = set.clone();
    grown["spec"]["replicas"] = json!(2);
    world.put(api.machine_sets, grown);
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    ctl.step(&mut world, &timing(), start + Duration::from_secs(6));
    let failed: Vec<Value> = world
        .all(api.machines)
        .into_iter()
        .filter(|m| m["status"]["phase"] == "Failed")
        .collect();
    assert_eq!(failed.len(), 1);
    let message = failed[0]["status"]["errorMessage"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("was refused"), "{}", failed[0]);
}

/// Beside the real MachineSet and nodelink controllers the controller plays the cloud: it
/// makes no Machine of its own, gives each Machine the Machine controller's finalizer, an
/// instance and a Node, and leaves the link to nodelink.
#[test]
fn in_the_cloud_role_machines_come_from_the_sets_controller_and_nodes_are_linked_elsewhere() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 2);
    let mut ctl = MachineController::with_role(api, Role::Cloud);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    assert!(world.all(api.machines).is_empty(), "the sets are not ours");
    set_controllers_machine(&mut world, &set, "infra-worker-a-x1");
    ctl.step(&mut world, &timing(), start);
    let key = Key::new(OCP_NS, "infra-worker-a-x1");
    let m = world.get(api.machines, &key).unwrap();
    assert_eq!(m["metadata"]["finalizers"], json!([api.finalizer]));
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let m = world.get(api.machines, &key).unwrap();
    let node = &world.all(Resource::Nodes)[0];
    assert_eq!(m["status"]["phase"], "Provisioned");
    assert!(m["status"].get("nodeRef").is_none(), "nodelink links: {m}");
    assert_eq!(node["spec"]["providerID"], m["spec"]["providerID"]);
    assert!(
        node["metadata"]["annotations"]
            .get(api.key("machine").as_str())
            .is_none()
    );
    // nodelink's link makes the Machine Running.
    let mut linked = m.clone();
    linked["status"]["nodeRef"] = json!({"kind": "Node", "name": node["metadata"]["name"]});
    world.put(api.machines, linked);
    ctl.step(&mut world, &timing(), start + Duration::from_secs(4));
    assert_eq!(
        world.get(api.machines, &key).unwrap()["status"]["phase"],
        "Running"
    );
    assert_eq!(world.all(api.machines).len(), 1, "still none of its own");
}

#[test]
fn nothing_changed_means_nothing_done() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 1);
    running_machine(&mut world, &api, &set, "m1");
    world.revision = Some(5);
    let mut ctl = MachineController::new(api);
    ctl.step(&mut world, &timing(), Instant::now());
    assert!(
        !world.writes().is_empty(),
        "the first pass writes the set's status"
    );
    // Scaled behind the revision's back: a world that says nothing moved is not read.
    world
        .objects
        .get_mut(&(api.machine_sets, key_of(&set)))
        .unwrap()["spec"]["replicas"] = json!(2);
    ctl.step(&mut world, &timing(), Instant::now());
    assert!(world.writes().is_empty());
    world.revision = Some(6);
    ctl.step(&mut world, &timing(), Instant::now());
    assert_eq!(creates(&world.writes(), api.machines).len(), 1);
}

#[test]
fn a_deployment_without_replicas_makes_a_set_of_one() {
    let api = MachineApi::of(Flavor::ClusterApi);
    let mut world = Fake::new();
    let mut md = capi_deployment(&mut world, 0);
    md["spec"].as_object_mut().unwrap().remove("replicas");
    let ms = machine_set_for(&md, &api, &mut world.rng);
    assert_eq!(
        ms["spec"]["replicas"], 1,
        "null is not a valid replica count"
    );
}

#[test]
fn a_machine_is_read_from_its_json_as_the_controller_needs_it() {
    let api = MachineApi::of(crate::settings::Flavor::OpenShift);
    let machine = json!({
        "metadata": {"name": "m", "namespace": "ns", "creationTimestamp": "2026-11-25T10:00:00Z",
            "deletionTimestamp": "2026-11-25T11:00:00Z",
            "annotations": {api.delete_annotation(): "true", "other": "x"},
            "ownerReferences": [{"kind": "Other", "name": "o", "uid": "u0"},
                {"kind": "MachineSet", "name": "set", "uid": "u1", "controller": true}]},
        "spec": {"providerSpec": {"value": {"instanceType": "m6i.2xlarge"}}},
        "status": {"phase": "Running", "nodeRef": {"kind": "Node", "name": "n1"}}
    });
    let wire: MachineWire = serde_json::from_value(machine).unwrap();
    let v = wire.view(&api, Key::new("ns", "m"));
    assert_eq!(
        (
            v.owner_kind.as_str(),
            v.owner_name.as_str(),
            v.owner_uid.as_str()
        ),
        ("MachineSet", "set", "u1")
    );
    assert!(v.deleting && v.marked);
    assert_eq!(
        (v.phase.as_str(), v.node.as_deref()),
        ("Running", Some("n1"))
    );
    assert_eq!(v.created, "2026-11-25T10:00:00Z");
    let bare: MachineWire = serde_json::from_value(json!({"metadata": {"name": "m"}})).unwrap();
    let v = bare.view(&api, Key::new("ns", "m"));
    assert!(!v.deleting && !v.marked && v.node.is_none() && v.owner_uid.is_empty());
    let nulls = json!({"metadata": {"name": "m", "ownerReferences": null, "annotations": null,
        "creationTimestamp": null}, "status": {"phase": null, "nodeRef": null}});
    let v = serde_json::from_value::<MachineWire>(nulls)
        .expect("null fields read as empty")
        .view(&api, Key::new("ns", "m"));
    assert!(v.phase.is_empty() && v.created.is_empty() && v.owner_kind.is_empty());
    let null_status = json!({"metadata": null, "status": null});
    assert!(serde_json::from_value::<MachineWire>(null_status).is_ok());
}

#[test]
fn a_provisioning_machine_is_looked_at_again_only_once_due() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 1);
    world.revision = Some(5);
    let mut ctl = MachineController::new(api);
    let t0 = Instant::now();
    ctl.step(&mut world, &timing(), t0);
    let made = creates(&world.writes(), api.machines);
    assert_eq!(made.len(), 1);
    // Its own writes seen: the new machine's provisioning starts its clock.
    world.revision = Some(6);
    ctl.step(&mut world, &timing(), t0);
    world.writes();
    // Scaled behind the revision's back: before any stage is due, nothing is read.
    world
        .objects
        .get_mut(&(api.machine_sets, key_of(&set)))
        .unwrap()["spec"]["replicas"] = json!(2);
    ctl.step(&mut world, &timing(), t0 + Duration::from_millis(500));
    assert!(world.writes().is_empty());
    ctl.step(&mut world, &timing(), t0 + timing().machine_provision);
    let calls = world.writes();
    assert_eq!(
        creates(&calls, api.machines).len(),
        1,
        "read again: {calls:?}"
    );
    let first = world.get(api.machines, &made[0]).unwrap();
    assert_ne!(
        first["status"]["phase"], "Provisioning",
        "provisioned once due"
    );
}

/// A Machine whose status write was lost (another controller wrote first) still has its
/// provider ID: the next pass writes its status from its Node and launches nothing again.
#[test]
fn a_launched_machine_is_never_launched_twice() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 1);
    let mut ctl = MachineController::with_role(api, Role::Cloud);
    let start = Instant::now();
    set_controllers_machine(&mut world, &set, "w-1");
    ctl.step(&mut world, &timing(), start);
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let key = Key::new(OCP_NS, "w-1");
    let mut lost = world.get(api.machines, &key).unwrap();
    lost["status"] = json!({});
    world.put(api.machines, lost);
    for s in [6, 9] {
        ctl.step(&mut world, &timing(), start + Duration::from_secs(s));
    }
    let nodes = world.all(Resource::Nodes);
    assert_eq!(nodes.len(), 1, "launched again: {nodes:?}");
    let m = world.get(api.machines, &key).unwrap();
    assert_eq!(m["status"]["phase"], "Provisioned");
    assert_eq!(
        m["status"]["addresses"][1]["address"],
        nodes[0]["metadata"]["name"]
    );
}
