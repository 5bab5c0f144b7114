use serde_json::{Value, json};

use super::*;
use crate::model::meta::Projector;
use crate::model::storage::{PersistentVolume, PersistentVolumeClaim};

/// The projection of `json` read as a lean claim and as the whole generated claim.
fn claims(json: &Value) -> (PersistentVolumeClaim, PersistentVolumeClaim) {
    let bytes = serde_json::to_vec(json).unwrap();
    let lean: LeanClaim = serde_json::from_slice(&bytes).unwrap();
    let full: corev1::PersistentVolumeClaim = serde_json::from_slice(&bytes).unwrap();
    let project = |c| PersistentVolumeClaim::from_k8s(c, &mut Projector::default());
    (project(&lean.0), project(&full))
}

/// The projection of `json` read as a lean volume and as the whole generated volume.
fn volumes(
    json: &Value,
) -> (
    Result<PersistentVolume, String>,
    Result<PersistentVolume, String>,
) {
    let bytes = serde_json::to_vec(json).unwrap();
    let lean: LeanVolume = serde_json::from_slice(&bytes).unwrap();
    let full: corev1::PersistentVolume = serde_json::from_slice(&bytes).unwrap();
    let project =
        |v| PersistentVolume::from_k8s(v, &mut Projector::default()).map_err(|e| e.to_string());
    (project(&lean.0), project(&full))
}

/// A claim using every field the projection reads, and much that it does not.
fn rich_claim() -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data-db-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "4711",
            "labels": {"app": "db"},
            "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                "volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com"},
            "finalizers": ["kubernetes.io/pvc-protection"],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:volumeName": {}}}}]
        },
        "spec": {
            "accessModes": ["ReadWriteOnce", "ReadWriteOncePod"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "gp3",
            "volumeMode": "Filesystem",
            "volumeName": "pvc-0f1e",
            "selector": {"matchLabels": {"tier": "fast"}},
            "dataSource": {"kind": "VolumeSnapshot", "name": "snap", "apiGroup": "snapshot.storage.k8s.io"}
        },
        "status": {
            "phase": "Bound",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "conditions": [{"type": "Resizing", "status": "True"}]
        }
    })
}

/// A zonal CSI volume using every field the projection reads, and much that it does not.
fn rich_volume() -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {
            "name": "pvc-0f1e", "uid": "u-2", "resourceVersion": "4712",
            "labels": {"topology.kubernetes.io/zone": "us-east-1a__us-east-1b",
                "failure-domain.beta.kubernetes.io/region": "us-east-1", "team": "db"},
            "annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
            "finalizers": ["kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"],
            "managedFields": [{"manager": "csi-provisioner", "operation": "Update"}]
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "shop",
                "name": "data-db-0", "uid": "u-1"},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123",
                "fsType": "ext4", "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "x"}},
            "mountOptions": ["noatime"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1b"]}]}]}},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "gp3",
            "volumeMode": "Filesystem"
        },
        "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}
    })
}

#[test]
fn a_lean_claim_projects_as_the_whole_claim_does() {
    let (lean, full) = claims(&rich_claim());
    assert!(full.bound && full.read_write_once_pod && full.volume_name.is_some());
    assert_eq!(lean, full);
}

#[test]
fn a_lean_volume_projects_as_the_whole_volume_does() {
    let (lean, full) = volumes(&rich_volume());
    let full = full.unwrap();
    assert!(full.node_affinity.is_some() && full.csi_driver.is_some());
    assert_eq!(full.zone_labels.len(), 2);
    assert_eq!(lean.unwrap(), full);
}

/// Claims and volumes with fields missing, empty or set otherwise: the same both ways.
#[test]
fn every_variant_projects_the_same_lean_or_whole() {
    let mut claim_variants = vec![json!({"metadata": {"name": "bare", "namespace": "a"}})];
    for (path, value) in [
        ("spec", json!({})),
        ("spec", json!({"volumeName": "", "storageClassName": ""})),
        ("spec", json!({"accessModes": []})),
        ("status", json!({"phase": "Pending"})),
        ("status", json!({})),
    ] {
        let mut c = rich_claim();
        c[path] = value;
        claim_variants.push(c);
    }
    for c in &claim_variants {
        let (lean, full) = claims(c);
        assert_eq!(lean, full, "{c}");
    }
    let mut volume_variants = vec![json!({"metadata": {"name": "bare"}})];
    for (path, value) in [
        ("spec", json!({})),
        (
            "spec",
            json!({"hostPath": {"path": "/mnt"}, "storageClassName": "local"}),
        ),
        (
            "spec",
            json!({"local": {"path": "/mnt/disk"}, "nodeAffinity": {}}),
        ),
        ("status", json!({"phase": "Available"})),
        ("metadata", json!({"name": "unlabelled", "labels": {}})),
    ] {
        let mut v = rich_volume();
        v[path] = value;
        volume_variants.push(v);
    }
    for v in &volume_variants {
        let (lean, full) = volumes(v);
        assert_eq!(lean, full, "{v}");
    }
}

#[test]
fn a_volume_the_projection_refuses_is_refused_the_same_way() {
    let mut bad = rich_volume();
    bad["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] =
        json!("Near");
    let (lean, full) = volumes(&bad);
    let full = full.unwrap_err();
    assert!(full.contains("spec.nodeAffinity.required"), "{full}");
    assert_eq!(lean.unwrap_err(), full);
}

#[test]
fn what_the_projections_do_not_read_is_not_built() {
    let claim: LeanClaim = serde_json::from_value(rich_claim()).unwrap();
    let c = claim.0;
    assert!(c.metadata.managed_fields.is_none() && c.metadata.labels.is_none());
    assert!(c.metadata.annotations.is_none() && c.metadata.finalizers.is_none());
    assert_eq!(c.metadata.resource_version.as_deref(), Some("4711"));
    let spec = c.spec.unwrap();
    assert!(spec.resources.is_none() && spec.data_source.is_none() && spec.selector.is_none());
    assert!(c.status.unwrap().capacity.is_none());

    let volume: LeanVolume = serde_json::from_value(rich_volume()).unwrap();
    let v = volume.0;
    assert!(v.metadata.managed_fields.is_none() && v.metadata.annotations.is_none());
    assert_eq!(v.metadata.resource_version.as_deref(), Some("4712"));
    let spec = v.spec.unwrap();
    assert!(spec.claim_ref.is_none() && spec.capacity.is_none() && spec.mount_options.is_none());
    let csi = spec.csi.unwrap();
    assert_eq!(csi.driver, "ebs.csi.aws.com");
    assert!(csi.volume_handle.is_empty() && csi.volume_attributes.is_none());
}

#[test]
fn watch_events_of_lean_claims_and_volumes_decode_and_reach_their_urls() {
    let event = json!({"type": "MODIFIED", "object": rich_claim()});
    let decoded: kube::api::WatchEvent<LeanClaim> = serde_json::from_value(event).unwrap();
    let kube::api::WatchEvent::Modified(claim) = decoded else {
        panic!("not a modification");
    };
    assert_eq!(kube::ResourceExt::name_any(&claim), "data-db-0");
    let event = json!({"type": "DELETED", "object": rich_volume()});
    let decoded: kube::api::WatchEvent<LeanVolume> = serde_json::from_value(event).unwrap();
    assert!(matches!(decoded, kube::api::WatchEvent::Deleted(_)));
    assert_eq!(
        <LeanClaim as kube::Resource>::url_path(&(), Some("shop")),
        "/api/v1/namespaces/shop/persistentvolumeclaims"
    );
    assert_eq!(
        <LeanVolume as kube::Resource>::url_path(&(), None),
        "/api/v1/persistentvolumes"
    );
}
