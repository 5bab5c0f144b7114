//! Capacity faults of the simulated cloud: a machine of a matching instance type and zone
//! that finishes provisioning goes Failed with the cloud's error; others get their node.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::*;
use super::fake::*;
use crate::faults::DEFAULT_CAPACITY_REASON;

fn fault(instance_type: &str, zone: Option<&str>) -> CapacityFault {
    CapacityFault {
        instance_type: instance_type.into(),
        zone: zone.map(str::to_string),
        reason: DEFAULT_CAPACITY_REASON.into(),
        message: None,
    }
}

/// The machines of the OpenShift set `infra-worker-a` (m6i.2xlarge in us-east-1a) once one
/// new machine has finished provisioning under `faults`.
fn provisioned_under(faults: Vec<CapacityFault>) -> Vec<Value> {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    let set = ocp_set(&mut world, 2);
    running_machine(&mut world, &api, &set, "m1");
    let mut ctl = MachineController::new(api);
    ctl.set_capacity_faults(faults);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    world.all(api.machines)
}

fn by_name<'a>(machines: &'a [Value], name: &str) -> &'a Value {
    machines
        .iter()
        .find(|m| m["metadata"]["name"] == name)
        .unwrap()
}

fn new_machine(machines: &[Value]) -> &Value {
    machines
        .iter()
        .find(|m| m["metadata"]["name"] != "m1")
        .unwrap()
}

#[test]
fn a_machine_of_the_type_and_zone_fails_with_the_clouds_error() {
    let machines = provisioned_under(vec![fault("m6i.2xlarge", Some("us-east-1a"))]);
    let failed = new_machine(&machines);
    assert_eq!(failed["status"]["phase"], "Failed");
    assert_eq!(failed["status"]["errorReason"], "CreateError");
    assert_eq!(
        failed["status"]["errorMessage"],
        "error launching instance: InsufficientInstanceCapacity: We currently do not have \
         sufficient m6i.2xlarge capacity in the Availability Zone you requested (us-east-1a)."
    );
    assert!(failed["status"].get("nodeRef").is_none());
    // The machine already running is untouched.
    assert_eq!(by_name(&machines, "m1")["status"]["phase"], "Running");
}

#[test]
fn machines_of_another_type_or_zone_get_their_node() {
    let others = vec![
        fault("m6i.4xlarge", Some("us-east-1a")),
        fault("m6i.2xlarge", Some("us-east-1b")),
        fault("g5.2xlarge", None),
    ];
    let machines = provisioned_under(others);
    let made = new_machine(&machines);
    assert_eq!(made["status"]["phase"], "Running");
    assert!(made["status"]["nodeRef"]["name"].is_string());
}

#[test]
fn a_fault_of_every_zone_says_its_own_reason_and_message() {
    let quota = CapacityFault {
        reason: "InstanceLimitExceeded".into(),
        message: Some("You have requested more instances than your limit allows.".into()),
        ..fault("m6i.2xlarge", None)
    };
    let machines = provisioned_under(vec![quota]);
    let failed = new_machine(&machines);
    assert_eq!(failed["status"]["phase"], "Failed");
    assert_eq!(
        failed["status"]["errorMessage"],
        "error launching instance: InstanceLimitExceeded: You have requested more instances \
         than your limit allows."
    );
}

#[test]
fn a_fault_counts_when_provisioning_ends_not_when_it_starts() {
    let api = MachineApi::of(Flavor::OpenShift);
    let mut world = Fake::new();
    ocp_set(&mut world, 1);
    let mut ctl = MachineController::new(api);
    ctl.set_capacity_faults(vec![fault("m6i.2xlarge", None)]);
    let start = Instant::now();
    ctl.step(&mut world, &timing(), start);
    // Cleared while the machine provisions: it gets its node.
    ctl.set_capacity_faults(Vec::new());
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let machines = world.all(api.machines);
    assert_eq!(machines[0]["status"]["phase"], "Running");
}

#[test]
fn cluster_api_machines_fail_under_their_deprecated_v1beta1_status() {
    let api = MachineApi::of(Flavor::ClusterApi);
    let mut world = Fake::new();
    let mut md = capi_deployment(&mut world, 1);
    md["metadata"]["annotations"] = json!({"sim.fleetscaler.io/instance-type": "m6i.4xlarge"});
    world.put(Resource::CapiMachineDeployments, md);
    let mut ctl = MachineController::new(api);
    ctl.set_capacity_faults(vec![fault("m6i.4xlarge", Some("us-east-1a"))]);
    let start = Instant::now();
    for _ in 0..2 {
        ctl.step(&mut world, &timing(), start);
    }
    ctl.step(&mut world, &timing(), start + Duration::from_secs(3));
    let machines = world.all(api.machines);
    assert_eq!(machines.len(), 1);
    let legacy = &machines[0]["status"]["deprecated"]["v1beta1"];
    assert_ne!(
        machines[0]["status"]["phase"], "Failed",
        "v1beta2 has no such phase"
    );
    assert_eq!(legacy["failureReason"], "CreateError");
    assert!(
        legacy["failureMessage"]
            .as_str()
            .unwrap()
            .contains("InsufficientInstanceCapacity: We currently do not have sufficient m6i.4xlarge capacity in the Availability Zone you requested (us-east-1a)."),
        "{legacy}"
    );
    assert!(world.all(Resource::Nodes).is_empty());
}
