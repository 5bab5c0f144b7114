//! The initial shape of a simulated cluster, as an installer leaves an OpenShift cluster:
//! 3 control-plane nodes (with their Machines and mirror pods), worker groups in three zones
//! with autoscaler min/max annotations, a GPU group at zero replicas with scale-from-zero
//! capacity annotations, a ClusterAutoscaler `default` (and MachineAutoscalers on OpenShift),
//! the EBS CSI driver's default StorageClass and its CSINode on every node (`csi`), and the
//! workloads already running. The Cluster API flavour has v1beta2
//! MachineDeployments (each owning a MachineSet) in `openshift-cluster-api` instead of
//! MachineSets. Machines and Nodes are made by the machine controller's own code.

use serde_json::{Value, json};

use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::controllers::machines::{
    Launch, SimWorld, create_machine, machine_set_for, provision, provision_as,
};
use crate::csi;
use crate::machine_api::{CAPACITY_PREFIX, MachineApi, Profile};
use crate::registry::{State, now_rfc3339};
use crate::settings::{Flavor, Shape};
use crate::store::Key;
use crate::workload::{self, DaemonSetSpec, Placement, ReplicaSetSpec};

const REGION: &str = "us-east-1";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// What the controllers need to carry on from the initial shape.
#[derive(Debug)]
pub struct Built {
    /// The cluster's infrastructure name (`<cluster>-<suffix>`).
    pub infra: String,
    pub replica_sets: Vec<ReplicaSetSpec>,
    pub daemon_sets: Vec<DaemonSetSpec>,
}

/// Populates an empty `state` with the initial shape of `cluster`.
pub fn build(
    state: &mut State,
    cluster: &str,
    flavor: Flavor,
    shape: &Shape,
) -> Result<Built, ApiError> {
    let api = MachineApi::of(flavor);
    let infra = format!("{cluster}-{}", state.rng.name_suffix());
    let mut namespaces = vec![
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "openshift-etcd",
        "openshift-kube-apiserver",
        // Where the autoscaler's status ConfigMap and priority ConfigMap live on OpenShift,
        // with either Machine API.
        "openshift-machine-api",
    ];
    if !namespaces.contains(&api.namespace) {
        namespaces.push(api.namespace);
    }
    namespaces.extend(workload::NAMESPACES);
    for ns in namespaces {
        state.seed(Resource::Namespaces, "", json!({"metadata": {"name": ns}}))?;
    }
    state.seed(Resource::StorageClasses, "", csi::default_class())?;
    let mut nodes = control_plane(state, &api, &infra)?;
    let max = shape
        .workers
        .map_or(shape.nodes_per_group * 3, |w| w.1)
        .max(3);
    for (zone, replicas) in ZONES.into_iter().zip(zone_sizes(state, shape)) {
        let group = worker_group(&api, &infra, zone, replicas, replicas.min(1), max, false);
        nodes.extend(create_group(state, &api, group)?);
    }
    let gpu = worker_group(&api, &infra, ZONES[0], 0, 0, 3, true);
    create_group(state, &api, gpu)?;
    cluster_autoscaler(state, max * 3 + 3 + 3)?;
    let workers: Vec<(String, String)> = nodes
        .iter()
        .filter(|(_, _, worker)| *worker)
        .map(|(n, ip, _)| (n.clone(), ip.clone()))
        .collect();
    let (mut replica_sets, daemon_sets) = workload::catalog(
        &mut state.rng,
        workers.len().max(1),
        shape.pods_per_node,
        7500,
        31 << 30,
        shape.cpu_fill,
    );
    if shape.workloads {
        serve_replica_sets(state, &mut replica_sets)?;
        populate(state, &nodes, &workers, &replica_sets, &daemon_sets)?;
    }
    Ok(Built {
        infra,
        replica_sets,
        daemon_sets,
    })
}

/// Workers of each zonal group at start: `nodes_per_group` each, or the cluster's draw
/// within `workers` dealt over the zones in turn.
fn zone_sizes(state: &mut State, shape: &Shape) -> [usize; 3] {
    let Some((low, high)) = shape.workers else {
        return [shape.nodes_per_group; 3];
    };
    let spread = high.saturating_sub(low) as u64 + 1;
    let total = low + state.rng.below(spread) as usize;
    std::array::from_fn(|zone| total / 3 + usize::from(zone < total % 3))
}

/// The control plane: three Machines without a MachineSet and their tainted nodes.
fn control_plane(
    state: &mut State,
    api: &MachineApi,
    infra: &str,
) -> Result<Vec<(String, String, bool)>, ApiError> {
    let mut roles = serde_json::Map::new();
    roles.insert("node-role.kubernetes.io/master".into(), json!(""));
    roles.insert("node-role.kubernetes.io/control-plane".into(), json!(""));
    let mut nodes = Vec::new();
    for (i, zone) in ZONES.iter().enumerate() {
        let profile = Profile {
            instance_type: "m6i.xlarge".into(),
            region: REGION.into(),
            zone: (*zone).into(),
            cpu_milli: 4000,
            memory_bytes: 16 << 30,
            gpus: 0,
            gpu_type: String::new(),
            max_pods: 250,
            dra_driver: None,
            labels: roles.clone(),
            taints: vec![json!({"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"})],
        };
        let name = format!("{infra}-master-{i}");
        let (labels, owner) = match api.flavor {
            Flavor::OpenShift => (
                json!({api.cluster_label: infra, "machine.openshift.io/cluster-api-machine-role": "master", "machine.openshift.io/cluster-api-machine-type": "master"}),
                json!([]),
            ),
            Flavor::ClusterApi => (
                json!({api.cluster_label: infra, "cluster.x-k8s.io/control-plane": ""}),
                json!([{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "name": format!("{infra}-control-plane"), "uid": state.rng.uuid(), "controller": true}]),
            ),
        };
        let machine = json!({"metadata": {"name": name, "labels": labels, "ownerReferences": owner, "finalizers": [api.finalizer]},
                             "spec": control_plane_spec(api, infra, &name), "status": {"phase": "Provisioning"}});
        state.seed(api.machines, api.namespace, machine)?;
        let key = Key::new(api.namespace, &name);
        let made = provision_as(
            &mut SimWorld::new(state, None),
            api,
            infra,
            &key,
            &Launch::PLAIN,
            &profile,
        )?;
        if let Some(node) = made {
            // The control plane is up before anything else: Ready from the start.
            let stamp = now_rfc3339();
            csi::node_ready(state, &node, &stamp)?;
            nodes.push((node, String::new(), false));
        }
    }
    Ok(nodes)
}

/// A control-plane Machine's spec: empty on OpenShift; what Cluster API v1beta2 requires
/// (cluster, bootstrap data, infrastructure object) otherwise.
fn control_plane_spec(api: &MachineApi, infra: &str, name: &str) -> Value {
    match api.flavor {
        Flavor::OpenShift => json!({}),
        Flavor::ClusterApi => json!({"clusterName": infra, "version": "v1.34.0",
            "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachine", "name": name}}),
    }
}

/// A worker group's MachineSet (OpenShift) or MachineDeployment (Cluster API).
fn worker_group(
    api: &MachineApi,
    infra: &str,
    zone: &str,
    replicas: usize,
    min: usize,
    max: usize,
    gpu: bool,
) -> Value {
    let kind = if gpu { "gpu" } else { "worker" };
    let instance_type = if gpu { "g5.2xlarge" } else { "m6i.2xlarge" };
    let mut annotations = json!({
        api.key("cluster-api-autoscaler-node-group-min-size"): min.to_string(),
        api.key("cluster-api-autoscaler-node-group-max-size"): max.to_string(),
        format!("{CAPACITY_PREFIX}cpu"): "8", format!("{CAPACITY_PREFIX}memory"): "32Gi",
        format!("{CAPACITY_PREFIX}maxPods"): "250",
    });
    let mut node_labels = json!({"node-role.kubernetes.io/worker": ""});
    let mut taints = json!([]);
    if gpu {
        annotations[format!("{CAPACITY_PREFIX}gpu-count")] = json!("1");
        annotations[format!("{CAPACITY_PREFIX}gpu-type")] = json!("nvidia.com/gpu");
        annotations[format!("{CAPACITY_PREFIX}labels")] =
            json!("cluster-api/accelerator=nvidia-a10g");
        node_labels["cluster-api/accelerator"] = json!("nvidia-a10g");
        taints = json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    }
    match api.flavor {
        Flavor::OpenShift => {
            let name = format!("{infra}-{kind}-{zone}");
            let labels = json!({api.cluster_label: infra, "machine.openshift.io/cluster-api-machine-role": "worker",
                                "machine.openshift.io/cluster-api-machine-type": "worker", api.set_label: name});
            json!({"apiVersion": api.api_version(), "kind": "MachineSet",
                "metadata": {"name": name, "namespace": api.namespace, "labels": {api.cluster_label: infra}, "annotations": annotations},
                "spec": {"replicas": replicas,
                    "selector": {"matchLabels": {api.cluster_label: infra, api.set_label: name}},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"metadata": {"labels": node_labels}, "taints": taints,
                            "providerSpec": {"value": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
                                "instanceType": instance_type, "placement": {"availabilityZone": zone, "region": REGION}}}}}}})
        }
        Flavor::ClusterApi => {
            let name = format!("{infra}-md-{kind}-{zone}");
            annotations["sim.fleetscaler.io/instance-type"] = json!(instance_type);
            let mut template_labels = json!({api.cluster_label: infra});
            for (k, v) in node_labels.as_object().into_iter().flatten() {
                template_labels[k] = v.clone();
            }
            let mut spec = json!({"clusterName": infra, "version": "v1.34.0", "failureDomain": zone,
                "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": name}});
            // v1beta2 taints say whether they are kept on the node after it joins, and the
            // list, when present, must not be empty.
            if let Some(ts) = taints.as_array_mut().filter(|ts| !ts.is_empty()) {
                for t in ts.iter_mut() {
                    t["propagation"] = json!("Always");
                }
                spec["taints"] = taints;
            }
            json!({"apiVersion": api.api_version(), "kind": "MachineDeployment",
                "metadata": {"name": name, "namespace": api.namespace, "labels": {api.cluster_label: infra}, "annotations": annotations},
                "spec": {"clusterName": infra, "replicas": replicas,
                    "selector": {"matchLabels": {api.cluster_label: infra}},
                    "template": {"metadata": {"labels": template_labels}, "spec": spec}}})
        }
    }
}

/// Creates a group and its running machines and nodes; returns (node, ip, is worker).
fn create_group(
    state: &mut State,
    api: &MachineApi,
    group: Value,
) -> Result<Vec<(String, String, bool)>, ApiError> {
    let replicas = group["spec"]["replicas"].as_u64().unwrap_or(0);
    let set = match api.flavor {
        Flavor::OpenShift => {
            let set = state.seed(api.machine_sets, api.namespace, group)?.value();
            let name = set["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            state.seed(Resource::MachineAutoscalers, api.namespace, json!({"metadata": {"name": name},
                "spec": {"minReplicas": set["metadata"]["annotations"][api.key("cluster-api-autoscaler-node-group-min-size")].as_str().and_then(|s| s.parse::<i64>().ok()),
                         "maxReplicas": set["metadata"]["annotations"][api.key("cluster-api-autoscaler-node-group-max-size")].as_str().and_then(|s| s.parse::<i64>().ok()),
                         "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": name}}}))?;
            set
        }
        Flavor::ClusterApi => {
            let md = state
                .seed(Resource::CapiMachineDeployments, api.namespace, group)?
                .value();
            state.seed(
                Resource::AwsMachineTemplates,
                api.namespace,
                machine_template(&md),
            )?;
            let set = machine_set_for(&md, api, &mut state.rng);
            state.seed(api.machine_sets, api.namespace, set)?.value()
        }
    };
    let mut nodes = Vec::new();
    let mut world = SimWorld::new(state, None);
    for _ in 0..replicas {
        let key = create_machine(&mut world, api, &set)?;
        if let Some(node) = provision(&mut world, api, &key, &Launch::PLAIN)? {
            nodes.push((node, String::new(), true));
        }
    }
    // The initial machines are long running: their nodes are Ready from the start.
    let stamp = now_rfc3339();
    for (node, ip, _) in &mut nodes {
        let n = csi::node_ready(state, node, &stamp)?.value();
        *ip = n["status"]["addresses"][0]["address"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    Ok(nodes)
}

/// The AWSMachineTemplate a MachineDeployment's machines are made from, with the capacity
/// Cluster API's AWS provider publishes for scale from zero (the same as the group's
/// capacity annotations, which win where both are set).
fn machine_template(md: &Value) -> Value {
    let annotations = &md["metadata"]["annotations"];
    let capacity = |key: &str| annotations[format!("{CAPACITY_PREFIX}{key}")].clone();
    let mut status = json!({"capacity": {"cpu": capacity("cpu"), "memory": capacity("memory"),
        "pods": capacity("maxPods")}, "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}});
    if let Some(gpu_type) = capacity("gpu-type").as_str() {
        status["capacity"][gpu_type] = capacity("gpu-count");
    }
    let instance_type = annotations["sim.fleetscaler.io/instance-type"].clone();
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate",
        "metadata": {"name": md["metadata"]["name"]},
        "spec": {"template": {"spec": {"instanceType": instance_type}}},
        "status": status})
}

fn cluster_autoscaler(state: &mut State, max_nodes: usize) -> Result<(), ApiError> {
    state.seed(Resource::ClusterAutoscalers, "", json!({"metadata": {"name": "default"}, "spec": {
        "podPriorityThreshold": -10,
        "resourceLimits": {"maxNodesTotal": max_nodes, "cores": {"min": 8, "max": max_nodes * 8},
                           "memory": {"min": 4, "max": max_nodes * 32}, "gpus": [{"type": "nvidia.com/gpu", "min": 0, "max": 4}]},
        "scaleDown": {"enabled": true, "delayAfterAdd": "10m", "delayAfterDelete": "5m", "delayAfterFailure": "30s",
                      "unneededTime": "5m", "utilizationThreshold": "0.4"},
        "balanceSimilarNodeGroups": true, "skipNodesWithLocalStorage": true, "expanders": ["LeastWaste"]}}))?;
    Ok(())
}

/// The ReplicaSets, as objects of the API (their pods' owners are looked up in them): each
/// takes the uid the store gives it, which its pods then name.
fn serve_replica_sets(state: &mut State, sets: &mut [ReplicaSetSpec]) -> Result<(), ApiError> {
    for rs in sets {
        let stored = state.seed(
            Resource::ReplicaSets,
            &rs.namespace,
            workload::replica_set(rs, rs.replicas_at(0.0)),
        )?;
        if let Some(uid) = stored.value()["metadata"]["uid"].as_str() {
            rs.uid = uid.to_string();
        }
    }
    Ok(())
}

/// Places the initial pods round-robin over the workers that fit them (pods that fit nowhere
/// are left pending), daemon pods on every node, mirror pods on the control plane, and PDBs.
fn populate(
    state: &mut State,
    nodes: &[(String, String, bool)],
    workers: &[(String, String)],
    sets: &[ReplicaSetSpec],
    daemons: &[DaemonSetSpec],
) -> Result<(), ApiError> {
    let stamp = now_rfc3339();
    let ip_of = |state: &State, node: &str| -> String {
        state
            .store
            .get(Resource::Nodes, &Key::cluster(node))
            .map(|n| {
                n.value()["status"]["addresses"][0]["address"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default()
    };
    for (node, _, worker) in nodes {
        let ip = ip_of(state, node);
        for ds in daemons {
            let name = state.fresh_name(Resource::Pods, &ds.namespace, &format!("{}-", ds.name));
            let pod = workload::pod(
                &name,
                &ds.namespace,
                ("DaemonSet", &ds.name, &ds.uid),
                &ds.template,
                Placement::Running(node, &ip),
                &stamp,
            );
            state.seed(Resource::Pods, &ds.namespace, pod)?;
        }
        if !worker {
            for (ns, component) in [
                ("openshift-etcd", "etcd"),
                ("openshift-kube-apiserver", "kube-apiserver"),
            ] {
                let t = workload::PodTemplate {
                    app: component.into(),
                    cpu_milli: 300,
                    memory_bytes: 600 << 20,
                    gpus: 0,
                    safe_to_evict: None,
                    local_storage: false,
                    node_selector: Value::Null,
                    tolerations: json!([{"operator": "Exists"}]),
                    priority_class: Some("system-node-critical"),
                };
                let node_uid = state
                    .store
                    .get(Resource::Nodes, &Key::cluster(node))
                    .map(|n| n.value()["metadata"]["uid"].clone())
                    .unwrap_or(Value::Null);
                let mut pod = workload::pod(
                    &format!("{component}-{node}"),
                    ns,
                    ("Node", node, node_uid.as_str().unwrap_or_default()),
                    &t,
                    Placement::Running(node, &ip),
                    &stamp,
                );
                pod["metadata"]["ownerReferences"][0]["apiVersion"] = json!("v1");
                pod["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": state.rng.uuid(), "kubernetes.io/config.source": "file"});
                state.seed(Resource::Pods, ns, pod)?;
            }
        }
    }
    // Room left on each worker: 7500m / 31Gi allocatable minus daemon pods, 250 pods.
    let daemon_cpu: i64 = daemons.iter().map(|d| d.template.cpu_milli).sum();
    let daemon_mem: i64 = daemons.iter().map(|d| d.template.memory_bytes).sum();
    let mut room: Vec<(i64, i64, i64)> = workers
        .iter()
        .map(|_| {
            (
                7500 - daemon_cpu,
                (31 << 30) - daemon_mem,
                250 - daemons.len() as i64,
            )
        })
        .collect();
    let mut cursor = 0usize;
    for rs in sets {
        if let Some((field, value)) = &rs.pdb {
            state.seed(Resource::PodDisruptionBudgets, &rs.namespace, json!({"metadata": {"name": rs.template.app},
                "spec": {field.to_string(): value, "selector": {"matchLabels": {"app": rs.template.app}}}}))?;
        }
        for _ in 0..rs.replicas_at(0.0) {
            let name = state.fresh_name(Resource::Pods, &rs.namespace, &format!("{}-", rs.name));
            let mut placed = None;
            if rs.template.gpus == 0 {
                for step in 0..workers.len() {
                    let i = (cursor + step) % workers.len();
                    let r = &mut room[i];
                    if r.0 >= rs.template.cpu_milli && r.1 >= rs.template.memory_bytes && r.2 >= 1 {
                        *r = (
                            r.0 - rs.template.cpu_milli,
                            r.1 - rs.template.memory_bytes,
                            r.2 - 1,
                        );
                        placed = Some(i);
                        cursor = i + 1;
                        break;
                    }
                }
            }
            let placement = match placed {
                Some(i) => Placement::Running(&workers[i].0, &workers[i].1),
                None => Placement::Unbound,
            };
            let pod = workload::pod(
                &name,
                &rs.namespace,
                ("ReplicaSet", &rs.name, &rs.uid),
                &rs.template,
                placement,
                &stamp,
            );
            state.seed(Resource::Pods, &rs.namespace, pod)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod zone_tests {
    use super::*;

    #[test]
    fn workers_drawn_in_range_are_dealt_over_the_zones() {
        let mut state = State::new(1000, 7);
        let shape = Shape {
            workers: Some((2, 10)),
            ..Shape::default()
        };
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let sizes = zone_sizes(&mut state, &shape);
            let total: usize = sizes.iter().sum();
            assert!((2..=10).contains(&total), "{sizes:?}");
            assert!(
                sizes[0] >= sizes[2] && sizes[0] - sizes[2] <= 1,
                "{sizes:?}"
            );
            seen.insert(total);
        }
        assert_eq!(seen.len(), 9, "every total in range drawn: {seen:?}");
        let fixed = Shape::default();
        assert_eq!(zone_sizes(&mut state, &fixed), [2, 2, 2]);
    }
}
