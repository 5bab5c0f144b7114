//! PersistentVolumeClaims and PersistentVolumes as the cache reads them off lists and
//! watches: only the fields their projection (`model::storage`) reads are built. A cluster
//! has a claim per stateful pod and a volume per claim, each carrying what no autoscaler
//! reads (managed fields, annotations of the provisioner, capacity, the claim reference, the
//! volume source's handle and attributes, mount options). Skipped fields cost only their
//! parsing. The subtree the projection checks (a volume's node affinity) keeps its
//! generated type, and with it its checks.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use serde::Deserialize;

/// `kube::Resource` for a lean wrapper of a generated type: the same resource, so lists and
/// watches reach the same URL; only decoding differs.
macro_rules! lean_resource {
    ($lean:ident, $full:ty) => {
        impl kube::Resource for $lean {
            type DynamicType = ();
            type Scope = <$full as kube::Resource>::Scope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::version(dt)
            }
            fn plural(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &metav1::ObjectMeta {
                &self.0.metadata
            }
            fn meta_mut(&mut self) -> &mut metav1::ObjectMeta {
                &mut self.0.metadata
            }
        }
    };
}

/// A PersistentVolumeClaim holding only what the projection reads.
#[derive(Clone, Debug, Default)]
pub struct LeanClaim(pub corev1::PersistentVolumeClaim);

/// A PersistentVolume holding only what the projection reads.
#[derive(Clone, Debug, Default)]
pub struct LeanVolume(pub corev1::PersistentVolume);

lean_resource!(LeanClaim, corev1::PersistentVolumeClaim);
lean_resource!(LeanVolume, corev1::PersistentVolume);

/// A namespaced object's key and version: all the metadata most lean kinds keep.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireKey {
    name: Option<String>,
    namespace: Option<String>,
    // The watch resumes from the last version seen.
    resource_version: Option<String>,
}

impl WireKey {
    pub(super) fn into_meta(self) -> metav1::ObjectMeta {
        metav1::ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            resource_version: self.resource_version,
            ..Default::default()
        }
    }
}

/// A volume's name and its labels (the zone and region labels are read).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireVolumeMeta {
    name: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct WirePhase {
    phase: Option<String>,
}

#[derive(Deserialize)]
struct WireClaim {
    #[serde(default)]
    metadata: WireKey,
    spec: Option<WireClaimSpec>,
    status: Option<WirePhase>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaimSpec {
    volume_name: Option<String>,
    storage_class_name: Option<String>,
    access_modes: Option<Vec<String>>,
}

impl<'de> Deserialize<'de> for LeanClaim {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireClaim::deserialize(d)?;
        Ok(LeanClaim(corev1::PersistentVolumeClaim {
            metadata: w.metadata.into_meta(),
            spec: w.spec.map(|s| corev1::PersistentVolumeClaimSpec {
                volume_name: s.volume_name,
                storage_class_name: s.storage_class_name,
                access_modes: s.access_modes,
                ..Default::default()
            }),
            status: w.status.map(|s| corev1::PersistentVolumeClaimStatus {
                phase: s.phase,
                ..Default::default()
            }),
        }))
    }
}

#[derive(Deserialize)]
struct WireVolume {
    #[serde(default)]
    metadata: WireVolumeMeta,
    spec: Option<WireVolumeSpec>,
    status: Option<WirePhase>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolumeSpec {
    node_affinity: Option<corev1::VolumeNodeAffinity>,
    csi: Option<WireCsi>,
    storage_class_name: Option<String>,
}

/// Of a CSI volume source, only its driver (the attach limits are per driver).
#[derive(Deserialize)]
struct WireCsi {
    #[serde(default)]
    driver: String,
}

impl<'de> Deserialize<'de> for LeanVolume {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireVolume::deserialize(d)?;
        let m = w.metadata;
        Ok(LeanVolume(corev1::PersistentVolume {
            metadata: metav1::ObjectMeta {
                name: m.name,
                resource_version: m.resource_version,
                labels: m.labels,
                ..Default::default()
            },
            spec: w.spec.map(|s| corev1::PersistentVolumeSpec {
                node_affinity: s.node_affinity,
                csi: s.csi.map(|c| corev1::CSIPersistentVolumeSource {
                    driver: c.driver,
                    ..Default::default()
                }),
                storage_class_name: s.storage_class_name,
                ..Default::default()
            }),
            status: w.status.map(|s| corev1::PersistentVolumeStatus {
                phase: s.phase,
                ..Default::default()
            }),
        }))
    }
}

/// A PodTemplate holding only what the projection reads (its key, the template's labels and
/// spec): the managed fields and annotations of the object and of its template are skipped.
/// Kept here beside the storage kinds for the shared `lean_resource!`.
#[derive(Clone, Debug, Default)]
pub struct LeanPodTemplate(pub corev1::PodTemplate);

lean_resource!(LeanPodTemplate, corev1::PodTemplate);

#[derive(Deserialize)]
struct WirePodTemplate {
    #[serde(default)]
    metadata: WireKey,
    template: Option<WireTemplateSpec>,
}

#[derive(Deserialize)]
struct WireTemplateSpec {
    metadata: Option<WireTemplateMeta>,
    spec: Option<corev1::PodSpec>,
}

#[derive(Deserialize)]
struct WireTemplateMeta {
    labels: Option<BTreeMap<String, String>>,
}

impl<'de> Deserialize<'de> for LeanPodTemplate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WirePodTemplate::deserialize(d)?;
        Ok(LeanPodTemplate(corev1::PodTemplate {
            metadata: w.metadata.into_meta(),
            template: w.template.map(|t| corev1::PodTemplateSpec {
                metadata: t.metadata.map(|m| metav1::ObjectMeta {
                    labels: m.labels,
                    ..Default::default()
                }),
                spec: t.spec,
            }),
        }))
    }
}

#[cfg(test)]
#[path = "lean_storage_tests.rs"]
mod tests;
