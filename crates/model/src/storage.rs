//! What the scheduler's volume filters read: PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses and CSINodes, projected to the fields that decide where a pod's volumes
//! let it run (VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits).

use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::storage::v1 as storagev1;

use super::meta::{FieldError, ObjectKey, Projector, key_of};
use super::pod_spec::node_selector;
use super::scheduling::{NodeRequirement, NodeSelector, NodeSelectorTerm};

/// The zone and region labels the VolumeZone filter compares, GA and beta.
pub const ZONE_LABELS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// The annotation that marks a StorageClass as the default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// A PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistentVolumeClaim {
    pub key: ObjectKey,
    /// `spec.volumeName`: the volume it is bound (or being bound) to.
    pub volume_name: Option<Arc<str>>,
    /// `spec.storageClassName`; `Some("")` asks for no class (static binding only).
    pub storage_class: Option<Arc<str>>,
    /// `status.phase` is `Bound`.
    pub bound: bool,
    /// Among its access modes: `ReadWriteOncePod` (one pod in the whole cluster).
    pub read_write_once_pod: bool,
}

impl PersistentVolumeClaim {
    pub fn from_k8s(pvc: &corev1::PersistentVolumeClaim, p: &mut Projector) -> Self {
        let spec = pvc.spec.as_ref();
        PersistentVolumeClaim {
            key: key_of(&pvc.metadata, p),
            volume_name: spec
                .and_then(|s| s.volume_name.as_deref())
                .filter(|v| !v.is_empty())
                .map(|v| p.str(v)),
            storage_class: spec
                .and_then(|s| s.storage_class_name.as_deref())
                .map(|c| p.str(c)),
            bound: pvc
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase == "Bound"),
            read_write_once_pod: spec.is_some_and(|s| has_rwop(s.access_modes.as_deref())),
        }
    }
}

fn has_rwop(modes: Option<&[String]>) -> bool {
    modes.into_iter().flatten().any(|m| m == "ReadWriteOncePod")
}

/// A PersistentVolume: where it can be used from.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistentVolume {
    pub name: Arc<str>,
    /// `spec.nodeAffinity.required`: a node must match one of its terms.
    pub node_affinity: Option<NodeSelector>,
    /// The zone and region labels on the volume (`ZONE_LABELS`), each with its set of
    /// values (`a__b` lists several zones).
    pub zone_labels: Vec<(Arc<str>, Vec<Arc<str>>)>,
    /// `spec.csi.driver`, for the per-node attach limits.
    pub csi_driver: Option<Arc<str>>,
    /// `spec.storageClassName`.
    pub storage_class: Option<Arc<str>>,
    /// `status.phase` is `Available`: free for a claim to bind.
    pub available: bool,
    /// Why it could not be read, when it could not: the pods using it are held, no other.
    pub unreadable: Option<Arc<str>>,
}

impl PersistentVolume {
    pub fn from_k8s(pv: &corev1::PersistentVolume, p: &mut Projector) -> Result<Self, FieldError> {
        let spec = pv.spec.as_ref();
        let node_affinity = match spec
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
        {
            Some(sel) => Some(node_selector(sel, "spec.nodeAffinity.required", p)?),
            None => None,
        };
        let labels = pv.metadata.labels.as_ref();
        let zone_labels = ZONE_LABELS
            .iter()
            .filter_map(|k| Some((*k, labels?.get(*k)?)))
            .map(|(k, v)| (p.str(k), v.split("__").map(|z| p.str(z.trim())).collect()))
            .collect();
        Ok(PersistentVolume {
            name: p.opt_str(pv.metadata.name.as_ref()),
            node_affinity,
            zone_labels,
            csi_driver: spec.and_then(|s| s.csi.as_ref()).map(|c| p.str(&c.driver)),
            storage_class: spec
                .and_then(|s| s.storage_class_name.as_deref())
                .map(|c| p.str(c)),
            available: pv
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase == "Available"),
            unreadable: None,
        })
    }

    /// A volume whose fields could not be read (`why`): kept by name, so that a claim bound
    /// to it is held with the reason instead of looking bound to nothing.
    pub fn unreadable(pv: &corev1::PersistentVolume, why: &str, p: &mut Projector) -> Self {
        PersistentVolume {
            name: p.opt_str(pv.metadata.name.as_ref()),
            node_affinity: None,
            zone_labels: Vec::new(),
            csi_driver: None,
            storage_class: None,
            available: false,
            unreadable: Some(why.into()),
        }
    }
}

/// A StorageClass: how and where its volumes are provisioned.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageClass {
    pub name: Arc<str>,
    pub provisioner: Arc<str>,
    /// `volumeBindingMode: WaitForFirstConsumer`: the volume is made where the pod goes.
    pub wait_for_first_consumer: bool,
    /// `allowedTopologies`, as a node selector (a node must match one term); `None`: anywhere.
    pub allowed_topologies: Option<NodeSelector>,
    pub is_default: bool,
}

impl StorageClass {
    pub fn from_k8s(sc: &storagev1::StorageClass, p: &mut Projector) -> Self {
        let terms: Vec<NodeSelectorTerm> = sc
            .allowed_topologies
            .iter()
            .flatten()
            .map(|t| NodeSelectorTerm {
                match_labels: t
                    .match_label_expressions
                    .iter()
                    .flatten()
                    .map(|e| {
                        NodeRequirement::In(
                            p.str(&e.key),
                            e.values.iter().map(|v| p.str(v)).collect(),
                        )
                    })
                    .collect(),
                match_name: Vec::new(),
            })
            .collect();
        StorageClass {
            name: p.opt_str(sc.metadata.name.as_ref()),
            provisioner: p.str(&sc.provisioner),
            wait_for_first_consumer: sc.volume_binding_mode.as_deref()
                == Some("WaitForFirstConsumer"),
            allowed_topologies: (!terms.is_empty()).then_some(NodeSelector { terms }),
            is_default: sc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true"),
        }
    }

    /// Volumes of this class are only ever bound to PersistentVolumes made beforehand.
    pub fn static_only(&self) -> bool {
        &*self.provisioner == "kubernetes.io/no-provisioner"
    }
}

/// One CSI driver on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsiNodeDriver {
    pub name: Arc<str>,
    /// `allocatable.count`: how many of its volumes the node may attach; `None`: no limit.
    pub attach_limit: Option<i64>,
    /// `topologyKeys`: the node labels the driver reports its topology with.
    pub topology_keys: Vec<Arc<str>>,
}

/// A CSINode: the CSI drivers running on the node of the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsiNode {
    pub name: Arc<str>,
    pub drivers: Vec<CsiNodeDriver>,
}

impl CsiNode {
    pub fn from_k8s(n: &storagev1::CSINode, p: &mut Projector) -> Self {
        CsiNode {
            name: p.opt_str(n.metadata.name.as_ref()),
            drivers: n
                .spec
                .drivers
                .iter()
                .map(|d| CsiNodeDriver {
                    name: p.str(&d.name),
                    attach_limit: d.allocatable.as_ref().and_then(|a| a.count).map(i64::from),
                    topology_keys: d.topology_keys.iter().flatten().map(|k| p.str(k)).collect(),
                })
                .collect(),
        }
    }
}

/// The storage objects of a cluster, as the snapshot carries them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Storage {
    /// Whether claims, volumes and classes were read at all: a dump without them, or a
    /// cluster whose storage the hub may not list, leaves volumes unsimulated.
    pub listed: bool,
    pub claims: Vec<PersistentVolumeClaim>,
    pub volumes: Vec<PersistentVolume>,
    pub classes: Vec<StorageClass>,
    pub csi_nodes: Vec<CsiNode>,
}

impl Storage {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.volumes.is_empty()
            && self.classes.is_empty()
            && self.csi_nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::Labels;

    fn project<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_zonal_volume_keeps_its_affinity_and_zone_labels() {
        let pv: corev1::PersistentVolume = project(serde_json::json!({
            "metadata": {"name": "pv-1", "labels": {"topology.kubernetes.io/zone": "us-east-1a__us-east-1b"}},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                "storageClassName": "gp3",
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1b"]}]}]}}},
            "status": {"phase": "Bound"}
        }));
        let mut p = Projector::default();
        let v = PersistentVolume::from_k8s(&pv, &mut p).unwrap();
        assert_eq!(v.csi_driver.as_deref(), Some("ebs.csi.aws.com"));
        assert!(!v.available);
        let zones: Vec<&str> = v.zone_labels[0].1.iter().map(|z| &**z).collect();
        assert_eq!(zones, ["us-east-1a", "us-east-1b"]);
        let affinity = v.node_affinity.unwrap();
        assert!(!affinity.matches(&Labels::default(), "n"));
        let zone_b = Labels::from_strs([("topology.ebs.csi.aws.com/zone", "us-east-1b")]);
        assert!(affinity.matches(&zone_b, "n"));
    }

    #[test]
    fn a_bad_volume_affinity_names_its_field() {
        let pv: corev1::PersistentVolume = project(serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "spec.nodeName", "operator": "In", "values": ["x"]}]}]}}}
        }));
        let err = PersistentVolume::from_k8s(&pv, &mut Projector::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0]"),
            "{err}"
        );
    }

    #[test]
    fn classes_claims_and_csi_nodes() {
        let mut p = Projector::default();
        let sc: storagev1::StorageClass = project(serde_json::json!({
            "metadata": {"name": "gp3", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["us-east-1a"]}]}]
        }));
        let sc = StorageClass::from_k8s(&sc, &mut p);
        assert!(sc.wait_for_first_consumer && sc.is_default && !sc.static_only());
        let zone_a = Labels::from_strs([("topology.kubernetes.io/zone", "us-east-1a")]);
        assert!(sc.allowed_topologies.unwrap().matches(&zone_a, "n"));
        let pvc: corev1::PersistentVolumeClaim = project(serde_json::json!({
            "metadata": {"name": "data-0", "namespace": "db"},
            "spec": {"accessModes": ["ReadWriteOncePod"], "storageClassName": "gp3", "volumeName": ""},
            "status": {"phase": "Pending"}
        }));
        let pvc = PersistentVolumeClaim::from_k8s(&pvc, &mut p);
        assert!(pvc.read_write_once_pod && !pvc.bound && pvc.volume_name.is_none());
        let csi: storagev1::CSINode = project(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1",
                "allocatable": {"count": 25}, "topologyKeys": ["topology.ebs.csi.aws.com/zone"]}]}
        }));
        let csi = CsiNode::from_k8s(&csi, &mut p);
        assert_eq!(csi.drivers[0].attach_limit, Some(25));
        assert_eq!(
            &*csi.drivers[0].topology_keys[0],
            "topology.ebs.csi.aws.com/zone"
        );
    }
}
