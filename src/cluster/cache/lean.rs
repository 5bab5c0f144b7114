//! Pods as the cache reads them off lists and watches: only the fields the projection
//! (`model::pod`, `model::pod_spec`) reads are built. A real pod's JSON is mostly what no
//! autoscaler reads (managed fields, environment, probes, images, container statuses,
//! projected service-account volumes); decoding it into the full generated type allocates
//! every string of it for the projection to drop at once. Skipped fields cost only their
//! parsing. The subtrees the projection reads (affinity, tolerations, spread constraints,
//! resources, ports) keep their generated types, and with them their checks.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use serde::Deserialize;

/// A Pod holding only what the projection reads; the rest is left at its default.
#[derive(Clone, Debug, Default)]
pub struct LeanPod(pub corev1::Pod);

impl kube::Resource for LeanPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        corev1::Pod::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        corev1::Pod::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        corev1::Pod::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        <corev1::Pod as kube::Resource>::plural(dt)
    }
    fn meta(&self) -> &metav1::ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut metav1::ObjectMeta {
        &mut self.0.metadata
    }
}

impl<'de> Deserialize<'de> for LeanPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        WirePod::deserialize(d).map(|w| LeanPod(w.into()))
    }
}

#[derive(Deserialize)]
struct WirePod {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<WireSpec>,
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    // The watch resumes from the last version seen.
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<metav1::OwnerReference>>,
    creation_timestamp: Option<metav1::Time>,
    deletion_timestamp: Option<metav1::Time>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    containers: Option<Vec<WireContainer>>,
    init_containers: Option<Vec<WireContainer>>,
    overhead: Option<BTreeMap<String, Quantity>>,
    node_name: Option<String>,
    node_selector: Option<BTreeMap<String, String>>,
    affinity: Option<corev1::Affinity>,
    tolerations: Option<Vec<corev1::Toleration>>,
    topology_spread_constraints: Option<Vec<corev1::TopologySpreadConstraint>>,
    volumes: Option<Vec<WireVolume>>,
    resource_claims: Option<Vec<corev1::PodResourceClaim>>,
    priority: Option<i32>,
    restart_policy: Option<String>,
    termination_grace_period_seconds: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainer {
    #[serde(default)]
    name: String,
    resources: Option<corev1::ResourceRequirements>,
    ports: Option<Vec<corev1::ContainerPort>>,
    restart_policy: Option<String>,
}

/// A volume's name and which of the sources the projection tells apart it uses.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolume {
    #[serde(default)]
    name: String,
    empty_dir: Option<corev1::EmptyDirVolumeSource>,
    host_path: Option<corev1::HostPathVolumeSource>,
    persistent_volume_claim: Option<corev1::PersistentVolumeClaimVolumeSource>,
    ephemeral: Option<corev1::EphemeralVolumeSource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    conditions: Option<Vec<corev1::PodCondition>>,
    nominated_node_name: Option<String>,
    resource_claim_statuses: Option<Vec<corev1::PodResourceClaimStatus>>,
}

impl From<WirePod> for corev1::Pod {
    fn from(w: WirePod) -> Self {
        let m = w.metadata;
        corev1::Pod {
            metadata: metav1::ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                labels: m.labels,
                annotations: m.annotations,
                owner_references: m.owner_references,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                ..Default::default()
            },
            spec: w.spec.map(WireSpec::into_spec),
            status: w.status.map(|s| corev1::PodStatus {
                phase: s.phase,
                conditions: s.conditions,
                nominated_node_name: s.nominated_node_name,
                resource_claim_statuses: s.resource_claim_statuses,
                ..Default::default()
            }),
        }
    }
}

impl WireSpec {
    fn into_spec(self) -> corev1::PodSpec {
        let containers = |list: Option<Vec<WireContainer>>| {
            list.map(|l| l.into_iter().map(WireContainer::into_container).collect())
        };
        corev1::PodSpec {
            containers: containers(self.containers).unwrap_or_default(),
            init_containers: containers(self.init_containers),
            overhead: self.overhead,
            node_name: self.node_name,
            node_selector: self.node_selector,
            affinity: self.affinity,
            tolerations: self.tolerations,
            topology_spread_constraints: self.topology_spread_constraints,
            volumes: self
                .volumes
                .map(|v| v.into_iter().map(WireVolume::into_volume).collect()),
            resource_claims: self.resource_claims,
            priority: self.priority,
            restart_policy: self.restart_policy,
            termination_grace_period_seconds: self.termination_grace_period_seconds,
            ..Default::default()
        }
    }
}

impl WireContainer {
    fn into_container(self) -> corev1::Container {
        corev1::Container {
            name: self.name,
            resources: self.resources,
            ports: self.ports,
            restart_policy: self.restart_policy,
            ..Default::default()
        }
    }
}

impl WireVolume {
    fn into_volume(self) -> corev1::Volume {
        corev1::Volume {
            name: self.name,
            empty_dir: self.empty_dir,
            host_path: self.host_path,
            persistent_volume_claim: self.persistent_volume_claim,
            ephemeral: self.ephemeral,
            ..Default::default()
        }
    }
}

#[cfg(test)]
#[path = "lean_tests.rs"]
mod tests;
