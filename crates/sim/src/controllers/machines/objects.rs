//! The objects the machine controller writes, in either Machine API's shape: the MachineSet
//! a Cluster API MachineDeployment owns, new Machines, the end of a Machine's provisioning
//! (a Node, no node, or a failure: its set's failure mode, or the cloud out of capacity for
//! its instance type in its zone) and the status of sets and deployments. Cluster API
//! objects are v1beta2: `status.nodeRef` is `{name}`, readiness is
//! `status.initialization`, failures live under `status.deprecated.v1beta1`, and
//! `infrastructureRef` is `{apiGroup, kind, name}`.

use serde_json::{Value, json};

use super::world::{MachineWorld, Refusal};
use crate::api::resources::Resource;
use crate::api::status::ApiError;
use crate::faults::{CapacityFault, DEFAULT_CAPACITY_REASON, launch_error};
use crate::machine_api::{MachineApi, NEVER_READY_ANNOTATION, Profile, node};
use crate::registry::now_rfc3339;
use crate::rng::Rng;
use crate::settings::Flavor;
use crate::store::Key;

/// `k=v,k2=v2` of a LabelSelector's matchLabels.
pub fn selector_string(selector: &Value) -> String {
    selector["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The annotations Cluster API's MachineDeployment controller does not copy to its
/// MachineSets (`mdutil.annotationsToSkip`): they describe the deployment itself.
const NOT_COPIED_TO_SETS: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "machinedeployment.clusters.x-k8s.io/revision",
    "machinedeployment.clusters.x-k8s.io/revision-history",
    "machinedeployment.clusters.x-k8s.io/desired-replicas",
    "machinedeployment.clusters.x-k8s.io/max-replicas",
    "cluster.x-k8s.io/conversion-data",
];

/// A MachineSet's annotations as Cluster API's MachineDeployment controller keeps them
/// (`MachineSetAnnotationsFromMachineDeployment`): every annotation of the deployment but
/// its own bookkeeping (so the autoscaler's min/max annotations too: a set owned by a
/// deployment is still no node group), and the deployment's desired and maximum replicas
/// (a rolling update's default surge is one).
pub fn set_annotations(md: &Value) -> serde_json::Map<String, Value> {
    let mut annotations = serde_json::Map::new();
    if let Some(a) = md["metadata"]["annotations"].as_object() {
        for (k, v) in a {
            if !NOT_COPIED_TO_SETS.contains(&k.as_str()) {
                annotations.insert(k.clone(), v.clone());
            }
        }
    }
    let replicas = md["spec"]["replicas"].as_i64().unwrap_or(1);
    annotations.insert(
        "machinedeployment.clusters.x-k8s.io/desired-replicas".into(),
        json!(replicas.to_string()),
    );
    annotations.insert(
        "machinedeployment.clusters.x-k8s.io/max-replicas".into(),
        json!((replicas + 1).to_string()),
    );
    annotations
}

/// The Cluster API MachineSet a MachineDeployment owns.
pub fn machine_set_for(md: &Value, api: &MachineApi, rng: &mut Rng) -> Value {
    let md_name = md["metadata"]["name"].as_str().unwrap_or_default();
    let name = format!("{md_name}-{}", rng.name_suffix());
    let mut annotations = set_annotations(md);
    annotations.insert(
        "machinedeployment.clusters.x-k8s.io/revision".into(),
        json!("1"),
    );
    let mut labels = md["metadata"]["labels"].clone();
    labels["cluster.x-k8s.io/deployment-name"] = json!(md_name);
    let mut template = md["spec"]["template"].clone();
    template["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] = json!(md_name);
    let mut selector = md["spec"]["selector"].clone();
    selector["matchLabels"]["cluster.x-k8s.io/deployment-name"] = json!(md_name);
    // Optional in v1beta2 (a webhook defaults it where there is one); `null` is invalid.
    let replicas = md["spec"]["replicas"].as_i64().unwrap_or(1);
    json!({
        "apiVersion": api.api_version(), "kind": "MachineSet",
        "metadata": {"name": name, "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": api.api_version(), "kind": "MachineDeployment", "name": md_name,
                                 "uid": md["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"clusterName": md["spec"]["clusterName"], "replicas": replicas, "selector": selector, "template": template},
    })
}

/// Creates a new Machine of `set`, in phase Provisioning.
pub fn create_machine<W: MachineWorld>(
    world: &mut W,
    api: &MachineApi,
    set: &Value,
) -> Result<Key, W::Error> {
    let set_name = set["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = set["metadata"]["namespace"].as_str().unwrap_or_default();
    let template = &set["spec"]["template"];
    let mut labels = template["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[api.set_label] = json!(set_name);
    labels[api.cluster_label] = json!(api.cluster_of(set));
    let name = world.fresh_name(api.machines, namespace, &format!("{set_name}-"));
    let mut spec = template["spec"].clone();
    if api.flavor == Flavor::ClusterApi {
        // The MachineSet controller clones the template's infrastructure template into the
        // machine's own infrastructure object (an AWSMachineTemplate becomes an AWSMachine
        // named after the machine), and points the machine at the clone.
        let infra = &mut spec["infrastructureRef"];
        if let Some(kind) = infra["kind"].as_str() {
            let kind = kind.strip_suffix("Template").unwrap_or(kind).to_string();
            infra["kind"] = json!(kind);
            infra["name"] = json!(name);
        }
    }
    let machine = json!({
        "apiVersion": api.api_version(), "kind": "Machine",
        "metadata": {"name": name, "labels": labels, "finalizers": [api.finalizer],
            "ownerReferences": [{"apiVersion": api.api_version(), "kind": "MachineSet", "name": set_name,
                                 "uid": set["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {"phase": "Provisioning"},
    });
    world.create(api.machines, namespace, machine)?;
    Ok(Key::new(namespace, &name))
}

/// Ends a Machine's provisioning as `mode` says: a Node (Ready later, or never), no node,
/// or a failure; a failure too when one of the `capacity` faults matches its instance type
/// and zone. The instance profile and cluster name come from its MachineSet.
pub fn provision<W: MachineWorld>(
    world: &mut W,
    api: &MachineApi,
    key: &Key,
    launch: &Launch,
) -> Result<Option<String>, W::Error> {
    let Some(machine) = world.get(api.machines, key) else {
        return Ok(None);
    };
    if let Some(provider_id) = machine["spec"]["providerID"]
        .as_str()
        .filter(|p| !p.is_empty())
    {
        return resume(world, api, key, &machine, provider_id, launch.link);
    }
    let owner = machine["metadata"]["ownerReferences"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let set = world
        .get(api.machine_sets, &Key::new(&key.namespace, &owner))
        .unwrap_or(Value::Null);
    let template = infrastructure_template(world, &set, &key.namespace);
    let profile = Profile::of(&set, api, template.as_ref())
        .map_err(|e| ApiError::invalid("MachineSet", &owner, e.to_string()))?;
    let infra = api.cluster_of(&set);
    provision_as(world, api, &infra, key, launch, &profile)
}

/// A Machine whose instance was launched (its provider ID is set) but whose status did not
/// say so (the status write lost a race with another controller's): the instance is not
/// launched again, as a cloud provider's `Exists` check prevents; its status is written from
/// the Node that carries its provider ID, if one does.
fn resume<W: MachineWorld>(
    world: &mut W,
    api: &MachineApi,
    key: &Key,
    machine: &Value,
    provider_id: &str,
    link: Link,
) -> Result<Option<String>, W::Error> {
    let node = world
        .list(Resource::Nodes, |_, n| {
            (n["spec"]["providerID"] == provider_id).then(|| n.clone())
        })
        .into_iter()
        .flatten()
        .next();
    let name = node
        .as_ref()
        .and_then(|n| n["metadata"]["name"].as_str())
        .map(str::to_string);
    let linked = !machine["status"]["nodeRef"].is_null();
    world.modify(api.machines, key, |m| {
        if let Some(n) = &node {
            let ip = n["status"]["addresses"]
                .as_array()
                .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
                .map_or(Value::Null, |a| a["address"].clone());
            m["status"]["addresses"] = json!([{"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": n["metadata"]["name"]}]);
        }
        let phase = match (link, &node) {
            (Link::Here, Some(n)) => {
                m["status"]["nodeRef"] = api.node_ref(
                    n["metadata"]["name"].as_str().unwrap_or_default(),
                    &n["metadata"]["uid"],
                );
                "Running"
            }
            (Link::Elsewhere, Some(_)) if linked => "Running",
            _ => "Provisioned",
        };
        m["status"]["phase"] = json!(phase);
        initialized(api, &mut m["status"]);
    })?;
    Ok(name)
}

/// How an instance is launched: the group's failure mode, the cloud's capacity faults in
/// force, and who links its Node.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    pub mode: Option<&'a str>,
    pub capacity: &'a [CapacityFault],
    pub link: Link,
}

impl Launch<'_> {
    /// A launch that succeeds, linked here: the simulated fleet's initial machines.
    pub const PLAIN: Launch<'static> = Launch {
        mode: None,
        capacity: &[],
        link: Link::Here,
    };
}

/// Who links a provisioned Machine to its Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// This controller: `status.nodeRef`, the Node's machine annotations, phase Running.
    Here,
    /// A real controller (OpenShift's nodelink): the Machine is left Provisioned with its
    /// provider ID and addresses, which nodelink matches the Node by.
    Elsewhere,
}

/// The AWSMachineTemplate a Cluster API MachineSet's machines are made from, if served.
pub(super) fn infrastructure_template<W: MachineWorld>(
    world: &W,
    set: &Value,
    namespace: &str,
) -> Option<Value> {
    let reference = &set["spec"]["template"]["spec"]["infrastructureRef"];
    (reference["kind"] == "AWSMachineTemplate")
        .then(|| reference["name"].as_str())
        .flatten()
        .and_then(|name| world.get(Resource::AwsMachineTemplates, &Key::new(namespace, name)))
}

/// `provision` with the cluster name and instance profile given (control-plane machines
/// have no MachineSet). Returns the name of the Node made, if one was.
pub fn provision_as<W: MachineWorld>(
    world: &mut W,
    api: &MachineApi,
    infra: &str,
    key: &Key,
    launch: &Launch,
    profile: &Profile,
) -> Result<Option<String>, W::Error> {
    let link = launch.link;
    let annotations = match link {
        Link::Here => api.node_annotations(&key.namespace, &key.name, infra),
        Link::Elsewhere => json!({}),
    };
    let instance = match launch_instance(world, launch, profile, key, annotations)? {
        Ok(instance) => instance,
        Err(message) => return fail(world, api, key, &message).map(|()| None),
    };
    let node_ref = instance
        .node
        .as_ref()
        .map(|(name, uid)| api.node_ref(name, uid));
    world
        .modify(api.machines, key, |m| {
            m["spec"]["providerID"] = json!(instance.provider_id);
            m["status"]["addresses"] = instance.addresses.clone();
            match (node_ref, link) {
                (Some(node_ref), Link::Here) => {
                    m["status"]["phase"] = json!("Running");
                    m["status"]["nodeRef"] = node_ref;
                }
                _ => m["status"]["phase"] = json!("Provisioned"),
            }
            initialized(api, &mut m["status"]);
        })
        .map(|()| instance.node.map(|(name, _)| name))
}

/// An instance the cloud launched.
#[derive(Debug)]
pub struct Instance {
    pub provider_id: String,
    pub instance_id: String,
    /// `status.addresses` of its machine: InternalIP and InternalDNS.
    pub addresses: Value,
    /// The Node it registered (name, uid); none in failure mode `no-node`.
    pub node: Option<(String, Value)>,
}

/// Failure mode: the node comes up Ready without the GPUs its profile has.
pub const GPU_DRIVER_INSTALLING: &str = "gpu-driver-installing";

/// Launches the instance of `profile` for the machine at `key` as `launch` says: the
/// cloud's refusal as its message (the failure mode, a capacity fault, or a Node the API
/// refused: an instance that never joins), or the instance, its Node registered with
/// `annotations` (kwok makes it Ready, unless the mode is `not-ready`).
pub fn launch_instance<W: MachineWorld>(
    world: &mut W,
    launch: &Launch,
    profile: &Profile,
    key: &Key,
    mut annotations: Value,
) -> Result<Result<Instance, String>, W::Error> {
    let mode = launch.mode;
    if let Some(message) = launch_failure(mode, launch.capacity, profile) {
        return Ok(Err(message));
    }
    let (a, b) = (world.rng().below(250) + 1, world.rng().below(250) + 2);
    let ip = format!("10.0.{a}.{b}");
    let node_name = node_name(world, profile, &key.name, a, b);
    let instance_id = format!("i-0{:016x}", world.rng().next_u64());
    let mut instance = Instance {
        provider_id: provider_id(&profile.zone, &instance_id),
        instance_id,
        addresses: json!([{"type": "InternalIP", "address": ip}, {"type": "InternalDNS", "address": node_name}]),
        node: None,
    };
    if mode == Some("no-node") {
        return Ok(Ok(instance));
    }
    if mode == Some("not-ready") {
        annotations[NEVER_READY_ANNOTATION] = json!("true");
    }
    // The GPU operator's device plugin advertises the GPUs once the driver is in: until
    // someone playing it patches the Node's status, it has none.
    let shown = match mode {
        Some(GPU_DRIVER_INSTALLING) => &Profile {
            gpus: 0,
            ..profile.clone()
        },
        _ => profile,
    };
    let node_object = node(
        &node_name,
        &instance.provider_id,
        shown,
        annotations,
        &ip,
        &now_rfc3339(),
    );
    match world.create(Resource::Nodes, "", node_object) {
        Ok(created) => {
            instance.node = Some((node_name, created["metadata"]["uid"].clone()));
            Ok(Ok(instance))
        }
        Err(refused) if refused.is_refusal() => {
            Ok(Err(format!("its Node {node_name} was refused: {refused}")))
        }
        Err(other) => Err(other),
    }
}

/// The name the instance's Node registers with: AWS's private DNS name in a region
/// (`ip-10-0-1-2.us-east-1.compute.internal`); with no region (vSphere, bare metal, a
/// hand-written providerSpec) the Machine's own name, as those platforms name nodes. Unique
/// among the cluster's Nodes.
fn node_name<W: MachineWorld>(
    world: &mut W,
    profile: &Profile,
    machine: &str,
    a: u64,
    b: u64,
) -> String {
    let base = if profile.region.is_empty() {
        machine.to_string()
    } else {
        format!("ip-10-0-{a}-{b}.{}.compute.internal", profile.region)
    };
    let mut name = base.clone();
    while world.contains(Resource::Nodes, &Key::cluster(&name)) {
        name = match base.split_once('.') {
            Some((host, domain)) => format!("{host}-{}.{domain}", world.rng().name_suffix()),
            None => format!("{base}-{}", world.rng().name_suffix()),
        };
    }
    name
}

/// AWS's provider ID (`aws:///us-east-1a/i-0…`); without a zone, `aws:///i-0…`.
fn provider_id(zone: &str, instance: &str) -> String {
    if zone.is_empty() {
        format!("aws:///{instance}")
    } else {
        format!("aws:///{zone}/{instance}")
    }
}

/// The cloud's error, if it cannot launch the instance of `profile`: the set's `fail`
/// failure mode (no capacity for its type in its zone), or a capacity fault in force that
/// matches its type and zone.
fn launch_failure(
    mode: Option<&str>,
    capacity: &[CapacityFault],
    profile: &Profile,
) -> Option<String> {
    let (instance_type, zone) = (profile.instance_type.as_str(), profile.zone.as_str());
    if mode == Some("fail") {
        return Some(launch_error(
            DEFAULT_CAPACITY_REASON,
            None,
            instance_type,
            zone,
        ));
    }
    capacity
        .iter()
        .find(|f| f.matches(instance_type, zone))
        .map(|f| f.failure_message(instance_type, zone))
}

/// A machine whose instance could not be launched: the cloud's error as its failure message
/// (and phase Failed on OpenShift). Its reason is the Machine APIs' category for a failed create
/// (`CreateError`), not the cloud's code: what went wrong, the message says, as a real
/// provider's does, so that readers of machines tell capacity errors by the cloud's words.
fn fail<W: MachineWorld>(
    world: &mut W,
    api: &MachineApi,
    key: &Key,
    message: &str,
) -> Result<(), W::Error> {
    world.modify(api.machines, key, |m| {
        // Cluster API v1beta2 has no phase Failed any more (its Machine controller never
        // sets it): the failure is in the v1beta1 fields alone.
        if api.flavor == Flavor::OpenShift {
            m["status"]["phase"] = json!("Failed");
        }
        api.set_failure(&mut m["status"], "CreateError", message);
    })
}

/// Cluster API reports a machine's bootstrap data and infrastructure ready in
/// `status.initialization` (v1beta1's `bootstrapReady` / `infrastructureReady`).
fn initialized(api: &MachineApi, status: &mut Value) {
    if api.flavor == Flavor::ClusterApi {
        status["initialization"] =
            json!({"bootstrapDataSecretCreated": true, "infrastructureProvisioned": true});
    }
}

/// Machine counts of one MachineSet, as its status reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub replicas: usize,
    pub ready: usize,
}

/// Writes a MachineSet's status fields: OpenShift's, or Cluster API v1beta2's (with the
/// v1beta1 counters under `deprecated.v1beta1`, as Cluster API keeps them). `selector` is
/// the scale subresource's label selector (Cluster API's `status.selector`; OpenShift's
/// CRD has no such field and would prune it).
pub fn set_machine_set_status(
    api: &MachineApi,
    status: &mut Value,
    counts: Counts,
    generation: &Value,
    selector: &str,
) {
    let Counts { replicas, ready } = counts;
    status["replicas"] = json!(replicas);
    status["readyReplicas"] = json!(ready);
    status["availableReplicas"] = json!(ready);
    status["observedGeneration"] = generation.clone();
    match api.flavor {
        Flavor::OpenShift => status["fullyLabeledReplicas"] = json!(replicas),
        Flavor::ClusterApi => {
            status["upToDateReplicas"] = json!(replicas);
            if !selector.is_empty() {
                status["selector"] = json!(selector);
            }
            status["deprecated"]["v1beta1"] = json!({"fullyLabeledReplicas": replicas,
                "readyReplicas": ready, "availableReplicas": ready});
        }
    }
}

/// A Cluster API v1beta2 MachineDeployment's whole status, from its MachineSets' counts.
pub fn machine_deployment_status(
    want: i64,
    current: i64,
    ready: i64,
    generation: &Value,
    selector: &str,
) -> Value {
    let phase = if current < want {
        "ScalingUp"
    } else if current > want {
        "ScalingDown"
    } else {
        "Running"
    };
    let mut status = json!({"replicas": current, "readyReplicas": ready, "availableReplicas": ready,
        "upToDateReplicas": current, "observedGeneration": generation, "phase": phase,
        "deprecated": {"v1beta1": {"readyReplicas": ready, "availableReplicas": ready,
            "updatedReplicas": current, "unavailableReplicas": (want - ready).max(0)}}});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    status
}
