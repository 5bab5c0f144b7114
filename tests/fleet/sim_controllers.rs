#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The simulated controllers seen through the API: MachineSet and MachineDeployment scaling
//! through the scale subresource, delete-machine annotations, failure modes, scheduling,
//! binding, evictions honouring PodDisruptionBudgets, owners recreating evicted pods, and the
//! CSI driver registered on each Ready node (its zone label and CSINode, gone with the node).

use crate::sim_support;

use std::time::Duration;

use fleetscaler::sim::api::resources::Resource;
use fleetscaler::sim::fleet::FailureMode;
use fleetscaler::sim::settings::Flavor;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Error, ResourceExt};
use serde_json::{Value, json};
use sim_support::{client, eventually, fleet, machine_api};

const LIMIT: Duration = Duration::from_secs(15);

fn owned_by(m: &DynamicObject, set: &str) -> bool {
    m.owner_references().iter().any(|o| o.name == set)
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn machinesets_scale_up_to_ready_nodes_and_down_by_annotation() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let sets = machine_api(
        &c,
        "machine.openshift.io",
        "MachineSet",
        "machinesets",
        "openshift-machine-api",
    );
    let machines = machine_api(
        &c,
        "machine.openshift.io",
        "Machine",
        "machines",
        "openshift-machine-api",
    );
    let nodes: Api<Node> = Api::all(c.clone());
    let set = format!("{}-worker-us-east-1a", cluster.infra);

    let scale = sets
        .patch_scale(
            &set,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    let ready = eventually(LIMIT, "3 machines with Ready nodes", || async {
        let ms: Vec<DynamicObject> = machines
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|m| owned_by(m, &set))
            .collect();
        let mut names = Vec::new();
        for m in &ms {
            let node = m.data["status"]["nodeRef"]["name"].as_str()?;
            let n = nodes.get(node).await.ok()?;
            if !node_ready(&n) {
                return None;
            }
            // Nodes link back to their machine as OpenShift's do.
            assert_eq!(
                n.annotations()["machine.openshift.io/machine"],
                format!("openshift-machine-api/{}", m.name_any())
            );
            assert!(
                n.spec
                    .as_ref()?
                    .provider_id
                    .as_deref()?
                    .starts_with("aws:///us-east-1a/")
            );
            names.push(m.name_any());
        }
        (names.len() == 3).then_some(names)
    })
    .await;
    let status = sets.get_scale(&set).await.unwrap().status.unwrap();
    assert_eq!(status.replicas, 3);
    eventually(LIMIT, "readyReplicas 3", || async {
        let s = sets.get(&set).await.ok()?;
        (s.data["status"]["readyReplicas"] == 3).then_some(())
    })
    .await;

    // Scale down by one after marking the oldest machine: the marked one goes.
    let victim = ready[0].clone();
    machines
        .patch(&victim, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"machine.openshift.io/delete-machine": "2026-01-01T00:00:00Z"}}})))
        .await
        .unwrap();
    sets.patch_scale(
        &set,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    eventually(LIMIT, "the marked machine and its node gone", || async {
        let left: Vec<String> = machines
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|m| owned_by(m, &set))
            .map(ResourceExt::name_any)
            .collect();
        (left.len() == 2 && !left.contains(&victim)).then_some(())
    })
    .await;
    eventually(LIMIT, "3 + 3 + 2 - 1 nodes", || async {
        (nodes.list(&ListParams::default()).await.ok()?.items.len() == 7).then_some(())
    })
    .await;
    // Every node, new ones too, has the CSI driver's zone label and CSINode; the removed
    // node's CSINode went with it (eight nodes had one).
    let csi: Api<CSINode> = Api::all(c.clone());
    let csi_nodes = eventually(LIMIT, "one CSINode per node", || async {
        let list = csi.list(&ListParams::default()).await.ok()?.items;
        (list.len() == 7).then_some(list)
    })
    .await;
    for n in nodes.list(&ListParams::default()).await.unwrap().items {
        let labels = n.labels();
        assert_eq!(
            labels.get("topology.ebs.csi.aws.com/zone"),
            labels.get("topology.kubernetes.io/zone"),
            "{}",
            n.name_any()
        );
        let mine = csi_nodes.iter().find(|c| c.name_any() == n.name_any());
        let driver = &mine.expect("a CSINode per node").spec.drivers[0];
        assert_eq!(driver.name, "ebs.csi.aws.com");
        assert_eq!(driver.allocatable.as_ref().and_then(|a| a.count), Some(25));
    }
    let class: Api<StorageClass> = Api::all(c.clone());
    let default = class.get("gp3-csi").await.unwrap();
    assert_eq!(default.provisioner, "ebs.csi.aws.com");

    // A negative replica count is refused.
    let e = sets
        .patch_scale(
            &set,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Api(s) if s.code == 422));
    fleet.shutdown().await;
}

#[tokio::test]
async fn failure_modes_per_machineset() {
    let fleet = fleet(Flavor::OpenShift, false, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let sets = machine_api(
        &c,
        "machine.openshift.io",
        "MachineSet",
        "machinesets",
        "openshift-machine-api",
    );
    let machines = machine_api(
        &c,
        "machine.openshift.io",
        "Machine",
        "machines",
        "openshift-machine-api",
    );
    let nodes: Api<Node> = Api::all(c.clone());
    // The machines there before the scale-ups: the new ones are the others (a new machine
    // with a node that is not Ready is as `Running` as the old ones).
    let initial: Vec<String> = machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let cases = [
        ("us-east-1a", FailureMode::Fail),
        ("us-east-1b", FailureMode::NoNode),
        ("us-east-1c", FailureMode::NotReady),
    ];
    for (zone, mode) in cases {
        let set = format!("{}-worker-{zone}", cluster.infra);
        cluster.set_failure_mode(&set, Some(mode)).unwrap();
        sets.patch_scale(
            &set,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    }
    let newest = |set: String| {
        let machines = machines.clone();
        let initial = initial.clone();
        async move {
            machines
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|m| owned_by(m, &set) && !initial.contains(&m.name_any()))
        }
    };
    let failed = eventually(LIMIT, "a Failed machine", || async {
        let m = newest(format!("{}-worker-us-east-1a", cluster.infra)).await?;
        (m.data["status"]["phase"] == "Failed").then_some(m)
    })
    .await;
    assert!(
        failed.data["status"]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("InsufficientInstanceCapacity")
    );
    assert!(failed.data["status"]["nodeRef"].is_null());
    let provisioned = eventually(LIMIT, "a machine without node", || async {
        let m = newest(format!("{}-worker-us-east-1b", cluster.infra)).await?;
        (m.data["status"]["phase"] == "Provisioned").then_some(m)
    })
    .await;
    assert!(provisioned.data["spec"]["providerID"].is_string());
    let stuck_node = eventually(LIMIT, "a node that never turns ready", || async {
        let m = newest(format!("{}-worker-us-east-1c", cluster.infra)).await?;
        m.data["status"]["nodeRef"]["name"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    // Ten boot delays later it is still not Ready, and the other machine is still nodeless.
    tokio::time::sleep(cluster.cluster.timing.node_boot * 10).await;
    assert!(!node_ready(&nodes.get(&stuck_node).await.unwrap()));
    let again = machines.get(&provisioned.name_any()).await.unwrap();
    assert!(again.data["status"]["nodeRef"].is_null());
    fleet.shutdown().await;
}

#[tokio::test]
async fn cluster_api_machinedeployments_scale_through_their_machineset() {
    let fleet = fleet(Flavor::ClusterApi, false, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    let mds = machine_api(
        &c,
        "cluster.x-k8s.io",
        "MachineDeployment",
        "machinedeployments",
        "openshift-cluster-api",
    );
    let sets = machine_api(
        &c,
        "cluster.x-k8s.io",
        "MachineSet",
        "machinesets",
        "openshift-cluster-api",
    );
    let machines = machine_api(
        &c,
        "cluster.x-k8s.io",
        "Machine",
        "machines",
        "openshift-cluster-api",
    );
    let md = format!("{}-md-gpu-us-east-1a", cluster.infra);
    let ms = sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|s| owned_by(s, &md))
        .unwrap();
    assert_eq!(ms.data["spec"]["replicas"], 0);
    mds.patch_scale(
        &md,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    let machine = eventually(LIMIT, "a running GPU machine", || async {
        let m = machines
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|m| owned_by(m, &ms.name_any()))?;
        (m.data["status"]["phase"] == "Running").then_some(m)
    })
    .await;
    assert_eq!(machine.labels()["cluster.x-k8s.io/deployment-name"], md);
    // Cluster API v1beta2: nodeRef by name alone, readiness under `initialization`.
    assert_eq!(
        machine.types.as_ref().unwrap().api_version,
        "cluster.x-k8s.io/v1beta2"
    );
    assert_eq!(
        machine.data["status"]["nodeRef"].as_object().unwrap().len(),
        1
    );
    assert_eq!(
        machine.data["status"]["initialization"]["infrastructureProvisioned"],
        true
    );
    let nodes: Api<Node> = Api::all(c.clone());
    let node = nodes
        .get(machine.data["status"]["nodeRef"]["name"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(
        node.annotations()["cluster.x-k8s.io/machine"],
        machine.name_any()
    );
    assert_eq!(node.labels()["cluster-api/accelerator"], "nvidia-a10g");
    let gpu = node.status.unwrap().capacity.unwrap();
    assert_eq!(gpu["nvidia.com/gpu"].0, "1");
    eventually(LIMIT, "MachineDeployment status", || async {
        let d = mds.get(&md).await.ok()?;
        (d.data["status"]["readyReplicas"] == 1
            && d.data["status"]["upToDateReplicas"] == 1
            && d.data["status"]["phase"] == "Running")
            .then_some(())
    })
    .await;
    fleet.shutdown().await;
}

#[tokio::test]
async fn scheduling_binding_and_unschedulable_pods() {
    let fleet = fleet(Flavor::OpenShift, true, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    // The GPU trainer fits nowhere until the GPU group scales from zero.
    let ml: Api<Pod> = Api::namespaced(c.clone(), "ml");
    let pending = eventually(LIMIT, "an unschedulable GPU pod", || async {
        let p = ml
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()?;
        let cond = p
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "PodScheduled")?
            .clone();
        (cond.status == "False" && cond.reason.as_deref() == Some("Unschedulable"))
            .then_some((p, cond))
    })
    .await;
    let message = pending.1.message.unwrap();
    assert!(
        message.starts_with("0/6 nodes are available:") && message.contains("untolerated taint"),
        "{message}"
    );
    let sets = machine_api(
        &c,
        "machine.openshift.io",
        "MachineSet",
        "machinesets",
        "openshift-machine-api",
    );
    sets.patch_scale(
        &format!("{}-gpu-us-east-1a", cluster.infra),
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    eventually(LIMIT, "the GPU pod running", || async {
        let p = ml.get(&pending.0.name_any()).await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;

    // A pod for another scheduler is bound through the binding subresource, once.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "manual"}, "spec": {"schedulerName": "mine", "containers": [{"name": "c", "image": "i"}]}})).unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let node = Api::<Node>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items[0]
        .name_any();
    let bind = |node: String| {
        http::Request::builder()
            .method("POST")
            .uri("/api/v1/namespaces/default/pods/manual/binding")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "manual"}, "target": {"kind": "Node", "name": node}})).unwrap())
            .unwrap()
    };
    c.request::<Value>(bind(node.clone())).await.unwrap();
    assert_eq!(
        pods.get("manual").await.unwrap().spec.unwrap().node_name,
        Some(node.clone())
    );
    let e = c.request::<Value>(bind(node)).await.unwrap_err();
    assert!(matches!(e, Error::Api(s) if s.code == 409));
    // Status writes go through /status only.
    let p = pods
        .patch_status(
            "manual",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Succeeded"));
    let p = pods
        .patch(
            "manual",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Succeeded"));
    fleet.shutdown().await;
}

#[tokio::test]
async fn evictions_honour_disruption_budgets_and_owners_replace_pods() {
    let fleet = fleet(Flavor::OpenShift, true, 10_000).await;
    let cluster = fleet.cluster(1).unwrap();
    let c = client(cluster).await;
    // cart: maxUnavailable 1 — one eviction is allowed once every pod is healthy.
    let shop: Api<Pod> = Api::namespaced(c.clone(), "shop");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "shop");
    eventually(LIMIT, "cart budget allowing one disruption", || async {
        let s = pdbs.get("cart").await.ok()?.status?;
        (s.disruptions_allowed == 1).then_some(())
    })
    .await;
    let carts = shop
        .list(&ListParams::default().labels("app=cart"))
        .await
        .unwrap()
        .items;
    let victim = carts
        .iter()
        .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .unwrap()
        .name_any();
    shop.evict(&victim, &EvictParams::default()).await.unwrap();
    eventually(LIMIT, "the evicted pod replaced", || async {
        let now = shop
            .list(&ListParams::default().labels("app=cart"))
            .await
            .ok()?
            .items;
        let running = now
            .iter()
            .filter(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none()
            })
            .count();
        (!now.iter().any(|p| p.name_any() == victim) && running == carts.len()).then_some(())
    })
    .await;

    // A budget that allows nothing: eviction is refused with 429 and the budget named.
    let analytics: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "analytics");
    let strict: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "strict"}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "worker"}}}})).unwrap();
    analytics
        .create(&PostParams::default(), &strict)
        .await
        .unwrap();
    eventually(LIMIT, "strict budget status", || async {
        analytics.get("strict").await.ok()?.status.map(|_| ())
    })
    .await;
    let workers: Api<Pod> = Api::namespaced(c.clone(), "analytics");
    let running: Vec<Pod> = workers
        .list(&ListParams::default().fields("status.phase=Running"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let e = workers
        .evict(&running[0].name_any(), &EvictParams::default())
        .await
        .unwrap_err();
    match e {
        Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
            assert!(s.message.contains("disruption budget"));
        }
        other => panic!("expected 429, got {other:?}"),
    }
    assert!(
        cluster
            .get(Resource::Pods, "analytics", &running[0].name_any())
            .is_some()
    );
    fleet.shutdown().await;
}
