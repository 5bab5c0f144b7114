//! The infrastructure provider beside Cluster API's real controllers: what it does to
//! AWSMachines that Cluster API's MachineSet controller cloned and its Machine controller
//! owns, and what it leaves to Cluster API (Machines, links, Node deletion).

use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::*;
use super::fake::*;
use crate::machine_api::FAILURE_MODE_ANNOTATION;

const CAPI: MachineApi = MachineApi::of(Flavor::ClusterApi);

/// A MachineSet as Cluster API's MachineDeployment controller makes it (the deployment's
/// annotations copied), with one Machine and its AWSMachine, as its controllers make them.
/// `owned`: whether the Machine controller has taken ownership of the AWSMachine yet.
fn cloned(world: &mut Fake, annotations: Value, owned: bool) -> Key {
    world.put(
        Resource::AwsMachineTemplates,
        json!({
        "metadata": {"name": "md-a", "namespace": CAPI_NS},
        "spec": {"template": {"spec": {"instanceType": "m6i.xlarge"}}}}),
    );
    world.put(
        CAPI.machine_sets,
        json!({
        "metadata": {"name": "md-a-x", "namespace": CAPI_NS, "annotations": annotations},
        "spec": {"clusterName": "infra", "replicas": 1,
            "template": {"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                "spec": {"clusterName": "infra", "failureDomain": "us-east-1b",
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "AWSMachineTemplate", "name": "md-a"}}}}}),
    );
    world.put(
        CAPI.machines,
        json!({
        "metadata": {"name": "md-a-x-1", "namespace": CAPI_NS,
            "labels": {"cluster.x-k8s.io/set-name": "md-a-x"},
            "ownerReferences": [{"kind": "MachineSet", "name": "md-a-x", "controller": true}]},
        "spec": {"clusterName": "infra"}}),
    );
    let owners = if owned {
        json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "md-a-x-1",
                "uid": "m-1", "controller": true}])
    } else {
        json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "md-a-x",
                "uid": "s-1"}])
    };
    world.put(
        Resource::AwsMachines,
        json!({
        "metadata": {"name": "md-a-x-1", "namespace": CAPI_NS, "ownerReferences": owners},
        "spec": {"instanceType": "m6i.xlarge"}}),
    );
    Key::new(CAPI_NS, "md-a-x-1")
}

/// One pass of the provider, `secs` after `start`.
fn at(ctl: &mut MachineController, world: &mut Fake, start: Instant, secs: u64) {
    ctl.step(
        world,
        &timing(),
        start + std::time::Duration::from_secs(secs),
    );
}

fn provider() -> MachineController {
    MachineController::with_role(CAPI, Role::Cloud)
}

fn infra(world: &Fake, key: &Key) -> Value {
    world.get(Resource::AwsMachines, key).unwrap()
}

#[test]
fn an_owned_awsmachine_gets_an_instance_and_a_node_after_the_delay() {
    let mut world = Fake::new();
    let key = cloned(
        &mut world,
        json!({"capacity.cluster-autoscaler.kubernetes.io/cpu": "4"}),
        true,
    );
    let mut ctl = provider();
    let start = Instant::now();
    at(&mut ctl, &mut world, start, 0);
    let m = infra(&world, &key);
    assert_eq!(m["metadata"]["finalizers"], json!([INFRA_FINALIZER]));
    assert!(
        m["spec"].get("providerID").is_none(),
        "not before the delay"
    );
    assert!(world.all(Resource::Nodes).is_empty());

    at(&mut ctl, &mut world, start, 3);
    let m = infra(&world, &key);
    let nodes = world.all(Resource::Nodes);
    assert_eq!(nodes.len(), 1);
    let node = &nodes[0];
    assert_eq!(node["spec"]["providerID"], m["spec"]["providerID"]);
    assert!(
        m["spec"]["providerID"]
            .as_str()
            .unwrap()
            .starts_with("aws:///us-east-1b/i-0")
    );
    assert_eq!(m["status"]["initialization"]["provisioned"], true);
    assert_eq!(m["status"]["failureDomain"], "us-east-1b");
    assert_eq!(m["status"]["addresses"][0]["type"], "InternalIP");
    // The instance is what the template and the set say.
    assert_eq!(
        node["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        "m6i.xlarge"
    );
    assert_eq!(node["status"]["capacity"]["cpu"], "4000m");
    // Cluster API links the Node and owns the Machine: neither is written here.
    assert!(
        node["metadata"]["annotations"]
            .get("cluster.x-k8s.io/machine")
            .is_none()
    );
    let machine_writes = world
        .writes()
        .into_iter()
        .filter(|c| matches!(c, Call::Modify(r, ..) | Call::Create(r, _) | Call::Delete(r, _) if *r == CAPI.machines))
        .count();
    assert_eq!(machine_writes, 0);

    // Provisioned: nothing more to do, and no second instance.
    at(&mut ctl, &mut world, start, 9);
    assert_eq!(world.all(Resource::Nodes).len(), 1);
}

#[test]
fn an_awsmachine_not_yet_owned_by_its_machine_waits() {
    let mut world = Fake::new();
    let key = cloned(&mut world, json!({}), false);
    let mut ctl = provider();
    let start = Instant::now();
    at(&mut ctl, &mut world, start, 0);
    at(&mut ctl, &mut world, start, 5);
    assert!(world.all(Resource::Nodes).is_empty());
    assert!(infra(&world, &key)["spec"].get("providerID").is_none());
}

#[test]
fn the_clouds_refusal_is_reported_where_cluster_api_reads_it() {
    let mut world = Fake::new();
    let key = cloned(&mut world, json!({FAILURE_MODE_ANNOTATION: "fail"}), true);
    let mut ctl = provider();
    let start = Instant::now();
    at(&mut ctl, &mut world, start, 0);
    at(&mut ctl, &mut world, start, 3);
    let m = infra(&world, &key);
    assert_eq!(m["status"]["failureReason"], "CreateError");
    let message = m["status"]["failureMessage"].as_str().unwrap();
    assert!(
        message.contains("m6i.xlarge") && message.contains("us-east-1b"),
        "{message}"
    );
    assert!(world.all(Resource::Nodes).is_empty());
    // Failed for good: never launched again.
    at(&mut ctl, &mut world, start, 9);
    assert!(world.all(Resource::Nodes).is_empty());
}

#[test]
fn a_launch_whose_status_was_lost_is_reported_not_repeated() {
    let mut world = Fake::new();
    let key = cloned(&mut world, json!({}), true);
    let mut m = infra(&world, &key);
    m["spec"]["providerID"] = json!("aws:///us-east-1b/i-0abc");
    world.put(Resource::AwsMachines, m);
    let mut ctl = provider();
    let start = Instant::now();
    at(&mut ctl, &mut world, start, 0);
    at(&mut ctl, &mut world, start, 3);
    let m = infra(&world, &key);
    assert_eq!(m["status"]["initialization"]["provisioned"], true);
    assert_eq!(m["spec"]["providerID"], "aws:///us-east-1b/i-0abc");
    assert!(world.all(Resource::Nodes).is_empty());
}

#[test]
fn a_deleted_awsmachine_terminates_then_lets_go_leaving_the_node_to_cluster_api() {
    let mut world = Fake::new();
    let key = cloned(&mut world, json!({}), true);
    let mut ctl = provider();
    let start = Instant::now();
    at(&mut ctl, &mut world, start, 0);
    at(&mut ctl, &mut world, start, 3);
    let mut m = infra(&world, &key);
    m["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
    world.put(Resource::AwsMachines, m);
    at(&mut ctl, &mut world, start, 4);
    assert_eq!(
        infra(&world, &key)["metadata"]["finalizers"],
        json!([INFRA_FINALIZER])
    );
    at(&mut ctl, &mut world, start, 6);
    assert!(
        world.get(Resource::AwsMachines, &key).is_none(),
        "its finalizer gone, so is it"
    );
    assert_eq!(
        world.all(Resource::Nodes).len(),
        1,
        "Cluster API deletes the Node"
    );
    assert!(
        !world
            .writes()
            .iter()
            .any(|c| matches!(c, Call::DeleteNode(_)))
    );
}
