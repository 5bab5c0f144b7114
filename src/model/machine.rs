//! Machine API projections: MachineSets and MachineDeployments (the scalable resources
//! behind node groups) and Machines, for OpenShift's `machine.openshift.io` and Cluster API's
//! `cluster.x-k8s.io` alike. The API group is data, so one implementation serves both.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::labels::Labels;
use super::meta::{
    FieldError, ObjectKey, OwnerRef, Projector, controller_of, key_of, taints, timestamp,
};
use super::scheduling::{Taint, ZONE_LABEL};

/// Which Machine API a resource belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum MachineApiGroup {
    /// `machine.openshift.io` (OpenShift Machine API).
    #[serde(rename = "machine.openshift.io")]
    OpenShift,
    /// `cluster.x-k8s.io` (Cluster API).
    #[serde(rename = "cluster.x-k8s.io")]
    ClusterApi,
}

impl MachineApiGroup {
    pub fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version.split_once('/')?.0 {
            "machine.openshift.io" => Some(MachineApiGroup::OpenShift),
            "cluster.x-k8s.io" => Some(MachineApiGroup::ClusterApi),
            _ => None,
        }
    }

    pub fn domain(self) -> &'static str {
        match self {
            MachineApiGroup::OpenShift => "machine.openshift.io",
            MachineApiGroup::ClusterApi => "cluster.x-k8s.io",
        }
    }

    pub fn min_size_annotation(self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-group-min-size",
            self.domain()
        )
    }

    pub fn max_size_annotation(self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-group-max-size",
            self.domain()
        )
    }

    /// The annotation that tells the MachineSet controller which machine to remove first.
    pub fn delete_machine_annotation(self) -> String {
        format!("{}/delete-machine", self.domain())
    }

    pub fn paused_annotation(self) -> String {
        format!("{}/paused", self.domain())
    }
}

impl fmt::Display for MachineApiGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.domain())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ScalableKind {
    MachineSet,
    MachineDeployment,
}

impl ScalableKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ScalableKind::MachineSet => "MachineSet",
            ScalableKind::MachineDeployment => "MachineDeployment",
        }
    }
}

/// A MachineSet or MachineDeployment: what a node group scales.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableResource {
    pub api: MachineApiGroup,
    pub kind: ScalableKind,
    pub key: ObjectKey,
    pub uid: Arc<str>,
    /// `spec.replicas`; the API defaults it to 1.
    pub replicas: i64,
    pub owner: Option<OwnerRef>,
    /// Annotations the autoscaler reads (sizes, capacity, options); raw, validated by the engine.
    pub annotations: BTreeMap<Arc<str>, Arc<str>>,
    /// Labels new nodes will carry, from the machine template.
    pub template_labels: Labels,
    pub template_taints: Vec<Taint>,
    /// Zone and instance type read from well-known provider spec fields, when present.
    pub provider_zone: Option<Arc<str>>,
    pub provider_instance_type: Option<Arc<str>>,
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
        let instance_type = text_at(&["/instanceType", "/machineType", "/vmSize"]);
        let annotations = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| {
                KEPT_ANNOTATION_PREFIXES
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
        Ok(ScalableResource {
            api,
            kind,
            key: key_of(meta, p),
            uid: p.opt_str(meta.uid.as_ref()),
            replicas: wire.spec.replicas.unwrap_or(1),
            owner: controller_of(meta, p),
            annotations,
            template_labels: p.labels(Some(&label_map)),
            template_taints: taints,
            provider_zone: zone.map(|z| p.str(&z)),
            provider_instance_type: instance_type.map(|t| p.str(&t)),
            created: timestamp(meta.creation_timestamp.as_ref()),
        })
    }
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
mod tests {
    use super::*;

    #[test]
    fn machineset_keeps_autoscaler_annotations_labels_taints_and_zone() {
        let ms = ScalableResource::from_json(
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            serde_json::json!({
                "metadata": {"name": "worker-a", "namespace": "openshift-machine-api", "annotations": {
                    "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "6",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                "spec": {"replicas": 2, "template": {"spec": {
                    "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                    "taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
                    "providerSpec": {"value": {"instanceType": "m5.xlarge", "placement": {"availabilityZone": "us-east-1a"}}}}}}
            }),
            &mut Projector::default(),
        )
        .unwrap();
        assert_eq!(ms.replicas, 2);
        assert_eq!(ms.annotations.len(), 1);
        assert_eq!(ms.template_labels.get(ZONE_LABEL), Some("us-east-1a"));
        assert_eq!(
            ms.template_labels.get("node-role.kubernetes.io/worker"),
            Some("")
        );
        assert_eq!(ms.provider_instance_type.as_deref(), Some("m5.xlarge"));
        assert_eq!(
            ms.template_taints[0].to_string(),
            "dedicated=infra:NoSchedule"
        );
    }

    #[test]
    fn capi_template_labels_only_propagate_node_domains() {
        let md = ScalableResource::from_json(
            MachineApiGroup::ClusterApi,
            ScalableKind::MachineDeployment,
            serde_json::json!({
                "metadata": {"name": "md", "namespace": "default"},
                "spec": {"template": {"metadata": {"labels": {
                    "cluster.x-k8s.io/cluster-name": "c1",
                    "node-role.kubernetes.io/worker": "",
                    "tier.node.cluster.x-k8s.io/pool": "a"}}}}
            }),
            &mut Projector::default(),
        )
        .unwrap();
        assert_eq!(md.replicas, 1, "the API default");
        assert!(
            md.template_labels
                .get("cluster.x-k8s.io/cluster-name")
                .is_none()
        );
        assert_eq!(md.template_labels.len(), 2);
    }

    #[test]
    fn machine_failure_from_either_api_shape() {
        let m = Machine::from_json(
            MachineApiGroup::OpenShift,
            serde_json::json!({"metadata": {"name": "m1", "namespace": "ns",
                "annotations": {"machine.openshift.io/delete-machine": "2026-01-01"}},
                "status": {"phase": "Failed", "errorReason": "InvalidConfiguration", "errorMessage": "no capacity"}}),
            &mut Projector::default(),
        )
        .unwrap();
        assert!(m.has_failed() && m.marked_for_deletion);
        assert_eq!(
            m.failure.as_deref(),
            Some("InvalidConfiguration: no capacity")
        );
        let capi = Machine::from_json(
            MachineApiGroup::ClusterApi,
            serde_json::json!({"metadata": {"name": "m2"},
                "status": {"deprecated": {"v1beta1": {"failureMessage": "quota exceeded"}}}}),
            &mut Projector::default(),
        )
        .unwrap();
        assert_eq!(capi.failure.as_deref(), Some("quota exceeded"));
    }

    #[test]
    fn wrong_field_type_names_the_path() {
        let err = ScalableResource::from_json(
            MachineApiGroup::OpenShift,
            ScalableKind::MachineSet,
            serde_json::json!({"metadata": {"name": "x"}, "spec": {"replicas": "three"}}),
            &mut Projector::default(),
        )
        .unwrap_err();
        assert_eq!(err.path, "spec.replicas");
    }
}
