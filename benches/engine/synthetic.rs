//! A synthetic cluster for the engine benchmark, built as Kubernetes JSON and projected by
//! the same code as a real dump: 20 node groups (6 instance types in 3 zones, a GPU group
//! at zero, a tainted infra group), nodes about 85 % full (every tenth about 30 %, so
//! scale-down has candidates), a DaemonSet pod on every node,
//! and pending pods of several kinds (plain, zone-spread, hostname anti-affinity, pinned to
//! an instance type, GPU, below the priority cutoff), with zonal EBS volumes on a tenth of
//! the running workload pods and generic ephemeral volumes on a few pending ones, and 20
//! pending pods claiming a GPU through dynamic resource allocation (a DRA GPU group at zero).

use serde_json::{Value, json};

use fleetscaler::model::ClusterSnapshot;
use fleetscaler::model::dump::SnapshotBuilder;

pub struct Shape {
    pub nodes: usize,
    pub running_pods: usize,
    pub pending_pods: usize,
}

const NS: &str = "openshift-machine-api";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// (instance type, cores, memory GiB)
const TYPES: [(&str, u32, u32); 6] = [
    ("m5.xlarge", 4, 16),
    ("m5.2xlarge", 8, 32),
    ("m5.4xlarge", 16, 64),
    ("c5.2xlarge", 8, 16),
    ("c5.4xlarge", 16, 32),
    ("r5.2xlarge", 8, 64),
];

struct Group {
    name: String,
    zone: &'static str,
    itype: &'static str,
    cores: u32,
    mem: u32,
    nodes: Vec<String>,
}

pub fn build(shape: &Shape) -> ClusterSnapshot {
    let mut items: Vec<Value> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for (t, (itype, cores, mem)) in TYPES.iter().enumerate() {
        for zone in ZONES {
            groups.push(Group {
                name: format!("w{t}-{zone}"),
                zone,
                itype,
                cores: *cores,
                mem: *mem,
                nodes: Vec::new(),
            });
        }
    }
    let worker_nodes = shape.nodes - 4; // 3 control plane, 1 infra
    for i in 0..worker_nodes {
        let g = i % groups.len();
        let name = format!("{}-{}", groups[g].name, groups[g].nodes.len());
        groups[g].nodes.push(name);
    }
    for g in &groups {
        items.push(machineset(
            &g.name,
            g.nodes.len(),
            200,
            g.zone,
            g.itype,
            None,
            &[],
        ));
        for n in &g.nodes {
            items.push(node(n, g.zone, g.itype, g.cores, g.mem, None));
            items.push(machine(n, &g.name, g.zone));
        }
    }
    let gpu = [
        ("capacity.cluster-autoscaler.kubernetes.io/cpu", "8"),
        ("capacity.cluster-autoscaler.kubernetes.io/memory", "32Gi"),
        ("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "1"),
        (
            "capacity.cluster-autoscaler.kubernetes.io/gpu-type",
            "nvidia.com/gpu",
        ),
    ];
    items.push(machineset(
        "gpu-us-east-1a",
        0,
        20,
        "us-east-1a",
        "g4dn.2xlarge",
        Some(("nvidia.com/gpu", "true")),
        &gpu,
    ));
    items.push(machineset(
        "infra-us-east-1a",
        1,
        3,
        "us-east-1a",
        "m5.2xlarge",
        Some(("node-role.kubernetes.io/infra", "")),
        &[],
    ));
    items.push(node(
        "infra-0",
        "us-east-1a",
        "m5.2xlarge",
        8,
        32,
        Some("node-role.kubernetes.io/infra"),
    ));
    items.push(machine("infra-0", "infra-us-east-1a", "us-east-1a"));
    for (i, zone) in ZONES.iter().enumerate() {
        items.push(node(
            &format!("master-{i}"),
            zone,
            "m5.2xlarge",
            8,
            32,
            Some("node-role.kubernetes.io/master"),
        ));
    }
    let mut all_nodes: Vec<(String, u32)> = groups
        .iter()
        .flat_map(|g| g.nodes.iter().map(|n| (n.clone(), g.cores)))
        .collect();
    all_nodes.extend((0..3).map(|i| (format!("master-{i}"), 8)));
    all_nodes.push(("infra-0".to_string(), 8));
    running_pods(&mut items, &all_nodes, shape.running_pods);
    pending_pods(&mut items, shape.pending_pods);
    volumes(&mut items);
    // ENGINE_BENCH_DRA=0 leaves the DRA pods out, to see what they cost.
    if std::env::var("ENGINE_BENCH_DRA").as_deref() != Ok("0") {
        dynamic_resources(&mut items);
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut b = SnapshotBuilder::default();
    b.add_text(&list.to_string(), "synthetic")
        .expect("the synthetic cluster is valid");
    b.finish().0
}

fn running_pods(items: &mut Vec<Value>, nodes: &[(String, u32)], total: usize) {
    // One DaemonSet pod per node; the rest spread evenly, filling each node to about 85 %,
    // except every tenth node, filled to about 30 %: scale-down candidates.
    for (n, _) in nodes {
        items.push(pod(
            &format!("node-exporter-{n}"),
            "openshift-monitoring",
            "100m",
            "128Mi",
            Some(n),
            ("DaemonSet", "node-exporter"),
            "node-exporter",
            json!({"tolerations": [{"operator": "Exists"}]}),
        ));
    }
    let per_node = (total - nodes.len()) / nodes.len();
    let mut k = 0;
    for (i, (n, cores)) in nodes.iter().enumerate() {
        let fill = if i % 10 == 5 { 30 } else { 85 };
        let milli = cores * 1000 * fill / 100 / per_node as u32;
        let app = format!("app-{}", k % 100);
        for j in 0..per_node {
            items.push(pod(
                &format!("{app}-{n}-{j}"),
                "workloads",
                &format!("{milli}m"),
                "256Mi",
                Some(n),
                ("ReplicaSet", &app),
                &app,
                json!({}),
            ));
            k += 1;
        }
    }
}

fn pending_pods(items: &mut Vec<Value>, total: usize) {
    let per_kind = total / 40;
    for d in 0..40 {
        let app = format!("pending-{d}");
        let (cpu, extra) = match d % 8 {
            0 => (
                "2",
                json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                     "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}]}),
            ),
            1 => (
                "1",
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
            ),
            2 => (
                "3",
                json!({"nodeSelector": {"node.kubernetes.io/instance-type": TYPES[d % TYPES.len()].0}}),
            ),
            3 => (
                "2",
                json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}),
            ),
            4 => ("4", json!({"priority": -100})),
            _ => (["500m", "1", "1500m", "6"][d % 4], json!({})),
        };
        for i in 0..per_kind {
            let mut p = pod(
                &format!("{app}-{i}"),
                "pending",
                cpu,
                "1Gi",
                None,
                ("ReplicaSet", &app),
                &app,
                extra.clone(),
            );
            if d % 8 == 3 {
                p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = json!("1");
            }
            items.push(p);
        }
    }
}

pub(crate) fn machineset(
    name: &str,
    replicas: usize,
    max: usize,
    zone: &str,
    itype: &str,
    taint: Option<(&str, &str)>,
    annotations: &[(&str, &str)],
) -> Value {
    let mut ann = serde_json::Map::new();
    ann.insert(
        "machine.openshift.io/cluster-api-autoscaler-node-group-min-size".into(),
        json!("0"),
    );
    ann.insert(
        "machine.openshift.io/cluster-api-autoscaler-node-group-max-size".into(),
        json!(max.to_string()),
    );
    for (k, v) in annotations {
        ann.insert(k.to_string(), json!(v));
    }
    let taints: Vec<Value> = taint
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v, "effect": "NoSchedule"}))
        .collect();
    json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": NS, "annotations": ann},
        "spec": {"replicas": replicas, "template": {"spec": {"taints": taints, "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
            "providerSpec": {"value": {"instanceType": itype, "placement": {"availabilityZone": zone}}}}}}})
}

const EBS: &str = "ebs.csi.aws.com";
const EBS_ZONE: &str = "topology.ebs.csi.aws.com/zone";

/// Zonal EBS volumes on a tenth of the running workload pods (bound, pinned to their node's
/// zone by the driver's topology key), a CSINode per worker (attach limit 25), and
/// generic ephemeral volumes of a `WaitForFirstConsumer` class on a few pending pods.
fn volumes(items: &mut Vec<Value>) {
    let mut extra = vec![
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "gp3-csi", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"}),
    ];
    let mut workloads = 0;
    let mut pending = 0;
    for item in items.iter_mut() {
        if item["kind"] == "Node"
            && item["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with('w'))
        {
            let zone = item["metadata"]["labels"]["topology.kubernetes.io/zone"].clone();
            item["metadata"]["labels"][EBS_ZONE] = zone;
            let name = item["metadata"]["name"].clone();
            extra.push(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
                "spec": {"drivers": [{"name": EBS, "nodeID": name, "allocatable": {"count": 25}, "topologyKeys": [EBS_ZONE]}]}}));
        }
        if item["kind"] != "Pod" {
            continue;
        }
        let ns = item["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = item["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if ns == "workloads" {
            workloads += 1;
            let Some(zone) = item["spec"]["nodeName"].as_str().and_then(zone_of) else {
                continue;
            };
            if workloads % 10 != 0 {
                continue;
            }
            item["spec"]["volumes"] =
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": name}}]);
            extra.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"storageClassName": "gp3-csi", "volumeName": format!("pv-{name}"), "accessModes": ["ReadWriteOnce"]},
                "status": {"phase": "Bound"}}));
            extra.push(json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": format!("pv-{name}")},
                "spec": {"csi": {"driver": EBS, "volumeHandle": format!("vol-{name}")}, "storageClassName": "gp3-csi",
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": EBS_ZONE, "operator": "In", "values": [zone]}]}]}}},
                "status": {"phase": "Bound"}}));
        } else if ns == "pending" && name.starts_with("pending-5-") && pending < 20 {
            pending += 1;
            item["spec"]["volumes"] = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "storageClassName": "gp3-csi", "accessModes": ["ReadWriteOnce"]}}}}]);
        }
    }
    items.extend(extra);
}

/// A GPU group at zero whose nodes run a DRA driver with two GPUs each (upstream's Cluster
/// API annotations), its DeviceClass, and 20 pending pods that each claim one GPU through a
/// ResourceClaimTemplate: only that group can take them.
fn dynamic_resources(items: &mut Vec<Value>) {
    let annotations = [
        ("capacity.cluster-autoscaler.kubernetes.io/cpu", "8"),
        ("capacity.cluster-autoscaler.kubernetes.io/memory", "32Gi"),
        ("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "2"),
        (
            "capacity.cluster-autoscaler.kubernetes.io/dra-driver",
            "gpu.nvidia.com",
        ),
    ];
    items.push(machineset(
        "dra-us-east-1b",
        0,
        20,
        "us-east-1b",
        "g5.2xlarge",
        None,
        &annotations,
    ));
    items.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.nvidia.com\""}}]}}),
    );
    items.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "pending"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}}));
    let claiming = items.iter_mut().filter(|i| {
        i["kind"] == "Pod"
            && i["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("pending-6-"))
    });
    for pod in claiming.take(20) {
        pod["spec"]["resourceClaims"] =
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
        pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    }
}

/// The zone in a worker's name (`w{type}-{zone}-{n}`).
fn zone_of(node: &str) -> Option<&'static str> {
    ZONES.into_iter().find(|z| node.contains(z))
}

pub(crate) fn machine(node: &str, ms: &str, zone: &str) -> Value {
    json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": format!("{node}-machine"), "namespace": NS,
            "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": ms, "uid": format!("uid-{ms}"), "controller": true}]},
        "spec": {"providerID": format!("aws:///{zone}/i-{node}")},
        "status": {"phase": "Running", "nodeRef": {"kind": "Node", "name": node}}})
}

pub(crate) fn node(
    name: &str,
    zone: &str,
    itype: &str,
    cores: u32,
    mem: u32,
    taint: Option<&str>,
) -> Value {
    let cap = json!({"cpu": cores.to_string(), "memory": format!("{mem}Gi"), "pods": "250"});
    let taints: Vec<Value> = taint
        .iter()
        .map(|k| json!({"key": k, "effect": "NoSchedule"}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": itype, "kubernetes.io/os": "linux"}},
        "spec": {"providerID": format!("aws:///{zone}/i-{name}"), "taints": taints},
        "status": {"capacity": cap, "allocatable": cap, "conditions": [{"type": "Ready", "status": "True"}]}})
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn pod(
    name: &str,
    ns: &str,
    cpu: &str,
    mem: &str,
    node: Option<&str>,
    owner: (&str, &str),
    app: &str,
    extra: Value,
) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    let status = match node {
        Some(n) => {
            spec["nodeName"] = json!(n);
            json!({"phase": "Running"})
        }
        None => {
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
        }
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner.0, "name": owner.1, "uid": format!("uid-{}", owner.1), "controller": true}]},
        "spec": spec, "status": status})
}
