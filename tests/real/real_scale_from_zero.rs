//! Scale from zero on a real apiserver, with no capacity annotations: the hub finds the
//! Cluster API infrastructure template's kind through discovery (the test bed's cloud
//! serves AWSMachineTemplates, as Cluster API's AWS provider does), reads its
//! `status.capacity` through the ServiceAccount bound to docs/managed-cluster-rbac.yaml,
//! and scales the group 0 -> 1 for a pod nothing else can take; Cluster API's real
//! controllers make the Machine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;

use std::time::Duration;

use real_support::*;

const LONG: Duration = Duration::from_secs(120);

#[test]
fn a_group_at_zero_scales_from_its_infrastructure_templates_capacity() {
    let cps = up(&["zero"], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    let group = capi_machine_deployment("zero", "workers", 0, 0, 2, 8)
        .lines()
        .filter(|l| !l.contains("capacity.cluster-autoscaler.kubernetes.io/"))
        .collect::<Vec<_>>()
        .join("\n");
    cp.apply(&group);
    // As the provider does: capacity in the template's status, through its subresource.
    cp.kubectl(&[
        "patch",
        "awsmachinetemplate",
        "workers",
        "-n",
        "openshift-cluster-api",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"nodeInfo":{"architecture":"amd64","operatingSystem":"linux"}}}"#,
    ]);

    let (hub, _dir) = hub_for(cp, "");
    let id = "MachineDeployment.cluster.x-k8s.io/openshift-cluster-api/workers";
    eventually(LONG, "the group modelled on its template", || {
        let plan = hub.api("/api/v1/clusters/zero");
        let group = plan["groups"].as_array()?.iter().find(|g| g["id"] == id)?;
        group["eligible"].as_bool()?.then_some(())?;
        let plan = http_get(&hub.addr, "/api/v1/clusters/zero/plan")?;
        let plan: serde_json::Value = serde_json::from_str(&plan).ok()?;
        let group = plan["nodeGroups"]
            .as_array()?
            .iter()
            .find(|g| g["id"] == id)?
            .clone();
        (group["template"] == "infrastructureTemplate").then_some(())
    });

    cp.apply(&deployment("big", 1, "6"));
    eventually(LONG, "the pod running on the group's first node", || {
        (running_pods(cp, "big") == 1).then_some(())
    });
    let replicas = cp.get(&[
        "machinedeployment",
        "-n",
        "openshift-cluster-api",
        "workers",
    ])["spec"]["replicas"]
        .as_i64();
    assert_eq!(replicas, Some(1));
    assert!(
        audited(cp, "awsmachinetemplates", None, 200) >= 1,
        "the hub never read the template"
    );
    let refused = refused_hub_requests(cp);
    assert!(refused.is_empty(), "refused: {refused:?}");
    hub.stop();
}
