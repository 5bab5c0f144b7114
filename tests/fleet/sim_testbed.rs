#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `fleetscaler sim machines`, the test-bed machine controller, against the simulated fleet
//! with the fleet's own machine controller off: the same logic over real HTTP requests, with
//! the API server's status-subresource semantics, injected errors and SIGTERM.

use crate::sim_support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fleetscaler::sim::faults::Faults;
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use sim_support::{client, eventually, machine_api};

const LIMIT: Duration = Duration::from_secs(20);

/// `fleetscaler sim machines` for one context of `kubeconfig`.
fn controller(kubeconfig: &std::path::Path, context: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(["sim", "machines", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--context", context, "--provision-delay", "100ms"])
        .args(["--deprovision-delay", "50ms", "--tick", "30ms"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    let status = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "sim machines exited with {exit:?}");
}

async fn running(machines: &Api<DynamicObject>, owner: &str) -> Vec<DynamicObject> {
    machines
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.owner_references().iter().any(|o| o.name == owner))
        .filter(|m| m.data["status"]["phase"] == "Running")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_machines_runs_both_apis_over_http() {
    let fleet = Fleet::start(FleetSettings {
        clusters: 2,
        mixed_flavors: true,
        shape: Shape {
            nodes_per_group: 1,
            workloads: false,
            machine_controller: false,
            ..Shape::default()
        },
        timing: Timing::fast(),
        ..FleetSettings::default()
    })
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("fleetscaler-testbed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    fleet.write_kubeconfig(&kc).unwrap();
    let ocp = controller(&kc, "sim-1");
    let capi = controller(&kc, "sim-2");

    // Cluster API (sim-2): a MachineDeployment from 0 to 2 becomes two v1beta2 Machines
    // with Nodes that kwok would run.
    let sim2 = fleet.cluster(2).unwrap();
    let c2 = client(sim2).await;
    let ns = "openshift-cluster-api";
    let mds = machine_api(
        &c2,
        "cluster.x-k8s.io",
        "MachineDeployment",
        "machinedeployments",
        ns,
    );
    let sets = machine_api(&c2, "cluster.x-k8s.io", "MachineSet", "machinesets", ns);
    let machines = machine_api(&c2, "cluster.x-k8s.io", "Machine", "machines", ns);
    let md = format!("{}-md-gpu-us-east-1a", sim2.infra);
    let scale = |n: i64| Patch::Merge(json!({"spec": {"replicas": n}}));
    mds.patch_scale(&md, &PatchParams::default(), &scale(2))
        .await
        .unwrap();
    let ms = sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|s| s.owner_references().iter().any(|o| o.name == md))
        .unwrap()
        .name_any();
    let up = eventually(LIMIT, "2 running GPU machines", || async {
        let ms = running(&machines, &ms).await;
        (ms.len() == 2).then_some(ms)
    })
    .await;
    let nodes: Api<Node> = Api::all(c2.clone());
    for m in &up {
        assert_eq!(m.data["status"]["nodeRef"].as_object().unwrap().len(), 1);
        let node = nodes
            .get(m.data["status"]["nodeRef"]["name"].as_str().unwrap())
            .await
            .unwrap();
        assert_eq!(node.annotations()["kwok.x-k8s.io/node"], "fake");
        assert_eq!(node.annotations()["cluster.x-k8s.io/machine"], m.name_any());
    }
    eventually(LIMIT, "the MachineDeployment's status", || async {
        let d = mds.get(&md).await.ok()?;
        (d.data["status"]["readyReplicas"] == 2 && d.data["status"]["upToDateReplicas"] == 2)
            .then_some(())
    })
    .await;
    // Down to 1, the marked machine first; its node goes with it.
    let victim = up[1].name_any();
    let victim_node = up[1].data["status"]["nodeRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let mark = json!({"metadata": {"annotations": {"cluster.x-k8s.io/delete-machine": "yes"}}});
    machines
        .patch(&victim, &PatchParams::default(), &Patch::Merge(mark))
        .await
        .unwrap();
    mds.patch_scale(&md, &PatchParams::default(), &scale(1))
        .await
        .unwrap();
    eventually(LIMIT, "the marked machine and its node gone", || async {
        let gone = machines.get_opt(&victim).await.ok()?.is_none()
            && nodes.get_opt(&victim_node).await.ok()?.is_none();
        let left = running(&machines, &ms).await;
        (gone && left.len() == 1 && left[0].name_any() == up[0].name_any()).then_some(())
    })
    .await;

    // OpenShift (sim-1), with a fifth of the requests failing: errors are logged and the
    // next passes finish the work.
    let sim1 = fleet.cluster(1).unwrap();
    let c1 = client(sim1).await;
    let ns = "openshift-machine-api";
    let sets = machine_api(&c1, "machine.openshift.io", "MachineSet", "machinesets", ns);
    let machines = machine_api(&c1, "machine.openshift.io", "Machine", "machines", ns);
    let set = format!("{}-worker-us-east-1a", sim1.infra);
    sets.patch_scale(&set, &PatchParams::default(), &scale(3))
        .await
        .unwrap();
    sim1.faults().set(Faults {
        error_rate: 0.2,
        error_code: 500,
        ..Faults::default()
    });
    let up = eventually(LIMIT, "3 running machines despite errors", || async {
        let ms = running(&machines, &set).await;
        (ms.len() == 3).then_some(ms)
    })
    .await;
    sim1.faults().clear();
    for m in &up {
        assert_eq!(m.data["status"]["nodeRef"]["kind"], "Node");
        assert!(
            m.data["spec"]["providerID"]
                .as_str()
                .unwrap()
                .starts_with("aws:///us-east-1a/")
        );
    }
    eventually(LIMIT, "readyReplicas 3", || async {
        let s = sets.get(&set).await.ok()?;
        (s.data["status"]["readyReplicas"] == 3).then_some(())
    })
    .await;

    stop(ocp);
    stop(capi);
    fleet.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
