//! Template nodes: what a new node of a group would look like. Copied from a ready node of
//! the group when there is one; otherwise built for scale-from-zero from the capacity
//! annotations (upstream keys first, OpenShift's older keys as fallback) and the machine
//! template's labels and taints. Either way it carries the DaemonSet pods that would run on it.

use fleetscaler_model::{Warning, WarningCode};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::csi::{self, AttachLimits};
use super::dra_template;
use super::dra_template::TemplateDevices;
use super::nodegroups::{NodeGroup, NodeGroupId};
use super::settings::Settings;
use super::unready_devices::Published;
use super::unready_resources::{declares_gpus, gpus_pending};
use fleetscaler_model::infra::{InfraRef, InfrastructureTemplate};
use fleetscaler_model::labels::Labels;
use fleetscaler_model::node::{
    DEFAULT_MAX_PODS, DELETION_CANDIDATE_TAINT, Node, TO_BE_DELETED_TAINT,
};
use fleetscaler_model::platform;
use fleetscaler_model::pod::PodSpec;
use fleetscaler_model::quantity::{Quantity, QuantityError};
use fleetscaler_model::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};
use fleetscaler_model::scheduling::{
    HOSTNAME_LABEL, HostPort, Taint, TaintEffect, Toleration, untolerated_taint,
};
use fleetscaler_model::{ClusterSnapshot, ScalableResource};

pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";
pub const GPU_LABEL: &str = "cluster-api/accelerator";
const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
const ARCH_LABEL: &str = "kubernetes.io/arch";
const OS_LABEL: &str = "kubernetes.io/os";

/// Where a template came from; shown in the plan as `node`, `annotations`,
/// `infrastructureTemplate` or `none`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TemplateSource {
    Node,
    Annotations,
    /// A Cluster API infrastructure template's `status.capacity` (annotations win over it).
    InfrastructureTemplate,
    None,
}

/// Why a group has no template; the pods that could go nowhere else are told it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("annotation {key}: {source}")]
    Quantity {
        key: String,
        #[source]
        source: QuantityError,
    },
    #[error("annotation {key}={value:?} is not a non-negative integer")]
    NotAnInteger { key: String, value: String },
    #[error("{}", no_capacity(.group))]
    NoCapacity { group: NodeGroupId },
    /// Its infrastructure template was read, without cpu or memory.
    #[error("{}, or cpu and memory in status.capacity of its infrastructure template {template}", no_capacity(.group))]
    TemplateShort {
        group: NodeGroupId,
        template: InfraRef,
    },
    #[error(
        "{}; its infrastructure template {template} is not known: not in the dump, or not \
         readable by the hub (the cluster's problems say why)",
        no_capacity(.group)
    )]
    TemplateUnknown {
        group: NodeGroupId,
        template: InfraRef,
    },
}

/// What a group at zero lacks, whatever else could give it.
fn no_capacity(group: &NodeGroupId) -> String {
    format!(
        "no ready node to copy and no scale-from-zero capacity: set the annotations \
         {CAPACITY_PREFIX}cpu and {CAPACITY_PREFIX}memory on {group}"
    )
}

/// A node as the group would create it, with the DaemonSet pods it would run.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateNode {
    pub source: TemplateSource,
    /// The node copied (`TemplateSource::Node`), or the infrastructure template read.
    pub from: Option<Arc<str>>,
    /// Without `kubernetes.io/hostname`: every simulated copy gets its own.
    pub labels: Labels,
    /// The platform the group's machines run on (`aws`, `openstack`, ...), when it can be
    /// told: part of what a capacity failure is about (`CapacityKey`).
    pub platform: Option<&'static str>,
    pub taints: Arc<[Taint]>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub max_pods: i64,
    /// What the DaemonSet (and static) pods take on every new node.
    pub daemon_requests: Resources,
    pub daemon_pods: i64,
    pub daemon_ports: Vec<HostPort>,
    /// How many volumes of each CSI driver a new node may attach (`csi`).
    pub attach_limits: AttachLimits,
    /// The node-local ResourceSlices a new node publishes (`dra_template`).
    pub dra_devices: Arc<TemplateDevices>,
}

impl TemplateNode {
    /// The GPU type for GPU limits: the `cluster-api/accelerator` label, else the GPU resource name.
    pub fn gpu_type(&self) -> Option<Arc<str>> {
        let (name, _) = self.capacity.gpus().find(|(_, n)| *n > 0)?;
        Some(
            self.labels
                .get_arc(GPU_LABEL)
                .cloned()
                .unwrap_or_else(|| name.clone()),
        )
    }

    /// Allocatable minus what the DaemonSet pods take: what pending pods can use.
    pub fn free(&self) -> Resources {
        let mut free = self.allocatable.clone();
        free.sub(&self.daemon_requests);
        free
    }
}

/// Builds every group's template, or says why one cannot be built. No template carries a
/// startup taint (`settings.startup_taints`, the upstream prefixes): a new node sheds them
/// before it takes pods, and a node still carrying one is no model for new ones.
/// Also returns warnings: entries of the scale-from-zero annotations skipped as malformed.
pub fn build_all(
    snapshot: &ClusterSnapshot,
    groups: &[NodeGroup],
    settings: &Settings,
) -> (Vec<Result<TemplateNode, TemplateError>>, Vec<Warning>) {
    let daemons = Daemons::index(snapshot);
    let mut warnings = Vec::new();
    let templates = groups
        .iter()
        .map(|g| build(snapshot, g, &daemons, settings, &mut warnings))
        .collect();
    (templates, warnings)
}

/// The DaemonSet and static pods, indexed once for all groups.
struct Daemons<'a> {
    /// DaemonSet and mirror pods running on each node.
    on_node: HashMap<&'a str, Vec<&'a Arc<PodSpec>>>,
    /// One pod spec per DaemonSet: from the DaemonSet objects, else from a running pod of each.
    specs: Vec<&'a Arc<PodSpec>>,
}

impl<'a> Daemons<'a> {
    fn index(snapshot: &'a ClusterSnapshot) -> Self {
        let mut on_node: HashMap<&str, Vec<&Arc<PodSpec>>> = HashMap::new();
        let mut specs: Vec<&Arc<PodSpec>> = snapshot.daemonsets.iter().map(|d| &d.spec).collect();
        let from_pods = specs.is_empty();
        let mut seen = HashSet::new();
        for pod in snapshot
            .pods
            .iter()
            .filter(|p| !p.is_terminal() && (p.is_daemonset() || p.mirror))
        {
            if let Some(node) = &pod.node_name {
                on_node.entry(node).or_default().push(&pod.spec);
            }
            if let Some(owner) = pod
                .owner
                .as_ref()
                .filter(|_| from_pods && pod.is_daemonset())
                && seen.insert(owner.uid.clone())
            {
                specs.push(&pod.spec);
            }
        }
        Daemons { on_node, specs }
    }
}

fn build(
    snapshot: &ClusterSnapshot,
    group: &NodeGroup,
    daemons: &Daemons,
    settings: &Settings,
    warnings: &mut Vec<Warning>,
) -> Result<TemplateNode, TemplateError> {
    let gpus_declared = declares_gpus(snapshot, group);
    let published = Published::index(snapshot);
    let drivers = published.expected(snapshot, group);
    let devices_pending = |n: &Node| published.pending(n, &drivers);
    let candidate =
        template_node_candidate(snapshot, group, settings, gpus_declared, &devices_pending);
    let mut template = match candidate {
        Some(node) => TemplateNode {
            attach_limits: csi::node_limits(snapshot, &node.name),
            dra_devices: dra_template::node_devices(snapshot, &node.name),
            ..from_node(node, daemons)
        },
        None => from_annotations(snapshot, group, daemons, settings, warnings)?,
    };
    template.platform = platform_of(snapshot, group);
    if template.source != TemplateSource::Node {
        let keys = csi::zone_keys(snapshot, template.platform);
        template.labels = csi::with_zone_keys(template.labels, &keys);
    }
    Ok(template)
}

/// The platform of a group: its nodes' providerIDs first (what its machines turned out to
/// be, even when none of them is ready to copy), else what its MachineSet or
/// MachineDeployment makes machines of (the provider spec's or infrastructure template's
/// kind, read with the resource).
fn platform_of(snapshot: &ClusterSnapshot, group: &NodeGroup) -> Option<&'static str> {
    group
        .nodes
        .iter()
        .filter_map(|&i| snapshot.nodes[i].provider_id.as_deref())
        .find_map(platform::of_provider_id)
        .or_else(|| {
            annotated_resources(snapshot, group)
                .iter()
                .find_map(|r| r.platform)
        })
}

/// A ready node of the group to copy; never one whose GPUs or DRA devices are not advertised
/// yet (a new node would then look without them), as upstream builds templates from ready
/// nodes only.
fn template_node_candidate<'a>(
    snapshot: &'a ClusterSnapshot,
    group: &NodeGroup,
    settings: &Settings,
    gpus_declared: bool,
    devices_pending: &dyn Fn(&Node) -> bool,
) -> Option<&'a Node> {
    group
        .nodes
        .iter()
        .map(|&i| &snapshot.nodes[i])
        .filter(|n| {
            n.is_ready()
                && !n.unschedulable
                && !n.deleting
                && !n.has_taint(TO_BE_DELETED_TAINT)
                && !settings.has_startup_taint(n)
                && !gpus_pending(n, gpus_declared)
                && !devices_pending(n)
        })
        .min_by(|a, b| a.name.cmp(&b.name))
}

/// Taints a fresh node would not carry: the autoscaler's own and node-condition ones
/// (a node with a startup taint is never copied).
fn is_transient_taint(key: &str) -> bool {
    key == TO_BE_DELETED_TAINT
        || key == DELETION_CANDIDATE_TAINT
        || key.starts_with("node.kubernetes.io/")
        || key.starts_with("node.cloudprovider.kubernetes.io/")
        || key.starts_with("status-taint.cluster-autoscaler.kubernetes.io/")
}

fn from_node(node: &Node, daemons: &Daemons) -> TemplateNode {
    let mut template = TemplateNode {
        source: TemplateSource::Node,
        from: Some(node.name.clone()),
        labels: node.labels.without(|k| k == HOSTNAME_LABEL),
        platform: None,
        taints: node
            .taints
            .iter()
            .filter(|t| !is_transient_taint(&t.key))
            .cloned()
            .collect(),
        capacity: node.capacity.clone(),
        allocatable: node.allocatable.clone(),
        max_pods: node.max_pods,
        daemon_requests: Resources::default(),
        daemon_pods: 0,
        daemon_ports: Vec::new(),
        attach_limits: Arc::from([]),
        dra_devices: Default::default(),
    };
    for spec in daemons.on_node.get(&*node.name).into_iter().flatten() {
        add_daemon(&mut template, spec);
    }
    template
}

fn add_daemon(template: &mut TemplateNode, spec: &PodSpec) {
    template.daemon_requests.add(&spec.requests);
    template.daemon_pods += 1;
    template
        .daemon_ports
        .extend(spec.host_ports.iter().cloned());
}

/// The resources whose annotations (and platform) are read: the group's own, then (when it
/// owns scalable resources: a MachineDeployment) the ones it owns, as either may carry them.
pub(crate) fn annotated_resources<'a>(
    snapshot: &'a ClusterSnapshot,
    group: &NodeGroup,
) -> Vec<&'a ScalableResource> {
    let own = &snapshot.scalables[group.resource];
    let mut out = vec![own];
    if own.kind.descriptor().owns_scalables() {
        out.extend(group.machine_sets.iter().map(|&i| &snapshot.scalables[i]));
    }
    out
}

fn from_annotations(
    snapshot: &ClusterSnapshot,
    group: &NodeGroup,
    daemons: &Daemons,
    settings: &Settings,
    warnings: &mut Vec<Warning>,
) -> Result<TemplateNode, TemplateError> {
    let resources = annotated_resources(snapshot, group);
    let get = |key: &str| {
        resources
            .iter()
            .find_map(|r| r.annotation(key).map(|v| (key.to_string(), v)))
    };
    let infra = infrastructure_template(snapshot, &resources);
    let (capacity, max_pods, source) = capacity(&get, infra.ok())
        .map_err(|e| e.unwrap_or_else(|| no_capacity_error(group, &infra)))?;
    let from = match (&source, infra) {
        (TemplateSource::InfrastructureTemplate, Ok(t)) => Some(Arc::from(t.reference.to_string())),
        _ => None,
    };
    let own = &snapshot.scalables[group.resource];
    // As upstream: a malformed entry is skipped, the rest of the template stands.
    let mut skipped = |what: &str, part: &str, form: &str| {
        warnings.push(Warning::about(
            WarningCode::InvalidTemplateEntry,
            &group.id,
            format!("annotation {CAPACITY_PREFIX}{what}: entry {part:?} is not {form}; skipped"),
        ))
    };
    let cap = |name: &str| get(&format!("{CAPACITY_PREFIX}{name}"));
    let mut labels = template_labels(own, cap("labels").map(|(_, v)| v), &mut skipped);
    if let Ok(t) = infra {
        labels = with_node_info(labels, t);
    }
    let mut taints = template_taints(own, cap("taints"), &mut skipped);
    // Before the DaemonSets are matched: which of them run must not depend on a taint the
    // node sheds.
    taints.retain(|t| !settings.is_startup_taint(&t.key));
    let mut template = TemplateNode {
        source,
        from,
        labels,
        platform: None,
        taints: taints.into(),
        allocatable: capacity.clone(),
        capacity,
        max_pods,
        daemon_requests: Resources::default(),
        daemon_pods: 0,
        daemon_ports: Vec::new(),
        attach_limits: annotated_attach_limits(own, &mut skipped),
        dra_devices: Arc::new(TemplateDevices {
            slices: dra_template::annotated_slices(own),
            held: Vec::new(),
        }),
    };
    add_daemonsets(daemons, &mut template);
    Ok(template)
}

/// Upstream's `capacity.cluster-autoscaler.kubernetes.io/csi-driver` annotation.
fn annotated_attach_limits(
    own: &ScalableResource,
    skipped: &mut impl FnMut(&str, &str, &str),
) -> AttachLimits {
    let Some(value) = own.annotation(csi::CSI_DRIVER_ANNOTATION) else {
        return Arc::from([]);
    };
    let (limits, bad) = csi::parse_annotation(value);
    for entry in bad {
        skipped(
            "csi-driver",
            &entry,
            "driver=count with a count of 0 or more",
        );
    }
    limits.into()
}

/// The Cluster API infrastructure template of the group (its own reference first, then its
/// MachineSets'), or why there is none to read: no reference, or `Err(Some(reference))`
/// when it was not read.
fn infrastructure_template<'a>(
    snapshot: &'a ClusterSnapshot,
    resources: &[&'a ScalableResource],
) -> Result<&'a InfrastructureTemplate, Option<&'a InfraRef>> {
    let mut references = resources
        .iter()
        .filter_map(|r| r.infrastructure_ref.as_ref());
    let first = references.clone().next();
    references
        .find_map(|r| snapshot.infrastructure_template(r))
        .ok_or(first)
}

/// Capacity and pod count of a new node: the infrastructure template's `status.capacity`
/// overridden by the annotations (upstream keys first, OpenShift's older keys as fallback),
/// as upstream merges them. `Err(None)` when CPU or memory is known from neither.
fn capacity<'a>(
    get: &impl Fn(&str) -> Option<(String, &'a str)>,
    infra: Option<&InfrastructureTemplate>,
) -> Result<(Resources, i64, TemplateSource), Option<TemplateError>> {
    let cap = |name: &str| get(&format!("{CAPACITY_PREFIX}{name}"));
    let legacy = |name: &str| get(&format!("machine.openshift.io/{name}"));
    let quantity = |(key, value): (String, &str)| {
        Quantity::parse_non_negative(value.trim())
            .map_err(|source| Some(TemplateError::Quantity { key, source }))
    };
    let integer = |(key, value): (String, &str)| {
        value
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                Some(TemplateError::NotAnInteger {
                    key,
                    value: value.to_string(),
                })
            })
    };
    let mut capacity = Resources::default();
    let mut max_pods = DEFAULT_MAX_PODS;
    for (name, q) in infra.iter().flat_map(|t| &t.capacity) {
        match &**name {
            PODS => max_pods = q.units_ceil(),
            CPU => capacity.set(CPU, q.milli_ceil()),
            other => capacity.set(other, q.units_ceil()),
        }
    }
    let from_infra = (capacity.cpu_milli > 0, capacity.memory > 0);
    if let Some(a) = cap("cpu").or_else(|| legacy("vCPU")) {
        capacity.cpu_milli = quantity(a)?.milli_ceil();
    }
    match (cap("memory"), legacy("memoryMb")) {
        (Some(a), _) => capacity.memory = quantity(a)?.units_ceil(),
        (None, Some(a)) => capacity.memory = integer(a)?.saturating_mul(1 << 20),
        _ => {}
    }
    if let Some(a) = cap("ephemeral-disk") {
        capacity.set(EPHEMERAL_STORAGE, quantity(a)?.units_ceil());
    }
    let gpu_count = match cap("gpu-count").or_else(|| legacy("GPU")) {
        Some(a) => integer(a)?,
        None => 0,
    };
    if gpu_count > 0 {
        let gpu_type = cap("gpu-type").map_or("nvidia.com/gpu", |(_, v)| v.trim());
        capacity.set(gpu_type, gpu_count);
    }
    if let Some(a) = cap("maxPods").or_else(|| legacy("maxPods")) {
        max_pods = integer(a)?;
    }
    let has =
        |present: bool, key: &str, old: &str| present || cap(key).or_else(|| legacy(old)).is_some();
    if !has(from_infra.0, "cpu", "vCPU") || !has(from_infra.1, "memory", "memoryMb") {
        return Err(None);
    }
    let source = if from_infra == (false, false) {
        TemplateSource::Annotations
    } else {
        TemplateSource::InfrastructureTemplate
    };
    Ok((capacity, max_pods, source))
}

/// Why a group at zero has no template, and what would give it one.
fn no_capacity_error(
    group: &NodeGroup,
    infra: &Result<&InfrastructureTemplate, Option<&InfraRef>>,
) -> TemplateError {
    let group = group.id.clone();
    match infra {
        Ok(t) => TemplateError::TemplateShort {
            group,
            template: t.reference.clone(),
        },
        Err(Some(r)) => TemplateError::TemplateUnknown {
            group,
            template: (*r).clone(),
        },
        Err(None) => TemplateError::NoCapacity { group },
    }
}

/// The architecture and operating system the infrastructure template reports replace the
/// defaults (amd64, linux); labels the group sets itself still win.
fn with_node_info(labels: Labels, t: &InfrastructureTemplate) -> Labels {
    let mut pairs: Vec<(Arc<str>, Arc<str>)> = labels
        .iter()
        .map(|(k, v)| (Arc::from(k), Arc::from(v)))
        .collect();
    for (key, value) in [
        (ARCH_LABEL, &t.architecture),
        (OS_LABEL, &t.operating_system),
    ] {
        if let Some(v) = value {
            pairs.retain(|(k, _)| &**k != key);
            pairs.push((key.into(), v.clone()));
        }
    }
    Labels::new(pairs)
}

fn template_labels(
    r: &ScalableResource,
    annotation: Option<&str>,
    skipped: &mut impl FnMut(&str, &str, &str),
) -> Labels {
    let mut pairs: Vec<(String, String)> = vec![
        (ARCH_LABEL.into(), "amd64".into()),
        (OS_LABEL.into(), "linux".into()),
    ];
    if let Some(t) = &r.provider_instance_type {
        pairs.push((INSTANCE_TYPE_LABEL.into(), t.to_string()));
    }
    pairs.extend(
        r.template_labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    for part in annotation
        .into_iter()
        .flat_map(|a| a.split(','))
        .filter(|p| !p.trim().is_empty())
    {
        match part.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                pairs.push((k.trim().to_string(), v.trim().to_string()))
            }
            _ => skipped("labels", part, "key=value"),
        }
    }
    Labels::new(pairs.into_iter().map(|(k, v)| (Arc::from(k), Arc::from(v))))
}

fn template_taints(
    r: &ScalableResource,
    annotation: Option<(String, &str)>,
    skipped: &mut impl FnMut(&str, &str, &str),
) -> Vec<Taint> {
    let mut taints = r.template_taints.clone();
    for part in annotation
        .iter()
        .flat_map(|(_, a)| a.split(','))
        .filter(|p| !p.trim().is_empty())
    {
        let Some(taint) = Taint::parse_spec(part) else {
            skipped("taints", part, "key=value:Effect");
            continue;
        };
        // The annotation wins over the template for the same key and effect.
        taints.retain(|t| !(t.key == taint.key && t.effect == taint.effect));
        taints.push(taint);
    }
    taints
}

/// Tolerations the DaemonSet controller adds to every DaemonSet pod.
fn daemonset_tolerations() -> Vec<Toleration> {
    let tol = |key: &str, effect| Toleration {
        key: key.into(),
        exists: true,
        value: "".into(),
        effect: Some(effect),
    };
    vec![
        tol("node.kubernetes.io/not-ready", TaintEffect::NoExecute),
        tol("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
        tol("node.kubernetes.io/disk-pressure", TaintEffect::NoSchedule),
        tol(
            "node.kubernetes.io/memory-pressure",
            TaintEffect::NoSchedule,
        ),
        tol("node.kubernetes.io/pid-pressure", TaintEffect::NoSchedule),
        tol("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule),
    ]
}

/// Adds the DaemonSet pods that would run on the template.
fn add_daemonsets(daemons: &Daemons, template: &mut TemplateNode) {
    let extra = daemonset_tolerations();
    let specs = &daemons.specs;
    for spec in specs {
        if runs_on(spec, template, &extra) {
            add_daemon(template, spec);
        }
    }
}

fn runs_on(spec: &PodSpec, template: &TemplateNode, extra: &[Toleration]) -> bool {
    let tolerations: Vec<Toleration> = spec.tolerations.iter().chain(extra).cloned().collect();
    spec.selects_new_node(&template.labels)
        && untolerated_taint(&template.taints, &tolerations).is_none()
}

/// Human summary of a template for explanations: `4 cpu, 16Gi memory, 110 pods (DaemonSets: 200m cpu)`.
pub fn describe(t: &TemplateNode) -> String {
    let free = t.free();
    format!(
        "template ({}) offers cpu {}, memory {} after {} DaemonSet pod(s)",
        match t.source {
            TemplateSource::Node => format!("from node {}", t.from.as_deref().unwrap_or("?")),
            TemplateSource::Annotations => "from annotations".to_string(),
            TemplateSource::InfrastructureTemplate => format!(
                "from infrastructure template {}",
                t.from.as_deref().unwrap_or("?")
            ),
            TemplateSource::None => "none".to_string(),
        },
        fleetscaler_model::resources::format_amount(CPU, free.cpu_milli),
        fleetscaler_model::resources::format_amount(MEMORY, free.memory),
        t.daemon_pods
    )
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;
