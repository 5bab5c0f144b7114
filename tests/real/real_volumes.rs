//! Volumes (issue 24, point 1) on a real control plane: the real kube-scheduler's
//! VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits filters, the real
//! PersistentVolume controller, OpenShift's real MachineSet and nodelink controllers and
//! kwok. The project plays the cloud, the EBS CSI driver's node plugin (its zone label and
//! CSINode) and, for a `WaitForFirstConsumer` claim, its provisioner.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::real_support;
use crate::tempdir_support::TempDir;

use std::time::Duration;

use real_support::*;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(120);
const NS: &str = "openshift-machine-api";
const EBS_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// What the EBS CSI driver's node plugin does on every node it runs on: the node's zone
/// under the driver's own topology key, and a CSINode naming the driver with its limit of
/// attached volumes.
fn play_csi_node_plugin(cp: &ControlPlane, node: &Value, attach_limit: u32) {
    let name = name(node);
    let zone = node["metadata"]["labels"]["topology.kubernetes.io/zone"]
        .as_str()
        .unwrap()
        .to_string();
    cp.kubectl(&[
        "label",
        "node",
        &name,
        &format!("{EBS_ZONE}={zone}"),
        "--overwrite",
    ]);
    cp.apply(&format!(
        "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata:\n  name: {name}\nspec:\n  drivers:\n  - name: ebs.csi.aws.com\n    nodeID: {name}\n    allocatable: {{count: {attach_limit}}}\n    topologyKeys: [{EBS_ZONE}]\n"
    ));
}

const STORAGE_CLASS: &str = r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: gp3-csi
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
"#;

/// An EBS volume in `zone` bound to claim `claim` (access `mode`), and the claim.
fn bound_volume(claim: &str, zone: &str, mode: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-{claim}
spec:
  capacity: {{storage: 10Gi}}
  accessModes: [{mode}]
  storageClassName: gp3-csi
  persistentVolumeReclaimPolicy: Retain
  claimRef: {{namespace: default, name: {claim}}}
  csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-{claim}, fsType: ext4}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {{key: {EBS_ZONE}, operator: In, values: [{zone}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {claim}
  namespace: default
spec:
  accessModes: [{mode}]
  storageClassName: gp3-csi
  volumeName: pv-{claim}
  resources: {{requests: {{storage: 10Gi}}}}
"#
    )
}

/// A one-replica Deployment `app` whose pod mounts claim `claim`.
fn with_claim(app: &str, claim: &str) -> String {
    deployment(app, 1, "1").replacen(
        "      containers:\n",
        &format!(
            "      volumes:\n      - name: data\n        persistentVolumeClaim: {{claimName: {claim}}}\n      containers:\n"
        ),
        1,
    )
}

/// One control plane `name` with two 4-CPU OpenShift MachineSets, `zone-a` (one node, which
/// runs the EBS node plugin with `attach_limit`) in us-east-1a and `zone-b` at zero in
/// us-east-1b, and the hub autoscaling it. The turn on the control planes is held while
/// the returned planes live.
fn two_zones(name: &str, attach_limit: u32) -> (Vec<ControlPlane>, HubProcess, TempDir) {
    let cps = up(&[name], &["--provision-delay", "1s"]);
    let cp = &cps[0];
    cp.apply(&openshift_machine_set(name, "zone-a", 1, 1, 3, 4));
    cp.apply(
        &openshift_machine_set(name, "zone-b", 0, 0, 3, 4).replace("us-east-1a", "us-east-1b"),
    );
    let first = eventually(LONG, "the zone-a worker Ready", || {
        cp.items(&["nodes", "-l", "topology.kubernetes.io/zone=us-east-1a"])
            .into_iter()
            .find(is_ready)
    });
    play_csi_node_plugin(cp, &first, attach_limit);
    cp.apply(STORAGE_CLASS);
    let (hub, dir) = hub_for(cp, "");
    (cps, hub, dir)
}

fn replicas(cp: &ControlPlane, set: &str) -> Option<i64> {
    cp.get(&["machinesets.machine.openshift.io", "-n", NS, set])["spec"]["replicas"].as_i64()
}

fn claim_bound(cp: &ControlPlane, claim: &str) {
    eventually(LONG, &format!("claim {claim} bound"), || {
        (cp.get(&["pvc", "-n", "default", claim])["status"]["phase"] == "Bound").then_some(())
    });
}

/// A Ready node of `zone`, once there is one; the EBS node plugin then runs on it.
fn new_node_in(cp: &ControlPlane, zone: &str) -> Value {
    let node = eventually(LONG, &format!("a Ready node in {zone}"), || {
        cp.items(&[
            "nodes",
            "-l",
            &format!("topology.kubernetes.io/zone={zone}"),
        ])
        .into_iter()
        .find(|n| is_ready(n) && n["metadata"]["labels"][EBS_ZONE].is_null())
    });
    play_csi_node_plugin(cp, &node, 25);
    node
}

/// The pod of `app` running on `node`.
fn runs_on(cp: &ControlPlane, app: &str, node: &Value) {
    eventually(LONG, &format!("{app} running on {}", name(node)), || {
        let pods = cp.items(&["pods", "-n", "default", "-l", &format!("app={app}")]);
        let p = pods.first()?;
        (p["status"]["phase"] == "Running" && p["spec"]["nodeName"] == name(node).as_str())
            .then_some(())
    });
}

fn assert_volumes_simulated(plan: &Value) {
    let warnings = plan["warnings"].as_array().into_iter().flatten();
    let unsimulated: Vec<&Value> = warnings
        .filter(|w| w.as_str().unwrap_or_default().contains("not simulated"))
        .collect();
    assert!(unsimulated.is_empty(), "{unsimulated:?}");
}

/// A pod whose bound volume lives in us-east-1b makes the hub scale the us-east-1b group (at
/// zero: its template gets the EBS driver's zone key, seen on the cluster's running workers)
/// and never the us-east-1a group that has room for the rest of it; the real scheduler
/// binds it to the new us-east-1b node.
#[test]
fn a_pod_with_a_zonal_volume_gets_a_node_in_its_zone_only() {
    let (cps, hub, _dir) = two_zones("vol", 25);
    let cp = &cps[0];
    cp.apply(&bound_volume("data", "us-east-1b", "ReadWriteOnce"));
    claim_bound(cp, "data");
    cp.apply(&with_claim("db", "data"));
    let second = new_node_in(cp, "us-east-1b");
    runs_on(cp, "db", &second);
    assert_eq!(
        (replicas(cp, "zone-a"), replicas(cp, "zone-b")),
        (Some(1), Some(1))
    );
    assert_volumes_simulated(&hub.plan("vol").unwrap());
    let refused = refused_hub_requests(cp);
    assert!(refused.is_empty(), "refused: {refused:?}");
    hub.stop();
}

/// A `WaitForFirstConsumer` class whose `allowedTopologies` name us-east-1b, and a claim of
/// it not yet provisioned: the hub buys a us-east-1b node (the existing us-east-1a node has
/// room but is outside the class's topology); the real scheduler picks it for the claim,
/// the provisioner (played here) creates the volume there, and the pod runs.
#[test]
fn a_claim_waiting_for_its_first_consumer_gets_a_node_its_class_allows() {
    let (cps, hub, _dir) = two_zones("wffc", 25);
    let cp = &cps[0];
    cp.apply(&format!(
        "{}allowedTopologies:\n- matchLabelExpressions:\n  - {{key: {EBS_ZONE}, values: [us-east-1b]}}\n",
        STORAGE_CLASS.replace("gp3-csi", "gp3-1b")
    ));
    cp.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: scratch\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: gp3-1b\n  resources: {requests: {storage: 10Gi}}\n",
    );
    cp.apply(&with_claim("build", "scratch"));
    let node = new_node_in(cp, "us-east-1b");
    play_provisioner(cp, "scratch", "us-east-1b");
    claim_bound(cp, "scratch");
    runs_on(cp, "build", &node);
    assert_eq!(
        (replicas(cp, "zone-a"), replicas(cp, "zone-b")),
        (Some(1), Some(1))
    );
    assert_volumes_simulated(&hub.plan("wffc").unwrap());
    hub.stop();
}

/// What the EBS driver's external provisioner does once the scheduler has picked a node for
/// a `WaitForFirstConsumer` claim (`volume.kubernetes.io/selected-node`): a volume in that
/// node's zone, bound to the claim.
fn play_provisioner(cp: &ControlPlane, claim: &str, zone: &str) {
    let uid = eventually(LONG, &format!("a node selected for claim {claim}"), || {
        let pvc = cp.get(&["pvc", "-n", "default", claim]);
        let selected = &pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"];
        selected
            .is_string()
            .then(|| pvc["metadata"]["uid"].as_str().unwrap().to_string())
    });
    let pv = bound_volume(claim, zone, "ReadWriteOnce");
    let pv = pv.split("---").next().unwrap().replace(
        &format!("name: {claim}}}"),
        &format!("name: {claim}, uid: {uid}}}"),
    );
    cp.apply(&pv.replace("storageClassName: gp3-csi", "storageClassName: gp3-1b"));
}

/// A `ReadWriteOncePod` claim already used by a running pod: a second pod using it waits for
/// the claim, not for a node, and the hub says so and buys nothing.
#[test]
fn a_pod_whose_read_write_once_pod_claim_is_in_use_buys_nothing() {
    let (cps, hub, _dir) = two_zones("rwop", 25);
    let cp = &cps[0];
    cp.apply(&bound_volume("solo", "us-east-1a", "ReadWriteOncePod"));
    claim_bound(cp, "solo");
    cp.apply(&with_claim("owner", "solo"));
    eventually(LONG, "the owner running", || {
        (running_pods(cp, "owner") == 1).then_some(())
    });
    cp.apply(&with_claim("second", "solo"));
    // The hub's decision for the second pod, observed: no group can help, for this reason.
    let pod = eventually(LONG, "the hub explaining the second pod", || {
        let plan = hub.plan("rwop")?;
        let pods = plan["pendingPods"].as_array()?.clone();
        pods.into_iter().find(|p| {
            p["pod"]
                .as_str()
                .is_some_and(|n| n.starts_with("default/second-"))
        })
    });
    assert_eq!(pod["outcome"], "noScaleUp", "{pod:#}");
    assert!(pod.to_string().contains("VolumeClaimInUse"), "{pod:#}");
    assert_eq!(
        (replicas(cp, "zone-a"), replicas(cp, "zone-b")),
        (Some(1), Some(0))
    );
    hub.stop();
}

/// The us-east-1a node may attach one EBS volume (its CSINode) and already has one: a pod
/// with another us-east-1a volume cannot join it. The hub buys one us-east-1a node (the
/// template copies the group's node's CSINode, so a new node has room for one) and not a
/// us-east-1b one, where the volume cannot go.
#[test]
fn a_node_at_its_attach_limit_gets_a_new_node_in_the_volumes_zone() {
    let (cps, hub, _dir) = two_zones("attach", 1);
    let cp = &cps[0];
    cp.apply(&bound_volume("first", "us-east-1a", "ReadWriteOnce"));
    cp.apply(&bound_volume("next", "us-east-1a", "ReadWriteOnce"));
    claim_bound(cp, "first");
    claim_bound(cp, "next");
    cp.apply(&with_claim("a", "first"));
    eventually(LONG, "the first pod running", || {
        (running_pods(cp, "a") == 1).then_some(())
    });
    cp.apply(&with_claim("b", "next"));
    let node = new_node_in(cp, "us-east-1a");
    runs_on(cp, "b", &node);
    assert_eq!(
        (replicas(cp, "zone-a"), replicas(cp, "zone-b")),
        (Some(2), Some(0))
    );
    assert_volumes_simulated(&hub.plan("attach").unwrap());
    hub.stop();
}
