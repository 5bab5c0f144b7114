//! Machine API projections: MachineSets and MachineDeployments (the scalable resources
//! behind node groups) and Machines, for OpenShift's `machine.openshift.io` and Cluster API's
//! `cluster.x-k8s.io` alike. The API group is data, so one implementation serves both.
//!
//! Both Cluster API versions are read by the same wire shapes: the fields read are where
//! v1beta1 and v1beta2 agree (`spec.replicas`, the template's labels and taints,
//! `spec.providerID`, `status.nodeRef.name`, `status.phase`), and the one that moved, the
//! machine's failure, is read from v1beta1's `status.failure*` and from v1beta2's
//! `status.deprecated.v1beta1.failure*`. Nothing reads the fields v1beta2 dropped or
//! reshaped (`infrastructureRef.apiVersion`, `bootstrapReady`, the MachineSet counters).

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::infra::InfraRef;
use super::labels::Labels;
use super::machine_api::MachineApiGroup;
pub use super::machine_kind::ScalableKind;
use super::meta::{
    FieldError, ObjectKey, OwnerRef, Projector, controller_of, key_of, taints, timestamp,
};
use super::platform;
use super::scheduling::{Taint, ZONE_LABEL};

/// A MachineSet or MachineDeployment: what a node group scales.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableResource {
    pub api: MachineApiGroup,
    pub kind: ScalableKind,
    pub key: ObjectKey,
    pub uid: Arc<str>,
    /// `metadata.resourceVersion` (not interned: every write makes a new one). The executor's
    /// first scale write goes out against it, saving the read of the Scale.
    pub resource_version: Option<Arc<str>>,
    /// `spec.replicas`; the API defaults it to 1.
    pub replicas: i64,
    /// `status.replicas`: the machines it has, as its controller last counted them.
    pub status_replicas: Option<i64>,
    pub owner: Option<OwnerRef>,
    /// Annotations the autoscaler reads (sizes, capacity, options); raw, validated by the engine.
    pub annotations: BTreeMap<Arc<str>, Arc<str>>,
    /// Labels new nodes will carry, from the machine template.
    pub template_labels: Labels,
    pub template_taints: Vec<Taint>,
    /// Zone and instance type read from well-known provider spec fields, when present.
    pub provider_zone: Option<Arc<str>>,
    pub provider_instance_type: Option<Arc<str>>,
    /// The platform its machines run on (`aws`, `openstack`, ...), from the provider spec's
    /// kind or the infrastructure template's: what a group without nodes says it is.
    pub platform: Option<&'static str>,
    /// Cluster API: the infrastructure template machines are made from (scale from zero
    /// reads its `status.capacity` when the capacity annotations are absent).
    pub infrastructure_ref: Option<InfraRef>,
    pub created: Option<Timestamp>,
}

impl ScalableResource {
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(|v| v.as_ref())
    }
}

/// A Machine: one instance, with the node it became (if any) and any reported failure.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub api: MachineApiGroup,
    pub key: ObjectKey,
    pub uid: Arc<str>,
    pub owner: Option<OwnerRef>,
    pub provider_id: Option<Arc<str>>,
    pub node_ref: Option<Arc<str>>,
    pub phase: Option<Arc<str>>,
    /// The reported failure (`errorMessage` / `failureMessage`, with its reason).
    pub failure: Option<Arc<str>>,
    pub created: Option<Timestamp>,
    pub deleting: bool,
    /// Carries the group's delete-machine annotation.
    pub marked_for_deletion: bool,
}

impl Machine {
    pub fn has_failed(&self) -> bool {
        self.phase.as_deref() == Some("Failed") || self.failure.is_some()
    }
}

// --- wire shapes: the few fields read, tolerant of both API groups ---

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ScalableWire {
    metadata: ObjectMeta,
    spec: ScalableSpecWire,
    status: ScalableStatusWire,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ScalableStatusWire {
    replicas: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ScalableSpecWire {
    replicas: Option<i64>,
    template: TemplateWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct TemplateWire {
    metadata: LabelsWire,
    spec: MachineSpecWire,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LabelsWire {
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct MachineSpecWire {
    metadata: LabelsWire,
    taints: Vec<corev1::Taint>,
    #[serde(rename = "providerID")]
    provider_id: Option<String>,
    provider_spec: ProviderSpecWire,
    infrastructure_ref: Option<InfraRefWire>,
}

/// v1beta1 names the template's `apiVersion`, v1beta2 its `apiGroup`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct InfraRefWire {
    api_group: Option<String>,
    api_version: Option<String>,
    kind: String,
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ProviderSpecWire {
    value: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct MachineWire {
    metadata: ObjectMeta,
    spec: MachineSpecWire,
    status: MachineStatusWire,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct MachineStatusWire {
    node_ref: Option<NodeRefWire>,
    phase: Option<String>,
    error_message: Option<String>,
    error_reason: Option<String>,
    failure_message: Option<String>,
    failure_reason: Option<String>,
    deprecated: Option<DeprecatedWire>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeRefWire {
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct DeprecatedWire {
    v1beta1: Option<Box<MachineStatusWire>>,
}

/// Annotation prefixes the autoscaler reads on scalable resources.
const KEPT_ANNOTATION_PREFIXES: [&str; 4] = [
    "capacity.cluster-autoscaler.kubernetes.io/",
    "machine.openshift.io/",
    "cluster.x-k8s.io/",
    "autoscaling.openshift.io/",
];

/// The revision of a MachineDeployment a MachineSet of it was made for (kept too: it tells
/// whether the deployment is rolling out).
pub const REVISION_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/revision";

/// Labels Cluster API propagates from a machine template to its Node.
fn propagates_to_node(key: &str) -> bool {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    domain == "node-role.kubernetes.io"
        || domain.ends_with(".node-restriction.kubernetes.io")
        || domain == "node-restriction.kubernetes.io"
        || domain.ends_with(".node.cluster.x-k8s.io")
        || domain == "node.cluster.x-k8s.io"
}

fn deserialize<T: for<'de> Deserialize<'de>>(value: serde_json::Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| FieldError::new(e.path().to_string(), e.inner()))
}

impl ScalableResource {
    pub fn from_json(
        api: MachineApiGroup,
        kind: ScalableKind,
        value: serde_json::Value,
        p: &mut Projector,
    ) -> Result<Self, FieldError> {
        let wire: ScalableWire = deserialize(value)?;
        let meta = &wire.metadata;
        let tmpl = &wire.spec.template;
        let mut label_map = tmpl.spec.metadata.labels.clone().unwrap_or_default();
        for (k, v) in tmpl.metadata.labels.iter().flatten() {
            if propagates_to_node(k) {
                label_map.insert(k.clone(), v.clone());
            }
        }
        let taints = taints(&tmpl.spec.taints, "spec.template.spec.taints", p)?;
        let provider = tmpl.spec.provider_spec.value.as_ref();
        let text_at = |ptrs: &[&str]| {
            ptrs.iter()
                .find_map(|ptr| provider?.pointer(ptr)?.as_str().filter(|s| !s.is_empty()))
                .map(str::to_string)
        };
        let zone = text_at(&["/placement/availabilityZone", "/zone"]);
        let spec_kind = text_at(&["/kind"]);
        let instance_type = text_at(&["/instanceType", "/machineType", "/vmSize"]);
        let annotations = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| {
                *k == REVISION_ANNOTATION
                    || KEPT_ANNOTATION_PREFIXES
                        .iter()
                        .any(|pre| k.starts_with(pre))
            })
            .map(|(k, v)| (p.str(k), p.str(v)))
            .collect();
        if let Some(z) = &zone {
            label_map
                .entry(ZONE_LABEL.to_string())
                .or_insert_with(|| z.clone());
        }
        let key = key_of(meta, p);
        let infrastructure_ref = match api {
            MachineApiGroup::ClusterApi => {
                infra_ref(tmpl.spec.infrastructure_ref.as_ref(), &key, p)
            }
            MachineApiGroup::OpenShift => None,
        };
        let platform = spec_kind
            .as_deref()
            .and_then(platform::of_kind)
            .or_else(|| {
                let kind = infrastructure_ref.as_ref().map(|r| &*r.kind)?;
                platform::of_kind(kind)
            });
        Ok(ScalableResource {
            api,
            kind,
            key,
            uid: p.opt_str(meta.uid.as_ref()),
            resource_version: meta.resource_version.as_deref().map(Arc::from),
            replicas: wire.spec.replicas.unwrap_or(1),
            status_replicas: wire.status.replicas,
            owner: controller_of(meta, p),
            annotations,
            template_labels: p.labels(Some(&label_map)),
            template_taints: taints,
            provider_zone: zone.map(|z| p.str(&z)),
            provider_instance_type: instance_type.map(|t| p.str(&t)),
            platform,
            infrastructure_ref,
            created: timestamp(meta.creation_timestamp.as_ref()),
        })
    }
}

/// The template reference, when it names a kind and an object (the group from `apiGroup`,
/// else from `apiVersion`'s group part).
fn infra_ref(wire: Option<&InfraRefWire>, key: &ObjectKey, p: &mut Projector) -> Option<InfraRef> {
    let wire = wire.filter(|w| !w.kind.is_empty() && !w.name.is_empty())?;
    let group = wire
        .api_group
        .clone()
        .filter(|g| !g.is_empty())
        .or_else(|| {
            let version = wire.api_version.as_deref()?;
            version.split_once('/').map(|(g, _)| g.to_string())
        })?;
    Some(InfraRef {
        api_group: p.str(&group),
        kind: p.str(&wire.kind),
        namespace: key.namespace.clone(),
        name: p.str(&wire.name),
    })
}

impl Machine {
    pub fn from_json(
        api: MachineApiGroup,
        value: serde_json::Value,
        p: &mut Projector,
    ) -> Result<Self, FieldError> {
        let wire: MachineWire = deserialize(value)?;
        let meta = &wire.metadata;
        let status = &wire.status;
        let legacy = status
            .deprecated
            .as_ref()
            .and_then(|d| d.v1beta1.as_deref());
        let failure = [Some(status), legacy].into_iter().flatten().find_map(|s| {
            let message = s.error_message.as_ref().or(s.failure_message.as_ref())?;
            let reason = s.error_reason.as_ref().or(s.failure_reason.as_ref());
            Some(match reason {
                Some(r) => format!("{r}: {message}"),
                None => message.clone(),
            })
        });
        let delete_key = api.delete_machine_annotation();
        let legacy_delete_key = format!("{}/cluster-api-delete-machine", api.domain());
        let marked = meta
            .annotations
            .iter()
            .flatten()
            .any(|(k, _)| *k == delete_key || *k == legacy_delete_key);
        Ok(Machine {
            api,
            key: key_of(meta, p),
            uid: p.opt_str(meta.uid.as_ref()),
            owner: controller_of(meta, p),
            provider_id: wire
                .spec
                .provider_id
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|s| p.str(s)),
            node_ref: status
                .node_ref
                .as_ref()
                .filter(|r| !r.name.is_empty())
                .map(|r| p.str(&r.name)),
            phase: status.phase.as_deref().map(|s| p.str(s)),
            failure: failure.map(|f| p.str(&f)),
            created: timestamp(meta.creation_timestamp.as_ref()),
            deleting: meta.deletion_timestamp.is_some(),
            marked_for_deletion: marked,
        })
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
